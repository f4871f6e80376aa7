#ifndef CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_
#define CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_

#include "convstate/v1/convstate.grpc.pb.h"
#include "services/api/conversation_service.h"
#include "services/common/thread_pool.h"
#include "services/grpc/access_gate.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

class RpcTrace;

namespace internal {
using RawConversationState = v1::ConversationState::WithRawCallbackMethod_CreateConversation<
    v1::ConversationState::WithRawCallbackMethod_GetConversation<
        v1::ConversationState::WithRawCallbackMethod_ListConversations<
            v1::ConversationState::WithRawCallbackMethod_DeleteConversation<
                v1::ConversationState::WithRawCallbackMethod_AppendTurn<
                    v1::ConversationState::WithRawCallbackMethod_ListItems<
                        v1::ConversationState::WithRawCallbackMethod_BuildContext<
                            v1::ConversationState::WithRawCallbackMethod_StreamBuildContext<
                                v1::ConversationState::WithRawCallbackMethod_InspectContext<
                                    v1::ConversationState::WithRawCallbackMethod_Compact<
                                        v1::ConversationState::WithRawCallbackMethod_ListSummaries<
                                            v1::ConversationState::WithRawCallbackMethod_ExpandSummary<
                                                v1::ConversationState::WithRawCallbackMethod_ListCompactionEvents<
                                                    v1::ConversationState::WithRawCallbackMethod_PinItem<
                                                        v1::ConversationState::WithRawCallbackMethod_UnpinItem<
                                                            v1::ConversationState::WithRawCallbackMethod_UpdateConversation<
                                                                v1::ConversationState::WithRawCallbackMethod_GetContextAt<
                                                                    v1::ConversationState::WithRawCallbackMethod_RedactItems<
                                                                        v1::ConversationState::Service>>>>>>>>>>>>>>>>>>;
}  // namespace internal

// The gRPC adapter for convstate.v1.ConversationState. Each call: parse the
// request, take the deadline, run the ConversationService method on the
// worker pool (database calls block), map the status with ToGrpcStatus.
//
// Methods take raw bytes so that the adapter parses requests itself: a
// request protobuf refuses (a string field with invalid UTF-8, truncated
// bytes) becomes INVALID_ARGUMENT naming the field, not gRPC's opaque
// INTERNAL.
class GrpcService final : public internal::RawConversationState {
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

  Reactor* CreateConversation(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* GetConversation(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* ListConversations(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* DeleteConversation(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* AppendTurn(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* ListItems(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* BuildContext(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  grpc::ServerWriteReactor<ByteBuffer>* StreamBuildContext(Context* ctx,
                                                           const ByteBuffer* req) override;
  Reactor* InspectContext(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* Compact(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* ListSummaries(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* ExpandSummary(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* ListCompactionEvents(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* PinItem(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* UnpinItem(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* UpdateConversation(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* GetContextAt(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;
  Reactor* RedactItems(Context* ctx, const ByteBuffer* req, ByteBuffer* resp) override;

 private:
  template <typename Req, typename Resp>
  Reactor* Unary(const char* method_name, Context* ctx, const ByteBuffer* request,
                 ByteBuffer* response,
                 absl::StatusOr<Resp> (ConversationService::*method)(const CallContext&,
                                                                      const Req&));

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
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_GRPC_SERVICE_H_
