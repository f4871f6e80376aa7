#include "storage/storage_conformance.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/sha256.h"
#include "storage/context_delta.h"
#include "storage/rules.h"
#include "gmock/gmock.h"

namespace convstate {

absl::StatusOr<std::vector<Item>> ItemRows(Storage& storage, const CallContext& ctx,
                                           const ConversationKey& key, int64_t after, int rows) {
  absl::StatusOr<Page<Item>> page = storage.ListItems(ctx, key, after, PageLimit{rows});
  if (!page.ok()) return page.status();
  return std::move(page->rows);
}

void StorageConformanceTest::SetUp() {
  storage_ = GetParam().make();
  ASSERT_NE(storage_, nullptr);
  std::random_device rd;
  tenant_ = absl::StrCat("tenant-", rd(), "-", rd());
}

ConversationKey StorageConformanceTest::Key(const std::string& id) const {
  return ConversationKey{tenant_, id};
}

Conversation StorageConformanceTest::Create(const std::string& id) {
  NewConversation nc;
  nc.key = Key(id);
  nc.model = "test-model";
  auto c = storage_->CreateConversation(ctx_, nc);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Conversation{};
}

AppendResult StorageConformanceTest::AppendText(const ConversationKey& key,
                                                const std::string& text) {
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, text, "", "", false, {}, 3});
  auto r = storage_->AppendItems(ctx_, req);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : AppendResult{};
}

SummaryChunk Chunk(int64_t from, int64_t through, const std::string& text) {
  SummaryChunk c;
  c.from_sequence = from;
  c.through_sequence = through;
  c.text = text;
  c.token_count = 10;
  c.summarizer_model = "extractive";
  c.prompt_version = "v1";
  c.tokens_in = 40;
  c.tokens_out = 10;
  c.latency_ms = 3;
  return c;
}

namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

ItemData Message(Role role, const std::string& text) {
  ItemData d;
  d.role = role;
  d.kind = ItemKind::kMessage;
  d.content = text;
  d.token_count = static_cast<int64_t>(text.size() / 4 + 1);
  return d;
}

std::vector<int64_t> Sequences(const std::vector<Item>& items) {
  std::vector<int64_t> out;
  for (const Item& i : items) out.push_back(i.sequence);
  return out;
}

TEST_P(StorageConformanceTest, CreateThenGetReturnsEveryField) {
  NewConversation nc;
  nc.key = Key("conv-1");
  nc.model = "gpt-4o";
  nc.system_prompt = "You are terse.";
  nc.pinned_instructions = "Answer in French.";
  nc.metadata = {{"team", "search"}, {"emoji", "\xF0\x9F\x98\x80"}};
  nc.overrides.context_window = 4096;
  nc.overrides.soft_threshold = 0.5;
  nc.overrides.recent_turns = 2;
  auto created = storage_->CreateConversation(ctx_, nc);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->version, 0);
  EXPECT_EQ(created->item_count, 0);
  EXPECT_EQ(created->last_sequence, 0);
  EXPECT_GT(created->create_time, absl::Now() - absl::Minutes(5));

  auto got = storage_->GetConversation(ctx_, nc.key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->key.tenant_id, tenant_);
  EXPECT_EQ(got->key.conversation_id, "conv-1");
  EXPECT_EQ(got->model, "gpt-4o");
  EXPECT_EQ(got->system_prompt, "You are terse.");
  EXPECT_EQ(got->pinned_instructions, "Answer in French.");
  EXPECT_EQ(got->metadata, nc.metadata);
  EXPECT_EQ(got->overrides, nc.overrides);
  EXPECT_EQ(got->create_time, created->create_time);
}

TEST_P(StorageConformanceTest, CreateWithTakenIdIsAlreadyExists) {
  Create("dup");
  NewConversation again;
  again.key = Key("dup");
  again.model = "other";
  auto r = storage_->CreateConversation(ctx_, again);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("dup"))->model, "test-model");
}

TEST_P(StorageConformanceTest, TenantsDoNotSeeEachOther) {
  Create("shared-id");
  AppendText(Key("shared-id"), "hello");
  ConversationKey other{tenant_ + "-other", "shared-id"};
  EXPECT_EQ(storage_->GetConversation(ctx_, other).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ItemRows(*storage_, ctx_, other, 0, 10).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->DeleteConversation(ctx_, other).status().code(),
            absl::StatusCode::kNotFound);
  AppendRequest req;
  req.key = other;
  req.items.push_back(Message(Role::kUser, "intruder"));
  EXPECT_EQ(storage_->AppendItems(ctx_, req).status().code(), absl::StatusCode::kNotFound);
  // The same id is free in the other tenant.
  NewConversation nc;
  nc.key = other;
  nc.model = "m";
  EXPECT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("shared-id"))->item_count, 1);
}

