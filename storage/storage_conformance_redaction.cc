// The conformance suite (storage_conformance.h): redaction and erasure,
// down the lineage of continued conversations.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/sha256.h"
#include "storage/rules.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::SizeIs;

TEST_P(StorageConformanceTest, RedactionErasesItemsAndEveryChunkDerivedFromThem) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));  // m1 .. m6
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "summary of m1 and m2");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 1, marker 7
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(3, 4, "summary of m3 and m4");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 2, marker 8
  commit.expected_summarized_through = 4;
  commit.chunk = Chunk(1, 4, "fold of m1 to m4");
  commit.supersedes = {1, 2};
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 3, marker 9
  const int64_t before = storage_->GetConversation(ctx_, Key("c"))->compaction_version;

  RedactRequest req;
  req.key = Key("c");
  req.sequences = {3};
  req.tombstone = "[gone]";
  req.tombstone_tokens = 2;
  req.actor = "privacy-officer";
  req.reason = "erasure request";
  auto redacted = storage_->RedactItems(ctx_, req);
  ASSERT_TRUE(redacted.ok()) << redacted.status();
  ASSERT_THAT(redacted->items, SizeIs(1));
  const Item& item = redacted->items[0];
  EXPECT_EQ(item.sequence, 3);
  EXPECT_EQ(item.data.role, Role::kUser);
  EXPECT_EQ(item.data.content, "[gone]");
  EXPECT_EQ(item.data.token_count, 2);
  EXPECT_TRUE(item.redacted);
  EXPECT_EQ(item.redacted_digest, "");  // No key: nothing of the content is kept.
  // Chunk 2 holds item 3; the fold holds chunk 2; chunk 1 comes before.
  EXPECT_EQ(redacted->chunks_removed, 2);
  EXPECT_EQ(redacted->compaction_version, before + 1);
  // What replicas' copies of the history compare (services/api/history_cache).
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("c"))->redactions, 1);
  EXPECT_EQ(storage_->LoadContext(ctx_, Key("c"))->conversation.redactions, 1);
  auto chunks = AllSummaries(*storage_, ctx_, Key("c"), /*include_superseded=*/true);
  ASSERT_TRUE(chunks.ok());
  ASSERT_THAT(*chunks, SizeIs(3));
  EXPECT_EQ((*chunks)[0].text, "summary of m1 and m2");
  for (int i : {1, 2}) {
    EXPECT_EQ((*chunks)[i].text, "") << i;
    EXPECT_EQ((*chunks)[i].summarizer_model, kRedactedChunkModel);
    EXPECT_EQ((*chunks)[i].superseded_by, (*chunks)[i].chunk_id);
  }
  // Chunk 1 is active again, and the view starts after it: items 3 and 4
  // are live again.
  auto context = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(context.ok());
  ASSERT_THAT(context->active_chunks, SizeIs(1));
  EXPECT_EQ(context->active_chunks[0].chunk_id, 1);
  EXPECT_EQ(context->conversation.summarized_through, 2);
  ASSERT_FALSE(context->live_items.empty());
  EXPECT_EQ(context->live_items[0].sequence, 3);
  EXPECT_EQ(context->live_items[0].data.content, "[gone]");
  auto events = AllCompactionEvents(*storage_, ctx_, Key("c"));
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().event, "items_redacted");
  EXPECT_THAT(events->back().detail, ::testing::HasSubstr("privacy-officer"));
  EXPECT_THAT(events->back().detail, ::testing::HasSubstr("erasure request"));
  // Again: nothing more happens to the item.
  req.tombstone_tokens = 5;
  auto again = storage_->RedactItems(ctx_, req);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->items[0].redacted);
  EXPECT_EQ(again->items[0].data.token_count, 2);
  EXPECT_EQ(again->chunks_removed, 0);
  // Markers and unknown items are refused, and change nothing.
  req.sequences = {7};
  EXPECT_EQ(storage_->RedactItems(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.sequences = {1, 99};
  EXPECT_EQ(storage_->RedactItems(ctx_, req).status().code(), absl::StatusCode::kNotFound);
  auto first = ItemRows(*storage_, ctx_, Key("c"), 0, 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)[0].data.content, "m1");
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("c"))->compaction_version, before + 2);
}

