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

}  // namespace

absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& database_url,
                                                const std::vector<Migration>& migrations,
                                                absl::Duration connect_timeout) {
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
  } catch (const std::exception& e) {
    return pg::ExceptionToStatus(e, absl::StrCat("migrations: ", step));
  }
  return report;
}

}  // namespace convstate
