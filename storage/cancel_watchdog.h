#ifndef CONVSTATE_STORAGE_CANCEL_WATCHDOG_H_
#define CONVSTATE_STORAGE_CANCEL_WATCHDOG_H_

// Internal to storage/: bounds what a call does inside PostgreSQL by the
// call's deadline.

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace convstate::pg {

// Cancels statements that run past their call's deadline. A call registers
// the connection it uses, with its deadline, for as long as it uses it; a
// thread of the watchdog's own sends PostgreSQL a cancel request for every
// connection still registered when its deadline passes (the statement then
// fails with query_canceled, DEADLINE_EXCEEDED to the caller). So the bound
// is the call's deadline however many statements the call runs, no
// statement is spent setting a timeout, and it holds behind a pooler too
// (PgBouncer forwards cancel requests). A cancel request is sent outside
// the watchdog's lock (other calls register and end meanwhile), and bounded
// by the connection's own TCP user timeout (libpq applies it to cancel
// requests; pg::WithUserTimeout). Thread-safe.
class CancelWatchdog {
 public:
  CancelWatchdog();
  // Joins the thread; every registration must have ended.
  ~CancelWatchdog();
  CancelWatchdog(const CancelWatchdog&) = delete;
  CancelWatchdog& operator=(const CancelWatchdog&) = delete;

  // Registers `conn` until `deadline`; Unwatch with the returned id ends it.
  int64_t Watch(pqxx::connection_base* conn, absl::Time deadline);
  // Ends a registration, after the cancel request being sent for it (if
  // any) has gone. True if one was sent: the connection should be closed
  // rather than reused, so that a cancel that arrives late cannot reach the
  // next call's statement.
  bool Unwatch(int64_t id);

 private:
  struct Entry {
    pqxx::connection_base* conn;
    absl::Time deadline;
    bool cancelled = false;
    // A cancel request is on its way (sent outside the lock).
    bool sending = false;
  };
  // Sends the cancel requests of the registrations whose deadline passed;
  // returns when the thread should look next.
  absl::Time CancelDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  absl::Mutex mu_;
  absl::flat_hash_map<int64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When the thread looks next, and whether a registration since wants it
  // to look earlier.
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool reschedule_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_CANCEL_WATCHDOG_H_
