#include "services/api/compaction_runner.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

// Answers with whatever the test scripted; counts calls.
class ScriptedSummarizer final : public Summarizer {
 public:
  std::function<absl::StatusOr<SummaryResult>(const SummaryRequest&)> answer;
  int calls = 0;
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    ++calls;
    return answer(req);
  }
};

class CompactionRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = ModelRegistry::FromText(R"pb(
      profiles {
        name: "p"
        context_window: 2000
        output_reserve: 100
        token_floor: 0
        tokenizer { encoding: "approximate" bytes_per_token: 1.0 }
        recent { turns: 1 max_tokens: 400 }
        per_message_tokens: 0
      }
    )pb", "");
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
    profile_ = **registry_->Resolve("p");
    NewConversation nc;
    nc.key = {"t", "c"};
    nc.model = "p";
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  }

  void AppendTurns(int turns, int bytes) {
    for (int i = 0; i < turns; ++i) {
      AppendRequest req;
      req.key = {"t", "c"};
      for (Role role : {Role::kUser, Role::kAssistant}) {
        ItemData d;
        d.role = role;
        d.content = absl::StrCat(std::string(bytes, 'x'), " turn ", i);
        d.token_count = static_cast<int64_t>(d.content.size());
        req.items.push_back(d);
      }
      ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
    }
  }

  absl::StatusOr<CompactionOutcome> Run(CompactionMode mode) {
    auto snap = storage_->LoadContext(ctx_, {"t", "c"});
    if (!snap.ok()) return snap.status();
    CompactionRunner runner(storage_.get(), &summarizer_);
    return runner.Run(ctx_, *snap, profile_, {}, mode, "", nullptr);
  }

  std::vector<std::string> Events() {
    std::vector<std::string> out;
    const auto events = storage_->ListCompactionEvents(ctx_, {"t", "c"});
    EXPECT_TRUE(events.ok()) << events.status();
    for (const auto& e : *events) out.push_back(e.event);
    return out;
  }

  std::unique_ptr<ModelRegistry> registry_;
  ResolvedProfile profile_;
  std::unique_ptr<Storage> storage_ = NewMemoryStorage();
  ScriptedSummarizer summarizer_;
  CallContext ctx_;
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(CompactionRunnerTest, OversizedSummaryIsCutAndAudited) {
  AppendTurns(5, 300);  // ~3000 tokens in a 2000 window.
  summarizer_.answer = [](const SummaryRequest& req) -> absl::StatusOr<SummaryResult> {
    SummaryResult r;
    r.text = std::string(req.max_tokens * 5, 'y');
    r.model = "verbose";
    return r;
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  auto chunks = storage_->ListSummaries(ctx_, {"t", "c"}, true);
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_LT(chunks->at(0).text.size(), 5 * 1000u);
  EXPECT_TRUE(Has(Events(), "summary_oversize"));
  EXPECT_TRUE(Has(Events(), "completed"));
  EXPECT_LE(out->view.tokens.total, 2000);
}

TEST_F(CompactionRunnerTest, NoProgressIsRecordedAndNotRetried) {
  // A zone of one tiny turn (about 16 tokens): no summary within the
  // minimum budget of 32 tokens can be smaller than it.
  AppendTurns(2, 1);
  summarizer_.answer = [](const SummaryRequest& req) -> absl::StatusOr<SummaryResult> {
    SummaryResult r;
    r.text = req.transcript;  // No compression at all.
    r.model = "echo";
    return r;
  };
  auto out = Run(CompactionMode::kSummarize);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(summarizer_.calls, 1);
  EXPECT_TRUE(Has(Events(), "no_progress"));
  EXPECT_TRUE(storage_->ListSummaries(ctx_, {"t", "c"}, true)->empty());
  // A second run tries once more, once: there is no loop.
  ASSERT_TRUE(Run(CompactionMode::kSummarize).ok());
  EXPECT_EQ(summarizer_.calls, 2);
}

TEST_F(CompactionRunnerTest, SummarizerFailureTruncatesTheViewOnly) {
  AppendTurns(5, 300);
  summarizer_.answer = [](const SummaryRequest&) -> absl::StatusOr<SummaryResult> {
    return absl::UnavailableError("circuit open");
  };
  auto out = Run(CompactionMode::kByBand);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->view.status, ContextStatus::kTruncated);
  EXPECT_LT(out->view.tokens.total, 1600);  // Under the hard threshold.
  EXPECT_TRUE(Has(Events(), "failed"));
  EXPECT_TRUE(Has(Events(), "truncated"));
  // Storage keeps everything.
  EXPECT_EQ(storage_->GetConversation(ctx_, {"t", "c"})->item_count, 10);
  EXPECT_EQ(storage_->GetConversation(ctx_, {"t", "c"})->summarized_through, 0);
}

}  // namespace
}  // namespace convstate
