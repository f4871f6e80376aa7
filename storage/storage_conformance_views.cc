// The conformance suite (storage_conformance.h): what views are built
// from: token counts, overflow, updates, view states, loads since a snapshot.

#include <string>
#include <vector>

#include "storage/context_delta.h"
#include "storage/rules.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

TEST_P(StorageConformanceTest, TokenCountsAndCorrectionAreKept) {
  NewConversation nc;
  nc.key = Key("counted");
  nc.model = "m";
  nc.system_prompt = "sys";
  nc.system_prompt_tokens = 10;
  nc.pinned_instructions_tokens = 5;
  ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  AppendRequest req;
  req.key = nc.key;
  req.items = {Message(Role::kUser, "a"), Message(Role::kAssistant, "b")};
  req.items[0].token_count = 85;
  req.items[1].token_count = 15;
  // Storage estimates the call's prompt from the locked row: system 10 +
  // pinned 5 + stored 0 + the user's 85 (not the assistant's output) = 100.
  // The provider counted twice that: the factor moves a third of the way
  // (UpdateCorrection's weight) from 1 towards 2.
  req.usage = UsageReport{200, 20, 0, 0, /*estimated, filled in by storage=*/0, /*correct=*/true};
  req.idempotency_key = "k";
  req.request_fingerprint = "fp";
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  auto c = storage_->GetConversation(ctx_, nc.key);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->system_prompt_tokens, 10);
  EXPECT_EQ(c->pinned_instructions_tokens, 5);
  EXPECT_EQ(c->item_tokens, 100);
  EXPECT_DOUBLE_EQ(c->token_correction, UpdateCorrection(1.0, 200, 100));
  EXPECT_GT(c->token_correction, 1.0);

  // A replay changes nothing; a report for an exact tokenizer is recorded
  // but moves nothing.
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  req.idempotency_key = "k2";
  req.usage->correct = false;
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  c = storage_->GetConversation(ctx_, nc.key);
  EXPECT_EQ(c->item_tokens, 200);
  EXPECT_DOUBLE_EQ(c->token_correction, UpdateCorrection(1.0, 200, 100));
  auto snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->conversation.system_prompt_tokens, 10);
  EXPECT_DOUBLE_EQ(snap->conversation.token_correction, c->token_correction);
}

TEST_P(StorageConformanceTest, ProviderOverflowRaisesTheCorrectionAndIsAudited) {
  NewConversation nc;
  nc.key = Key("refused");
  nc.model = "m";
  auto created = storage_->CreateConversation(ctx_, nc);
  ASSERT_TRUE(created.ok());
  EXPECT_DOUBLE_EQ(created->overflow_correction, 1.0);
  CompactionEvent event;
  event.event = "provider_overflow";
  event.tokens_before = 1000;
  event.tokens_after = 1300;
  event.detail = R"({"reported_tokens":1300})";
  EXPECT_EQ(created->prompt_limit, 0);
  auto c = storage_->RecordProviderOverflow(ctx_, nc.key, 1.3, 900, event);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->overflow_correction, 1.3);
  EXPECT_EQ(c->prompt_limit, 900);
  EXPECT_EQ(c->compaction_version, created->compaction_version + 1);
  EXPECT_EQ(c->version, created->version);  // Not an append.
  // The correction is never lowered, the limit never raised.
  c = storage_->RecordProviderOverflow(ctx_, nc.key, 1.1, 950, event);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->overflow_correction, 1.3);
  EXPECT_EQ(c->prompt_limit, 900);
  c = storage_->RecordProviderOverflow(ctx_, nc.key, 1.5, 800, event);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->overflow_correction, 1.5);
  EXPECT_EQ(c->prompt_limit, 800);
  auto snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok());
  EXPECT_DOUBLE_EQ(snap->conversation.overflow_correction, 1.5);
  EXPECT_EQ(snap->conversation.prompt_limit, 800);
  auto events = AllCompactionEvents(*storage_, ctx_, nc.key);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ(events->front().event, "provider_overflow");
  EXPECT_EQ(events->front().tokens_after, 1300);
  EXPECT_TRUE(absl::IsNotFound(
      storage_->RecordProviderOverflow(ctx_, Key("nobody"), 1.2, 100, event).status()));
}

