#include "services/compaction/summarizers/factory.h"

#include "absl/strings/str_cat.h"
#include "services/compaction/summarizers/extractive.h"

namespace convstate {

std::unique_ptr<Summarizer> NewSummarizer(const SummarizerConfig& config, const Clock* clock) {
  if (config.llm.base_url.empty()) return NewExtractiveSummarizer();
  return NewLlmSummarizer(config.llm, config.fallback ? NewExtractiveSummarizer() : nullptr,
                          clock);
}

std::string DescribeSummarizer(const SummarizerConfig& config) {
  if (config.llm.base_url.empty()) return "built-in extractive";
  return absl::StrCat(
      LlmApiName(config.llm.api), " at ", config.llm.base_url, ", model ",
      config.llm.default_model.empty() ? "(from profiles)" : config.llm.default_model,
      ", API key ", config.llm.api_key.empty() ? "not set" : "set",
      config.fallback ? ", extractive while its circuit is open" : "");
}

}  // namespace convstate
