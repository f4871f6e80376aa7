#include "services/compaction/summarizers/llm_summarizer.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <vector>


#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/log.h"
#include "services/common/utf8.h"
#include "services/compaction/summarizers/circuit_breaker.h"
#include "services/compaction/summarizers/llm_apis.h"

namespace convstate {
namespace {

using llm::Adapter;
using llm::Answer;
using llm::Reading;
using llm::ErrorKind;

// ---------------------------------------------------------------------------
// HTTP.

struct HttpResult {
  // 0 when the request did not complete (transport error or timeout).
  long status = 0;
  // The caller went away and the transfer was stopped.
  bool cancelled = false;
  // The body passed max_response_bytes and the transfer was stopped.
  bool too_large = false;
  std::string body;
  bool timed_out = false;
  std::string transport_error;
};

struct BodySink {
  std::string* body;
  size_t limit;
  bool* too_large;
};

size_t Collect(char* data, size_t size, size_t count, void* out) {
  auto* sink = static_cast<BodySink*>(out);
  const size_t n = size * count;
  if (sink->body->size() + n > sink->limit) {
    *sink->too_large = true;
    return 0;  // Stops the transfer (CURLE_WRITE_ERROR).
  }
  sink->body->append(data, n);
  return n;
}

class LlmSummarizer final : public Summarizer {
 public:
  LlmSummarizer(LlmSummarizerOptions options, std::unique_ptr<Summarizer> fallback,
                const Clock* clock)
      : options_(std::move(options)),
        openai_(llm::NewOpenAiChat()),
        anthropic_(llm::NewAnthropicMessages(options_.anthropic_version)),
        fallback_(std::move(fallback)),
        clock_(clock),
        breaker_(options_.failure_threshold, options_.open_for, clock) {
    // server.address and server.port of the client spans, from base_url.
    absl::string_view rest = options_.base_url;
    if (const size_t scheme = rest.find("://"); scheme != absl::string_view::npos) {
      rest.remove_prefix(scheme + 3);
    }
    rest = rest.substr(0, rest.find('/'));
    const size_t colon = rest.rfind(':');
    if (colon != absl::string_view::npos && rest.find(']', colon) == absl::string_view::npos) {
      server_address_ = std::string(rest.substr(0, colon));
      int64_t port = 0;
      if (absl::SimpleAtoi(rest.substr(colon + 1), &port)) server_port_ = port;
    } else {
      server_address_ = std::string(rest);
      server_port_ = absl::StartsWith(options_.base_url, "https://") ? 443 : 80;
    }
  }

  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    if (!breaker_.Allow()) {
      if (fallback_ != nullptr) return fallback_->Summarize(req);
      return absl::UnavailableError("summarizer circuit is open after repeated failures");
    }
    const Adapter& api = AdapterFor(req);
    const absl::Time start = clock_->Now();
    absl::Status last = absl::UnavailableError("not attempted");
    int64_t limit = req.max_tokens;
    bool tightened = false;
    // Only the backend's own failures count against it: a caller whose
    // deadline is shorter than the summarizer's timeout says nothing about
    // the backend's health.
    bool backend_failed = false;
    for (int attempt = 0; attempt <= options_.max_retries;) {
      if (req.cancelled && req.cancelled()) {
        return absl::CancelledError("the caller went away before the summarizer answered");
      }
      const absl::Duration left = req.deadline - clock_->Now();
      const absl::Duration timeout = std::min(options_.timeout, left);
      if (timeout <= absl::ZeroDuration()) {
        last = absl::DeadlineExceededError("deadline passed before the summarizer answered");
        break;
      }
      const std::string model = req.model.empty() ? options_.default_model : req.model;
      telemetry::Span span =
          telemetry::StartSpan(absl::StrCat("chat ", model), telemetry::SpanKind::kClient);
      span.SetAttribute("gen_ai.operation.name", "chat");
      span.SetAttribute("gen_ai.provider.name", api.provider());
      span.SetAttribute("gen_ai.request.model", model);
      span.SetAttribute("gen_ai.request.max_tokens", limit);
      span.SetAttribute("server.address", server_address_);
      if (server_port_ > 0) span.SetAttribute("server.port", server_port_);
      const absl::Time sent = absl::Now();
      const HttpResult http = Post(api, api.Body(req, model, limit, UserMessage(req)), timeout,
                                   req.cancelled, span.context());
      const Reading reading = http.status == 200 ? api.Read(http.body) : Reading();
      const std::string error_type =
          http.cancelled                                ? "cancelled"
          : http.too_large                              ? "response_too_large"
          : http.timed_out                              ? "timeout"
          : http.status == 0                            ? "unreachable"
          : http.status != 200                          ? absl::StrCat(http.status)
          : reading.kind == Reading::Kind::kMalformed   ? "invalid_response"
          : reading.kind == Reading::Kind::kRefused     ? "refusal"
                                                        : "";
      if (http.status != 0) span.SetAttribute("http.response.status_code", int64_t{http.status});
      if (!error_type.empty()) {
        span.SetAttribute("error.type", error_type);
        span.SetError(absl::StrCat("summarizer call failed: ", error_type));
      }
      RecordCall(api, model, error_type, absl::Now() - sent);
      if (http.cancelled) {
        return absl::CancelledError("the caller went away before the summarizer answered");
      }
      if (http.status == 200 && reading.kind == Reading::Kind::kRefused) {
        // The backend is well; this content will not be summarized by it.
        breaker_.RecordSuccess();
        ShowCircuit();
        if (fallback_ == nullptr) {
          return absl::FailedPreconditionError(absl::StrCat("summarizer: ", reading.problem));
        }
        absl::StatusOr<SummaryResult> r = fallback_->Summarize(req);
        if (r.ok()) r->fallback_reason = reading.problem;
        return r;
      }
      if (http.status == 200 && reading.kind == Reading::Kind::kOk) {
        SummaryResult parsed = ResultOf(reading.answer, model);
        span.SetAttribute("gen_ai.response.model", parsed.model);
        span.SetAttribute("gen_ai.usage.input_tokens", parsed.tokens_in);
        span.SetAttribute("gen_ai.usage.output_tokens", parsed.tokens_out);
        RecordTokens(api, model, parsed.tokens_in, parsed.tokens_out);
        if (req.tokenizer != nullptr && req.tokenizer->CountTokens(parsed.text) > req.max_tokens &&
            !tightened) {
          // Too long: ask once more for less.
          tightened = true;
          limit = std::max<int64_t>(16, req.max_tokens * 6 / 10);
          continue;
        }
        breaker_.RecordSuccess();
        ShowCircuit();
        parsed.latency_ms = absl::ToInt64Milliseconds(clock_->Now() - start);
        return parsed;
      }
      if (http.status == 200) {
        last = absl::UnavailableError(
            absl::StrCat("summarizer answer could not be read: ", reading.problem));
      } else if (http.too_large) {
        last = absl::UnavailableError(absl::StrCat("summarizer answer was larger than ",
                                                   options_.max_response_bytes, " bytes"));
      } else if (http.timed_out) {
        last = absl::DeadlineExceededError(absl::StrCat(
            "summarizer did not answer within ", absl::FormatDuration(timeout)));
      } else if (http.status == 0) {
        last = absl::UnavailableError(absl::StrCat("summarizer unreachable: ", http.transport_error));
      } else {
        const std::string kind = ErrorKind(http.body);
        last = absl::UnavailableError(absl::StrCat("summarizer answered HTTP ", http.status,
                                                   kind.empty() ? "" : absl::StrCat(" (", kind, ")")));
      }
      // Cut short by the caller's deadline: not the backend's fault.
      backend_failed |= !http.timed_out || timeout >= options_.timeout;
      const bool retryable = http.status == 0 || http.status == 200 || http.status == 429 ||
                             http.status >= 500;
      if (!retryable) break;
      if (++attempt > options_.max_retries) break;
      Backoff(attempt, req.deadline);
    }
    if (backend_failed) breaker_.RecordFailure();
    ShowCircuit();
    return last;
  }

