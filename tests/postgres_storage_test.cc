// The PostgreSQL backend against a real PostgreSQL (started by tools/test):
// the shared conformance suite, plus what only a database can do wrong.

#include "storage/postgres_storage.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/distribution_key.h"
#include "storage/storage_conformance.h"
#include "tests/pg_harness.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;

// One migrated database for the whole binary; each test uses its own tenant.
const ScratchDatabase& SharedDatabase() {
  static ScratchDatabase* db = [] {
    auto created = ScratchDatabase::Create(/*migrate=*/true);
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      std::abort();
    }
    return created->release();
  }();
  return *db;
}

// The same, laid out as 4 hash partitions per table.
const ScratchDatabase& PartitionedDatabase() {
  static ScratchDatabase* db = [] {
    auto created = ScratchDatabase::Create(/*migrate=*/true, /*hash_partitions=*/4);
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      std::abort();
    }
    return created->release();
  }();
  return *db;
}

std::unique_ptr<Storage> MakePartitioned() {
  PostgresOptions options;
  options.database_url = PartitionedDatabase().url();
  auto storage = NewPostgresStorage(options);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? std::move(*storage) : nullptr;
}

// The sessions of `db` other than the one asking, that also match
// `also` (a condition, or empty), as a FROM clause.
std::string OtherSessions(const ScratchDatabase& db, absl::string_view also = "") {
  return absl::StrCat("FROM pg_stat_activity WHERE datname = '", db.name(),
                      "' AND pid <> pg_backend_pid()", also.empty() ? "" : " AND ", also);
}

// Waits, at most 10 s, until `done` holds for the number of `sessions`
// (an OtherSessions clause); a count that cannot be read is -1.
void AwaitSessions(const ScratchDatabase& db, const std::string& sessions,
                   const std::function<bool(int64_t)>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    int64_t n = -1;
    const absl::StatusOr<std::string> count =
        db.QueryValue(absl::StrCat("SELECT count(*) ", sessions));
    if (count.ok() && !absl::SimpleAtoi(*count, &n)) n = -1;
    if (done(n)) return;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

// Straight to PostgreSQL, or through PgBouncer in transaction pooling mode.
enum class Route { kDirect, kPgBouncer };

std::unique_ptr<Storage> MakeStorage(Route route) {
  PostgresOptions options;
  options.database_url = SharedDatabase().url();
  if (route == Route::kPgBouncer) {
    auto pooled = SharedDatabase().pooler_url();
    EXPECT_TRUE(pooled.ok()) << pooled.status();
    if (!pooled.ok()) return nullptr;
    options.database_url = *pooled;
    options.pooler = true;
  }
  options.pool_size = 8;
  auto storage = NewPostgresStorage(options);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? std::move(*storage) : nullptr;
}

std::unique_ptr<Storage> MakePostgres() { return MakeStorage(Route::kDirect); }
std::unique_ptr<Storage> MakePgBouncer() { return MakeStorage(Route::kPgBouncer); }
// Forks copied, as on Citus (PostgresOptions::shared_forks), in a
// database of their own: a replica copying forks refuses one where forks
// share items.
std::unique_ptr<Storage> MakeCopiedForks() {
  static ScratchDatabase* db = [] {
    auto created = ScratchDatabase::Create(/*migrate=*/true);
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      std::abort();
    }
    return created->release();
  }();
  PostgresOptions options;
  options.database_url = db->url();
  options.shared_forks = false;
  options.pool_size = 8;
  auto storage = NewPostgresStorage(options);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? std::move(*storage) : nullptr;
}

// Creates conversation `key` in `storage`; appends one user message with
// `text` unless it is empty.
void CreateWithMessage(Storage& storage, const ConversationKey& key, const std::string& text) {
  NewConversation nc;
  nc.key = key;
  nc.model = "m";
  ASSERT_TRUE(storage.CreateConversation(CallContext{}, nc).ok());
  if (text.empty()) return;
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, text, "", "", false, {}, 2});
  ASSERT_TRUE(storage.AppendItems(CallContext{}, req).ok());
}

INSTANTIATE_TEST_SUITE_P(Postgres, StorageConformanceTest,
                         ::testing::Values(StorageFactory{"postgres", MakePostgres}),
                         StorageFactoryName);
// The whole suite on hash-partitioned tables.
INSTANTIATE_TEST_SUITE_P(Partitioned, StorageConformanceTest,
                         ::testing::Values(StorageFactory{"partitioned", MakePartitioned}),
                         StorageFactoryName);
