#include "storage/cancel_watchdog.h"

#include <algorithm>
#include <exception>
#include <vector>

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
  absl::MutexLock lock(&mu_);
  if (!entries_.contains(id)) return false;
  // The caller may reuse or close the connection only once a cancel of it
  // has gone (the request reads the connection's address and key). Looked
  // up by id each time: registrations made meanwhile move the entries.
  auto sent = [this, id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !entries_.at(id).sending; };
  mu_.Await(absl::Condition(&sent));
  auto it = entries_.find(id);
  const bool cancelled = it->second.cancelled;
  entries_.erase(it);
  return cancelled;
}

absl::Time CancelWatchdog::CancelDue() {
  absl::Time next = absl::Now() + absl::Seconds(1);
  const absl::Time now = absl::Now();
  std::vector<int64_t> due;
  for (auto& [id, e] : entries_) {
    if (e.cancelled) continue;
    if (e.deadline > now) {
      next = std::min(next, e.deadline);
      continue;
    }
    e.cancelled = true;
    e.sending = true;
    due.push_back(id);
  }
  for (int64_t id : due) {
    // Entries stay while `sending` (Unwatch waits for it).
    pqxx::connection_base* conn = entries_.at(id).conn;
    mu_.Unlock();
    RunGuarded("statement cancel", [conn] {
      try {
        conn->cancel_query();
      } catch (const std::exception&) {
        // The statement may have ended meanwhile; nothing to cancel then.
      }
    });
    mu_.Lock();
    entries_.at(id).sending = false;
  }
  // Registrations made while the requests went out: look again at once.
  if (!due.empty()) return now;
  return next;
}

void CancelWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time next = CancelDue();
    wake_at_ = next;
    reschedule_ = false;
    auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || reschedule_; };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
  }
}

}  // namespace convstate::pg
