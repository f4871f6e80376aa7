// Views under pressure: the bands, background and blocking compaction,
// recounts, provider usage and overflow.

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

// A view at the hard band is compacted before it is served, under the soft
// band, and says which band it is in; with hard_band_policy
// SERVE_WHILE_BACKGROUND it is answered as it stands and the summary is
// written in the background, ahead of the call that would need it.
TEST_F(ConversationServiceTest, HardBandIsCompactedBeforeItIsServed) {
  for (const bool serve : {false, true}) {
    SCOPED_TRACE(serve ? "serve while background" : "block");
    const std::string id = serve ? "serve" : "block";
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
    if (serve) {
      create.mutable_profile_overrides()->set_hard_band_policy(
          v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND);
    }
    ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
    for (int i = 0; i < 7; ++i) {
      v1::AppendTurnRequest req = Append(id, absl::StrCat(i, " ", std::string(400, 'q')));
      *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat(i, " ", std::string(450, 'a')));
      ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    }
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    auto first = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(first.ok()) << first.status();
    if (!serve) {
      EXPECT_EQ(first->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
      EXPECT_LT(first->tokens().total(), 2867) << "not under the soft band (0.70 of 4096)";
      EXPECT_EQ(first->band(), v1::BAND_NORMAL);
      EXPECT_EQ(first->band_reason(), "");
      continue;
    }
    EXPECT_EQ(first->context_status(), v1::CONTEXT_STATUS_FULL);  // Answered as is...
    EXPECT_GE(first->tokens().total(), 3277);                      // ...in the hard band
    EXPECT_LT(first->tokens().total(), 3891);                      // (0.80-0.95 of 4096).
    EXPECT_EQ(first->band(), v1::BAND_HARD);
    EXPECT_TRUE(absl::StrContains(first->band_reason(), "SERVE_WHILE_BACKGROUND"))
        << first->band_reason();
    // ...and the compaction happens off the request path.
    bool done = false;
    for (int i = 0; i < 500 && !done; ++i) {
      done = !AllSummaries(*storage_, ctx_, {"default", id}, false)->empty();
      if (!done) absl::SleepFor(absl::Milliseconds(10));
    }
    if (!done) {
      const auto events = AllCompactionEvents(*storage_, ctx_, {"default", id});
      for (const auto& e : *events) ADD_FAILURE() << e.event << " " << e.detail;
    }
    ASSERT_TRUE(done) << "no background compaction within 5 s";
    auto second = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
    EXPECT_LT(second->tokens().total(), 3277);
    EXPECT_EQ(second->band_reason(), "");
  }
}

// A view that the parts no compaction removes keep above the hard band is
// served, and says why.
TEST_F(ConversationServiceTest, AViewCompactionCannotBringUnderTheHardBandSaysWhy) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("heavy");
  create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
  create.set_pinned_instructions(std::string(5600, 'p'));  // 2,800 tokens, never removed.
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("heavy", "What now?")).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("heavy");
  *build.add_pending_input() = Message(v1::ROLE_USER, std::string(300, 'n'));
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_GE(view->tokens().total(), 3277);
  EXPECT_EQ(view->band(), v1::BAND_HARD);
  EXPECT_TRUE(absl::StrContains(view->band_reason(), "compaction cannot bring the view under"))
      << view->band_reason();
}

