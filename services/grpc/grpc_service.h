#ifndef CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_
#define CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_

#include <string>
#include <vector>

#include "convstate/v1/convstate.grpc.pb.h"
#include "services/api/conversation_service.h"
#include "services/common/thread_pool.h"
#include "services/grpc/access_gate.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

class RpcTrace;


// The gRPC adapter for convstate.v1.ConversationState. Each call: parse the
// request, take the deadline, run the ConversationService method on the
// worker pool (database calls block), map the status with ToGrpcStatus.
//
// The adapter knows no method by name but StreamBuildContext: it serves
// every unary method of the service's descriptor from
// ConversationService::UnaryRpcs, so a new RPC needs nothing here.
//
// Methods take raw bytes so that the adapter parses requests itself: a
// request protobuf refuses (a string field with invalid UTF-8, truncated
// bytes) becomes INVALID_ARGUMENT naming the field, not gRPC's opaque
// INTERNAL.
class GrpcService final : public v1::ConversationState::Service {
 public:
  // `service`, `workers` and `telemetry` must outlive this object and
  // every call on it. Each call gets a server span (the child of an
  // incoming W3C traceparent) and an rpc.server.call.duration point.
  // `gate` decides who may call what (see AccessGate).
  GrpcService(ConversationService* service, ThreadPool* workers,
              telemetry::Telemetry* telemetry, AccessGate* gate);

  using ByteBuffer = grpc::ByteBuffer;
  using Context = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

  // The methods of the service's descriptor that have no handler; empty
  // when every RPC is served (they answer UNIMPLEMENTED).
  const std::vector<std::string>& unserved() const { return unserved_; }

 private:
  Reactor* Unary(const UnaryRpc& rpc, const char* method, Context* ctx,
                 const ByteBuffer* request, ByteBuffer* response);
  grpc::ServerWriteReactor<ByteBuffer>* StreamBuildContext(Context* ctx,
                                                           const ByteBuffer* request);

  // The gate's verdict on the call, then the request parsed into
  // `message` with the credential's tenant in it; `principal` gets the
  // credential's name (empty without authentication).
  absl::Status AdmitAndParse(const Context& ctx, const char* method, const ByteBuffer& request,
                             google::protobuf::Message* message, RpcTrace* trace,
                             std::string* principal);

  ConversationService* const service_;
  ThreadPool* const workers_;
  telemetry::Telemetry* const telemetry_;
  AccessGate* const gate_;
  // Method names, one per descriptor method, for the handlers' lifetime.
  std::vector<std::string> names_;
  std::vector<std::string> unserved_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_
