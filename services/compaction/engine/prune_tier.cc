// Tier 1: old tool results show as placeholders from the planned boundary
// on (the commit moves the conversation's prune boundary forward).

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"

namespace convstate {
namespace {

class PruneTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kPrune; }

  void Plan(PlanState& state) const override {
    if (state.mode == CompactionMode::kTruncate) return;
    const PlanInput& in = state.in;
    const ModelProfile& p = in.profile;
    CompactionPlan& plan = state.plan;
    const std::vector<const Item*> results = Prunable(*in.snapshot, p);
    int64_t result_tokens = 0;
    for (const Item* item : results) result_tokens += item->data.token_count;
    const bool prune_wanted = state.mode == CompactionMode::kPruneOnly ||
                              result_tokens > p.tool_pruning.trigger_tokens ||
                              plan.tokens_before >= state.soft;
    const size_t keep_recent = KeptRecent(results, p);
    if (!prune_wanted || results.size() <= keep_recent) return;
    const int64_t boundary = results[results.size() - keep_recent - 1]->sequence;
    ContextView pruned = ViewFor(in, boundary);
    const int64_t savings = plan.view_before.tokens.total - pruned.tokens.total;
    if (savings < p.tool_pruning.min_savings_tokens) return;
    TierStep step;
    step.tier = Tier::kPrune;
    step.sequence = boundary;
    step.tokens = savings;
    step.count = static_cast<int>(results.size() - keep_recent);
    plan.projected_tokens = pruned.tokens.total;
    plan.actions.push_back(absl::StrCat("prune ", step.count, " old tool results through item ",
                                        boundary, " (", savings, " tokens)"));
    plan.steps.push_back(std::move(step));
    state.SetView(std::move(pruned));
  }

  void Run(CompactionJob& job) const override {
    const CompactionPlan& plan = job.plan;
    const TierStep* step = plan.Step(Tier::kPrune);
    if (step == nullptr) return;
    job.commit.new_prune_boundary = step->sequence;
    job.steps.Started(Tier::kPrune, plan.tokens_before);
    const TokenBreakdown pruned = job.ViewPrunedTo(job.snapshot, step->sequence).tokens;
    const int64_t after = plan.tokens_before - step->tokens;
    job.commit.events.push_back(WithBreakdown(
        AuditRow("pruned", Tier::kPrune, plan.tokens_before, after,
                 DetailOf({{"results", step->count}, {"boundary", step->sequence}})),
        plan.view_before.tokens, pruned));
    job.steps.Completed(
        CompletedStep(Tier::kPrune, plan.tokens_before, after, plan.view_before.tokens, pruned));
    job.step_tokens = pruned;
  }

 private:
  // The tool results pruning may replace, oldest first: not pinned, not
  // pruned yet, not of a tool the profile keeps.
  static std::vector<const Item*> Prunable(const ContextSnapshot& snap, const ModelProfile& p) {
    std::vector<const Item*> results;
    const auto names = ToolNamesByCallId(snap.live_items);
    const auto& keep = p.tool_pruning.keep_tools;
    for (const Item& item : snap.live_items) {
      if (item.data.kind != ItemKind::kToolResult || item.data.pinned) continue;
      if (item.sequence <= snap.conversation.prune_boundary) continue;  // Already pruned.
      std::string name = item.data.tool_name;
      if (name.empty() && names.contains(item.data.tool_call_id)) {
        name = names.at(item.data.tool_call_id);
      }
      if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
      results.push_back(&item);
    }
    return results;
  }

  // How many of the most recent `results` stay: at most keep_recent of
  // them, and only while they fit their share of the window (old tool
  // output is bulky and mostly redundant; messages carry the facts).
  static size_t KeptRecent(const std::vector<const Item*>& results, const ModelProfile& p) {
    const size_t max_keep = static_cast<size_t>(std::max(0, p.tool_pruning.keep_recent));
    const int64_t keep_cap = FractionOfWindow(p, p.tool_pruning.keep_recent_fraction);
    size_t keep_recent = 0;
    for (int64_t kept = 0; keep_recent < std::min(max_keep, results.size()); ++keep_recent) {
      kept += results[results.size() - 1 - keep_recent]->data.token_count;
      if (kept > keep_cap) break;
    }
    return keep_recent;
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewPruneTier() { return std::make_unique<PruneTier>(); }

}  // namespace convstate
