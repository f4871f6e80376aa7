// The cancel watchdog on a real PostgreSQL: a statement past its call's
// deadline is cancelled, a call that ends in time is left alone (and its
// connection stays usable), and many calls at once each get what their own
// deadline says.

#include "storage/cancel_watchdog.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/pg_harness.h"

namespace convstate {
namespace {

class CancelWatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = testing::ScratchDatabase::Create(/*migrate=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
  }

  std::unique_ptr<pqxx::connection> Connect() const {
    return std::make_unique<pqxx::connection>(db_->url());
  }

  // Runs `sql` on `conn` under a registration until `deadline`; true when
  // PostgreSQL cancelled it. `sent` is what Unwatch answered.
  static bool Run(pg::CancelWatchdog& watchdog, pqxx::connection& conn, const std::string& sql,
                  absl::Time deadline, bool& sent) {
    const int64_t id = watchdog.Watch(&conn, deadline);
    bool cancelled = false;
    try {
      pqxx::nontransaction tx(conn);
      tx.exec(sql);
    } catch (const pqxx::sql_error& e) {
      // 57014: query_canceled; anything else fails the test.
      if (e.sqlstate() != "57014") throw;
      cancelled = true;
    }
    sent = watchdog.Unwatch(id);
    return cancelled;
  }

  std::unique_ptr<testing::ScratchDatabase> db_;
};

TEST_F(CancelWatchdogTest, CancelsAStatementPastItsDeadline) {
  pg::CancelWatchdog watchdog;
  auto conn = Connect();
  bool sent = false;
  // Thirty seconds asked; the call's deadline is a quarter of a second.
  EXPECT_TRUE(Run(watchdog, *conn, "SELECT pg_sleep(30)",
                  absl::Now() + absl::Milliseconds(250), sent));
  EXPECT_TRUE(sent);  // The caller closes such a connection.
}

TEST_F(CancelWatchdogTest, LeavesACallThatEndsInTimeAlone) {
  pg::CancelWatchdog watchdog;
  auto conn = Connect();
  bool sent = true;
  EXPECT_FALSE(Run(watchdog, *conn, "SELECT 1", absl::Now() + absl::Hours(1), sent));
  EXPECT_FALSE(sent);
  // The connection serves the next call, which nothing cancels.
  EXPECT_FALSE(Run(watchdog, *conn, "SELECT pg_sleep(0.2)", absl::Now() + absl::Hours(1), sent));
  EXPECT_FALSE(sent);
}

TEST_F(CancelWatchdogTest, ManyCallsAtOnceEachGetTheirOwnDeadline) {
  pg::CancelWatchdog watchdog;
  constexpr int kCalls = 8;
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int i = 0; i < kCalls; ++i) conns.push_back(Connect());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      // Even calls overrun a short deadline; odd ones run several short
      // statements under a long one, registering and ending while the
      // watchdog sends the others' cancel requests.
      const bool overruns = i % 2 == 0;
      bool sent = false;
      if (overruns) {
        const bool cancelled = Run(watchdog, *conns[i], "SELECT pg_sleep(30)",
                                   absl::Now() + absl::Milliseconds(100 + 50 * i), sent);
        if (!cancelled || !sent) ++wrong;
        return;
      }
      for (int k = 0; k < 20; ++k) {
        const bool cancelled = Run(watchdog, *conns[i], "SELECT pg_sleep(0.02)",
                                   absl::Now() + absl::Hours(1), sent);
        if (cancelled || sent) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace convstate
