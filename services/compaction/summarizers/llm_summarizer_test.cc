#include "services/compaction/summarizers/extractive.h"
#include "services/compaction/summarizers/llm_summarizer.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "services/common/utf8.h"
#include "gtest/gtest.h"
#include "tests/fake_llm.h"

namespace convstate {
namespace {

using testing::FakeLlm;
using testing::LlmBehavior;

class LlmSummarizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto llm = FakeLlm::Start();
    ASSERT_TRUE(llm.ok()) << llm.status();
    llm_ = std::move(*llm);
    tokenizer_ = NewApproximateTokenizer();
  }

  std::unique_ptr<Summarizer> Make(bool with_fallback, absl::Duration timeout = absl::Seconds(5),
                                   LlmApi api = LlmApi::kOpenAiChat,
                                   int64_t max_response_bytes = int64_t{4} << 20) {
    LlmSummarizerOptions o;
    o.api = api;
    o.max_response_bytes = max_response_bytes;
    o.base_url = llm_->base_url();
    o.default_model = "summary-model";
    o.api_key = "sk-test-secret";
    o.timeout = timeout;
    o.max_retries = 2;
    o.backoff = absl::Milliseconds(100);
    o.failure_threshold = 2;
    o.open_for = absl::Seconds(30);
    return NewLlmSummarizer(o, with_fallback ? NewExtractiveSummarizer() : nullptr, &clock_);
  }

  SummaryRequest Request() const {
    SummaryRequest req;
    req.transcript = "[#1] User: The build fails with error E42 in src/main.cc.\n"
                     "[#2] Assistant: We decided to pin the compiler to gcc 12.\n";
    req.max_tokens = 200;
    req.tokenizer = tokenizer_.get();
    req.deadline = absl::Now() + absl::Seconds(30);
    return req;
  }

  FakeClock clock_;
  std::unique_ptr<FakeLlm> llm_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(LlmSummarizerTest, SendsTheDirectivesAndReturnsTheSummary) {
  llm_->Push({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "E42 fixed by pinning gcc 12."});
  auto summarizer = Make(false);
  SummaryRequest req = Request();
  req.instructions = "focus on the decisions";
  auto r = summarizer->Summarize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "E42 fixed by pinning gcc 12.");
  EXPECT_EQ(r->model, "summary-model");
  EXPECT_EQ(r->prompt_version, kLlmPromptVersion);
  EXPECT_GT(r->tokens_in, 0);
  const std::string body = llm_->last_body();
  for (const char* directive : {"goal", "Errors, commands", "Decisions", "still open",
                                "Who said what", "focus on the decisions", "error E42"}) {
    EXPECT_NE(body.find(directive), std::string::npos) << directive;
  }
  EXPECT_EQ(llm_->last_authorization(), "Bearer sk-test-secret");
}

TEST_F(LlmSummarizerTest, RetriesRateLimitsAndServerErrors) {
  llm_->Push({LlmBehavior::Kind::kFail, 429});
  llm_->Push({LlmBehavior::Kind::kFail, 500});
  llm_->Push({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "third time lucky"});
  auto r = Make(false)->Summarize(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "third time lucky");
  EXPECT_EQ(llm_->requests(), 3);
}

TEST_F(LlmSummarizerTest, ClientErrorsAreNotRetried) {
  llm_->Push({LlmBehavior::Kind::kFail, 400});
  auto r = Make(false)->Summarize(Request());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(llm_->requests(), 1);
}

TEST_F(LlmSummarizerTest, CircuitOpensFallsBackAndClosesWhenTheLlmRecovers) {
  llm_->SetDefault({LlmBehavior::Kind::kFail, 500});
  auto summarizer = Make(/*with_fallback=*/true);
  // Two failed calls (three attempts each) open the circuit.
  for (int i = 0; i < 2; ++i) {
    auto r = summarizer->Summarize(Request());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
  EXPECT_EQ(llm_->requests(), 6);
  // Open: the extractive summarizer answers, the LLM is not called.
  auto fallback = summarizer->Summarize(Request());
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->model, kExtractiveModel);
  EXPECT_EQ(llm_->requests(), 6);
  // After the open period one trial goes out; the LLM has recovered.
  llm_->SetDefault({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "back"});
  clock_.Advance(absl::Seconds(31));
  auto recovered = summarizer->Summarize(Request());
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->text, "back");
  auto again = summarizer->Summarize(Request());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->model, "summary-model");
}

