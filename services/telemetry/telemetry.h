#ifndef CONVSTATE_SERVICES_TELEMETRY_TELEMETRY_H_
#define CONVSTATE_SERVICES_TELEMETRY_TELEMETRY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/telemetry/metrics.h"
#include "services/telemetry/options.h"
#include "services/telemetry/otlp_exporter.h"
#include "services/common/trace.h"

namespace convstate::telemetry {

// The service's instruments. Names follow the OpenTelemetry semantic
// conventions where one exists (rpc.*, gen_ai.*), else convstate.*.
struct Instruments {
  // rpc.server.call.duration (s) by rpc.system.name, rpc.method,
  // rpc.response.status_code.
  Histogram* rpc_duration;
  // convstate.compactions by convstate.compaction.tier and
  // convstate.compaction.outcome (completed, failed, facts_dropped,
  // discarded).
  Counter* compactions;
  // convstate.compaction.idle: compactions of conversations whose prompt
  // cache had gone cold (idle compaction), by convstate.compaction.outcome
  // (compacted, nothing).
  Counter* idle_compactions;
  // convstate.compaction.duration (s) by tier.
  Histogram* compaction_duration;
  // convstate.compaction.compression_ratio: view tokens replaced / tokens
  // after, by tier.
  Histogram* compression_ratio;
  // convstate.compaction.fact_recall: share of a span's facts its summary
  // keeps.
  Histogram* fact_recall;
  // convstate.compaction.lease_wait (s): how long a call waited for another
  // compaction of its conversation.
  Histogram* lease_wait;
  // convstate.summarizer.calls by outcome (ok, error).
  Counter* summarizer_calls;
  // gen_ai.client.operation.duration (s) and gen_ai.client.token.usage
  // (by gen_ai.token.type) of summarizer calls to an LLM.
  Histogram* llm_duration;
  Histogram* llm_tokens;
  // convstate.summarizer.circuit_open: 1 while the LLM's circuit is open.
  Gauge* summarizer_circuit_open;
  // convstate.view.tokens: tokens of each view BuildContext returns.
  Histogram* view_tokens;
  // convstate.context_cache.lookups by convstate.cache.result (hit: the
  // held context was current; appended: only new items were read; miss:
  // read whole), convstate.context_cache.evictions, and the cache's size in
  // convstate.context_cache.bytes and convstate.context_cache.entries.
  Counter* cache_lookups;
  Counter* cache_evictions;
  Gauge* cache_bytes;
  Gauge* cache_entries;
  // convstate.requests.invalid_utf8: requests refused because a string
  // field held invalid UTF-8 (as libprotobuf reported them).
  Counter* invalid_utf8;
  // convstate.requests.refused: calls refused before they ran, by
  // convstate.refusal (unauthenticated, permission_denied, rate_limited);
  // counted, not logged one by one.
  Counter* refused;
  // convstate.telemetry.spans_dropped and convstate.telemetry.export_failures.
  Counter* spans_dropped;
  Counter* export_failures;
};

// Tracing and metrics for one server: the tracer, the instruments, and the
// OTLP exporter when one is configured.
class Telemetry {
 public:
  // Exports as `options` say, with `instance_id` as service.instance.id.
  // Nothing is exported when options.disabled.
  static std::unique_ptr<Telemetry> Start(const TelemetryOptions& options,
                                          const std::string& instance_id);
  // Records metrics, samples no span, exports nothing.
  static std::unique_ptr<Telemetry> Disabled();
  ~Telemetry();

  Tracer* tracer() { return &tracer_; }
  const Instruments& instruments() const { return instruments_; }
  MetricRegistry* metrics() { return &metrics_; }

  // Flushes the exporter within `grace` and stops it. Idempotent; spans
  // ended after it are dropped.
  void Shutdown(absl::Duration grace);

 private:
  Telemetry(const TelemetryOptions& options, const std::string& instance_id, bool export_enabled);

  MetricRegistry metrics_;
  Instruments instruments_;
  std::unique_ptr<OtlpExporter> exporter_;
  Tracer tracer_;
};

}  // namespace convstate::telemetry

#endif  // CONVSTATE_SERVICES_TELEMETRY_TELEMETRY_H_
