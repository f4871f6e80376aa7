#include "services/telemetry/otlp_exporter.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/log.h"
#include "services/common/task_guard.h"

namespace convstate::telemetry {
namespace {

namespace otlp = opentelemetry::proto;

constexpr char kScopeName[] = "convstate";
constexpr char kScopeVersion[] = "1.0.0";

uint64_t Nanos(absl::Time t) { return static_cast<uint64_t>(absl::ToUnixNanos(t)); }

void SetValue(const AttributeValue& value, otlp::common::v1::AnyValue* out) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    out->set_string_value(*s);
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    out->set_int_value(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out->set_double_value(*d);
  } else {
    out->set_bool_value(std::get<bool>(value));
  }
}

void SetAttributes(const std::vector<Attribute>& attributes,
                   google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>* out) {
  for (const Attribute& a : attributes) {
    otlp::common::v1::KeyValue* kv = out->Add();
    kv->set_key(a.key);
    SetValue(a.value, kv->mutable_value());
  }
}

void SetResource(const Labels& resource, otlp::resource::v1::Resource* out) {
  for (const auto& [k, v] : resource) {
    otlp::common::v1::KeyValue* kv = out->add_attributes();
    kv->set_key(k);
    kv->mutable_value()->set_string_value(v);
  }
}

otlp::trace::v1::Span::SpanKind KindOf(SpanKind kind) {
  switch (kind) {
    case SpanKind::kServer:
      return otlp::trace::v1::Span::SPAN_KIND_SERVER;
    case SpanKind::kClient:
      return otlp::trace::v1::Span::SPAN_KIND_CLIENT;
    case SpanKind::kInternal:
      break;
  }
  return otlp::trace::v1::Span::SPAN_KIND_INTERNAL;
}

bool IsZero(const SpanId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

size_t CollectBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Abort {
  absl::Mutex* mu;
  const absl::Time* abandon_at;
};

}  // namespace

otlp::collector::trace::v1::ExportTraceServiceRequest EncodeSpans(const Labels& resource,
                                                                  std::vector<SpanData> spans) {
  otlp::collector::trace::v1::ExportTraceServiceRequest request;
  otlp::trace::v1::ResourceSpans* rs = request.add_resource_spans();
  SetResource(resource, rs->mutable_resource());
  otlp::trace::v1::ScopeSpans* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name(kScopeName);
  ss->mutable_scope()->set_version(kScopeVersion);
  for (SpanData& s : spans) {
    otlp::trace::v1::Span* span = ss->add_spans();
    span->set_trace_id(s.context.trace_id.data(), s.context.trace_id.size());
    span->set_span_id(s.context.span_id.data(), s.context.span_id.size());
    if (!IsZero(s.parent_span_id)) {
      span->set_parent_span_id(s.parent_span_id.data(), s.parent_span_id.size());
    }
    span->set_trace_state(std::move(s.context.trace_state));
    span->set_name(std::move(s.name));
    span->set_kind(KindOf(s.kind));
    span->set_start_time_unix_nano(Nanos(s.start));
    span->set_end_time_unix_nano(Nanos(s.end));
    SetAttributes(s.attributes, span->mutable_attributes());
    for (const SpanEvent& e : s.events) {
      otlp::trace::v1::Span::Event* event = span->add_events();
      event->set_name(e.name);
      event->set_time_unix_nano(Nanos(e.time));
      SetAttributes(e.attributes, event->mutable_attributes());
    }
    if (s.error) {
      span->mutable_status()->set_code(otlp::trace::v1::Status::STATUS_CODE_ERROR);
      span->mutable_status()->set_message(std::move(s.status_message));
    }
  }
  return request;
}

otlp::collector::metrics::v1::ExportMetricsServiceRequest EncodeMetrics(
    const Labels& resource, const MetricRegistry& metrics) {
  otlp::collector::metrics::v1::ExportMetricsServiceRequest request;
  otlp::metrics::v1::ResourceMetrics* rm = request.add_resource_metrics();
  SetResource(resource, rm->mutable_resource());
  otlp::metrics::v1::ScopeMetrics* sm = rm->add_scope_metrics();
  sm->mutable_scope()->set_name(kScopeName);
  sm->mutable_scope()->set_version(kScopeVersion);
  metrics.Collect(sm);
  return request;
}

OtlpExporter::OtlpExporter(TelemetryOptions options, Labels resource,
                           const MetricRegistry* metrics, Counter* spans_dropped,
                           Counter* export_failures)
    : options_(std::move(options)),
      resource_(std::move(resource)),
      metrics_(metrics),
      spans_dropped_(spans_dropped),
      export_failures_(export_failures) {
  static std::once_flag curl_once;
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  thread_ = std::thread([this] { Loop(); });
}

OtlpExporter::~OtlpExporter() { Shutdown(absl::Seconds(2)); }

void OtlpExporter::OnEnd(SpanData span) {
  if (options_.traces_url.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_ && queue_.size() < static_cast<size_t>(options_.max_queue)) {
      queue_.push_back(std::move(span));
      return;
    }
  }
  spans_dropped_->Add(1);
}

