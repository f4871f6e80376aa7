#ifndef CONVSTATE_STORAGE_POSTGRES_CONNECTION_POOL_H_
#define CONVSTATE_STORAGE_POSTGRES_CONNECTION_POOL_H_

// The PostgreSQL backend's connections, internal to its target.

#include <memory>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/postgres_statements.h"
#include "storage/postgres_storage.h"

namespace convstate::pg {

class ConnectionPool {
 public:
  // Behind a pooler (options.pooler) connections carry no session state:
  // no statement timeout set at connect, no prepared statements.
  explicit ConnectionPool(const PostgresOptions& options);

  // Takes an idle connection, or opens one if fewer than the maximum are
  // open, or waits for one until `deadline`.
  absl::StatusOr<std::unique_ptr<pqxx::connection>> Acquire(absl::Time deadline);

  // Returns `conn` to the pool; a null or closed connection frees its slot.
  void Release(std::unique_ptr<pqxx::connection> conn);

 private:
  const std::string url_;
  const absl::Duration connect_timeout_;
  const bool prepare_;
  // Which statements it prepares.
  const ForkLayout layout_;
  const int max_size_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_POSTGRES_CONNECTION_POOL_H_