 private:
  const Adapter& AdapterFor(const SummaryRequest& req) const {
    LlmApi api = options_.api;
    if (std::optional<LlmApi> named = LlmApiFromName(req.api)) api = *named;
    if (api == LlmApi::kAnthropicMessages) return *anthropic_;
    return *openai_;
  }

  SummaryResult ResultOf(const Answer& answer, const std::string& model) const {
    SummaryResult r;
    // Untrusted text: stored and sent on, so made valid UTF-8 here.
    r.text = ToValidUtf8(answer.text);
    r.model = answer.model.empty() ? model : ToValidUtf8(Utf8Prefix(answer.model, 256));
    r.prompt_version = kLlmPromptVersion;
    r.tokens_in = answer.tokens_in;
    r.tokens_out = answer.tokens_out;
    return r;
  }

  void RecordCall(const Adapter& api, const std::string& model, const std::string& error_type,
                  absl::Duration took) const {
    if (options_.telemetry == nullptr) return;
    telemetry::Labels labels = {{"gen_ai.operation.name", "chat"},
                                {"gen_ai.provider.name", api.provider()},
                                {"gen_ai.request.model", model}};
    if (!error_type.empty()) labels.emplace_back("error.type", error_type);
    options_.telemetry->instruments().llm_duration->Record(absl::ToDoubleSeconds(took), labels);
  }

  void RecordTokens(const Adapter& api, const std::string& model, int64_t in, int64_t out) const {
    if (options_.telemetry == nullptr) return;
    for (const auto& [type, n] : {std::pair<const char*, int64_t>{"input", in}, {"output", out}}) {
      options_.telemetry->instruments().llm_tokens->Record(
          static_cast<double>(n), {{"gen_ai.operation.name", "chat"},
                                   {"gen_ai.provider.name", api.provider()},
                                   {"gen_ai.request.model", model},
                                   {"gen_ai.token.type", type}});
    }
  }

