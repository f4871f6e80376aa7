#ifndef CONVSTATE_SERVICES_TELEMETRY_OPTIONS_H_
#define CONVSTATE_SERVICES_TELEMETRY_OPTIONS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/trace.h"

namespace convstate::telemetry {

// What to export and where, as the OpenTelemetry environment variables say
// (see OptionsFromEnvironment); server flags may override any field.
struct TelemetryOptions {
  // OTEL_SDK_DISABLED=true: nothing is exported (metrics are still kept).
  bool disabled = false;
  // Full URLs. From OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT as given,
  // else OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces or /v1/metrics.
  // Empty: that signal is not exported (OTEL_{TRACES,METRICS}_EXPORTER=none).
  std::string traces_url = "http://localhost:4318/v1/traces";
  std::string metrics_url = "http://localhost:4318/v1/metrics";
  // OTEL_EXPORTER_OTLP_HEADERS, then the per-signal variables.
  std::vector<std::pair<std::string, std::string>> traces_headers;
  std::vector<std::pair<std::string, std::string>> metrics_headers;
  // OTEL_EXPORTER_OTLP_CERTIFICATE: CA bundle that verifies an https
  // collector (default: the system's); OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE
  // and OTEL_EXPORTER_OTLP_CLIENT_KEY: this service's certificate and key
  // for a collector that asks for one (PEM files).
  std::string ca_file;
  std::string client_certificate;
  std::string client_key;
  // OTEL_EXPORTER_OTLP_TIMEOUT (and per signal), per export request.
  absl::Duration traces_timeout = absl::Seconds(10);
  absl::Duration metrics_timeout = absl::Seconds(10);
  // OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES.
  std::string service_name = "convstate";
  // OTEL_RESOURCE_ATTRIBUTES (key=value,...; values percent-decoded).
  std::vector<std::pair<std::string, std::string>> resource_attributes;
  // OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG.
  Sampler sampler;
  // OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE,
  // OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
  absl::Duration batch_delay = absl::Seconds(5);
  int max_queue = 2048;
  int max_batch = 512;
  // OTEL_METRIC_EXPORT_INTERVAL.
  absl::Duration metric_interval = absl::Seconds(60);
  // Attempts per export when the collector answers 429, 502, 503 or 504 or
  // cannot be reached, with exponential backoff from `initial_backoff`.
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Seconds(1);
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the OTEL_* variables. INVALID_ARGUMENT naming the variable for a
// value that cannot be used (a bad number or sampler, a protocol other
// than http/protobuf).
absl::StatusOr<TelemetryOptions> OptionsFromEnvironment(const GetEnv& env);

// "k=v,k2=v2" with percent-encoded values, as the OTEL_*_HEADERS and
// OTEL_RESOURCE_ATTRIBUTES variables hold them. Entries without '=' or with
// an empty key are skipped.
std::vector<std::pair<std::string, std::string>> ParseKeyValueList(absl::string_view text);

// `base` + "/v1/" + signal, with one slash between them.
std::string SignalUrl(absl::string_view base, absl::string_view signal);

}  // namespace convstate::telemetry

#endif  // CONVSTATE_SERVICES_TELEMETRY_OPTIONS_H_
