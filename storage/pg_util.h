#ifndef CONVSTATE_STORAGE_PG_UTIL_H_
#define CONVSTATE_STORAGE_PG_UTIL_H_

// Helpers shared by the PostgreSQL backend and the migrator. Internal to
// storage/.

#include <exception>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace convstate::pg {

// Maps an exception thrown by libpqxx to a status a client can act on:
// broken connection -> UNAVAILABLE, unique violation -> ALREADY_EXISTS,
// serialization failure or deadlock -> ABORTED, statement timeout ->
// DEADLINE_EXCEEDED, anything else -> INTERNAL. The message says what
// `operation` was and never carries SQL or driver text; the driver's text
// is logged here instead.
absl::Status ExceptionToStatus(const std::exception& e, absl::string_view operation);

// UNAVAILABLE for a write whose connection broke after it was sent, so
// that it may or may not have been committed: the client is told to send
// it again with the same idempotency key. `what` (the driver's text) is
// logged, throttled.
absl::Status InDoubt(absl::string_view operation, absl::string_view what);

// Whether an idle connection's socket has something to read: the server
// closed it (a restart, an administrator, an idle timeout) and its last
// words or the end of the stream wait there. Such a connection is not used
// again. `fd` -1 counts as closed.
bool ClosedWhileIdle(int fd);

// `url` with libpq's connect_timeout set unless it already has one.
std::string WithConnectTimeout(const std::string& url, absl::Duration timeout);

// `url` with libpq's tcp_user_timeout set unless it already has one: how
// long data sent may stay unacknowledged before the connection is given up,
// which libpq also applies to the cancel requests sent for the connection.
std::string WithUserTimeout(const std::string& url, absl::Duration timeout);

// `url` with the session's default statement_timeout set at connection
// start (libpq's `options`), unless it already sets options: a backstop
// behind the deadline every call is held to.
std::string WithStatementTimeout(const std::string& url, absl::Duration timeout);

// A PostgreSQL array literal of `values` as text: `{"a","b"}`, each element
// quoted, quotes and backslashes escaped. For a whole list of values in one
// parameter (unnest($1::text[])).
std::string TextArray(const std::vector<absl::string_view>& values);
std::string TextArray(const std::vector<std::string>& values);

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_PG_UTIL_H_
