// The summarizer path under every bad answer a backend or a proxy in front
// of it can give: the real server binary with --summarizer_url pointing at
// the fake LLM program, one compaction per bad shape. After each the server
// is alive and SERVING, the call has answered, and the audit trail says
// what happened; the circuit opens after repeated failures and the
// extractive summarizer stands in, as documented.

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/fake_llm_control.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using testing::ControlFakeLlm;
using rpc::Message;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;

constexpr char kExtractive[] = "convstate-extractive";

class SummarizerChaosE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
    ASSERT_TRUE(llm.ok()) << llm.status();
    llm_ = std::move(*llm);
  }

  void StartServer(std::vector<std::string> extra) {
    std::vector<std::string> flags = {
        absl::StrCat("--summarizer_url=http://127.0.0.1:", llm_->port(), "/v1"),
        "--summarizer_model=fake-sum", "--summarizer_timeout_ms=1500",
        "--summarizer_retries=0", "--background_compaction=false"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    E2eTest::StartServer(flags);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }

  // A conversation of three turns with facts in the first, whose first turn
  // a summary may replace (its answer says more than its facts, so that a
  // summary saves something).
  void Conversation(const std::string& id) {
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model("gpt-4o");
    create.mutable_profile_overrides()->set_recent_turns(1);
    v1::Conversation created;
    grpc::ClientContext c;
    SetDeadline(c);
    ASSERT_TRUE(stub_->CreateConversation(&c, create, &created).ok());
    for (int turn = 1; turn <= 3; ++turn) {
      v1::AppendTurnRequest append;
      append.set_conversation_id(id);
      *append.add_items() = Message(
          v1::ROLE_USER, absl::StrCat("Turn ", turn, ": the deploy of api v1.", turn,
                                      " to staging-eu-1 fails with exit code 137. What now?"));
      *append.add_items() = Message(
          v1::ROLE_ASSISTANT,
          absl::StrCat("Exit code 137 is an OOM kill: raise the memory limit of api v1.", turn,
                       " from 512Mi to 1Gi in deploy/api.yaml, then roll out again. That is the "
                       "usual cause when a service grows a little with each release and nobody "
                       "revisits the limits it was given at the start. Once it runs again it is "
                       "worth watching how close it stays to the new limit over the next few "
                       "days, so that the same thing does not happen again next week."));
      v1::AppendTurnResponse out;
      grpc::ClientContext a;
      SetDeadline(a);
      ASSERT_TRUE(stub_->AppendTurn(&a, append, &out).ok());
    }
  }

  // Compact(MODE_SUMMARIZE): must answer OK whatever the summarizer did.
  v1::CompactResponse Summarize(const std::string& id) {
    v1::CompactRequest req;
    req.set_conversation_id(id);
    req.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    v1::CompactResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->Compact(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << id << ": " << s.error_code() << " " << s.error_message();
    return out;
  }

  std::vector<v1::CompactionEvent> Events(const std::string& id) {
    v1::ListCompactionEventsRequest req;
    req.set_conversation_id(id);
    v1::ListCompactionEventsResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    EXPECT_TRUE(stub_->ListCompactionEvents(&ctx, req, &out).ok());
    return {out.events().begin(), out.events().end()};
  }

  std::vector<v1::SummaryChunk> Chunks(const std::string& id) {
    v1::ListSummariesRequest req;
    req.set_conversation_id(id);
    v1::ListSummariesResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    EXPECT_TRUE(stub_->ListSummaries(&ctx, req, &out).ok());
    return {out.chunks().begin(), out.chunks().end()};
  }

  // The process still runs and health says SERVING.
  void ExpectAlive(const std::string& after) {
    EXPECT_EQ(::kill(server_->pid(), 0), 0) << "the server died after " << after;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(5));
    const grpc::Status s = health_->Check(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << after << ": " << s.error_message();
    EXPECT_EQ(out.status(), grpc::health::v1::HealthCheckResponse::SERVING) << after;
  }

  // The `event` row's detail (JSON) of `id`'s audit, or "" if none.
  std::string Detail(const std::string& id, const std::string& event) {
    for (const v1::CompactionEvent& e : Events(id)) {
      if (e.event() == event) return e.detail_json();
    }
    return "";
  }

  std::unique_ptr<ServerProcess> llm_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

struct Shape {
  std::string name;
  // The fake LLM's behavior (see tests/fake_llm.h), as JSON.
  std::string behavior;
  // What the `failed` audit row's reason must contain; empty when the
  // answer is usable and a chunk by the LLM must be committed.
  std::string failure;
};

// Each bad shape fails its compaction alone: the call answers OK without a
// chunk, a `failed` row says why, and the server goes on. Usable answers
// with odd fields around them are taken.
TEST_F(SummarizerChaosE2eTest, EveryBadAnswerFailsOneCompactionAndNothingElse) {
  // The circuit stays closed: every compaction reaches the fake.
  StartServer({"--summarizer_failure_threshold=1000"});
  const std::vector<Shape> shapes = {
      {"message_is_a_string", R"({"kind":"raw","text":"{\"choices\":[{\"message\":\"x\"}]}"})",
       "could not be read"},
      {"choices_is_a_string", R"({"kind":"raw","text":"{\"choices\":\"x\"}"})", "could not be read"},
      {"choices_empty", R"({"kind":"raw","text":"{\"choices\":[]}"})", "could not be read"},
      {"content_is_a_number",
       R"({"kind":"raw","text":"{\"choices\":[{\"message\":{\"content\":42}}]}"})",
       "could not be read"},
      {"truncated_json", R"({"kind":"raw","text":"{\"choices\":[{\"message\":{\"content\":\"Summ"})",
       "could not be read"},
      {"html_with_200",
       R"({"kind":"raw","content_type":"text/html","text":"<html><body>Welcome to the proxy</body></html>"})",
       "could not be read"},
      {"html_with_503",
       R"({"kind":"raw","status":503,"content_type":"text/html","text":"<html>503</html>"})",
       "HTTP 503"},
      {"a_100_mb_body", R"({"kind":"huge","bytes":104857600})", "larger than"},
      {"a_body_that_drips", R"({"kind":"drip","bytes":100000,"delay_ms":50})", "did not answer"},
      {"model_null",
       R"({"kind":"raw","text":"{\"model\":null,\"choices\":[{\"message\":{\"content\":\"Deploy of api fails with exit 137.\"}}]}"})",
       ""},
      {"wrong_types_everywhere_but_the_text",
       R"({"kind":"raw","text":"{\"id\":1,\"object\":[],\"model\":{},\"choices\":[{\"index\":\"0\",\"message\":{\"role\":5,\"content\":\"OOM kills of api.\"},\"finish_reason\":7}],\"usage\":{\"prompt_tokens\":\"12\",\"completion_tokens\":[]}}"})",
       ""},
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.name);
    ASSERT_TRUE(ControlFakeLlm(llm_->port(), absl::StrCat(R"({"default":)", shape.behavior, "}")));
    Conversation(shape.name);
    const v1::CompactResponse out = Summarize(shape.name);
    ExpectAlive(shape.name);
    if (shape.failure.empty()) {
      EXPECT_NE(out.summary_chunk_id(), 0);
      const std::vector<v1::SummaryChunk> chunks = Chunks(shape.name);
      ASSERT_EQ(chunks.size(), 1u);
      EXPECT_EQ(chunks[0].summarizer_model(), "fake-sum");
      EXPECT_NE(Detail(shape.name, "completed"), "");
    } else {
      EXPECT_EQ(out.summary_chunk_id(), 0);
      EXPECT_TRUE(Chunks(shape.name).empty());
      const std::string failed = Detail(shape.name, "failed");
      EXPECT_TRUE(absl::StrContains(failed, shape.failure)) << failed;
    }
  }
  // A refusal is no failure of the backend: the extractive summarizer
  // writes that summary at once, and the audit says why.
  ASSERT_TRUE(ControlFakeLlm(llm_->port(), R"({"default":{"kind":"refuse"}})"));
  Conversation("refused");
  EXPECT_NE(Summarize("refused").summary_chunk_id(), 0);
  ExpectAlive("a refusal");
  const std::vector<v1::SummaryChunk> chunks = Chunks("refused");
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].summarizer_model(), kExtractive);
  EXPECT_TRUE(absl::StrContains(Detail("refused", "completed"), "the model refused"));
  // A summary far longer than asked is cut to the budget, and audited.
  ASSERT_TRUE(ControlFakeLlm(llm_->port(), R"({"default":{"kind":"oversize"}})"));
  Conversation("rambling");
  EXPECT_NE(Summarize("rambling").summary_chunk_id(), 0);
  EXPECT_NE(Detail("rambling", "summary_oversize"), "");
  ExpectAlive("an oversized summary");
}

