#include "tests/fake_llm.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/net/http_server.h"

namespace convstate::testing {

using net::HttpRequest;
using net::ListenOnLoopback;
using net::ReadHttpRequest;
using net::SendAll;
namespace {

using Json = nlohmann::json;

std::string Head(int status, const std::string& content_type, int64_t length) {
  const char* reason = status == 200 ? "OK" : status == 429 ? "Too Many Requests" : "Error";
  return absl::StrCat("HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", length, "\r\nConnection: close\r\n\r\n");
}

std::string Response(int status, const std::string& body,
                     const std::string& content_type = "application/json") {
  return absl::StrCat(Head(status, content_type, static_cast<int64_t>(body.size())), body);
}

// True once the peer has closed its side (it gave up on the answer).
bool PeerGone(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char probe;
  return ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

LlmBehavior FromJson(const Json& j) {
  LlmBehavior b;
  const std::string kind = j.value("kind", "answer");
  b.kind = kind == "fail"       ? LlmBehavior::Kind::kFail
           : kind == "hang"     ? LlmBehavior::Kind::kHang
           : kind == "oversize" ? LlmBehavior::Kind::kOversize
           : kind == "refuse"   ? LlmBehavior::Kind::kRefuse
           : kind == "raw"      ? LlmBehavior::Kind::kRaw
           : kind == "drip"     ? LlmBehavior::Kind::kDrip
           : kind == "huge"     ? LlmBehavior::Kind::kHuge
                                : LlmBehavior::Kind::kAnswer;
  b.status = j.value("status", kind == "raw" ? 200 : 500);
  b.delay = absl::Milliseconds(j.value("delay_ms", 0));
  b.text = j.value("text", "");
  b.content_type = j.value("content_type", "application/json");
  b.bytes = j.value("bytes", int64_t{0});
  return b;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeLlm>> FakeLlm::Start() {
  std::unique_ptr<FakeLlm> llm(new FakeLlm());
  absl::StatusOr<int> fd = ListenOnLoopback(0, &llm->port_);
  if (!fd.ok()) return fd.status();
  llm->listen_fd_ = *fd;
  llm->acceptor_ = std::thread([raw = llm.get()] { raw->Serve(); });
  return llm;
}

FakeLlm::~FakeLlm() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> handlers;
  {
    absl::MutexLock lock(&mu_);
    handlers.swap(handlers_);
  }
  for (std::thread& t : handlers) t.join();
}

std::string FakeLlm::base_url() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1"); }

void FakeLlm::SetDefault(LlmBehavior behavior) {
  absl::MutexLock lock(&mu_);
  default_ = std::move(behavior);
}

void FakeLlm::Push(LlmBehavior behavior) {
  absl::MutexLock lock(&mu_);
  script_.push_back(std::move(behavior));
}

int FakeLlm::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::string FakeLlm::last_body() const {
  absl::MutexLock lock(&mu_);
  return last_body_;
}

std::string FakeLlm::last_authorization() const {
  absl::MutexLock lock(&mu_);
  return last_authorization_;
}

std::string FakeLlm::last_head() const {
  absl::MutexLock lock(&mu_);
  return last_head_;
}

absl::Status FakeLlm::Control(const std::string& json) {
  Json j = Json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  absl::MutexLock lock(&mu_);
  if (j.contains("default")) default_ = FromJson(j["default"]);
  if (j.contains("script")) {
    script_.clear();
    for (const Json& b : j["script"]) script_.push_back(FromJson(b));
  }
  return absl::OkStatus();
}

std::string FakeLlm::StatsJson() const {
  absl::MutexLock lock(&mu_);
  return Json{{"requests", requests_},
              {"last_authorization", last_authorization_},
              {"last_body", last_body_},
              {"last_head", last_head_}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

LlmBehavior FakeLlm::Next() {
  absl::MutexLock lock(&mu_);
  if (script_.empty()) return default_;
  LlmBehavior b = script_.front();
  script_.pop_front();
  return b;
}

void FakeLlm::Serve() {
  while (!stopping_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    handlers_.emplace_back([this, fd] { Handle(fd); });
  }
}

void FakeLlm::Handle(int fd) {
  const std::optional<HttpRequest> http = ReadHttpRequest(fd, stopping_);
  if (!http.has_value()) {
    ::close(fd);
    return;
  }
  const std::string& head = http->head;
  const std::string& body = http->body;
  const std::string& request_line = http->request_line;
  if (absl::StartsWith(request_line, "POST /control")) {
    absl::Status s = Control(body);
    SendAll(fd, Response(s.ok() ? 200 : 400, s.ok() ? "{}" : Json{{"error", s.message()}}.dump()));
    ::close(fd);
    return;
  }
  if (absl::StartsWith(request_line, "GET /stats")) {
    SendAll(fd, Response(200, StatsJson()));
    ::close(fd);
    return;
  }
  std::string authorization;
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "authorization:")) {
      authorization = std::string(absl::StripAsciiWhitespace(line.substr(14)));
    }
  }
  // Anthropic's Messages API, else OpenAI's Chat Completions.
  const bool anthropic = absl::StrContains(request_line, "/messages ");
  {
    absl::MutexLock lock(&mu_);
    ++requests_;
    last_body_ = body;
    last_authorization_ = authorization;
    last_head_ = head;
  }
  const LlmBehavior b = Next();
  const absl::Time until = absl::Now() + b.delay;
  if (b.kind != LlmBehavior::Kind::kDrip) {
    while (absl::Now() < until && !stopping_) absl::SleepFor(absl::Milliseconds(5));
  }
  if (b.kind == LlmBehavior::Kind::kHang) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!stopping_ && absl::Now() < give_up && !PeerGone(fd)) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ::close(fd);
    return;
  }
  if (b.kind == LlmBehavior::Kind::kFail) {
    const Json error =
        anthropic ? Json{{"type", "error"},
                         {"error", {{"type", b.status == 529 ? "overloaded_error" : "api_error"},
                                    {"message", "scripted failure"}}}}
                  : Json{{"error", {{"message", "scripted failure"},
                                    {"type", b.status == 429 ? "rate_limit_exceeded" : "server_error"}}}};
    SendAll(fd, Response(b.status, error.dump()));
    ::close(fd);
    return;
  }
  if (b.kind == LlmBehavior::Kind::kRaw) {
    SendAll(fd, Response(b.status, b.text, b.content_type));
    ::close(fd);
    return;
  }
  if (b.kind == LlmBehavior::Kind::kDrip || b.kind == LlmBehavior::Kind::kHuge) {
    const int64_t total = std::max<int64_t>(b.bytes, 1);
    SendAll(fd, Head(200, b.content_type, total));
    const std::string block(b.kind == LlmBehavior::Kind::kDrip ? 1 : 65536, 'x');
    const absl::Duration pause =
        b.kind == LlmBehavior::Kind::kDrip ? std::max(b.delay, absl::Milliseconds(1))
                                           : absl::ZeroDuration();
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    for (int64_t sent = 0; sent < total && !stopping_ && absl::Now() < give_up;) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(total - sent, block.size()));
      if (::send(fd, block.data(), n, MSG_NOSIGNAL) <= 0) break;  // The client gave up.
      sent += static_cast<int64_t>(n);
      if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
    }
    ::close(fd);
    return;
  }
  const Json request = Json::parse(body, nullptr, false);
  std::string user;
  std::string model = "fake-model";
  if (request.is_object()) {
    if (request.contains("model") && request["model"].is_string()) model = request["model"];
    if (request.contains("messages") && request["messages"].is_array()) {
      for (const Json& m : request["messages"]) {
        if (m.is_object() && m.value("role", "") == "user" && m.contains("content") &&
            m["content"].is_string()) {
          user = m["content"];
        }
      }
    }
  }
  std::string text = b.text;
  if (b.kind == LlmBehavior::Kind::kOversize) {
    text.clear();
    for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "This summary goes on and on. ");
  } else if (b.kind == LlmBehavior::Kind::kRefuse) {
    text.clear();
  } else if (text.empty()) {
    // A short summary made from the start of the transcript.
    const size_t at = user.find("[#");
    text = absl::StrCat("Fake summary: ",
                        at == std::string::npos ? user.substr(0, 200) : user.substr(at, 200));
  }
  const bool refuse = b.kind == LlmBehavior::Kind::kRefuse;
  Json out;
  if (anthropic) {
    out = {{"id", "msg_fake"},
           {"type", "message"},
           {"role", "assistant"},
           {"model", model},
           {"content", refuse ? Json::array()
                              : Json::array({{{"type", "text"}, {"text", text}}})},
           {"stop_reason", refuse ? "refusal" : "end_turn"},
           {"stop_sequence", nullptr},
           {"usage", {{"input_tokens", body.size() / 4}, {"output_tokens", text.size() / 4}}}};
  } else {
    Json message = {{"role", "assistant"}, {"content", text}};
    if (refuse) {
      message["content"] = nullptr;
      message["refusal"] = "I can't help with that.";
    }
    out = {{"id", "chatcmpl-fake"},
           {"object", "chat.completion"},
           {"model", model},
           {"choices", Json::array({{{"index", 0},
                                     {"message", message},
                                     {"finish_reason", "stop"}}})},
           {"usage",
            {{"prompt_tokens", body.size() / 4},
             {"completion_tokens", text.size() / 4},
             {"total_tokens", body.size() / 4 + text.size() / 4}}}};
  }
  SendAll(fd, Response(200, out.dump(-1, ' ', false, Json::error_handler_t::replace)));
  ::close(fd);
}

}  // namespace convstate::testing
