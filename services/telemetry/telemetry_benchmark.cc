// What tracing adds to one call, without the network: a server span with
// the attributes BuildContext sets, one database child span and a metric
// point, handed to a sink; and the OTLP encoding of a batch, per span.
//
//   bazel run -c opt //services/telemetry:telemetry_benchmark

#include <vector>

#include "benchmark/benchmark.h"
#include "services/telemetry/otlp_exporter.h"
#include "services/telemetry/telemetry.h"

namespace convstate::telemetry {
namespace {

class Collect : public SpanSink {
 public:
  void OnEnd(SpanData span) override {
    if (spans.size() < 512) spans.push_back(std::move(span));
  }
  std::vector<SpanData> spans;
};

void TracedCall(Tracer& tracer, Histogram* duration) {
  Span server = tracer.StartRoot("convstate.v1.ConversationState/BuildContext",
                                 SpanKind::kServer, nullptr);
  server.SetAttribute("rpc.system.name", "grpc");
  server.SetAttribute("rpc.method", "convstate.v1.ConversationState/BuildContext");
  ScopedSpan scope(&server);
  SetCurrentAttribute("gen_ai.conversation.id", std::string("conversation-0042"));
  SetCurrentAttribute("convstate.tenant.id", std::string("default"));
  {
    Span db = StartSpan("SELECT conversations items summary_chunks", SpanKind::kClient);
    db.SetAttribute("db.system.name", "postgresql");
    db.SetAttribute("db.operation.name", "SELECT");
    db.SetAttribute("db.query.summary", "SELECT conversations items summary_chunks");
  }
  server.SetAttribute("convstate.context.status", "CONTEXT_STATUS_FULL");
  server.SetAttribute("convstate.context.band", "BAND_NORMAL");
  server.SetAttribute("convstate.view.tokens", int64_t{41234});
  server.SetAttribute("gen_ai.conversation.compacted", false);
  server.SetAttribute("rpc.response.status_code", "OK");
  duration->Record(0.0015, {{"rpc.system.name", "grpc"},
                            {"rpc.method", "convstate.v1.ConversationState/BuildContext"},
                            {"rpc.response.status_code", "OK"}});
}

void BM_TracedCall(benchmark::State& state) {
  Collect sink;
  Tracer tracer(*Sampler::FromNames("always_on", ""), &sink);
  MetricRegistry metrics;
  Histogram* duration = metrics.AddHistogram("rpc.server.call.duration", "s", "", {0.001, 0.01});
  for (auto _ : state) {
    TracedCall(tracer, duration);
    if (sink.spans.size() >= 512) sink.spans.clear();
  }
}
BENCHMARK(BM_TracedCall);

void BM_UntracedCall(benchmark::State& state) {
  Tracer tracer(*Sampler::FromNames("always_on", ""), nullptr);  // Nothing records.
  MetricRegistry metrics;
  Histogram* duration = metrics.AddHistogram("rpc.server.call.duration", "s", "", {0.001, 0.01});
  for (auto _ : state) TracedCall(tracer, duration);
}
BENCHMARK(BM_UntracedCall);

void BM_EncodeBatchPerSpan(benchmark::State& state) {
  Collect sink;
  Tracer tracer(*Sampler::FromNames("always_on", ""), &sink);
  MetricRegistry metrics;
  Histogram* duration = metrics.AddHistogram("d", "s", "", {0.001});
  while (sink.spans.size() < 512) TracedCall(tracer, duration);
  const Labels resource = {{"service.name", "convstate"}};
  for (auto _ : state) {
    std::vector<SpanData> batch = sink.spans;
    benchmark::DoNotOptimize(EncodeSpans(resource, std::move(batch)).SerializeAsString());
  }
  state.SetItemsProcessed(state.iterations() * 512);
}
BENCHMARK(BM_EncodeBatchPerSpan);

}  // namespace
}  // namespace convstate::telemetry

BENCHMARK_MAIN();
