#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/common/clock.h"
#include "services/compaction/summarizers/llm_summarizer.h"
#include "services/compaction/summarizers/summarizer.h"

namespace convstate {

// Which summarizer the server uses, as configured (services/server/config).
struct SummarizerConfig {
  // Its name in the registry (BuiltInSummarizers); empty: "llm" when
  // llm.base_url is set, else "extractive".
  std::string name;
  // The LLM summarizer's options.
  LlmSummarizerOptions llm;
  // With an LLM summarizer: the extractive one answers while its circuit
  // is open and when the model refuses.
  bool fallback = true;
};

// A summarizer as the registry knows it: its name, how it is made from the
// configuration (INVALID_ARGUMENT if the configuration does not let it
// work), and one line for the start-up log that never shows a secret.
struct SummarizerEntry {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<Summarizer>>(const SummarizerConfig& config,
                                                            const Clock* clock)>
      make;
  std::function<std::string(const SummarizerConfig& config)> describe;
};

// Summarizers by name.
class SummarizerRegistry {
 public:
  explicit SummarizerRegistry(std::vector<SummarizerEntry> entries);

  // The entry called `name`; INVALID_ARGUMENT naming the registered ones if
  // there is none.
  absl::StatusOr<const SummarizerEntry*> Find(absl::string_view name) const;
  // The registered names, in order.
  std::vector<std::string> Names() const;

 private:
  std::vector<SummarizerEntry> entries_;
};

// The summarizers convstate has. A new one is its own file and one entry
// here (factory.cc), plus its flags in services/server/config.cc if it
// takes any.
SummarizerRegistry BuiltInSummarizers();

// The name `config` asks for: SummarizerConfig::name, or its default.
std::string SummarizerName(const SummarizerConfig& config);

// The summarizer `config` names in `registry`. INVALID_ARGUMENT for a name
// the registry does not have, or a configuration the summarizer cannot
// work with. `clock` times retries and circuits; it must outlive the
// summarizer.
absl::StatusOr<std::unique_ptr<Summarizer>> NewSummarizer(
    const SummarizerConfig& config, const Clock* clock,
    const SummarizerRegistry& registry = BuiltInSummarizers());

// One line for the start-up log: which summarizer, where, with which
// model; never the API key.
std::string DescribeSummarizer(const SummarizerConfig& config,
                               const SummarizerRegistry& registry = BuiltInSummarizers());

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_FACTORY_H_
