// Compaction under the caller's control (lost facts, dry runs, proposals,
// reverts, policies, boundaries, hand-offs).

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

// A compaction says what it lost: the facts of its span that the view no
// longer shows verbatim, in the chunk (ListSummaries, ExpandSummary) and
// its audit row; every one of them is really missing from the view.
TEST_F(ConversationServiceTest, ACompactionReportsTheFactsItLost) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("lossy");
  create.set_model("small-1");  // 4096 window: the ledger holds ~800 tokens.
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int t = 0; t < 12; ++t) {
    std::string facts;
    for (int k = 0; k < 10; ++k) {
      absl::StrAppend(&facts, " host-", t, "-", k, ".eu port ", 7000 + t * 10 + k, ";");
    }
    v1::AppendTurnRequest req = Append("lossy", absl::StrCat("Register these:", facts));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, "Registered, all of them.");
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  v1::CompactRequest compact;
  compact.set_conversation_id("lossy");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);

  v1::ExpandSummaryRequest expand;
  expand.set_conversation_id("lossy");
  expand.set_chunk_id(compacted->summary_chunk_id());
  auto expanded = service_.ExpandSummary(ctx_, expand);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const v1::SummaryChunk& chunk = expanded->chunk();
  ASSERT_GT(chunk.lost_facts_size(), 0) << "120 facts cannot all stay in a 4k window";

  v1::BuildContextRequest build;
  build.set_conversation_id("lossy");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  std::string shown;
  for (const v1::ContextEntry& e : view->entries()) shown += e.content() + "\n";
  for (const v1::LedgerFact& f : chunk.lost_facts()) {
    EXPECT_GE(f.sequence(), chunk.from_sequence());
    EXPECT_LE(f.sequence(), chunk.through_sequence());
    EXPECT_EQ(shown.find(f.text()), std::string::npos) << f.text() << " is in the view";
  }
  for (const v1::LedgerFact& f : chunk.facts()) {
    bool lost = false;
    for (const v1::LedgerFact& l : chunk.lost_facts()) lost |= l.text() == f.text();
    if (!lost) {
      EXPECT_NE(shown.find(f.text()), std::string::npos) << f.text();
    }
  }
  v1::ListSummariesRequest list;
  list.set_conversation_id("lossy");
  auto listed = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->chunks_size(), 1);
  EXPECT_EQ(listed->chunks(0).lost_facts_size(), chunk.lost_facts_size());
  v1::ListCompactionEventsRequest events;
  events.set_conversation_id("lossy");
  auto audit = service_.ListCompactionEvents(ctx_, events);
  ASSERT_TRUE(audit.ok());
  bool named = false;
  for (const auto& e : audit->events()) {
    if (e.event() != "completed" || e.tier() != "summarize") continue;
    const std::string& detail = e.detail_json();
    named = detail.find("\"lost_facts\"") != std::string::npos &&
            detail.find(absl::StrCat("\"lost\":", chunk.lost_facts_size())) != std::string::npos;
  }
  EXPECT_TRUE(named);
}


// Five turns of a deploy log, each a user fact and a long answer.
void AppendDeployTurns(ConversationService& service, const CallContext& ctx,
                       const std::string& id) {
  for (int i = 0; i < 5; ++i) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    v1::NewItem user;
    user.set_role(v1::ROLE_USER);
    user.set_kind(v1::ITEM_KIND_MESSAGE);
    user.set_content(absl::StrCat("Deploy web-", i, " to eu-west-1 at 0", i, ":00 UTC."));
    *req.add_items() = user;
    v1::NewItem answer = user;
    answer.set_role(v1::ROLE_ASSISTANT);
    answer.set_content(
        "That should be safe to do now. I will keep an eye on the error rate while it rolls "
        "out, and I will tell you as soon as anything looks unusual. If something goes wrong "
        "we can roll back with a single command, so there is little risk in trying.");
    *req.add_items() = answer;
    ASSERT_TRUE(service.AppendTurn(ctx, req).ok());
  }
}