// Malformed answers count against the circuit like server errors: after
// the threshold the circuit opens and the extractive summarizer stands in,
// so compactions go on.
TEST_F(SummarizerChaosE2eTest, MalformedAnswersOpenTheCircuitAndTheFallbackStandsIn) {
  StartServer({"--summarizer_failure_threshold=2", "--summarizer_open_ms=60000"});
  ASSERT_TRUE(ControlFakeLlm(llm_->port(),
                             R"({"default":{"kind":"raw","text":"{\"choices\":[{\"message\":\"x\"}]}"}})"));
  for (const char* id : {"first", "second"}) {
    Conversation(id);
    EXPECT_EQ(Summarize(id).summary_chunk_id(), 0);
    EXPECT_NE(Detail(id, "failed"), "");
  }
  const int asked = testing::FakeLlmRequests(llm_->port());
  Conversation("third");
  EXPECT_NE(Summarize("third").summary_chunk_id(), 0);
  const std::vector<v1::SummaryChunk> chunks = Chunks("third");
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].summarizer_model(), kExtractive);
  EXPECT_EQ(testing::FakeLlmRequests(llm_->port()), asked);  // Open: not asked.
  ExpectAlive("an open circuit");
}

// The same through Anthropic's Messages API.
TEST_F(SummarizerChaosE2eTest, AnthropicAnswersAreReadTheSameWay) {
  StartServer({"--summarizer_api=anthropic_messages", "--summarizer_failure_threshold=1000"});
  ASSERT_TRUE(ControlFakeLlm(llm_->port(), R"({"default":{"kind":"answer"}})"));
  Conversation("claude");
  EXPECT_NE(Summarize("claude").summary_chunk_id(), 0);
  ASSERT_EQ(Chunks("claude").size(), 1u);
  EXPECT_EQ(Chunks("claude")[0].summarizer_model(), "fake-sum");
  const std::vector<Shape> shapes = {
      {"claude-content-string", R"({"kind":"raw","text":"{\"content\":\"x\"}"})",
       "could not be read"},
      {"claude-error-body", R"({"kind":"raw","text":"{\"type\":\"error\",\"error\":{}}"})",
       "could not be read"},
      {"claude-overloaded", R"({"kind":"fail","status":529})", "HTTP 529 (overloaded_error)"},
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.name);
    ASSERT_TRUE(ControlFakeLlm(llm_->port(), absl::StrCat(R"({"default":)", shape.behavior, "}")));
    Conversation(shape.name);
    EXPECT_EQ(Summarize(shape.name).summary_chunk_id(), 0);
    const std::string failed = Detail(shape.name, "failed");
    EXPECT_TRUE(absl::StrContains(failed, shape.failure)) << failed;
    ExpectAlive(shape.name);
  }
}

}  // namespace
}  // namespace convstate
