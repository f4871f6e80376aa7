#ifndef CONVSTATE_SERVICES_GRPC_BENCH_ECHO_H_
#define CONVSTATE_SERVICES_GRPC_BENCH_ECHO_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "services/common/thread_pool.h"

namespace convstate {

// The floor a BuildContext is measured against (server flag --bench_echo):
// the method /convstate.bench.Echo/Echo takes a decimal byte count N as its
// raw request body and answers N bytes, handed to a worker of `workers`
// and sent from memory the way a kept view is. No descriptor: it is not
// part of the API and reflection does not list it. Every other method that
// no service has is UNIMPLEMENTED, as without it.
class BenchEcho final : public grpc::CallbackGenericService {
 public:
  static constexpr char kMethod[] = "/convstate.bench.Echo/Echo";
  // `workers` must outlive the server. `max_bytes` bounds N.
  BenchEcho(ThreadPool* workers, size_t max_bytes);

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;

  // The N-byte body, built once per N.
  std::shared_ptr<const std::string> Payload(size_t bytes);

 private:
  ThreadPool* const workers_;
  const size_t max_bytes_;
  absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::shared_ptr<const std::string>> payloads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_BENCH_ECHO_H_
