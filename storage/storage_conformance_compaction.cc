// The conformance suite (storage_conformance.h): compaction commits, folds,
// pins, chunk structure, leases.

#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST_P(StorageConformanceTest, CompactionWritesChunkAndMarkerAndMovesTheView) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  commit.new_prune_boundary = 3;
  commit.chunk = Chunk(1, 4, "summary of 1-4");
  commit.events = {Event("started"), Event("completed")};
  auto result = storage_->CommitCompaction(ctx_, commit);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chunk_id, 1);
  EXPECT_EQ(result->marker_sequence, 7);
  // Compactions move compaction_version; version counts appends only.
  EXPECT_EQ(result->version, 1);
  EXPECT_EQ(result->compaction_version, 1);

  auto snap = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->conversation.summarized_through, 4);
  EXPECT_EQ(snap->conversation.prune_boundary, 3);
  EXPECT_EQ(snap->conversation.version, 1);
  EXPECT_EQ(snap->conversation.compaction_version, 1);
  ASSERT_THAT(snap->active_chunks, SizeIs(1));
  EXPECT_EQ(snap->active_chunks[0].text, "summary of 1-4");
  EXPECT_EQ(snap->active_chunks[0].tokens_in, 40);
  EXPECT_THAT(Sequences(snap->pinned_items), ElementsAre(2));
  EXPECT_THAT(Sequences(snap->live_items), ElementsAre(5, 6, 7));
  EXPECT_EQ(snap->live_items[2].data.kind, ItemKind::kSummaryMarker);
  EXPECT_EQ(snap->live_items[2].summary_chunk_id, 1);

  // The full history is still there, marker included.
  auto items = ItemRows(*storage_, ctx_, Key("c"), 0, 100);
  ASSERT_TRUE(items.ok());
  EXPECT_THAT(*items, SizeIs(7));
  auto events = AllCompactionEvents(*storage_, ctx_, Key("c"));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_THAT(*events, SizeIs(2));
  EXPECT_EQ((*events)[0].event, "started");
  EXPECT_EQ((*events)[1].event, "completed");
  EXPECT_EQ((*events)[1].tokens_after, 40);
  EXPECT_LT((*events)[0].event_id, (*events)[1].event_id);

  // A second compaction adds a chunk; the first stays as it was.
  commit.expected_summarized_through = 4;
  commit.expected_prune_boundary = 3;
  commit.chunk = Chunk(5, 6, "summary of 5-6");
  commit.events.clear();
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  auto chunks = AllSummaries(*storage_, ctx_, Key("c"), false);
  ASSERT_TRUE(chunks.ok());
  ASSERT_THAT(*chunks, SizeIs(2));
  EXPECT_EQ((*chunks)[0].text, "summary of 1-4");
  EXPECT_EQ((*chunks)[1].chunk_id, 2);
}

TEST_P(StorageConformanceTest, ChunkStructureAndRecallRoundTrip) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  SummaryChunk chunk = Chunk(1, 4, "summary of 1-4");
  chunk.lines = {SummaryLine{1, "User", "Deploy \xE2\x94\x80 the api", 7},
                 SummaryLine{3, "Tool kubectl", "returned: 3 pods", 1}};
  chunk.facts = {LedgerFact{1, 1, Role::kUser, "Ticket INC-4821 \"quoted\"", 12,
                            {18446744073709551557ull, 1, 9007199254740993ull}},
                 LedgerFact{3, 2, Role::kTool, "kubectl: Error: OOMKilled", 9}};
  chunk.constraints = {LedgerFact{1, 1, Role::kUser, "Never restart db-1 at night.", 10}};
  chunk.lost = {LedgerFact{2, 1, Role::kAssistant, "port 7412", 4}};
  chunk.recall = 0.93;
  commit.chunk = chunk;
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  auto snap = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_THAT(snap->active_chunks, SizeIs(1));
  const SummaryChunk& got = snap->active_chunks[0];
  EXPECT_EQ(got.lines, chunk.lines);
  EXPECT_EQ(got.facts, chunk.facts);
  EXPECT_EQ(got.constraints, chunk.constraints);
  EXPECT_EQ(got.lost, chunk.lost);
  ASSERT_TRUE(got.recall.has_value());
  EXPECT_DOUBLE_EQ(*got.recall, 0.93);
  // A chunk without a measured recall keeps none.
  commit.expected_summarized_through = 4;
  commit.chunk = Chunk(5, 6, "summary of 5-6");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  auto chunks = AllSummaries(*storage_, ctx_, Key("c"), false);
  ASSERT_TRUE(chunks.ok());
  ASSERT_THAT(*chunks, SizeIs(2));
  EXPECT_FALSE((*chunks)[1].recall.has_value());
  EXPECT_TRUE((*chunks)[1].facts.empty());
}