// A dry run stores nothing; its proposal applies as made, once; a revert
// brings back the view before it, byte for byte.
TEST_F(ConversationServiceTest, ADryRunProposesAndApplyAndRevertUndoIt) {
  Create("ctl", "You are terse.");
  AppendDeployTurns(service_, ctx_, "ctl");
  v1::BuildContextRequest build;
  build.set_conversation_id("ctl");
  auto before = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(before.ok()) << before.status();

  v1::CompactRequest dry;
  dry.set_conversation_id("ctl");
  dry.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  dry.set_dry_run(true);
  auto proposed = service_.Compact(ctx_, dry);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_TRUE(proposed->has_proposal()) << proposed->DebugString();
  const v1::CompactionProposal& p = proposed->proposal();
  EXPECT_EQ(p.proposal_id(), "1");
  EXPECT_EQ(proposed->summary_chunk_id(), 0);
  EXPECT_EQ(p.from_sequence(), 1);
  EXPECT_GT(p.through_sequence(), 1);
  EXPECT_FALSE(p.summary_text().empty());
  EXPECT_FALSE(p.facts().empty());
  EXPECT_LT(p.after().total(), p.before().total());
  EXPECT_EQ(p.before().total(), before->tokens().total());
  EXPECT_TRUE(p.has_expire_time());
  auto unchanged = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->view_hash(), before->view_hash());
  EXPECT_EQ(unchanged->compaction_version(), before->compaction_version());

  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id("ctl");
  apply.set_proposal_id(p.proposal_id());
  auto applied = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_GT(applied->summary_chunk_id(), 0);
  EXPECT_FALSE(applied->replayed());
  EXPECT_FALSE(applied->edited());
  auto compacted = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(compacted.ok());
  EXPECT_NE(compacted->view_hash(), before->view_hash());
  EXPECT_EQ(compacted->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
  EXPECT_EQ(compacted->tokens().total(), applied->tokens_after());
  auto again = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->summary_chunk_id(), applied->summary_chunk_id());

  v1::RevertCompactionRequest revert;
  revert.set_conversation_id("ctl");
  revert.set_chunk_id(applied->summary_chunk_id());
  auto reverted = service_.RevertCompaction(ctx_, revert);
  ASSERT_TRUE(reverted.ok()) << reverted.status();
  EXPECT_TRUE(reverted->chunk().reverted());
  EXPECT_EQ(reverted->summarized_through(), 0);
  auto restored = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->view_hash(), before->view_hash());
  EXPECT_EQ(restored->context_status(), v1::CONTEXT_STATUS_FULL);
  EXPECT_EQ(service_.RevertCompaction(ctx_, revert).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An applied proposal answers as it did, even after a revert.
  apply.set_proposal_id("1");
  EXPECT_TRUE(service_.ApplyCompaction(ctx_, apply)->replayed());
  dry.set_through_sequence(4);
  auto bounded = service_.Compact(ctx_, dry);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->proposal().through_sequence(), 4);
  EXPECT_EQ(bounded->proposal().proposal_id(), "2");
  v1::PinItemRequest pin;
  pin.set_conversation_id("ctl");
  pin.set_sequence(8);
  ASSERT_TRUE(service_.PinItem(ctx_, pin).ok());
  apply.set_proposal_id("2");
  auto stale = service_.ApplyCompaction(ctx_, apply);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  apply.set_proposal_id("9");
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(), absl::StatusCode::kNotFound);
  apply.set_proposal_id("x'");
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The caller's own summary text goes into the view; appends made meanwhile
// do not stand in its way.
TEST_F(ConversationServiceTest, AnEditedProposalPutsTheCallersTextInTheView) {
  Create("edit");
  AppendDeployTurns(service_, ctx_, "edit");
  v1::CompactRequest dry;
  dry.set_conversation_id("edit");
  dry.set_dry_run(true);
  dry.set_through_sequence(6);
  auto proposed = service_.Compact(ctx_, dry);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_TRUE(proposed->has_proposal());
  EXPECT_EQ(proposed->proposal().through_sequence(), 6);
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("edit", "one more thing")).ok());

  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id("edit");
  apply.set_proposal_id(proposed->proposal().proposal_id());
  apply.set_summary_text(std::string(100000, 'x'));
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(),
            absl::StatusCode::kInvalidArgument);
  apply.set_summary_text("Three web deploys to eu-west-1 went out; nothing failed.");
  auto applied = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(applied->edited());
  v1::BuildContextRequest build;
  build.set_conversation_id("edit");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  bool shown = false;
  for (const auto& e : view->entries()) {
    shown |= e.section() == v1::SECTION_SUMMARY &&
             e.content().find("nothing failed") != std::string::npos;
  }
  EXPECT_TRUE(shown) << view->DebugString();
  EXPECT_EQ(view->entries(view->entries_size() - 1).content(), "one more thing");
  v1::ListSummariesRequest list;
  list.set_conversation_id("edit");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).through_sequence(), 6);
  // A boundary inside the summaries or past the log is refused.
  v1::CompactRequest bad;
  bad.set_conversation_id("edit");
  bad.set_through_sequence(3);
  EXPECT_EQ(service_.Compact(ctx_, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.set_through_sequence(99);
  EXPECT_EQ(service_.Compact(ctx_, bad).status().code(), absl::StatusCode::kInvalidArgument);
}


// The extractive summarizer, remembering what it was told.
class InstructedSummarizer : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& request) override {
    instructions.push_back(request.instructions);
    return base_->Summarize(request);
  }
  std::vector<std::string> instructions;

 private:
  std::unique_ptr<Summarizer> base_ = NewExtractiveSummarizer();
};

