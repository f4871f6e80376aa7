#include "services/grpc/bench_echo.h"

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/grpc/byte_buffers.h"

namespace convstate {
namespace {

// One call: read the request, answer on a worker, finish.
class EchoReactor final : public grpc::ServerGenericBidiReactor {
 public:
  EchoReactor(BenchEcho* echo, ThreadPool* workers, size_t max_bytes)
      : echo_(echo), workers_(workers), max_bytes_(max_bytes) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    const std::optional<std::string> body = BytesOf(request_);
    size_t bytes = 0;
    if (!body.has_value() || !absl::SimpleAtoi(*body, &bytes) || bytes > max_bytes_) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("the body is a byte count from 0 to ", max_bytes_)));
      return;
    }
    const bool queued = workers_->Schedule([this, bytes] {
      response_ = SharedBytes(echo_->Payload(bytes));
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    });
    if (!queued) Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server overloaded"));
  }

  void OnDone() override { delete this; }

 private:
  BenchEcho* const echo_;
  ThreadPool* const workers_;
  const size_t max_bytes_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

// Any other method nobody serves.
class Unimplemented final : public grpc::ServerGenericBidiReactor {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
  void OnDone() override { delete this; }
};

}  // namespace

BenchEcho::BenchEcho(ThreadPool* workers, size_t max_bytes)
    : workers_(workers), max_bytes_(max_bytes) {}

grpc::ServerGenericBidiReactor* BenchEcho::CreateReactor(grpc::GenericCallbackServerContext* ctx) {
  if (ctx->method() != kMethod) return new Unimplemented();
  return new EchoReactor(this, workers_, max_bytes_);
}

std::shared_ptr<const std::string> BenchEcho::Payload(size_t bytes) {
  absl::MutexLock lock(&mu_);
  auto& payload = payloads_[bytes];
  if (payload == nullptr) payload = std::make_shared<const std::string>(bytes, 'x');
  return payload;
}

}  // namespace convstate
