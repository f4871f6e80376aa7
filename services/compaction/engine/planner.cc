#include "services/compaction/engine/planner.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/compaction/engine/tier.h"

namespace convstate {

ContextView ViewFor(const PlanInput& in, int64_t prune_boundary, const Truncation& truncation) {
  ViewOptions options;
  options.prune_boundary = prune_boundary;
  options.truncate_before = truncation.before_sequence;
  options.truncate_chunks = truncation.chunks;
  options.ledger_budget = truncation.ledger_budget;
  options.tokenizer = in.tokenizer;
  return AssembleView(*in.snapshot, in.profile, in.approximate, in.pending, options);
}

int64_t SummarySize(const ModelProfile& p, int64_t tokens) {
  return std::min(p.summarizer.max_chunk_tokens, tokens / 5 + 48);
}

int64_t Threshold(const ModelProfile& p, double fraction) {
  return static_cast<int64_t>(fraction * static_cast<double>(p.context_window));
}

const char* BandName(Band band) {
  switch (band) {
    case Band::kNormal: return "normal";
    case Band::kSoft: return "soft";
    case Band::kHard: return "hard";
    case Band::kEmergency: return "emergency";
  }
  return "?";
}

Band BandOf(int64_t total, const ModelProfile& p) {
  if (total < p.token_floor) return Band::kNormal;
  if (total >= Threshold(p, p.emergency_threshold)) return Band::kEmergency;
  if (total >= Threshold(p, p.hard_threshold)) return Band::kHard;
  if (total >= Threshold(p, p.soft_threshold)) return Band::kSoft;
  return Band::kNormal;
}

// One pass: each call makes the cuts after it and up to its result (or to
// the end, if it has none yet) unsafe.
std::vector<bool> SafeCuts(const std::vector<Item>& live) {
  const size_t n = live.size();
  std::map<std::string, size_t> result_at;
  for (size_t i = 0; i < n; ++i) {
    if (live[i].data.kind == ItemKind::kToolResult) result_at[live[i].data.tool_call_id] = i;
  }
  std::vector<int> open(n + 2, 0);  // Difference array over cut positions.
  for (size_t c = 0; c < n; ++c) {
    if (live[c].data.kind != ItemKind::kToolCall) continue;
    auto it = result_at.find(live[c].data.tool_call_id);
    // As in SafeCut: a result stored before its call closes nothing after.
    if (it != result_at.end() && it->second < c) continue;
    const size_t last_unsafe = it == result_at.end() ? n : it->second;
    open[c + 1] += 1;
    open[last_unsafe + 1] -= 1;
  }
  std::vector<bool> safe(n + 1);
  int depth = 0;
  for (size_t i = 0; i <= n; ++i) {
    depth += open[i];
    safe[i] = depth == 0;
  }
  return safe;
}

size_t SafeCut(const std::vector<Item>& live, size_t limit) {
  const std::vector<bool> safe = SafeCuts(live);
  size_t cut = std::min(limit, live.size());
  while (!safe[cut]) --cut;  // safe[0] always holds.
  return cut;
}

int64_t TruncationPoint(const PlanInput& in, int64_t prune_boundary, int64_t target) {
  const std::vector<Item>& live = in.snapshot->live_items;
  const ContextView base = ViewFor(in, prune_boundary);
  if (base.tokens.total < target) return 0;
  // Leaving out an entry removes exactly its (scaled) count from the total,
  // so one view is enough: subtract as the cut moves forward.
  std::map<int64_t, int64_t> tokens_of;
  for (const ViewEntry& e : base.entries) {
    if (e.section == Section::kLive) tokens_of[e.sequence] = e.token_count;
  }
  const std::vector<bool> safe = SafeCuts(live);
  int64_t total = base.tokens.total;
  for (size_t i = 1; i <= live.size(); ++i) {
    const Item& dropped = live[i - 1];
    if (!dropped.data.pinned) total -= tokens_of[dropped.sequence];  // Markers count 0.
    if (!safe[i]) continue;
    if (total < target) return i < live.size() ? live[i].sequence : live.back().sequence + 1;
  }
  return live.empty() ? 0 : live.back().sequence + 1;
}

Truncation PlanTruncation(const PlanInput& in, int64_t prune_boundary, int64_t target) {
  Truncation t;
  t.before_sequence = TruncationPoint(in, prune_boundary, target);
  if (ViewFor(in, prune_boundary, t).tokens.total < target) return t;
  // Every live item that may go is gone: the oldest summaries next, then
  // the ledger.
  const size_t chunks = in.snapshot->active_chunks.size();
  while (t.chunks < chunks) {
    ++t.chunks;
    if (ViewFor(in, prune_boundary, t).tokens.total < target) return t;
  }
  t.ledger_budget = 0;
  return t;
}

namespace {

// Why the parts of the view nothing can remove pass the window; empty when
// they fit.
std::string CannotFit(const ContextView& now, const ModelProfile& p) {
  const int64_t fixed = now.tokens.system + now.tokens.pinned + now.tokens.pending +
                        now.tokens.output_reserve;
  if (fixed <= p.context_window) return "";
  const std::pair<const char*, int64_t> parts[] = {
      {"system prompt", now.tokens.system},
      {"pinned instructions and items", now.tokens.pinned},
      {"pending input", now.tokens.pending},
      {"output reserve", now.tokens.output_reserve}};
  const auto* largest =
      std::max_element(std::begin(parts), std::end(parts),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return absl::StrCat(largest->first, " (", largest->second,
                      " tokens) does not fit: system, pinned, pending and reserve need ", fixed,
                      " of a ", p.context_window, "-token window");
}

// The band from which `mode` acts at all.
Band ActsFrom(CompactionMode mode) {
  switch (mode) {
    case CompactionMode::kByBand: return Band::kHard;
    case CompactionMode::kByBandBehindBackground: return Band::kEmergency;
    case CompactionMode::kAhead: return Band::kSoft;
    default: return Band::kNormal;
  }
}

// What a call adds to the view after compaction, counted against the bands
// (PlanInput::headroom): by the call, and by the background's compaction
// ahead of need, so that the call finds the room made; nothing for the
// other modes.
int64_t HeadroomOf(const PlanInput& in, CompactionMode mode) {
  return ForCall(mode) || mode == CompactionMode::kAhead ? std::max<int64_t>(0, in.headroom) : 0;
}

}  // namespace

const TierStep* CompactionPlan::Step(Tier tier) const {
  for (const TierStep& s : steps) {
    if (s.tier == tier) return &s;
  }
  return nullptr;
}

bool CompactionPlan::Stores() const {
  return std::any_of(steps.begin(), steps.end(), [](const TierStep& s) { return s.stores; });
}

PlanState::PlanState(const PlanInput& input, CompactionMode m, CompactionPlan& p)
    : in(input), mode(m), plan(p) {
  const int64_t headroom = HeadroomOf(input, m);
  soft = Threshold(input.profile, input.profile.soft_threshold) - headroom;
  hard = Threshold(input.profile, input.profile.hard_threshold) - headroom;
  emergency = Threshold(input.profile, input.profile.emergency_threshold) - headroom;
}

void PlanState::SetView(ContextView v) { changed_ = std::move(v); }

CompactionPlan PlanCompaction(const PlanInput& in, CompactionMode mode) {
  const ModelProfile& p = in.profile;
  const Conversation& c = in.snapshot->conversation;
  CompactionPlan plan;
  plan.view_before = ViewFor(in, c.prune_boundary);
  plan.tokens_before = plan.view_before.tokens.total;
  plan.projected_tokens = plan.tokens_before;
  plan.band = BandOf(plan.tokens_before, p);
  if (std::string why = CannotFit(plan.view_before, p); !why.empty()) {
    plan.cannot_fit = std::move(why);
    return plan;
  }
  if (BandOf(plan.tokens_before + HeadroomOf(in, mode), p) < ActsFrom(mode)) return plan;
  PlanState state(in, mode, plan);
  for (const std::unique_ptr<CompactionTier>& tier : Tiers()) {
    const size_t planned = plan.steps.size();
    const int64_t before = plan.projected_tokens;
    tier->Plan(state);
    if (plan.steps.size() > planned) plan.steps.back().tokens_before = before;
  }
  return plan;
}

}  // namespace convstate