// The whole suite again through PgBouncer in transaction mode: nothing may
// depend on a session outliving its transaction.
INSTANTIATE_TEST_SUITE_P(PgBouncer, StorageConformanceTest,
                         ::testing::Values(StorageFactory{"pgbouncer", MakePgBouncer}),
                         StorageFactoryName);
INSTANTIATE_TEST_SUITE_P(CopiedForks, StorageConformanceTest,
                         ::testing::Values(StorageFactory{"copied_forks", MakeCopiedForks}),
                         StorageFactoryName);

// What only a database can do wrong, on both routes.
class PostgresRouteTest : public ::testing::TestWithParam<Route> {
 protected:
  std::unique_ptr<Storage> Make() { return MakeStorage(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Routes, PostgresRouteTest,
                         ::testing::Values(Route::kDirect, Route::kPgBouncer),
                         [](const ::testing::TestParamInfo<Route>& info) {
                           return info.param == Route::kDirect ? "direct" : "pgbouncer";
                         });

// Reads of each hash partition so far ("name:count,..."), as the statistics
// collector has them: a backend reports its counts when it goes idle or
// exits, so this waits until two looks 300 ms apart agree.
std::map<std::string, int64_t> PartitionReads(const ScratchDatabase& db) {
  const std::string sql =
      "SELECT coalesce(string_agg(relname || ':' || (seq_scan + coalesce(idx_scan, 0)), ','), '') "
      "FROM pg_stat_user_tables WHERE relname ~ '_p[0-9]+$'";
  std::string last = "none";
  for (int i = 0; i < 50; ++i) {
    const std::string now = db.QueryValue(sql).value_or("");
    if (now == last) break;
    last = now;
    absl::SleepFor(absl::Milliseconds(300));
  }
  std::map<std::string, int64_t> reads;
  for (absl::string_view entry : absl::StrSplit(last, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, ':');
    int64_t n = 0;
    EXPECT_TRUE(absl::SimpleAtoi(kv.second, &n)) << entry;
    reads[kv.first] = n;
  }
  return reads;
}

// On hash partitions, calls about one conversation read only the partition
// of its key in each table: the statements name it by conv_key, so
// PostgreSQL prunes the others (and Citus would route to one shard). Read
// from the statistics of every partition, before the calls (the layout's
// own checks read every partition) and after the storage's connections
// have closed.
TEST(PartitionRoutingTest, CallsAboutOneConversationReadOnePartition) {
  constexpr int kPartitions = 4;
  auto db = ScratchDatabase::Create(/*migrate=*/true, kPartitions);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::map<std::string, int64_t> before = PartitionReads(**db);
  ASSERT_EQ(before.size(), 4u * kPartitions);
  const ConversationKey key{"acme", "routed"};
  {
    PostgresOptions options;
    options.database_url = (*db)->url();
    options.pool_size = 2;
    auto storage = NewPostgresStorage(options);
    ASSERT_TRUE(storage.ok()) << storage.status();
    Storage& s = **storage;
    CallContext ctx;
    CreateWithMessage(s, key, "first");
    NewConversation again;
    again.key = key;
    again.model = "m";
    EXPECT_TRUE(absl::IsAlreadyExists(s.CreateConversation(ctx, again).status()));
    for (const char* text : {"second", "third"}) {
      AppendRequest req;
      req.key = key;
      req.idempotency_key = text;
      req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, text, "", "", false, {}, 2});
      ASSERT_TRUE(s.AppendItems(ctx, req).ok());
    }
    ASSERT_TRUE(s.SetPinned(ctx, key, 1, true).ok());
    auto held = s.LoadContextSince(ctx, key, nullptr);
    ASSERT_TRUE(held.ok()) << held.status();
    ASSERT_TRUE(s.LoadContextSince(ctx, key, &held->snapshot.conversation).ok());
    ASSERT_TRUE(s.GetConversation(ctx, key).ok());
    ASSERT_TRUE(ItemRows(s, ctx, key, 0, 10).ok());
    ASSERT_TRUE(AllSummaries(s, ctx, key, true).ok());
    ASSERT_TRUE(AllCompactionEvents(s, ctx, key).ok());
    auto lease = s.TryAcquireCompactionLease(ctx, key, "test", absl::Seconds(5));
    ASSERT_TRUE(lease.ok() && lease->has_value()) << lease.status();
    ASSERT_TRUE(s.ReleaseCompactionLease(ctx, key, **lease).ok());
  }
  // The remainder of the key's hash, the same in every table.
  std::string remainder;
  for (int r = 0; r < kPartitions && remainder.empty(); ++r) {
    if (*(*db)->QueryValue(absl::StrCat("SELECT satisfies_hash_partition('items'::regclass, ",
                                        kPartitions, ", ", r, ", ", DistributionKey(key),
                                        "::bigint)")) == "t") {
      remainder = std::to_string(r);
    }
  }
  ASSERT_FALSE(remainder.empty());
  std::vector<std::string> read;
  for (const auto& [name, n] : PartitionReads(**db)) {
    if (n > before.at(name)) read.push_back(name);
  }
  const std::string partition = "_p" + remainder;
  EXPECT_THAT(read, ::testing::Contains("items" + partition));
  for (const std::string& name : read) {
    EXPECT_TRUE(absl::EndsWith(name, partition)) << name << " was read too";
  }
}

