// The rules a schema must keep to be distributed by conversation on Citus
// (create_distributed_table on conv_key, every table co-located), read from
// a migrated database's catalog, so that a migration that would break them
// fails here although Citus itself is not packaged:
// - every table carries the conversation key;
// - every primary key, unique constraint and unique index includes it;
// - every foreign key includes it on both sides;
// - sequences and identity columns are per table, never shared;
// - the key is derived from what names a conversation, (tenant_id,
//   conversation_id), the same in SQL and in C++, so that a lookup by name
//   is routed with no cross-shard unique index.

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "storage/distribution_key.h"
#include "tests/pg_harness.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;


std::vector<std::string> Rows(const ScratchDatabase& db, const std::string& sql) {
  pqxx::connection c(db.url());
  pqxx::nontransaction n(c);
  std::vector<std::string> out;
  for (const auto& row : n.exec(sql)) out.push_back(row[0].as<std::string>());
  return out;
}


// On plain tables, and on the layout of hash partitions.
class DistributionRulesTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto db = ScratchDatabase::Create(/*migrate=*/true, /*hash_partitions=*/GetParam());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  // The tables to distribute, by name.
  std::string Tables() const {
    return "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
           "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
           // The migrator's own bookkeeping: local tables, not data; and
           // the limited tenants' totals, one row per tenant (on Citus a
           // reference table or distributed by tenant, docs/deployment.md).
           "AND c.relname NOT IN ('schema_migrations', 'schema_layout', 'tenant_usage')";
  }
  std::unique_ptr<ScratchDatabase> db_;
};

TEST_P(DistributionRulesTest, TheSchemaHasTheTablesItShould) {
  // A guard against a catalog query that sees nothing.
  const std::vector<std::string> tables = Rows(
      *db_, "SELECT relname::text FROM pg_class WHERE oid IN (" + Tables() + ") ORDER BY 1");
  EXPECT_GE(tables.size(), 9u) << absl::StrJoin(tables, ", ");
  for (const char* t : {"conversations", "items", "summary_chunks", "compaction_events",
                        "idempotency_keys", "view_states"}) {
    EXPECT_NE(std::find(tables.begin(), tables.end(), t), tables.end()) << t;
  }
}

