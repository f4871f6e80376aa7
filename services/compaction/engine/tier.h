#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_TIER_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_TIER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/compaction/engine/keep_rules.h"
#include "services/compaction/engine/planner.h"
#include "services/compaction/engine/step_recorder.h"
#include "services/compaction/engine/tiers.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/compaction/view/context_view.h"
#include "storage/contract.h"
#include "storage/storage.h"

namespace convstate {

// One compaction as its tiers see it: what it works on, what it has done so
// far, and the engine's services (the view of a snapshot, the summarizer,
// storing a commit). Tiers run one after another on the same job.
struct CompactionJob {
  const CallContext& ctx;
  const ModelProfile& profile;
  const Tokenizer& tokenizer;
  const std::vector<ItemData>& pending;
  CompactionMode mode;
  // From Compact: e.g. "focus on the decisions".
  const std::string& instructions;
  StepRecorder& steps;

  // Compact's boundary (see PlanInput::through_sequence); 0: none.
  int64_t through_sequence = 0;
  // See PlanInput::headroom.
  int64_t headroom = 0;

  // The conversation as stored, read again after every commit (Adopt),
  // with the items the keep rules hold marked pinned.
  ContextSnapshot snapshot;
  Kept kept;
  // What the planner decided for `snapshot` (before the first commit).
  CompactionPlan plan;
  // Held for the whole compaction when anything may be committed; commits
  // are fenced by it. Summarizer calls end by `lease_until`.
  std::optional<CompactionLease> lease;
  absl::Time lease_until = absl::InfiniteFuture();

  // What the next commit stores (the prune boundary, a new chunk), and the
  // audit rows that go with it.
  CompactionCommit commit;
  // Audit rows of steps that change nothing stored (failures, truncation).
  std::vector<CompactionEvent> events;
  // A step failed: the view may be truncated instead.
  bool failed = false;
  std::string failure;
  // Something was committed and `snapshot` read again.
  bool reloaded = false;
  // `snapshot` was brought up to date before the tiers ran (after the
  // lease, or after the compaction this call waited for).
  bool refreshed = false;
  // A commit changed the prune boundary or added a chunk.
  bool changed = false;
  // The view's tokens by section as of the last step.
  TokenBreakdown step_tokens;
  // The view the call returns: the stored state's once the tiers that
  // change storage are done (CurrentView), then as the later ones make it.
  ContextView view;
  bool view_current = false;
  // The view was truncated.
  bool truncated = false;
  // Set by the summarize tier: the facts of the span it summarized, and
  // the size its summary's text was allowed.
  std::vector<LedgerFact> span_facts;
  int64_t summary_text_budget = 0;

  // The engine's services, set by the runner.
  std::function<absl::StatusOr<SummaryResult>(const SummaryRequest&,
                                              std::vector<CompactionEvent>& events)>
      summarize;
  // Stores `c`, and on success reads the conversation again into
  // `snapshot`. False when it could not be stored (the failure is audited).
  std::function<bool(const CompactionCommit& c, Tier tier)> store;

  // Takes `s` as the conversation's state: the snapshot, with the items the
  // profile's keep rules hold marked pinned.
  void Adopt(ContextSnapshot s);
  // The input the planner takes for `s`.
  PlanInput InputFor(const ContextSnapshot& s) const;
  // The view of `s` for the call's pending input, truncated as `t` says.
  ContextView ViewOf(const ContextSnapshot& s, const Truncation& t = {}) const;
  // The view of `s` with tool results up to `boundary` pruned.
  ContextView ViewPrunedTo(const ContextSnapshot& s, int64_t boundary) const;
  // The view of what is stored now (the planner's, if nothing was
  // committed); computed once after the last commit.
  ContextView& CurrentView();
  // A summary request of the profile's summarizer for this call: its model,
  // API, tokenizer, deadline (the lease's end at the latest) and
  // instructions; the caller sets what to summarize and the size.
  SummaryRequest NewSummaryRequest() const;
  // Whether the caller went away.
  bool cancelled() const { return IsCancelled(ctx); }
};

// One tier of compaction: it plans its step, and carries it out, adding to
// the next commit, storing a commit of its own, or changing the view the
// call returns. Tiers hold no state.
class CompactionTier {
 public:
  virtual ~CompactionTier() = default;
  virtual Tier tier() const = 0;
  // True if the tier works on what is stored: what earlier tiers left in
  // the job's commit is stored before it runs.
  virtual bool NeedsStoredState() const { return false; }
  // The decision: adds the tier's step to `state.plan`, with its words in
  // the plan's actions, when the mode and the view call for one. Pure.
  virtual void Plan(PlanState& state) const = 0;
  // The action: carries out what the tier decides for `job` (its step of
  // `job.plan`, or a decision of its own on what is stored by then), and
  // records it on `job.steps`.
  virtual void Run(CompactionJob& job) const = 0;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_TIER_H_