// A replica copying forks refuses a database where forks share items:
// it would read none of what they share.
TEST(PostgresStorageTest, CopyingForksIsRefusedWhereForksShareItems) {
  PostgresOptions options;
  options.database_url = SharedDatabase().url();
  auto shared = NewPostgresStorage(options);
  ASSERT_TRUE(shared.ok()) << shared.status();
  const ConversationKey source{"acme", "layout-source"}, fork{"acme", "layout-fork"};
  CreateWithMessage(**shared, source, "first");
  ForkRequest req;
  req.source = source;
  req.fork = fork;
  ASSERT_TRUE((*shared)->ForkConversation(CallContext{}, req).ok());
  options.shared_forks = false;
  auto copying = NewPostgresStorage(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(copying.status())) << copying.status();
}

TEST(PostgresStorageTest, UnreachableDatabaseIsUnavailable) {
  PostgresOptions options;
  // Port 1 on loopback: nothing listens there.
  options.database_url = "postgresql://postgres@127.0.0.1:1/convstate";
  options.connect_timeout = absl::Seconds(2);
  auto storage = NewPostgresStorage(options);
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kUnavailable) << storage.status();
}

TEST(PostgresStorageTest, MissingUrlIsInvalidArgument) {
  EXPECT_EQ(NewPostgresStorage(PostgresOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The database drops every connection (a restart or failover looks like
// this to the pool): the next calls reconnect and succeed, and nothing
// acknowledged before is lost.
TEST_P(PostgresRouteTest, RecoversWhenConnectionsAreDropped) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  CallContext ctx;
  const ConversationKey key{
      GetParam() == Route::kDirect ? "tenant-reconnect" : "tenant-reconnect-pooled", "conv"};
  CreateWithMessage(*storage, key, "before");
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, "", "", "", false, {}, 2});

  const ScratchDatabase& db = SharedDatabase();
  const std::string others = OtherSessions(db);
  ASSERT_TRUE(db.Exec(absl::StrCat("SELECT pg_terminate_backend(pid) ", others)).ok());
  // Once they are gone, as after a restart: the pool sees its connections
  // closed and opens new ones before sending anything (an append sent on a
  // connection that breaks under it is in doubt, as the test below shows).
  AwaitSessions(db, others, [](int64_t n) { return n == 0; });
  for (int i = 0; i < 3; ++i) {
    req.items[0].content = absl::StrCat("after-", i);
    auto r = storage->AppendItems(ctx, req);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto conv = storage->GetConversation(ctx, key);
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_EQ(conv->item_count, 4);
}

// A deadline shorter than the statement is enforced inside the database.
TEST_P(PostgresRouteTest, DeadlineBoundsWaitingOnALockedConversation) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  const std::string tenant =
      GetParam() == Route::kDirect ? "tenant-deadline" : "tenant-deadline-pooled";
  const ConversationKey key{tenant, "conv"};
  CreateWithMessage(*storage, key, "");

  // Another session holds the conversation's row lock.
  pqxx::connection holder(SharedDatabase().url());
  pqxx::work tx(holder);
  tx.exec(absl::StrCat("SELECT 1 FROM conversations WHERE tenant_id = '", tenant, "' FOR UPDATE"));

  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, "blocked", "", "", false, {}, 2});
  auto r = storage->AppendItems(CallContext{absl::Now() + absl::Milliseconds(300)}, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  tx.abort();
  EXPECT_EQ(storage->GetConversation(CallContext{}, key)->item_count, 0);
}