// A view in the hard band still fits: under hard_band_policy
// SERVE_WHILE_BACKGROUND (and background compaction on), the call is
// answered as it stands even while another replica holds the
// conversation's compaction lease, instead of waiting to compact in the
// foreground; under BLOCK, or with the background off, the call waits for
// the lease (here, past its deadline).
TEST_F(ConversationServiceTest, AViewThatFitsWaitsForNoCompaction) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("busy");
  create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
  create.mutable_profile_overrides()->set_hard_band_policy(
      v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  const ConversationKey key{"default", "busy"};
  auto held = storage_->TryAcquireCompactionLease(ctx_, key, "another-replica", absl::Minutes(5));
  ASSERT_TRUE(held.ok() && held->has_value());
  v1::BuildContextRequest build;
  build.set_conversation_id("busy");
  v1::BuildContextResponse view;
  // Turns with tool output (which the hard band prunes) until the view is
  // in the hard band (0.80 to 0.95 of 4096).
  for (int turn = 0; view.tokens().total() < 3277; ++turn) {
    ASSERT_LT(turn, 40);
    v1::AppendTurnRequest req = Append("busy", absl::StrCat("Check host ", turn, " please."));
    v1::NewItem call = Message(v1::ROLE_ASSISTANT, absl::StrCat(R"({"host": )", turn, "}"));
    call.set_kind(v1::ITEM_KIND_TOOL_CALL);
    call.set_tool_name("probe");
    call.set_tool_call_id(absl::StrCat("call-", turn));
    *req.add_items() = call;
    v1::NewItem result = Message(v1::ROLE_TOOL, absl::StrCat(turn, " ", std::string(380, 'r')));
    result.set_kind(v1::ITEM_KIND_TOOL_RESULT);
    result.set_tool_name("probe");
    result.set_tool_call_id(absl::StrCat("call-", turn));
    *req.add_items() = result;
    *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat("Host ", turn, " is fine."));
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    CallContext bounded;
    bounded.deadline = absl::Now() + absl::Seconds(2);
    auto built = service_.BuildContext(bounded, build);
    ASSERT_TRUE(built.ok()) << built.status();
    view = *built;
  }
  EXPECT_LT(view.tokens().total(), 3891) << "past the hard band";
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
  EXPECT_EQ(view.band(), v1::BAND_HARD);
  const auto events = AllCompactionEvents(*storage_, ctx_, key);
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) EXPECT_NE(e.event, "threshold_hit") << e.detail;

  ConversationService::Options waits;
  waits.background_compaction = false;
  ConversationService foreground(waits, models_.get(), storage_.get(), summarizer_.get());
  CallContext bounded;
  bounded.deadline = absl::Now() + absl::Seconds(1);
  EXPECT_EQ(foreground.BuildContext(bounded, build).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  v1::UpdateConversationRequest block;
  block.set_conversation_id("busy");
  block.mutable_profile_overrides()->set_hard_band_policy(v1::HARD_BAND_POLICY_BLOCK);
  ASSERT_TRUE(service_.UpdateConversation(ctx_, block).ok());
  bounded.deadline = absl::Now() + absl::Seconds(1);
  EXPECT_EQ(service_.BuildContext(bounded, build).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}
// Storage that notes, at each compaction's commit, how far the items read
// so far reach (a replica's copy of the history for recall reads them
// with ListItems) and how far the commit moves the boundary.
class CommitReadWatch : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                       int64_t after, const PageLimit& limit) override {
    absl::StatusOr<Page<Item>> page = ForwardingStorage::ListItems(ctx, key, after, limit);
    if (page.ok() && !page->rows.empty()) {
      absl::MutexLock lock(&mu_);
      read_ = std::max(read_, page->rows.back().sequence);
    }
    return page;
  }
  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                    const CompactionCommit& c) override {
    {
      absl::MutexLock lock(&mu_);
      const int64_t through = c.chunk.has_value() ? c.chunk->through_sequence : 0;
      commits_.push_back({read_, std::max(c.new_prune_boundary, through)});
    }
    return ForwardingStorage::CommitCompaction(ctx, c);
  }
  int64_t read() {
    absl::MutexLock lock(&mu_);
    return read_;
  }
  // For each commit: the items read before it, and its boundary.
  std::vector<std::pair<int64_t, int64_t>> commits() {
    absl::MutexLock lock(&mu_);
    return commits_;
  }

 private:
  absl::Mutex mu_;
  int64_t read_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<int64_t, int64_t>> commits_ ABSL_GUARDED_BY(mu_);
};

