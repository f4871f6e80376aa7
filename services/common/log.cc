#include "services/common/log.h"

#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convstate {
namespace {

// Fixed buffers: setting the ids is on every traced call's path.
thread_local char trace_id_hex[33] = "";
thread_local char span_id_hex[17] = "";

void CopyId(absl::string_view id, char* out, size_t capacity) {
  const size_t n = id.size() < capacity ? id.size() : capacity - 1;
  id.copy(out, n);
  out[n] = '\0';
}

}  // namespace

void SetLogTraceIds(absl::string_view trace_id, absl::string_view span_id) {
  CopyId(trace_id, trace_id_hex, sizeof(trace_id_hex));
  CopyId(span_id, span_id_hex, sizeof(span_id_hex));
}

void LogLine(LogLevel level, absl::string_view message) {
  const char* tag = level == LogLevel::kInfo      ? "INFO"
                    : level == LogLevel::kWarning ? "WARN"
                                                  : "ERROR";
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", tag, " ", message);
  if (trace_id_hex[0] != '\0') {
    absl::StrAppend(&line, " trace_id=", trace_id_hex, " span_id=", span_id_hex);
  }
  // One event, one line: driver messages carry newlines and tabs.
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  line.push_back('\n');
  // One fwrite per line: stdio locks the stream, so lines never interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void LogThrottled(LogLevel level, absl::string_view key, absl::string_view message,
                  absl::Duration period, const Clock* clock) {
  struct Seen {
    absl::Time logged = absl::InfinitePast();
    int64_t left_out = 0;
  };
  static absl::Mutex mu(absl::kConstInit);
  static auto* seen ABSL_GUARDED_BY(mu) = new absl::flat_hash_map<std::string, Seen>();
  int64_t left_out = 0;
  {
    absl::MutexLock lock(&mu);
    Seen& s = (*seen)[key];
    const absl::Time now = clock->Now();
    if (now - s.logged < period) {
      ++s.left_out;
      return;
    }
    left_out = s.left_out;
    s = Seen{now, 0};
  }
  if (left_out == 0) {
    LogLine(level, message);
  } else {
    LogLine(level, absl::StrCat(message, " (and ", left_out, " more like it since the last line)"));
  }
}

}  // namespace convstate
