#ifndef CONVSTATE_STORAGE_POSTGRES_STORAGE_H_
#define CONVSTATE_STORAGE_POSTGRES_STORAGE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/storage.h"

namespace convstate {

struct PostgresOptions {
  // A libpq connection URL, e.g. "postgresql://user@127.0.0.1:5432/convstate".
  std::string database_url;
  // Connections kept open at most. Calls wait (up to their deadline) for a
  // free one.
  int pool_size = 8;
  // How long opening one connection may take.
  absl::Duration connect_timeout = absl::Seconds(5);
  // How long a call without a deadline may run in the database (a call
  // with one is cancelled there when its deadline passes).
  absl::Duration default_timeout = absl::Seconds(30);
  // The URL leads to a pooler in transaction mode (PgBouncer's
  // pool_mode=transaction), which gives each transaction whichever server
  // connection is free: nothing may outlive a transaction. Statements are
  // then sent with their text instead of prepared once per connection, and
  // no setting is made at connect. Off: connections are the server's own.
  bool pooler = false;
  // A fork shares its source's items (migrations/0025): nothing of them is
  // copied, and its reads of them go to its sources' rows. Off, a fork
  // copies them, and every statement reads the rows of its own
  // conversation only: on Citus, where a statement must stay on its
  // conversation's shard (docs/deployment.md).
  bool shared_forks = true;
};

// A Storage on PostgreSQL with the schema of migrations/ (apply it first,
// see migrator.h). Opens one connection to check the database is reachable:
// UNAVAILABLE if it is not. A connection that breaks is replaced on the next
// call, so the storage recovers by itself when the database comes back.
absl::StatusOr<std::unique_ptr<Storage>> NewPostgresStorage(
    const PostgresOptions& options);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_POSTGRES_STORAGE_H_
