#include "services/common/log.h"

#include <cstdio>
#include <string>

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

}  // namespace convstate