  void ShowCircuit() {
    if (options_.telemetry == nullptr) return;
    options_.telemetry->instruments().summarizer_circuit_open->Set(
        breaker_.state() == CircuitBreaker::State::kClosed ? 0 : 1);
  }

  // The user's turn of every request: the caller's instructions, what the
  // view keeps verbatim anyway, then the transcript.
  static std::string UserMessage(const SummaryRequest& req) {
    std::string user;
    if (!req.instructions.empty()) {
      absl::StrAppend(&user, "Additional instructions: ", req.instructions, "\n\n");
    }
    if (!req.preserved.empty()) {
      // The view keeps these verbatim whatever the summary says: the model
      // need not repeat them and should spend its words on the rest.
      absl::StrAppend(&user,
                      "Already preserved verbatim elsewhere in the context (facts and the "
                      "user's standing instructions; do not repeat them, and never contradict "
                      "them):\n");
      for (const std::string& p : req.preserved) absl::StrAppend(&user, "- ", p, "\n");
      absl::StrAppend(&user, "\n");
    }
    absl::StrAppend(&user, "Transcript:\n", req.transcript);
    return user;
  }

  // `cancelled`, if set, is polled while the request is in flight; the
  // transfer stops as soon as it returns true.
  HttpResult Post(const Adapter& api, const std::string& body, absl::Duration timeout,
                  const std::function<bool()>& cancelled,
                  const telemetry::SpanContext& trace) const {
    HttpResult result;
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      result.transport_error = "curl_easy_init failed";
      return result;
    }
    const std::string url = absl::StrCat(options_.base_url, api.path());
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    for (const std::string& h : api.Headers(options_.api_key)) {
      headers = curl_slist_append(headers, h.c_str());
    }
    // The trace goes on to the LLM's side (W3C trace context).
    if (trace.valid()) {
      headers =
          curl_slist_append(headers, absl::StrCat("traceparent: ", FormatTraceparent(trace)).c_str());
    }
    BodySink sink{&result.body, static_cast<size_t>(std::max<int64_t>(options_.max_response_bytes, 1)),
                  &result.too_large};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     std::max<long>(1, static_cast<long>(absl::ToInt64Milliseconds(timeout))));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (cancelled) {
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &cancelled);
      curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION,
                       +[](void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
                         return (*static_cast<const std::function<bool()>*>(data))() ? 1 : 0;
                       });
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    const CURLcode code = curl_easy_perform(curl);
    if (code == CURLE_OK) {
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
    } else {
      result.timed_out = code == CURLE_OPERATION_TIMEDOUT;
      result.cancelled = code == CURLE_ABORTED_BY_CALLBACK;
      result.transport_error = curl_easy_strerror(code);
      result.body.clear();
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return result;
  }

  void Backoff(int attempt, absl::Time deadline) const {
    thread_local std::mt19937 rng{std::random_device{}()};
    const double jitter = std::uniform_real_distribution<double>(0.75, 1.25)(rng);
    absl::Duration wait = options_.backoff * (1 << std::min(attempt - 1, 10)) * jitter;
    wait = std::min(wait, deadline - clock_->Now());
    if (wait > absl::ZeroDuration()) clock_->SleepFor(wait);
  }

  const LlmSummarizerOptions options_;
  const std::unique_ptr<Adapter> openai_;
  const std::unique_ptr<Adapter> anthropic_;
  std::string server_address_;
  int64_t server_port_ = 0;
  const std::unique_ptr<Summarizer> fallback_;
  const Clock* const clock_;
  CircuitBreaker breaker_;
};

}  // namespace

absl::string_view LlmApiName(LlmApi api) {
  switch (api) {
    case LlmApi::kOpenAiChat: return "openai_chat";
    case LlmApi::kAnthropicMessages: return "anthropic_messages";
  }
  return "openai_chat";
}

std::optional<LlmApi> LlmApiFromName(absl::string_view name) {
  if (name == "openai_chat") return LlmApi::kOpenAiChat;
  if (name == "anthropic_messages") return LlmApi::kAnthropicMessages;
  return std::nullopt;
}


absl::Duration WorstCaseDuration(const LlmSummarizerOptions& o) {
  absl::Duration total = o.timeout * (o.max_retries + 2);
  for (int k = 1; k <= o.max_retries; ++k) total += o.backoff * (1 << k) * 1.25;
  return total;
}

std::unique_ptr<Summarizer> NewLlmSummarizer(LlmSummarizerOptions options,
                                             std::unique_ptr<Summarizer> fallback,
                                             const Clock* clock) {
  static std::once_flag curl_once;
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::make_unique<LlmSummarizer>(std::move(options), std::move(fallback), clock);
}

}  // namespace convstate
