// The conformance suite (storage_conformance.h): forks. A fork holds the
// source's items through the fork point and the compaction state the source
// had when that item was its last; the two go on apart; an erasure reaches
// every copy of an item and nothing else.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;

// "history": v1 items 1-2, v2 items 3-4, a summary of 1-2 (marker 5), v3
// items 6-7.
void History(Storage& storage, const CallContext& ctx, const ConversationKey& key) {
  NewConversation nc;
  nc.key = key;
  nc.model = "m";
  nc.system_prompt = "first prompt";
  nc.metadata = {{"team", "core"}};
  ASSERT_TRUE(storage.CreateConversation(ctx, nc).ok());
  auto append = [&](const std::string& text) {
    AppendRequest req;
    req.key = key;
    req.items = {Message(Role::kUser, text), Message(Role::kAssistant, "ok " + text)};
    ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
  };
  append("one");
  append("two");
  CompactionCommit commit;
  commit.key = key;
  SummaryChunk chunk;
  chunk.from_sequence = 1;
  chunk.through_sequence = 2;
  chunk.text = "the first turn";
  chunk.token_count = 3;
  chunk.summarizer_model = "s";
  chunk.prompt_version = "p";
  commit.chunk = chunk;
  ASSERT_TRUE(storage.CommitCompaction(ctx, commit).ok());
  append("three");
}

// The items but summary markers: a marker the source wrote after the fork
// point is not the fork's (views show no marker).
std::vector<Item> Content(const std::vector<Item>& items) {
  std::vector<Item> out;
  for (const Item& item : items) {
    if (item.data.kind != ItemKind::kSummaryMarker) out.push_back(item);
  }
  return out;
}

std::vector<std::string> Contents(const std::vector<Item>& items) {
  std::vector<std::string> out;
  for (const Item& item : items) out.push_back(item.data.content);
  return out;
}

// `continued`, continued from `source`, its first item a carried copy of
// the source's item 3 ("two"), then `more`.
void ContinueCarryingItem3(Storage& storage, const CallContext& ctx,
                           const ConversationKey& source, const ConversationKey& continued,
                           std::vector<ItemData> more) {
  NewConversation nc;
  nc.key = continued;
  nc.model = "m";
  nc.continued_from = source.conversation_id;
  nc.continued_from_key = storage.GetConversation(ctx, source)->storage_key;
  ASSERT_TRUE(storage.CreateConversation(ctx, nc).ok());
  AppendRequest carried;
  carried.key = continued;
  ItemData copy = Message(Role::kUser, "two");
  copy.metadata[kContinuedFromSequenceKey] = "3";
  carried.items = {copy};
  for (ItemData& item : more) carried.items.push_back(std::move(item));
  ASSERT_TRUE(storage.AppendItems(ctx, carried).ok());
}

std::vector<Item> AllItems(Storage& storage, const CallContext& ctx, const ConversationKey& key) {
  auto page = storage.ListItems(ctx, key, 0, PageLimit{1000, 1 << 30});
  EXPECT_TRUE(page.ok()) << page.status();
  return page.ok() ? page->rows : std::vector<Item>();
}

