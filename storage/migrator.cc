#include "storage/migrator.h"

#include <map>

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "services/common/fingerprint.h"
#include "services/common/log.h"
#include "storage/pg_util.h"

namespace convstate {
namespace {

// Any constant works; it only has to be the same in every runner.
constexpr int64_t kMigrationLockId = 7207736900001;

struct Recorded {
  std::string name;
  std::string checksum;
};

std::string Checksum(const Migration& m) { return Fingerprinter().Add(m.sql).Hex(); }

// The tables laid out as hash partitions (the large, per-conversation ones).
constexpr const char* kPartitionedTables[] = {"items", "summary_chunks", "compaction_events",
                                              "idempotency_keys"};

}  // namespace

std::string HashPartitionedLayoutSql(int partitions) {
  std::string sql;
  for (const char* t : kPartitionedTables) {
    absl::StrAppend(&sql, "ALTER TABLE ", t, " RENAME TO ", t, "_unpartitioned;\n",
                    "CREATE TABLE ", t, " (LIKE ", t, "_unpartitioned INCLUDING DEFAULTS ",
                    "INCLUDING CONSTRAINTS INCLUDING INDEXES INCLUDING STORAGE INCLUDING GENERATED) ",
                    "PARTITION BY HASH (conv_key);\n");
    for (int r = 0; r < partitions; ++r) {
      absl::StrAppend(&sql, "CREATE TABLE ", t, "_p", r, " PARTITION OF ", t,
                      " FOR VALUES WITH (MODULUS ", partitions, ", REMAINDER ", r, ");\n");
    }
    absl::StrAppend(&sql, "ALTER TABLE ", t,
                    " ADD FOREIGN KEY (conv_key) REFERENCES conversations ON DELETE CASCADE;\n");
  }
  // Dropping the old tables drops the keys that pointed at them.
  for (const char* t : kPartitionedTables) {
    absl::StrAppend(&sql, "DROP TABLE ", t, "_unpartitioned CASCADE;\n");
  }
  absl::StrAppend(
      &sql,
      // PostgreSQL 15 has no identity column on a partitioned table: a
      // sequence of its own does the same.
      "CREATE SEQUENCE compaction_events_event_id_seq OWNED BY compaction_events.event_id;\n"
      "ALTER TABLE compaction_events ALTER COLUMN event_id "
      "SET DEFAULT nextval('compaction_events_event_id_seq');\n"
      "CREATE TRIGGER items_append_only BEFORE UPDATE ON items "
      "FOR EACH ROW EXECUTE FUNCTION items_are_append_only();\n"
      // Pins and recounts (and the word index, migrations/0019) reference
      // the items' table until migrations/0025, which makes them reference
      // the conversation (they name items a fork shares with its source).
      "DO $$ BEGIN IF to_regclass('item_segments') IS NULL THEN "
      "ALTER TABLE item_pins ADD FOREIGN KEY (conv_key, sequence) "
      "REFERENCES items (conv_key, sequence) ON DELETE CASCADE; "
      "ALTER TABLE item_token_counts ADD FOREIGN KEY (conv_key, sequence) "
      "REFERENCES items (conv_key, sequence) ON DELETE CASCADE; "
      "IF to_regclass('item_words') IS NOT NULL THEN "
      "ALTER TABLE item_words ADD FOREIGN KEY (conv_key, sequence) "
      "REFERENCES items (conv_key, sequence) ON DELETE CASCADE; END IF; END IF; END $$;\n"
      // The stored-bytes triggers of the recreated tables
      // (migrations/0015_stored_bytes.sql), once that migration is in.
      "DO $$ BEGIN IF to_regprocedure('install_stored_bytes_triggers()') IS NOT NULL THEN "
      "PERFORM install_stored_bytes_triggers(); END IF; END $$;\n");
  return sql;
}

absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& database_url,
                                                const std::vector<Migration>& migrations,
                                                absl::Duration connect_timeout,
                                                const SchemaLayout& layout) {
  if (layout.hash_partitions.has_value() &&
      (*layout.hash_partitions < 0 || *layout.hash_partitions > 1024)) {
    return absl::InvalidArgumentError("hash partitions: 0 (plain tables) to 1024");
  }
  for (size_t i = 1; i < migrations.size(); ++i) {
    if (migrations[i].version <= migrations[i - 1].version) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migrations out of order or duplicated at ", migrations[i].name));
    }
  }
  MigrationReport report;
  std::string step = "connect";
  try {
    pqxx::connection conn(pg::WithConnectTimeout(database_url, connect_timeout));
    // Every transaction below takes the same transaction-scoped advisory
    // lock: concurrent runners apply each migration exactly once, and no
    // lock outlives its transaction, so the runner also works through a
    // pooler in transaction mode (PgBouncer), where a session is not kept.
    auto lock = [](pqxx::work& w) {
      w.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLockId);
    };
    auto read_recorded = [](pqxx::work& w) {
      std::map<int, Recorded> recorded;
      for (const auto& row : w.exec("SELECT version, name, checksum FROM schema_migrations")) {
        recorded[row[0].as<int>()] = {row[1].as<std::string>(), row[2].as<std::string>()};
      }
      return recorded;
    };
    std::map<int, Recorded> recorded;
    step = "lock";
    {
      pqxx::work w(conn);
      lock(w);
      w.exec(
          "CREATE TABLE IF NOT EXISTS schema_migrations ("
          " version integer PRIMARY KEY,"
          " name text NOT NULL,"
          " checksum text NOT NULL,"
          " applied_at timestamptz NOT NULL DEFAULT now())");
      recorded = read_recorded(w);
      w.commit();
    }
    auto check = [&](const Migration& m, const Recorded& r) -> absl::Status {
      if (r.checksum == Checksum(m)) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", m.name, " was changed after it was applied; add a new "
          "migration instead of editing one that has shipped"));
    };
    for (const Migration& m : migrations) {
      auto it = recorded.find(m.version);
      if (it != recorded.end()) {
        if (absl::Status s = check(m, it->second); !s.ok()) return s;
        report.already_applied.push_back(m.version);
        recorded.erase(it);
        continue;
      }
      step = absl::StrCat("apply ", m.name);
      pqxx::work w(conn);
      lock(w);
      // Another runner may have applied it since the first look.
      std::map<int, Recorded> now = read_recorded(w);
      if (auto done = now.find(m.version); done != now.end()) {
        if (absl::Status s = check(m, done->second); !s.ok()) return s;
        report.already_applied.push_back(m.version);
        continue;
      }
      w.exec(m.sql);
      w.exec_params("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version, m.name, Checksum(m));
      w.commit();
      report.applied.push_back(m.version);
      LogInfo("applied migration ", m.name);
    }
    for (const auto& [version, r] : recorded) {
      LogWarning("database has migration ", r.name,
                 " that this binary does not know; it is newer than this binary");
    }
    step = "settle the layout";
    {
      pqxx::work w(conn);
      lock(w);
      w.exec(
          "CREATE TABLE IF NOT EXISTS schema_layout ("
          " id integer PRIMARY KEY CHECK (id = 1),"
          " hash_partitions integer NOT NULL,"
          " decided_at timestamptz NOT NULL DEFAULT now())");
      const pqxx::result decided = w.exec("SELECT hash_partitions FROM schema_layout");
      const int asked = layout.hash_partitions.value_or(0);
      if (!decided.empty()) {
        const int recorded_partitions = decided[0][0].as<int>();
        if (layout.hash_partitions.has_value() && asked != recorded_partitions) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the database was laid out with ", recorded_partitions,
              " hash partitions at its first start; ", asked,
              " cannot be had without moving the data to a new database"));
        }
        report.hash_partitions = recorded_partitions;
      } else {
        if (asked > 0) {
          if (w.exec("SELECT EXISTS (SELECT 1 FROM conversations)")[0][0].as<bool>()) {
            return absl::FailedPreconditionError(
                "hash partitions are laid out at a database's first start; this one already "
                "holds conversations");
          }
          w.exec(HashPartitionedLayoutSql(asked));
          LogInfo("laid out items, summary chunks, audit rows and idempotency keys as ", asked,
                  " hash partitions of conv_key");
        }
        w.exec_params("INSERT INTO schema_layout (id, hash_partitions) VALUES (1, $1)", asked);
        report.hash_partitions = asked;
      }
      w.commit();
    }
  } catch (const std::exception& e) {
    return pg::ExceptionToStatus(e, absl::StrCat("migrations: ", step));
  }
  return report;
}

}  // namespace convstate
