#include "services/api/history_cache.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

// Counts what the cache asks of storage.
class CountingStorage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& c,
                                            const HistorySearch& s) override {
    ++searches;
    return ForwardingStorage::SearchHistory(c, s);
  }
  absl::StatusOr<Page<Item>> ListItems(const CallContext& c, const ConversationKey& k,
                                       int64_t after, const PageLimit& l) override {
    ++reads;
    read_after.push_back(after);
    return ForwardingStorage::ListItems(c, k, after, l);
  }
  std::atomic<int> searches{0};
  std::atomic<int> reads{0};
  std::vector<int64_t> read_after;
};

class HistoryCacheTest : public ::testing::Test {
 protected:
  HistoryCacheTest() : base_(NewMemoryStorage()), storage_(base_.get()) {}

  void SetUp() override {
    NewConversation n;
    n.key = key_;
    n.model = "gpt-4o";
    ASSERT_TRUE(storage_.CreateConversation(ctx_, n).ok());
    Turn("What did the dry run show for the billing export?", "dry-run checksum 30a6359");
    Turn("And for the ledger rebuild?", "dry-run checksum 77b01c2");
  }

  void Turn(const std::string& question, const std::string& output) {
    AppendRequest a;
    a.key = key_;
    const std::string id = "c" + std::to_string(++calls_);
    a.items = {ItemData{Role::kUser, ItemKind::kMessage, question},
               ItemData{Role::kAssistant, ItemKind::kToolCall, "migctl dry-run", "migctl", id},
               ItemData{Role::kTool, ItemKind::kToolResult, output, "migctl", id}};
    ASSERT_TRUE(storage_.AppendItems(ctx_, a).ok());
  }

  Conversation Row() { return *storage_.GetConversation(ctx_, key_); }

  HistorySearch Searching(const std::string& words) {
    HistorySearch search;
    search.key = key_;
    search.terms = SearchTerms(words);
    search.max_items = 10;
    return search;
  }

  // Waits until the copy is made (on the copies' thread).
  void WaitForCopy(HistoryCache& cache) {
    cache.Flush();
    ASSERT_TRUE(cache.Holds(Row().storage_key));
  }

  static std::vector<std::string> Contents(const HistoryHits& hits) {
    std::vector<std::string> out;
    for (const Item& i : hits.found) out.push_back(i.data.content);
    return out;
  }

  const ConversationKey key_{"t", "c"};
  const CallContext ctx_;
  std::unique_ptr<Storage> base_;
  CountingStorage storage_;
  int calls_ = 0;
};

TEST_F(HistoryCacheTest, AnswersAsStorageDoesAndThenFromItsCopy) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  const HistoryHits first = *cache.Search(ctx_, Row(), Searching("ledger"));
  EXPECT_EQ(storage_.searches, 1);
  WaitForCopy(cache);
  const HistoryHits second = *cache.Search(ctx_, Row(), Searching("ledger"));
  EXPECT_EQ(storage_.searches, 1);  // From the copy.
  EXPECT_EQ(Contents(second), Contents(first));
  EXPECT_EQ(second.calls, first.calls);
  EXPECT_EQ(second.document_frequency, first.document_frequency);
  EXPECT_GT(cache.bytes(), 0);
}

// A copy made, or brought up to date by Refresh (off the request path),
// holds its items split into pieces: a call's search then splits nothing
// (the copy's size, which counts the pieces, stays as it was).
TEST_F(HistoryCacheTest, SplitsWhatItCopiesOrRefreshesAheadOfTheSearches) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  const int64_t made = cache.bytes();
  const HistoryHits hits = *cache.Search(ctx_, Row(), Searching("ledger rebuild"));
  ASSERT_FALSE(hits.found.empty());
  EXPECT_FALSE(hits.pieces.empty());
  EXPECT_EQ(cache.bytes(), made);
  Turn("Now the claims archive.", "dry-run checksum 5be1e90");
  cache.Refresh(ctx_, Row());
  const int64_t refreshed = cache.bytes();
  EXPECT_GT(refreshed, made);
  const HistoryHits claims = *cache.Search(ctx_, Row(), Searching("claims archive"));
  ASSERT_FALSE(claims.found.empty());
  EXPECT_EQ(cache.bytes(), refreshed);
}

TEST_F(HistoryCacheTest, ReadsOnlyWhatWasAppendedSince) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  Turn("Now the claims archive.", "dry-run checksum 5be1e90");
  storage_.read_after.clear();
  const HistoryHits hits = *cache.Search(ctx_, Row(), Searching("claims archive"));
  ASSERT_EQ(storage_.read_after.size(), 1u);
  EXPECT_EQ(storage_.read_after[0], 6);  // After the six it held.
  ASSERT_FALSE(hits.found.empty());
  EXPECT_EQ(hits.found.back().data.content, "dry-run checksum 5be1e90");
  EXPECT_EQ(storage_.searches, 1);
}

