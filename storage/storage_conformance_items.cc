// The conformance suite (storage_conformance.h): appends, idempotency,
// reading items back, concurrent appends.

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

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

}  // namespace
}  // namespace convstate
