#include "tests/pg_harness.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <random>

#include <pqxx/pqxx>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "migrations/embedded_migrations.h"
#include "storage/migrator.h"

namespace convstate::testing {

namespace {

// The URL in environment variable `name`, which tools/test sets.
absl::StatusOr<std::string> UrlFromEnvironment(const char* name, const char* what) {
  const char* url = std::getenv(name);
  if (url == nullptr || *url == '\0') {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is not set: PostgreSQL tests run under tools/test, which starts ", what,
        " and passes its URL"));
  }
  return std::string(url);
}

}  // namespace

absl::StatusOr<std::string> TestServerUrl() {
  return UrlFromEnvironment("CONVSTATE_TEST_PG", "a PostgreSQL");
}

absl::StatusOr<std::string> TestPoolerUrl() {
  return UrlFromEnvironment("CONVSTATE_TEST_PGBOUNCER", "PgBouncer in front of its PostgreSQL");
}

int TestHashPartitions() {
  const char* n = std::getenv("CONVSTATE_TEST_HASH_PARTITIONS");
  int partitions = 0;
  if (n != nullptr && *n != '\0' && !absl::SimpleAtoi(n, &partitions)) {
    std::fprintf(stderr, "CONVSTATE_TEST_HASH_PARTITIONS is not a number: %s\n", n);
    std::abort();
  }
  return partitions;
}

absl::StatusOr<std::string> ScratchDatabase::pooler_url() const {
  auto pooler = TestPoolerUrl();
  if (!pooler.ok()) return pooler.status();
  return absl::StrCat(*pooler, "/", name_);
}

ScratchDatabase::ScratchDatabase(std::string server_url, std::string name)
    : server_url_(std::move(server_url)),
      name_(std::move(name)),
      url_(absl::StrCat(server_url_, "/", name_)) {}

absl::StatusOr<std::unique_ptr<ScratchDatabase>> ScratchDatabase::Create(
    bool migrate, std::optional<int> hash_partitions) {
  auto server = TestServerUrl();
  if (!server.ok()) return server.status();
  static std::atomic<int> counter{0};
  std::random_device rd;
  std::string name = absl::StrCat("convstate_test_", getpid(), "_", counter++, "_", rd() % 100000);
  try {
    pqxx::connection admin(absl::StrCat(*server, "/postgres"));
    pqxx::nontransaction n(admin);
    n.exec(absl::StrCat("CREATE DATABASE ", name));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("creating test database: ", e.what()));
  }
  std::unique_ptr<ScratchDatabase> db(new ScratchDatabase(*server, name));
  if (migrate) {
    SchemaLayout layout;
    layout.hash_partitions = hash_partitions.value_or(TestHashPartitions());
    auto report = ApplyMigrations(db->url(), EmbeddedMigrations(), absl::Seconds(5), layout);
    if (!report.ok()) return report.status();
  }
  return db;
}

ScratchDatabase::~ScratchDatabase() {
  try {
    pqxx::connection admin(absl::StrCat(server_url_, "/postgres"));
    pqxx::nontransaction n(admin);
    n.exec(absl::StrCat("DROP DATABASE IF EXISTS ", name_, " WITH (FORCE)"));
  } catch (const std::exception&) {
    // The whole cluster is thrown away by tools/test anyway.
  }
}

absl::Status ScratchDatabase::Exec(const std::string& sql) const {
  try {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    n.exec(sql);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

absl::StatusOr<std::string> ScratchDatabase::QueryValue(const std::string& sql) const {
  try {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    pqxx::result r = n.exec(sql);
    if (r.empty() || r[0].empty()) return absl::NotFoundError("no rows");
    return r[0][0].is_null() ? std::string("NULL") : r[0][0].as<std::string>();
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

}  // namespace convstate::testing
