#ifndef CONVSTATE_SERVICES_COMMON_LOG_H_
#define CONVSTATE_SERVICES_COMMON_LOG_H_

#include "absl/strings/str_cat.h"
#include "services/common/clock.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace convstate {

enum class LogLevel { kInfo, kWarning, kError };

// Writes one line to stderr: UTC time, level, message, and the trace and
// span ids the calling thread works for when it has them. Thread-safe.
void LogLine(LogLevel level, absl::string_view message);

// The trace and span ids (hex) LogLine appends to the calling thread's
// lines; empty ids stop it. Set by telemetry::ScopedSpan.
void SetLogTraceIds(absl::string_view trace_id, absl::string_view span_id);

// LogLine for events that come in floods (a database that is down fails
// every call): the first line of each `key` at once, then at most one line
// per `period` (by `clock`) for it, saying how many were left out in
// between.
void LogThrottled(LogLevel level, absl::string_view key, absl::string_view message,
                  absl::Duration period = absl::Seconds(10), const Clock* clock = Clock::Real());

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_LOG_H_
