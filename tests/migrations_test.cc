// Migrations against a real PostgreSQL: in order, recorded, safe to apply
// twice and from several processes at once, and edits are refused.

#include "storage/migrator.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "migrations/embedded_migrations.h"
#include "tests/pg_harness.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> AllVersions() {
  std::vector<int> v;
  for (const Migration& m : EmbeddedMigrations()) v.push_back(m.version);
  return v;
}

TEST(MigrationsTest, EmbeddedMigrationsAreNumberedFromOne) {
  ASSERT_FALSE(EmbeddedMigrations().empty());
  EXPECT_EQ(EmbeddedMigrations().front().version, 1);
  EXPECT_EQ(EmbeddedMigrations().front().name, "0001_initial_schema");
  for (size_t i = 1; i < EmbeddedMigrations().size(); ++i) {
    EXPECT_EQ(EmbeddedMigrations()[i].version, EmbeddedMigrations()[i - 1].version + 1);
  }
}

TEST(MigrationsTest, ApplyingTwiceAppliesOnce) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto first = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->applied, AllVersions());
  EXPECT_THAT(first->already_applied, IsEmpty());

  auto second = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(second->applied, IsEmpty());
  EXPECT_EQ(second->already_applied, AllVersions());

  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM schema_migrations"),
            std::to_string(AllVersions().size()));
  for (const char* table :
       {"conversations", "items", "summary_chunks", "compaction_events", "idempotency_keys"}) {
    EXPECT_EQ(*(*db)->QueryValue(std::string("SELECT to_regclass('") + table + "') IS NOT NULL"),
              "t")
        << table;
  }
}

// Runners started together, each on its own connection, straight to
// PostgreSQL or through PgBouncer in transaction mode (where no lock may
// outlive a transaction): each migration is applied once.
void ApplyConcurrently(bool through_pgbouncer) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  std::string url = (*db)->url();
  if (through_pgbouncer) {
    auto pooled = (*db)->pooler_url();
    ASSERT_TRUE(pooled.ok()) << pooled.status();
    url = *pooled;
  }
  constexpr int kRunners = 4;
  std::vector<absl::StatusOr<MigrationReport>> reports(kRunners,
                                                       absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kRunners; ++i) {
    threads.emplace_back([&, i] { reports[i] = ApplyMigrations(url, EmbeddedMigrations()); });
  }
  for (auto& t : threads) t.join();
  int applied = 0;
  for (const auto& r : reports) {
    ASSERT_TRUE(r.ok()) << r.status();
    applied += static_cast<int>(r->applied.size());
  }
  EXPECT_EQ(applied, static_cast<int>(AllVersions().size()));
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM schema_migrations"),
            std::to_string(AllVersions().size()));
}

TEST(MigrationsTest, ConcurrentRunnersApplyEachMigrationOnce) { ApplyConcurrently(false); }

TEST(MigrationsTest, ConcurrentRunnersThroughPgBouncerApplyEachMigrationOnce) {
  ApplyConcurrently(true);
}

TEST(MigrationsTest, EditedMigrationIsRefused) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<Migration> edited = EmbeddedMigrations();
  edited[0].sql += "\n-- edited after shipping\n";
  auto r = ApplyMigrations((*db)->url(), edited);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST(MigrationsTest, NewMigrationIsAppliedOnTopOfOldOnes) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<Migration> more = EmbeddedMigrations();
  const int next = more.back().version + 1;
  more.push_back({next, "9999_test_extra", "CREATE TABLE test_extra (id int);"});
  auto r = ApplyMigrations((*db)->url(), more);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->applied, ElementsAre(next));
}

