#include "services/compaction/engine/planner.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace convstate {
namespace {


ContextView View(const PlanInput& in, int64_t prune_boundary, const Truncation& truncation = {}) {
  ViewOptions options;
  options.prune_boundary = prune_boundary;
  options.truncate_before = truncation.before_sequence;
  options.truncate_chunks = truncation.chunks;
  options.ledger_budget = truncation.ledger_budget;
  options.tokenizer = in.tokenizer;
  return AssembleView(*in.snapshot, in.profile, in.approximate, in.pending, options);
}

// The estimated size of a summary of `tokens` tokens.
int64_t SummarySize(const ModelProfile& p, int64_t tokens) {
  return std::min(p.summarizer.max_chunk_tokens, tokens / 5 + 48);
}

// The estimated cost of summarizing a zone of `tokens` tokens, `message_tokens`
// of them in user and assistant messages: the chunk, and the facts it adds
// to the ledger (at most `ledger_room`).
int64_t SummaryCost(const ModelProfile& p, int64_t tokens, int64_t message_tokens,
                    int64_t ledger_room) {
  return SummarySize(p, tokens) + std::min(std::max<int64_t>(0, ledger_room), message_tokens / 2);
}

bool IsMessage(const Item& item) {
  return item.data.kind == ItemKind::kMessage &&
         (item.data.role == Role::kUser || item.data.role == Role::kAssistant);
}

bool IsMarker(const Item& item) { return item.data.kind == ItemKind::kSummaryMarker; }

}  // namespace

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

