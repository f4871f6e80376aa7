// The conformance suite (storage_conformance.h): conversations, tenants,
// pages and their byte budgets, tenants' usage and limits.

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "storage/rules.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

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

}  // namespace
}  // namespace convstate
