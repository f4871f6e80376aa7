// A conversation's settings: continuations and updates.

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

TEST_F(ConversationServiceTest, ContinueFromCarriesSummariesAndFactsNotLiveItems) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("monday");
  create.set_model("small-1");
  create.set_system_prompt("You are the release assistant.");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  std::string chatter;
  for (int i = 0; i < 12; ++i) chatter += " I will look into it and get back to you soon.";
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("monday", "We ship api v1.4 from registry.local:5000 on Friday." + chatter)).ok());
  v1::AppendTurnRequest more = Append("monday", "Also rotate the key KEY-4471 before that." + chatter);
  *more.add_items() = Message(v1::ROLE_ASSISTANT, "Noted: rotate KEY-4471 before the Friday release." + chatter);
  ASSERT_TRUE(service_.AppendTurn(ctx_, more).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("monday", "What is left for today?")).ok());
  v1::CompactRequest compact;
  compact.set_conversation_id("monday");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);

  v1::CreateConversationRequest resume;
  resume.set_conversation_id("tuesday");
  resume.set_continue_from("monday");
  auto resumed = service_.CreateConversation(ctx_, resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->continued_from(), "monday");
  EXPECT_EQ(resumed->model(), "small-1");  // Taken from the source.
  EXPECT_EQ(resumed->system_prompt(), "You are the release assistant.");

  v1::BuildContextRequest build;
  build.set_conversation_id("tuesday");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok()) << view.status();
  std::string ledger;
  int summaries = 0, live = 0;
  for (const auto& e : view->entries()) {
    if (e.section() == v1::SECTION_SUMMARY) ++summaries;
    if (e.section() == v1::SECTION_LEDGER) ledger += e.content();
    if (e.section() == v1::SECTION_LIVE) ++live;
  }
  EXPECT_EQ(summaries, 1);
  EXPECT_EQ(live, 0) << "live items are not carried over";
  EXPECT_NE(ledger.find("registry.local:5000"), std::string::npos) << ledger << view->DebugString();
  EXPECT_NE(ledger.find("(earlier)"), std::string::npos) << ledger;

  v1::ListSummariesRequest list;
  list.set_conversation_id("tuesday");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).source_conversation_id(), "monday");
  EXPECT_EQ(chunks->chunks(0).source_chunk_id(), compacted->summary_chunk_id());

  // The source is untouched; a missing source is NOT_FOUND.
  v1::GetConversationRequest get;
  get.set_conversation_id("monday");
  EXPECT_EQ(service_.GetConversation(ctx_, get)->item_count(), 5);  // 4 items, 1 marker.
  resume.set_conversation_id("wednesday");
  resume.set_continue_from("nobody");
  EXPECT_TRUE(absl::IsNotFound(service_.CreateConversation(ctx_, resume).status()));
}

// A continuation is validated before its hand-off touches the source: an
// id that exists, or a field that is invalid by itself, is refused with the
// source's compaction state as it was.
TEST_F(ConversationServiceTest, ContinueFromValidatesBeforeItCompactsTheSource) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("src");
  create.set_model("small-1");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  std::string chatter;
  for (int i = 0; i < 12; ++i) chatter += " I will look into it and get back to you soon.";
  for (int i = 0; i < 4; ++i) {
    v1::AppendTurnRequest turn =
        Append("src", absl::StrCat("Deploy web-", i, " to eu-west-1.", chatter));
    *turn.add_items() =
        Message(v1::ROLE_ASSISTANT, absl::StrCat("web-", i, " is rolling out.", chatter));
    ASSERT_TRUE(service_.AppendTurn(ctx_, turn).ok());
  }
  Create("taken");
  v1::GetConversationRequest get;
  get.set_conversation_id("src");
  const int64_t before = service_.GetConversation(ctx_, get)->compaction_version();

  v1::CreateConversationRequest resume;
  resume.set_conversation_id("taken");
  resume.set_continue_from("src");
  resume.set_carry_recent_turns(1);  // The rest is summarized in the source first.
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kAlreadyExists);
  resume.set_conversation_id("fresh");
  (*resume.mutable_metadata())["convstate.task_boundary"] = "true";
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kInvalidArgument);
  resume.clear_metadata();
  resume.set_model("no such model here");
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service_.GetConversation(ctx_, get)->compaction_version(), before)
      << "the source was compacted for a continuation that was refused";
  resume.clear_model();
  ASSERT_TRUE(service_.CreateConversation(ctx_, resume).ok());
  EXPECT_GT(service_.GetConversation(ctx_, get)->compaction_version(), before);
}

