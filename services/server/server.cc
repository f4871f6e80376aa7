#include "services/server/server.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "services/common/thread_pool.h"
#include "services/grpc/grpc_service.h"

namespace convstate {

namespace {
constexpr char kServiceName[] = "convstate.v1.ConversationState";
}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::BuildAndStart(const ServerOptions& options,
                                                              std::unique_ptr<ModelRegistry> models,
                                                              std::unique_ptr<Storage> storage,
                                                              std::unique_ptr<Summarizer> summarizer) {
  std::unique_ptr<Server> s(new Server());
  s->models_ = std::move(models);
  s->storage_ = std::move(storage);
  s->summarizer_ = summarizer != nullptr ? std::move(summarizer) : NewExtractiveSummarizer();
  s->service_ = std::make_unique<ConversationService>(options.service, s->models_.get(),
                                                      s->storage_.get(), s->summarizer_.get());
  s->workers_ = std::make_unique<ThreadPool>(options.worker_threads,
                                             static_cast<size_t>(options.max_queued_calls));
  s->grpc_service_ = std::make_unique<GrpcService>(s->service_.get(), s->workers_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const std::string host =
      absl::StrContains(options.host, ':') ? absl::StrCat("[", options.host, "]") : options.host;
  const std::string listen = absl::StrCat(host, ":", options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(s->grpc_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot listen on ", listen));
  }
  s->address_ = absl::StrCat(host, ":", s->port_);
  s->server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  return s;
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // Load balancers and health probes see NOT_SERVING first.
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  workers_.reset();  // Runs whatever is still queued, then joins.
}

Server::~Server() {
  if (server_ != nullptr) Shutdown(absl::ZeroDuration());
}

}  // namespace convstate