TEST_P(StorageConformanceTest, UpdateReplacesWhatIsSetAndRecountsAreStored) {
  NewConversation nc;
  nc.key = Key("updated");
  nc.model = "small";
  nc.system_prompt = "old prompt";
  nc.system_prompt_tokens = 3;
  nc.count_encoding = "approximate:2";
  auto created = storage_->CreateConversation(ctx_, nc);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->count_encoding, "approximate:2");
  AppendRequest req;
  req.key = nc.key;
  req.items = {Message(Role::kUser, "hello there")};
  req.items[0].token_count = 8;
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());

  ConversationUpdate u;
  u.model = "large";
  u.system_prompt_tokens = 3;
  u.pinned_instructions_tokens = 0;
  u.count_encoding = "approximate:2";
  u.reset_overflow = true;
  u.event.event = "conversation_updated";
  CompactionEvent refused;
  refused.event = "provider_overflow";
  ASSERT_TRUE(storage_->RecordProviderOverflow(ctx_, nc.key, 1.5, 100, refused).ok());
  auto c = storage_->UpdateConversation(ctx_, nc.key, u);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "large");
  EXPECT_EQ(c->system_prompt, "old prompt");  // Not set: kept.
  EXPECT_EQ(c->version, created->version + 1);  // The append only.
  EXPECT_EQ(c->compaction_version, created->compaction_version + 2);
  EXPECT_DOUBLE_EQ(c->overflow_correction, 1.0);  // A new model starts afresh.
  EXPECT_EQ(c->prompt_limit, 0);

  TokenRecount recount;
  recount.count_encoding = "o200k_base";
  recount.items = {{1, 3}};
  ASSERT_TRUE(storage_->SaveTokenCounts(ctx_, nc.key, recount).ok());
  auto snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->conversation.count_encoding, "o200k_base");
  ASSERT_EQ(snap->live_items.size(), 1u);
  EXPECT_EQ(snap->live_items[0].data.token_count, 3);
  auto events = AllCompactionEvents(*storage_, ctx_, nc.key);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().event, "conversation_updated");
  EXPECT_TRUE(absl::IsNotFound(storage_->UpdateConversation(ctx_, Key("nobody"), u).status()));
}

TEST_P(StorageConformanceTest, AnUpdateMadeForAnotherStateIsAborted) {
  const Conversation c = Create("u");
  ConversationUpdate stale;
  stale.expected_compaction_version = c.compaction_version;
  stale.system_prompt = "first";
  ASSERT_TRUE(storage_->UpdateConversation(ctx_, Key("u"), stale).ok());
  // Counted for the conversation before "first" landed: refused, nothing written.
  stale.system_prompt = "second";
  auto refused = storage_->UpdateConversation(ctx_, Key("u"), stale);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted) << refused.status();
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("u"))->system_prompt, "first");
}

TEST_P(StorageConformanceTest, LoadContextAtRebuildsWhatAViewWasBuiltFromAtAVersion) {
  NewConversation nc;
  nc.key = Key("history");
  nc.model = "m";
  nc.system_prompt = "first prompt";
  ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  auto append = [&](const std::string& text) {
    AppendRequest req;
    req.key = nc.key;
    req.items = {Message(Role::kUser, text), Message(Role::kAssistant, "ok")};
    ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  };
  append("one");  // v1: items 1, 2
  append("two");  // v2: items 3, 4
  CompactionCommit commit;
  commit.key = nc.key;
  SummaryChunk chunk;
  chunk.from_sequence = 1;
  chunk.through_sequence = 2;
  chunk.text = "the first turn";
  chunk.token_count = 3;
  chunk.summarizer_model = "s";
  chunk.prompt_version = "p";
  commit.chunk = chunk;
  auto committed = storage_->CommitCompaction(ctx_, commit);  // cv1 at v2; marker 5.
  ASSERT_TRUE(committed.ok()) << committed.status();
  append("three");  // v3: items 6, 7

  auto v1 = storage_->LoadContextAt(ctx_, nc.key, 1, -1);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_TRUE(v1->active_chunks.empty());
  ASSERT_EQ(v1->live_items.size(), 2u);
  EXPECT_EQ(v1->conversation.version, 1);
  EXPECT_EQ(v1->conversation.system_prompt, "first prompt");

  auto before = storage_->LoadContextAt(ctx_, nc.key, 2, 0);  // Before the summary.
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(before->active_chunks.empty());
  EXPECT_EQ(before->live_items.size(), 4u);
  auto after = storage_->LoadContextAt(ctx_, nc.key, 2, -1);  // The last state of v2.
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->conversation.compaction_version, committed->compaction_version);
  ASSERT_EQ(after->active_chunks.size(), 1u);
  EXPECT_EQ(after->conversation.summarized_through, 2);
  auto v3 = storage_->LoadContextAt(ctx_, nc.key, 3, -1);
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->live_items.back().sequence, 7);
  EXPECT_EQ(v3->live_items.front().sequence, 3);

  EXPECT_TRUE(absl::IsOutOfRange(storage_->LoadContextAt(ctx_, nc.key, 9, -1).status()));
  EXPECT_TRUE(absl::IsOutOfRange(storage_->LoadContextAt(ctx_, nc.key, 1, 1).status()));
  EXPECT_TRUE(absl::IsNotFound(storage_->LoadContextAt(ctx_, Key("none"), 1, -1).status()));
}