TEST_P(StorageConformanceTest, AForkStartsFromTheStateItsLastItemHadAndGoesOnApart) {
  History(*storage_, ctx_, Key("source"));
  ForkRequest fork;
  fork.source = Key("source");
  fork.fork = Key("fork");
  fork.at_sequence = 4;
  auto forked = storage_->ForkConversation(ctx_, fork);
  ASSERT_TRUE(forked.ok()) << forked.status();
  EXPECT_EQ(forked->forked_from, "source");
  EXPECT_EQ(forked->forked_at, 4);
  EXPECT_EQ(forked->forked_from_key, storage_->GetConversation(ctx_, Key("source"))->storage_key);
  EXPECT_EQ(forked->last_sequence, 4);
  EXPECT_EQ(forked->item_count, 4);
  EXPECT_EQ(forked->metadata.at("team"), "core");

  // What its views are built from is what the source's were at version 2.
  auto then = storage_->LoadContextAt(ctx_, Key("source"), 2, -1);
  auto now = storage_->LoadContext(ctx_, Key("fork"));
  ASSERT_TRUE(then.ok()) << then.status();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->conversation.summarized_through, then->conversation.summarized_through);
  EXPECT_EQ(now->conversation.system_prompt, "first prompt");
  ASSERT_EQ(now->active_chunks.size(), 1u);
  EXPECT_EQ(now->active_chunks[0].chunk_id, then->active_chunks[0].chunk_id);
  EXPECT_EQ(now->active_chunks[0].text, "the first turn");
  EXPECT_EQ(Sequences(now->live_items), Sequences(Content(then->live_items)));
  EXPECT_EQ(Contents(now->live_items), Contents(Content(then->live_items)));
  // And its own history at that version is the same.
  auto own = storage_->LoadContextAt(ctx_, Key("fork"), 2, -1);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(Sequences(own->live_items), Sequences(Content(then->live_items)));

  // Appends to one do not show in the other.
  AppendRequest req;
  req.key = Key("fork");
  req.items = {Message(Role::kUser, "in the fork")};
  auto appended = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->items[0].sequence, 5);
  req.key = Key("source");
  req.items = {Message(Role::kUser, "in the source")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  EXPECT_THAT(Contents(AllItems(*storage_, ctx_, Key("fork"))),
              ElementsAre("one", "ok one", "two", "ok two", "in the fork"));
  const std::vector<Item> source = AllItems(*storage_, ctx_, Key("source"));
  EXPECT_EQ(source.back().data.content, "in the source");
  EXPECT_EQ(source.size(), 8u);

  // Without a sequence: the whole of it, with its state now.
  fork.fork = Key("whole");
  fork.at_sequence = 0;
  fork.metadata = Metadata{{"branch", "b"}};
  auto whole = storage_->ForkConversation(ctx_, fork);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->last_sequence, 8);
  EXPECT_EQ(whole->metadata, (Metadata{{"branch", "b"}}));
  EXPECT_EQ(storage_->LoadContext(ctx_, Key("whole"))->live_items.size(),
            storage_->LoadContext(ctx_, Key("source"))->live_items.size());
}

TEST_P(StorageConformanceTest, AForkInsideAnAppendStartsFromTheStateBeforeIt) {
  History(*storage_, ctx_, Key("source"));
  ForkRequest fork;
  fork.source = Key("source");
  fork.fork = Key("fork");
  fork.at_sequence = 3;  // Item 4 came in the same append: the state of v1.
  auto forked = storage_->ForkConversation(ctx_, fork);
  ASSERT_TRUE(forked.ok()) << forked.status();
  auto now = storage_->LoadContext(ctx_, Key("fork"));
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->active_chunks.empty());
  EXPECT_EQ(now->conversation.summarized_through, 0);
  EXPECT_EQ(Sequences(now->live_items), (std::vector<int64_t>{1, 2, 3}));
  // Its own history at its version holds them (no item of a later version).
  auto at = storage_->LoadContextAt(ctx_, Key("fork"), forked->version, -1);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(Sequences(at->live_items), (std::vector<int64_t>{1, 2, 3}));
}

TEST_P(StorageConformanceTest, AForkIsRefusedWhereItCannotStart) {
  History(*storage_, ctx_, Key("source"));
  AppendRequest req;
  req.key = Key("source");
  ItemData call = Message(Role::kAssistant, "{}");
  call.kind = ItemKind::kToolCall;
  call.tool_name = "t";
  call.tool_call_id = "c1";
  ItemData result = Message(Role::kTool, "out");
  result.kind = ItemKind::kToolResult;
  result.tool_name = "t";
  result.tool_call_id = "c1";
  req.items = {Message(Role::kUser, "run it"), call, result};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());  // Items 8, 9, 10.
  ForkRequest fork;
  fork.source = Key("source");
  fork.fork = Key("fork");
  fork.at_sequence = 9;
  EXPECT_EQ(storage_->ForkConversation(ctx_, fork).status().code(),
            absl::StatusCode::kFailedPrecondition);
  fork.at_sequence = 11;
  EXPECT_EQ(storage_->ForkConversation(ctx_, fork).status().code(),
            absl::StatusCode::kOutOfRange);
  fork.at_sequence = 10;
  fork.source = Key("none");
  EXPECT_EQ(storage_->ForkConversation(ctx_, fork).status().code(),
            absl::StatusCode::kNotFound);
  fork.source = Key("source");
  fork.fork = Key("source");
  EXPECT_EQ(storage_->ForkConversation(ctx_, fork).status().code(),
            absl::StatusCode::kAlreadyExists);
  fork.fork = Key("fork");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("fork")).size(), 10u);
}

