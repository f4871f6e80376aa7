#include "services/compaction/llm_summarizer.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
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

  std::unique_ptr<Summarizer> Make(bool with_fallback, absl::Duration timeout = absl::Seconds(5)) {
    LlmSummarizerOptions o;
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
  std::thread leave([&gone] {
    absl::SleepFor(absl::Milliseconds(300));
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

}  // namespace
}  // namespace convstate
