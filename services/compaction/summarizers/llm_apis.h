#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_APIS_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_APIS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/compaction/summarizers/summarizer.h"

// The HTTP APIs an LLM summarizer speaks, one adapter each: the request it
// sends and how it reads the answer, trusting nothing in it. A new API is
// an adapter here and its name in LlmApi.
namespace convstate::llm {

struct Answer {
  std::string text;
  std::string model;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
};

// How an answer with HTTP 200 was read.
struct Reading {
  enum class Kind {
    kOk,
    // Not the API's answer: wrong shape, not JSON, no text.
    kMalformed,
    // The model declined to write the summary.
    kRefused,
  };
  Kind kind = Kind::kMalformed;
  Answer answer;
  // For kMalformed and kRefused: what was wrong, naming no content.
  std::string problem;
};

// One API's request and answer shapes.
class Adapter {
 public:
  virtual ~Adapter() = default;
  // gen_ai.provider.name.
  virtual const char* provider() const = 0;
  // Appended to the base URL.
  virtual const char* path() const = 0;
  // Headers besides Content-Type (the key, versions).
  virtual std::vector<std::string> Headers(const std::string& api_key) const = 0;
  virtual std::string Body(const SummaryRequest& req, const std::string& model, int64_t limit,
                           const std::string& user) const = 0;
  virtual Reading Read(const std::string& body) const = 0;
};

// OpenAI Chat Completions (POST <base>/chat/completions).
std::unique_ptr<Adapter> NewOpenAiChat();
// Anthropic Messages (POST <base>/messages), with `version` as
// anthropic-version.
std::unique_ptr<Adapter> NewAnthropicMessages(std::string version);

// What an error body says went wrong, as a short token safe to log and
// store ("rate_limit_error", "overloaded_error"): error.type, else
// error.code; empty when the body says nothing readable.
std::string ErrorKind(const std::string& body);

// The system prompt sent with every request, for a token limit.
std::string LlmSystemPrompt(int64_t max_tokens);

}  // namespace convstate::llm

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_LLM_APIS_H_
