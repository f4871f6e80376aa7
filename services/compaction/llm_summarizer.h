#ifndef CONVSTATE_SERVICES_COMPACTION_LLM_SUMMARIZER_H_
#define CONVSTATE_SERVICES_COMPACTION_LLM_SUMMARIZER_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "services/common/clock.h"
#include "services/compaction/summarizer.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

struct LlmSummarizerOptions {
  // An OpenAI-compatible API root, e.g. "https://api.openai.com/v1" or
  // "http://127.0.0.1:8000/v1" (vLLM, llama.cpp server, Ollama, LiteLLM);
  // requests go to <base_url>/chat/completions.
  std::string base_url;
  // Used when the profile names no summarizer model.
  std::string default_model;
  // Sent as a bearer token; never logged. Empty: no Authorization header.
  std::string api_key;
  // Per attempt; the call's deadline bounds it too.
  absl::Duration timeout = absl::Seconds(12);
  // Retries after the first attempt, for 429, 5xx and transport errors.
  int max_retries = 2;
  // Before retry k: backoff * 2^k, with +-25% jitter.
  absl::Duration backoff = absl::Milliseconds(200);
  // Consecutive failed calls that open the circuit, and for how long.
  int failure_threshold = 3;
  absl::Duration open_for = absl::Seconds(30);
  // Where calls are timed and counted (gen_ai.client.*) and the circuit's
  // state shown; null: nowhere. Each HTTP attempt is a client span, the
  // child of the calling thread's current span, whose traceparent the
  // request carries.
  telemetry::Telemetry* telemetry = nullptr;
};

// The longest one Summarize call can take: every attempt timing out (the
// retries, and the one tighter request an oversized answer earns) plus the
// backoffs at their largest jitter.
absl::Duration WorstCaseDuration(const LlmSummarizerOptions& options);

// The prompt version stored with every chunk this summarizer writes.
inline constexpr char kLlmPromptVersion[] = "llm-v1";

// Summarizes through an LLM. While the circuit is open the call goes to
// `fallback` (the extractive summarizer) if there is one, else it is
// UNAVAILABLE. A summary longer than asked is asked for once more with a
// tighter limit; if it is still too long it is returned as is (the caller
// cuts it and records that). `clock` times the breaker and the backoff.
std::unique_ptr<Summarizer> NewLlmSummarizer(LlmSummarizerOptions options,
                                             std::unique_ptr<Summarizer> fallback,
                                             const Clock* clock);

// The system prompt sent with every request, for a token limit.
std::string LlmSystemPrompt(int64_t max_tokens);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_LLM_SUMMARIZER_H_