TEST_F(LlmSummarizerTest, AHangingLlmTimesOut) {
  llm_->SetDefault({LlmBehavior::Kind::kHang});
  auto summarizer = Make(false, absl::Milliseconds(300));
  SummaryRequest req = Request();
  const absl::Time start = absl::Now();
  auto r = summarizer->Summarize(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  // Three attempts of 300 ms, not the fake's 60 s.
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST_F(LlmSummarizerTest, TellsTheModelWhatTheLedgerAlreadyKeeps) {
  llm_->Push({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "narrative"});
  SummaryRequest req = Request();
  req.preserved = {"The build fails with error E42 in src/main.cc."};
  auto r = Make(false)->Summarize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(llm_->last_body().find("Already preserved verbatim"), std::string::npos);
  EXPECT_NE(llm_->last_body().find("- The build fails with error E42 in src/main.cc."),
            std::string::npos)
      << llm_->last_body();
}

TEST_F(LlmSummarizerTest, ACallersShortDeadlineDoesNotOpenTheCircuit) {
  llm_->SetDefault({LlmBehavior::Kind::kHang});
  auto summarizer = Make(/*with_fallback=*/true, absl::Seconds(5));
  // Callers that give the summarizer 200 ms, far less than its own 5 s
  // timeout: each call fails, but the backend is not to blame.
  for (int i = 0; i < 3; ++i) {
    SummaryRequest req = Request();
    req.deadline = clock_.Now() + absl::Milliseconds(200);
    auto r = summarizer->Summarize(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  }
  const int asked = llm_->requests();
  EXPECT_GE(asked, 3);
  // The circuit is still closed: the next call goes to the LLM, not the fallback.
  llm_->SetDefault({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "healthy"});
  auto r = summarizer->Summarize(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "summary-model");
  EXPECT_EQ(llm_->requests(), asked + 1);
}

TEST_F(LlmSummarizerTest, ACallerThatGoesAwayStopsTheCallInFlight) {
  llm_->SetDefault({LlmBehavior::Kind::kHang});
  auto summarizer = Make(/*with_fallback=*/false, absl::Seconds(30));
  SummaryRequest req = Request();
  std::atomic<bool> gone{false};
  req.cancelled = [&gone] { return gone.load(); };
  // The caller goes away once the call is in flight: when the LLM has it.
  const int asked = llm_->requests();
  std::thread leave([&] {
    while (llm_->requests() == asked) absl::SleepFor(absl::Milliseconds(1));
    gone = true;
  });
  const absl::Time start = absl::Now();
  auto r = summarizer->Summarize(req);
  leave.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  // Not the 30 s timeout, and no retry.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(llm_->requests(), 1);
}

TEST_F(LlmSummarizerTest, OversizedSummaryIsAskedForAgainWithATighterLimit) {
  llm_->SetDefault({LlmBehavior::Kind::kOversize});
  auto r = Make(false)->Summarize(Request());
  ASSERT_TRUE(r.ok()) << r.status();  // Still too long: the caller cuts it.
  EXPECT_GT(tokenizer_->CountTokens(r->text), 200);
  EXPECT_EQ(llm_->requests(), 2);
  EXPECT_NE(llm_->last_body().find("in at most 120 tokens"), std::string::npos);
}

LlmBehavior Raw(const std::string& body, int status = 200,
                const std::string& content_type = "application/json") {
  LlmBehavior b;
  b.kind = LlmBehavior::Kind::kRaw;
  b.status = status;
  b.text = body;
  b.content_type = content_type;
  return b;
}

TEST_F(LlmSummarizerTest, EveryAnswerThatIsNotAChatCompletionIsAFailedAttempt) {
  // Shapes a broken backend or proxy sends with HTTP 200: wrong types at
  // every level, truncated JSON, no JSON at all.
  const std::vector<std::string> bodies = {
      R"({"choices":[{"message":"x"}]})",
      R"({"choices":"x"})",
      R"({"choices":[]})",
      R"({"choices":[1]})",
      R"({"choices":[{"message":{"content":42}}]})",
      R"({"choices":[{"message":{"content":""}}]})",
      R"({"choices":[{"message":{"content":[{"type":"image"}]}}]})",
      R"({"choices":null})",
      R"([])",
      R"("choices")",
      R"(null)",
      R"({"choices":[{"message":{"content":"abc)",
      "<html><body><h1>502 Bad Gateway</h1></body></html>",
      "",
  };
  for (const std::string& body : bodies) {
    SetUp();
    llm_->SetDefault(Raw(body));
    auto r = Make(false)->Summarize(Request());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << body << ": " << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "could not be read")) << r.status();
    EXPECT_EQ(llm_->requests(), 3) << body;  // Retried like a server error.
  }
}