TEST_P(StorageConformanceTest, ListForksNamesTheForksOfThisIncarnation) {
  History(*storage_, ctx_, Key("source"));
  for (const char* id : {"b", "a", "c"}) {
    ForkRequest fork;
    fork.source = Key("source");
    fork.fork = Key(id);
    fork.at_sequence = 2;
    ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  }
  ForkRequest nested;
  nested.source = Key("a");
  nested.fork = Key("a2");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, nested).ok());
  auto page = storage_->ListForks(ctx_, Key("source"), "", PageLimit{2, 1 << 30});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->rows.size(), 2u);
  EXPECT_EQ(page->rows[0].key.conversation_id, "a");
  EXPECT_EQ(page->rows[1].key.conversation_id, "b");
  EXPECT_TRUE(page->more);
  page = storage_->ListForks(ctx_, Key("source"), "b", PageLimit{2, 1 << 30});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->rows.size(), 1u);
  EXPECT_EQ(page->rows[0].key.conversation_id, "c");
  // Deleted and created again under its id, it is another conversation.
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("source")).ok());
  History(*storage_, ctx_, Key("source"));
  page = storage_->ListForks(ctx_, Key("source"), "", PageLimit{10, 1 << 30});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->rows.empty());
  EXPECT_EQ(storage_->ListForks(ctx_, Key("none"), "", PageLimit{10, 1 << 30}).status().code(),
            absl::StatusCode::kNotFound);
  // The forks kept their items when their source went.
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a2")).size(), 2u);
}

TEST_P(StorageConformanceTest, AnErasureReachesEveryCopyOfAnItemAndNoOtherItem) {
  History(*storage_, ctx_, Key("source"));
  ForkRequest fork;
  fork.source = Key("source");
  fork.fork = Key("a");
  fork.at_sequence = 4;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  fork.source = Key("a");
  fork.fork = Key("b");
  fork.at_sequence = 2;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  // Item 1 erased in the middle one: its source and its fork lose it too.
  RedactRequest req;
  req.key = Key("a");
  req.sequences = {1};
  req.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, req).ok());
  for (const char* id : {"source", "a", "b"}) {
    EXPECT_EQ(AllItems(*storage_, ctx_, Key(id))[0].data.content, "[gone]") << id;
    EXPECT_TRUE(AllItems(*storage_, ctx_, Key(id))[0].redacted) << id;
    auto snap = storage_->LoadContext(ctx_, Key(id));
    ASSERT_TRUE(snap.ok());
    for (const SummaryChunk& c : snap->active_chunks) {
      EXPECT_NE(c.text, "the first turn") << id << ": the summary of the erased item stays";
    }
  }
  // An item a fork appended itself stays out of the others' erasures, and
  // theirs out of it.
  AppendRequest append;
  append.key = Key("b");
  append.items = {Message(Role::kUser, "b's own")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, append).ok());  // b's item 3.
  req.key = Key("b");
  req.sequences = {3};
  ASSERT_TRUE(storage_->RedactItems(ctx_, req).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[2].data.content, "two");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("source"))[2].data.content, "two");
  // Item 3 erased in the source: "a" shares it, "b" (forked at 2) does not.
  req.key = Key("source");
  req.sequences = {3};
  ASSERT_TRUE(storage_->RedactItems(ctx_, req).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[2].data.content, "[gone]");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("b"))[1].data.content, "ok one");
  // Item 6 exists in the source alone.
  req.sequences = {6};
  ASSERT_TRUE(storage_->RedactItems(ctx_, req).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a")).size(), 4u);
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[3].data.content, "ok two");
}

