#include "storage/cancel_watchdog.h"

#include <algorithm>
#include <exception>

#include <pqxx/pqxx>

#include "absl/time/clock.h"
#include "services/common/log.h"
#include "services/common/task_guard.h"

namespace convstate::pg {

CancelWatchdog::CancelWatchdog() : thread_([this] { Loop(); }) {}

CancelWatchdog::~CancelWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

int64_t CancelWatchdog::Watch(pqxx::connection_base* conn, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const int64_t id = ++next_id_;
  entries_.emplace(id, Entry{conn, deadline});
  if (deadline < wake_at_) reschedule_ = true;  // Earlier than the thread's next look.
  return id;
}

bool CancelWatchdog::Unwatch(int64_t id) {
  // Waits while a cancel of this connection is being sent: the caller may
  // reuse or close it only after that.
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const bool cancelled = it->second.cancelled;
  entries_.erase(it);
  return cancelled;
}

void CancelWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time next = absl::Now() + absl::Seconds(1);
    const absl::Time now = absl::Now();
    for (auto& [id, e] : entries_) {
      if (e.cancelled) continue;
      if (e.deadline > now) {
        next = std::min(next, e.deadline);
        continue;
      }
      e.cancelled = true;
      // The cancel request goes over a connection of its own; the
      // registered connection's owner waits in Unwatch meanwhile.
      RunGuarded("statement cancel", [&] {
        try {
          e.conn->cancel_query();
        } catch (const std::exception&) {
          // The statement may have ended meanwhile; nothing to cancel then.
        }
      });
    }
    wake_at_ = next;
    reschedule_ = false;
    auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || reschedule_; };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
  }
}

}  // namespace convstate::pg
