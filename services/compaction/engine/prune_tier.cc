// Tier 1: old tool results show as placeholders from the planned boundary
// on (the commit moves the conversation's prune boundary forward).

#include <memory>

#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"

namespace convstate {
namespace {

class PruneTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kPrune; }

  void Run(CompactionJob& job) const override {
    const CompactionPlan& plan = job.plan;
    if (plan.pruned_results <= 0) return;
    job.steps.Started(Tier::kPrune, plan.tokens_before);
    const TokenBreakdown pruned = job.ViewPrunedTo(job.snapshot, plan.prune_boundary).tokens;
    const int64_t after = plan.tokens_before - plan.prune_savings;
    job.commit.events.push_back(WithBreakdown(
        AuditRow("pruned", Tier::kPrune, plan.tokens_before, after,
                 DetailOf({{"results", plan.pruned_results}, {"boundary", plan.prune_boundary}})),
        plan.view_before.tokens, pruned));
    CompactionProgress p;
    p.tier = Tier::kPrune;
    p.tokens_before = plan.tokens_before;
    p.tokens_after = after;
    p.before_tokens = plan.view_before.tokens;
    p.after_tokens = pruned;
    job.steps.Completed(std::move(p));
    job.step_tokens = pruned;
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewPruneTier() { return std::make_unique<PruneTier>(); }

}  // namespace convstate
