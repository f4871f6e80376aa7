#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_

#include <memory>
#include <string>

#include "services/common/clock.h"
#include "services/compaction/summarizers/llm_summarizer.h"
#include "services/compaction/summarizers/summarizer.h"

namespace convstate {

// Which summarizer the server uses, as configured (services/server/config).
// A new summarizer is its own file and a branch in NewSummarizer.
struct SummarizerConfig {
  // An LLM summarizer when llm.base_url is set.
  LlmSummarizerOptions llm;
  // With an LLM summarizer: the extractive one answers while its circuit
  // is open and when the model refuses.
  bool fallback = true;
};

// The summarizer `config` asks for; the built-in extractive one when it
// names no other. `clock` times retries and circuits; it must outlive the
// summarizer.
std::unique_ptr<Summarizer> NewSummarizer(const SummarizerConfig& config, const Clock* clock);

// One line for the start-up log: which summarizer, where, with which
// model; never the API key.
std::string DescribeSummarizer(const SummarizerConfig& config);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_