TEST_F(LlmSummarizerTest, OddFieldsAroundAUsableSummaryAreIgnored) {
  const std::vector<std::string> bodies = {
      R"({"model":null,"choices":[{"message":{"content":"ok"}}]})",
      R"({"model":5,"usage":"many","choices":[{"message":{"content":"ok"}}]})",
      R"({"usage":{"prompt_tokens":"12","completion_tokens":-5},"choices":[{"message":{"content":"ok"}}]})",
      R"({"usage":{"prompt_tokens":1e300},"choices":[{"message":{"content":[{"type":"text","text":"ok"}]}}]})",
  };
  for (const std::string& body : bodies) {
    SetUp();
    llm_->SetDefault(Raw(body));
    auto r = Make(false)->Summarize(Request());
    ASSERT_TRUE(r.ok()) << body << ": " << r.status();
    EXPECT_EQ(r->text, "ok");
    EXPECT_EQ(r->model, "summary-model");
    EXPECT_GE(r->tokens_in, 0);
    EXPECT_GE(r->tokens_out, 0);
  }
}

TEST_F(LlmSummarizerTest, OnlyValidUtf8ComesBack) {
  // Raw bytes that are not UTF-8 make the body unreadable JSON: a failed
  // attempt, never text passed on.
  llm_->SetDefault(Raw("{\"choices\":[{\"message\":{\"content\":\"bad \xFF\xFE bytes\"}}]}"));
  auto bad = Make(false)->Summarize(Request());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable) << bad.status();
  // Escapes decode to valid UTF-8.
  SetUp();
  llm_->SetDefault(Raw(R"({"choices":[{"message":{"content":"caf\u00e9 \ud83d\ude00"}}]})"));
  auto r = Make(false)->Summarize(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsValidUtf8(r->text));
  EXPECT_EQ(r->text, "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST_F(LlmSummarizerTest, ABodyLargerThanTheLimitIsNotReadToItsEnd) {
  LlmBehavior huge;
  huge.kind = LlmBehavior::Kind::kHuge;
  huge.bytes = int64_t{100} << 20;
  llm_->SetDefault(huge);
  const absl::Time start = absl::Now();
  auto r = Make(false, absl::Seconds(30), LlmApi::kOpenAiChat, int64_t{1} << 20)->Summarize(Request());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "larger than 1048576 bytes")) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST_F(LlmSummarizerTest, ABodyThatDripsIsCutAtTheTimeout) {
  LlmBehavior drip;
  drip.kind = LlmBehavior::Kind::kDrip;
  drip.bytes = 100000;
  drip.delay = absl::Milliseconds(20);
  llm_->SetDefault(drip);
  const absl::Time start = absl::Now();
  auto r = Make(false, absl::Milliseconds(400))->Summarize(Request());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

TEST_F(LlmSummarizerTest, ARefusalGoesToTheFallbackAtOnceAndIsNotRetried) {
  llm_->SetDefault({LlmBehavior::Kind::kRefuse});
  auto with = Make(/*with_fallback=*/true)->Summarize(Request());
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->model, kExtractiveModel);
  EXPECT_EQ(with->fallback_reason, "the model refused");
  EXPECT_EQ(llm_->requests(), 1);
  auto without = Make(/*with_fallback=*/false)->Summarize(Request());
  EXPECT_EQ(without.status().code(), absl::StatusCode::kFailedPrecondition) << without.status();
  EXPECT_EQ(llm_->requests(), 2);
}

