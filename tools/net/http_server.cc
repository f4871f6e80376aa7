#include "tools/net/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace convstate::net {

absl::StatusOr<int> ListenOnLoopback(int port, int* bound_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 64) != 0) {
    ::close(fd);
    return absl::InternalError("bind/listen failed");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

void SendAll(int fd, absl::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::optional<HttpRequest> ReadHttpRequest(int fd, const std::atomic<bool>& stopping) {
  std::string data;
  char buf[65536];
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) {
      if (stopping) return std::nullopt;
      continue;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return std::nullopt;
    data.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      const std::string lower = absl::AsciiStrToLower(data.substr(0, header_end));
      const size_t at = lower.find("content-length:");
      if (at != std::string::npos) {
        absl::SimpleAtoi(absl::StripAsciiWhitespace(
                             lower.substr(at + 15, lower.find("\r\n", at) - at - 15)),
                         &content_length);
      }
    }
    if (data.size() >= header_end + 4 + content_length) break;
  }
  HttpRequest request;
  request.head = data.substr(0, header_end);
  request.request_line = request.head.substr(0, request.head.find("\r\n"));
  request.body = data.substr(header_end + 4, content_length);
  return request;
}

}  // namespace convstate::net
