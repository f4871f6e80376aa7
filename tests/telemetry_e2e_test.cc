// Traces and metrics of a real server process and PostgreSQL, received by
// an OTLP/HTTP receiver inside the test that decodes every export with the
// official opentelemetry-proto messages. Also: a collector that is down or
// hangs changes nothing for callers.

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/fake_llm_control.h"
#include "tools/otlp/otlp_receiver.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using opentelemetry::proto::trace::v1::Span;
using rpc::MakeItem;
using otlp::OtlpReceiver;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;


// Planted in every item: no span or event may carry it.
constexpr char kMarker[] = "CONTENT-MARKER-7f3a";
constexpr char kMethod[] = "convstate.v1.ConversationState/";

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

std::string RandomHex(std::mt19937_64& rng, int bytes) {
  std::string raw;
  for (int i = 0; i < bytes; ++i) raw.push_back(static_cast<char>(rng() & 0xff));
  raw[0] |= 1;  // Never all zeros.
  return Hex(raw);
}

// Attribute values of a span (and its events) by key, as text.
std::map<std::string, std::string> Attributes(const Span& span) {
  std::map<std::string, std::string> out;
  for (const auto& kv : span.attributes()) {
    const auto& v = kv.value();
    out[kv.key()] = v.has_string_value() ? v.string_value()
                    : v.has_int_value()  ? std::to_string(v.int_value())
                    : v.has_bool_value() ? (v.bool_value() ? "true" : "false")
                                         : std::to_string(v.double_value());
  }
  return out;
}

bool AnyTextContains(const Span& span, absl::string_view needle) {
  auto in = [&](const auto& attributes) {
    for (const auto& kv : attributes) {
      if (absl::StrContains(kv.value().string_value(), needle)) return true;
    }
    return false;
  };
  if (absl::StrContains(span.name(), needle) || absl::StrContains(span.status().message(), needle) ||
      in(span.attributes())) {
    return true;
  }
  for (const auto& e : span.events()) {
    if (in(e.attributes())) return true;
  }
  return false;
}

class TelemetryE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    auto receiver = OtlpReceiver::Start();
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(*receiver);
    // The server inherits the environment: the standard variables.
    setenv("OTEL_BSP_SCHEDULE_DELAY", "100", 1);
    setenv("OTEL_SERVICE_NAME", "convstate-e2e", 1);
    setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=e2e%20run", 1);
  }

  void StartServer(std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--model_profiles=" + testing::WriteTinyProfiles()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    E2eTest::StartServer(flags);
  }

  grpc::Status Create(const std::string& id, const std::string& traceparent = "") {
    v1::CreateConversationRequest req;
    req.set_conversation_id(id);
    req.set_model("tiny-1");
    req.set_system_prompt(absl::StrCat("You are an on-call assistant. ", kMarker));
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    if (!traceparent.empty()) ctx.AddMetadata("traceparent", traceparent);
    return stub_->CreateConversation(&ctx, req, &out);
  }

  grpc::Status Build(const std::string& id, int n, const std::string& traceparent,
                     v1::BuildContextResponse* view) {
    v1::BuildContextRequest req;
    req.set_conversation_id(id);
    *req.add_pending_input() = MakeItem(
        v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, absl::StrCat("question ", n, " ", kMarker));
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    if (!traceparent.empty()) ctx.AddMetadata("traceparent", traceparent);
    return stub_->BuildContext(&ctx, req, view);
  }

  grpc::Status Append(const std::string& id, int n) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    const std::string call = absl::StrCat("call_", n);
    std::string output;
    for (int i = 0; i < 30; ++i) {
      absl::StrAppend(&output, "line ", i, " of the tool output for turn ", n, " ", kMarker,
                      " host-", i % 7, " latency ", 100 + i * n, " ms\n");
    }
    *req.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE,
                                absl::StrCat("question ", n, " ", kMarker));
    *req.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL,
                                absl::StrCat(R"({"cmd": "kubectl logs )", kMarker, R"("})"),
                                "kubectl", call);
    *req.add_items() = MakeItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, output, "kubectl", call);
    *req.add_items() =
        MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE,
                 absl::StrCat("The deployment api-", n, " failed on port ", 8000 + n,
                              "; we decided to roll back. ", kMarker));
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    return stub_->AppendTurn(&ctx, req, &out);
  }

  std::unique_ptr<OtlpReceiver> receiver_;
};

