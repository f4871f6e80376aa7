// The conformance suite (storage_conformance.h): what puts compaction under
// the caller's control: continuations and handoffs, idle compaction,
// proposals, reverts.

#include <string>

#include "absl/time/clock.h"
#include "storage/rules.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST_P(StorageConformanceTest, AContinuationStartsWithTheCarriedChunksAndSaysWhereFrom) {
  NewConversation nc;
  nc.key = Key("resumed");
  nc.model = "m";
  nc.continued_from = "yesterday";
  SummaryChunk carried;
  carried.text = "The user deploys api v1.4 to staging-eu-1.";
  carried.token_count = 12;
  carried.summarizer_model = "convstate-extractive";
  carried.prompt_version = "v1";
  carried.source_conversation_id = "yesterday";
  carried.source_chunk_id = 7;
  carried.recall = 1.0;
  LedgerFact fact;
  fact.role = Role::kUser;
  fact.text = "The registry is registry.local:5000.";
  fact.token_count = 9;
  carried.facts.push_back(fact);
  nc.carried_chunks = {carried, carried};
  nc.carried_chunks[1].source_chunk_id = 9;
  auto c = storage_->CreateConversation(ctx_, nc);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->continued_from, "yesterday");
  EXPECT_EQ(storage_->GetConversation(ctx_, nc.key)->continued_from, "yesterday");
  auto snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->active_chunks.size(), 2u);
  EXPECT_EQ(snap->active_chunks[0].chunk_id, 1);
  EXPECT_EQ(snap->active_chunks[0].source_conversation_id, "yesterday");
  EXPECT_EQ(snap->active_chunks[0].source_chunk_id, 7);
  EXPECT_EQ(snap->active_chunks[1].source_chunk_id, 9);
  ASSERT_EQ(snap->active_chunks[0].facts.size(), 1u);
  EXPECT_EQ(snap->active_chunks[0].facts[0].text, "The registry is registry.local:5000.");
  EXPECT_TRUE(snap->live_items.empty());
  EXPECT_EQ(snap->conversation.summarized_through, 0);
  auto events = AllCompactionEvents(*storage_, ctx_, nc.key);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->front().event, "continued");
  EXPECT_NE(events->front().detail.find("yesterday"), std::string::npos)
      << events->front().detail;
  // Appends and summaries go on as in any conversation.
  AppendRequest req;
  req.key = nc.key;
  req.items = {Message(Role::kUser, "and today?")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->live_items.size(), 1u);
  EXPECT_EQ(snap->live_items[0].sequence, 1);
}