TEST_P(StorageConformanceTest, ARewindGoesBackAndKeepsTheRestInAFork) {
  History(*storage_, ctx_, Key("source"));  // Items 1-7 (marker 5), version 3.
  ForkRequest side;
  side.source = Key("source");
  side.fork = Key("side");
  side.at_sequence = 6;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, side).ok());
  RewindRequest rewind;
  rewind.key = Key("source");
  rewind.to_sequence = 4;
  rewind.abandoned = Key("rest");
  rewind.idempotency_key = "r1";
  auto rewound = storage_->RewindConversation(ctx_, rewind);
  ASSERT_TRUE(rewound.ok()) << rewound.status();
  EXPECT_FALSE(rewound->replayed);
  EXPECT_EQ(rewound->conversation.last_sequence, 4);
  EXPECT_EQ(rewound->conversation.item_count, 4);
  EXPECT_EQ(rewound->conversation.version, 4);
  EXPECT_EQ(rewound->abandoned.key.conversation_id, "rest");
  EXPECT_EQ(rewound->abandoned.forked_from, "source");
  EXPECT_EQ(rewound->abandoned.forked_at, 4);
  EXPECT_EQ(rewound->abandoned.last_sequence, 7);

  // The state at item 4 (the summary of 1-2 active), every later item gone
  // from it and kept in the abandoned branch.
  auto snap = storage_->LoadContext(ctx_, Key("source"));
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->conversation.summarized_through, 2);
  ASSERT_EQ(snap->active_chunks.size(), 1u);
  EXPECT_EQ(Sequences(snap->live_items), (std::vector<int64_t>{3, 4}));
  EXPECT_THAT(Contents(AllItems(*storage_, ctx_, Key("source"))),
              ElementsAre("one", "ok one", "two", "ok two"));
  EXPECT_THAT(Contents(Content(AllItems(*storage_, ctx_, Key("rest")))),
              ElementsAre("one", "ok one", "two", "ok two", "three", "ok three"));

  // It goes on from there.
  AppendRequest append;
  append.key = Key("source");
  append.items = {Message(Role::kUser, "another way")};
  auto appended = storage_->AppendItems(ctx_, append);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->items[0].sequence, 5);

  // Sent again: the same answer; the key for another rewind: refused.
  auto again = storage_->RewindConversation(ctx_, rewind);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->abandoned.key.conversation_id, "rest");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("source")).size(), 5u);
  rewind.to_sequence = 2;
  EXPECT_EQ(storage_->RewindConversation(ctx_, rewind).status().code(),
            absl::StatusCode::kAlreadyExists);

  // The fork made past the point is the abandoned branch's now.
  auto forks = storage_->ListForks(ctx_, Key("source"), "", PageLimit{10, 1 << 30});
  ASSERT_TRUE(forks.ok());
  ASSERT_EQ(forks->rows.size(), 1u);
  EXPECT_EQ(forks->rows[0].key.conversation_id, "rest");
  forks = storage_->ListForks(ctx_, Key("rest"), "", PageLimit{10, 1 << 30});
  ASSERT_TRUE(forks.ok());
  ASSERT_EQ(forks->rows.size(), 1u);
  EXPECT_EQ(forks->rows[0].key.conversation_id, "side");

  // Erasures follow what is shared: the new item 5 is the source's alone;
  // item 3 is in all three.
  RedactRequest redact;
  redact.key = Key("source");
  redact.sequences = {5};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("rest"))[5].data.content, "three");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("side"))[5].data.content, "three");
  redact.sequences = {3};
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  for (const char* id : {"source", "rest", "side"}) {
    EXPECT_EQ(AllItems(*storage_, ctx_, Key(id))[2].data.content, "[gone]") << id;
  }
}

TEST_P(StorageConformanceTest, ARewindIsRefusedWhereItCannotGo) {
  History(*storage_, ctx_, Key("source"));
  RewindRequest rewind;
  rewind.key = Key("source");
  rewind.abandoned = Key("rest");
  rewind.to_sequence = 7;
  EXPECT_EQ(storage_->RewindConversation(ctx_, rewind).status().code(),
            absl::StatusCode::kOutOfRange);
  rewind.to_sequence = 3;  // Inside an append: the state before it.
  rewind.key = Key("none");
  EXPECT_EQ(storage_->RewindConversation(ctx_, rewind).status().code(),
            absl::StatusCode::kNotFound);
  rewind.key = Key("source");
  rewind.abandoned = Key("source");
  EXPECT_EQ(storage_->RewindConversation(ctx_, rewind).status().code(),
            absl::StatusCode::kAlreadyExists);
  rewind.abandoned = Key("rest");
  auto rewound = storage_->RewindConversation(ctx_, rewind);
  ASSERT_TRUE(rewound.ok()) << rewound.status();
  auto snap = storage_->LoadContext(ctx_, Key("source"));
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->active_chunks.empty());
  EXPECT_EQ(Sequences(snap->live_items), (std::vector<int64_t>{1, 2, 3}));
  // Nothing of the source's was lost: the abandoned branch holds it all.
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("rest")).size(), 7u);
}