TEST_P(StorageConformanceTest, UnknownConversationIsNotFound) {
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("missing")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->LoadContext(ctx_, Key("missing")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ItemRows(*storage_, ctx_, Key("missing"), 0, 10).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StorageConformanceTest, ListConversationsPaginatesInIdOrder) {
  for (const char* id : {"c", "a", "e", "b", "d"}) Create(id);
  auto first = storage_->ListConversations(ctx_, tenant_, "", PageLimit{2});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_THAT(first->rows, SizeIs(2));
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->rows[0].key.conversation_id, "a");
  EXPECT_EQ(first->rows[1].key.conversation_id, "b");
  auto rest = storage_->ListConversations(ctx_, tenant_, "b", PageLimit{10});
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_THAT(rest->rows, SizeIs(3));
  EXPECT_FALSE(rest->more);
  EXPECT_EQ(rest->rows[2].key.conversation_id, "e");
  auto exact = storage_->ListConversations(ctx_, tenant_, "b", PageLimit{3});
  ASSERT_TRUE(exact.ok());
  EXPECT_THAT(exact->rows, SizeIs(3));
  EXPECT_FALSE(exact->more);
  auto none = storage_->ListConversations(ctx_, tenant_ + "-empty", "", PageLimit{10});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->rows.empty());
  EXPECT_FALSE(none->more);
}

// Pages end early once the rows before hold the byte budget, always with
// at least one row, and say that more follow; every list does the same.
TEST_P(StorageConformanceTest, PagesEndAtTheirByteBudget) {
  Create("big");
  const std::string kib(1024, 'x');
  for (int i = 0; i < 10; ++i) AppendText(Key("big"), absl::StrCat(i, kib));
  const PageLimit limit{100, 3000};
  std::vector<int64_t> seen;
  int pages = 0;
  for (int64_t after = 0;; ++pages) {
    auto page = storage_->ListItems(ctx_, Key("big"), after, limit);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_FALSE(page->rows.empty());
    EXPECT_LE(page->rows.size(), 3u);  // 3 rows hold 3,075 bytes: the budget is passed.
    for (const Item& i : page->rows) seen.push_back(i.sequence);
    after = page->rows.back().sequence;
    if (!page->more) break;
    ASSERT_LT(pages, 20);
  }
  EXPECT_THAT(seen, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
  EXPECT_EQ(pages + 1, 4);
  // A row larger than the budget still comes, alone.
  auto one = storage_->ListItems(ctx_, Key("big"), 0, PageLimit{100, 10});
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(one->rows, SizeIs(1));
  EXPECT_TRUE(one->more);
  // Conversations by their prompts, chunks by their text, audit rows by
  // their detail.
  for (const char* id : {"p1", "p2", "p3"}) {
    NewConversation nc;
    nc.key = Key(id);
    nc.model = "m";
    nc.system_prompt = kib + kib;
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  }
  auto conversations = storage_->ListConversations(ctx_, tenant_, "o", PageLimit{100, 3000});
  ASSERT_TRUE(conversations.ok());
  EXPECT_THAT(conversations->rows, SizeIs(2));
  EXPECT_TRUE(conversations->more);
  CompactionCommit commit;
  commit.key = Key("big");
  for (int64_t through : {2, 4, 6}) {
    commit.chunk = SummaryChunk();
    commit.chunk->from_sequence = commit.expected_summarized_through + 1;
    commit.chunk->through_sequence = through;
    commit.chunk->text = kib + kib;
    commit.chunk->summarizer_model = "m";
    commit.events = {CompactionEvent{"completed", "summarize", 0, 0,
                                     absl::StrCat(R"({"note": ")", kib, kib, R"("})")}};
    ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
    commit.expected_summarized_through = through;
  }
  auto chunks = storage_->ListSummaries(ctx_, Key("big"), true, 0, PageLimit{100, 3000});
  ASSERT_TRUE(chunks.ok());
  EXPECT_THAT(chunks->rows, SizeIs(2));
  EXPECT_TRUE(chunks->more);
  auto after = storage_->ListSummaries(ctx_, Key("big"), true, chunks->rows.back().chunk_id,
                                       PageLimit{100, 3000});
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->rows, SizeIs(1));
  EXPECT_FALSE(after->more);
  auto events = storage_->ListCompactionEvents(ctx_, Key("big"), 0, PageLimit{100, 3000});
  ASSERT_TRUE(events.ok());
  EXPECT_THAT(events->rows, SizeIs(2));
  EXPECT_TRUE(events->more);
  auto two = storage_->ListCompactionEvents(ctx_, Key("big"), 0, PageLimit{2});
  ASSERT_TRUE(two.ok());
  EXPECT_THAT(two->rows, SizeIs(2));
  EXPECT_TRUE(two->more);
}

