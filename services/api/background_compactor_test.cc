// Compaction off the call path: the idle sweeper and idle compaction (the
// background compactions a view asks for are in view_builder_test.cc).

#include "services/api/service_test_fixture.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/clock.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

// Storage whose idle claims throw, as a driver bug or a malformed row might.
class ThrowingIdleStorage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext&, absl::Time,
                                                          int) override {
    claims_.fetch_add(1);
    throw std::runtime_error("malformed row");
  }
  int claims() const { return claims_.load(); }

 private:
  std::atomic<int> claims_{0};
};

// What a sweep of idle conversations throws ends that sweep, not the
// process: the sweeper runs again.
TEST_F(ConversationServiceTest, AnIdleSweepThatThrowsDoesNotEndTheProcess) {
  ThrowingIdleStorage storage(storage_.get());
  ConversationService::Options options;
  options.idle_scan = absl::Milliseconds(1);
  ConversationService service(options, models_.get(), &storage, summarizer_.get());
  for (int i = 0; i < 5000 && storage.claims() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GE(storage.claims(), 3);
}

// Storage that says when an idle due time was written (off the call path).
class IdleDueWatch : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override {
    absl::Status s = ForwardingStorage::SetIdleDue(ctx, key, due);
    absl::MutexLock lock(&mu_);
    ++writes_;
    return s;
  }
  // Waits (really) until `n` writes happened.
  void AwaitWrites(int n) {
    absl::MutexLock lock(&mu_);
    target_ = n;
    mu_.AwaitWithTimeout(absl::Condition(this, &IdleDueWatch::Reached), absl::Seconds(10));
  }

 private:
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return writes_ >= target_; }

  absl::Mutex mu_;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  int target_ ABSL_GUARDED_BY(mu_) = 0;
};

// A conversation left alone above its idle band for longer than its prompt
// cache lives is compacted without a call, once; a call meanwhile puts it
// off. Driven by an injected clock.
TEST(IdleCompactionTest, AColdConversationAboveItsBandIsCompactedOnceWithoutACall) {
  FakeClock clock;
  auto models = Registry(kProfiles);
  auto base = NewMemoryStorage(&clock);
  IdleDueWatch storage(base.get());
  auto summarizer = NewExtractiveSummarizer();
  ConversationService::Options options;
  options.compaction.clock = &clock;
  options.background_compaction = false;
  options.idle_scan = absl::ZeroDuration();  // Swept by hand below.
  ConversationService service(options, models.get(), &storage, summarizer.get());
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("cold");
  create.set_model("small-model");
  create.mutable_profile_overrides()->set_prompt_cache_ttl_s(60);
  ASSERT_TRUE(service.CreateConversation(ctx, create).ok());
  // Into the soft band (70% of 4,096) and no further.
  v1::BuildContextResponse view;
  for (int turn = 0; view.tokens().total() < 2900; ++turn) {
    v1::AppendTurnRequest append;
    append.set_conversation_id("cold");
    v1::NewItem item;
    item.set_role(turn % 2 ? v1::ROLE_ASSISTANT : v1::ROLE_USER);
    item.set_kind(v1::ITEM_KIND_MESSAGE);
    item.set_content(absl::StrCat("Turn ", turn, " about host web-", turn,
                                  ".internal and its rollout; ", std::string(150, 'z')));
    *append.add_items() = item;
    ASSERT_TRUE(service.AppendTurn(ctx, append).ok());
    v1::BuildContextRequest build;
    build.set_conversation_id("cold");
    auto built = service.BuildContext(ctx, build);
    ASSERT_TRUE(built.ok()) << built.status();
    view = *built;
  }
  ASSERT_LT(view.tokens().total(), 3277) << "past the soft band";
  storage.AwaitWrites(1);
  clock.Advance(absl::Seconds(61));
  EXPECT_EQ(service.SweepIdle(), 0);  // Due a quarter lifetime late.
  // A call: the cache is warm again, and the due time moves on.
  v1::BuildContextRequest build;
  build.set_conversation_id("cold");
  ASSERT_TRUE(service.BuildContext(ctx, build).ok());
  storage.AwaitWrites(2);
  clock.Advance(absl::Seconds(30));
  EXPECT_EQ(service.SweepIdle(), 0);
  clock.Advance(absl::Seconds(50));
  EXPECT_EQ(service.SweepIdle(), 1);
  EXPECT_EQ(service.SweepIdle(), 0);  // Once.
  auto after = service.BuildContext(ctx, build);
  ASSERT_TRUE(after.ok());
  EXPECT_LT(after->tokens().total(), view.tokens().total());
  EXPECT_GT(after->compaction_version(), view.compaction_version());
  v1::ListCompactionEventsRequest events;
  events.set_conversation_id("cold");
  auto trail = service.ListCompactionEvents(ctx, events);
  ASSERT_TRUE(trail.ok());
  int idle = 0;
  for (const auto& e : trail->events()) {
    if (e.event() != "idle") continue;
    ++idle;
    // The band by name, as threshold_hit rows give it.
    EXPECT_NE(e.detail_json().find("\"band\":\"soft\""), std::string::npos) << e.detail_json();
  }
  EXPECT_EQ(idle, 1);
}

}  // namespace
}  // namespace convstate
