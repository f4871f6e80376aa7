#include "services/compaction/summarizers/factory.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "services/common/clock.h"

namespace convstate {
namespace {

// Answers every request with the same text.
class FixedSummarizer final : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest&) override {
    SummaryResult r;
    r.text = "fixed";
    r.model = "fixed-model";
    return r;
  }
};

SummarizerRegistry WithFixed() {
  return SummarizerRegistry({
      {"fixed",
       [](const SummarizerConfig&, const Clock*) -> absl::StatusOr<std::unique_ptr<Summarizer>> {
         return std::make_unique<FixedSummarizer>();
       },
       [](const SummarizerConfig&) -> std::string { return "always the same"; }},
  });
}

TEST(SummarizerRegistryTest, AnUnknownNameIsRefusedNamingTheKnownOnes) {
  FakeClock clock;
  SummarizerConfig config;
  config.name = "abstractive";
  absl::StatusOr<std::unique_ptr<Summarizer>> s = NewSummarizer(config, &clock);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "unknown summarizer \"abstractive\"; known: extractive, llm");
}

TEST(SummarizerRegistryTest, WithoutANameTheUrlDecidesAsBefore) {
  SummarizerConfig config;
  EXPECT_EQ(SummarizerName(config), "extractive");
  EXPECT_EQ(DescribeSummarizer(config), "built-in extractive");
  config.llm.base_url = "http://127.0.0.1:9/v1";
  EXPECT_EQ(SummarizerName(config), "llm");
  config.name = "extractive";
  EXPECT_EQ(SummarizerName(config), "extractive");
}

TEST(SummarizerRegistryTest, MakesTheBuiltInOnesByName) {
  FakeClock clock;
  SummarizerConfig config;
  absl::StatusOr<std::unique_ptr<Summarizer>> extractive = NewSummarizer(config, &clock);
  ASSERT_TRUE(extractive.ok()) << extractive.status();
  EXPECT_NE(*extractive, nullptr);
  config.llm.base_url = "http://127.0.0.1:9/v1";
  absl::StatusOr<std::unique_ptr<Summarizer>> llm = NewSummarizer(config, &clock);
  ASSERT_TRUE(llm.ok()) << llm.status();
  EXPECT_NE(*llm, nullptr);
}

TEST(SummarizerRegistryTest, TheLlmSummarizerNeedsAnApiRoot) {
  FakeClock clock;
  SummarizerConfig config;
  config.name = "llm";
  EXPECT_EQ(NewSummarizer(config, &clock).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SummarizerRegistryTest, ARegisteredSummarizerIsMadeAndDescribedByName) {
  FakeClock clock;
  const SummarizerRegistry registry = WithFixed();
  EXPECT_EQ(registry.Names(), std::vector<std::string>{"fixed"});
  SummarizerConfig config;
  config.name = "fixed";
  absl::StatusOr<std::unique_ptr<Summarizer>> s = NewSummarizer(config, &clock, registry);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<SummaryResult> r = (*s)->Summarize(SummaryRequest{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "fixed");
  EXPECT_EQ(DescribeSummarizer(config, registry), "always the same");
  config.name = "extractive";
  EXPECT_EQ(NewSummarizer(config, &clock, registry).status().message(),
            "unknown summarizer \"extractive\"; known: fixed");
}

}  // namespace
}  // namespace convstate
