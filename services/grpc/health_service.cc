#include "services/grpc/health_service.h"

#include <utility>

#include "services/grpc/byte_buffers.h"
#include "services/grpc/status.h"

namespace convstate {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

grpc::ByteBuffer Encode(HealthCheckResponse::ServingStatus status) {
  HealthCheckResponse response;
  response.set_status(status);
  grpc::Slice slice(response.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

HealthService::HealthService(std::vector<std::string> services, AccessGate* gate) : gate_(gate) {
  absl::MutexLock lock(&mu_);
  serving_[""] = true;
  for (std::string& name : services) serving_[std::move(name)] = true;
}

HealthService::~HealthService() { EndWatches(); }

void HealthService::EndWatches() {
  absl::MutexLock lock(&mu_);
  for (const Watcher& w : watchers_) {
    w.writer->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    w.writer->Release();
  }
  watchers_.clear();
}

HealthCheckResponse::ServingStatus HealthService::StatusOf(const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second && !shut_down_ ? HealthCheckResponse::SERVING
                                   : HealthCheckResponse::NOT_SERVING;
}

void HealthService::DropEnded() {
  std::vector<Watcher> open;
  for (Watcher& w : watchers_) {
    if (w.writer->Cancelled()) {
      w.writer->Release();
    } else {
      open.push_back(std::move(w));
    }
  }
  watchers_ = std::move(open);
}

void HealthService::Notify() {
  DropEnded();
  for (const Watcher& w : watchers_) w.writer->Send(Encode(StatusOf(w.service)));
}

void HealthService::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  bool changed = false;
  for (auto& [name, value] : serving_) {
    changed = changed || value != serving;
    value = serving;
  }
  if (changed) Notify();
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  Notify();
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status admitted = gate_->AdmitHealth(*ctx); !admitted.ok()) {
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  absl::MutexLock lock(&mu_);
  const HealthCheckResponse::ServingStatus status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* HealthService::Watch(grpc::CallbackServerContext* ctx,
                                                                 const grpc::ByteBuffer* request) {
  auto* writer = new EventWriter();
  HealthCheckRequest parsed;
  const std::optional<std::string> wire = BytesOf(*request);
  absl::Status admitted = gate_->AdmitHealth(*ctx);
  if (admitted.ok() && (!wire.has_value() || !parsed.ParseFromString(*wire))) {
    admitted = absl::InvalidArgumentError("request is not a valid grpc.health.v1.HealthCheckRequest");
  }
  if (!admitted.ok()) {
    writer->Close(ToGrpcStatus(admitted));
    writer->Release();
    return writer;
  }
  absl::MutexLock lock(&mu_);
  writer->Send(Encode(StatusOf(parsed.service())));
  DropEnded();  // Watches that ended since the last change, too.
  watchers_.push_back(Watcher{parsed.service(), writer});
  return writer;
}

}  // namespace convstate