// The view state a commit records with it (a fold that also pins an item
// it passes) rebuilds the context as it stands at that version.
TEST_P(StorageConformanceTest, TheViewStateOfAFoldThatPinsRebuildsTheContextAsItStands) {
  Create("vs");
  AppendSix(*storage_, ctx_, Key("vs"));  // m1 .. m6, m2 pinned
  CompactionCommit commit;
  commit.key = Key("vs");
  commit.chunk = Chunk(1, 2, "summary of m1 and m2");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 1
  commit.expected_summarized_through = 2;
  commit.chunk = Chunk(3, 4, "summary of m3 and m4");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // chunk 2
  commit.expected_summarized_through = 4;
  commit.chunk = Chunk(1, 4, "fold of m1 to m4");
  commit.supersedes = {1, 2};
  commit.pins = {3};
  auto folded = storage_->CommitCompaction(ctx_, commit);  // chunk 3
  ASSERT_TRUE(folded.ok()) << folded.status();

  auto now = storage_->LoadContext(ctx_, Key("vs"));
  ASSERT_TRUE(now.ok()) << now.status();
  auto at = storage_->LoadContextAt(ctx_, Key("vs"), now->conversation.version, -1);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->conversation.compaction_version, folded->compaction_version);
  auto ids = [](const std::vector<SummaryChunk>& chunks) {
    std::vector<int64_t> out;
    for (const SummaryChunk& c : chunks) out.push_back(c.chunk_id);
    return out;
  };
  auto sequences = [](const std::vector<Item>& items) {
    std::vector<int64_t> out;
    for (const Item& i : items) out.push_back(i.sequence);
    return out;
  };
  EXPECT_THAT(ids(at->active_chunks), ElementsAre(3));
  EXPECT_EQ(ids(at->active_chunks), ids(now->active_chunks));
  EXPECT_THAT(sequences(at->pinned_items), ElementsAre(2, 3));
  EXPECT_EQ(sequences(at->pinned_items), sequences(now->pinned_items));
  EXPECT_EQ(sequences(at->live_items), sequences(now->live_items));
}

// A compaction policy's text counts like a prompt's: in the conversation's
// stored bytes (what a tenant's byte limit holds) and in a list page's
// byte budget.
TEST_P(StorageConformanceTest, APolicysTextCountsInStoredBytesAndListPages) {
  for (const char* id : {"p1", "p2"}) {
    NewConversation nc;
    nc.key = Key(id);
    nc.model = "m";
    CompactionPolicy policy;
    policy.instructions = std::string(50000, 'i');
    policy.keep = {KeepRule{std::string(2000, 'k'), {}, {}}};
    nc.overrides.policy = policy;
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  }
  auto usage = storage_->GetTenantUsage(ctx_, Key("p1").tenant_id);
  ASSERT_TRUE(usage.ok());
  EXPECT_GE(usage->stored_bytes, 2 * 52000);
  auto page = storage_->ListConversations(ctx_, Key("p1").tenant_id, "", PageLimit{10, 10000});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->rows.size(), 1u);
  EXPECT_TRUE(page->more);
}