TEST_P(StorageConformanceTest, ARedactedItemKeepsOnlyAKeyedDigest) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  RedactRequest req;
  req.key = Key("c");
  req.sequences = {1, 3};
  req.tombstone = "[gone]";
  req.tombstone_tokens = 2;
  req.reason = "erasure";
  req.digest_key = std::string(32, 'k');
  auto redacted = storage_->RedactItems(ctx_, req);
  ASSERT_TRUE(redacted.ok()) << redacted.status();
  ASSERT_THAT(redacted->items, SizeIs(2));
  EXPECT_EQ(redacted->items[0].redacted_digest,
            "hmac-sha256:" + HmacSha256Hex(req.digest_key, "m1"));
  EXPECT_EQ(redacted->items[1].redacted_digest,
            "hmac-sha256:" + HmacSha256Hex(req.digest_key, "m3"));
  EXPECT_NE(redacted->items[0].redacted_digest, "hmac-sha256:" + Sha256::Hex("m1"));
  auto listed = ItemRows(*storage_, ctx_, Key("c"), 0, 10);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)[0].redacted_digest, redacted->items[0].redacted_digest);
  EXPECT_FALSE((*listed)[1].redacted);
  EXPECT_EQ((*listed)[1].redacted_digest, "");
}

// A compaction that read items before they were redacted must not commit
// what it made of them: the redaction takes its lease away.
TEST_P(StorageConformanceTest, ARedactionFencesOutTheCompactionRunningMeanwhile) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto lease = storage_->TryAcquireCompactionLease(ctx_, Key("c"), "slow", absl::Seconds(30));
  ASSERT_TRUE(lease.ok() && lease->has_value());
  RedactRequest req;
  req.key = Key("c");
  req.sequences = {1};
  req.tombstone = "[gone]";
  req.reason = "erasure";
  ASSERT_TRUE(storage_->RedactItems(ctx_, req).ok());
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 2, "a summary that quotes m1");
  commit.lease = **lease;
  EXPECT_EQ(storage_->CommitCompaction(ctx_, commit).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(AllSummaries(*storage_, ctx_, Key("c"), true)->empty());
}

// Chunks carried into a continued conversation are copies: a redaction of
// the source retires them too, down a chain of continuations, along with a
// fold that took one in; what that fold had replaced comes back.
TEST_P(StorageConformanceTest, ARedactionReachesTheItemsCarriedIntoContinuedConversations) {
  Create("a");
  AppendSix(*storage_, ctx_, Key("a"));  // m1 .. m6
  auto carry = [&](const std::string& id, const std::string& from,
                   std::vector<std::pair<int64_t, std::string>> items) {
    NewConversation nc;
    nc.key = Key(id);
    nc.model = "m";
    nc.continued_from = from;
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
    AppendRequest append;
    append.key = Key(id);
    for (const auto& [source_sequence, text] : items) {
      ItemData d = Message(Role::kUser, text);
      d.metadata[kContinuedFromSequenceKey] = absl::StrCat(source_sequence);
      append.items.push_back(d);
    }
    ASSERT_TRUE(storage_->AppendItems(ctx_, append).ok());
  };
  carry("b", "a", {{2, "m2"}, {5, "m5"}});  // b's 1 and 2
  carry("c", "b", {{2, "m5"}});             // c's 1, from b's 2 (a's 5)
  AppendSix(*storage_, ctx_, Key("c"));     // c's own, 2 .. 7
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 3, "c's summary, with m5");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());

  RedactRequest req;
  req.key = Key("a");
  req.sequences = {5};
  req.tombstone = "[gone]";
  auto redacted = storage_->RedactItems(ctx_, req);
  ASSERT_TRUE(redacted.ok()) << redacted.status();
  EXPECT_EQ(redacted->continued_chunks_removed, 1);  // c's summary held the copy.
  auto b = ItemRows(*storage_, ctx_, Key("b"), 0, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].data.content, "m2");  // Not erased: another item.
  EXPECT_EQ((*b)[1].data.content, "[gone]");
  EXPECT_TRUE((*b)[1].redacted);
  auto c = ItemRows(*storage_, ctx_, Key("c"), 0, 10);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].data.content, "[gone]");
  auto chunks = AllSummaries(*storage_, ctx_, Key("c"), /*include_superseded=*/true);
  ASSERT_TRUE(chunks.ok());
  ASSERT_THAT(*chunks, SizeIs(1));
  EXPECT_EQ((*chunks)[0].text, "");
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("c"))->summarized_through, 0);
}

