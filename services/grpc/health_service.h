#ifndef CONVSTATE_SERVICES_GRPC_HEALTH_SERVICE_H_
#define CONVSTATE_SERVICES_GRPC_HEALTH_SERVICE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "services/grpc/access_gate.h"
#include "services/grpc/event_writer.h"

namespace convstate {

namespace internal {
using HealthBase = grpc::health::v1::Health::WithCallbackMethod_Check<
    grpc::health::v1::Health::WithRawCallbackMethod_Watch<grpc::health::v1::Health::Service>>;
}  // namespace internal

// The standard health service (grpc.health.v1.Health: Check and Watch),
// served here rather than by gRPC's built-in one so that it answers only
// the callers the access gate admits (unless health is public).
class HealthService final : public internal::HealthBase {
 public:
  // `services`: the names it reports on besides "" (the server as a
  // whole); all start SERVING. `gate` must outlive this object.
  HealthService(std::vector<std::string> services, AccessGate* gate);
  // Ends the watches still open.
  ~HealthService() override;

  // Sets every known service's status; ignored after Shutdown.
  void SetServing(bool serving);
  // NOT_SERVING from now on, whatever SetServing says later.
  void Shutdown();
  // Ends every open watch (after Shutdown told them NOT_SERVING), so that
  // the server's own shutdown does not wait for them.
  void EndWatches();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(grpc::CallbackServerContext* ctx,
                                                    const grpc::ByteBuffer* request) override;

 private:
  struct Watcher {
    std::string service;
    EventWriter* writer;
  };
  // The status of `service` (SERVICE_UNKNOWN for a name not served).
  grpc::health::v1::HealthCheckResponse::ServingStatus StatusOf(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets go of the watches whose call ended.
  void DropEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends every open watch its status.
  void Notify() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AccessGate* const gate_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Watcher> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_HEALTH_SERVICE_H_