TEST_P(StorageConformanceTest, AnAppendAtTheVersionReadBeforeACompactionSucceeds) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  const int64_t read = storage_->GetConversation(ctx_, Key("c"))->version;
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 4, "summary of 1-4");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  AppendRequest req;
  req.key = Key("c");
  req.items = {Message(Role::kUser, "next")};
  req.expected_version = read;
  auto r = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, read + 1);
}

TEST_P(StorageConformanceTest, PinsOverrideTheAppendFlagAndSurviveSummaries) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));  // Item 2 pinned at append.
  auto pinned = storage_->SetPinned(ctx_, Key("c"), 3, true);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_TRUE(pinned->data.pinned);
  EXPECT_EQ(pinned->data.content, "m3");
  ASSERT_TRUE(storage_->SetPinned(ctx_, Key("c"), 2, false).ok());
  auto conv = storage_->GetConversation(ctx_, Key("c"));
  EXPECT_EQ(conv->version, 1);
  EXPECT_EQ(conv->compaction_version, 2);
  // Behind a marker, the pinned item stays in the view; the unpinned does not.
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 4, "summary of 1-4");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  auto snap = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_THAT(Sequences(snap->pinned_items), ElementsAre(3));
  // The history shows the pins as they now are.
  auto items = ItemRows(*storage_, ctx_, Key("c"), 0, 10);
  ASSERT_TRUE(items.ok());
  EXPECT_FALSE((*items)[1].data.pinned);
  EXPECT_TRUE((*items)[2].data.pinned);
  // Unknown items and markers cannot be pinned.
  EXPECT_EQ(storage_->SetPinned(ctx_, Key("c"), 99, true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->SetPinned(ctx_, Key("c"), 7, true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->SetPinned(ctx_, Key("other"), 1, true).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StorageConformanceTest, StaleCompactionIsAbortedAndWritesNothing) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  commit.expected_summarized_through = 2;  // Not what the conversation has.
  commit.chunk = Chunk(3, 4, "late");
  commit.events = {Event("completed")};
  auto r = storage_->CommitCompaction(ctx_, commit);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  auto conv = storage_->GetConversation(ctx_, Key("c"));
  EXPECT_EQ(conv->version, 1);
  EXPECT_EQ(conv->compaction_version, 0);
  EXPECT_EQ(conv->item_count, 6);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, Key("c"), true)->empty());
  EXPECT_TRUE(AllCompactionEvents(*storage_, ctx_, Key("c"))->empty());
}

TEST_P(StorageConformanceTest, MalformedCompactionIsInvalid) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  commit.new_prune_boundary = 9;  // Past the log.
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(),
            absl::StatusCode::kInvalidArgument);
  commit.new_prune_boundary = 2;
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  commit.expected_prune_boundary = 2;
  commit.new_prune_boundary = 1;  // Backwards.
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(),
            absl::StatusCode::kInvalidArgument);
  commit.new_prune_boundary = 2;
  commit.chunk = Chunk(2, 4, "gap");  // Must start right after what is summarized.
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StorageConformanceTest, FoldSupersedesChunksAndKeepsThem) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "first");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(3, 4, "second");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());

  CompactionCommit fold;
  fold.key = Key("c");
  fold.expected_summarized_through = 4;
  fold.supersedes = {1, 2};
  fold.chunk = Chunk(1, 4, "first and second");
  fold.events = {Event("folded")};
  auto folded = storage_->CommitCompaction(ctx_, fold);
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(folded->chunk_id, 3);

  auto active = AllSummaries(*storage_, ctx_, Key("c"), false);
  ASSERT_THAT(*active, SizeIs(1));
  EXPECT_EQ((*active)[0].text, "first and second");
  auto all = AllSummaries(*storage_, ctx_, Key("c"), true);
  ASSERT_THAT(*all, SizeIs(3));
  EXPECT_EQ((*all)[0].superseded_by, 3);
  EXPECT_EQ((*all)[1].superseded_by, 3);
  EXPECT_EQ((*all)[2].superseded_by, 0);
  auto snap = storage_->LoadContext(ctx_, Key("c"));
  EXPECT_EQ(snap->conversation.summarized_through, 4);
  ASSERT_THAT(snap->active_chunks, SizeIs(1));

  // Folding a chunk that is already superseded loses the race.
  fold.supersedes = {1, 3};
  EXPECT_EQ(storage_->CommitCompaction(ctx_, fold).status().code(), absl::StatusCode::kAborted);
}

