#ifndef CONVSTATE_SERVICES_TELEMETRY_OTLP_EXPORTER_H_
#define CONVSTATE_SERVICES_TELEMETRY_OTLP_EXPORTER_H_

#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "services/telemetry/metrics.h"
#include "services/telemetry/options.h"
#include "services/common/trace.h"

namespace convstate::telemetry {

// The OTLP encoding of spans, with `resource` attributes and this
// service's instrumentation scope.
opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest EncodeSpans(
    const Labels& resource, std::vector<SpanData> spans);
opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest EncodeMetrics(
    const Labels& resource, const MetricRegistry& metrics);

// Sends spans and metrics to an OTLP/HTTP collector (protobuf bodies, with
// libcurl) from a thread of its own. Spans wait in a bounded queue and go
// in batches; what does not fit is dropped and counted. Metrics go every
// metric interval. A collector that answers 429, 502, 503 or 504, or cannot
// be reached, is retried with exponential backoff; other answers drop the
// batch. Failures are counted and logged at most once a minute. Nothing
// here ever blocks the caller of OnEnd for longer than a queue push.
class OtlpExporter final : public SpanSink {
 public:
  // `metrics` and the counters must outlive the exporter. Starts the
  // exporting thread.
  OtlpExporter(TelemetryOptions options, Labels resource, const MetricRegistry* metrics,
               Counter* spans_dropped, Counter* export_failures);
  ~OtlpExporter() override;

  void OnEnd(SpanData span) override;

  // Sends the queued spans and the metrics once more within `grace`, then
  // stops the thread. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  void Loop();
  // POSTs `body`, retrying as above unless stopping. True on a 2xx answer.
  bool Send(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers,
            absl::Duration timeout, const std::string& body, const char* signal);
  // One POST: the HTTP status, or 0 when there was no answer.
  long Post(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers,
            absl::Duration timeout, const std::string& body, std::string* error);
  void ExportSpans(std::vector<SpanData> batch);
  void ExportMetrics();
  void NoteFailure(const char* signal, const std::string& what);

  const TelemetryOptions options_;
  const Labels resource_;
  const MetricRegistry* const metrics_;
  Counter* const spans_dropped_;
  Counter* const export_failures_;

  absl::Mutex mu_;
  std::deque<SpanData> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Past this, exports in flight are abandoned (set by Shutdown).
  absl::Time abandon_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool shut_down_ = false;

  // Used by the exporting thread only.
  absl::Time last_failure_log_ = absl::InfinitePast();
  int64_t failures_since_log_ = 0;

  std::thread thread_;
};

}  // namespace convstate::telemetry

#endif  // CONVSTATE_SERVICES_TELEMETRY_OTLP_EXPORTER_H_
