#ifndef CONVSTATE_SERVICES_API_PROFILE_RESOLVER_H_
#define CONVSTATE_SERVICES_API_PROFILE_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "convstate/v1/convstate.pb.h"
#include "services/compaction/engine/planner.h"
#include "services/core/types.h"
#include "services/profiles/model_registry.h"
#include "storage/storage.h"

namespace convstate {

// Which model profile a conversation is served under, on this replica: its
// model's profile from the registry with the conversation's overrides, the
// tokenizer that profile names, and the counts made with it. Thread-safe.
class ProfileResolver {
 public:
  // `models` and `storage` must outlive the resolver. `background_compaction`:
  // whether this replica compacts in the background (CallMode).
  ProfileResolver(const ModelRegistry* models, Storage* storage, bool background_compaction);

  ProfileResolver(const ProfileResolver&) = delete;
  ProfileResolver& operator=(const ProfileResolver&) = delete;

  // The conversation's profile (its model's, with its overrides) and
  // tokenizer. FAILED_PRECONDITION if the model no longer has a profile.
  absl::StatusOr<ResolvedProfile> ProfileOf(const Conversation& conversation) const;
  // The profile of a model a request names: INVALID_ARGUMENT ("model: ...")
  // if it has none.
  absl::StatusOr<const ResolvedProfile*> ForRequest(const std::string& model) const;
  // The profile of the model a stored conversation is bound to:
  // FAILED_PRECONDITION if it has none, naming the conversation when
  // `conversation_id` is not empty.
  absl::StatusOr<const ResolvedProfile*> ForStored(const std::string& model,
                                                   absl::string_view conversation_id) const;

  // The model `key` is bound to, remembered per replica (a model never
  // changes for a conversation; storage checks it on every append);
  // `refresh` asks storage again.
  absl::StatusOr<std::string> ModelOf(const CallContext& ctx, const ConversationKey& key,
                                      bool refresh);

  // Counts the view's items and chunks again when they were counted with
  // another tokenizer than `resolved`'s (the model changed), and stores the
  // new counts when `keep` (a reader's call stores nothing).
  absl::Status EnsureCounts(const CallContext& ctx, ContextSnapshot& snapshot,
                            const ResolvedProfile& resolved, bool keep = true) const;

  // The mode a BuildContext compacts in for `profile`: blocking at the hard
  // band, or serving while the background compacts (the profile's
  // hard_band_policy, with background compaction on).
  CompactionMode CallMode(const ModelProfile& profile) const;

 private:
  const ModelRegistry* const models_;
  Storage* const storage_;
  const bool background_compaction_;
  // models_mu_ guards models_by_key_ (conversation's KeyText -> model).
  absl::Mutex models_mu_;
  absl::flat_hash_map<std::string, std::string> models_by_key_ ABSL_GUARDED_BY(models_mu_);
};

// Pending input as items, counted with `resolved`'s tokenizer (pending
// input is not stored yet, so it is the only text a view counts).
std::vector<ItemData> PendingItems(const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                                   const ResolvedProfile& resolved);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_PROFILE_RESOLVER_H_
