#include "tools/otlp/otlp_receiver.h"

#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tools/net/http_server.h"

namespace convstate::otlp {

using net::HttpRequest;
using net::ListenOnLoopback;
using net::ReadHttpRequest;
using net::SendAll;
namespace {

void Reply(int fd, int status) {
  SendAll(fd, absl::StrCat("HTTP/1.1 ", status, status == 200 ? " OK" : " Error",
                           "\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n"
                           "Connection: close\r\n\r\n"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<OtlpReceiver>> OtlpReceiver::Start(int port, bool keep) {
  std::unique_ptr<OtlpReceiver> r(new OtlpReceiver());
  r->keep_ = keep;
  absl::StatusOr<int> fd = ListenOnLoopback(port, &r->port_);
  if (!fd.ok()) return fd.status();
  r->listen_fd_ = *fd;
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

void OtlpReceiver::Answer(int fd, const HttpRequest& request) {
  const std::string& head = request.head;
  const std::string& body = request.body;
  const std::vector<std::string> first = absl::StrSplit(request.request_line, ' ');
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
    char probe;
    while (!stopping_ && ::recv(fd, &probe, 1, MSG_PEEK) > 0) {
    }
    return;
  }
  if (mode == Mode::kFail) {
    Reply(fd, status);
    return;
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
  Reply(fd, parsed ? 200 : 400);
}

void OtlpReceiver::Handle(int fd) {
  const std::optional<HttpRequest> request = ReadHttpRequest(fd, stopping_);
  if (request.has_value()) Answer(fd, *request);
  absl::MutexLock lock(&mu_);
  for (auto it = open_fds_.begin(); it != open_fds_.end(); ++it) {
    if (*it == fd) {
      open_fds_.erase(it);
      break;
    }
  }
  ::close(fd);
}

}  // namespace convstate::otlp
