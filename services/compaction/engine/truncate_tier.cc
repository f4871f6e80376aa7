// Tier 4: when nothing else was enough (or a step failed under pressure),
// the oldest live items, then summaries, then the ledger leave the view;
// storage keeps them all.

#include <memory>

#include "absl/strings/str_cat.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"

namespace convstate {
namespace {

class TruncateTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kTruncate; }
  bool NeedsStoredState() const override { return true; }

  // Compact(truncate) plans it; the other modes decide when they run it,
  // from what the earlier tiers left.
  void Plan(PlanState& state) const override {
    if (state.mode != CompactionMode::kTruncate) return;
    const PlanInput& in = state.in;
    CompactionPlan& plan = state.plan;
    const int64_t boundary = in.snapshot->conversation.prune_boundary;
    const Truncation t =
        PlanTruncation(in, boundary, Threshold(in.profile, in.profile.hard_threshold));
    if (!t.any()) return;
    plan.projected_tokens = ViewFor(in, boundary, t).tokens.total;
    plan.actions.push_back(absl::StrCat(
        "truncate the view before item ", t.before_sequence,
        t.chunks > 0 ? absl::StrCat(" and its ", t.chunks, " oldest summaries") : "",
        " (storage keeps them)"));
    // With no live item to leave out, only summaries go: the view is cut,
    // but the plan has no step of its own.
    if (t.before_sequence == 0) return;
    TierStep step;
    step.tier = Tier::kTruncate;
    step.stores = false;
    step.sequence = t.before_sequence;
    step.count = static_cast<int>(t.chunks);
    plan.steps.push_back(std::move(step));
  }

  void Run(CompactionJob& job) const override {
    ContextView& view = job.CurrentView();
    const ModelProfile& profile = job.profile;
    const Band band = BandOf(view.tokens.total, profile);
    // Prune-only and summarize do what they say; the other modes end with a
    // view that fits, truncating as the last resort.
    const CompactionMode mode = job.mode;
    const bool may_truncate = ForCall(mode) || mode == CompactionMode::kAuto ||
                              mode == CompactionMode::kAhead || mode == CompactionMode::kTruncate;
    const bool truncate = may_truncate && (mode == CompactionMode::kTruncate ||
                                           band == Band::kEmergency ||
                                           (job.failed && band >= Band::kHard) ||
                                           view.tokens.total > profile.context_window);
    if (!truncate) return;
    const TokenBreakdown before_tokens = view.tokens;
    const int64_t before = view.tokens.total;
    const Truncation t = PlanTruncation(job.InputFor(job.snapshot),
                                        job.snapshot.conversation.prune_boundary,
                                        Threshold(profile, profile.hard_threshold));
    if (!t.any()) return;
    job.steps.Started(Tier::kTruncate, before);
    view = job.ViewOf(job.snapshot, t);
    const std::string reason = mode == CompactionMode::kTruncate ? "requested"
                               : job.failed                     ? job.failure
                                                                : "still over the emergency threshold";
    job.events.push_back(WithBreakdown(
        AuditRow("truncated", Tier::kTruncate, before, view.tokens.total,
                 DetailOf({{"before_sequence", t.before_sequence},
                           {"summaries", t.chunks},
                           {"ledger_dropped", t.ledger_budget.has_value()},
                           {"reason", reason}})),
        before_tokens, view.tokens));
    CompactionProgress p =
        CompletedStep(Tier::kTruncate, before, view.tokens.total, before_tokens, view.tokens);
    p.reason = reason;
    job.steps.Completed(std::move(p));
    job.truncated = true;
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewTruncateTier() { return std::make_unique<TruncateTier>(); }

}  // namespace convstate
