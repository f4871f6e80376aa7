#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_PLANNER_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_PLANNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/compaction/engine/tiers.h"
#include "services/compaction/view/context_view.h"
#include "services/profiles/profile.h"
#include "services/tokenizer/tokens.h"
#include "services/core/types.h"
#include "storage/contract.h"

namespace convstate {

// Where a view's total stands against the profile's thresholds. Numbering
// matches convstate.v1.Band.
enum class Band { kNormal = 1, kSoft = 2, kHard = 3, kEmergency = 4 };

// What triggered planning. Summaries replace only what no longer fits
// verbatim once old tool output is pruned: a view that pruning brings back
// under the limit keeps every turn, as a FIFO window with pruning would.
enum class CompactionMode {
  // BuildContext (hard_band_policy BLOCK, the default): nothing below the
  // hard band. From there, old tool output is pruned, and when the pruned
  // view is still at or above the hard threshold the oldest spans are
  // summarized, aiming under the soft threshold, so that the call that
  // waited is not followed by another that must.
  kByBand,
  // BuildContext whose profile serves while the background compacts
  // (HardBandPolicy::kServeWhileBackground, with background compaction
  // on): the view is served as it stands below the emergency band; from
  // there, old tool output is pruned and the oldest spans summarized just
  // under the hard threshold with room for a turn.
  kByBandBehindBackground,
  // Background, after a call found the view in the soft band or above: the
  // same, ahead of need, so that calls find the work done: pruning from the
  // soft band, and a summary once the pruned view is still in the soft
  // band (aiming under it; under hard_band_policy SERVE_WHILE_BACKGROUND,
  // once it passes the hard threshold, aiming under that).
  kAhead,
  // Compact(auto): cheapest tiers first until the view is back under the
  // soft threshold, whatever the band.
  kAuto,
  kPruneOnly,
  // Summarize the oldest zone even below the thresholds.
  kSummarize,
  // Drop the oldest live items from the view until it is under the hard
  // threshold.
  kTruncate,
};

// The modes a BuildContext call compacts in (by band, truncating the view
// as the last resort rather than refusing).
inline bool ForCall(CompactionMode mode) {
  return mode == CompactionMode::kByBand || mode == CompactionMode::kByBandBehindBackground;
}

struct PlanInput {
  const ContextSnapshot* snapshot = nullptr;
  ModelProfile profile;
  // Counts scale by the conversation's correction factor.
  bool approximate = false;
  // Pending input with token counts set.
  std::vector<ItemData> pending;
  const Tokenizer* tokenizer = nullptr;
  // CompactionMode::kSummarize only: summarize exactly through this
  // sequence (a task's end), whatever the recent buffer says; 0: the
  // planner's choice.
  int64_t through_sequence = 0;
  // A call's modes and kAhead only: tokens a call adds to the view after
  // compaction (the recalled section, at most its budget), counted against
  // the bands so that what it adds never lifts the view into the band it
  // would have been compacted for; the background's compaction ahead of
  // need counts it too, so that calls seldom have to make that room
  // themselves.
  int64_t headroom = 0;
};

// What emergency truncation leaves out of the view (storage keeps it all):
// live items first, then the oldest summaries, then the ledger.
struct Truncation {
  // Unpinned live items before this sequence; 0 for none.
  int64_t before_sequence = 0;
  // The oldest active chunks.
  size_t chunks = 0;
  // Set (to 0) when even the ledger must go.
  std::optional<int64_t> ledger_budget;

