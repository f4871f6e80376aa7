#include "services/common/log.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convstate {

void LogLine(LogLevel level, absl::string_view message) {
  const char* tag = level == LogLevel::kInfo      ? "INFO"
                    : level == LogLevel::kWarning ? "WARN"
                                                  : "ERROR";
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", tag, " ", message);
  // One event, one line: driver messages carry newlines and tabs.
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  line.push_back('\n');
  // One fwrite per line: stdio locks the stream, so lines never interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace convstate