// A conversation's policy: a keep rule holds its match verbatim through a
// summary; its instructions reach every summary (with the call's after
// them); an update replaces it, and a continuation carries it.
TEST(CompactionPolicyTest, KeepRulesHoldItemsVerbatimAndInstructionsReachTheSummarizer) {
  auto models = Registry(kProfiles);
  auto storage = NewMemoryStorage();
  InstructedSummarizer summarizer;
  ConversationService service(ConversationService::Options{}, models.get(), storage.get(),
                              &summarizer);
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("policy");
  create.set_model("gpt-4o");
  v1::CompactionPolicy* policy = create.mutable_compaction_policy();
  policy->set_instructions("keep every ticket number");
  v1::KeepRule* rule = policy->add_keep();
  rule->set_pattern("ticket [A-Z]+-[0-9]+");
  rule->add_roles(v1::ROLE_USER);
  auto created = service.CreateConversation(ctx, create);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->compaction_policy().keep_size(), 1);
  AppendDeployTurns(service, ctx, "policy");
  v1::AppendTurnRequest ticket;
  ticket.set_conversation_id("policy");
  v1::NewItem user;
  user.set_role(v1::ROLE_USER);
  user.set_kind(v1::ITEM_KIND_MESSAGE);
  user.set_content("Track it under ticket OPS-4711, please.");
  *ticket.add_items() = user;
  ASSERT_TRUE(service.AppendTurn(ctx, ticket).ok());  // Item 11.
  AppendDeployTurns(service, ctx, "policy");

  v1::CompactRequest compact;
  compact.set_conversation_id("policy");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  compact.set_instructions("focus on the deploys");
  auto compacted = service.Compact(ctx, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);
  ASSERT_FALSE(summarizer.instructions.empty());
  EXPECT_EQ(summarizer.instructions.back(), "keep every ticket number\nfocus on the deploys");
  v1::ExpandSummaryRequest expand;
  expand.set_conversation_id("policy");
  expand.set_chunk_id(compacted->summary_chunk_id());
  auto chunk = service.ExpandSummary(ctx, expand);
  ASSERT_TRUE(chunk.ok());
  ASSERT_GT(chunk->chunk().through_sequence(), 11);  // The span passed the ticket...
  v1::BuildContextRequest build;
  build.set_conversation_id("policy");
  auto view = service.BuildContext(ctx, build);
  ASSERT_TRUE(view.ok());
  bool pinned = false;
  for (const auto& e : view->entries()) {
    pinned |= e.section() == v1::SECTION_PINNED && e.sequence() == 11 &&
              e.content() == "Track it under ticket OPS-4711, please.";
  }
  EXPECT_TRUE(pinned) << view->DebugString();  // ...and it stayed, verbatim.
  v1::ListItemsRequest list;
  list.set_conversation_id("policy");
  auto items = service.ListItems(ctx, list);
  ASSERT_TRUE(items.ok());
  EXPECT_TRUE(items->items(10).pinned());
  EXPECT_FALSE(items->items(0).pinned());

  // Background and by-band compactions are told too: the policy is the
  // conversation's, not the call's.
  v1::CreateConversationRequest next;
  next.set_conversation_id("policy-2");
  next.set_continue_from("policy");
  auto continued = service.CreateConversation(ctx, next);
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_EQ(continued->compaction_policy().instructions(), "keep every ticket number");
  v1::UpdateConversationRequest update;
  update.set_conversation_id("policy");
  update.mutable_profile_overrides()->set_recent_turns(2);
  auto updated = service.UpdateConversation(ctx, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->compaction_policy().keep_size(), 1);  // Overrides leave it.
  update.clear_profile_overrides();
  update.mutable_compaction_policy();
  updated = service.UpdateConversation(ctx, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_FALSE(updated->has_compaction_policy());
  // A pattern that is not RE2 is refused, naming the rule.
  update.mutable_compaction_policy()->add_keep()->set_pattern("(unclosed");
  auto refused = service.UpdateConversation(ctx, update);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("compaction_policy.keep[0].pattern"),
            std::string::npos)
      << refused.status();
}


