#include "services/telemetry/telemetry.h"

#include "services/common/task_guard.h"

namespace convstate::telemetry {
namespace {

Instruments MakeInstruments(MetricRegistry* m) {
  // Seconds: from 0.5 ms to 60 s.
  const std::vector<double> seconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,   0.5,   1,      2.5,   5,    10,    30,    60};
  Instruments i;
  i.rpc_duration = m->AddHistogram("rpc.server.call.duration", "s",
                                   "Duration of RPCs handled by the server", seconds);
  i.compactions = m->AddCounter("convstate.compactions", "{compaction}",
                                "Compaction steps, by tier and outcome");
  i.idle_compactions = m->AddCounter("convstate.compaction.idle", "{compaction}",
                                     "Compactions of conversations idle past their prompt "
                                     "cache's lifetime, by outcome");
  i.compaction_duration = m->AddHistogram("convstate.compaction.duration", "s",
                                          "Duration of compaction steps, by tier", seconds);
  i.compression_ratio = m->AddHistogram(
      "convstate.compaction.compression_ratio", "1",
      "View tokens a compaction step replaced, divided by the tokens that replaced them",
      {1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64});
  i.fact_recall = m->AddHistogram("convstate.compaction.fact_recall", "1",
                                  "Share of a summarized span's facts the summary keeps",
                                  {0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1});
  i.lease_wait = m->AddHistogram("convstate.compaction.lease_wait", "s",
                                 "Time a call waited for its conversation's compaction lease",
                                 seconds);
  i.summarizer_calls =
      m->AddCounter("convstate.summarizer.calls", "{call}", "Summarizer calls, by outcome");
  i.llm_duration = m->AddHistogram("gen_ai.client.operation.duration", "s",
                                   "Duration of summarizer calls to an LLM", seconds);
  i.llm_tokens = m->AddHistogram("gen_ai.client.token.usage", "{token}",
                                 "Tokens of summarizer calls to an LLM, by gen_ai.token.type",
                                 {64, 256, 1024, 4096, 16384, 65536, 262144, 1048576});
  i.summarizer_circuit_open = m->AddGauge("convstate.summarizer.circuit_open", "1",
                                          "1 while the summarizer's circuit is open");
  i.view_tokens = m->AddHistogram("convstate.view.tokens", "{token}",
                                  "Tokens of each view BuildContext returns",
                                  {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144,
                                   524288, 1048576});
  i.cache_lookups = m->AddCounter(
      "convstate.context_cache.lookups", "{lookup}",
      "BuildContext reads of a conversation, by convstate.cache.result (hit, appended, miss)");
  i.cache_evictions = m->AddCounter("convstate.context_cache.evictions", "{entry}",
                                    "Conversations the context cache let go to stay in its bound");
  i.cache_bytes = m->AddGauge("convstate.context_cache.bytes", "By",
                              "Bytes the context cache holds, as it counts them");
  i.cache_entries = m->AddGauge("convstate.context_cache.entries", "{conversation}",
                                "Conversations the context cache holds");
  i.invalid_utf8 = m->AddCounter(
      "convstate.requests.invalid_utf8", "{request}",
      "Requests refused because a string field held invalid UTF-8 (not logged one by one)");
  i.refused = m->AddCounter(
      "convstate.requests.refused", "{request}",
      "Calls refused before they ran, by convstate.refusal (unauthenticated, permission_denied, "
      "rate_limited)");
  i.spans_dropped = m->AddCounter("convstate.telemetry.spans_dropped", "{span}",
                                  "Spans dropped: the export queue was full or the export failed");
  m->AddObservedCounter("convstate.tasks.failed", "{task}",
                        "Calls and background tasks abandoned because something escaped them "
                        "(an exception); each fails alone, the process goes on",
                        [] { return EscapedExceptions(); });
  i.export_failures = m->AddCounter("convstate.telemetry.export_failures", "{request}",
                                    "OTLP export requests that failed, by signal");
  return i;
}

Labels ResourceOf(const TelemetryOptions& options, const std::string& instance_id) {
  Labels r = {{"service.name", options.service_name},
              {"service.instance.id", instance_id},
              {"telemetry.sdk.name", "convstate"},
              {"telemetry.sdk.language", "cpp"}};
  for (const auto& [k, v] : options.resource_attributes) {
    bool known = false;
    for (const auto& [rk, rv] : r) known = known || rk == k;
    if (!known) r.emplace_back(k, v);
  }
  return r;
}

}  // namespace

Telemetry::Telemetry(const TelemetryOptions& options, const std::string& instance_id,
                     bool export_enabled)
    : instruments_(MakeInstruments(&metrics_)),
      exporter_(export_enabled && (!options.traces_url.empty() || !options.metrics_url.empty())
                    ? std::make_unique<OtlpExporter>(options, ResourceOf(options, instance_id),
                                                     &metrics_, instruments_.spans_dropped,
                                                     instruments_.export_failures)
                    : nullptr),
      tracer_(options.sampler,
              exporter_ != nullptr && !options.traces_url.empty() ? exporter_.get() : nullptr) {}

std::unique_ptr<Telemetry> Telemetry::Start(const TelemetryOptions& options,
                                            const std::string& instance_id) {
  return std::unique_ptr<Telemetry>(new Telemetry(options, instance_id, !options.disabled));
}

std::unique_ptr<Telemetry> Telemetry::Disabled() {
  return std::unique_ptr<Telemetry>(new Telemetry(TelemetryOptions(), "", false));
}

Telemetry::~Telemetry() { Shutdown(absl::Seconds(2)); }

void Telemetry::Shutdown(absl::Duration grace) {
  if (exporter_ != nullptr) exporter_->Shutdown(grace);
}

}  // namespace convstate::telemetry