TEST_P(StorageConformanceTest, DeleteRemovesSummariesAndEvents) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "x");
  commit.events = {Event("completed")};
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  ASSERT_TRUE(storage_->RecordCompactionEvents(ctx_, Key("c"), {Event("failed")}).ok());
  EXPECT_THAT(*AllCompactionEvents(*storage_, ctx_, Key("c")), SizeIs(2));
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("c")).ok());
  EXPECT_EQ(AllSummaries(*storage_, ctx_, Key("c"), true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->RecordCompactionEvents(ctx_, Key("c"), {Event("x")}).code(),
            absl::StatusCode::kNotFound);
  Create("c");
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, Key("c"), true)->empty());
}

TEST_P(StorageConformanceTest, CompactionLeaseIsExclusiveAndFencesCommits) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto a = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "replica-a", absl::Seconds(30));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  auto b = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "replica-b", absl::Seconds(30));
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value()) << "two holders at once";
  EXPECT_TRUE(storage_->GetConversation(ctx_, Key("c"))->lease_active);

  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "by a");
  commit.lease = **a;
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  ASSERT_TRUE(storage_->ReleaseCompactionLease(ctx_, Key("c"), **a).ok());
  EXPECT_FALSE(storage_->GetConversation(ctx_, Key("c"))->lease_active);

  b = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "replica-b", absl::Seconds(30));
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_GT((*b)->token, (*a)->token);
  // A stale holder cannot commit: its token is not the latest.
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(3, 4, "late a");
  auto stale = storage_->CommitCompaction(ctx_, commit);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  // Releasing with an old lease leaves the new one alone.
  ASSERT_TRUE(storage_->ReleaseCompactionLease(ctx_, Key("c"), **a).ok());
  EXPECT_TRUE(storage_->GetConversation(ctx_, Key("c"))->lease_active);
  commit.lease = **b;
  commit.chunk = Chunk(3, 4, "by b");
  EXPECT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  EXPECT_EQ(storage_->TryAcquireCompactionLease(ctx_, Key("missing"), "x", absl::Seconds(1))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// A conversation deleted and created again under the same id starts its
// lease tokens afresh: a compaction that holds a lease on the old one must
// not commit into the new one, whose own lease may have the same token.
TEST_P(StorageConformanceTest, ALeaseOnADeletedConversationFencesNothingOfItsSuccessor) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto old_lease = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "old", absl::Seconds(30));
  ASSERT_TRUE(old_lease.ok() && old_lease->has_value());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("c")).ok());
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto new_lease = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "new", absl::Seconds(30));
  ASSERT_TRUE(new_lease.ok() && new_lease->has_value());
  EXPECT_NE((*new_lease)->incarnation, (*old_lease)->incarnation);
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "from the deleted conversation");
  commit.lease = **old_lease;
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, Key("c"), true)->empty());
  // Nor does giving the old lease back free the new one.
  ASSERT_TRUE(storage_->ReleaseCompactionLease(ctx_, Key("c"), **old_lease).ok());
  EXPECT_TRUE(storage_->GetConversation(ctx_, Key("c"))->lease_active);
  commit.lease = **new_lease;
  commit.chunk = Chunk(1, 2, "by the new holder");
  EXPECT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
}

// A holder that dies frees the lease when it expires; the old holder is then
// fenced out. Expiry is the backend's own clock, so this waits briefly.
TEST_P(StorageConformanceTest, ExpiredCompactionLeaseIsTakenOver) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto a = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "dead", absl::Milliseconds(100));
  ASSERT_TRUE(a.ok() && a->has_value());
  absl::SleepFor(absl::Milliseconds(250));
  EXPECT_FALSE(storage_->GetConversation(ctx_, Key("c"))->lease_active);
  auto b = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "alive", absl::Seconds(30));
  ASSERT_TRUE(b.ok() && b->has_value());
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "from the dead");
  commit.lease = **a;
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, Key("c"), true)->empty());
}

}  // namespace
}  // namespace convstate
