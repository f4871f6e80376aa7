#ifndef CONVSTATE_STORAGE_MIGRATOR_H_
#define CONVSTATE_STORAGE_MIGRATOR_H_

#include <optional>
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
  // The layout as recorded: hash partitions per table, 0 for plain tables.
  int hash_partitions = 0;
};

// How the per-conversation tables are laid out, decided at a database's
// first start and recorded in `schema_layout`.
struct SchemaLayout {
  // Items, summary chunks (with their ledger), audit rows and idempotency
  // keys as this many hash partitions of conv_key; 0: plain tables;
  // unset: whatever the database recorded (plain at a first start).
  std::optional<int> hash_partitions;
};

// Applies `migrations` (ordered by version) that the database has not
// recorded yet, each in its own transaction together with its row in
// `schema_migrations`. Safe to run twice and from several processes at once:
// a transaction-scoped advisory lock serializes runners (so this also works
// through a pooler in transaction mode). FAILED_PRECONDITION if a recorded
// migration's text has changed since it was applied; UNAVAILABLE if the
// database cannot be reached.
//
// Then settles the layout: at the first start (no layout recorded) the one
// asked for is laid out, if the database holds no conversation yet, and
// recorded; later, asking for another is FAILED_PRECONDITION.
absl::StatusOr<MigrationReport> ApplyMigrations(
    const std::string& database_url, const std::vector<Migration>& migrations,
    absl::Duration connect_timeout = absl::Seconds(5), const SchemaLayout& layout = {});

// The statements that turn the freshly migrated, empty per-conversation
// tables into `partitions` hash partitions each (exposed for tests).
std::string HashPartitionedLayoutSql(int partitions);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_MIGRATOR_H_