  bool any() const { return before_sequence != 0 || chunks != 0 || ledger_budget.has_value(); }
};

// One tier's part of a plan, in terms every reader of a plan shares. The
// tier that planned it carries it out (tier.h).
struct TierStep {
  Tier tier = Tier::kPrune;
  // Carrying it out changes what is stored; else only the view the call
  // returns.
  bool stores = true;
  // The live item it reaches: the new prune boundary (tool results through
  // it pruned), the last item a summary replaces, the first item a
  // truncated view keeps.
  int64_t sequence = 0;
  // The tokens it takes out of the view: what pruning saves, the span a
  // summary replaces, the chunks a fold merges.
  int64_t tokens = 0;
  // How many it covers, in its tier's unit: tool results pruned, chunks
  // folded, oldest summaries truncation leaves out.
  int count = 0;
  // Recent turns a summary leaves verbatim (after the degrading guard).
  int kept = 0;
  // The chunks a fold merges.
  std::vector<int64_t> chunks;
  // The view's tokens once the earlier steps are done, before this one.
  int64_t tokens_before = 0;
};

// What the next compaction will do, and what the view will cost after it.
struct CompactionPlan {
  Band band = Band::kNormal;
  int64_t tokens_before = 0;
  // The view as it stands, before any of the plan is applied.
  ContextView view_before;
  // What each tier will do, in the order they run; a tier with nothing to
  // do has no step.
  std::vector<TierStep> steps;
  // Projected view total after all of the above (summary sizes estimated).
  int64_t projected_tokens = 0;
  // Set when even system prompt, pinned content, pending input and output
  // reserve do not fit the window: names the largest part.
  std::optional<std::string> cannot_fit;
  // Set when the input's through_sequence cannot end a summary: why.
  std::optional<std::string> refused;
  // The plan in words, for InspectContext and the audit trail.
  std::vector<std::string> actions;

  bool empty() const { return steps.empty(); }
  // The step of `tier`; null when it has none.
  const TierStep* Step(Tier tier) const;
  // Whether carrying the plan out stores anything (and so takes the lease).
  bool Stores() const;
};

// A plan as the tiers make it, in the order they run, each seeing what the
// earlier ones planned (CompactionTier::Plan).
struct PlanState {
  PlanState(const PlanInput& input, CompactionMode mode, CompactionPlan& plan);

  const PlanInput& in;
  const CompactionMode mode;
  // The profile's thresholds, less what a call adds to the view after
  // compaction (PlanInput::headroom).
  int64_t soft = 0;
  int64_t hard = 0;
  int64_t emergency = 0;
  CompactionPlan& plan;
  // Tokens of the summary chunks the steps planned so far add (estimated).
  int64_t new_chunk_tokens = 0;

  // The view as the steps planned so far leave it, before any summary.
  const ContextView& view() const { return changed_ ? *changed_ : plan.view_before; }
  // Takes `v` as that view (the prune step's, tool results pruned).
  void SetView(ContextView v);

 private:
  std::optional<ContextView> changed_;
};

// `fraction` of the profile's context window, in tokens.
int64_t Threshold(const ModelProfile& profile, double fraction);

Band BandOf(int64_t total, const ModelProfile& profile);
// The band's name, as audit rows and spans give it: "normal", "soft",
// "hard", "emergency".
const char* BandName(Band band);

// Decides what each tier does (TierList(), in order; each plans its own
// step). Pure: reads the snapshot, changes nothing. Rules it keeps: a cut
// never separates a tool call from its result; system prompt, pinned
// instructions and pinned items are never summarized or truncated; the
// recent buffer (last N turns, at most T tokens) degrades N, N-1 ... 0 when
// it alone does not fit; the prune boundary only moves forward.
CompactionPlan PlanCompaction(const PlanInput& input, CompactionMode mode);

// The view of `input` with tool results up to `prune_boundary` pruned,
// truncated as `truncation` says.
ContextView ViewFor(const PlanInput& input, int64_t prune_boundary,
                    const Truncation& truncation = {});

// The estimated size of a summary of `tokens` tokens.
int64_t SummarySize(const ModelProfile& profile, int64_t tokens);

// safe[i]: a cut before live[i] (i == size: after everything) separates no
// tool call from its result.
std::vector<bool> SafeCuts(const std::vector<Item>& live);

// The latest safe cut in `live` at or before `limit`: the largest index i
// such that no tool call before i has its result, or is still waiting for
// it, at or after i. Exposed for tests.
size_t SafeCut(const std::vector<Item>& live, size_t limit);

// The truncation point for `view_input`: the smallest sequence such that
// leaving out the unpinned live items before it brings the view under
// `target` tokens, cutting only where SafeCut allows. 0 if nothing needs to
// go; the end of the live items if everything must.
int64_t TruncationPoint(const PlanInput& input, int64_t prune_boundary, int64_t target);

// What to leave out of the view to bring it under `target`: live items as
// TruncationPoint says, then, if that is not enough, the oldest summary
// chunks one by one, then the ledger. The system prompt, pinned content,
// standing instructions and pending input always stay.
Truncation PlanTruncation(const PlanInput& input, int64_t prune_boundary, int64_t target);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_PLANNER_H_