// A continuation's carried turns are its first items, in the create's
// transaction; a source erased from (or deleted) after it was read refuses
// the create with ABORTED, and nothing of it is kept.
TEST_P(StorageConformanceTest, AHandoffIsOneTransactionAndRefusesASourceErasedMeanwhile) {
  Create("src");
  AppendSix(*storage_, ctx_, Key("src"));
  const Conversation source = *storage_->GetConversation(ctx_, Key("src"));
  NewConversation nc;
  nc.key = Key("next");
  nc.model = "m";
  nc.continued_from = "src";
  nc.continued_from_key = source.storage_key;
  nc.continued_from_redactions = source.redactions;
  nc.carried_items = {Message(Role::kUser, "carried question"),
                      Message(Role::kAssistant, "carried answer")};
  auto created = storage_->CreateConversation(ctx_, nc);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->item_count, 2);
  EXPECT_EQ(created->version, 1);
  EXPECT_EQ(created->last_sequence, 2);
  auto items = storage_->ListItems(ctx_, nc.key, 0, PageLimit{});
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->rows.size(), 2u);
  EXPECT_EQ(items->rows[0].data.content, "carried question");
  // The carried turns' idempotency record answers a retry of their append.
  AppendRequest again = CarriedAppend(nc);
  auto replay = storage_->AppendItems(ctx_, again);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->replayed);

  // Erased from after the read: refused, nothing kept.
  RedactRequest redact;
  redact.key = Key("src");
  redact.sequences = {1};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  nc.key = Key("later");
  EXPECT_EQ(storage_->CreateConversation(ctx_, nc).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(storage_->GetConversation(ctx_, nc.key).status().code(), absl::StatusCode::kNotFound);
  nc.continued_from_redactions = source.redactions + 1;
  ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());

  // Deleted after the read: refused too.
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("src")).ok());
  nc.key = Key("latest");
  EXPECT_EQ(storage_->CreateConversation(ctx_, nc).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(storage_->GetConversation(ctx_, nc.key).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StorageConformanceTest, AnIdleConversationIsClaimedOnceWhenDue) {
  Create("a");
  Create("b");
  Create("c");
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  ASSERT_TRUE(storage_->SetIdleDue(ctx_, Key("a"), t0 + absl::Seconds(5)).ok());
  ASSERT_TRUE(storage_->SetIdleDue(ctx_, Key("b"), t0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(storage_->SetIdleDue(ctx_, Key("c"), t0 + absl::Seconds(2)).ok());
  ASSERT_TRUE(storage_->SetIdleDue(ctx_, Key("c"), std::nullopt).ok());  // Called again.
  EXPECT_EQ(storage_->SetIdleDue(ctx_, Key("nope"), t0).code(), absl::StatusCode::kNotFound);
  auto none = storage_->ClaimIdle(ctx_, t0, 10);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  auto first = storage_->ClaimIdle(ctx_, t0 + absl::Seconds(10), 1);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_THAT(*first, SizeIs(1));
  EXPECT_EQ((*first)[0].conversation_id, "b");  // Oldest due first.
  auto rest = storage_->ClaimIdle(ctx_, t0 + absl::Seconds(10), 10);
  ASSERT_TRUE(rest.ok());
  ASSERT_THAT(*rest, SizeIs(1));
  EXPECT_EQ((*rest)[0].conversation_id, "a");
  EXPECT_EQ((*rest)[0].tenant_id, tenant_);
  auto again = storage_->ClaimIdle(ctx_, t0 + absl::Seconds(10), 10);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // Claimed once.
}

TEST_P(StorageConformanceTest, ProposalsAreKeptUntilTheyExpireAndAppliedOnce) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  const int64_t bytes_before = storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes;
  auto first = storage_->SaveProposal(ctx_, Key("c"), "{\"body\":1}", absl::Minutes(10), {}, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->proposal_id, 1);
  EXPECT_GT(first->expire_time, absl::Now() + absl::Minutes(9));
  EXPECT_GT(storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes, bytes_before);
  auto brief = storage_->SaveProposal(ctx_, Key("c"), "{\"body\":2}", absl::Milliseconds(1), {}, 0);
  ASSERT_TRUE(brief.ok()) << brief.status();
  EXPECT_EQ(brief->proposal_id, 2);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(storage_->GetProposal(ctx_, Key("c"), 2).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->GetProposal(ctx_, Key("c"), 9).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->SaveProposal(ctx_, Key("nope"), "{}", absl::Minutes(1), {}, 0).status().code(),
            absl::StatusCode::kNotFound);
  // Ids are never given twice, expired ones included.
  auto third = storage_->SaveProposal(ctx_, Key("c"), "{\"body\":3}", absl::Minutes(10), {}, 0);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->proposal_id, 3);
  auto got = storage_->GetProposal(ctx_, Key("c"), 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "{\"body\":1}");
  EXPECT_EQ(got->applied_chunk_id, 0);

  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "proposed");
  commit.proposal_id = 1;
  commit.proposal_answer = "answer";
  auto applied = storage_->CommitCompaction(ctx_, commit);
  ASSERT_TRUE(applied.ok()) << applied.status();
  got = storage_->GetProposal(ctx_, Key("c"), 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->applied_chunk_id, applied->chunk_id);
  EXPECT_EQ(got->applied_compaction_version, applied->compaction_version);
  EXPECT_EQ(got->applied_answer, "answer");
  // Once only, even when the rest of the commit would hold.
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(3, 4, "again");
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("c"))->summarized_through, 2);
  // A tenant at its limit cannot keep one more.
  TenantLimits full;
  full.max_stored_bytes = 1;
  const int64_t now_at = storage_->GetConversation(ctx_, Key("c"))->compaction_version;
  EXPECT_EQ(
      storage_->SaveProposal(ctx_, Key("c"), "{}", absl::Minutes(1), full, now_at).status().code(),
      absl::StatusCode::kResourceExhausted);
}