// Continuations are followed by incarnation: a conversation deleted and
// created again under its id is another one. d continues c; c is deleted
// and created again continuing d: a redaction of the new c ends (no loop),
// and leaves what d carried from the old c alone. Continuations recorded
// without an incarnation are followed by id, each conversation once.
TEST_P(StorageConformanceTest, ARedactionFollowsTheLineageByIncarnationAndEnds) {
  for (const bool by_incarnation : {true, false}) {
    SCOPED_TRACE(by_incarnation ? "by incarnation" : "by id");
    const std::string c = by_incarnation ? "c1" : "c2";
    const std::string d = by_incarnation ? "d1" : "d2";
    Create(c);
    AppendSix(*storage_, ctx_, Key(c));
    const int64_t old_c = storage_->GetConversation(ctx_, Key(c))->storage_key;
    NewConversation nd;
    nd.key = Key(d);
    nd.model = "m";
    nd.continued_from = c;
    if (by_incarnation) nd.continued_from_key = old_c;
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nd).ok());
    AppendRequest carry;
    carry.key = Key(d);
    ItemData copy = Message(Role::kUser, "m2, carried");
    copy.metadata[kContinuedFromSequenceKey] = "2";
    carry.items.push_back(copy);
    ASSERT_TRUE(storage_->AppendItems(ctx_, carry).ok());
    ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key(c)).ok());
    NewConversation nc;
    nc.key = Key(c);
    nc.model = "m";
    nc.continued_from = d;
    if (by_incarnation) nc.continued_from_key = storage_->GetConversation(ctx_, Key(d))->storage_key;
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
    AppendSix(*storage_, ctx_, Key(c));
    ASSERT_NE(storage_->GetConversation(ctx_, Key(c))->storage_key, old_c);

    RedactRequest req;
    req.key = Key(c);
    req.sequences = {2};
    req.tombstone = "[gone]";
    CallContext bounded;
    bounded.deadline = absl::Now() + absl::Seconds(20);
    auto redacted = storage_->RedactItems(bounded, req);
    ASSERT_TRUE(redacted.ok()) << redacted.status();
    auto carried = ItemRows(*storage_, ctx_, Key(d), 0, 10);
    ASSERT_TRUE(carried.ok());
    // By incarnation, d's copy came from another c: it stays. By id, the
    // walk reaches d (it cannot tell) and still ends.
    EXPECT_EQ((*carried)[0].redacted, !by_incarnation);
  }
}

TEST_P(StorageConformanceTest, ARedactionReachesTheCopiesInContinuedConversations) {
  Create("a");
  AppendSix(*storage_, ctx_, Key("a"));
  CompactionCommit commit;
  commit.key = Key("a");
  commit.chunk = Chunk(1, 2, "summary of m1 and m2");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // a's chunk 1
  auto source = storage_->LoadContext(ctx_, Key("a"));
  ASSERT_TRUE(source.ok());
  auto continue_from = [&](const std::string& id, const std::string& from,
                           const std::vector<SummaryChunk>& active) {
    NewConversation nc;
    nc.key = Key(id);
    nc.model = "m";
    nc.continued_from = from;
    for (const SummaryChunk& c : active) {
      SummaryChunk carried = c;
      if (carried.source_conversation_id.empty()) {
        carried.source_conversation_id = from;
        carried.source_chunk_id = c.chunk_id;
      }
      carried.from_sequence = carried.through_sequence = 0;
      nc.carried_chunks.push_back(carried);
    }
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  };
  continue_from("b", "a", source->active_chunks);  // b's chunk 1 from (a, 1)
  // b summarizes its own turns, then folds them with the carried chunk.
  AppendSix(*storage_, ctx_, Key("b"));
  commit.key = Key("b");
  commit.chunk = Chunk(1, 2, "b's own summary");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // b's chunk 2
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(0, 2, "fold of a's copy and b's own");
  commit.supersedes = {1, 2};
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // b's chunk 3
  auto b_now = storage_->LoadContext(ctx_, Key("b"));
  ASSERT_TRUE(b_now.ok());
  continue_from("c", "b", b_now->active_chunks);  // c's chunk 1 from (b, 3)
  Create("unrelated");
  const int64_t b_version = storage_->GetConversation(ctx_, Key("b"))->compaction_version;

  RedactRequest req;
  req.key = Key("a");
  req.sequences = {1};
  req.tombstone = "[gone]";
  req.reason = "erasure";
  req.actor = "privacy-officer";
  auto redacted = storage_->RedactItems(ctx_, req);
  ASSERT_TRUE(redacted.ok()) << redacted.status();
  EXPECT_EQ(redacted->chunks_removed, 1);
  // b's copy and b's fold of it, and c's copy of that fold.
  EXPECT_EQ(redacted->continued_chunks_removed, 3);
  auto b = storage_->LoadContext(ctx_, Key("b"));
  ASSERT_TRUE(b.ok());
  ASSERT_THAT(b->active_chunks, SizeIs(1));
  EXPECT_EQ(b->active_chunks[0].text, "b's own summary");  // Back: only the fold had replaced it.
  EXPECT_EQ(b->conversation.summarized_through, 2);
  EXPECT_GT(b->conversation.compaction_version, b_version);
  auto b_chunks = AllSummaries(*storage_, ctx_, Key("b"), true);
  ASSERT_TRUE(b_chunks.ok());
  for (const SummaryChunk& chunk : *b_chunks) {
    if (chunk.chunk_id != 2) {
      EXPECT_EQ(chunk.text, "") << chunk.chunk_id;
      EXPECT_TRUE(chunk.facts.empty());
    }
  }
  auto c = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->active_chunks.empty());
  auto events = AllCompactionEvents(*storage_, ctx_, Key("c"));
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().event, "items_redacted");
  EXPECT_THAT(events->back().detail, ::testing::HasSubstr("privacy-officer"));
  EXPECT_TRUE(AllCompactionEvents(*storage_, ctx_, Key("unrelated"))->empty());
}