TEST_P(StorageConformanceTest, TenantUsageCountsEveryByteItsConversationsStore) {
  auto bytes = [&] {
    auto usage = storage_->GetTenantUsage(ctx_, tenant_);
    EXPECT_TRUE(usage.ok()) << usage.status();
    return usage.ok() ? usage->stored_bytes : -1;
  };
  Create("a");
  const int64_t created = bytes();
  EXPECT_GT(created, 0);  // The conversation's row and its first view state.
  AppendText(Key("a"), "hello");
  EXPECT_EQ(bytes() - created, StoredBytes({Message(Role::kUser, "hello")}));
  const int64_t with_a = bytes();
  // An append with a usage report and a key takes the other path of a backend.
  NewConversation b;
  b.key = Key("b");
  b.model = "m";
  b.system_prompt = std::string(1000, 'p');
  ASSERT_TRUE(storage_->CreateConversation(ctx_, b).ok());
  EXPECT_GT(bytes() - with_a, 1000);
  const int64_t before_append = bytes();
  AppendRequest req;
  req.key = Key("b");
  req.items.push_back(Message(Role::kAssistant, "h\xc3\xa9llo"));
  req.usage = UsageReport{200, 20, 0, 0, 0, /*correct=*/false};
  req.idempotency_key = "k1";
  req.request_fingerprint = "f1";
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  EXPECT_EQ(bytes() - before_append, StoredBytes(req));
  EXPECT_GT(StoredBytes(req), 6 + kUsageRowBytes + kIdempotencyRowBytes);
  // What a pin costs: a view state with a copy of the prompts, every time.
  const int64_t before_pins = bytes();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(storage_->SetPinned(ctx_, Key("b"), 1, i % 2 == 0).ok());
  EXPECT_GT(bytes() - before_pins, 4 * 1000);
  // An update's prompts count, and so do audit rows.
  const int64_t before_update = bytes();
  ConversationUpdate update;
  update.system_prompt = std::string(3000, 'q');
  update.event.event = "conversation_updated";
  ASSERT_TRUE(storage_->UpdateConversation(ctx_, Key("b"), update).ok());
  EXPECT_GT(bytes() - before_update, 2000 + 3000);  // The longer prompt and its view state.
  auto usage = storage_->GetTenantUsage(ctx_, tenant_);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->conversations, 2);
  auto other = storage_->GetTenantUsage(ctx_, tenant_ + "-other");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->conversations, 0);
  EXPECT_EQ(other->stored_bytes, 0);
  ASSERT_TRUE(storage_->DeleteConversation(ctx_, Key("b")).ok());
  usage = storage_->GetTenantUsage(ctx_, tenant_);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->conversations, 1);
  EXPECT_EQ(usage->stored_bytes, with_a);
}

