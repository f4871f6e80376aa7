#ifndef CONVSTATE_TESTS_FAKE_LLM_H_
#define CONVSTATE_TESTS_FAKE_LLM_H_

// A scriptable stand-in for an LLM API on loopback only: OpenAI Chat
// Completions (POST .../chat/completions) and Anthropic Messages (POST
// .../messages), each answered in its own shapes (bodies, error bodies,
// usage). Tests tell it to answer, delay, fail with an HTTP status, hang,
// refuse, return an oversized summary, or misbehave as a broken backend or
// proxy does: any raw body, a body that drips in, a body of any size.

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace convstate::testing {

struct LlmBehavior {
  enum class Kind {
    // 200 with a summary: `text`, or one made from the request.
    kAnswer,
    // `status` (429, 500, ...) with an error body.
    kFail,
    // Never answers (until the client gives up or the server stops).
    kHang,
    // 200 with a summary far longer than asked for.
    kOversize,
    // 200 in which the model declines (OpenAI: content null and a
    // refusal; Anthropic: stop_reason "refusal").
    kRefuse,
    // `status` with `text` as the whole body, sent as `content_type`.
    kRaw,
    // 200 announcing a body of `bytes` that comes one byte every `delay`
    // (after the headers), until the client gives up.
    kDrip,
    // 200 with a body of `bytes` bytes (not JSON), sent as fast as the
    // client reads.
    kHuge,
  };
  Kind kind = Kind::kAnswer;
  int status = 500;
  absl::Duration delay = absl::ZeroDuration();
  std::string text;
  std::string content_type = "application/json";
  int64_t bytes = 0;
};

class FakeLlm {
 public:
  // Listens on 127.0.0.1 on a free port.
  static absl::StatusOr<std::unique_ptr<FakeLlm>> Start();
  ~FakeLlm();

  int port() const { return port_; }
  // "http://127.0.0.1:PORT/v1"
  std::string base_url() const;

  // What to do when the script is empty.
  void SetDefault(LlmBehavior behavior);
  // Behaviors for the next requests, one each, before the default.
  void Push(LlmBehavior behavior);

  int requests() const;
  std::string last_body() const;
  std::string last_authorization() const;
  // The request line and headers of the last model request.
  std::string last_head() const;

  // Applies a control request (the JSON the program's /control takes):
  // {"default": B, "script": [B, ...]} with B = {"kind": "answer"|"fail"|
  // "hang"|"oversize"|"refuse"|"raw"|"drip"|"huge", "status": N,
  // "delay_ms": N, "text": "...", "content_type": "...", "bytes": N}.
  absl::Status Control(const std::string& json);
  // {"requests": N, "last_authorization": "...", "last_body": "..."}
  std::string StatsJson() const;

 private:
  FakeLlm() = default;
  void Serve();
  void Handle(int fd);
  LlmBehavior Next();

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(mu_);
  std::deque<LlmBehavior> script_ ABSL_GUARDED_BY(mu_);
  LlmBehavior default_ ABSL_GUARDED_BY(mu_);
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_body_ ABSL_GUARDED_BY(mu_);
  std::string last_authorization_ ABSL_GUARDED_BY(mu_);
  std::string last_head_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_FAKE_LLM_H_
