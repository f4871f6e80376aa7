#include "services/compaction/summarizers/factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/status_macros.h"
#include "services/compaction/summarizers/extractive.h"

namespace convstate {
namespace {

absl::StatusOr<std::unique_ptr<Summarizer>> MakeLlm(const SummarizerConfig& config,
                                                   const Clock* clock) {
  if (config.llm.base_url.empty()) {
    return absl::InvalidArgumentError("the llm summarizer needs the API root to call (llm.base_url)");
  }
  return NewLlmSummarizer(config.llm, config.fallback ? NewExtractiveSummarizer() : nullptr,
                          clock);
}

std::string DescribeLlm(const SummarizerConfig& config) {
  return absl::StrCat(
      LlmApiName(config.llm.api), " at ", config.llm.base_url, ", model ",
      config.llm.default_model.empty() ? "(from profiles)" : config.llm.default_model,
      ", API key ", config.llm.api_key.empty() ? "not set" : "set",
      config.fallback ? ", extractive while its circuit is open" : "");
}

}  // namespace

SummarizerRegistry::SummarizerRegistry(std::vector<SummarizerEntry> entries)
    : entries_(std::move(entries)) {}

absl::StatusOr<const SummarizerEntry*> SummarizerRegistry::Find(absl::string_view name) const {
  for (const SummarizerEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown summarizer \"", name,
                                                 "\"; known: ", absl::StrJoin(Names(), ", ")));
}

std::vector<std::string> SummarizerRegistry::Names() const {
  std::vector<std::string> names;
  for (const SummarizerEntry& e : entries_) names.push_back(e.name);
  return names;
}

SummarizerRegistry BuiltInSummarizers() {
  return SummarizerRegistry({
      {"extractive",
       [](const SummarizerConfig&, const Clock*) -> absl::StatusOr<std::unique_ptr<Summarizer>> {
         return NewExtractiveSummarizer();
       },
       [](const SummarizerConfig&) -> std::string { return "built-in extractive"; }},
      {"llm", &MakeLlm, &DescribeLlm},
  });
}

std::string SummarizerName(const SummarizerConfig& config) {
  if (!config.name.empty()) return config.name;
  return config.llm.base_url.empty() ? "extractive" : "llm";
}

absl::StatusOr<std::unique_ptr<Summarizer>> NewSummarizer(const SummarizerConfig& config,
                                                          const Clock* clock,
                                                          const SummarizerRegistry& registry) {
  ASSIGN_OR_RETURN(const SummarizerEntry* entry, registry.Find(SummarizerName(config)));
  return entry->make(config, clock);
}

std::string DescribeSummarizer(const SummarizerConfig& config,
                               const SummarizerRegistry& registry) {
  absl::StatusOr<const SummarizerEntry*> entry = registry.Find(SummarizerName(config));
  if (!entry.ok()) return std::string(entry.status().message());
  return (*entry)->describe(config);
}

}  // namespace convstate
