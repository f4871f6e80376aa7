#include "storage/postgres_connection_pool.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <utility>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "storage/pg_util.h"
#include "storage/postgres_statements.h"

namespace convstate::pg {

ConnectionPool::ConnectionPool(const PostgresOptions& options)
    : url_(pg::WithUserTimeout(
          options.pooler ? options.database_url
                         : pg::WithStatementTimeout(options.database_url, options.default_timeout),
          options.connect_timeout)),
      connect_timeout_(options.connect_timeout),
      prepare_(!options.pooler),
      layout_(options.shared_forks ? ForkLayout::kShared : ForkLayout::kCopied),
      max_size_(options.pool_size < 1 ? 1 : options.pool_size) {}

absl::StatusOr<std::unique_ptr<pqxx::connection>> ConnectionPool::Acquire(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < max_size_;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&available), deadline)) {
      return absl::DeadlineExceededError(
          "deadline passed while waiting for a database connection");
    }
    while (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      // One the server closed meanwhile would fail whatever is sent on
      // it; a write sent alone could not tell whether it was committed.
      if (!pg::ClosedWhileIdle(conn->sock())) return conn;
      --open_;
    }
    ++open_;  // Reserve the slot; the connection opens outside the lock.
  }
  try {
    // Connecting is bounded by the call's deadline too (libpq counts
    // whole seconds, at least 2).
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      Release(nullptr);
      return absl::DeadlineExceededError("deadline passed before a database connection opened");
    }
    auto conn = std::make_unique<pqxx::connection>(
        pg::WithConnectTimeout(url_, std::min(connect_timeout_, absl::Ceil(left, absl::Seconds(1)))));
    // Registered only: libpqxx prepares each statement on the connection
    // the first time it runs, inside the call's transaction (and under
    // its deadline).
    if (prepare_) {
      for (const Statement& s : Statements(layout_)) conn->prepare(s.name, s.sql);
    }
    return conn;
  } catch (const std::exception& e) {
    Release(nullptr);
    return pg::ExceptionToStatus(e, "connect");
  }
}

void ConnectionPool::Release(std::unique_ptr<pqxx::connection> conn) {
  absl::MutexLock lock(&mu_);
  if (conn != nullptr && conn->is_open()) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
}

}  // namespace convstate::pg