TEST_F(ConversationServiceTest, UpdateConversationRebudgetsForTheNewModel) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("u");
  create.set_model("small-1");  // 4,096 window, 2 bytes a token.
  create.set_system_prompt("You are terse.");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("u", std::string(400, 'x'))).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("u");
  auto before = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->tokens().context_window(), 4096);

  v1::UpdateConversationRequest update;
  update.set_conversation_id("u");
  update.set_model("gpt-4o");  // The default profile: 128k, 4 bytes a token.
  update.set_system_prompt("You are terse and exact.");
  auto updated = service_.UpdateConversation(ctx_, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->model(), "gpt-4o");
  EXPECT_EQ(updated->system_prompt(), "You are terse and exact.");

  auto after = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->tokens().context_window(), 128000);
  // The stored item was counted again with the new tokenizer: half the
  // tokens for the same bytes.
  EXPECT_LT(after->tokens().live(), before->tokens().live() * 6 / 10);
  EXPECT_GT(after->tokens().live(), before->tokens().live() * 4 / 10);
  EXPECT_EQ(after->entries(0).content(), "You are terse and exact.");

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("u");
  auto audit = service_.ListCompactionEvents(ctx_, list);
  ASSERT_TRUE(audit.ok());
  ASSERT_GE(audit->events_size(), 1);
  EXPECT_EQ(audit->events(0).event(), "conversation_updated");
  EXPECT_NE(audit->events(0).detail_json().find("\"recount\":true"), std::string::npos)
      << audit->events(0).detail_json();

  update.set_model("");
  EXPECT_TRUE(absl::IsInvalidArgument(service_.UpdateConversation(ctx_, update).status()));
  update.set_conversation_id("nobody");
  update.set_model("gpt-4o");
  EXPECT_TRUE(absl::IsNotFound(service_.UpdateConversation(ctx_, update).status()));
}

// Storage where another UpdateConversation lands between the service's
// read of the conversation and its own update, once.
class RacedUpdates final : public ForwardingStorage {
 public:
  RacedUpdates(Storage* base, ConversationUpdate first)
      : ForwardingStorage(base), first_(std::move(first)) {}
  absl::StatusOr<Conversation> UpdateConversation(const CallContext& c, const ConversationKey& k,
                                                 const ConversationUpdate& u) override {
    if (!raced_) {
      raced_ = true;
      auto other = base_->UpdateConversation(c, k, first_);
      EXPECT_TRUE(other.ok()) << other.status();
    }
    return base_->UpdateConversation(c, k, u);
  }

 private:
  const ConversationUpdate first_;
  bool raced_ = false;
};

// Two updates at once (one changes the model, the other the system prompt)
// end with counts that match the conversation as it is after both: the
// one that read the conversation before the other landed counts again.
TEST(ConversationServiceRaceTest, ConcurrentUpdatesLeaveCountsThatMatchTheResult) {
  auto models = Registry(kProfiles);
  auto memory = NewMemoryStorage();
  const std::string long_prompt(4000, 'p');
  ConversationUpdate other;
  other.system_prompt = long_prompt;
  other.count_encoding = "approximate:4";
  other.system_prompt_tokens = 1000;  // What the other call counted, for gpt-4o's profile.
  RacedUpdates storage(memory.get(), other);
  auto summarizer = NewExtractiveSummarizer();
  ConversationService service(ConversationService::Options{}, models.get(), &storage,
                              summarizer.get());
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("raced");
  create.set_model("gpt-4o");
  create.set_system_prompt("short");
  ASSERT_TRUE(service.CreateConversation(ctx, create).ok());
  v1::UpdateConversationRequest update;
  update.set_conversation_id("raced");
  update.set_model("small-model");
  ASSERT_TRUE(service.UpdateConversation(ctx, update).ok());
  auto after = memory->GetConversation(ctx, {"default", "raced"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->model, "small-model");
  EXPECT_EQ(after->system_prompt, long_prompt);
  // The small profile counts 2 bytes a token and nothing per message.
  EXPECT_EQ(after->system_prompt_tokens, 2000);
}

}  // namespace
}  // namespace convstate