TEST(MigrationsTest, FailingMigrationLeavesNothingHalfApplied) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<Migration> more = EmbeddedMigrations();
  more.push_back({more.back().version + 1, "9999_broken",
                  "CREATE TABLE half_done (id int); SELECT no_such_function();"});
  auto r = ApplyMigrations((*db)->url(), more);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_EQ(*(*db)->QueryValue("SELECT to_regclass('half_done') IS NULL"), "t");
  EXPECT_EQ(*(*db)->QueryValue("SELECT max(version) FROM schema_migrations"),
            std::to_string(AllVersions().back()));
}

// The layout of hash partitions is laid out at the first start, recorded,
// kept by later starts that do not ask, and refused when asked otherwise.
SchemaLayout Partitions(int n) {
  SchemaLayout layout;
  layout.hash_partitions = n;
  return layout;
}

TEST(MigrationsTest, HashPartitionsAreLaidOutAtTheFirstStartAndRecorded) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto first = ApplyMigrations((*db)->url(), EmbeddedMigrations(), absl::Seconds(5),
                               Partitions(3));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->hash_partitions, 3);
  EXPECT_EQ(*(*db)->QueryValue("SELECT hash_partitions FROM schema_layout"), "3");
  for (const char* table : {"items", "summary_chunks", "compaction_events", "idempotency_keys"}) {
    EXPECT_EQ(*(*db)->QueryValue(std::string("SELECT p.partstrat::text || ':' || "
                                             "(SELECT count(*) FROM pg_inherits i WHERE "
                                             "i.inhparent = p.partrelid) FROM pg_partitioned_table "
                                             "p WHERE p.partrelid = '") +
                                 table + "'::regclass"),
              "h:3")
        << table;
  }
  // Nothing is left of the tables they replaced.
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM pg_class WHERE relname LIKE "
                               "'%_unpartitioned'"),
            "0");

  // A later start that does not ask keeps it; one that asks the same is fine.
  auto unset = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->hash_partitions, 3);
  auto same = ApplyMigrations((*db)->url(), EmbeddedMigrations(), absl::Seconds(5),
                              Partitions(3));
  ASSERT_TRUE(same.ok()) << same.status();

  // Another count, or plain tables, cannot be had in place.
  for (int other : {0, 8}) {
    auto r = ApplyMigrations((*db)->url(), EmbeddedMigrations(), absl::Seconds(5),
                             Partitions(other));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("3 hash partitions"));
  }
}

TEST(MigrationsTest, PlainTablesAreRecordedAndKept) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*(*db)->QueryValue("SELECT hash_partitions FROM schema_layout"), "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM pg_partitioned_table"), "0");
  auto r = ApplyMigrations((*db)->url(), EmbeddedMigrations(), absl::Seconds(5), Partitions(4));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM pg_partitioned_table"), "0");
}

// A database migrated before layouts were recorded, already holding
// conversations, is not laid out again: asking for partitions is refused.
TEST(MigrationsTest, PartitionsAreRefusedOnceConversationsExist) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("DROP TABLE schema_layout").ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO conversations (conv_key, tenant_id, conversation_id, "
                          "model) VALUES (conversation_key('t', 'c'), 't', 'c', 'm')")
                  .ok());
  auto r = ApplyMigrations((*db)->url(), EmbeddedMigrations(), absl::Seconds(5), Partitions(4));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("already holds"));
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM pg_partitioned_table"), "0");
  // Without the ask it starts, and records the plain layout it has.
  auto plain = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->hash_partitions, 0);
}

// Conversations stored before keys were derived from names (0013) move to
// their derived key in every table, on plain tables and on hash partitions,
// keep everything they held and their old key as their incarnation.
class RekeyTest : public ::testing::TestWithParam<int> {};

