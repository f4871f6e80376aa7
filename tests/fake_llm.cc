#include "tests/fake_llm.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/http_test_server.h"

namespace convstate::testing {
namespace {

using Json = nlohmann::json;

std::string Response(int status, const std::string& body) {
  const char* reason = status == 200 ? "OK" : status == 429 ? "Too Many Requests" : "Error";
  return absl::StrCat("HTTP/1.1 ", status, " ", reason,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

LlmBehavior FromJson(const Json& j) {
  LlmBehavior b;
  const std::string kind = j.value("kind", "answer");
  b.kind = kind == "fail"       ? LlmBehavior::Kind::kFail
           : kind == "hang"     ? LlmBehavior::Kind::kHang
           : kind == "oversize" ? LlmBehavior::Kind::kOversize
                                : LlmBehavior::Kind::kAnswer;
  b.status = j.value("status", 500);
  b.delay = absl::Milliseconds(j.value("delay_ms", 0));
  b.text = j.value("text", "");
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
              {"last_body", last_body_}}
      .dump();
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
  {
    absl::MutexLock lock(&mu_);
    ++requests_;
    last_body_ = body;
    last_authorization_ = authorization;
  }
  const LlmBehavior b = Next();
  const absl::Time until = absl::Now() + b.delay;
  while (absl::Now() < until && !stopping_) absl::SleepFor(absl::Milliseconds(5));
  if (b.kind == LlmBehavior::Kind::kHang) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!stopping_ && absl::Now() < give_up) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char probe;
        if (::recv(fd, &probe, 1, MSG_PEEK) <= 0) break;  // The client gave up.
      }
    }
    ::close(fd);
    return;
  }
  if (b.kind == LlmBehavior::Kind::kFail) {
    SendAll(fd, Response(b.status, Json{{"error", {{"message", "scripted failure"}}}}.dump()));
    ::close(fd);
    return;
  }
  const Json request = Json::parse(body, nullptr, false);
  std::string user;
  std::string model = "fake-model";
  if (!request.is_discarded()) {
    model = request.value("model", model);
    if (request.contains("messages")) {
      for (const Json& m : request["messages"]) {
        if (m.value("role", "") == "user") user = m.value("content", "");
      }
    }
  }
  std::string text = b.text;
  if (b.kind == LlmBehavior::Kind::kOversize) {
    text.clear();
    for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "This summary goes on and on. ");
  } else if (text.empty()) {
    // A short summary made from the start of the transcript.
    const size_t at = user.find("[#");
    text = absl::StrCat("Fake summary: ",
                        at == std::string::npos ? user.substr(0, 200) : user.substr(at, 200));
  }
  const Json out = {
      {"id", "chatcmpl-fake"},
      {"object", "chat.completion"},
      {"model", model},
      {"choices", Json::array({{{"index", 0},
                                {"message", {{"role", "assistant"}, {"content", text}}},
                                {"finish_reason", "stop"}}})},
      {"usage",
       {{"prompt_tokens", body.size() / 4},
        {"completion_tokens", text.size() / 4},
        {"total_tokens", body.size() / 4 + text.size() / 4}}}};
  SendAll(fd, Response(200, out.dump()));
  ::close(fd);
}

}  // namespace convstate::testing