// A summary prefers to end where a task ended.
TEST_F(ConversationServiceTest, SummariesEndAtTaskBoundaries) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("tasks");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int turn = 0; turn < 4; ++turn) {
    v1::AppendTurnRequest req = Append("tasks", absl::StrCat("Task step ", turn, " on db-", turn));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, std::string(400, 'a' + turn));
    req.set_task_boundary(turn == 0);
    auto appended = service_.AppendTurn(ctx_, req);
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_EQ(appended->items(1).metadata().count("convstate.task_boundary"), turn == 0 ? 1u : 0u);
  }
  v1::CompactRequest compact;
  compact.set_conversation_id("tasks");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  v1::ListSummariesRequest list;
  list.set_conversation_id("tasks");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).through_sequence(), 2);  // Not 6: the task ended at 2.
}

// With compaction disabled nothing bounds a live window but the view's
// byte bound: the calls that read the view are refused past it, naming it;
// with compaction on, BuildContext compacts what it read.
TEST_F(ConversationServiceTest, AViewPastItsByteBoundIsRefusedWhenNothingCompactsIt) {
  ConversationService::Options options;
  options.limits.max_view_bytes = 3000;
  ConversationService service(options, models_.get(), storage_.get(), summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("open");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_compaction_enabled(false);
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("open", std::string(2000, 'a'))).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("open");
  ASSERT_TRUE(service.BuildContext(ctx_, build).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("open", std::string(2000, 'b'))).ok());
  const absl::Status refused = service.BuildContext(ctx_, build).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("--max_view_mb"), std::string::npos) << refused.message();
  v1::InspectContextRequest inspect;
  inspect.set_conversation_id("open");
  EXPECT_EQ(service.InspectContext(ctx_, inspect).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::GetContextAtRequest at;
  at.set_conversation_id("open");
  at.set_version(2);
  EXPECT_EQ(service.GetContextAt(ctx_, at).status().code(), absl::StatusCode::kResourceExhausted);
  // Nothing was lost: the items are all there.
  v1::ListItemsRequest items;
  items.set_conversation_id("open");
  EXPECT_EQ(service.ListItems(ctx_, items)->items_size(), 2);
}

