#include "tests/otlp_receiver.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace convstate::testing {
namespace {

void SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void Answer(int fd, int status) {
  SendAll(fd, absl::StrCat("HTTP/1.1 ", status, status == 200 ? " OK" : " Error",
                           "\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n"
                           "Connection: close\r\n\r\n"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<OtlpReceiver>> OtlpReceiver::Start(int port, bool keep) {
  std::unique_ptr<OtlpReceiver> r(new OtlpReceiver());
  r->keep_ = keep;
  r->listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (r->listen_fd_ < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(r->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(r->listen_fd_, 64) != 0) {
    return absl::InternalError("bind/listen failed");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(r->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  r->port_ = ntohs(addr.sin_port);
  r->acceptor_ = std::thread([raw = r.get()] { raw->Serve(); });
  return r;
}

OtlpReceiver::~OtlpReceiver() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> handlers;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    handlers.swap(handlers_);
  }
  for (std::thread& t : handlers) t.join();
}

std::string OtlpReceiver::base_url() const { return absl::StrCat("http://127.0.0.1:", port_); }

void OtlpReceiver::SetMode(Mode mode, int status) {
  absl::MutexLock lock(&mu_);
  mode_ = mode;
  fail_status_ = status;
}

int64_t OtlpReceiver::span_count() const {
  absl::MutexLock lock(&mu_);
  return span_count_;
}

int OtlpReceiver::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::vector<opentelemetry::proto::trace::v1::Span> OtlpReceiver::spans() const {
  absl::MutexLock lock(&mu_);
  return spans_;
}

std::vector<std::pair<std::string, std::string>> OtlpReceiver::resource() const {
  absl::MutexLock lock(&mu_);
  return resource_;
}

std::vector<opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest>
OtlpReceiver::metrics() const {
  absl::MutexLock lock(&mu_);
  return metrics_;
}

std::vector<std::string> OtlpReceiver::paths() const {
  absl::MutexLock lock(&mu_);
  return paths_;
}

std::vector<std::string> OtlpReceiver::headers_seen() const {
  absl::MutexLock lock(&mu_);
  return headers_;
}

bool OtlpReceiver::WaitFor(const std::function<bool()>& done, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

void OtlpReceiver::Serve() {
  while (!stopping_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    open_fds_.push_back(fd);
    handlers_.emplace_back([this, fd] { Handle(fd); });
  }
}

void OtlpReceiver::Handle(int fd) {
  std::string data;
  char buf[65536];
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  while (!stopping_) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      for (absl::string_view line : absl::StrSplit(data.substr(0, header_end), "\r\n")) {
        const std::string lower = absl::AsciiStrToLower(line);
        if (absl::StartsWith(lower, "content-length:")) {
          absl::SimpleAtoi(absl::StripAsciiWhitespace(lower.substr(15)), &content_length);
        }
      }
    }
    if (data.size() < header_end + 4 + content_length) continue;

    const std::string head = data.substr(0, header_end);
    const std::string body = data.substr(header_end + 4, content_length);
    const std::vector<std::string> first = absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
    const std::string path = first.size() > 1 ? first[1] : "";
    Mode mode;
    int status;
    {
      absl::MutexLock lock(&mu_);
      ++requests_;
      paths_.push_back(path);
      headers_.push_back(head);
      mode = mode_;
      status = fail_status_;
    }
    if (mode == Mode::kHang) {
      while (!stopping_ && ::recv(fd, buf, 1, MSG_PEEK) > 0) {
      }
      break;
    }
    if (mode == Mode::kFail) {
      Answer(fd, status);
      break;
    }
    bool parsed = false;
    if (path == "/v1/traces") {
      opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest req;
      parsed = req.ParseFromString(body);
      absl::MutexLock lock(&mu_);
      for (const auto& rs : req.resource_spans()) {
        resource_.clear();
        for (const auto& kv : rs.resource().attributes()) {
          resource_.emplace_back(kv.key(), kv.value().string_value());
        }
        for (const auto& ss : rs.scope_spans()) {
          span_count_ += ss.spans_size();
          if (!keep_) continue;
          for (const auto& s : ss.spans()) spans_.push_back(s);
        }
      }
    } else if (path == "/v1/metrics") {
      opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest req;
      parsed = req.ParseFromString(body);
      absl::MutexLock lock(&mu_);
      if (keep_) metrics_.push_back(std::move(req));
    }
    Answer(fd, parsed ? 200 : 400);
    break;
  }
  absl::MutexLock lock(&mu_);
  for (auto it = open_fds_.begin(); it != open_fds_.end(); ++it) {
    if (*it == fd) {
      open_fds_.erase(it);
      break;
    }
  }
  ::close(fd);
}

}  // namespace convstate::testing