// A tenant's limits are checked and counted in one step with the create or
// append that would pass them: many callers at once never overshoot.
TEST_P(StorageConformanceTest, TenantLimitsHoldUnderParallelCalls) {
  const TenantLimits conversations{/*max_conversations=*/3, /*max_stored_bytes=*/0};
  std::atomic<int> created{0};
  std::mutex mu;
  std::vector<ConversationKey> keys;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      NewConversation nc;
      nc.key = Key(absl::StrCat("c", t));
      nc.model = "m";
      nc.tenant_limits = conversations;
      auto c = storage_->CreateConversation(ctx_, nc);
      if (c.ok()) {
        ++created;
        std::lock_guard<std::mutex> lock(mu);
        keys.push_back(nc.key);
      } else {
        EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted) << c.status();
        EXPECT_THAT(c.status().message(), ::testing::HasSubstr("max_conversations 3"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(storage_->GetTenantUsage(ctx_, tenant_)->conversations, 3);

  // Room for exactly ten appends of 1,000 bytes among 16 callers.
  const ItemData kib = Message(Role::kUser, std::string(1000, 'x'));
  const int64_t held = storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes;
  const TenantLimits bytes{0, held + 10 * StoredBytes({kib})};
  std::atomic<int> appended{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      AppendRequest req;
      req.key = Key(absl::StrCat("c", t % 8));
      req.items = {kib};
      req.tenant_limits = bytes;
      auto r = storage_->AppendItems(ctx_, req);
      if (absl::IsNotFound(r.status())) return;  // Not among the three created.
      if (r.ok()) {
        ++appended;
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
        EXPECT_THAT(r.status().message(), ::testing::HasSubstr("max_stored_bytes"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(appended.load(), 6);  // Two callers per created conversation; all fit.
  EXPECT_LE(storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes, bytes.max_stored_bytes);
  // Now fill it up: the eleventh does not fit.
  int more = 0;
  ASSERT_EQ(keys.size(), 3u);
  for (int i = 0; i < 20; ++i) {
    AppendRequest req;
    req.key = keys[i % 3];
    req.items = {kib};
    req.tenant_limits = bytes;
    auto r = storage_->AppendItems(ctx_, req);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    ++more;
  }
  EXPECT_EQ(appended.load() + more, 10);
  EXPECT_LE(storage_->GetTenantUsage(ctx_, tenant_)->stored_bytes, bytes.max_stored_bytes);
}

TEST_P(StorageConformanceTest, DeleteRemovesConversationAndItems) {
  Create("doomed");
  AppendText(Key("doomed"), "one");
  AppendText(Key("doomed"), "two");
  auto deleted = storage_->DeleteConversation(ctx_, Key("doomed"));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("doomed")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ItemRows(*storage_, ctx_, Key("doomed"), 0, 10).status().code(),
            absl::StatusCode::kNotFound);
  // The id can be used again, and starts empty.
  Conversation again = Create("doomed");
  EXPECT_EQ(again.last_sequence, 0);
  auto items = ItemRows(*storage_, ctx_, Key("doomed"), 0, 10);
  ASSERT_TRUE(items.ok());
  EXPECT_TRUE(items->empty());
}

TEST_P(StorageConformanceTest, AppendAssignsSequencesTurnsAndVersion) {
  Create("conv");
  AppendRequest req;
  req.key = Key("conv");
  req.items.push_back(Message(Role::kSystem, "setup"));
  req.items.push_back(Message(Role::kUser, "what is 2+2?"));
  ItemData call;
  call.role = Role::kAssistant;
  call.kind = ItemKind::kToolCall;
  call.content = R"({"expr":"2+2"})";
  call.tool_name = "calc";
  call.tool_call_id = "call-1";
  call.metadata = {{"latency_ms", "12"}};
  call.token_count = 9;
  req.items.push_back(call);
  ItemData result;
  result.role = Role::kTool;
  result.kind = ItemKind::kToolResult;
  result.content = "4";
  result.tool_name = "calc";
  result.tool_call_id = "call-1";
  result.token_count = 1;
  req.items.push_back(result);
  auto first = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->replayed);
  EXPECT_EQ(first->version, 1);
  EXPECT_THAT(Sequences(first->items), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(first->items[0].turn_index, 0);
  EXPECT_EQ(first->items[1].turn_index, 1);
  EXPECT_EQ(first->items[3].turn_index, 1);

  AppendRequest next;
  next.key = Key("conv");
  next.items.push_back(Message(Role::kAssistant, "It is 4."));
  next.items.push_back(Message(Role::kUser, "thanks"));
  auto second = storage_->AppendItems(ctx_, next);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->version, 2);
  EXPECT_THAT(Sequences(second->items), ElementsAre(5, 6));
  EXPECT_EQ(second->items[0].turn_index, 1);
  EXPECT_EQ(second->items[1].turn_index, 2);

  auto conv = storage_->GetConversation(ctx_, Key("conv"));
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->item_count, 6);
  EXPECT_EQ(conv->last_sequence, 6);
  EXPECT_EQ(conv->last_turn_index, 2);
  EXPECT_EQ(conv->version, 2);
  EXPECT_GE(conv->update_time, conv->create_time);

  auto items = ItemRows(*storage_, ctx_, Key("conv"), 0, 100);
  ASSERT_TRUE(items.ok());
  ASSERT_THAT(*items, SizeIs(6));
  EXPECT_EQ((*items)[2].data, call);
  EXPECT_EQ((*items)[3].data, result);
  EXPECT_EQ((*items)[2].create_time, first->items[2].create_time);
}

TEST_P(StorageConformanceTest, AppendWithSameKeyIsIdempotent) {
  Create("conv");
  AppendRequest req;
  req.key = Key("conv");
  req.items.push_back(Message(Role::kUser, "only once"));
  req.items.push_back(Message(Role::kAssistant, "sure"));
  req.idempotency_key = "key-1";
  req.request_fingerprint = "fp-1";
  auto first = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(first.ok()) << first.status();
  AppendText(Key("conv"), "later");  // The key's answer must not move.
  auto retry = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->version, first->version);
  EXPECT_THAT(Sequences(retry->items), ElementsAre(1, 2));
  EXPECT_EQ(retry->items[0].data, first->items[0].data);
  EXPECT_EQ(retry->items[1].create_time, first->items[1].create_time);
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("conv"))->item_count, 3);
}