TEST_P(StorageConformanceTest, ARevertBringsBackTheViewBeforeTheCompaction) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));  // m1 .. m6
  CompactionCommit commit;
  commit.key = Key("c");
  commit.expected_prune_boundary = 0;
  commit.new_prune_boundary = 1;
  commit.chunk = Chunk(1, 2, "first");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 1, marker 7
  commit.expected_summarized_through = 2;
  commit.expected_prune_boundary = 1;
  commit.new_prune_boundary = 3;
  commit.chunk = Chunk(3, 4, "second");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 2, marker 8
  commit.expected_summarized_through = 4;
  commit.expected_prune_boundary = 3;
  commit.new_prune_boundary = 3;
  commit.chunk = Chunk(1, 4, "fold");
  commit.supersedes = {1, 2};
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 3 folds 1 and 2
  auto lease = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "other", absl::Seconds(60));
  ASSERT_TRUE(lease.ok() && lease->has_value());
  const int64_t before = storage_->GetConversation(ctx_, Key("c"))->compaction_version;

  RevertRequest req;
  req.key = Key("c");
  req.chunk_id = 1;  // Folded: the fold goes first.
  auto refused = storage_->RevertCompaction(ctx_, req);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("revert chunk 3 first"));
  req.chunk_id = 9;
  EXPECT_EQ(storage_->RevertCompaction(ctx_, req).status().code(), absl::StatusCode::kNotFound);

  req.chunk_id = 3;
  req.actor = "ops-oncall";
  auto fold = storage_->RevertCompaction(ctx_, req);
  ASSERT_TRUE(fold.ok()) << fold.status();
  EXPECT_TRUE(fold->chunk.reverted);
  EXPECT_EQ(fold->chunk.text, "fold");
  EXPECT_THAT(fold->reactivated, ElementsAre(1, 2));
  EXPECT_EQ(fold->summarized_through, 4);
  EXPECT_EQ(fold->prune_boundary, 3);
  EXPECT_EQ(fold->compaction_version, before + 1);
  // The compaction that held the lease meanwhile cannot commit.
  CompactionCommit fenced;
  fenced.key = Key("c");
  fenced.expected_summarized_through = 4;
  fenced.expected_prune_boundary = 3;
  fenced.new_prune_boundary = 3;
  fenced.lease = **lease;
  fenced.chunk = Chunk(5, 6, "late");
  EXPECT_EQ(storage_->CommitCompaction(ctx_, fenced).status().code(), absl::StatusCode::kAborted);

  // Chunk 1 is older than chunk 2, which is active again.
  req.chunk_id = 1;
  EXPECT_THAT(storage_->RevertCompaction(ctx_, req).status().message(),
              ::testing::HasSubstr("revert chunk 2 first"));
  req.chunk_id = 2;
  auto second = storage_->RevertCompaction(ctx_, req);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->summarized_through, 2);
  EXPECT_EQ(second->prune_boundary, 1);  // Where it was before chunk 2.
  auto snap = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(snap.ok());
  ASSERT_THAT(snap->active_chunks, SizeIs(1));
  EXPECT_EQ(snap->active_chunks[0].chunk_id, 1);
  EXPECT_EQ(snap->conversation.summarized_through, 2);
  EXPECT_EQ(snap->conversation.prune_boundary, 1);
  ASSERT_FALSE(snap->live_items.empty());
  EXPECT_EQ(snap->live_items[0].sequence, 3);
  // Kept, marked, for the audit; a second revert is refused.
  auto all = AllSummaries(*storage_, ctx_, Key("c"), /*include_superseded=*/true);
  ASSERT_TRUE(all.ok());
  ASSERT_THAT(*all, SizeIs(3));
  EXPECT_TRUE((*all)[1].reverted);
  EXPECT_EQ((*all)[1].reverted_by, "ops-oncall");
  EXPECT_EQ((*all)[1].text, "second");
  EXPECT_FALSE((*all)[0].reverted);
  EXPECT_THAT(storage_->RevertCompaction(ctx_, req).status().message(),
              ::testing::HasSubstr("already reverted"));
  auto events = AllCompactionEvents(*storage_, ctx_, Key("c"));
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().event, "reverted");
  EXPECT_THAT(events->back().detail, ::testing::HasSubstr("ops-oncall"));
  // A later compaction summarizes again from where the summaries end.
  CompactionCommit again;
  again.key = Key("c");
  again.expected_summarized_through = 2;
  again.expected_prune_boundary = 1;
  again.new_prune_boundary = 1;
  again.chunk = Chunk(3, 6, "anew");
  auto anew = storage_->CommitCompaction(ctx_, again);
  ASSERT_TRUE(anew.ok()) << anew.status();
  EXPECT_EQ(anew->chunk_id, 4);
  // A redaction is never reverted.
  RedactRequest redact;
  redact.key = Key("c");
  redact.sequences = {5};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  req.chunk_id = 4;
  EXPECT_THAT(storage_->RevertCompaction(ctx_, req).status().message(),
              ::testing::HasSubstr("never reverted"));
}

}  // namespace
}  // namespace convstate
