#ifndef CONVSTATE_TOOLS_NET_HTTP_SERVER_H_
#define CONVSTATE_TOOLS_NET_HTTP_SERVER_H_

// The plumbing of the small HTTP/1.1 servers of the tools and tests (the
// OTLP receiver, the fake LLM): a loopback listener, whole writes, and
// reading one request.

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convstate::net {

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

}  // namespace convstate::net

#endif  // CONVSTATE_TOOLS_NET_HTTP_SERVER_H_