TEST_F(HistoryCacheTest, ARefreshAfterACompactionLeavesTheNextSearchNothingToRead) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  Turn("Now the claims archive.", "dry-run checksum 5be1e90");
  cache.Refresh(ctx_, Row());
  storage_.read_after.clear();
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("claims archive")).ok());
  EXPECT_TRUE(storage_.read_after.empty());
  // Without a copy, one is made (a conversation this replica compacts is
  // one it will likely recall from), and the first search is answered by it.
  HistoryCache fresh(&storage_, Clock::Real(), int64_t{64} << 20);
  fresh.Refresh(ctx_, Row());
  WaitForCopy(fresh);
  const int searches = storage_.searches;
  ASSERT_TRUE(fresh.Search(ctx_, Row(), Searching("claims archive")).ok());
  EXPECT_EQ(storage_.searches, searches);
}

TEST_F(HistoryCacheTest, ARefreshLaterReadsOffTheCallersPathOnlyForAConversationItKeeps) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  // No copy here yet: nothing is queued (the first recall decides).
  EXPECT_FALSE(cache.RefreshLater(Row()));
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  Turn("Now the claims archive.", "dry-run checksum 5be1e90");
  storage_.read_after.clear();
  ASSERT_TRUE(cache.RefreshLater(Row()));
  cache.Flush();
  ASSERT_EQ(storage_.read_after.size(), 1u);  // Read by the refresh.
  EXPECT_EQ(storage_.read_after[0], 6);
  storage_.read_after.clear();
  const HistoryHits hits = *cache.Search(ctx_, Row(), Searching("claims archive"));
  EXPECT_TRUE(storage_.read_after.empty());
  ASSERT_FALSE(hits.found.empty());
  EXPECT_EQ(hits.found.back().data.content, "dry-run checksum 5be1e90");
}

TEST_F(HistoryCacheTest, AnErasureOnAnyReplicaMakesItReadTheHistoryAgain) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  // Erased through storage, as another replica would: only the row says so.
  RedactRequest redact;
  redact.key = key_;
  redact.sequences = {6};
  redact.tombstone = "[erased]";
  ASSERT_TRUE(storage_.RedactItems(ctx_, redact).ok());
  const Conversation row = Row();
  EXPECT_EQ(row.redactions, 1);
  const HistoryHits hits = *cache.Search(ctx_, row, Searching("ledger 77b01c2"));
  EXPECT_EQ(storage_.searches, 2);  // Not from the old copy.
  for (const std::string& content : Contents(hits)) {
    EXPECT_EQ(content.find("77b01c2"), std::string::npos) << content;
  }
  WaitForCopy(cache);
  for (const std::string& content : Contents(*cache.Search(ctx_, row, Searching("ledger")))) {
    EXPECT_EQ(content.find("77b01c2"), std::string::npos) << content;
  }
  EXPECT_EQ(storage_.searches, 2);
}

TEST_F(HistoryCacheTest, ForgetsADeletedConversationAndKeepsNoneOverItsShare) {
  HistoryCache cache(&storage_, Clock::Real(), int64_t{64} << 20);
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  cache.Forget(key_);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0);

  // A quarter of 400 bytes is less than the history: never copied.
  HistoryCache small(&storage_, Clock::Real(), 400);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(small.Search(ctx_, Row(), Searching("ledger")).ok());
    small.Flush();  // The copy's attempt is over.
  }
  EXPECT_FALSE(small.Holds(Row().storage_key));
  EXPECT_EQ(small.bytes(), 0);
  EXPECT_EQ(storage_.searches, 4);

  HistoryCache none(&storage_, Clock::Real(), 0);
  ASSERT_TRUE(none.Search(ctx_, Row(), Searching("ledger")).ok());
  EXPECT_EQ(none.size(), 0u);
}

TEST_F(HistoryCacheTest, DropsCopiesUnusedForLongerThanIdle) {
  FakeClock clock(absl::Now());
  HistoryCache cache(&storage_, &clock, int64_t{64} << 20, absl::Minutes(10));
  ASSERT_TRUE(cache.Search(ctx_, Row(), Searching("ledger")).ok());
  WaitForCopy(cache);
  NewConversation other;
  other.key = {"t", "other"};
  other.model = "gpt-4o";
  ASSERT_TRUE(storage_.CreateConversation(ctx_, other).ok());
  clock.Advance(absl::Minutes(11));
  Conversation row = *storage_.GetConversation(ctx_, other.key);
  row.last_sequence = 0;
  HistorySearch search = Searching("ledger");
  search.key = other.key;
  ASSERT_TRUE(cache.Search(ctx_, row, search).ok());
  cache.Flush();
  EXPECT_TRUE(cache.Holds(row.storage_key));
  EXPECT_FALSE(cache.Holds(Row().storage_key));  // Unused for 11 minutes.
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace convstate
