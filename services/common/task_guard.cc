#include "services/common/task_guard.h"

#include <atomic>
#include <exception>
#include <typeinfo>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/log.h"

namespace convstate {
namespace {

std::atomic<int64_t> g_escaped{0};

struct Throttle {
  absl::Mutex mu;
  // Per place: when its last line was written, and what was caught since.
  struct Seen {
    absl::Time logged = absl::InfinitePast();
    int64_t unlogged = 0;
  };
  absl::flat_hash_map<std::string, Seen> seen ABSL_GUARDED_BY(mu);
};

Throttle& GetThrottle() {
  static Throttle* const throttle = new Throttle();
  return *throttle;
}

void Report(absl::string_view where, const std::string& what) {
  g_escaped.fetch_add(1, std::memory_order_relaxed);
  int64_t skipped = 0;
  {
    Throttle& t = GetThrottle();
    absl::MutexLock lock(&t.mu);
    Throttle::Seen& seen = t.seen[where];
    const absl::Time now = absl::Now();
    if (now - seen.logged < absl::Minutes(1)) {
      ++seen.unlogged;
      return;
    }
    skipped = seen.unlogged;
    seen.unlogged = 0;
    seen.logged = now;
  }
  LogError(where, ": a task failed with an uncaught exception (", what,
           "); the task was abandoned, the process goes on",
           skipped > 0 ? absl::StrCat("; ", skipped, " more since the last such line") : "");
}

}  // namespace

bool RunGuarded(absl::string_view where, const std::function<void()>& task, std::string* error) {
  std::string what;
  try {
    task();
    return true;
  } catch (const std::exception& e) {
    // The exception's type, never its message: messages of parsers and
    // drivers may quote the data they choked on.
    what = absl::StrCat("std::exception of type ", typeid(e).name());
  } catch (...) {
    what = "an exception of unknown type";
  }
  Report(where, what);
  if (error != nullptr) *error = what;
  return false;
}

int64_t EscapedExceptions() { return g_escaped.load(std::memory_order_relaxed); }

}  // namespace convstate