TEST_P(StorageConformanceTest, SameKeyForDifferentRequestIsAlreadyExists) {
  Create("conv");
  AppendRequest req;
  req.key = Key("conv");
  req.items.push_back(Message(Role::kUser, "a"));
  req.idempotency_key = "key-1";
  req.request_fingerprint = "fp-a";
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  req.items[0].content = "b";
  req.request_fingerprint = "fp-b";
  auto r = storage_->AppendItems(ctx_, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("conv"))->item_count, 1);
}

TEST_P(StorageConformanceTest, IdempotencyKeysAreScopedToTheConversation) {
  Create("one");
  Create("two");
  AppendRequest req;
  req.key = Key("one");
  req.items.push_back(Message(Role::kUser, "hi"));
  req.idempotency_key = "k";
  req.request_fingerprint = "fp";
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  req.key = Key("two");
  auto r = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->replayed);
}

TEST_P(StorageConformanceTest, StaleExpectedVersionIsAbortedAndWritesNothing) {
  Create("conv");
  AppendText(Key("conv"), "first");
  AppendRequest req;
  req.key = Key("conv");
  req.items.push_back(Message(Role::kUser, "second"));
  req.expected_version = 0;
  auto r = storage_->AppendItems(ctx_, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("conv"))->item_count, 1);
  req.expected_version = 1;
  auto ok = storage_->AppendItems(ctx_, req);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->version, 2);
}

TEST_P(StorageConformanceTest, ListItemsPaginates) {
  Create("conv");
  for (int i = 0; i < 7; ++i) AppendText(Key("conv"), absl::StrCat("m", i));
  auto page1 = ItemRows(*storage_, ctx_, Key("conv"), 0, 3);
  ASSERT_TRUE(page1.ok()) << page1.status();
  EXPECT_THAT(Sequences(*page1), ElementsAre(1, 2, 3));
  auto page3 = ItemRows(*storage_, ctx_, Key("conv"), 6, 3);
  ASSERT_TRUE(page3.ok());
  EXPECT_THAT(Sequences(*page3), ElementsAre(7));
  EXPECT_EQ((*page3)[0].data.content, "m6");
  auto past = ItemRows(*storage_, ctx_, Key("conv"), 7, 3);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->empty());
}

TEST_P(StorageConformanceTest, LoadContextReturnsEverythingInOrder) {
  NewConversation nc;
  nc.key = Key("conv");
  nc.model = "m";
  nc.system_prompt = "sys";
  ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  AppendRequest req;
  req.key = nc.key;
  ItemData pinned = Message(Role::kUser, "always remember: port 8443");
  pinned.pinned = true;
  req.items = {pinned, Message(Role::kAssistant, "noted")};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  AppendText(nc.key, "next");
  auto snap = storage_->LoadContext(ctx_, nc.key);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->conversation.system_prompt, "sys");
  EXPECT_EQ(snap->conversation.summarized_through, 0);
  EXPECT_TRUE(snap->active_chunks.empty());
  // Nothing is summarized yet, so pinned items are live like the rest.
  EXPECT_TRUE(snap->pinned_items.empty());
  EXPECT_THAT(Sequences(snap->live_items), ElementsAre(1, 2, 3));
  EXPECT_TRUE(snap->live_items[0].data.pinned);
  EXPECT_EQ(snap->live_items[0].data.token_count, pinned.token_count);
}

TEST_P(StorageConformanceTest, UnicodeRoundTripsByteForByte) {
  Create("conv");
  const std::string text =
      "Grüße, \xE4\xBD\xA0\xE5\xA5\xBD, \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 "
      "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB e\xCC\x81 'quotes' \"dq\" \\ $1 \t\n";
  AppendText(Key("conv"), text);
  auto items = ItemRows(*storage_, ctx_, Key("conv"), 0, 1);
  ASSERT_TRUE(items.ok());
  ASSERT_THAT(*items, SizeIs(1));
  EXPECT_EQ((*items)[0].data.content, text);
}