TEST_P(RekeyTest, ExistingConversationsMoveToTheirDerivedKeys) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<Migration> before;
  for (const Migration& m : EmbeddedMigrations()) {
    if (m.version < 13) before.push_back(m);
  }
  ASSERT_TRUE(ApplyMigrations((*db)->url(), before, absl::Seconds(5), Partitions(GetParam())).ok());
  for (const char* id : {"alpha", "beta", "\u00e9t\u00e9"}) {
    const std::string sql = absl::StrCat(
        "WITH c AS (INSERT INTO conversations (tenant_id, conversation_id, model) VALUES ('acme', '",
        id, "', 'gpt-4o') RETURNING conv_key), "
        "i AS (INSERT INTO items (conv_key, sequence, turn_index, role, kind, content, token_count) "
        "SELECT conv_key, n, n, 'user', 'message', 'item ' || n, 2 FROM c, generate_series(1, 3) n "
        "RETURNING conv_key), "
        "s AS (INSERT INTO summary_chunks (conv_key, chunk_id, from_sequence, through_sequence, "
        "text, token_count, summarizer_model, prompt_version) "
        "SELECT conv_key, 1, 1, 2, 'summary', 1, 'm', 'p' FROM c), "
        "e AS (INSERT INTO compaction_events (conv_key, event) SELECT conv_key, 'compacted' FROM c), "
        "k AS (INSERT INTO idempotency_keys (conv_key, idempotency_key, request_fingerprint, "
        "first_sequence, last_sequence, version) SELECT conv_key, 'key', 'f', 1, 3, 1 FROM c) "
        "SELECT 1");
    ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
    ASSERT_TRUE((*db)->Exec(absl::StrCat("INSERT INTO item_pins (conv_key, sequence, pinned) "
                                         "SELECT conv_key, 2, true FROM conversations WHERE "
                                         "conversation_id = '", id, "'"))
                    .ok());
  }
  // Each foreign key as "table>referenced table".
  constexpr char kForeignKeys[] =
      "SELECT string_agg(k, ',' ORDER BY k) FROM (SELECT conrelid::regclass::text || '>' || "
      "confrelid::regclass::text AS k FROM pg_constraint WHERE contype = 'f' AND conparentid = 0 "
      "AND conrelid::regclass::text NOT IN ('compaction_proposals', 'item_words', 'word_counts', "
      "'item_segments')) f";
  const std::string foreign_keys = *(*db)->QueryValue(kForeignKeys);
  const std::string old_keys =
      *(*db)->QueryValue("SELECT string_agg(conv_key::text, ',' ORDER BY conv_key) FROM conversations");

  auto all = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->hash_partitions, GetParam());
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM conversations WHERE conv_key = "
                               "conversation_key(tenant_id, conversation_id)"),
            "3");
  EXPECT_EQ(*(*db)->QueryValue("SELECT string_agg(incarnation::text, ',' ORDER BY incarnation) "
                               "FROM conversations"),
            old_keys);
  for (const char* table : {"items", "summary_chunks", "compaction_events", "idempotency_keys",
                            "item_pins"}) {
    EXPECT_EQ(*(*db)->QueryValue(absl::StrCat(
                  "SELECT count(*) FILTER (WHERE c.conv_key IS NULL) || '/' || count(*) FROM ",
                  table, " t LEFT JOIN conversations c USING (conv_key)")),
              absl::StrCat("0/", std::string(table) == "items" ? 9 : 3))
        << table;
  }
  // The foreign keys are back (beside those of tables later migrations
  // add; pins and recounts reference their conversation since
  // migrations/0025), and items are append-only again.
  EXPECT_THAT(foreign_keys, ::testing::HasSubstr("item_pins>items"));
  EXPECT_EQ(*(*db)->QueryValue(kForeignKeys),
            absl::StrReplaceAll(foreign_keys, {{"item_pins>items", "item_pins>conversations"},
                                               {"item_token_counts>items",
                                                "item_token_counts>conversations"}}));
  EXPECT_FALSE((*db)->Exec("UPDATE items SET content = 'changed'").ok());
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM pg_trigger WHERE tgname = "
                               "'items_append_only' AND tgenabled <> 'O'"),
            "0");
  // Every conversation's stored bytes were counted (0015): the row, its
  // three items of 6 bytes each, its chunk, audit row, key and pin.
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM conversations WHERE stored_bytes > "
                               "128 + 3 * (6 + 64) + 64"),
            "3");
  // And go on being counted, on either layout.
  const std::string bytes_before =
      *(*db)->QueryValue("SELECT stored_bytes FROM conversations WHERE conversation_id = 'beta'");
  ASSERT_TRUE((*db)->Exec("INSERT INTO compaction_events (conv_key, event, detail) SELECT "
                          "conv_key, 'noted', jsonb_build_object('text', repeat('x', 500)) "
                          "FROM conversations WHERE conversation_id = 'beta'")
                  .ok());
  EXPECT_EQ(*(*db)->QueryValue(absl::StrCat(
                "SELECT stored_bytes - ", bytes_before,
                " > 500 FROM conversations WHERE conversation_id = 'beta'")),
            "t");
  // Deleting still cascades to every table.
  ASSERT_TRUE((*db)->Exec("DELETE FROM conversations WHERE conversation_id = 'alpha'").ok());
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items"), "6");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM item_pins"), "2");
}

