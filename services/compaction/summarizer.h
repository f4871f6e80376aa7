#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZER_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/compaction/tokens.h"
#include "services/core/types.h"

namespace convstate {

struct SummaryRequest {
  // The items to summarize, rendered with attribution (RenderTranscript).
  std::string transcript;
  // The summary must fit in this many tokens of the conversation's model.
  int64_t max_tokens = 0;
  // Optional, from Compact: e.g. "focus on the decisions".
  std::string instructions;
  // The model to ask, from the profile; empty for the summarizer's default.
  std::string model;
  // Counts tokens the way the conversation's model does.
  const Tokenizer* tokenizer = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
};

struct SummaryResult {
  std::string text;
  std::string model;
  std::string prompt_version;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t latency_ms = 0;
};

// Writes summaries. Implementations are thread-safe. Errors: UNAVAILABLE
// when the backend cannot be reached or its circuit is open;
// DEADLINE_EXCEEDED when it did not answer in time.
class Summarizer {
 public:
  virtual ~Summarizer() = default;
  virtual absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& request) = 0;
};

// Renders `items` for a summarizer, each line attributed: "User: ...",
// "Assistant: ...", "Assistant called tool X (call c) with: ...", "Tool X
// (call c) returned: ...", "Assistant (reasoning): ...". Very long tool
// outputs keep their head and tail. `tool_names` names results that omit it.
std::string RenderTranscript(const std::vector<Item>& items,
                             const std::map<std::string, std::string>& tool_names);

// Renders chunks being folded, oldest first.
std::string RenderChunks(const std::vector<SummaryChunk>& chunks);

// The built-in summarizer: deterministic, no network. Keeps, within the
// budget, the sentences that carry what a conversation must not lose: the
// user's goals, errors, commands and their outcomes, paths and identifiers,
// numbers, decisions and open questions, each with who said it, in their
// original order.
std::unique_ptr<Summarizer> NewExtractiveSummarizer();

// Cuts `text` to at most `max_tokens` tokens, at a line or word boundary.
std::string CutToTokens(const std::string& text, int64_t max_tokens, const Tokenizer& tokenizer);

inline constexpr char kExtractiveModel[] = "convstate-extractive";
inline constexpr char kExtractivePromptVersion[] = "extractive-v1";

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZER_H_
