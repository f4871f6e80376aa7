#include "services/compaction/summarizers/extractive.h"
#include "services/server/server.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "services/common/log.h"
#include "services/common/task_guard.h"
#include "services/common/thread_pool.h"
#include "services/grpc/grpc_service.h"
#include "services/grpc/protobuf_log.h"
#include "services/grpc/reflection_v1.h"

namespace convstate {

namespace {
constexpr char kServiceName[] = "convstate.v1.ConversationState";
}  // namespace

namespace {

std::shared_ptr<grpc::ServerCredentials> Credentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  const unsigned int refresh =
      static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(tls.refresh)));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(tls.require_client_cert
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::BuildAndStart(const ServerOptions& options,
                                                              std::unique_ptr<ModelRegistry> models,
                                                              std::unique_ptr<Storage> storage,
                                                              std::unique_ptr<Summarizer> summarizer,
                                                              std::unique_ptr<telemetry::Telemetry> telemetry) {
  std::unique_ptr<Server> s(new Server());
  s->telemetry_ = telemetry != nullptr ? std::move(telemetry) : telemetry::Telemetry::Disabled();
  s->models_ = std::move(models);
  s->storage_ = std::move(storage);
  s->summarizer_ = summarizer != nullptr ? std::move(summarizer) : NewExtractiveSummarizer();
  const AccessOptions& access = options.access;
  if (access.access_file.empty()) {
    s->gate_ = std::make_unique<AccessGate>(s->telemetry_.get());
  } else {
    absl::StatusOr<std::unique_ptr<auth::AccessFile>> file =
        auth::AccessFile::Open(access.access_file, access.refresh);
    if (!file.ok()) return file.status();
    s->gate_ = std::make_unique<AccessGate>(std::move(*file), access, s->telemetry_.get());
  }
  ConversationService::Options service_options = options.service;
  service_options.compaction.telemetry = s->telemetry_.get();
  AccessGate* gate = s->gate_.get();
  if (gate->enabled()) {
    service_options.tenant_limits = [gate](const std::string& tenant) {
      return gate->Limits(tenant);
    };
  }
  s->service_ = std::make_unique<ConversationService>(service_options, s->models_.get(),
                                                      s->storage_.get(), s->summarizer_.get());
  s->workers_ = std::make_unique<ThreadPool>(
      options.worker_threads, static_cast<size_t>(options.max_queued_calls), "gRPC workers");
  s->grpc_service_ = std::make_unique<GrpcService>(s->service_.get(), s->workers_.get(),
                                                   s->telemetry_.get(), s->gate_.get());
  s->health_ = std::make_unique<HealthService>(std::vector<std::string>{kServiceName},
                                               s->gate_.get());

  // A client can make libprotobuf log a line per request (invalid UTF-8):
  // counted instead.
  RouteProtobufLogs(s->telemetry_->instruments().invalid_utf8);
  // gRPC's own reflection service (v1alpha, for older clients) cannot ask
  // the gate: it is served only when reflection needs no credential.
  const bool open_reflection = !s->gate_->enabled() || access.public_reflection;
  if (open_reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const std::string host =
      absl::StrContains(options.host, ':') ? absl::StrCat("[", options.host, "]") : options.host;
  const std::string listen = absl::StrCat(host, ":", options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, Credentials(options.tls), &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(s->grpc_service_.get());
  builder.RegisterService(s->health_.get());
  // Reflection v1 beside gRPC's own v1alpha: both list every service here.
  std::vector<std::string> listed = {kServiceName, "grpc.health.v1.Health",
                                     "grpc.reflection.v1.ServerReflection"};
  if (open_reflection) listed.push_back("grpc.reflection.v1alpha.ServerReflection");
  s->reflection_v1_ = std::make_unique<ReflectionV1>(std::move(listed), s->gate_.get());
  builder.RegisterService(s->reflection_v1_.get());
  if (options.bench_echo) {
    s->bench_echo_ = std::make_unique<BenchEcho>(s->workers_.get(),
                                                 static_cast<size_t>(options.max_message_bytes));
    builder.RegisterCallbackGenericService(s->bench_echo_.get());
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot listen on ", listen));
  }
  s->address_ = absl::StrCat(host, ":", s->port_);
  if (options.health_port > 0) {
    if (absl::Status probe = s->StartProbeServer(host, options.health_port); !probe.ok()) {
      return probe;
    }
  }
  s->drain_ = options.drain;
  if (!s->gate_->enabled()) {
    LogWarning("--auth=none: every caller may read and change every tenant's conversations; "
               "for local development only");
  }
  if (options.health_interval > absl::ZeroDuration()) {
    Server* server = s.get();
    const absl::Duration interval = options.health_interval;
    s->health_thread_ = std::thread([server, interval] { server->MonitorHealth(interval); });
  }
  return s;
}

absl::Status Server::StartProbeServer(const std::string& host, int port) {
  probe_gate_ = std::make_unique<AccessGate>(telemetry_.get());
  probe_health_ = std::make_unique<HealthService>(std::vector<std::string>{kServiceName},
                                                  probe_gate_.get());
  const std::string listen = absl::StrCat(host, ":", port);
  int bound = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(probe_health_.get());
  probe_server_ = builder.BuildAndStart();
  if (probe_server_ == nullptr || bound == 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot listen on ", listen, " (health)"));
  }
  LogInfo("health alone, plaintext and without a credential, on ", listen);
  return absl::OkStatus();
}

std::vector<HealthService*> Server::HealthServices() {
  std::vector<HealthService*> all = {health_.get()};
  if (probe_health_ != nullptr) all.push_back(probe_health_.get());
  return all;
}

void Server::MonitorHealth(absl::Duration interval) {
  bool serving = true;
  absl::MutexLock lock(&health_mu_);
  while (!stopping_) {
    health_mu_.Unlock();
    // The probe has its own short deadline: a hung database is unhealthy.
    absl::Status ping = absl::InternalError("the health probe failed");
    RunGuarded("health monitor",
               [&] { ping = storage_->Ping(CallContext{absl::Now() + interval}); });
    health_mu_.Lock();
    if (stopping_) break;
    if (ping.ok() != serving) {
      serving = ping.ok();
      if (serving) {
        LogInfo("storage answers again: health SERVING");
      } else {
        LogWarning("storage does not answer (", ping.ToString(), "): health NOT_SERVING");
      }
      for (HealthService* health : HealthServices()) health->SetServing(serving);
    }
    health_cv_.WaitWithTimeout(&health_mu_, interval);
  }
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // Load balancers, clients that watch health and probes see NOT_SERVING
  // at once, before anything else stops (the monitor may be waiting on a
  // probe of the database), and for the drain period while calls are
  // still taken.
  for (HealthService* health : HealthServices()) health->Shutdown();
  {
    absl::MutexLock lock(&health_mu_);
    stopping_ = true;
    health_cv_.SignalAll();
  }
  if (health_thread_.joinable()) health_thread_.join();
  if (drain_ > absl::ZeroDuration()) {
    LogInfo("draining for ", absl::FormatDuration(drain_), ": health NOT_SERVING");
    absl::SleepFor(drain_);
  }
  for (HealthService* health : HealthServices()) health->EndWatches();
  // No new connection or call from here; calls in flight have `grace` to
  // finish, then are cancelled.
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace);
  if (probe_server_ != nullptr) probe_server_->Shutdown(deadline);
  server_->Shutdown(deadline);
  workers_.reset();  // Runs whatever is still queued, then joins.
  // Compactions running in the background finish and give their leases
  // back when the service goes, with the server (queued ones are not
  // started: the service stops taking them).
  // The last spans and metrics go out within a bounded time of their own.
  telemetry_->Shutdown(std::min(absl::Seconds(5), std::max(grace, absl::Seconds(1))));
}

Server::~Server() {
  if (server_ != nullptr) Shutdown(absl::ZeroDuration());
  // The counter goes with this server's telemetry.
  RouteProtobufLogs(nullptr);
}

}  // namespace convstate
