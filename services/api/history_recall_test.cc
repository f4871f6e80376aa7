// Recall from the whole history: the RECALLED section and SearchHistory.

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

// What a compaction took out of the view comes back, verbatim, when the
// user asks about it: after the live items, before the pending input,
// counted on its own; an unrelated question, a budget of 0 and erased text
// bring back nothing.
class RecallTest : public ConversationServiceTest {
 protected:
  void Fill(const std::string& id) {
    v1::AppendTurnRequest first = Append(id, "Set up the tenant database for fjord-tide please.");
    v1::NewItem call = Message(v1::ROLE_ASSISTANT, R"({"cmd": "provision fjord-tide"})");
    call.set_kind(v1::ITEM_KIND_TOOL_CALL);
    call.set_tool_name("shell");
    call.set_tool_call_id("call-1");
    *first.add_items() = call;
    v1::NewItem result = Message(v1::ROLE_TOOL, "");
    result.set_kind(v1::ITEM_KIND_TOOL_RESULT);
    result.set_tool_name("shell");
    result.set_tool_call_id("call-1");
    std::string out = "# fjord-tide: provisioning report\n";
    for (int i = 0; i < 30; ++i) absl::StrAppend(&out, "step ", i, ": created table t", i, "\n");
    out += "primary host: db-41.north.internal (guard_value 7731)\n";
    result.set_content(out);
    *first.add_items() = result;
    ASSERT_TRUE(service_.AppendTurn(ctx_, first).ok());
    for (int i = 0; i < 10; ++i) {
      v1::AppendTurnRequest req = Append(id, absl::StrCat("Status of step ", i, "?"));
      *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat("Step ", i, " is done."));
      ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    }
    v1::CompactRequest compact;
    compact.set_conversation_id(id);
    compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    ASSERT_TRUE(service_.Compact(ctx_, compact).ok());
  }

  absl::StatusOr<v1::BuildContextResponse> Ask(const std::string& id, const std::string& q) {
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    *build.add_pending_input() = Message(v1::ROLE_USER, q);
    return service_.BuildContext(ctx_, build);
  }

  static const v1::ContextEntry* Recalled(const v1::BuildContextResponse& view) {
    for (const v1::ContextEntry& e : view.entries()) {
      if (e.section() == v1::SECTION_RECALLED) return &e;
    }
    return nullptr;
  }
};

TEST_F(RecallTest, BuildContextBringsBackWhatTheQuestionAsksFor) {
  Create("r");
  Fill("r");
  auto view = Ask("r", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok()) << view.status();
  for (const v1::ContextEntry& e : view->entries()) {
    if (e.section() == v1::SECTION_LIVE) {
      EXPECT_GT(e.sequence(), 3) << "item still live";
    }
  }
  const v1::ContextEntry* recalled = Recalled(*view);
  ASSERT_NE(recalled, nullptr);
  EXPECT_NE(recalled->content().find("primary host: db-41.north.internal (guard_value 7731)"),
            std::string::npos)
      << recalled->content();
  EXPECT_NE(recalled->content().find("[#3, turn 1, result of shell"), std::string::npos);
  EXPECT_EQ(recalled->role(), v1::ROLE_SYSTEM);
  // Right before the pending input, counted on its own and in the total.
  const int n = view->entries_size();
  EXPECT_EQ(view->entries(n - 2).section(), v1::SECTION_RECALLED);
  EXPECT_EQ(view->entries(n - 1).section(), v1::SECTION_PENDING);
  const v1::TokenBreakdown& t = view->tokens();
  EXPECT_EQ(t.recalled(), recalled->token_count());
  EXPECT_GT(t.recalled(), 0);
  EXPECT_LE(t.recalled(), 128000 * 5 / 100);
  EXPECT_EQ(t.total(), t.system() + t.pinned() + t.summaries() + t.ledger() + t.live() +
                           t.recalled() + t.pending() + t.output_reserve());

  // An explicit query without pending input.
  v1::BuildContextRequest build;
  build.set_conversation_id("r");
  build.set_recall_query("fjord-tide primary host");
  auto explicit_view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(explicit_view.ok());
  ASSERT_NE(Recalled(*explicit_view), nullptr);
  build.set_recall_query(std::string(9000, 'x'));
  EXPECT_EQ(service_.BuildContext(ctx_, build).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A question about something else recalls nothing.
  auto other = Ask("r", "Can you write me a short poem about autumn leaves?");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Recalled(*other), nullptr);
  EXPECT_EQ(other->tokens().recalled(), 0);
}