TEST_F(TelemetryE2eTest, OneTracePerCallWithChildSpansAttributesAndMatchingMetrics) {
  auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
  ASSERT_TRUE(llm.ok()) << llm.status();
  StartServer({"--otel_endpoint=" + receiver_->base_url(), "--otel_sampler=parentbased_always_on",
               "--otel_metric_interval_ms=200", "--background_compaction=false",
               absl::StrCat("--summarizer_url=http://127.0.0.1:", (*llm)->port(), "/v1"),
               "--summarizer_model=fake-sum", "--summarizer_timeout_ms=5000",
               "--summarizer_retries=0"});
  std::mt19937_64 rng(42);
  ASSERT_TRUE(Create("traced").ok());

  // Each BuildContext carries a traceparent of its own; appends carry none.
  constexpr int kTurns = 24;
  std::map<std::string, std::string> parent_of_trace;  // trace id -> parent span id
  std::vector<int64_t> view_tokens;
  for (int n = 0; n < kTurns; ++n) {
    const std::string trace_id = RandomHex(rng, 16);
    const std::string parent = RandomHex(rng, 8);
    parent_of_trace[trace_id] = parent;
    v1::BuildContextResponse view;
    const grpc::Status s = Build("traced", n, absl::StrCat("00-", trace_id, "-", parent, "-01"), &view);
    ASSERT_TRUE(s.ok()) << s.error_message();
    view_tokens.push_back(view.tokens().total());
    ASSERT_TRUE(Append("traced", n).ok());
  }
  // A malformed traceparent is ignored: the call succeeds in a trace of its own.
  v1::BuildContextResponse view;
  ASSERT_TRUE(Build("traced", kTurns, "00-not-a-trace-parent-01", &view).ok());
  // A caller's error does not mark the span failed.
  {
    v1::GetConversationRequest req;
    req.set_conversation_id("missing");
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_EQ(stub_->GetConversation(&ctx, req, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  int chunks_written = 0;
  {
    v1::ListSummariesRequest req;
    req.set_conversation_id("traced");
    req.set_include_superseded(true);
    v1::ListSummariesResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListSummaries(&ctx, req, &resp).ok());
    chunks_written = resp.chunks_size();
  }
  ASSERT_GT(chunks_written, 0) << "the conversation should have been summarized";

  // SIGTERM flushes what is queued.
  auto code = server_->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);

  const std::vector<Span> spans = receiver_->spans();
  ASSERT_FALSE(spans.empty());
  std::map<std::string, const Span*> by_id;
  for (const Span& s : spans) by_id[Hex(s.span_id())] = &s;
  auto children_of = [&](const Span& parent) {
    std::vector<const Span*> out;
    for (const Span& s : spans) {
      if (s.trace_id() == parent.trace_id() && s.parent_span_id() == parent.span_id()) {
        out.push_back(&s);
      }
    }
    return out;
  };

  // No item content, prompt or summary text in any span.
  for (const Span& s : spans) EXPECT_FALSE(AnyTextContains(s, kMarker)) << s.name();

  // One server span per traced BuildContext, the child of the caller's span.
  int traced_builds = 0, recall_searches = 0, recall_ranks = 0;
  bool saw_compaction = false, saw_llm = false;
  for (const Span& s : spans) {
    if (s.name() != absl::StrCat(kMethod, "BuildContext")) continue;
    EXPECT_EQ(s.kind(), Span::SPAN_KIND_SERVER);
    const auto attrs = Attributes(s);
    EXPECT_EQ(attrs.at("rpc.system.name"), "grpc");
    EXPECT_EQ(attrs.at("rpc.method"), absl::StrCat(kMethod, "BuildContext"));
    EXPECT_EQ(attrs.at("rpc.response.status_code"), "OK");
    EXPECT_EQ(attrs.at("gen_ai.conversation.id"), "traced");
    EXPECT_EQ(attrs.at("convstate.tenant.id"), "default");
    EXPECT_TRUE(attrs.count("convstate.context.status")) << "no context status";
    EXPECT_TRUE(attrs.count("convstate.context.band"));
    EXPECT_TRUE(attrs.count("gen_ai.conversation.compacted"));
    EXPECT_GT(std::stoll(attrs.at("convstate.view.tokens")), 0);
    EXPECT_NE(s.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
    auto it = parent_of_trace.find(Hex(s.trace_id()));
    if (it == parent_of_trace.end()) {
      EXPECT_TRUE(s.parent_span_id().empty()) << "the malformed traceparent's call is a root";
      continue;
    }
    ++traced_builds;
    EXPECT_EQ(Hex(s.parent_span_id()), it->second);
    // Its database transactions are client spans below it.
    int db_spans = 0;
    for (const Span* c : children_of(s)) {
      const auto ca = Attributes(*c);
      if (ca.count("db.system.name")) {
        ++db_spans;
        EXPECT_EQ(c->kind(), Span::SPAN_KIND_CLIENT);
        EXPECT_EQ(ca.at("db.system.name"), "postgresql");
        EXPECT_FALSE(ca.at("db.operation.name").empty());
        EXPECT_EQ(c->name(), ca.at("db.query.summary"));
      }
      // Recall's search and ranking, each on a span of its own.
      if (c->name() == "recall search") {
        ++recall_searches;
        EXPECT_EQ(c->kind(), Span::SPAN_KIND_INTERNAL);
        EXPECT_GT(std::stoll(ca.at("convstate.recall.terms")), 0);
        EXPECT_TRUE(ca.count("convstate.recall.copy"));
        EXPECT_TRUE(ca.count("convstate.recall.candidates") || ca.count("convstate.recall.error"));
      }
      if (c->name() == "recall rank") {
        ++recall_ranks;
        EXPECT_TRUE(ca.count("convstate.recall.passages"));
      }
      if (c->name() == "compaction") {
        saw_compaction = true;
        for (const auto& e : c->events()) {
          EXPECT_TRUE(absl::StartsWith(e.name(), "compaction.")) << e.name();
        }
        for (const Span* g : children_of(*c)) {
          if (!absl::StartsWith(g->name(), "chat ")) continue;
          saw_llm = true;
          const auto ga = Attributes(*g);
          EXPECT_EQ(g->kind(), Span::SPAN_KIND_CLIENT);
          EXPECT_EQ(ga.at("gen_ai.operation.name"), "chat");
          EXPECT_EQ(ga.at("gen_ai.request.model"), "fake-sum");
          EXPECT_EQ(ga.at("server.address"), "127.0.0.1");
          EXPECT_TRUE(ga.count("gen_ai.usage.input_tokens"));
          EXPECT_TRUE(ga.count("gen_ai.usage.output_tokens"));
        }
      }
    }
    EXPECT_GE(db_spans, 1) << "BuildContext in trace " << Hex(s.trace_id());
  }
  EXPECT_EQ(traced_builds, kTurns);
  EXPECT_GT(recall_searches, 0) << "a question after a compaction searches the history";
  EXPECT_GT(recall_ranks, 0);
  EXPECT_TRUE(saw_compaction);
  EXPECT_TRUE(saw_llm);

  // The compaction spans' events name each step with its tier and tokens.
  int summarize_events = 0;
  for (const Span& s : spans) {
    for (const auto& e : s.events()) {
      if (e.name() != "compaction.summarize" && e.name() != "compaction.fold") continue;
      std::map<std::string, std::string> a;
      for (const auto& kv : e.attributes()) {
        a[kv.key()] = kv.value().has_string_value() ? kv.value().string_value() : "n";
      }
      EXPECT_TRUE(a.count("convstate.compaction.tokens_before"));
      EXPECT_TRUE(a.count("convstate.compaction.tokens_after"));
      if (a["convstate.compaction.outcome"] == "completed") {
        ++summarize_events;
        EXPECT_TRUE(a.count("convstate.compaction.recall"));
      }
    }
  }
  EXPECT_EQ(summarize_events, chunks_written);

  // Errors of the caller leave the status unset.
  bool saw_not_found = false;
  for (const Span& s : spans) {
    if (s.name() != absl::StrCat(kMethod, "GetConversation")) continue;
    saw_not_found = true;
    EXPECT_EQ(Attributes(s).at("rpc.response.status_code"), "NOT_FOUND");
    EXPECT_EQ(s.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_UNSET);
  }
  EXPECT_TRUE(saw_not_found);

  std::map<std::string, std::string> resource;
  for (const auto& [k, v] : receiver_->resource()) resource[k] = v;
  EXPECT_EQ(resource["service.name"], "convstate-e2e");
  EXPECT_EQ(resource["deployment.environment.name"], "e2e run");

  // Metrics: the last export (at shutdown) counts what this test did.
  const auto exports = receiver_->metrics();
  ASSERT_FALSE(exports.empty());
  const auto& last = exports.back().resource_metrics(0).scope_metrics(0);
  std::map<std::string, const opentelemetry::proto::metrics::v1::Metric*> metrics;
  for (const auto& m : last.metrics()) metrics[m.name()] = &m;
  auto count_of = [&](const std::string& name, const std::map<std::string, std::string>& want) {
    uint64_t total = 0;
    auto it = metrics.find(name);
    if (it == metrics.end()) return total;
    for (const auto& p : it->second->histogram().data_points()) {
      std::map<std::string, std::string> a;
      for (const auto& kv : p.attributes()) a[kv.key()] = kv.value().string_value();
      bool match = true;
      for (const auto& [k, v] : want) match = match && a[k] == v;
      if (match) total += p.count();
    }
    return total;
  };
  EXPECT_EQ(count_of("rpc.server.call.duration",
                     {{"rpc.method", absl::StrCat(kMethod, "BuildContext")},
                      {"rpc.response.status_code", "OK"}}),
            static_cast<uint64_t>(kTurns + 1));
  EXPECT_EQ(count_of("rpc.server.call.duration",
                     {{"rpc.method", absl::StrCat(kMethod, "AppendTurn")},
                      {"rpc.response.status_code", "OK"}}),
            static_cast<uint64_t>(kTurns));
  EXPECT_EQ(count_of("rpc.server.call.duration",
                     {{"rpc.method", absl::StrCat(kMethod, "GetConversation")},
                      {"rpc.response.status_code", "NOT_FOUND"}}),
            1u);
  EXPECT_EQ(count_of("convstate.view.tokens", {}), static_cast<uint64_t>(kTurns + 1));
  int64_t completed = 0;
  ASSERT_TRUE(metrics.count("convstate.compactions"));
  for (const auto& p : metrics["convstate.compactions"]->sum().data_points()) {
    std::map<std::string, std::string> a;
    for (const auto& kv : p.attributes()) a[kv.key()] = kv.value().string_value();
    if ((a["convstate.compaction.tier"] == "summarize" || a["convstate.compaction.tier"] == "fold") &&
        a["convstate.compaction.outcome"] == "completed") {
      completed += p.as_int();
    }
  }
  EXPECT_EQ(completed, chunks_written);
  EXPECT_EQ(count_of("convstate.compaction.fact_recall", {}) > 0, true);
  EXPECT_EQ(count_of("gen_ai.client.operation.duration", {{"gen_ai.request.model", "fake-sum"}}),
            static_cast<uint64_t>(testing::FakeLlmRequests((*llm)->port())));
  EXPECT_TRUE(metrics.count("convstate.summarizer.circuit_open"));
}

// A collector that hangs, and one that is not there: every call succeeds as
// before and the server still stops when told.
TEST_F(TelemetryE2eTest, CollectorDownOrHangingChangesNothingForCallers) {
  receiver_->SetMode(OtlpReceiver::Mode::kHang);
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600000", 1);  // Hangs far past every call.
  setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16", 1);
  StartServer({"--otel_endpoint=" + receiver_->base_url(), "--otel_sampler=always_on",
               "--otel_metric_interval_ms=50"});
  ASSERT_TRUE(Create("hung").ok());
  for (int n = 0; n < 30; ++n) {
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build("hung", n, "", &view).ok()) << n;
    ASSERT_TRUE(Append("hung", n).ok()) << n;
  }
  EXPECT_GE(receiver_->requests(), 1) << "the exporter should have tried";
  auto code = server_->Stop(SIGTERM, absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << "a hung collector held the server's shutdown: " << code.status();
  EXPECT_EQ(*code, 0);

  // Nothing listens on the endpoint at all.
  std::string closed;
  {
    auto gone = OtlpReceiver::Start();
    ASSERT_TRUE(gone.ok());
    closed = (*gone)->base_url();
  }
  StartServer({"--otel_endpoint=" + closed, "--otel_sampler=always_on",
               "--otel_metric_interval_ms=50"});
  ASSERT_TRUE(Create("down").ok());
  for (int n = 0; n < 30; ++n) {
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build("down", n, "", &view).ok()) << n;
    ASSERT_TRUE(Append("down", n).ok()) << n;
  }
  code = server_->Stop(SIGTERM, absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  unsetenv("OTEL_EXPORTER_OTLP_TIMEOUT");
  unsetenv("OTEL_BSP_MAX_QUEUE_SIZE");
}

}  // namespace
}  // namespace convstate