TEST_P(StorageConformanceTest, AForksSearchFindsTheItemsItHoldsAndNoOtherConversations) {
  NewConversation nc;
  nc.key = Key("source");
  nc.model = "m";
  ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  AppendRequest req;
  req.key = nc.key;
  req.items = {Message(Role::kUser, "Which host runs the ledger?"),
               Message(Role::kAssistant, "The ledger runs on zq-491.")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  ForkRequest fork;
  fork.source = nc.key;
  fork.fork = Key("fork");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  HistorySearch search;
  search.terms = {"zq-491"};
  for (const char* id : {"source", "fork"}) {
    search.key = Key(id);
    auto hits = storage_->SearchHistory(ctx_, search);
    ASSERT_TRUE(hits.ok()) << hits.status();
    EXPECT_EQ(hits->document_frequency["zq-491"], 1) << id;
    ASSERT_EQ(hits->found.size(), 1u) << id;
    EXPECT_EQ(hits->found[0].sequence, 2) << id;
  }
}

TEST_P(StorageConformanceTest, ARewindBelowItsForkPointKeepsErasuresToTheCopies) {
  History(*storage_, ctx_, Key("p"));  // Items 1-7 (marker 5).
  ForkRequest fork;
  fork.source = Key("p");
  fork.fork = Key("f");
  fork.at_sequence = 6;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  RewindRequest rewind;
  rewind.key = Key("f");
  rewind.to_sequence = 4;
  rewind.abandoned = Key("a");
  auto rewound = storage_->RewindConversation(ctx_, rewind);
  ASSERT_TRUE(rewound.ok()) << rewound.status();
  EXPECT_EQ(rewound->conversation.forked_at, 4);
  EXPECT_EQ(rewound->abandoned.forked_from, "p");
  EXPECT_EQ(rewound->abandoned.forked_at, 6);
  AppendRequest append;
  append.key = Key("f");
  append.items = {Message(Role::kUser, "f five"), Message(Role::kAssistant, "f six")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, append).ok());  // f's own 5 and 6.
  RedactRequest redact;
  redact.tombstone = "[gone]";
  redact.key = Key("f");
  redact.sequences = {6};
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("p"))[5].data.content, "three");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[5].data.content, "three");
  redact.key = Key("p");
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[5].data.content, "[gone]");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("f"))[4].data.content, "f five");
  redact.sequences = {3};
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  for (const char* id : {"p", "f", "a"}) {
    EXPECT_EQ(AllItems(*storage_, ctx_, Key(id))[2].data.content, "[gone]") << id;
  }
}

TEST_P(StorageConformanceTest, AForkAfterARewindStartsFromWhatWasDoneSince) {
  History(*storage_, ctx_, Key("s"));
  RewindRequest rewind;
  rewind.key = Key("s");
  rewind.to_sequence = 4;
  rewind.abandoned = Key("rest");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  ASSERT_TRUE(storage_->SetPinned(ctx_, Key("s"), 3, true).ok());
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("after");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  auto snap = storage_->LoadContext(ctx_, Key("after"));
  ASSERT_TRUE(snap.ok());
  bool pinned = false;
  for (const Item& item : snap->live_items) pinned |= item.sequence == 3 && item.data.pinned;
  EXPECT_TRUE(pinned) << "the pin set after the rewind is not in the fork";
}

TEST_P(StorageConformanceTest, ASummaryAnErasureEmptiedIsNotActiveInAForkOrARewind) {
  History(*storage_, ctx_, Key("s"));  // Chunk 1 (items 1-2) at version 2.
  RedactRequest redact;
  redact.key = Key("s");
  redact.sequences = {1};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("f");
  fork.at_sequence = 4;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  auto snap = storage_->LoadContext(ctx_, Key("f"));
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->active_chunks.empty());
  EXPECT_EQ(snap->conversation.summarized_through, 0);
  EXPECT_EQ(Sequences(snap->live_items), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST_P(StorageConformanceTest, ARewindEmptiesTheSummariesOfWhatLeftIt) {
  History(*storage_, ctx_, Key("s"));  // Chunk 1: "the first turn", items 1-2.
  RewindRequest rewind;
  rewind.key = Key("s");
  rewind.to_sequence = 1;
  rewind.abandoned = Key("rest");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  auto chunks = storage_->ListSummaries(ctx_, Key("s"), /*include_superseded=*/true, 0,
                                        PageLimit{10, 1 << 30});
  ASSERT_TRUE(chunks.ok());
  for (const SummaryChunk& c : chunks->rows) EXPECT_EQ(c.text, "") << c.chunk_id;
  auto kept = storage_->LoadContext(ctx_, Key("rest"));
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->active_chunks.size(), 1u);
  EXPECT_EQ(kept->active_chunks[0].text, "the first turn");
}