TEST_P(StorageConformanceTest, PassedDeadlineIsDeadlineExceeded) {
  Create("conv");
  CallContext late{absl::Now() - absl::Seconds(1)};
  EXPECT_EQ(storage_->GetConversation(late, Key("conv")).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  AppendRequest req;
  req.key = Key("conv");
  req.items.push_back(Message(Role::kUser, "late"));
  EXPECT_EQ(storage_->AppendItems(late, req).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("conv"))->item_count, 0);
}

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

// Six items; item 2 pinned.
void AppendSix(Storage& storage, const CallContext& ctx, const ConversationKey& key) {
  AppendRequest req;
  req.key = key;
  for (int i = 1; i <= 6; ++i) {
    ItemData d = Message(i % 2 ? Role::kUser : Role::kAssistant, absl::StrCat("m", i));
    d.pinned = i == 2;
    req.items.push_back(d);
  }
  ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
}


CompactionEvent Event(const std::string& name) {
  CompactionEvent e;
  e.event = name;
  e.tier = "summarize";
  e.tokens_before = 100;
  e.tokens_after = 40;
  e.detail = R"({"reason":"test"})";
  return e;
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

// A conversation's stored bytes stay under the append's bound, by either
// way an append is made (a usage report takes the locked row's path).
TEST_P(StorageConformanceTest, AnAppendPastTheConversationsByteBoundIsRefusedAndStoresNothing) {
  Create("big");
  AppendRequest req;
  req.key = Key("big");
  req.max_conversation_bytes = 3000;
  req.items = {Message(Role::kUser, std::string(1000, 'a'))};
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  for (bool with_usage : {false, true}) {
    AppendRequest over = req;
    over.items = {Message(Role::kUser, std::string(1500, 'b'))};
    if (with_usage) over.usage = UsageReport{10, 5, 0, 0, 0, false};
    const absl::Status refused = storage_->AppendItems(ctx_, over).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << with_usage;
    EXPECT_NE(refused.message().find("3000 bytes per conversation"), std::string::npos)
        << refused.message();
  }
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("big"))->item_count, 2);
  req.items = {Message(Role::kUser, std::string(200, 'c'))};
  EXPECT_TRUE(storage_->AppendItems(ctx_, req).ok());  // Still under.
  req.max_conversation_bytes = 0;                       // No bound.
  req.items = {Message(Role::kUser, std::string(5000, 'd'))};
  EXPECT_TRUE(storage_->AppendItems(ctx_, req).ok());
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

// Eight writers append to one conversation at once: every acknowledged item
// is stored exactly once, sequence numbers are 1..N with no gap, and each
// append's items are contiguous and in the order sent.
TEST_P(StorageConformanceTest, ConcurrentAppendsAreGapFreeAndLoseNothing) {
  Create("hot");
  constexpr int kThreads = 8;
  constexpr int kAppendsPerThread = 25;
  std::atomic<int> failures{0};
  std::vector<std::vector<AppendResult>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        AppendRequest req;
        req.key = Key("hot");
        req.items.push_back(Message(Role::kUser, absl::StrCat("t", t, "-", i, "-q")));
        req.items.push_back(Message(Role::kAssistant, absl::StrCat("t", t, "-", i, "-a")));
        auto r = storage_->AppendItems(ctx_, req);
        if (!r.ok()) {
          ADD_FAILURE() << r.status();
          ++failures;
          continue;
        }
        results[t].push_back(*r);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);

  constexpr int kTotal = kThreads * kAppendsPerThread * 2;
  auto conv = storage_->GetConversation(ctx_, Key("hot"));
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->item_count, kTotal);
  EXPECT_EQ(conv->last_sequence, kTotal);
  EXPECT_EQ(conv->version, kThreads * kAppendsPerThread);

  auto items = ItemRows(*storage_, ctx_, Key("hot"), 0, kTotal + 10);
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_THAT(*items, SizeIs(kTotal));
  std::map<int64_t, std::string> by_sequence;
  for (size_t i = 0; i < items->size(); ++i) {
    EXPECT_EQ((*items)[i].sequence, static_cast<int64_t>(i + 1));
    by_sequence[(*items)[i].sequence] = (*items)[i].data.content;
  }
  std::set<int64_t> versions;
  for (int t = 0; t < kThreads; ++t) {
    int64_t previous = 0;
    for (int i = 0; i < kAppendsPerThread; ++i) {
      const AppendResult& r = results[t][i];
      ASSERT_THAT(r.items, SizeIs(2));
      EXPECT_EQ(r.items[1].sequence, r.items[0].sequence + 1);
      EXPECT_GT(r.items[0].sequence, previous);  // A writer's order is kept.
      previous = r.items[0].sequence;
      EXPECT_EQ(by_sequence[r.items[0].sequence], absl::StrCat("t", t, "-", i, "-q"));
      EXPECT_EQ(by_sequence[r.items[1].sequence], absl::StrCat("t", t, "-", i, "-a"));
      EXPECT_TRUE(versions.insert(r.version).second) << "version reused: " << r.version;
    }
  }
}

