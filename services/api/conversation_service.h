#ifndef CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
#define CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/validation.h"
#include "services/compaction/model_registry.h"
#include "storage/storage.h"

namespace convstate {

// The convstate.v1 API as plain calls: validates requests, talks to Storage
// and the compaction core, and builds responses. Knows protobuf messages but
// nothing of gRPC; the gRPC adapter calls it and maps the status. Thread-safe.
class ConversationService {
 public:
  struct Options {
    Limits limits;
  };

  // `models` and `storage` must outlive the service.
  ConversationService(Options options, const ModelRegistry* models, Storage* storage);

  absl::StatusOr<v1::Conversation> CreateConversation(const CallContext& ctx,
                                                      const v1::CreateConversationRequest& req);
  absl::StatusOr<v1::Conversation> GetConversation(const CallContext& ctx,
                                                   const v1::GetConversationRequest& req);
  absl::StatusOr<v1::ListConversationsResponse> ListConversations(
      const CallContext& ctx, const v1::ListConversationsRequest& req);
  absl::StatusOr<v1::DeleteConversationResponse> DeleteConversation(
      const CallContext& ctx, const v1::DeleteConversationRequest& req);
  absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const CallContext& ctx,
                                                    const v1::AppendTurnRequest& req);
  absl::StatusOr<v1::ListItemsResponse> ListItems(const CallContext& ctx,
                                                  const v1::ListItemsRequest& req);
  absl::StatusOr<v1::BuildContextResponse> BuildContext(const CallContext& ctx,
                                                        const v1::BuildContextRequest& req);
  // Not built yet: UNIMPLEMENTED.
  absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const CallContext& ctx, const v1::InspectContextRequest& req);
  absl::StatusOr<v1::CompactResponse> Compact(const CallContext& ctx,
                                              const v1::CompactRequest& req);
  absl::StatusOr<v1::ListSummariesResponse> ListSummaries(const CallContext& ctx,
                                                          const v1::ListSummariesRequest& req);

 private:
  // The conversation's profile (its model's, with its overrides) and
  // tokenizer. FAILED_PRECONDITION if the model no longer has a profile.
  absl::StatusOr<ResolvedProfile> ProfileOf(const Conversation& conversation) const;

  const Options options_;
  const ModelRegistry* const models_;
  Storage* const storage_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