void OtlpExporter::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    abandon_at_ = absl::Now() + grace;
  }
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Loop() {
  absl::Time next_spans = absl::Now() + options_.batch_delay;
  absl::Time next_metrics =
      options_.metrics_url.empty() ? absl::InfiniteFuture() : absl::Now() + options_.metric_interval;
  const size_t max_batch = static_cast<size_t>(options_.max_batch);
  for (;;) {
    std::vector<SpanData> batch;
    bool metrics_due = false;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this, max_batch]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() >= max_batch;
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), std::min(next_spans, next_metrics));
      stopping = stopping_;
      const absl::Time now = absl::Now();
      if (stopping || queue_.size() >= max_batch || now >= next_spans) {
        const size_t n = std::min(queue_.size(), max_batch);
        for (size_t i = 0; i < n; ++i) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        if (now >= next_spans) next_spans = now + options_.batch_delay;
      }
      metrics_due = now >= next_metrics;
    }
    // An export that throws loses its batch, never the exporter thread.
    if (!batch.empty()) RunGuarded("trace export", [&] { ExportSpans(std::move(batch)); });
    if (metrics_due) {
      RunGuarded("metrics export", [this] { ExportMetrics(); });
      next_metrics = absl::Now() + options_.metric_interval;
    }
    if (stopping) break;
  }
  // Shutting down: the rest of the queue, then the final metrics, until
  // the grace period ends.
  for (;;) {
    std::vector<SpanData> batch;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty() || absl::Now() >= abandon_at_) {
        spans_dropped_->Add(static_cast<int64_t>(queue_.size()));
        queue_.clear();
        break;
      }
      const size_t n = std::min(queue_.size(), max_batch);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunGuarded("trace export", [&] { ExportSpans(std::move(batch)); });
  }
  if (!options_.metrics_url.empty()) RunGuarded("metrics export", [this] { ExportMetrics(); });
}

void OtlpExporter::ExportSpans(std::vector<SpanData> batch) {
  const size_t n = batch.size();
  const std::string body = EncodeSpans(resource_, std::move(batch)).SerializeAsString();
  if (!Send(options_.traces_url, options_.traces_headers, options_.traces_timeout, body,
            "traces")) {
    spans_dropped_->Add(static_cast<int64_t>(n));
  }
}

void OtlpExporter::ExportMetrics() {
  const std::string body = EncodeMetrics(resource_, *metrics_).SerializeAsString();
  Send(options_.metrics_url, options_.metrics_headers, options_.metrics_timeout, body, "metrics");
}

bool OtlpExporter::Send(const std::string& url,
                        const std::vector<std::pair<std::string, std::string>>& headers,
                        absl::Duration timeout, const std::string& body, const char* signal) {
  thread_local std::mt19937 jitter(std::random_device{}());
  absl::Duration backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    std::string error;
    const long status = Post(url, headers, timeout, body, &error);
    if (status >= 200 && status < 300) return true;
    const bool retryable =
        status == 0 || status == 429 || status == 502 || status == 503 || status == 504;
    const std::string what =
        status == 0 ? absl::StrCat("no answer (", error, ")") : absl::StrCat("HTTP ", status);
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
    }
    if (!retryable || attempt >= options_.max_attempts || stopping) {
      export_failures_->Add(1, {{"signal", signal}});
      NoteFailure(signal, what);
      return false;
    }
    // Jittered in [backoff/2, backoff]; Shutdown cuts the wait short.
    std::uniform_real_distribution<double> spread(0.5, 1.0);
    const absl::Duration wait = backoff * spread(jitter);
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), wait);
    }
    backoff = std::min(backoff * 2, absl::Seconds(30));
  }
}

long OtlpExporter::Post(const std::string& url,
                        const std::vector<std::pair<std::string, std::string>>& headers,
                        absl::Duration timeout, const std::string& body, std::string* error) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    *error = "curl_easy_init failed";
    return 0;
  }
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
  for (const auto& [k, v] : headers) list = curl_slist_append(list, absl::StrCat(k, ": ", v).c_str());
  std::string response;
  Abort abort{&mu_, &abandon_at_};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (!options_.client_certificate.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, options_.client_certificate.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, options_.client_key.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, CollectBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  // A hung collector must not hold shutdown past its grace period.
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &abort);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION,
                   +[](void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
                     const Abort* a = static_cast<const Abort*>(data);
                     absl::MutexLock lock(a->mu);
                     return absl::Now() >= *a->abandon_at ? 1 : 0;
                   });
  long status = 0;
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  } else {
    *error = curl_easy_strerror(code);
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return status;
}

void OtlpExporter::NoteFailure(const char* signal, const std::string& what) {
  ++failures_since_log_;
  const absl::Time now = absl::Now();
  if (now - last_failure_log_ < absl::Minutes(1)) return;
  LogWarning("telemetry: ", failures_since_log_, " OTLP export(s) failed since the last report; ",
             "latest: ", signal, " to the collector: ", what,
             " (what could not be sent is dropped and counted; calls are not affected)");
  last_failure_log_ = now;
  failures_since_log_ = 0;
}

}  // namespace convstate::telemetry