// A client that times out and retries from several places at once: the
// items are stored once, and every caller gets the same answer.
TEST_P(StorageConformanceTest, ConcurrentRetriesWithOneKeyStoreOnce) {
  Create("conv");
  constexpr int kThreads = 8;
  std::vector<absl::StatusOr<AppendResult>> results(kThreads, absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      AppendRequest req;
      req.key = Key("conv");
      req.items.push_back(Message(Role::kUser, "once"));
      req.idempotency_key = "retry-key";
      req.request_fingerprint = "fp";
      results[t] = storage_->AppendItems(ctx_, req);
    });
  }
  for (auto& th : threads) th.join();
  int originals = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->replayed) ++originals;
    EXPECT_THAT(Sequences(r->items), ElementsAre(1));
    EXPECT_EQ(r->version, 1);
  }
  EXPECT_EQ(originals, 1);
  EXPECT_EQ(storage_->GetConversation(ctx_, Key("conv"))->item_count, 1);
}

// Recall searches everything ever stored, compacted away or not, ranks rare
// words above common ones, and never finds erased text or a marker.
TEST_P(StorageConformanceTest, SearchHistoryFindsRareWordsInTheWholeHistoryButNoErasedText) {
  Create("c");
  AppendRequest req;
  req.key = Key("c");
  req.items.push_back(Message(Role::kUser, "Move the Orders queue to host db-7.eu-west today"));
  ItemData tool = Message(Role::kTool, "config: guard_value=4711 for the orders queue");
  tool.kind = ItemKind::kToolResult;
  tool.tool_call_id = "call-1";
  req.items.push_back(tool);
  req.items.push_back(Message(Role::kUser, "my card is 4111-1111-1111-1111 for the orders"));
  for (int i = 4; i <= 30; ++i) {
    req.items.push_back(Message(Role::kAssistant, absl::StrCat("status of the orders step ", i)));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 10, "summary of the first ten items");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // marker 31
  RedactRequest erase;
  erase.key = Key("c");
  erase.sequences = {3};
  erase.tombstone = "[erased 4111]";
  erase.tombstone_tokens = 2;
  erase.reason = "erasure";
  ASSERT_TRUE(storage_->RedactItems(ctx_, erase).ok());

  HistorySearch search;
  search.key = Key("c");
  search.terms = SearchTerms("What guard value did the config show for the orders? 4111 summary");
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(hits->items, 31);
  EXPECT_EQ(hits->document_frequency["guard"], 1);
  EXPECT_EQ(hits->document_frequency["4111"], 0);     // erased
  EXPECT_EQ(hits->document_frequency["summari"], 0);  // markers are not searched
  // In 29 of 30 searchable items: counted up to the cap (a fifth, at least
  // 20) plus one, and not searched for: nothing is found by it alone.
  EXPECT_EQ(hits->document_frequency["order"], 21);
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2));

  // A host is found whole and by its parts; the turn that holds more of
  // it comes first, with its tool result that holds none of it (its
  // exchange); of equal scores the newest comes first.
  search.terms = SearchTerms("db-7.eu-west");
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->document_frequency["db-7.eu-west"], 1);
  EXPECT_EQ(hits->document_frequency["7"], 2);  // "step 7"
  EXPECT_THAT(Sequences(hits->found), ElementsAre(1, 2, 7));
  search.terms = {"guard", "db-7.eu-west"};
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2, 1));
  search.max_items = 1;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2));

  // With a cap above every count, common words are searched too; the
  // newest of equals comes first.
  search.terms = {"order"};
  search.max_document_frequency = 1000;
  search.max_items = 3;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->document_frequency["order"], 29);
  EXPECT_THAT(Sequences(hits->found), ElementsAre(30, 29, 28));

  search.key = Key("missing");
  EXPECT_EQ(storage_->SearchHistory(ctx_, search).status().code(), absl::StatusCode::kNotFound);
}