// safe[i]: a cut before live[i] (i == size: after everything) separates no
// tool call from its result. One pass: each call makes the cuts after it
// and up to its result (or to the end, if it has none yet) unsafe.
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
  const ContextView base = View(in, prune_boundary);
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
  if (View(in, prune_boundary, t).tokens.total < target) return t;
  // Every live item that may go is gone: the oldest summaries next, then
  // the ledger.
  const size_t chunks = in.snapshot->active_chunks.size();
  while (t.chunks < chunks) {
    ++t.chunks;
    if (View(in, prune_boundary, t).tokens.total < target) return t;
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

// Truncation: the view cut below the hard band (storage keeps everything).
void PlanTruncate(const PlanInput& in, CompactionPlan& plan) {
  const ModelProfile& p = in.profile;
  const int64_t boundary = in.snapshot->conversation.prune_boundary;
  plan.truncation = PlanTruncation(in, boundary, Threshold(p, p.hard_threshold));
  plan.truncate_before = plan.truncation.before_sequence;
  if (!plan.truncation.any()) return;
  plan.projected_tokens = View(in, boundary, plan.truncation).tokens.total;
  plan.actions.push_back(absl::StrCat(
      "truncate the view before item ", plan.truncate_before,
      plan.truncation.chunks > 0
          ? absl::StrCat(" and its ", plan.truncation.chunks, " oldest summaries")
          : "",
      " (storage keeps them)"));
}

// Tier 1: prune old tool results. Returns the view after any pruning.
ContextView PlanPrune(const PlanInput& in, CompactionMode mode, int64_t target,
                      CompactionPlan& plan) {
  const ContextSnapshot& snap = *in.snapshot;
  const ModelProfile& p = in.profile;
  const Conversation& c = snap.conversation;
  std::vector<const Item*> results;
  const auto names = ToolNamesByCallId(snap.live_items);
  int64_t result_tokens = 0;
  for (const Item& item : snap.live_items) {
    if (item.data.kind != ItemKind::kToolResult || item.data.pinned) continue;
    if (item.sequence <= c.prune_boundary) continue;  // Already pruned.
    std::string name = item.data.tool_name;
    if (name.empty() && names.contains(item.data.tool_call_id)) name = names.at(item.data.tool_call_id);
    const auto& keep = p.tool_pruning.keep_tools;
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    results.push_back(&item);
    result_tokens += item.data.token_count;
  }
  const bool prune_wanted = mode == CompactionMode::kPruneOnly ||
                            result_tokens > p.tool_pruning.trigger_tokens ||
                            plan.tokens_before >= target;
  // The most recent results stay: at most keep_recent of them, and only
  // while they fit their share of the window (old tool output is bulky and
  // mostly redundant; messages carry the facts).
  const size_t max_keep = static_cast<size_t>(std::max(0, p.tool_pruning.keep_recent));
  const int64_t keep_cap = FractionOfWindow(p, p.tool_pruning.keep_recent_fraction);
  size_t keep_recent = 0;
  for (int64_t kept = 0; keep_recent < std::min(max_keep, results.size()); ++keep_recent) {
    kept += results[results.size() - 1 - keep_recent]->data.token_count;
    if (kept > keep_cap) break;
  }
  if (!prune_wanted || results.size() <= keep_recent) return plan.view_before;
  const int64_t boundary = results[results.size() - keep_recent - 1]->sequence;
  ContextView pruned = View(in, boundary);
  const int64_t savings = plan.view_before.tokens.total - pruned.tokens.total;
  if (savings < p.tool_pruning.min_savings_tokens) return plan.view_before;
  plan.prune_boundary = boundary;
  plan.prune_savings = savings;
  plan.pruned_results = static_cast<int>(results.size() - keep_recent);
  plan.projected_tokens = pruned.tokens.total;
  plan.actions.push_back(absl::StrCat("prune ", plan.pruned_results,
                                      " old tool results through item ", boundary, " (",
                                      savings, " tokens)"));
  return pruned;
}

// The live items (markers left out) of `in`, with what each costs in
// `current` and where turns start.
struct LiveZone {
  std::vector<Item> live;
  std::map<int64_t, int64_t> tokens_of;  // sequence -> tokens in the view
  std::vector<size_t> turn_starts;

  // Where the last `turns` turns start.
  size_t RecentStart(int turns) const {
    return turns == 0 ? live.size() : turn_starts[turn_starts.size() - turns];
  }
  int64_t TokensFrom(size_t start) const {
    int64_t sum = 0;
    for (size_t i = start; i < live.size(); ++i) sum += Tokens(i);
    return sum;
  }
  int64_t Tokens(size_t i) const {
    auto it = tokens_of.find(live[i].sequence);
    return it == tokens_of.end() ? 0 : it->second;
  }
};

LiveZone ZoneOf(const ContextSnapshot& snap, const ContextView& current) {
  LiveZone z;
  for (const ViewEntry& e : current.entries) {
    if (e.section == Section::kLive) z.tokens_of[e.sequence] = e.token_count;
  }
  for (const Item& item : snap.live_items) {
    if (!IsMarker(item)) z.live.push_back(item);
  }
  for (size_t i = 0; i < z.live.size(); ++i) {
    if (StartsTurn(z.live[i].data)) z.turn_starts.push_back(i);
  }
  return z;
}

// Where the summary zone should end (items [0, cut) of the live zone) to
// bring the view just under `target` with room for one more typical turn,
// at a turn's start, no later than `limit`: recent turns stay verbatim as
// long as possible.
size_t GoalCut(const LiveZone& z, const ModelProfile& p, const std::vector<bool>& safe,
               size_t limit, int64_t projected, int64_t target, int64_t ledger_room) {
  // A typical turn, as it stays in the view: its messages and calls (old
  // tool output is pruned soon), capped at 5% of the window.
  int64_t turn_tokens = 0;
  for (size_t i = z.turn_starts.empty() ? z.live.size() : z.turn_starts.front();
       i < z.live.size(); ++i) {
    if (z.live[i].data.kind != ItemKind::kToolResult) turn_tokens += z.Tokens(i);
  }
  const int64_t typical_turn =
      z.turn_starts.empty()
          ? 0
          : std::min<int64_t>(turn_tokens / static_cast<int64_t>(z.turn_starts.size()),
                              FractionOfWindow(p, 0.05));
  const int64_t goal = target - typical_turn;
  int64_t zone = 0, messages = 0;
  for (size_t i = 1; i <= limit; ++i) {
    const Item& item = z.live[i - 1];
    if (!item.data.pinned) {
      zone += z.Tokens(i - 1);
      if (IsMessage(item)) messages += z.Tokens(i - 1);
    }
    const bool at_turn = i == limit || StartsTurn(z.live[i].data);
    if (!safe[i] || !at_turn) continue;
    if (projected - zone + SummaryCost(p, zone, messages, ledger_room) < goal) return i;
  }
  return limit;
}

// Whether a summary cut before live[i] ends a task (its previous item was
// appended with task_boundary).
bool EndsTask(const std::vector<Item>& live, size_t i) {
  if (i == 0) return false;
  auto it = live[i - 1].data.metadata.find(kTaskBoundaryKey);
  return it != live[i - 1].data.metadata.end() && it->second == "true";
}

// `cut` moved to a task's end when one is near: the first at or after it
// within `limit` (the summary takes the rest of the task), else, for
// Compact(summarize), which takes everything up to the limit, the last one
// before it (the task under way stays verbatim).
size_t AtTaskEnd(const std::vector<Item>& live, const std::vector<bool>& safe, size_t cut,
                 size_t limit, CompactionMode mode) {
  for (size_t i = cut; i <= limit && i <= live.size(); ++i) {
    if (i > 0 && safe[i] && EndsTask(live, i)) return i;
  }
  if (mode != CompactionMode::kSummarize) return cut;
  for (size_t i = std::min(cut, live.size()); i > 0; --i) {
    if (safe[i] && EndsTask(live, i)) return i;
  }
  return cut;
}

// Tier 2: summarize the oldest zone of `current`.
void PlanSummarize(const PlanInput& in, CompactionMode mode, int64_t target,
                   const ContextView& current, CompactionPlan& plan) {
  const ModelProfile& p = in.profile;
  const Conversation& c = in.snapshot->conversation;
  const LiveZone z = ZoneOf(*in.snapshot, current);
  // The recent buffer: last N turns, degraded while over its token cap.
  int n = std::min<int>(p.recent_turns, static_cast<int>(z.turn_starts.size()));
  while (n > 0 && z.TokensFrom(z.RecentStart(n)) > p.recent_tokens) --n;
  plan.recent_turns_kept = n;
  const std::vector<bool> safe = SafeCuts(z.live);
  size_t limit = z.RecentStart(n);
  while (!safe[limit]) --limit;  // As SafeCut; safe[0] always holds.
  const int64_t ledger_room =
      FractionOfWindow(p, p.ledger.budget_fraction) - current.tokens.ledger;
  // Compact(summarize) takes everything older than the recent buffer, or
  // exactly what its boundary says.
  size_t cut = mode != CompactionMode::kSummarize && limit > 0
                   ? GoalCut(z, p, safe, limit, plan.projected_tokens, target, ledger_room)
                   : limit;
  if (mode == CompactionMode::kSummarize && in.through_sequence > 0) {
    cut = 0;
    while (cut < z.live.size() && z.live[cut].sequence <= in.through_sequence) ++cut;
    if (!safe[cut]) {
      plan.refused = absl::StrCat("a summary cannot end at item ", in.through_sequence,
                                  ": a tool call before it has its result after it");
      plan.actions.push_back(*plan.refused);
      return;
    }
  }
  if (in.through_sequence == 0) cut = AtTaskEnd(z.live, safe, cut, limit, mode);
  if (cut == 0) {
    plan.actions.push_back("nothing old enough to summarize: every live item is in the "
                           "recent buffer or in an open tool call");
    return;
  }
  plan.summarize = true;
  plan.summarize_through = z.live[cut - 1].sequence;
  int64_t messages = 0;
  for (size_t i = 0; i < cut; ++i) {
    if (z.live[i].data.pinned) continue;
    plan.summarize_tokens += z.Tokens(i);
    if (IsMessage(z.live[i])) messages += z.Tokens(i);
  }
  const int64_t summary = SummaryCost(p, plan.summarize_tokens, messages, ledger_room);
  plan.projected_tokens = plan.projected_tokens - plan.summarize_tokens + summary;
  plan.actions.push_back(absl::StrCat(
      "summarize items ", c.summarized_through + 1, "-", plan.summarize_through, " (",
      plan.summarize_tokens, " tokens) into a chunk and ledger facts of about ", summary,
      " tokens, keeping ", z.live.size() - cut, " live items verbatim"));
}

// Tier 3: fold chunks when they pass their budget.
void PlanFold(const PlanInput& in, CompactionPlan& plan) {
  const ContextSnapshot& snap = *in.snapshot;
  const ModelProfile& p = in.profile;
  int64_t chunk_tokens = 0;
  for (const SummaryChunk& chunk : snap.active_chunks) chunk_tokens += chunk.token_count;
  if (plan.summarize) chunk_tokens += SummarySize(p, plan.summarize_tokens);
  const int64_t budget = static_cast<int64_t>(p.summarizer.chunk_budget_fraction *
                                              static_cast<double>(p.context_window));
  if (chunk_tokens <= budget || snap.active_chunks.size() < 2) return;
  int64_t folded = 0;
  for (const SummaryChunk& chunk : snap.active_chunks) {
    plan.fold.push_back(chunk.chunk_id);
    folded += chunk.token_count;
  }
  const int64_t merged = SummarySize(p, folded);
  plan.projected_tokens = plan.projected_tokens - folded + merged;
  plan.actions.push_back(absl::StrCat("fold ", plan.fold.size(), " chunks (", folded,
                                      " tokens, over the ", budget,
                                      "-token budget) into one of about ", merged));
}

}  // namespace