// The Citus overlay's script distributes every table (a table left out
// stays on the coordinator, and no statement joining it to a distributed
// one is routed).
TEST_P(DistributionRulesTest, TheCitusScriptDistributesEveryTable) {
  const std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                                        std::getenv("TEST_WORKSPACE"),
                                        "/deploy/k8s/overlays/citus/distribute.sql");
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const std::string script((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> tables = Rows(
      *db_, "SELECT relname::text FROM pg_class WHERE oid IN (" + Tables() + ") ORDER BY 1");
  ASSERT_FALSE(tables.empty());
  for (const std::string& t : tables) {
    EXPECT_TRUE(absl::StrContains(script, absl::StrCat("'", t, "'"))) << t << " is not distributed";
  }
}

TEST_P(DistributionRulesTest, EveryTableCarriesTheConversationKey) {
  EXPECT_EQ(absl::StrJoin(Rows(*db_, "SELECT c.relname::text FROM pg_class c WHERE c.oid IN (" +
                                         Tables() +
                                         ") AND NOT EXISTS (SELECT 1 FROM pg_attribute a "
                                         "WHERE a.attrelid = c.oid AND a.attname = 'conv_key' "
                                         "AND NOT a.attisdropped) ORDER BY 1"),
                          ", "),
            "");
}

TEST_P(DistributionRulesTest, EveryKeyAndUniqueIndexIncludesIt) {
  const std::string sql =
      "SELECT i.indexrelid::regclass::text FROM pg_index i WHERE i.indisunique "
      "AND i.indrelid IN (" + Tables() + ") AND NOT EXISTS (SELECT 1 FROM pg_attribute a "
      "WHERE a.attrelid = i.indrelid AND a.attname = 'conv_key' "
      "AND a.attnum = ANY (i.indkey::int2[])) ORDER BY 1";
  EXPECT_EQ(absl::StrJoin(Rows(*db_, sql), ", "), "");
}

TEST_P(DistributionRulesTest, EveryForeignKeyIncludesItOnBothSides) {
  const std::string sql =
      "SELECT f.conname::text FROM pg_constraint f WHERE f.contype = 'f' "
      "AND f.conrelid IN (" + Tables() + ") AND NOT EXISTS ("
      "SELECT 1 FROM unnest(f.conkey, f.confkey) AS k(here, there) "
      "JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = k.here "
      "JOIN pg_attribute b ON b.attrelid = f.confrelid AND b.attnum = k.there "
      "WHERE a.attname = 'conv_key' AND b.attname = 'conv_key') ORDER BY 1";
  EXPECT_EQ(absl::StrJoin(Rows(*db_, sql), ", "), "");
}

// Sequences and the tables that draw from them: those that own them
// (OWNED BY, identity columns) and those whose column defaults call them,
// each partition counted as its partitioned table.
std::string SequenceUsers(const std::string& tables) {
  return "WITH uses AS ("
         "SELECT d.objid AS seq, d.refobjid AS tbl FROM pg_depend d "
         "WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass "
         "UNION SELECT d.refobjid, a.adrelid FROM pg_depend d JOIN pg_attrdef a ON a.oid = d.objid "
         "WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_class'::regclass) "
         "SELECT u.seq, r.tbl FROM uses u "
         "JOIN pg_class s ON s.oid = u.seq AND s.relkind = 'S' "
         // pg_partition_root is NULL for a table that is not partitioned.
         "CROSS JOIN LATERAL (SELECT coalesce(pg_partition_root(u.tbl), u.tbl) AS tbl) r "
         "WHERE r.tbl IN (" + tables + ")";
}

std::string SharedSequences(const std::string& tables) {
  return "SELECT seq::regclass::text FROM (" + SequenceUsers(tables) +
         ") x GROUP BY seq HAVING count(DISTINCT tbl) > 1 ORDER BY 1";
}

TEST_P(DistributionRulesTest, NoSequenceIsSharedBetweenTables) {
  // The query sees the schema's sequences (the audit rows' identity, the
  // conversations' incarnations)...
  EXPECT_GE(std::stoi(Rows(*db_, "SELECT count(DISTINCT seq)::text FROM (" +
                                     SequenceUsers(Tables()) + ") x")
                          .at(0)),
            2);
  // ...and finds one that two tables draw from.
  ASSERT_TRUE(db_->Exec("CREATE SEQUENCE shared_probe; "
                        "CREATE TABLE probe_a (n bigint DEFAULT nextval('shared_probe')); "
                        "CREATE TABLE probe_b (n bigint DEFAULT nextval('shared_probe'))")
                  .ok());
  EXPECT_EQ(absl::StrJoin(Rows(*db_, SharedSequences(Tables() + " UNION SELECT 'probe_a'::regclass "
                                                                "UNION SELECT 'probe_b'::regclass")),
                          ", "),
            "shared_probe");
  ASSERT_TRUE(db_->Exec("DROP TABLE probe_a, probe_b; DROP SEQUENCE shared_probe").ok());
  EXPECT_EQ(absl::StrJoin(Rows(*db_, SharedSequences(Tables())), ", "), "");
}

TEST_P(DistributionRulesTest, TheKeyIsDerivedFromTheConversationsName) {
  const std::vector<ConversationKey> names = {
      {"acme", "support-42"}, {"", ""}, {"a", "bc"}, {"ab", "c"},
      {"t\u00e9nant", "\u4f1a\u8bdd \U0001F600"}, {std::string(300, 'x'), "y"}};
  for (const ConversationKey& name : names) {
    pqxx::connection c(db_->url());
    pqxx::nontransaction n(c);
    const int64_t in_sql = n.exec_params("SELECT conversation_key($1, $2)", name.tenant_id,
                                         name.conversation_id)[0][0]
                               .as<int64_t>();
    EXPECT_EQ(in_sql, DistributionKey(name)) << name.tenant_id << "/" << name.conversation_id;
    EXPECT_GE(in_sql, 0);
  }
  // The separator keeps names apart that concatenate alike.
  EXPECT_NE(DistributionKey({"a", "bc"}), DistributionKey({"ab", "c"}));
}


INSTANTIATE_TEST_SUITE_P(Layouts, DistributionRulesTest, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("plain")
                                                  : "partitioned" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace convstate
