#include "services/grpc/protobuf_log.h"

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "services/common/log.h"

namespace convstate {
namespace {

constexpr int kOtherLinesPerMinute = 10;

std::atomic<telemetry::Counter*> g_counter{nullptr};
std::atomic<int64_t> g_invalid_utf8{0};

// What is written, a minute at a time.
struct Limits {
  absl::Mutex mu;
  // The invalid-UTF-8 count when its last line was written, and when.
  absl::Time utf8_logged ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  int64_t utf8_at_last_line ABSL_GUARDED_BY(mu) = 0;
  // Other lines in the current minute, and those left out of it.
  absl::Time other_window ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  int other_lines ABSL_GUARDED_BY(mu) = 0;
  int64_t other_dropped ABSL_GUARDED_BY(mu) = 0;
};

Limits& TheLimits() {
  static Limits* const kLimits = new Limits();
  return *kLimits;
}

void Handle(google::protobuf::LogLevel level, const char* /*file*/, int /*line*/,
            const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL) {
    LogError("libprotobuf: ", message);
    return;
  }
  Limits& l = TheLimits();
  const absl::Time now = absl::Now();
  if (absl::StrContains(message, "invalid UTF-8")) {
    const int64_t total = g_invalid_utf8.fetch_add(1, std::memory_order_relaxed) + 1;
    if (telemetry::Counter* c = g_counter.load(std::memory_order_acquire); c != nullptr) {
      c->Add(1);
    }
    int64_t since = 0;
    {
      absl::MutexLock lock(&l.mu);
      if (now - l.utf8_logged < absl::Minutes(1)) return;
      since = total - l.utf8_at_last_line;
      l.utf8_logged = now;
      l.utf8_at_last_line = total;
    }
    LogWarning(since, " request(s) since the last such line held invalid UTF-8 in a string "
               "field and were refused with INVALID_ARGUMENT; the next minute's are only "
               "counted (convstate.requests.invalid_utf8)");
    return;
  }
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&l.mu);
    if (now - l.other_window >= absl::Minutes(1)) {
      dropped = l.other_dropped;
      l.other_window = now;
      l.other_lines = 0;
      l.other_dropped = 0;
    }
    if (++l.other_lines > kOtherLinesPerMinute) {
      ++l.other_dropped;
      return;
    }
  }
  if (dropped > 0) LogWarning("libprotobuf: ", dropped, " line(s) left out the minute before");
  if (level == google::protobuf::LOGLEVEL_ERROR) {
    LogError("libprotobuf: ", message);
  } else {
    LogWarning("libprotobuf: ", message);
  }
}

}  // namespace

void RouteProtobufLogs(telemetry::Counter* invalid_utf8) {
  g_counter.store(invalid_utf8, std::memory_order_release);
  google::protobuf::SetLogHandler(&Handle);
}

int64_t InvalidUtf8Strings() { return g_invalid_utf8.load(std::memory_order_relaxed); }

}  // namespace convstate
