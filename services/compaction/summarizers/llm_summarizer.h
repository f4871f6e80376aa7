#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_SUMMARIZER_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_SUMMARIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/common/clock.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

// The HTTP APIs an LLM summarizer speaks.
enum class LlmApi {
  // OpenAI Chat Completions (POST <base>/chat/completions): OpenAI, vLLM,
  // llama.cpp server, Ollama, LiteLLM, Llama Stack.
  kOpenAiChat,
  // Anthropic Messages (POST <base>/messages, x-api-key and
  // anthropic-version headers).
  kAnthropicMessages,
};

// "openai_chat" or "anthropic_messages".
absl::string_view LlmApiName(LlmApi api);
// The API of a name; nullopt if none is called that.
std::optional<LlmApi> LlmApiFromName(absl::string_view name);

struct LlmSummarizerOptions {
  // The API root, e.g. "https://api.openai.com/v1",
  // "https://api.anthropic.com/v1" or "http://127.0.0.1:8000/v1".
  std::string base_url;
  // Which API it speaks, unless a request names another (a model
  // profile's summarizer.api).
  LlmApi api = LlmApi::kOpenAiChat;
  // Sent with Anthropic requests as anthropic-version.
  std::string anthropic_version = "2023-06-01";
  // Used when the profile names no summarizer model.
  std::string default_model;
  // Sent as a bearer token (OpenAI) or x-api-key (Anthropic); never logged.
  // Empty: no key is sent.
  std::string api_key;
  // Per attempt; the call's deadline bounds it too. A body that drips in
  // slower than that is cut at it.
  absl::Duration timeout = absl::Seconds(12);
  // An answer's body is read up to this many bytes; a larger one is
  // refused as a failed attempt without being read further.
  int64_t max_response_bytes = int64_t{4} << 20;
  // Retries after the first attempt, for 429, 5xx, transport errors and
  // answers that cannot be read.
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

// Summarizes through an LLM. Every answer is read without trusting it: a
// body that is not the API's answer (wrong types at any field, truncated
// or not JSON at all, no choices, an empty text) is a failed attempt, retried
// like a server error and counted against the circuit; the text is made
// valid UTF-8. While the circuit is open the call goes to `fallback` (the
// extractive summarizer) if there is one, else it is UNAVAILABLE. A model
// that refuses to summarize is not retried: the call goes to `fallback`
// with SummaryResult::fallback_reason saying so, or fails with
// FAILED_PRECONDITION. A summary longer than asked is asked for once more
// with a tighter limit; if it is still too long it is returned as is (the
// caller cuts it and records that). `clock` times the breaker and the
// backoff.
std::unique_ptr<Summarizer> NewLlmSummarizer(LlmSummarizerOptions options,
                                             std::unique_ptr<Summarizer> fallback,
                                             const Clock* clock);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_SUMMARIZER_H_
