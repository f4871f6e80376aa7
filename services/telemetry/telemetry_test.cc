#include "services/telemetry/telemetry.h"

#include <map>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "services/common/log.h"
#include "gtest/gtest.h"
#include "tools/otlp/otlp_receiver.h"

namespace convstate::telemetry {
namespace {

using ::convstate::otlp::OtlpReceiver;
using ::testing::ElementsAre;
using ::testing::Pair;

GetEnv EnvOf(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(TraceparentTest, ParsesAValidHeader) {
  auto c = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(ToHex(c->trace_id.data(), 16), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(c->span_id.data(), 8), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(c->trace_state, "k=v");
  EXPECT_EQ(FormatTraceparent(*c), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
}

TEST(TraceparentTest, RejectsMalformedHeaders) {
  for (const char* bad : {
           "",
           "garbage",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero span id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // uppercase
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",  // v00 with extra
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad, "").has_value()) << bad;
  }
  // A tracestate that is not printable ASCII is dropped, the parent kept.
  auto odd = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                              "k=\xff\xfe");
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->trace_state, "");
  // A later version may carry more fields.
  EXPECT_TRUE(
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra", "")
          .has_value());
}

TEST(LogTest, LinesCarryTheCurrentSpansIdsAndOnlyWhileItIsCurrent) {
  Tracer tracer(*Sampler::FromNames("always_on", ""), nullptr);
  class Discard : public SpanSink {
    void OnEnd(SpanData) override {}
  } sink;
  Tracer recording(*Sampler::FromNames("always_on", ""), &sink);
  Span span = recording.StartRoot("call", SpanKind::kServer, nullptr);
  const std::string trace_id = ToHex(span.context().trace_id.data(), 16);
  const std::string span_id = ToHex(span.context().span_id.data(), 8);
  ::testing::internal::CaptureStderr();
  {
    ScopedSpan scope(&span);
    LogInfo("inside");
  }
  LogInfo("outside");
  const std::string out = ::testing::internal::GetCapturedStderr();
  const size_t inside = out.find("inside");
  const size_t outside = out.find("outside");
  ASSERT_NE(inside, std::string::npos);
  ASSERT_NE(outside, std::string::npos);
  const std::string first = out.substr(0, out.find('\n'));
  EXPECT_NE(first.find("trace_id=" + trace_id + " span_id=" + span_id), std::string::npos) << first;
  EXPECT_EQ(out.substr(outside).find("trace_id="), std::string::npos) << out;
  // An inert span (no sink) puts no ids in the log.
  Span inert = tracer.StartRoot("x", SpanKind::kServer, nullptr);
  ::testing::internal::CaptureStderr();
  {
    ScopedSpan scope(&inert);
    LogInfo("inert");
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("trace_id="), std::string::npos);
}

TEST(SamplerTest, NamesAndDecisions) {
  SpanContext sampled_parent, unsampled_parent;
  sampled_parent.sampled = true;
  TraceId id{};
  id[15] = 1;  // A small value: inside any ratio above 0.

  auto on = Sampler::FromNames("always_on", "");
  auto off = Sampler::FromNames("always_off", "");
  auto pb_off = Sampler::FromNames("parentbased_always_off", "");
  auto ratio0 = Sampler::FromNames("traceidratio", "0");
  auto ratio = Sampler::FromNames("parentbased_traceidratio", "0.5");
  ASSERT_TRUE(on.ok() && off.ok() && pb_off.ok() && ratio0.ok() && ratio.ok());
  EXPECT_TRUE(on->ShouldSample(&unsampled_parent, id));  // Not parent based.
  EXPECT_FALSE(off->ShouldSample(&sampled_parent, id));
  EXPECT_TRUE(pb_off->ShouldSample(&sampled_parent, id));
  EXPECT_FALSE(pb_off->ShouldSample(nullptr, id));
  EXPECT_FALSE(ratio0->ShouldSample(nullptr, id));
  EXPECT_TRUE(ratio->ShouldSample(nullptr, id));
  TraceId high{};
  high[8] = 0xff;
  EXPECT_FALSE(ratio->ShouldSample(nullptr, high));
  EXPECT_FALSE(ratio->ShouldSample(&unsampled_parent, id));
  EXPECT_FALSE(Sampler::FromNames("sometimes", "").ok());
  EXPECT_FALSE(Sampler::FromNames("traceidratio", "1.5").ok());
}

TEST(OptionsTest, AppendsSignalPathsToTheBaseEndpointOnly) {
  auto o = OptionsFromEnvironment(EnvOf({
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
      {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics:9000/custom"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b,x=1"},
      {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x=2"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
      {"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod,service.name=fromattrs"},
      {"OTEL_SERVICE_NAME", "gateway-state"},
      {"OTEL_TRACES_SAMPLER", "traceidratio"},
      {"OTEL_TRACES_SAMPLER_ARG", "0.25"},
  }));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->traces_url, "http://collector:4318/v1/traces");
  EXPECT_EQ(o->metrics_url, "http://metrics:9000/custom");
  EXPECT_THAT(o->traces_headers, ElementsAre(Pair("api-key", "a b"), Pair("x", "2")));
  EXPECT_THAT(o->metrics_headers, ElementsAre(Pair("api-key", "a b"), Pair("x", "1")));
  EXPECT_EQ(o->traces_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(o->service_name, "gateway-state");
  EXPECT_EQ(o->sampler.root, Sampler::Root::kTraceIdRatio);
  EXPECT_FALSE(o->sampler.parent_based);
  EXPECT_DOUBLE_EQ(o->sampler.ratio, 0.25);
}

TEST(OptionsTest, DefaultsAndRefusals) {
  auto o = OptionsFromEnvironment(EnvOf({}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->traces_url, "http://localhost:4318/v1/traces");
  EXPECT_EQ(o->metrics_url, "http://localhost:4318/v1/metrics");
  EXPECT_TRUE(o->sampler.parent_based);
  EXPECT_FALSE(o->disabled);
  EXPECT_TRUE(OptionsFromEnvironment(EnvOf({{"OTEL_SDK_DISABLED", "TRUE"}}))->disabled);
  EXPECT_TRUE(OptionsFromEnvironment(EnvOf({{"OTEL_TRACES_EXPORTER", "none"}}))->traces_url.empty());
  EXPECT_FALSE(OptionsFromEnvironment(EnvOf({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}})).ok());
  EXPECT_FALSE(OptionsFromEnvironment(EnvOf({{"OTEL_EXPORTER_OTLP_TIMEOUT", "soon"}})).ok());
  EXPECT_FALSE(OptionsFromEnvironment(EnvOf({{"OTEL_TRACES_SAMPLER", "nope"}})).ok());
  // A client certificate needs its key.
  EXPECT_FALSE(OptionsFromEnvironment(
                   EnvOf({{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/etc/convstate/otel.pem"}}))
                   .ok());
  auto tls = OptionsFromEnvironment(EnvOf({{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"},
                                           {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/c.pem"},
                                           {"OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem"}}));
  ASSERT_TRUE(tls.ok());
  EXPECT_EQ(tls->ca_file, "/etc/ca.pem");
  EXPECT_EQ(tls->client_key, "/k.pem");
}

TEST(MetricsTest, HistogramBucketsAndCounters) {
  MetricRegistry registry;
  Histogram* h = registry.AddHistogram("h", "s", "", {1, 2});
  Counter* c = registry.AddCounter("c", "1", "");
  h->Record(0.5);
  h->Record(1.0);  // Upper bounds are inclusive.
  h->Record(1.5);
  h->Record(9);
  c->Add(2, {{"k", "a"}});
  c->Add(3, {{"k", "a"}});
  c->Add(1, {{"k", "b"}});
  EXPECT_EQ(c->Value({{"k", "a"}}), 5);
  opentelemetry::proto::metrics::v1::ScopeMetrics out;
  registry.Collect(&out);
  ASSERT_EQ(out.metrics_size(), 2);
  const auto& point = out.metrics(0).histogram().data_points(0);
  EXPECT_EQ(point.count(), 4u);
  EXPECT_THAT(point.bucket_counts(), ElementsAre(2, 1, 1));
  EXPECT_DOUBLE_EQ(point.sum(), 12.0);
  EXPECT_DOUBLE_EQ(point.max(), 9.0);
  EXPECT_EQ(out.metrics(1).sum().data_points_size(), 2);
  EXPECT_TRUE(out.metrics(1).sum().is_monotonic());
}

TelemetryOptions ToReceiver(const OtlpReceiver& r) {
  TelemetryOptions o;
  o.traces_url = r.base_url() + "/v1/traces";
  o.metrics_url = r.base_url() + "/v1/metrics";
  o.traces_headers = {{"x-tenant-key", "k1"}};
  o.batch_delay = absl::Milliseconds(50);
  o.metric_interval = absl::Milliseconds(100);
  o.initial_backoff = absl::Milliseconds(20);
  o.traces_timeout = o.metrics_timeout = absl::Milliseconds(300);
  o.sampler = *Sampler::FromNames("always_on", "");
  return o;
}

TEST(ExporterTest, SendsSpansWithParentsAttributesEventsAndStatus) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  auto t = Telemetry::Start(ToReceiver(**receiver), "replica-1");
  auto parent = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "");
  {
    Span server = t->tracer()->StartRoot("svc/Method", SpanKind::kServer, &*parent);
    server.SetAttribute("rpc.method", "svc/Method");
    server.SetAttribute("n", int64_t{7});
    ScopedSpan scope(&server);
    Span child = StartSpan("SELECT items", SpanKind::kClient);
    child.AddEvent("step", {{"tier", std::string("summary")}});
    child.SetError("boom");
  }
  ASSERT_TRUE((*receiver)->WaitFor([&] { return (*receiver)->spans().size() == 2; },
                                   absl::Seconds(10)));
  const auto spans = (*receiver)->spans();
  const auto& child = spans[0];
  const auto& server = spans[1];
  EXPECT_EQ(server.name(), "svc/Method");
  EXPECT_EQ(server.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(ToHex(reinterpret_cast<const uint8_t*>(server.trace_id().data()), 16),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(reinterpret_cast<const uint8_t*>(server.parent_span_id().data()), 8),
            "00f067aa0ba902b7");
  EXPECT_EQ(child.trace_id(), server.trace_id());
  EXPECT_EQ(child.parent_span_id(), server.span_id());
  EXPECT_EQ(child.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  ASSERT_EQ(child.events_size(), 1);
  EXPECT_EQ(child.events(0).attributes(0).value().string_value(), "summary");
  EXPECT_EQ(server.attributes(1).value().int_value(), 7);
  EXPECT_GE(server.end_time_unix_nano(), server.start_time_unix_nano());
  std::map<std::string, std::string> resource;
  for (const auto& [k, v] : (*receiver)->resource()) resource[k] = v;
  EXPECT_EQ(resource["service.name"], "convstate");
  EXPECT_EQ(resource["service.instance.id"], "replica-1");
  EXPECT_THAT((*receiver)->headers_seen().front(), ::testing::HasSubstr("x-tenant-key: k1"));
  EXPECT_THAT((*receiver)->headers_seen().front(),
              ::testing::HasSubstr("Content-Type: application/x-protobuf"));
}

TEST(ExporterTest, UnsampledSpansAreNotSent) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  TelemetryOptions o = ToReceiver(**receiver);
  o.sampler = *Sampler::FromNames("parentbased_always_on", "");
  o.metrics_url.clear();
  auto t = Telemetry::Start(o, "r");
  auto unsampled =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "");
  {
    Span s = t->tracer()->StartRoot("x", SpanKind::kServer, &*unsampled);
    EXPECT_FALSE(s.recording());
    ScopedSpan scope(&s);
    EXPECT_FALSE(StartSpan("child").recording());
  }
  { Span s = t->tracer()->StartRoot("sampled", SpanKind::kServer, nullptr); }
  t->Shutdown(absl::Seconds(5));
  ASSERT_EQ((*receiver)->spans().size(), 1u);
  EXPECT_EQ((*receiver)->spans()[0].name(), "sampled");
}

TEST(ExporterTest, RetriesRetryableAnswersThenDelivers) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  (*receiver)->SetMode(OtlpReceiver::Mode::kFail, 503);
  TelemetryOptions o = ToReceiver(**receiver);
  o.metrics_url.clear();
  o.initial_backoff = absl::Milliseconds(200);
  auto t = Telemetry::Start(o, "r");
  { Span s = t->tracer()->StartRoot("retried", SpanKind::kServer, nullptr); }
  ASSERT_TRUE((*receiver)->WaitFor([&] { return (*receiver)->requests() >= 1; },
                                   absl::Seconds(10)));
  (*receiver)->SetMode(OtlpReceiver::Mode::kAccept);
  ASSERT_TRUE((*receiver)->WaitFor([&] { return (*receiver)->spans().size() == 1; },
                                   absl::Seconds(10)));
  EXPECT_EQ(t->instruments().spans_dropped->Value(), 0);
}

TEST(ExporterTest, DropsAndCountsWhatDoesNotFitAndNeverBlocks) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  (*receiver)->SetMode(OtlpReceiver::Mode::kHang);
  TelemetryOptions o = ToReceiver(**receiver);
  o.metrics_url.clear();
  o.max_queue = 10;
  o.max_batch = 5;
  o.traces_timeout = absl::Seconds(30);  // The collector hangs far longer than a call.
  auto t = Telemetry::Start(o, "r");
  for (int i = 0; i < 100; ++i) {
    Span s = t->tracer()->StartRoot("s", SpanKind::kServer, nullptr);
  }
  // At most the queue plus the batch in flight are kept.
  EXPECT_GE(t->instruments().spans_dropped->Value(), 100 - 10 - 5);
  const absl::Time before = absl::Now();
  t->Shutdown(absl::Milliseconds(300));  // Abandons the hung export.
  EXPECT_LT(absl::Now() - before, absl::Seconds(5));
  EXPECT_EQ(t->instruments().spans_dropped->Value(), 100);
}

TEST(ExporterTest, ExportsMetricsPeriodicallyAndAtShutdown) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  TelemetryOptions o = ToReceiver(**receiver);
  o.metric_interval = absl::Seconds(60);  // Only the final export.
  auto t = Telemetry::Start(o, "r");
  t->instruments().compactions->Add(3, {{"convstate.compaction.tier", "summary"},
                                        {"convstate.compaction.outcome", "completed"}});
  t->Shutdown(absl::Seconds(5));
  const auto exports = (*receiver)->metrics();
  ASSERT_EQ(exports.size(), 1u);
  bool found = false;
  for (const auto& m : exports[0].resource_metrics(0).scope_metrics(0).metrics()) {
    if (m.name() != "convstate.compactions") continue;
    found = true;
    EXPECT_EQ(m.sum().data_points(0).as_int(), 3);
  }
  EXPECT_TRUE(found);
}

TEST(ExporterTest, DisabledExportsNothing) {
  auto receiver = OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok());
  TelemetryOptions o = ToReceiver(**receiver);
  o.disabled = true;
  auto t = Telemetry::Start(o, "r");
  {
    Span s = t->tracer()->StartRoot("x", SpanKind::kServer, nullptr);
    EXPECT_FALSE(s.recording());
  }
  t->Shutdown(absl::Seconds(1));
  EXPECT_EQ((*receiver)->requests(), 0);
}

}  // namespace
}  // namespace convstate::telemetry