// An append is one statement committed as it runs. When its session ends
// while it waits (an administrator, a failover), nothing of it is stored.
// Without an idempotency key the caller is told that the outcome is not
// known and to send it again with one; with a key, it is sent again on
// another connection and stored once.
TEST_P(PostgresRouteTest, AnAppendCutOffMidStatementIsInDoubtOrSentAgainWithItsKey) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  const std::string tenant =
      GetParam() == Route::kDirect ? "tenant-cut-off" : "tenant-cut-off-pooled";
  const ConversationKey key{tenant, "conv"};
  CreateWithMessage(*storage, key, "");
  const ScratchDatabase& db = SharedDatabase();
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, "cut off", "", "", false, {}, 2});
  req.items.push_back(ItemData{Role::kAssistant, ItemKind::kMessage, "reply", "", "", false, {}, 1});
  // The append, waiting behind another session that holds the
  // conversation's row, has its session ended; then the row is let go.
  auto cut_off = [&](const AppendRequest& r) -> absl::StatusOr<AppendResult> {
    pqxx::connection holder(db.url());
    pqxx::work tx(holder);
    tx.exec(absl::StrCat("SELECT 1 FROM conversations WHERE tenant_id = '", tenant,
                         "' FOR UPDATE"));
    absl::StatusOr<AppendResult> out = absl::UnknownError("not run");
    std::thread append(
        [&] { out = storage->AppendItems(CallContext{absl::Now() + absl::Seconds(20)}, r); });
    const std::string waiting = OtherSessions(db, "wait_event_type = 'Lock'");
    AwaitSessions(db, waiting, [](int64_t n) { return n > 0; });
    EXPECT_TRUE(db.Exec(absl::StrCat("SELECT pg_terminate_backend(pid) ", waiting)).ok());
    tx.abort();
    append.join();
    return out;
  };
  const absl::StatusOr<AppendResult> without_key = cut_off(req);
  EXPECT_EQ(without_key.status().code(), absl::StatusCode::kUnavailable) << without_key.status();
  EXPECT_EQ(storage->GetConversation(CallContext{}, key)->item_count, 0);

  req.idempotency_key = "cut-off";
  req.request_fingerprint = "fingerprint";
  const absl::StatusOr<AppendResult> with_key = cut_off(req);
  ASSERT_TRUE(with_key.ok()) << with_key.status();
  EXPECT_EQ(storage->GetConversation(CallContext{}, key)->item_count, 2);
  auto again = storage->AppendItems(CallContext{}, req);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version, with_key->version);
  EXPECT_EQ(again->items.front().sequence, with_key->items.front().sequence);
  EXPECT_EQ(storage->GetConversation(CallContext{}, key)->item_count, 2);
}

// Reads that are one statement outside a transaction (every LoadContext,
// the tenant's usage) are bounded by the call's deadline too, not by the
// connection's default statement timeout; so is a transaction of many
// statements, as a whole.
TEST_P(PostgresRouteTest, DeadlineBoundsOneStatementReadsAndWholeTransactions) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  const std::string tenant =
      GetParam() == Route::kDirect ? "tenant-read-deadline" : "tenant-read-deadline-pooled";
  const ConversationKey key{tenant, "conv"};
  CreateWithMessage(*storage, key, "hello");
  // Another session holds the tables these calls read.
  pqxx::connection holder(SharedDatabase().url());
  pqxx::work tx(holder);
  tx.exec("LOCK TABLE items, conversations IN ACCESS EXCLUSIVE MODE");
  const absl::Time start = absl::Now();
  auto load = storage->LoadContext(CallContext{absl::Now() + absl::Milliseconds(300)}, key);
  EXPECT_EQ(load.status().code(), absl::StatusCode::kDeadlineExceeded) << load.status();
  auto usage = storage->GetTenantUsage(CallContext{absl::Now() + absl::Milliseconds(300)}, tenant);
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kDeadlineExceeded) << usage.status();
  auto listed = ItemRows(*storage, CallContext{absl::Now() + absl::Milliseconds(300)}, key, 0, 10);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kDeadlineExceeded) << listed.status();
  // Three calls of 300 ms each, not three connection defaults of 30 s.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  tx.abort();
  // The storage goes on after the cancels.
  auto after = storage->LoadContext(CallContext{absl::Now() + absl::Seconds(10)}, key);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->live_items.size(), 1u);
}

