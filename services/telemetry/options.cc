#include "services/telemetry/options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/status_macros.h"

namespace convstate::telemetry {
namespace {

std::string Get(const GetEnv& env, const char* name) {
  const char* v = env(name);
  return v == nullptr ? "" : std::string(absl::StripAsciiWhitespace(v));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexDigit(s[i + 1]);
      const int lo = HexDigit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi << 4 | lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Milliseconds from `name`, if set.
absl::Status Millis(const GetEnv& env, const char* name, absl::Duration* out) {
  const std::string v = Get(env, name);
  if (v.empty()) return absl::OkStatus();
  int64_t ms;
  if (!absl::SimpleAtoi(v, &ms) || ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": expected milliseconds, got '", v, "'"));
  }
  *out = absl::Milliseconds(ms);
  return absl::OkStatus();
}

absl::Status Positive(const GetEnv& env, const char* name, int* out) {
  const std::string v = Get(env, name);
  if (v.empty()) return absl::OkStatus();
  int n;
  if (!absl::SimpleAtoi(v, &n) || n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected a positive number, got '", v, "'"));
  }
  *out = n;
  return absl::OkStatus();
}

absl::Status CheckProtocol(const GetEnv& env, const char* name) {
  const std::string v = Get(env, name);
  if (v.empty() || v == "http/protobuf") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": only http/protobuf is supported, got '", v, "'"));
}

void Merge(std::vector<std::pair<std::string, std::string>>* into,
           std::vector<std::pair<std::string, std::string>> more) {
  for (auto& [k, v] : more) {
    bool replaced = false;
    for (auto& existing : *into) {
      if (existing.first == k) {
        existing.second = v;
        replaced = true;
      }
    }
    if (!replaced) into->emplace_back(std::move(k), std::move(v));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseKeyValueList(absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    std::string key = PercentDecode(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    if (key.empty()) continue;
    out.emplace_back(std::move(key),
                     PercentDecode(absl::StripAsciiWhitespace(entry.substr(eq + 1))));
  }
  return out;
}

std::string SignalUrl(absl::string_view base, absl::string_view signal) {
  absl::string_view b = base;
  while (absl::ConsumeSuffix(&b, "/")) {
  }
  return absl::StrCat(b, "/v1/", signal);
}

absl::StatusOr<TelemetryOptions> OptionsFromEnvironment(const GetEnv& env) {
  TelemetryOptions o;
  o.disabled = absl::AsciiStrToLower(Get(env, "OTEL_SDK_DISABLED")) == "true";
  RETURN_IF_ERROR(CheckProtocol(env, "OTEL_EXPORTER_OTLP_PROTOCOL"));
  RETURN_IF_ERROR(CheckProtocol(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"));
  RETURN_IF_ERROR(CheckProtocol(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"));

  if (const std::string base = Get(env, "OTEL_EXPORTER_OTLP_ENDPOINT"); !base.empty()) {
    o.traces_url = SignalUrl(base, "traces");
    o.metrics_url = SignalUrl(base, "metrics");
  }
  // The per-signal endpoints are used as given: nothing is appended.
  if (const std::string url = Get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); !url.empty()) {
    o.traces_url = url;
  }
  if (const std::string url = Get(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); !url.empty()) {
    o.metrics_url = url;
  }
  for (const char* name : {"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"}) {
    const std::string v = absl::AsciiStrToLower(Get(env, name));
    if (v.empty() || v == "otlp") continue;
    if (v != "none") {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": only otlp or none is supported, got '", v, "'"));
    }
    (absl::StartsWith(name, "OTEL_TRACES") ? o.traces_url : o.metrics_url).clear();
  }

  const auto headers = ParseKeyValueList(Get(env, "OTEL_EXPORTER_OTLP_HEADERS"));
  o.traces_headers = headers;
  o.metrics_headers = headers;
  Merge(&o.traces_headers, ParseKeyValueList(Get(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")));
  Merge(&o.metrics_headers, ParseKeyValueList(Get(env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS")));

  o.ca_file = Get(env, "OTEL_EXPORTER_OTLP_CERTIFICATE");
  o.client_certificate = Get(env, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
  o.client_key = Get(env, "OTEL_EXPORTER_OTLP_CLIENT_KEY");
  if (o.client_certificate.empty() != o.client_key.empty()) {
    return absl::InvalidArgumentError(
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: set both or "
        "neither");
  }
  absl::Duration timeout = o.traces_timeout;
  RETURN_IF_ERROR(Millis(env, "OTEL_EXPORTER_OTLP_TIMEOUT", &timeout));
  o.traces_timeout = o.metrics_timeout = timeout;
  RETURN_IF_ERROR(Millis(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", &o.traces_timeout));
  RETURN_IF_ERROR(Millis(env, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", &o.metrics_timeout));

  o.resource_attributes = ParseKeyValueList(Get(env, "OTEL_RESOURCE_ATTRIBUTES"));
  for (const auto& [k, v] : o.resource_attributes) {
    if (k == "service.name" && !v.empty()) o.service_name = v;
  }
  if (const std::string name = Get(env, "OTEL_SERVICE_NAME"); !name.empty()) {
    o.service_name = name;
  }

  absl::StatusOr<Sampler> sampler =
      Sampler::FromNames(Get(env, "OTEL_TRACES_SAMPLER"), Get(env, "OTEL_TRACES_SAMPLER_ARG"));
  if (!sampler.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OTEL_TRACES_SAMPLER: ", sampler.status().message()));
  }
  o.sampler = *sampler;

  RETURN_IF_ERROR(Millis(env, "OTEL_BSP_SCHEDULE_DELAY", &o.batch_delay));
  RETURN_IF_ERROR(Positive(env, "OTEL_BSP_MAX_QUEUE_SIZE", &o.max_queue));
  RETURN_IF_ERROR(Positive(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o.max_batch));
  RETURN_IF_ERROR(Millis(env, "OTEL_METRIC_EXPORT_INTERVAL", &o.metric_interval));
  if (o.metric_interval < absl::Milliseconds(10)) o.metric_interval = absl::Milliseconds(10);
  return o;
}

}  // namespace convstate::telemetry