TEST_P(StorageConformanceTest, ForksOfADeletedConversationStillReachEachOthersCopies) {
  History(*storage_, ctx_, Key("r"));  // Items 1-7 (marker 5).
  ForkRequest fork;
  fork.source = Key("r");
  for (const auto& [id, at] : std::vector<std::pair<const char*, int64_t>>{{"c1", 4}, {"c2", 6}}) {
    fork.fork = Key(id);
    fork.at_sequence = at;
    ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  }
  fork.source = Key("c2");
  fork.fork = Key("g");
  fork.at_sequence = 6;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("r")).ok());
  RedactRequest redact;
  redact.tombstone = "[gone]";
  redact.key = Key("c1");
  redact.sequences = {3};
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  for (const char* id : {"c2", "g"}) {
    EXPECT_EQ(AllItems(*storage_, ctx_, Key(id))[2].data.content, "[gone]") << id;
  }
  // A fork in the middle goes: its fork reaches its source's copies.
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("c2")).ok());
  redact.key = Key("c1");
  redact.sequences = {4};
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("g"))[3].data.content, "[gone]");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("g"))[5].data.content, "three");
}

TEST_P(StorageConformanceTest, AnErasureInAForkReachesWhatItsSourceCarriedIntoAContinuation) {
  History(*storage_, ctx_, Key("s"));  // s's item 3: "two".
  ContinueCarryingItem3(*storage_, ctx_, Key("s"), Key("c"), {});
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("f");
  fork.at_sequence = 4;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  RedactRequest redact;
  redact.key = Key("f");
  redact.sequences = {3};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("s"))[2].data.content, "[gone]");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("c"))[0].data.content, "[gone]");
}

// A rewind's abandoned fork holds every item a continuation of the
// conversation carried (the items after the point left the conversation,
// and its next items take their sequences): the continuation is continued
// from the abandoned fork after it. An erasure of an item that left
// reaches the continuation's copy; an erasure of the item that took its
// sequence does not.
TEST_P(StorageConformanceTest, ARewindHandsItsContinuationsToTheAbandonedFork) {
  History(*storage_, ctx_, Key("s"));  // s's item 3: "two".
  ContinueCarryingItem3(*storage_, ctx_, Key("s"), Key("c"), {});
  RewindRequest rewind;
  rewind.key = Key("s");
  rewind.to_sequence = 2;
  rewind.abandoned = Key("a");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  auto c = storage_->GetConversation(ctx_, Key("c"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->continued_from, "a");
  AppendRequest again;
  again.key = Key("s");
  again.items = {Message(Role::kUser, "two again")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, again).ok());
  RedactRequest redact;
  redact.key = Key("s");
  redact.sequences = {3};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("c"))[0].data.content, "two");
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("a"))[2].data.content, "two");
  redact.key = Key("a");
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("c"))[0].data.content, "[gone]");
}

TEST_P(StorageConformanceTest, AnErasureReachesTheForksOfAContinuationItCarriedInto) {
  History(*storage_, ctx_, Key("s"));  // s's item 3: "two".
  ContinueCarryingItem3(*storage_, ctx_, Key("s"), Key("c"),
                        {Message(Role::kAssistant, "noted")});
  // A fork of the continuation, and a fork of that fork: both hold c's
  // copy of s's item 3 as their item 1, and are continued from s as c is
  // (a fork keeps its source's lineage), so the erasure's walk down the
  // continuations reaches them.
  ForkRequest fork;
  fork.source = Key("c");
  fork.fork = Key("f");
  fork.at_sequence = 2;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  fork.source = Key("f");
  fork.fork = Key("g");
  fork.at_sequence = 1;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  RedactRequest redact;
  redact.key = Key("s");
  redact.sequences = {3};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  for (const char* id : {"c", "f", "g"}) {
    const std::vector<Item> items = AllItems(*storage_, ctx_, Key(id));
    ASSERT_FALSE(items.empty()) << id;
    EXPECT_EQ(items[0].data.content, "[gone]") << id;
    EXPECT_TRUE(items[0].redacted) << id;
  }
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("f"))[1].data.content, "noted");
}

