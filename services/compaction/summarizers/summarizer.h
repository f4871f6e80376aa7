#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_SUMMARIZER_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_SUMMARIZER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/tokenizer/tokens.h"
#include "services/core/types.h"

namespace convstate {

struct SummaryRequest {
  // The items to summarize, rendered with attribution (RenderTranscript),
  // for summarizers that read prose (an LLM).
  std::string transcript;
  // The same items, for the built-in summarizer, which works on them
  // directly. `tool_names` names results that omit their tool.
  std::vector<Item> items;
  std::map<std::string, std::string> tool_names;
  // For a fold: the attributed lines of the chunks being merged, in order.
  // Set instead of `items`.
  std::vector<SummaryLine> merge;
  // Facts and standing instructions the view already shows verbatim (the
  // ledger); a summary spends its words on the rest.
  std::vector<std::string> preserved;
  // The summary must fit in this many tokens of the conversation's model.
  int64_t max_tokens = 0;
  // Optional, from Compact: e.g. "focus on the decisions".
  std::string instructions;
  // The model to ask, from the profile; empty for the summarizer's default.
  std::string model;
  // For LLM summarizers, from the profile: the API to speak ("openai_chat",
  // "anthropic_messages"; empty: the summarizer's own), and whether the
  // model takes its limit as max_completion_tokens with no temperature
  // (OpenAI's reasoning models) instead of max_tokens.
  std::string api;
  bool max_completion_tokens = false;
  // Counts tokens the way the conversation's model does.
  const Tokenizer* tokenizer = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
  // True once whoever asked has gone away: a summarizer that waits on a
  // backend stops then (CANCELLED). Unset: never.
  std::function<bool()> cancelled;
};

struct SummaryResult {
  std::string text;
  // The attributed lines the text was rendered from (built-in summarizer
  // only): what a later fold merges.
  std::vector<SummaryLine> lines;
  std::string model;
  std::string prompt_version;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t latency_ms = 0;
  // Set when the summarizer asked could not write this summary and a
  // fallback did (e.g. "the model refused"): the audit row says so.
  std::string fallback_reason;
};

// Writes summaries. Implementations are thread-safe. Errors: UNAVAILABLE
// when the backend cannot be reached or its circuit is open;
// DEADLINE_EXCEEDED when it did not answer in time.
class Summarizer {
 public:
  virtual ~Summarizer() = default;
  virtual absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& request) = 0;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_SUMMARIZER_H_
