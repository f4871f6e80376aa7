#ifndef CONVSTATE_TOOLS_OTLP_OTLP_RECEIVER_H_
#define CONVSTATE_TOOLS_OTLP_OTLP_RECEIVER_H_

// A stand-in for an OpenTelemetry collector's OTLP/HTTP receiver, on
// loopback: decodes every export to /v1/traces and /v1/metrics with the
// official opentelemetry-proto messages and keeps it. Tests can make it
// answer with an HTTP error or hang.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "tools/net/http_server.h"

namespace convstate::otlp {

class OtlpReceiver {
 public:
  enum class Mode { kAccept, kFail, kHang };

  // Listens on 127.0.0.1 on `port` (0: a free one). With `keep` false the
  // exports are decoded and counted but not kept (long benchmark runs).
  static absl::StatusOr<std::unique_ptr<OtlpReceiver>> Start(int port = 0, bool keep = true);
  ~OtlpReceiver();

  // "http://127.0.0.1:PORT"
  std::string base_url() const;
  // kFail answers `status` to every request; kHang never answers.
  void SetMode(Mode mode, int status = 503);

  // Requests seen (any path, any answer), and what was accepted.
  int requests() const;
  // Spans received, kept or not.
  int64_t span_count() const;
  int port() const { return port_; }
  std::vector<opentelemetry::proto::trace::v1::Span> spans() const;
  // Resource attributes of the last traces export, as key -> string.
  std::vector<std::pair<std::string, std::string>> resource() const;
  std::vector<opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest>
  metrics() const;
  // Paths and content types of every request, in order.
  std::vector<std::string> paths() const;
  std::vector<std::string> headers_seen() const;

  // Waits until `done` holds or `timeout` passes; returns whether it held.
  bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) const;

 private:
  OtlpReceiver() = default;
  void Serve();
  // Reads one request on `fd`, answers it, closes `fd`.
  void Handle(int fd);
  void Answer(int fd, const net::HttpRequest& request);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kAccept;
  int fail_status_ ABSL_GUARDED_BY(mu_) = 503;
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t span_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool keep_ = true;
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(mu_);
  std::vector<opentelemetry::proto::trace::v1::Span> spans_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> resource_ ABSL_GUARDED_BY(mu_);
  std::vector<opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest> metrics_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> paths_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> headers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate::otlp

#endif  // CONVSTATE_TOOLS_OTLP_OTLP_RECEIVER_H_