CompactionPlan PlanCompaction(const PlanInput& in, CompactionMode mode) {
  const ModelProfile& p = in.profile;
  const Conversation& c = in.snapshot->conversation;
  CompactionPlan plan;
  plan.prune_boundary = c.prune_boundary;
  plan.view_before = View(in, c.prune_boundary);
  plan.tokens_before = plan.view_before.tokens.total;
  plan.projected_tokens = plan.tokens_before;
  plan.band = BandOf(plan.tokens_before, p);
  if (std::string why = CannotFit(plan.view_before, p); !why.empty()) {
    plan.cannot_fit = std::move(why);
    return plan;
  }

  // Where each mode starts to act, where it summarizes (once pruning is
  // not enough) and what a summary aims under; a call counts what it adds
  // after compaction against each.
  const int64_t headroom = ForCall(mode) ? std::max<int64_t>(0, in.headroom) : 0;
  const int64_t soft = Threshold(p, p.soft_threshold) - headroom;
  const int64_t hard = Threshold(p, p.hard_threshold) - headroom;
  const int64_t emergency = Threshold(p, p.emergency_threshold) - headroom;
  const bool serve_while_background = p.hard_band_policy == HardBandPolicy::kServeWhileBackground;
  Band act_from = Band::kNormal;
  int64_t summarize_at = soft;
  int64_t aim = soft;
  switch (mode) {
    case CompactionMode::kByBand:
      act_from = Band::kHard;
      summarize_at = hard;
      break;
    case CompactionMode::kByBandBehindBackground:
      act_from = Band::kEmergency;
      summarize_at = emergency;
      aim = hard;
      break;
    case CompactionMode::kAhead:
      act_from = Band::kSoft;
      if (serve_while_background) summarize_at = aim = hard;
      break;
    default:
      break;
  }
  if (BandOf(plan.tokens_before + headroom, p) < act_from) return plan;
  if (mode == CompactionMode::kTruncate) {
    PlanTruncate(in, plan);
    return plan;
  }
  const ContextView current = PlanPrune(in, mode, soft, plan);
  if (mode == CompactionMode::kPruneOnly) return plan;
  // Summaries replace only what would not fit verbatim after pruning; the
  // newest turns stay verbatim as long as they can.
  if (mode == CompactionMode::kSummarize || plan.projected_tokens >= summarize_at) {
    PlanSummarize(in, mode, aim, current, plan);
  }
  PlanFold(in, plan);
  return plan;
}

}  // namespace convstate
