#ifndef CONVSTATE_SERVICES_API_RECALL_H_
#define CONVSTATE_SERVICES_API_RECALL_H_

// Recall from the whole history: a view's RECALLED section (BuildContext,
// InspectContext) and the SearchHistory RPC. The ranking is
// services/compaction/recall's; the candidates come from this replica's copy
// of the history (history_cache.h) or storage.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/history_cache.h"
#include "services/api/profile_resolver.h"
#include "services/compaction/recall/recall.h"
#include "services/compaction/view/context_view.h"
#include "services/profiles/model_registry.h"
#include "storage/storage.h"

namespace convstate {

// What BuildContext recalls for: `recall_query`, or else the text of the
// user messages in the pending input.
std::string RecallQueryOf(const v1::BuildContextRequest& req);
// The same from a call's recall_query and pending input.
std::string RecallQueryOf(const std::string& recall_query,
                          const google::protobuf::RepeatedPtrField<v1::NewItem>& pending_input);

// Recall for one view: StartRecall asks for the candidates of `query` on
// another thread, while the view is built; AddRecall adds the RECALLED
// section to the view: passages that match and that the view does not show
// verbatim, within the profile's recall budget and the room left in the
// window. Recall is an addition: when storage fails, the view goes without
// it. Thread-safe.
class HistoryRecall {
 public:
  // `storage`, `history` and `profiles` must outlive it.
  HistoryRecall(Storage* storage, HistoryCache& history, const ProfileResolver& profiles);

  HistoryRecall(const HistoryRecall&) = delete;
  HistoryRecall& operator=(const HistoryRecall&) = delete;

  struct PendingRecall;
  // Null when there is nothing to search for.
  std::shared_ptr<PendingRecall> StartRecall(const CallContext& ctx, const ConversationKey& key,
                                             const Conversation& conversation,
                                             const ResolvedProfile& resolved,
                                             const std::string& query);
  // Returns the passages it added.
  std::vector<RecalledPassage> AddRecall(const std::shared_ptr<PendingRecall>& pending,
                                         const Conversation& conversation,
                                         const ResolvedProfile& resolved, ContextView& view);
  // A compaction this call ran moved `conversation` (the row it stored):
  // the replica's copy of its history, if it keeps one, is brought up to it
  // off the call's path, so that the next call's recall reads nothing.
  void NoteCompacted(const Conversation& conversation) { history_.RefreshLater(conversation); }

  // The most the RECALLED section may take under `profile`, in tokens.
  static int64_t RecallBudget(const ModelProfile& profile);
  // The room under the hard band a call compacts to leave the section: its
  // floor (recall.min_tokens), or the budget if smaller. Above it the
  // section takes what room the view leaves, up to its budget; counting the
  // whole budget made a call compact itself for it three times as often
  // (18 calls in 160 against 5 with recall off, at 32k).
  static int64_t RecallHeadroom(const ModelProfile& profile);

  // SearchHistory of `key` (validated): passages of the whole history that
  // answer the query.
  absl::StatusOr<v1::SearchHistoryResponse> SearchHistory(const CallContext& ctx,
                                                          const ConversationKey& key,
                                                          const v1::SearchHistoryRequest& req);

 private:
  // The mode a call compacts in for `profile` (ProfileResolver::CallMode).
  CompactionMode CallMode(const ModelProfile& profile) const { return profiles_.CallMode(profile); }

  Storage* const storage_;
  HistoryCache& history_;
  const ProfileResolver& profiles_;
  // Words found too common to search for, per conversation (its storage
  // key), with the item count they were counted at: counting how many items
  // hold a word costs as much as the word is common, so each is counted
  // once until the conversation has doubled. Bounded: cleared when full.
  struct CommonTerms {
    int64_t items = 0;
    absl::flat_hash_set<std::string> terms;
    // Whether the verdicts still stand for a conversation of `now` items.
    bool Holds(int64_t now) const { return now < 2 * items; }
  };
  // common_terms_mu_ guards common_terms_.
  absl::Mutex common_terms_mu_;
  absl::flat_hash_map<int64_t, CommonTerms> common_terms_ ABSL_GUARDED_BY(common_terms_mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_RECALL_H_
