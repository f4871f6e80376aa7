#ifndef CONVSTATE_SERVICES_API_CONVERSATION_SETUP_H_
#define CONVSTATE_SERVICES_API_CONVERSATION_SETUP_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/compaction_control.h"
#include "services/api/profile_resolver.h"
#include "storage/storage.h"

namespace convstate {

// A conversation's settings: creating one (from a request, or continuing
// another conversation, which is summarized for the hand-off) and changing
// its model, prompts, overrides and policy, with the prompts counted by the
// profile they will be served under. Requests arrive validated.
// Thread-safe.
class ConversationSetup {
 public:
  // Everything but `tenant_limits` (never null) must outlive it.
  ConversationSetup(std::function<TenantLimits(const std::string& tenant)> tenant_limits,
                    Storage* storage, const ProfileResolver* profiles,
                    CompactionController* control);

  ConversationSetup(const ConversationSetup&) = delete;
  ConversationSetup& operator=(const ConversationSetup&) = delete;

  // CreateConversation of `key` (its conversation_id empty: a new id).
  absl::StatusOr<v1::Conversation> Create(const CallContext& ctx, const ConversationKey& key,
                                          const v1::CreateConversationRequest& req);
  // ForkConversation into `key` (its conversation_id empty: a new id). The
  // fork's prompts are counted again when they are not the source's
  // current ones (its counts are those), or when the request names
  // another model.
  absl::StatusOr<v1::Conversation> Fork(const CallContext& ctx, const ConversationKey& key,
                                        const v1::ForkConversationRequest& req);
  // RewindConversation of `key`; its prompts are counted again when the
  // state it goes back to had others.
  absl::StatusOr<v1::RewindConversationResponse> Rewind(
      const CallContext& ctx, const ConversationKey& key,
      const v1::RewindConversationRequest& req);
  // UpdateConversation of `key`.
  absl::StatusOr<v1::Conversation> Update(const CallContext& ctx, const ConversationKey& key,
                                          const v1::UpdateConversationRequest& req);

 private:
  // Create, once: ABORTED when a continuation's source was erased from or
  // deleted while it was handed off.
  absl::StatusOr<v1::Conversation> CreateOnce(const CallContext& ctx, const ConversationKey& key,
                                              const v1::CreateConversationRequest& req);
  // The conversation after a fork or rewind that gave it `forked`'s prompts
  // while its counts are those of `counted_for`'s (and `model`, when not
  // empty, as its new model): updated so that the counts are its own.
  absl::StatusOr<v1::Conversation> Recounted(const CallContext& ctx, const Conversation& forked,
                                             const Conversation& counted_for,
                                             const std::string& model);
  // The storage update `req` asks of `current`, with its prompts counted
  // for the model and profile it will have.
  absl::StatusOr<ConversationUpdate> UpdateFor(const Conversation& current,
                                               const v1::UpdateConversationRequest& req) const;

  const std::function<TenantLimits(const std::string& tenant)> tenant_limits_;
  Storage* const storage_;
  const ProfileResolver* const profiles_;
  CompactionController* const control_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_CONVERSATION_SETUP_H_