TEST_P(PostgresRouteTest, StoredItemsCannotBeUpdated) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  const std::string tenant =
      GetParam() == Route::kDirect ? "tenant-append-only" : "tenant-append-only-pooled";
  const ConversationKey key{tenant, "conv"};
  CreateWithMessage(*storage, key, "original");
  absl::Status update = SharedDatabase().Exec(absl::StrCat(
      "UPDATE items SET content = 'tampered' WHERE conv_key = (SELECT conv_key FROM "
      "conversations WHERE tenant_id = '", tenant, "')"));
  EXPECT_FALSE(update.ok());
  EXPECT_NE(std::string(update.message()).find("append-only"), std::string::npos) << update;
  EXPECT_EQ(ItemRows(*storage, CallContext{}, key, 0, 1)->at(0).data.content, "original");
}

// The word index holds what compactions took out of the view and nothing
// after (migrations/0019): an append writes no index entry, a commit has
// its boundary indexed (soon after it, off the call), a redaction takes an
// item's words out, and a search still finds words on either side of the
// boundary.
TEST_P(PostgresRouteTest, OnlyCompactedItemsAreInTheWordIndex) {
  auto storage = Make();
  ASSERT_NE(storage, nullptr);
  // A tenant of its own each time (the test counts the tenant's rows, and
  // runs again in the same database under --gtest_repeat).
  const std::string tenant =
      absl::StrCat(GetParam() == Route::kDirect ? "tenant-word-index-" : "tenant-word-index-pooled-",
                   absl::ToUnixNanos(absl::Now()));
  const ConversationKey key{tenant, "conv"};
  CreateWithMessage(*storage, key, "the first message");
  CallContext ctx;
  AppendRequest req;
  req.key = key;
  for (int i = 2; i <= 12; ++i) {
    req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage,
                                 absl::StrCat("step ", i, " word", i), "", "", false, {}, 3});
  }
  ASSERT_TRUE(storage->AppendItems(ctx, req).ok());
  const std::string conv = absl::StrCat(
      "(SELECT conv_key FROM conversations WHERE tenant_id = '", tenant, "')");
  auto indexed = [&] {
    return SharedDatabase()
        .QueryValue(absl::StrCat("SELECT coalesce(string_agg(sequence::text, ',' ORDER BY "
                                 "sequence), '') || '|' || (SELECT words_indexed_through FROM "
                                 "conversations WHERE conv_key = ", conv, ") FROM item_words "
                                 "WHERE conv_key = ", conv))
        .value_or("error");
  };
  EXPECT_EQ(indexed(), "|0");
  EXPECT_EQ(SharedDatabase()
                .QueryValue(absl::StrCat(
                    "SELECT count(*) FROM items WHERE search IS NOT NULL AND conv_key = ", conv))
                .value_or("error"),
            "12");

  CompactionCommit commit;
  commit.key = key;
  commit.chunk = Chunk(1, 4, "summary of four");
  commit.new_prune_boundary = 5;
  ASSERT_TRUE(storage->CommitCompaction(ctx, commit).ok());
  // Indexed after the call, on the storage's own thread.
  std::string now = indexed();
  for (int i = 0; i < 200 && now != "1,2,3,4,5|5"; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    now = indexed();
  }
  EXPECT_EQ(now, "1,2,3,4,5|5");

  RedactRequest erase;
  erase.key = key;
  erase.sequences = {3};
  erase.tombstone = "[erased]";
  erase.tombstone_tokens = 1;
  erase.reason = "erasure";
  ASSERT_TRUE(storage->RedactItems(ctx, erase).ok());
  EXPECT_EQ(indexed(), "1,2,4,5|5");

  HistorySearch search;
  search.key = key;
  search.terms = {"word2", "word3", "word9"};
  auto hits = storage->SearchHistory(ctx, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(hits->document_frequency["word2"], 1);  // indexed
  EXPECT_EQ(hits->document_frequency["word3"], 0);  // erased
  EXPECT_EQ(hits->document_frequency["word9"], 1);  // in the view, read from the item
  std::vector<int64_t> found;
  for (const Item& item : hits->found) found.push_back(item.sequence);
  EXPECT_THAT(found, ::testing::ElementsAre(9, 2));
}

}  // namespace
}  // namespace convstate
