#ifndef CONVSTATE_SERVICES_API_VIEW_BUILDER_H_
#define CONVSTATE_SERVICES_API_VIEW_BUILDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/background_compactor.h"
#include "services/api/context_cache.h"
#include "services/api/profile_resolver.h"
#include "services/api/recall.h"
#include "services/compaction/engine/compaction_runner.h"
#include "services/telemetry/telemetry.h"
#include "storage/storage.h"

namespace convstate {

// The views a gateway asks for: BuildContext's (compacting on the call when
// the conversation needs it, in the background when it soon will, with
// recall), GetContextAt's view as it was served then, and InspectContext's
// preview. Requests arrive validated. Thread-safe.
class ViewBuilder {
 public:
  struct Options {
    // Bytes of live items (and pins) one read of a view takes at most
    // (Limits::max_view_bytes); 0: no bound.
    int64_t max_view_bytes = 0;
    // Compact in the background from the soft band on (see
    // ConversationService::Options).
    bool background_compaction = true;
    // May be null.
    telemetry::Telemetry* telemetry = nullptr;
  };

  // Everything but `options` must outlive the builder.
  ViewBuilder(Options options, Storage* storage, CompactionRunner* runner, ContextCache* cache,
              const ProfileResolver* profiles, HistoryRecall* recall,
              BackgroundCompactor* background);

  ViewBuilder(const ViewBuilder&) = delete;
  ViewBuilder& operator=(const ViewBuilder&) = delete;

  // BuildContext's answer as a message (wire false) or as serialized bytes.
  struct Answer {
    std::optional<v1::BuildContextResponse> message;
    std::shared_ptr<const std::string> wire;
  };
  // BuildContext of `key`, reporting each compaction step to `progress`
  // (may be null). Calls without pending input that find the conversation
  // as this replica last saw it share the bytes built the first time.
  absl::StatusOr<Answer> Build(const CallContext& ctx, const ConversationKey& key,
                               const v1::BuildContextRequest& req, const ProgressSink& progress,
                               bool wire);
  // GetContextAt: the view of `key` as it was at a version.
  absl::StatusOr<v1::BuildContextResponse> At(const CallContext& ctx, const ConversationKey& key,
                                              const v1::GetContextAtRequest& req);
  // InspectContext: what a BuildContext would do, writing nothing.
  absl::StatusOr<v1::InspectContextResponse> Inspect(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     const v1::InspectContextRequest& req);

 private:
  // BuildContext after the provider refused the last view as too long:
  // corrects the conversation's estimate, writes the audit row, compacts to
  // a stricter target, and never returns the refused view.
  absl::StatusOr<v1::BuildContextResponse> RecoverFromOverflow(
      const CallContext& ctx, const ConversationKey& key, ContextSnapshot snapshot,
      const ResolvedProfile& resolved, const std::vector<ItemData>& pending,
      int64_t reported_tokens, const ProgressSink& progress);
  // The response for `outcome`'s view (built by a call in `mode` against
  // `profile`): entries, tokens, hash, breakpoints, band and why it is at
  // or above the hard band. The view's texts move into it.
  v1::BuildContextResponse ResponseOf(const ConversationKey& key, CompactionOutcome& outcome,
                                      const ModelProfile& profile, CompactionMode mode) const;
  // The view's status, band and size on the call's span and metrics.
  void RecordView(v1::ContextStatus status, int64_t tokens, Band band) const;
  // RESOURCE_EXHAUSTED, naming the bound, when `snapshot`'s live and pinned
  // items hold more than max_view_bytes.
  absl::Status CheckViewBytes(const ContextSnapshot& snapshot) const;

  const Options options_;
  Storage* const storage_;
  CompactionRunner* const runner_;
  ContextCache* const cache_;
  const ProfileResolver* const profiles_;
  HistoryRecall* const recall_;
  BackgroundCompactor* const background_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_VIEW_BUILDER_H_
