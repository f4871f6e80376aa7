// Tier 4: when nothing else was enough (or a step failed under pressure),
// the oldest live items, then summaries, then the ledger leave the view;
// storage keeps them all.

#include <memory>

#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"

namespace convstate {
namespace {

class TruncateTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kTruncate; }
  bool NeedsStoredState() const override { return true; }

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
    CompactionProgress p;
    p.tier = Tier::kTruncate;
    p.tokens_before = before;
    p.tokens_after = view.tokens.total;
    p.reason = reason;
    p.before_tokens = before_tokens;
    p.after_tokens = view.tokens;
    job.steps.Completed(std::move(p));
    job.truncated = true;
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewTruncateTier() { return std::make_unique<TruncateTier>(); }

}  // namespace convstate