// Erases the source's first item while the first hand-off of it is being
// created, as a RedactItems on another replica would.
class ErasedDuringHandoff : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<Conversation> CreateConversation(const CallContext& c,
                                                  const NewConversation& n) override {
    if (!n.continued_from.empty() && creates_++ == 0) {
      RedactRequest redact;
      redact.key = ConversationKey{n.key.tenant_id, n.continued_from};
      redact.sequences = {1};
      redact.tombstone = "[erased]";
      EXPECT_TRUE(ForwardingStorage::RedactItems(c, redact).ok());
    }
    return ForwardingStorage::CreateConversation(c, n);
  }
  int creates() const { return creates_; }

 private:
  int creates_ = 0;
};

// The hand-off is one write: an erasure between the read of the source and
// the create refuses the create, which reads the source again; the new
// conversation never holds the erased text.
TEST_F(ConversationServiceTest, AHandoffRacingAnErasureNeverCarriesTheErasedText) {
  ErasedDuringHandoff storage(storage_.get());
  ConversationService service(ConversationService::Options{}, models_.get(), &storage,
                              summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("src");
  create.set_model("gpt-4o");
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("src", "the passphrase is quartz-heron")).ok());
  v1::CreateConversationRequest next;
  next.set_conversation_id("next");
  next.set_continue_from("src");
  next.set_carry_recent_turns(1);
  auto created = service.CreateConversation(ctx_, next);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(storage.creates(), 2);
  v1::ListItemsRequest items;
  items.set_conversation_id("next");
  auto carried = service.ListItems(ctx_, items);
  ASSERT_TRUE(carried.ok());
  ASSERT_GT(carried->items_size(), 0);
  for (const v1::Item& item : carried->items()) {
    EXPECT_EQ(item.content().find("quartz-heron"), std::string::npos) << item.content();
  }
}

// A handoff summarizes what the source has not summarized yet, and brings
// its pinned items and newest turns along verbatim.
TEST_F(ConversationServiceTest, AHandoffCarriesTheSummaryPinsAndNewestTurns) {
  Create("source");
  AppendDeployTurns(service_, ctx_, "source");  // Items 1-10, five turns.
  v1::PinItemRequest pin;
  pin.set_conversation_id("source");
  pin.set_sequence(3);
  ASSERT_TRUE(service_.PinItem(ctx_, pin).ok());
  v1::CreateConversationRequest next;
  next.set_conversation_id("next");
  next.set_continue_from("source");
  next.set_carry_recent_turns(1);
  auto created = service_.CreateConversation(ctx_, next);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->continued_from(), "source");
  EXPECT_EQ(created->item_count(), 3);  // The pinned item and the last turn.
  v1::ListSummariesRequest list;
  list.set_conversation_id("source");
  auto source_chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(source_chunks.ok());
  ASSERT_EQ(source_chunks->chunks_size(), 1);
  EXPECT_EQ(source_chunks->chunks(0).through_sequence(), 8);
  v1::ListItemsRequest items;
  items.set_conversation_id("next");
  auto carried = service_.ListItems(ctx_, items);
  ASSERT_TRUE(carried.ok());
  ASSERT_EQ(carried->items_size(), 3);
  EXPECT_TRUE(carried->items(0).pinned());
  EXPECT_EQ(carried->items(0).metadata().at("convstate.continued_from_sequence"), "3");
  EXPECT_EQ(carried->items(1).content(), "Deploy web-4 to eu-west-1 at 04:00 UTC.");
  EXPECT_EQ(carried->items(2).metadata().at("convstate.continued_from_sequence"), "10");
  v1::BuildContextRequest build;
  build.set_conversation_id("next");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  bool summary = false;
  for (const auto& e : view->entries()) summary |= e.section() == v1::SECTION_SUMMARY;
  EXPECT_TRUE(summary) << view->DebugString();
  next.set_conversation_id("orphan");
  next.clear_continue_from();
  EXPECT_EQ(service_.CreateConversation(ctx_, next).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convstate