TEST_F(LlmSummarizerTest, ReasoningModelsGetMaxCompletionTokensAndNoTemperature) {
  llm_->SetDefault({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "short"});
  SummaryRequest req = Request();
  req.max_completion_tokens = true;
  ASSERT_TRUE(Make(false)->Summarize(req).ok());
  EXPECT_TRUE(absl::StrContains(llm_->last_body(), R"("max_completion_tokens":200)"))
      << llm_->last_body();
  EXPECT_FALSE(absl::StrContains(llm_->last_body(), R"("max_tokens")"));
  EXPECT_FALSE(absl::StrContains(llm_->last_body(), "temperature"));
  ASSERT_TRUE(Make(false)->Summarize(Request()).ok());
  EXPECT_TRUE(absl::StrContains(llm_->last_body(), R"("max_tokens":200)"));
  EXPECT_TRUE(absl::StrContains(llm_->last_body(), R"("temperature":0)"));
}

TEST_F(LlmSummarizerTest, SpeaksAnthropicMessages) {
  llm_->SetDefault({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "E42 fixed."});
  auto r = Make(false, absl::Seconds(5), LlmApi::kAnthropicMessages)->Summarize(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "E42 fixed.");
  EXPECT_EQ(r->model, "summary-model");
  EXPECT_GT(r->tokens_in, 0);
  EXPECT_GT(r->tokens_out, 0);
  const std::string head = llm_->last_head();
  EXPECT_TRUE(absl::StartsWith(head, "POST /v1/messages ")) << head;
  EXPECT_TRUE(absl::StrContains(head, "x-api-key: sk-test-secret")) << head;
  EXPECT_TRUE(absl::StrContains(head, "anthropic-version: 2023-06-01")) << head;
  EXPECT_EQ(llm_->last_authorization(), "");  // No bearer token to Anthropic.
  const std::string body = llm_->last_body();
  EXPECT_TRUE(absl::StrContains(body, R"("system":"You summarize)")) << body;
  EXPECT_TRUE(absl::StrContains(body, R"("max_tokens":200)")) << body;
  EXPECT_TRUE(absl::StrContains(body, "error E42")) << body;
}

TEST_F(LlmSummarizerTest, AnthropicOverloadIsRetriedAndNamedAndRefusalsFallBack) {
  llm_->SetDefault({LlmBehavior::Kind::kFail, 529});
  auto r = Make(false, absl::Seconds(5), LlmApi::kAnthropicMessages)->Summarize(Request());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "HTTP 529 (overloaded_error)")) << r.status();
  EXPECT_EQ(llm_->requests(), 3);
  llm_->SetDefault({LlmBehavior::Kind::kRefuse});
  auto refused = Make(true, absl::Seconds(5), LlmApi::kAnthropicMessages)->Summarize(Request());
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->model, kExtractiveModel);
  for (const std::string& body :
       {std::string(R"({"type":"error","error":{"type":"overloaded_error"}})"),
        std::string(R"({"content":"text"})"), std::string(R"({"content":[{"type":"text"}]})")}) {
    SetUp();
    llm_->SetDefault(Raw(body));
    auto bad = Make(false, absl::Seconds(5), LlmApi::kAnthropicMessages)->Summarize(Request());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable) << body;
  }
}

TEST_F(LlmSummarizerTest, AProfileMayNameAnotherApi) {
  llm_->SetDefault({LlmBehavior::Kind::kAnswer, 200, absl::ZeroDuration(), "from anthropic"});
  SummaryRequest req = Request();
  req.api = "anthropic_messages";
  auto r = Make(false)->Summarize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(absl::StartsWith(llm_->last_head(), "POST /v1/messages ")) << llm_->last_head();
  EXPECT_EQ(LlmApiFromName("openai_chat"), LlmApi::kOpenAiChat);
  EXPECT_EQ(LlmApiFromName("anthropic_messages"), LlmApi::kAnthropicMessages);
  EXPECT_EQ(LlmApiFromName("gemini"), std::nullopt);
}

}  // namespace
}  // namespace convstate