// `key` with `n` user messages "<key> k" (k = 1..n), appended `per` at a
// time.
void Messages(Storage& storage, const CallContext& ctx, const ConversationKey& key, int from,
              int n, int per = 1) {
  for (int k = from; k < from + n; k += per) {
    AppendRequest req;
    req.key = key;
    for (int j = k; j < std::min(from + n, k + per); ++j) {
      req.items.push_back(Message(Role::kUser, absl::StrCat(key.conversation_id, " ", j)));
    }
    ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
  }
}

void CreateEmpty(Storage& storage, const CallContext& ctx, const ConversationKey& key) {
  NewConversation nc;
  nc.key = key;
  nc.model = "m";
  ASSERT_TRUE(storage.CreateConversation(ctx, nc).ok());
}

// The contents of a conversation's items, in order.
std::vector<std::string> Texts(Storage& storage, const CallContext& ctx,
                               const ConversationKey& key) {
  std::vector<std::string> out;
  for (const Item& item : AllItems(storage, ctx, key)) out.push_back(item.data.content);
  return out;
}

std::vector<std::string> Numbered(const std::string& id, int from, int to) {
  std::vector<std::string> out;
  for (int k = from; k <= to; ++k) out.push_back(absl::StrCat(id, " ", k));
  return out;
}

// Forks keep every item they hold through deletes of the conversations
// they were forked from, one after the other, after a rewind split what
// they shared between two of them.
TEST_P(StorageConformanceTest, AForkKeepsItsItemsThroughDeletesOfItsSources) {
  CreateEmpty(*storage_, ctx_, Key("s"));
  Messages(*storage_, ctx_, Key("s"), 1, 10);
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("r");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  RewindRequest rewind;
  rewind.key = Key("s");
  rewind.to_sequence = 5;
  rewind.abandoned = Key("a");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("s")).ok());
  EXPECT_EQ(Texts(*storage_, ctx_, Key("r")), Numbered("s", 1, 10));
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("a")).ok());
  EXPECT_EQ(Texts(*storage_, ctx_, Key("r")), Numbered("s", 1, 10));
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("r"))->item_count, 10);

  // A fork of a fork, and a later fork of the middle one.
  CreateEmpty(*storage_, ctx_, Key("t"));
  Messages(*storage_, ctx_, Key("t"), 1, 10);
  fork.source = Key("t");
  fork.fork = Key("d");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  Messages(*storage_, ctx_, Key("d"), 11, 2);
  fork.source = Key("d");
  fork.fork = Key("x");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("t")).ok());
  fork.fork = Key("y");
  fork.at_sequence = 11;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("d")).ok());
  std::vector<std::string> x = Numbered("t", 1, 10);
  x.push_back("d 11");
  EXPECT_EQ(Texts(*storage_, ctx_, Key("y")), x);
  x.push_back("d 12");
  EXPECT_EQ(Texts(*storage_, ctx_, Key("x")), x);
}

// Two forks of a fork that is deleted still share its items: an erasure
// in one reaches the other, its item and its search.
TEST_P(StorageConformanceTest, AnErasureReachesTheSiblingsOfADeletedFork) {
  CreateEmpty(*storage_, ctx_, Key("p"));
  Messages(*storage_, ctx_, Key("p"), 1, 4);
  ForkRequest fork;
  fork.source = Key("p");
  fork.fork = Key("d");
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  Messages(*storage_, ctx_, Key("d"), 5, 4);
  fork.source = Key("d");
  for (const char* id : {"c1", "c2"}) {
    fork.fork = Key(id);
    ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  }
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("d")).ok());
  for (const char* id : {"c1", "c2"}) {
    RedactRequest redact;
    redact.key = Key(id);
    redact.sequences = {std::string(id) == "c1" ? int64_t{6} : int64_t{7}};
    redact.tombstone = "[gone]";
    ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  }
  for (const char* id : {"c1", "c2"}) {
    const std::vector<std::string> texts = Texts(*storage_, ctx_, Key(id));
    ASSERT_EQ(texts.size(), 8u) << id;
    EXPECT_EQ(texts[5], "[gone]") << id;
    EXPECT_EQ(texts[6], "[gone]") << id;
    EXPECT_EQ(texts[7], "d 8") << id;
    HistorySearch search;
    search.key = Key(id);
    search.terms = {"6", "7"};
    auto hits = storage_->SearchHistory(ctx_, search);
    ASSERT_TRUE(hits.ok()) << hits.status();
    for (const Item& item : hits->found) {
      EXPECT_NE(item.sequence, 6) << id;
      EXPECT_NE(item.sequence, 7) << id;
    }
  }
  EXPECT_EQ(Texts(*storage_, ctx_, Key("p")), Numbered("p", 1, 4));
}

