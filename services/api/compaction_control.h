#ifndef CONVSTATE_SERVICES_API_COMPACTION_CONTROL_H_
#define CONVSTATE_SERVICES_API_COMPACTION_CONTROL_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/profile_resolver.h"
#include "services/api/validation.h"
#include "services/compaction/engine/compaction_runner.h"
#include "storage/storage.h"

namespace convstate {

// Compaction under the caller's control: a compaction now (Compact, with a
// dry run and a boundary), a dry run's proposal applied as made or edited
// (ApplyCompaction), the newest summary undone (RevertCompaction), and the
// summary a continuation's hand-off makes of its source. Requests arrive
// validated. Thread-safe.
class CompactionController {
 public:
  struct Options {
    // How long a Compact dry run's proposal can be applied.
    absl::Duration proposal_ttl = absl::Minutes(30);
    // Each tenant's limits (never null).
    std::function<TenantLimits(const std::string& tenant)> tenant_limits;
  };

  // Everything but `options` must outlive the controller.
  CompactionController(Options options, Storage* storage, CompactionRunner* runner,
                       const ProfileResolver* profiles);

  CompactionController(const CompactionController&) = delete;
  CompactionController& operator=(const CompactionController&) = delete;

  absl::StatusOr<v1::CompactResponse> Compact(const CallContext& ctx, const ConversationKey& key,
                                              const v1::CompactRequest& req);
  absl::StatusOr<v1::ApplyCompactionResponse> ApplyCompaction(
      const CallContext& ctx, const ProposalRef& proposal, const v1::ApplyCompactionRequest& req);
  absl::StatusOr<v1::RevertCompactionResponse> RevertCompaction(
      const CallContext& ctx, const ConversationKey& key, const v1::RevertCompactionRequest& req);

  // A continuation's source, summarized first through the item before
  // its newest `recent_turns` turns when it holds items no summary covers.
  absl::StatusOr<ContextSnapshot> PrepareHandoff(const CallContext& ctx,
                                                 const ConversationKey& key, int recent_turns);

 private:
  // Keeps a dry run's proposal (`outcome.proposal`) and fills in `answer`.
  absl::Status Propose(const CallContext& ctx, const ConversationKey& key,
                       const std::string& model, CompactionOutcome& outcome,
                       v1::CompactionProposal& answer);

  const Options options_;
  Storage* const storage_;
  CompactionRunner* const runner_;
  const ProfileResolver* const profiles_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_COMPACTION_CONTROL_H_
