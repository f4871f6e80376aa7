#ifndef CONVSTATE_STORAGE_MIGRATOR_H_
#define CONVSTATE_STORAGE_MIGRATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "migrations/embedded_migrations.h"

namespace convstate {

struct MigrationReport {
  // Versions applied by this call, in order.
  std::vector<int> applied;
  // Versions that were already recorded.
  std::vector<int> already_applied;
};

// Applies `migrations` (ordered by version) that the database has not
// recorded yet, each in its own transaction together with its row in
// `schema_migrations`. Safe to run twice and from several processes at once:
// a transaction-scoped advisory lock serializes runners (so this also works
// through a pooler in transaction mode). FAILED_PRECONDITION if a recorded
// migration's text has changed since it was applied; UNAVAILABLE if the
// database cannot be reached.
absl::StatusOr<MigrationReport> ApplyMigrations(
    const std::string& database_url, const std::vector<Migration>& migrations,
    absl::Duration connect_timeout = absl::Seconds(5));

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_MIGRATOR_H_
