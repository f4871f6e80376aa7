#ifndef CONVSTATE_SERVICES_SERVER_SERVER_H_
#define CONVSTATE_SERVICES_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/api/conversation_service.h"
#include "services/profiles/model_registry.h"
#include "services/grpc/access_gate.h"
#include "services/grpc/bench_echo.h"
#include "services/grpc/health_service.h"
#include "services/grpc/reflection_v1.h"
#include "services/telemetry/telemetry.h"
#include "storage/storage.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace convstate {

class GrpcService;
class ThreadPool;

// Transport security: TLS with a certificate and key from files, and
// optionally clients' certificates checked against a CA (mutual TLS). The
// files are read again when they change (polled every `refresh`), so
// certificates can be rotated without a restart.
struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  // When set, clients present a certificate signed by this CA.
  std::string client_ca_file;
  // With a client CA: refuse clients without a certificate (else a client
  // may present none, and one that does is verified).
  bool require_client_cert = true;
  absl::Duration refresh = absl::Seconds(5);

  bool enabled() const { return !cert_file.empty(); }
};

struct ServerOptions {
  // Address to listen on; port 0 picks a free port (see Server::port()).
  // Loopback unless asked (convstate_server listens on every interface by
  // default with TLS).
  std::string host = "127.0.0.1";
  int port = 50051;
  // When set, grpc.health.v1 alone is also served on this port of `host`,
  // in plaintext and without a credential, for probes that speak neither
  // TLS nor tokens (the kubelet's gRPC probes). Zero: none.
  int health_port = 0;
  // Largest request or response gRPC accepts, in bytes; larger requests are
  // RESOURCE_EXHAUSTED before they reach the service.
  int max_message_bytes = 16 << 20;
  // Threads that run calls (they block on the database).
  int worker_threads = 16;
  // Calls waiting for a worker at most; beyond that calls are UNAVAILABLE.
  int max_queued_calls = 10000;
  // How often the health service asks the storage whether it answers; the
  // health status of "" and of convstate.v1.ConversationState follows it.
  // Zero: never (always SERVING until shutdown).
  absl::Duration health_interval = absl::Seconds(2);
  // At shutdown, how long health reports NOT_SERVING before the server
  // stops taking calls: load balancers see it and stop sending first.
  absl::Duration drain = absl::ZeroDuration();
  ConversationService::Options service;
  // Serve the benchmark echo (BenchEcho) beside the API.
  bool bench_echo = false;
  // Plaintext when not enabled.
  TlsOptions tls;
  // Who may call; without an access file, anyone (for local development).
  AccessOptions access;
};

// The convstate gRPC server: ConversationState, the standard health service
// and server reflection, on one port, behind one access gate.
class Server {
 public:
  // Starts serving `storage`. FAILED_PRECONDITION if the address cannot be
  // bound.
  // `summarizer` writes summary chunks; null for the built-in extractive one.
  // `telemetry` traces calls and keeps metrics; null for none exported.
  static absl::StatusOr<std::unique_ptr<Server>> BuildAndStart(
      const ServerOptions& options, std::unique_ptr<ModelRegistry> models,
      std::unique_ptr<Storage> storage, std::unique_ptr<Summarizer> summarizer = nullptr,
      std::unique_ptr<telemetry::Telemetry> telemetry = nullptr);
  ~Server();

  // The port actually bound.
  int port() const { return port_; }
  // "host:port" as bound.
  const std::string& address() const { return address_; }

  // Stops taking calls, marks health NOT_SERVING, lets calls in flight finish
  // for up to `grace`, then cancels the rest. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  Server() = default;
  void MonitorHealth(absl::Duration interval);
  // Starts the probes' plaintext health server on `host`:`port`.
  absl::Status StartProbeServer(const std::string& host, int port);
  // Every health service this server runs.
  std::vector<HealthService*> HealthServices();

  // Declared first: destroyed last, after everything that records into it.
  std::unique_ptr<telemetry::Telemetry> telemetry_;
  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<Storage> storage_;
  std::unique_ptr<Summarizer> summarizer_;
  // Before the service: its limits come from the gate's access file.
  std::unique_ptr<AccessGate> gate_;
  std::unique_ptr<ConversationService> service_;
  std::unique_ptr<ThreadPool> workers_;
  std::unique_ptr<GrpcService> grpc_service_;
  std::unique_ptr<HealthService> health_;
  // The probes' port (ServerOptions::health_port): its own gate, which
  // admits every caller, and its own copy of the health service.
  std::unique_ptr<AccessGate> probe_gate_;
  std::unique_ptr<HealthService> probe_health_;
  std::unique_ptr<grpc::Server> probe_server_;
  std::unique_ptr<ReflectionV1> reflection_v1_;
  std::unique_ptr<BenchEcho> bench_echo_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  absl::Duration drain_;
  bool shut_down_ = false;
  // The health monitor: pings storage every interval until shutdown.
  absl::Mutex health_mu_;
  absl::CondVar health_cv_;
  bool stopping_ ABSL_GUARDED_BY(health_mu_) = false;
  std::thread health_thread_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_SERVER_SERVER_H_