// What a held snapshot needs to catch up: nothing, the appended items, or
// everything; brought up to date it equals a fresh LoadContext.
TEST_P(StorageConformanceTest, LoadContextSinceSendsOnlyWhatChanged) {
  Create("c");
  AppendSix(*storage_, ctx_, Key("c"));
  auto held = storage_->LoadContext(ctx_, Key("c"));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_GT(held->conversation.storage_key, 0);
  auto same_as_fresh = [&](const ContextSnapshot& got) {
    auto fresh = storage_->LoadContext(ctx_, Key("c"));
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_EQ(got.conversation.version, fresh->conversation.version);
    EXPECT_EQ(got.conversation.compaction_version, fresh->conversation.compaction_version);
    EXPECT_EQ(got.conversation.item_tokens, fresh->conversation.item_tokens);
    EXPECT_EQ(got.conversation.item_count, fresh->conversation.item_count);
    EXPECT_EQ(got.conversation.last_sequence, fresh->conversation.last_sequence);
    EXPECT_EQ(got.conversation.last_turn_index, fresh->conversation.last_turn_index);
    EXPECT_EQ(got.conversation.token_correction, fresh->conversation.token_correction);
    EXPECT_EQ(got.conversation.update_time, fresh->conversation.update_time);
    EXPECT_EQ(got.conversation.system_prompt, fresh->conversation.system_prompt);
    EXPECT_EQ(Sequences(got.pinned_items), Sequences(fresh->pinned_items));
    EXPECT_EQ(Sequences(got.live_items), Sequences(fresh->live_items));
    ASSERT_EQ(got.live_items.size(), fresh->live_items.size());
    for (size_t i = 0; i < got.live_items.size(); ++i) {
      EXPECT_EQ(got.live_items[i].data.content, fresh->live_items[i].data.content);
      EXPECT_EQ(got.live_items[i].data.pinned, fresh->live_items[i].data.pinned);
    }
    ASSERT_EQ(got.active_chunks.size(), fresh->active_chunks.size());
    for (size_t i = 0; i < got.active_chunks.size(); ++i) {
      EXPECT_EQ(got.active_chunks[i].text, fresh->active_chunks[i].text);
    }
  };

  auto delta = storage_->LoadContextSince(ctx_, Key("c"), &held->conversation);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->kind, ContextDelta::Kind::kUnchanged);
  EXPECT_TRUE(delta->snapshot.live_items.empty());
  EXPECT_EQ(ApplyDelta(*held, *delta).conversation.version, 1);

  AppendText(Key("c"), "seven");
  AppendText(Key("c"), "eight");
  delta = storage_->LoadContextSince(ctx_, Key("c"), &held->conversation);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->kind, ContextDelta::Kind::kAppended);
  EXPECT_THAT(Sequences(delta->snapshot.live_items), ElementsAre(7, 8));
  EXPECT_EQ(delta->snapshot.live_items[1].data.content, "eight");
  EXPECT_EQ(delta->snapshot.conversation.version, 3);
  EXPECT_TRUE(delta->snapshot.active_chunks.empty());
  ContextSnapshot caught_up = ApplyDelta(*held, *std::move(delta));
  same_as_fresh(caught_up);

  // A compaction (and a pin behind the marker) reloads everything.
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 4, "summary of 1-4");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  ASSERT_TRUE(storage_->SetPinned(ctx_, Key("c"), 3, true).ok());
  delta = storage_->LoadContextSince(ctx_, Key("c"), &caught_up.conversation);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->kind, ContextDelta::Kind::kReloaded);
  EXPECT_THAT(Sequences(delta->snapshot.pinned_items), ElementsAre(2, 3));
  ASSERT_THAT(delta->snapshot.active_chunks, SizeIs(1));
  caught_up = ApplyDelta(caught_up, *std::move(delta));
  same_as_fresh(caught_up);
  delta = storage_->LoadContextSince(ctx_, Key("c"), nullptr);
  ASSERT_TRUE(delta.ok());
  EXPECT_EQ(delta->kind, ContextDelta::Kind::kReloaded);
  same_as_fresh(delta->snapshot);

  // Another conversation under the same id is never taken for the held one.
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("c")).ok());
  Create("c");
  delta = storage_->LoadContextSince(ctx_, Key("c"), &caught_up.conversation);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->kind, ContextDelta::Kind::kReloaded);
  EXPECT_TRUE(delta->snapshot.live_items.empty());
  EXPECT_TRUE(delta->snapshot.active_chunks.empty());
  EXPECT_NE(delta->snapshot.conversation.storage_key, caught_up.conversation.storage_key);
  EXPECT_TRUE(absl::IsNotFound(
      storage_->LoadContextSince(ctx_, Key("none"), &caught_up.conversation).status()));
}

}  // namespace
}  // namespace convstate