// A tool result whose lines do not name their subject is found through
// its exchange: its call's arguments and the question of its turn. With
// compacted_only, what is still in the view is not searched.
TEST_P(StorageConformanceTest, SearchHistoryFindsAToolResultThroughItsExchange) {
  Create("x");
  AppendRequest req;
  req.key = Key("x");
  auto turn = [&](const std::string& ask, const std::string& area, const std::string& sum) {
    req.items.push_back(Message(Role::kUser, ask));
    ItemData call = Message(Role::kAssistant,
                            absl::StrCat(R"({"query": "select * from dry_run where area = ')", area,
                                         R"('"})"));
    call.kind = ItemKind::kToolCall;
    call.tool_name = "psql";
    call.tool_call_id = absl::StrCat("call-", area);
    req.items.push_back(call);
    ItemData result = Message(Role::kTool, absl::StrCat("rows scanned 4410\ndry-run checksum ", sum,
                                                        "\nstatus ok"));
    result.kind = ItemKind::kToolResult;
    result.tool_name = "psql";
    result.tool_call_id = call.tool_call_id;
    req.items.push_back(result);
    req.items.push_back(Message(Role::kAssistant, "The dry run passed; the checksum is above."));
  };
  turn("What did the dry run show for the etl rewrite?", "etl rewrite", "30a6359");  // 1-4
  turn("And the dry run of the ledger move?", "ledger move", "77b01c2");             // 5-8
  for (int i = 0; i < 20; ++i) {
    req.items.push_back(Message(Role::kUser, absl::StrCat("Next step ", i, " please.")));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());

  HistorySearch search;
  search.key = Key("x");
  search.terms = SearchTerms("the etl rewrite's checksum");
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  // The turn of items 1-4: the question (1) and the call (2) hold "etl" and
  // "rewrit"; the result (3) holds neither and comes with them.
  ASSERT_FALSE(hits->found.empty());
  EXPECT_THAT(Sequences(hits->found), ::testing::IsSupersetOf({1, 2, 3}));
  EXPECT_EQ(hits->found[0].turn_index, 1);
  // ETL, spelled out.
  EXPECT_THAT(hits->exchange_terms[3], ::testing::IsSupersetOf({"extract", "rewrit"}));
  EXPECT_EQ(hits->calls[3], R"({"query": "select * from dry_run where area = 'etl rewrite'"})");
  // The other dry run's turn holds only the common words: it comes after.
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(hits->found[i].turn_index, 1) << i;

  // Nothing compacted yet: nothing to recall.
  search.compacted_only = true;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(hits->found, ::testing::IsEmpty());
  // Once items 1-8 are summarized, they are searched again.
  CompactionCommit commit;
  commit.key = Key("x");
  commit.chunk = Chunk(1, 8, "two dry runs");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  // (Whether or not the word index has them yet.)
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ::testing::IsSupersetOf({1, 2, 3}));
}

TEST(SearchTermsTest, SplitsLikeTheIndex) {
  // Words in their one form (stemmed; an abbreviation spelled out: "DB"
  // is "databas"), compounds as written beside their parts, which may be
  // names: the "db" of a host is there as written and spelled out.
  EXPECT_THAT(SearchTerms("Deploy db-7.EU-west at 08:00, ok? user@x"),
              ElementsAre("deploy", "db-7.eu-west", "db", "databas", "7", "eu", "west", "at",
                          "08:00", "08", "00", "ok", "user@x", "user", "x"));
  // Plurals, inflections and possessives as people write them.
  EXPECT_THAT(SearchTerms("the vendor contract's guards"),
              ElementsAre("the", "vendor", "contract", "s", "guard"));
  EXPECT_THAT(SearchTerms("Checksums planning DB"), ElementsAre("checksum", "plan", "databas"));
  EXPECT_THAT(SearchTerms("--a-- \xC3\xA9t\xC3\xA9 b_"), ElementsAre("a", "t", "b"));
  // Camel case, as code writes names: whole, and its parts.
  EXPECT_THAT(SearchTerms("maxReplicas: 27"),
              ElementsAre("maxreplica", "max", "replica", "27"));
  EXPECT_THAT(SearchTerms("CronJobs"), ElementsAre("cronjob", "cron", "job"));
  EXPECT_THAT(SearchTerms("kind: CronJob, HTTPServer"),
              ElementsAre("kind", "cronjob", "cron", "job", "httpserver", "http", "server"));
  EXPECT_THAT(SearchTerms("BenchmarkAppendParallel-8"),
              ElementsAre("benchmarkappendparallel-8", "benchmarkappendparallel", "benchmark",
                          "append", "parallel", "8"));
  EXPECT_THAT(SearchTerms("the subs svc"), ElementsAre("the", "subscript", "servic"));
  // Not when a part would be one letter: "IdP" is the abbreviation.
  EXPECT_THAT(SearchTerms("IdP iPhone"), ElementsAre("ident", "provid", "iphon"));
}

}  // namespace
}  // namespace convstate