// The background's compaction brings this replica's copy of the history up
// to date before it moves the boundary: a call that sees the new boundary
// searches up to it without reading what it passed.
TEST_F(ConversationServiceTest, TheBackgroundBringsTheHistoryCopyUpBeforeItCompacts) {
  CommitReadWatch storage(storage_.get());
  ConversationService service(ConversationService::Options{}, models_.get(), &storage,
                              summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("ahead");
  create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("ahead");
  // Turns, each followed by a plain view (no recall), until the background
  // compacted twice; each time, until what it made is read.
  for (int turn = 0; storage.commits().size() < 2; ++turn) {
    ASSERT_LT(turn, 200);
    v1::AppendTurnRequest req = Append("ahead", absl::StrCat("Turn ", turn, std::string(150, 'u')));
    *req.add_items() =
        Message(v1::ROLE_ASSISTANT, absl::StrCat("Reply ", turn, std::string(150, 'a')));
    const size_t commits = storage.commits().size();
    ASSERT_TRUE(service.AppendTurn(ctx_, req).ok());
    auto view = service.BuildContext(ctx_, build);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_LT(view->band(), v1::BAND_HARD) << "the call would compact itself";
    if (view->band() < v1::BAND_SOFT) continue;
    // A view asks for a background compaction only when none of the
    // conversation's is still finishing: the same view, asked for again
    // every 100 ms, asks again. (Up to 30 s: a sanitizer's build on a
    // loaded machine has taken more than 5.)
    for (int i = 0; i < 15000 && storage.commits().size() == commits; ++i) {
      if (i % 50 == 49) {
        ASSERT_TRUE(service.BuildContext(ctx_, build).ok());
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    ASSERT_GT(storage.commits().size(), commits) << "no background compaction within 30 s";
    // The copy a compaction makes, read in full.
    const int64_t last = 2 * (turn + 1);
    for (int i = 0; i < 15000 && storage.read() < last; ++i) absl::SleepFor(absl::Milliseconds(2));
    ASSERT_GE(storage.read(), last);
  }
  const auto commits = storage.commits();
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_GE(commits[1].first, commits[1].second)
      << "the copy read through " << commits[1].first << " when the boundary moved to "
      << commits[1].second;
}


// Storage that counts the recounts it is asked to keep.
class CountingRecountStorage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::Status SaveTokenCounts(const CallContext& c, const ConversationKey& k,
                               const TokenRecount& r) override {
    ++saved_;
    return ForwardingStorage::SaveTokenCounts(c, k, r);
  }
  int saved() const { return saved_.load(); }

 private:
  std::atomic<int> saved_{0};
};

// InspectContext is a reader's call: after a model change it counts the
// view with the new model for its answer and stores nothing; the next
// BuildContext keeps the counts.
TEST_F(ConversationServiceTest, InspectContextWritesNoRecount) {
  CountingRecountStorage storage(storage_.get());
  ConversationService service(ConversationService::Options{}, models_.get(), &storage,
                              summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("recount");
  create.set_model("small-1");  // 2 bytes per token.
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("recount", std::string(400, 'w'))).ok());
  v1::UpdateConversationRequest update;
  update.set_conversation_id("recount");
  update.set_model("gpt-4o");  // The default profile: 4 bytes per token.
  ASSERT_TRUE(service.UpdateConversation(ctx_, update).ok());
  v1::InspectContextRequest inspect;
  inspect.set_conversation_id("recount");
  auto inspected = service.InspectContext(ctx_, inspect);
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  EXPECT_EQ(inspected->tokens().live(), 104);  // 400 / 4 + 4 per message: the new model's.
  EXPECT_EQ(storage.saved(), 0);
  v1::BuildContextRequest build;
  build.set_conversation_id("recount");
  ASSERT_TRUE(service.BuildContext(ctx_, build).ok());
  EXPECT_EQ(storage.saved(), 1);
}

TEST_F(ConversationServiceTest, UnknownModelWithoutDefaultProfileIsRefused) {
  auto strict = Registry(R"pb(profiles { name: "only" })pb");
  ConversationService service(ConversationService::Options{}, strict.get(), storage_.get(),
                              summarizer_.get());
  v1::CreateConversationRequest req;
  req.set_model("mystery-model");
  auto r = service.CreateConversation(ctx_, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "model: no model profile matches 'mystery-model' and no default profile is "
            "configured");
  req.set_model("only");
  EXPECT_TRUE(service.CreateConversation(ctx_, req).ok());
}

// A provider that counts 30% more tokens than the approximate estimate: the
// gateway reports its usage with every turn, and the conversation's counts
// converge on the provider's.
TEST_F(ConversationServiceTest, ReportedUsageCorrectsApproximateCounts) {
  Create("chat", "You are a helpful assistant that answers in detail.");
  constexpr double kProviderRatio = 1.3;
  std::vector<double> errors;
  for (int turn = 0; turn < 12; ++turn) {
    const std::string question = absl::StrCat("Question ", turn, ": ", std::string(400, 'q'));
    // What convstate would count, uncorrected, for the prompt the provider sees.
    v1::BuildContextRequest build;
    build.set_conversation_id("chat");
    *build.add_pending_input() = Message(v1::ROLE_USER, question);
    auto view = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(view.ok()) << view.status();

    // The raw prompt: the view with this conversation's correction undone.
    // Computed independently: system + items + the question, at 4 bytes per
    // token plus 4 per message.
    int64_t raw = 0;
    for (const auto& e : view->entries()) raw += 4 + (e.content().size() + 3) / 4;
    const int64_t provider_count = static_cast<int64_t>(kProviderRatio * raw + 0.5);
    const double error =
        std::abs(static_cast<double>(view->tokens().total() - view->tokens().output_reserve()) /
                     provider_count -
                 1.0);
    errors.push_back(error);

    v1::AppendTurnRequest append;
    append.set_conversation_id("chat");
    *append.add_items() = Message(v1::ROLE_USER, question);
    *append.add_items() = Message(v1::ROLE_ASSISTANT, std::string(300, 'a'));
    append.mutable_usage()->set_input_tokens(provider_count);
    append.mutable_usage()->set_output_tokens(90);
    ASSERT_TRUE(service_.AppendTurn(ctx_, append).ok());
  }
  // Far off at first (the estimate knows nothing of the provider), then
  // closer with every report until rounding is all that is left.
  EXPECT_GT(errors.front(), 0.2);
  for (size_t i = 1; i < errors.size(); ++i) {
    if (errors[i - 1] > 0.02) {
      EXPECT_LT(errors[i], errors[i - 1]) << "turn " << i;
    }
  }
  EXPECT_LT(errors.back(), 0.02);
  // And the next view counts like the provider does.
  v1::BuildContextRequest build;
  build.set_conversation_id("chat");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  int64_t raw = 0;
  for (const auto& e : view->entries()) raw += 4 + (e.content().size() + 3) / 4;
  const double ratio =
      static_cast<double>(view->tokens().total() - view->tokens().output_reserve()) / raw;
  EXPECT_NEAR(ratio, kProviderRatio, 0.03);
}

TEST_F(ConversationServiceTest, ProviderOverflowCorrectsTheEstimateAndNeverReturnsTheRefusedView) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("o");
  create.set_model("small-1");
  create.set_system_prompt("You are terse.");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int i = 0; i < 6; ++i) {
    v1::AppendTurnRequest req = Append("o", std::string(300, 'a' + i));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, std::string(300, 'z'));
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  v1::BuildContextRequest build;
  build.set_conversation_id("o");
  auto refused = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(refused.ok()) << refused.status();
  const int64_t estimated = refused->tokens().total() - refused->tokens().output_reserve();

  build.set_provider_overflow(true);
  build.set_provider_reported_tokens(estimated * 3 / 2);
  auto recovered = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_NE(recovered->view_hash(), refused->view_hash());
  EXPECT_LT(recovered->entries_size(), refused->entries_size());
  // The next ordinary call counts with the correction: never the refused view.
  build.set_provider_overflow(false);
  build.set_provider_reported_tokens(0);
  auto next = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next->view_hash(), refused->view_hash());

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("o");
  auto audit = service_.ListCompactionEvents(ctx_, list);
  ASSERT_TRUE(audit.ok());
  bool recorded = false;
  for (const auto& e : audit->events()) {
    if (e.event() != "provider_overflow") continue;
    recorded = true;
    EXPECT_EQ(e.tokens_before(), estimated);
    EXPECT_EQ(e.tokens_after(), estimated * 3 / 2);
    EXPECT_NE(e.detail_json().find(refused->view_hash()), std::string::npos) << e.detail_json();
  }
  EXPECT_TRUE(recorded);

  build.set_provider_reported_tokens(100);  // Without provider_overflow.
  EXPECT_TRUE(absl::IsInvalidArgument(service_.BuildContext(ctx_, build).status()));
  build.set_provider_overflow(true);
  build.set_provider_reported_tokens(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(service_.BuildContext(ctx_, build).status()));
}

TEST_F(ConversationServiceTest, ProviderOverflowOfAViewThatCannotShrinkIsRefused) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("tiny");
  create.set_model("small-1");
  create.set_system_prompt("You are terse.");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("tiny");
  *build.add_pending_input() = Message(v1::ROLE_USER, "hello");
  build.set_provider_overflow(true);
  auto out = service_.BuildContext(ctx_, build);
  // The system prompt and the pending input cannot go: nothing fits the
  // limit the refusal set.
  ASSERT_TRUE(absl::IsResourceExhausted(out.status())) << out.status();
}

}  // namespace
}  // namespace convstate
