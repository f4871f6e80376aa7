#include "storage/pg_util.h"

#include <poll.h>

#include <algorithm>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/log.h"

namespace convstate::pg {

absl::Status InDoubt(absl::string_view operation, absl::string_view what) {
  LogThrottled(LogLevel::kWarning, "pg in doubt",
               absl::StrCat(operation, ": commit outcome unknown: ", what));
  return absl::UnavailableError(absl::StrCat(
      operation, ": the database connection broke during commit; the outcome is "
                 "unknown (retry with the same idempotency key)"));
}

bool ClosedWhileIdle(int fd) {
  if (fd < 0) return true;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

absl::Status ExceptionToStatus(const std::exception& e, absl::string_view operation) {
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    return InDoubt(operation, e.what());
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    LogThrottled(LogLevel::kWarning, "pg unreachable",
                 absl::StrCat(operation, ": database unreachable: ", e.what()));
    return absl::UnavailableError(absl::StrCat(operation, ": database unavailable"));
  }
  if (dynamic_cast<const pqxx::unique_violation*>(&e) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(operation, ": already exists"));
  }
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) {
    return absl::AbortedError(
        absl::StrCat(operation, ": conflict with a concurrent change; retry"));
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string& state = sql->sqlstate();
    if (state == "57014") {  // query_canceled: our statement_timeout fired.
      return absl::DeadlineExceededError(
          absl::StrCat(operation, ": deadline exceeded in the database"));
    }
    // 08: connection exceptions; 57P0x: shutdown, cannot connect now;
    // 53300: too many connections.
    if (absl::StartsWith(state, "08") || absl::StartsWith(state, "57P") ||
        state == "53300") {
      LogThrottled(LogLevel::kWarning, "pg unavailable",
                   absl::StrCat(operation, ": database unavailable (", state, "): ", e.what()));
      return absl::UnavailableError(absl::StrCat(operation, ": database unavailable"));
    }
    LogError(operation, ": SQL error ", state, ": ", e.what());
    return absl::InternalError(absl::StrCat(operation, ": database error ", state));
  }
  LogError(operation, ": ", e.what());
  return absl::InternalError(absl::StrCat(operation, ": internal storage error"));
}

namespace {

// `url` with the connection parameter `name` set to `value` (already
// escaped for the URL's form), unless the URL names it.
std::string WithParameter(const std::string& url, absl::string_view name,
                          absl::string_view uri_value, absl::string_view keyword_value) {
  if (absl::StrContains(url, absl::StrCat(name, "="))) return url;
  const bool is_uri = absl::StartsWith(url, "postgresql://") || absl::StartsWith(url, "postgres://");
  if (!is_uri) return absl::StrCat(url, " ", name, "=", keyword_value);
  return absl::StrCat(url, absl::StrContains(url, "?") ? "&" : "?", name, "=", uri_value);
}

}  // namespace

std::string WithConnectTimeout(const std::string& url, absl::Duration timeout) {
  const std::string seconds = absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(timeout)));
  return WithParameter(url, "connect_timeout", seconds, seconds);
}

std::string WithUserTimeout(const std::string& url, absl::Duration timeout) {
  const std::string ms = absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  return WithParameter(url, "tcp_user_timeout", ms, ms);
}

std::string WithStatementTimeout(const std::string& url, absl::Duration timeout) {
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));
  return WithParameter(url, "options", absl::StrCat("-c%20statement_timeout%3D", ms),
                       absl::StrCat("'-c statement_timeout=", ms, "'"));
}

std::string TextArray(const std::vector<absl::string_view>& values) {
  size_t size = 2;
  for (absl::string_view v : values) size += v.size() + 3;
  std::string out;
  out.reserve(size);
  out.push_back('{');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string TextArray(const std::vector<std::string>& values) {
  return TextArray(std::vector<absl::string_view>(values.begin(), values.end()));
}

}  // namespace convstate::pg