TEST_F(RecallTest, WhatTheCallItselfCompactsAwayCanBeRecalled) {
  // Nothing is compacted before the question: the call that asks it
  // passes the hard band and summarizes the early turns itself, so the
  // answer leaves the view during that very call.
  v1::CreateConversationRequest create;
  create.set_conversation_id("c");
  create.set_model("small-model");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  v1::AppendTurnRequest first = Append("c", "Set up the tenant database for fjord-tide please.");
  std::string out = "# fjord-tide: provisioning report\n";
  for (int i = 0; i < 12; ++i) absl::StrAppend(&out, "step ", i, ": created table t", i, "\n");
  out += "primary host: db-41.north.internal (guard_value 7731)\n";
  *first.add_items() = Message(v1::ROLE_ASSISTANT, out);
  ASSERT_TRUE(service_.AppendTurn(ctx_, first).ok());
  for (int i = 0; i < 40; ++i) {
    v1::AppendTurnRequest req = Append("c", absl::StrCat("What about the queue on shard ", i,
                                                        "? Is it draining as planned?"));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat(
        "Shard ", i, " drains at its usual pace; nothing there needs attention yet, and the "
        "backlog should be gone within the hour."));
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  auto view = Ask("c", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok()) << view.status();
  bool summarized = false;
  for (const v1::ContextEntry& e : view->entries()) {
    summarized |= e.section() == v1::SECTION_SUMMARY;
    if (e.section() == v1::SECTION_LIVE) EXPECT_GT(e.sequence(), 2) << "the fact is still live";
  }
  ASSERT_TRUE(summarized) << "the call was expected to compact";
  const v1::ContextEntry* recalled = Recalled(*view);
  ASSERT_NE(recalled, nullptr);
  EXPECT_NE(recalled->content().find("db-41.north.internal"), std::string::npos)
      << recalled->content();
}

// The budget is the profile's share of the window, and at least
// recall.min_tokens while recall is on, as long as that is a tenth of the
// window at most.
TEST(RecallBudgetTest, AShareOfTheWindowWithAFloorForSmallWindows) {
  ModelProfile p;
  p.recall.budget_fraction = 0.05;
  p.recall.min_tokens = 640;
  p.context_window = 32768;
  EXPECT_EQ(HistoryRecall::RecallBudget(p), 1638);  // The share.
  EXPECT_EQ(HistoryRecall::RecallHeadroom(p), 640);  // A call compacts for the floor.
  p.context_window = 8192;
  EXPECT_EQ(HistoryRecall::RecallBudget(p), 640);  // The floor, not 409.
  EXPECT_EQ(HistoryRecall::RecallHeadroom(p), 640);
  p.context_window = 4096;
  EXPECT_EQ(HistoryRecall::RecallBudget(p), 409);  // A tenth of the window, not 640.
  EXPECT_EQ(HistoryRecall::RecallHeadroom(p), 409);  // The budget, smaller than the floor.
  p.recall.min_tokens = 0;
  EXPECT_EQ(HistoryRecall::RecallBudget(p), 204);
  p.recall.budget_fraction = 0;
  p.recall.min_tokens = 640;
  EXPECT_EQ(HistoryRecall::RecallBudget(p), 0);  // Off is off.
  EXPECT_EQ(HistoryRecall::RecallHeadroom(p), 0);
}

// A view within a recall budget of the hard band, but with more room than
// the section's floor (recall.min_tokens) under it, is not compacted for
// recall: the section takes the room the view leaves.
TEST_F(RecallTest, ACallCompactsOnlyForTheSectionsFloor) {
  Create("near");
  Fill("near");
  // 128,000 tokens, hard band 102,400; budget 6,400, floor 640. Messages
  // of 4,000 bytes (about 1,000 tokens) until the view is 2,000 to 3,000
  // tokens under the hard band.
  const std::string filler = absl::StrCat("Notes on the weekly sync: ", std::string(3970, 'x'));
  int64_t total = 0;
  for (int i = 0; i < 200; ++i) {
    v1::InspectContextRequest inspect;
    inspect.set_conversation_id("near");
    auto state = service_.InspectContext(ctx_, inspect);
    ASSERT_TRUE(state.ok()) << state.status();
    total = state->tokens().total();
    if (total >= 102400 - 3000) break;
    ASSERT_TRUE(service_.AppendTurn(ctx_, Append("near", filler)).ok());
  }
  ASSERT_GE(total, 102400 - 3000);
  ASSERT_LT(total, 102400 - 2000);
  v1::GetConversationRequest get;
  get.set_conversation_id("near");
  const int64_t before = service_.GetConversation(ctx_, get)->compaction_version();
  auto view = Ask("near", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->compaction_version(), before) << "compacted for recall's budget";
  ASSERT_NE(Recalled(*view), nullptr);
  EXPECT_NE(Recalled(*view)->content().find("db-41.north.internal"), std::string::npos);
  EXPECT_LT(view->tokens().total(), 102400);
}