// A continuation goes on reaching what it carried when the conversation
// it is continued from is deleted: to that one's heir, or its source.
TEST_P(StorageConformanceTest, AContinuationOfADeletedForkIsReachedThroughItsSource) {
  History(*storage_, ctx_, Key("s"));  // s's item 3: "two".
  ContinueCarryingItem3(*storage_, ctx_, Key("s"), Key("c"), {});
  RewindRequest rewind;
  rewind.key = Key("s");
  rewind.to_sequence = 4;
  rewind.abandoned = Key("a");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("a")).ok());
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("c"))->continued_from, "s");
  RedactRequest redact;
  redact.key = Key("s");
  redact.sequences = {3};
  redact.tombstone = "[gone]";
  ASSERT_TRUE(storage_->RedactItems(ctx_, redact).ok());
  EXPECT_EQ(AllItems(*storage_, ctx_, Key("c"))[0].data.content, "[gone]");
}

// A fork inside an append has that append's items at the version before
// it; the heir of a deleted source keeps them there.
TEST_P(StorageConformanceTest, AnHeirKeepsTheVersionsItHadItsItemsAt) {
  CreateEmpty(*storage_, ctx_, Key("s"));
  Messages(*storage_, ctx_, Key("s"), 1, 4, /*per=*/4);
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("f");
  fork.at_sequence = 2;
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  auto versions = [&] {
    std::vector<int64_t> out;
    for (const Item& item : AllItems(*storage_, ctx_, Key("f"))) out.push_back(item.appended_version);
    return out;
  };
  const std::vector<int64_t> before = versions();
  ASSERT_EQ(before.size(), 2u);
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("s")).ok());
  EXPECT_EQ(versions(), before);
}

// A fork's copies of its source's items count to the source while it
// lives: the tenant's usage grows by what the fork adds (and a limit holds
// it to that), a rewind's abandoned branch adds nothing it shares, and
// once the source is deleted its forks carry their copies. (The margins
// are the audit rows and view states a fork or rewind writes.)
TEST_P(StorageConformanceTest, AForksCopiesCountOnceToItsTenant) {
  History(*storage_, ctx_, Key("s"));
  const ItemData big = Message(Role::kUser, std::string(20000, 'x'));
  AppendRequest more;
  more.key = Key("s");
  more.items = {big, Message(Role::kAssistant, "noted")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, more).ok());
  auto usage = [&] { return storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes; };
  const int64_t alone = usage();
  ASSERT_GT(alone, 20000);

  // Refused for what it adds only: room for its own bytes, not a copy.
  ForkRequest fork;
  fork.source = Key("s");
  fork.fork = Key("f");
  fork.tenant_limits = TenantLimits{0, alone + 2000};
  ASSERT_TRUE(storage_->ForkConversation(ctx_, fork).ok());
  const int64_t forked = usage();
  EXPECT_GT(forked, alone);
  EXPECT_LT(forked - alone, 2000);

  // A rewind keeps what left in a branch that shares the rest.
  RewindRequest rewind;
  rewind.key = Key("f");
  rewind.to_sequence = 4;
  rewind.abandoned = Key("f-rest");
  ASSERT_TRUE(storage_->RewindConversation(ctx_, rewind).ok());
  const int64_t rewound = usage();
  EXPECT_LT(std::abs(rewound - forked), 5000) << rewound << " against " << forked;

  // The source goes: its forks count what they shared with it.
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("s")).ok());
  const int64_t deleted = usage();
  EXPECT_GT(deleted, 20000);
  EXPECT_LT(std::abs(deleted - rewound), 5000) << deleted << " against " << rewound;
  EXPECT_EQ(storage_->GetTenantUsage(ctx_, tenant_)->conversations, 2);
}

}  // namespace
}  // namespace convstate
