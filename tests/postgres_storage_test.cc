// The PostgreSQL backend against a real PostgreSQL (started by tools/test):
// the shared conformance suite, plus what only a database can do wrong.

#include "storage/postgres_storage.h"

#include <memory>

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
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

std::unique_ptr<Storage> MakePostgres() {
  PostgresOptions options;
  options.database_url = SharedDatabase().url();
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
TEST(PostgresStorageTest, RecoversWhenConnectionsAreDropped) {
  auto storage = MakePostgres();
  ASSERT_NE(storage, nullptr);
  CallContext ctx;
  const ConversationKey key{"tenant-reconnect", "conv"};
  CreateWithMessage(*storage, key, "before");
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, "", "", "", false, {}, 2});

  const ScratchDatabase& db = SharedDatabase();
  ASSERT_TRUE(db.Exec(absl::StrCat("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE datname = '", db.name(),
                                   "' AND pid <> pg_backend_pid()"))
                  .ok());
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
TEST(PostgresStorageTest, DeadlineBoundsWaitingOnALockedConversation) {
  auto storage = MakePostgres();
  ASSERT_NE(storage, nullptr);
  const ConversationKey key{"tenant-deadline", "conv"};
  CreateWithMessage(*storage, key, "");

  // Another session holds the conversation's row lock.
  pqxx::connection holder(SharedDatabase().url());
  pqxx::work tx(holder);
  tx.exec("SELECT 1 FROM conversations WHERE tenant_id = 'tenant-deadline' FOR UPDATE");

  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, "blocked", "", "", false, {}, 2});
  auto r = storage->AppendItems(CallContext{absl::Now() + absl::Milliseconds(300)}, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  tx.abort();
  EXPECT_EQ(storage->GetConversation(CallContext{}, key)->item_count, 0);
}

TEST(PostgresStorageTest, StoredItemsCannotBeUpdated) {
  auto storage = MakePostgres();
  ASSERT_NE(storage, nullptr);
  const ConversationKey key{"tenant-append-only", "conv"};
  CreateWithMessage(*storage, key, "original");
  absl::Status update = SharedDatabase().Exec("UPDATE items SET content = 'tampered'");
  EXPECT_FALSE(update.ok());
  EXPECT_NE(std::string(update.message()).find("append-only"), std::string::npos) << update;
  EXPECT_EQ(storage->ListItems(CallContext{}, key, 0, 1)->at(0).data.content, "original");
}

}  // namespace
}  // namespace convstate