TEST_F(RecallTest, ABudgetOfZeroTurnsRecallOffAndErasedTextNeverComesBack) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("off");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_recall_budget_fraction(0);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  Fill("off");
  auto view = Ask("off", "Which host does the fjord-tide database live on?");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(Recalled(*view), nullptr);

  Create("erase");
  Fill("erase");
  v1::RedactItemsRequest redact;
  redact.set_conversation_id("erase");
  redact.add_sequences(3);
  redact.set_reason("test");
  ASSERT_TRUE(service_.RedactItems(ctx_, redact).ok());
  view = Ask("erase", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok());
  for (const v1::ContextEntry& e : view->entries()) {
    EXPECT_EQ(e.content().find("db-41"), std::string::npos) << e.content();
  }
  v1::SearchHistoryRequest search;
  search.set_conversation_id("erase");
  search.set_query("db-41.north.internal guard_value");
  auto found = service_.SearchHistory(ctx_, search);
  ASSERT_TRUE(found.ok()) << found.status();
  for (const v1::RecalledPassage& p : found->passages()) {
    EXPECT_NE(p.sequence(), 3);
    EXPECT_EQ(p.text().find("db-41"), std::string::npos) << p.text();
    EXPECT_EQ(p.text().find("7731"), std::string::npos) << p.text();
  }
}

// InspectContext shows what recall would add for a question, with scores,
// and changes nothing.
TEST_F(RecallTest, InspectContextShowsWhatRecallWouldAdd) {
  Create("i");
  Fill("i");
  v1::InspectContextRequest req;
  req.set_conversation_id("i");
  req.set_recall_query("what guard value did the fjord-tide report give for the primary host?");
  auto out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(out->recalled().empty());
  EXPECT_EQ(out->recalled(0).text(), "primary host: db-41.north.internal (guard_value 7731)");
  EXPECT_EQ(out->recalled(0).call(), R"({"cmd": "provision fjord-tide"})");
  EXPECT_GT(out->recalled(0).score(), 0);
  EXPECT_GT(out->recalled_tokens(), 0);
  // The same question pending: the same passages.
  req.clear_recall_query();
  *req.add_pending_input() = Message(v1::ROLE_USER, "And the fjord-tide primary host's guard value?");
  out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(out->recalled().empty());
  EXPECT_EQ(out->recalled(0).sequence(), 3);
  // No question, nothing recalled; a question too long is refused.
  req.clear_pending_input();
  out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->recalled().empty());
  EXPECT_EQ(out->recalled_tokens(), 0);
  req.set_recall_query(std::string(9000, 'q'));
  EXPECT_EQ(service_.InspectContext(ctx_, req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RecallTest, SearchHistoryAnswersPassagesWithProvenance) {
  Create("s");
  Fill("s");
  v1::SearchHistoryRequest req;
  req.set_conversation_id("s");
  req.set_query("what guard value did the fjord-tide report give for the primary host?");
  auto out = service_.SearchHistory(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GE(out->passages_size(), 1);
  const v1::RecalledPassage& p = out->passages(0);
  EXPECT_EQ(p.sequence(), 3);
  EXPECT_EQ(p.turn_index(), 1);
  EXPECT_EQ(p.kind(), v1::ITEM_KIND_TOOL_RESULT);
  EXPECT_EQ(p.tool_name(), "shell");
  EXPECT_EQ(p.text(), "primary host: db-41.north.internal (guard_value 7731)");
  EXPECT_EQ(p.title(), "# fjord-tide: provisioning report");
  EXPECT_GT(p.token_count(), 0);
  EXPECT_GE(out->document_frequency().at("fjord-tide"), 2);
  EXPECT_EQ(out->items(), 24);  // 23 appended and the summary's marker

  req.set_max_results(51);
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_max_results(0);
  req.set_max_tokens(-1);
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_max_tokens(0);
  req.set_query("");
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_query("fjord-tide");
  req.set_conversation_id("missing");
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace convstate