INSTANTIATE_TEST_SUITE_P(Layouts, RekeyTest, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("plain")
                                                  : "partitioned" + std::to_string(info.param);
                         });

// The word index moves off the items (0019), on either layout: what was
// compacted is indexed in item_words, the rest is left to its compaction,
// and the items' own index is gone whatever name the layout gave it.
TEST_P(RekeyTest, CompactedItemsMoveToTheWordIndex) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<Migration> before;
  for (const Migration& m : EmbeddedMigrations()) {
    if (m.version < 19) before.push_back(m);
  }
  ASSERT_TRUE(ApplyMigrations((*db)->url(), before, absl::Seconds(5), Partitions(GetParam())).ok());
  ASSERT_TRUE((*db)->Exec(
                   "WITH c AS (INSERT INTO conversations (conv_key, tenant_id, conversation_id, "
                   "model, summarized_through, prune_boundary) VALUES (conversation_key('acme', "
                   "'w'), 'acme', 'w', 'm', 2, 3) RETURNING conv_key) "
                   "INSERT INTO items (conv_key, sequence, turn_index, role, kind, content, "
                   "token_count, search) SELECT conv_key, n, n, 'user', 'message', 'item ' || n, "
                   "2, array_to_tsvector(ARRAY[conv_key || '#word' || n]) "
                   "FROM c, generate_series(1, 5) n")
                  .ok());
  const std::string gin_on_items =
      "SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
      "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'gin' AND x.indrelid = 'items'::regclass";
  ASSERT_EQ(*(*db)->QueryValue(gin_on_items), "1");

  auto all = ApplyMigrations((*db)->url(), EmbeddedMigrations());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*(*db)->QueryValue(gin_on_items), "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT string_agg(sequence::text, ',' ORDER BY sequence) || '|' || "
                               "(SELECT words_indexed_through FROM conversations) FROM item_words"),
            "1,2,3|3");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM item_words WHERE search @@ "
                               "quote_literal(conv_key || '#word2')::tsquery"),
            "1");
  // Their counts are kept (migrations/0020): one item each.
  EXPECT_EQ(*(*db)->QueryValue("SELECT string_agg(word || '=' || items, ',' ORDER BY word) "
                               "FROM word_counts"),
            "word1=1,word2=1,word3=1");
  // Deleting the conversation takes its words too, and their counts.
  ASSERT_TRUE((*db)->Exec("DELETE FROM conversations").ok());
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM item_words"), "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM word_counts"), "0");
}

TEST(MigrationsTest, UnreachableDatabaseIsUnavailable) {
  auto r = ApplyMigrations("postgresql://postgres@127.0.0.1:1/none", EmbeddedMigrations(),
                           absl::Seconds(2));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

}  // namespace
}  // namespace convstate
