#ifndef CONVSTATE_TESTS_HTTP_TEST_SERVER_H_
#define CONVSTATE_TESTS_HTTP_TEST_SERVER_H_

// The plumbing the tests' HTTP stand-ins share (the fake LLM, the OTLP
// receiver): a loopback listener, whole writes, and reading one request.

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convstate::testing {

// A listening TCP socket on 127.0.0.1:`port` (0: a free one); sets
// `bound_port` to the port it got.
absl::StatusOr<int> ListenOnLoopback(int port, int* bound_port);

// Writes all of `data` to `fd`, or as much as the peer takes.
void SendAll(int fd, absl::string_view data);

struct HttpRequest {
  std::string request_line;  // e.g. "POST /v1/traces HTTP/1.1"
  std::string head;          // The request line and the headers.
  std::string body;          // Content-Length bytes.
};

// Reads one request from `fd`; nullopt if the peer closed first, or once
// `stopping` is set while waiting.
std::optional<HttpRequest> ReadHttpRequest(int fd, const std::atomic<bool>& stopping);

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_HTTP_TEST_SERVER_H_