// An erasure reaches what was derived from the erased items: the
// conversation's proposals are deleted (and one made before the erasure
// cannot be stored after it), and the audit rows' fact texts of them give
// way to the tombstone.
TEST_P(StorageConformanceTest, AnErasureDeletesProposalsAndTheFactTextsOfAuditRows) {
  Create("c");
  AppendRequest req;
  req.key = Key("c");
  req.items.push_back(Message(Role::kUser, "the vault token is hvs.SECRET-4711"));
  req.items.push_back(Message(Role::kAssistant, "Noted."));
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  const int64_t version = storage_->GetConversation(ctx_, Key("c"))->compaction_version;
  ASSERT_TRUE(storage_->SaveProposal(ctx_, Key("c"), "{\"summary\": \"hvs.SECRET-4711\"}",
                                     absl::Minutes(10), {}, version)
                  .ok());
  CompactionEvent lost;
  lost.event = "completed";
  lost.tier = "summarize";
  lost.detail = R"({"lost_facts": [{"sequence": 1, "text": "hvs.SECRET-4711"},)"
                R"( {"sequence": 2, "text": "Noted."}], "model": "extractive"})";
  CompactionEvent dropped;
  dropped.event = "facts_dropped";
  dropped.tier = "summarize";
  dropped.detail = R"({"dropped": [{"sequence": 1, "text": "hvs.SECRET-4711"}], "facts": 1})";
  ASSERT_TRUE(storage_->RecordCompactionEvents(ctx_, Key("c"), {lost, dropped}).ok());

  RedactRequest erase;
  erase.key = Key("c");
  erase.sequences = {1};
  erase.tombstone = "[erased]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, erase).ok());
  EXPECT_EQ(storage_->GetProposal(ctx_, Key("c"), 1).status().code(), absl::StatusCode::kNotFound);
  auto events = AllCompactionEvents(*storage_, ctx_, Key("c"));
  ASSERT_TRUE(events.ok());
  int checked = 0;
  for (const CompactionEvent& e : *events) {
    EXPECT_EQ(e.detail.find("SECRET"), std::string::npos) << e.event << " " << e.detail;
    if (e.event == "completed" || e.event == "facts_dropped") {
      ++checked;
      EXPECT_NE(e.detail.find("[erased]"), std::string::npos) << e.detail;
    }
    if (e.event == "completed") {
      EXPECT_NE(e.detail.find("Noted."), std::string::npos) << e.detail;
    }
  }
  EXPECT_EQ(checked, 2);
  // A dry run made before the erasure cannot be stored after it.
  EXPECT_EQ(storage_->SaveProposal(ctx_, Key("c"), "{\"summary\": \"hvs.SECRET-4711\"}",
                                   absl::Minutes(10), {}, version)
                .status()
                .code(),
            absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace convstate
