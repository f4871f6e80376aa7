#ifndef CONVSTATE_TESTS_PG_HARNESS_H_
#define CONVSTATE_TESTS_PG_HARNESS_H_

// Scratch databases on the PostgreSQL that tools/test starts. The server's
// URL (without a database name) comes from CONVSTATE_TEST_PG; without it the
// tests fail with a message saying to run tools/test, never skip.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace convstate::testing {

// The server URL, e.g. "postgresql://postgres@127.0.0.1:5432"; an error if
// CONVSTATE_TEST_PG is not set.
absl::StatusOr<std::string> TestServerUrl();

// PgBouncer in front of that server, in transaction pooling mode (from
// CONVSTATE_TEST_PGBOUNCER), e.g. "postgresql://postgres@127.0.0.1:6432";
// every database of the server is reachable through it by its name.
absl::StatusOr<std::string> TestPoolerUrl();

// A database created for one test (or one test binary) and dropped when
// this object goes away.
// The layout this test runs on: hash partitions per table from
// CONVSTATE_TEST_HASH_PARTITIONS (set by the `_partitioned` variants of the
// end-to-end tests), 0 for plain tables. Databases the harness migrates and
// servers that ServerProcess starts use it.
int TestHashPartitions();

class ScratchDatabase {
 public:
  // Creates an empty database with a unique name; applies the embedded
  // migrations when `migrate` is true, laying the per-conversation tables
  // out as `hash_partitions` partitions each (0: plain tables; unset: the
  // test's layout, TestHashPartitions()).
  static absl::StatusOr<std::unique_ptr<ScratchDatabase>> Create(
      bool migrate, std::optional<int> hash_partitions = std::nullopt);
  ~ScratchDatabase();

  const std::string& url() const { return url_; }
  // The same database through PgBouncer (transaction pooling).
  absl::StatusOr<std::string> pooler_url() const;
  const std::string& name() const { return name_; }

  // Runs one SQL command on this database (test set-up and inspection).
  absl::Status Exec(const std::string& sql) const;
  // Runs a query that returns one value, as text.
  absl::StatusOr<std::string> QueryValue(const std::string& sql) const;

 private:
  ScratchDatabase(std::string server_url, std::string name);
  std::string server_url_;
  std::string name_;
  std::string url_;
};

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_PG_HARNESS_H_
