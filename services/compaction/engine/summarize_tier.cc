// Tier 2: the oldest zone of live items becomes a summary chunk (added to
// the commit), with the zone's facts and standing instructions kept
// verbatim beside it.

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "services/compaction/summarizers/transcript.h"
#include "services/common/log.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

// Lost facts named in a completed row, at most.
constexpr size_t kMaxLostInAudit = 100;

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

// Where a mode summarizes (once pruning is not enough) and what its
// summary aims under.
struct SummaryTargets {
  int64_t from = 0;
  int64_t aim = 0;
};

SummaryTargets TargetsOf(const PlanState& state) {
  const bool serve_while_background =
      state.in.profile.hard_band_policy == HardBandPolicy::kServeWhileBackground;
  switch (state.mode) {
    case CompactionMode::kByBand: return {state.hard, state.soft};
    case CompactionMode::kByBandBehindBackground: return {state.emergency, state.hard};
    case CompactionMode::kAhead:
      if (serve_while_background) return {state.hard, state.hard};
      return {state.soft, state.soft};
    default: return {state.soft, state.soft};
  }
}

// The recent buffer of `z`: the last N turns, degraded while over its
// token cap.
int RecentTurns(const LiveZone& z, const ModelProfile& p) {
  int n = std::min<int>(p.recent_turns, static_cast<int>(z.turn_starts.size()));
  while (n > 0 && z.TokensFrom(z.RecentStart(n)) > p.recent_tokens) --n;
  return n;
}

// Where the summary zone ends (items [0, cut) of `z`), or nullopt when the
// plan says why there is none.
std::optional<size_t> ZoneEnd(const PlanState& state, const LiveZone& z, int recent,
                              int64_t ledger_room) {
  const PlanInput& in = state.in;
  const CompactionMode mode = state.mode;
  CompactionPlan& plan = state.plan;
  const std::vector<bool> safe = SafeCuts(z.live);
  size_t limit = z.RecentStart(recent);
  while (!safe[limit]) --limit;  // As SafeCut; safe[0] always holds.
  // Compact(summarize) takes everything older than the recent buffer, or
  // exactly what its boundary says.
  size_t cut = mode != CompactionMode::kSummarize && limit > 0
                   ? GoalCut(z, in.profile, safe, limit, plan.projected_tokens,
                             TargetsOf(state).aim, ledger_room)
                   : limit;
  if (mode == CompactionMode::kSummarize && in.through_sequence > 0) {
    cut = 0;
    while (cut < z.live.size() && z.live[cut].sequence <= in.through_sequence) ++cut;
    if (!safe[cut]) {
      plan.refused = absl::StrCat("a summary cannot end at item ", in.through_sequence,
                                  ": a tool call before it has its result after it");
      plan.actions.push_back(*plan.refused);
      return std::nullopt;
    }
  }
  if (in.through_sequence == 0) cut = AtTaskEnd(z.live, safe, cut, limit, mode);
  if (cut == 0) {
    plan.actions.push_back("nothing old enough to summarize: every live item is in the "
                           "recent buffer or in an open tool call");
    return std::nullopt;
  }
  return cut;
}

class SummarizeTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kSummarize; }

  // Summarizes the oldest zone of the view pruning leaves, when that view
  // is still past where the mode summarizes (Compact(summarize): always).
  // Summaries replace only what would not fit verbatim; the newest turns
  // stay verbatim as long as they can.
  void Plan(PlanState& state) const override {
    const CompactionMode mode = state.mode;
    if (mode == CompactionMode::kTruncate || mode == CompactionMode::kPruneOnly) return;
    CompactionPlan& plan = state.plan;
    if (mode != CompactionMode::kSummarize && plan.projected_tokens < TargetsOf(state).from) {
      return;
    }
    const ModelProfile& p = state.in.profile;
    const ContextView& current = state.view();
    const LiveZone z = ZoneOf(*state.in.snapshot, current);
    const int recent = RecentTurns(z, p);
    const int64_t ledger_room =
        FractionOfWindow(p, p.ledger.budget_fraction) - current.tokens.ledger;
    const std::optional<size_t> cut = ZoneEnd(state, z, recent, ledger_room);
    if (!cut.has_value()) return;
    TierStep step;
    step.tier = Tier::kSummarize;
    step.sequence = z.live[*cut - 1].sequence;
    step.kept = recent;
    int64_t messages = 0;
    for (size_t i = 0; i < *cut; ++i) {
      if (z.live[i].data.pinned) continue;
      step.tokens += z.Tokens(i);
      if (IsMessage(z.live[i])) messages += z.Tokens(i);
    }
    const int64_t summary = SummaryCost(p, step.tokens, messages, ledger_room);
    plan.projected_tokens = plan.projected_tokens - step.tokens + summary;
    plan.actions.push_back(absl::StrCat(
        "summarize items ", state.in.snapshot->conversation.summarized_through + 1, "-",
        step.sequence, " (", step.tokens, " tokens) into a chunk and ledger facts of about ",
        summary, " tokens, keeping ", z.live.size() - *cut, " live items verbatim"));
    state.new_chunk_tokens += SummarySize(p, step.tokens);
    plan.steps.push_back(std::move(step));
  }

  void Run(CompactionJob& job) const override {
    const TierStep* step = job.plan.Step(Tier::kSummarize);
    if (step == nullptr) return;
    Request r = Open(job, *step);
    absl::StatusOr<SummaryResult> summary =
        job.cancelled() ? absl::CancelledError("the caller cancelled")
                        : job.summarize(r.req, job.commit.events);
    if (!summary.ok()) {
      Fail(job, r, summary.status());
      return;
    }
    std::optional<Outcome> outcome = Judge(job, r, *summary);
    if (outcome.has_value()) Complete(job, r, *summary, std::move(*outcome));
  }

 private:
  // What the summarizer is asked, and what the step knows before it
  // answers.
  struct Request {
    const TierStep& step;
    // The view's tokens before the step.
    int64_t before = 0;
    TokenBreakdown before_tokens;
    int reasoning_summarized = 0;
    int reasoning_dropped = 0;
    // What the view will keep verbatim whatever the summary says.
    Extraction ledger;
    SummaryRequest req;
  };

  // A summary worth committing: its chunk and what it makes of the view.
  struct Outcome {
    SummaryChunk chunk;
    int64_t after = 0;
    double recall = 0;
  };

  // Starts the step: its audit row, and the request for the planned zone.
  static Request Open(CompactionJob& job, const TierStep& step) {
    Request r{step};
    r.before = step.tokens_before;
    r.before_tokens = job.step_tokens;
    job.steps.Started(Tier::kSummarize, r.before);
    job.commit.events.push_back(
        AuditRow("started", Tier::kSummarize, r.before, r.before,
                 DetailOf({{"from", job.commit.expected_summarized_through + 1},
                           {"through", step.sequence}})));
    std::vector<Item> zone = Zone(job, step.sequence, r.reasoning_summarized, r.reasoning_dropped);
    const std::map<std::string, std::string> tool_names =
        ToolNamesByCallId(job.snapshot.live_items);
    r.ledger = ExtractLedger(zone, tool_names, job.tokenizer);
    r.req = job.NewSummaryRequest();
    r.req.transcript = RenderTranscript(zone, tool_names);
    r.req.items = std::move(zone);
    r.req.tool_names = tool_names;
    for (const LedgerFact& f : r.ledger.facts) r.req.preserved.push_back(f.text);
    for (const LedgerFact& f : r.ledger.constraints) r.req.preserved.push_back(f.text);
    // A summary must be clearly smaller than what it replaces, and within
    // the chunk cap once the chat format's overhead is added.
    r.req.max_tokens = TextBudget(job.profile, step.tokens / 5);
    job.summary_text_budget = r.req.max_tokens;
    job.span_facts = r.ledger.facts;
    return r;
  }

  // The summarizer failed: the view may be truncated instead.
  static void Fail(CompactionJob& job, const Request& r, const absl::Status& status) {
    job.failed = true;
    job.failure = "summarizer unavailable";
    LogWarning("summarizer failed for ", job.snapshot.conversation.key.conversation_id, ": ",
               status.ToString());
    job.commit.events.push_back(
        AuditRow("failed", Tier::kSummarize, r.before, r.before,
                 DetailOf({{"reason", std::string(status.message())},
                           {"code", absl::StatusCodeToString(status.code())}})));
    job.steps.Failed(Tier::kSummarize, r.before, std::string(status.message()));
  }

  // The decision on what the summarizer wrote: cut to its budget, refused
  // when it says nothing or saves nothing, gated for recall. Nullopt when
  // it is not committed (the audit row says why).
  static std::optional<Outcome> Judge(CompactionJob& job, const Request& r,
                                      SummaryResult& summary) {
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    const int64_t max_tokens = r.req.max_tokens;
    std::string text = summary.text;
    int64_t tokens = CountSystemTokens(job.tokenizer, text, profile.per_message_tokens);
    if (tokens > max_tokens + profile.per_message_tokens) {
      events.push_back(AuditRow("summary_oversize", Tier::kSummarize, tokens, max_tokens,
                                DetailOf({{"model", summary.model}})));
      text = CutToTokens(text, max_tokens, job.tokenizer);
      tokens = CountSystemTokens(job.tokenizer, text, profile.per_message_tokens);
    }
    if (SaysNothing(text) || tokens >= r.step.tokens) {
      const char* why = SaysNothing(text) ? "the summary says nothing"
                                          : "the summary was no smaller than what it replaces";
      events.push_back(AuditRow("no_progress", Tier::kSummarize, r.step.tokens, tokens,
                                DetailOf({{"model", summary.model}, {"reason", why}})));
      job.steps.Failed(Tier::kSummarize, r.before, why);
      return std::nullopt;
    }
    Outcome o;
    o.chunk = ChunkOf(job.commit.expected_summarized_through + 1, r.step.sequence,
                      std::move(text), tokens, summary);
    o.chunk.lines = std::move(summary.lines);
    o.chunk.facts = r.ledger.facts;
    o.chunk.constraints = r.ledger.constraints;
    const size_t gated_at = events.size();
    o.recall = GateRecall(job.snapshot.active_chunks, r.ledger.facts, /*complete=*/true, profile,
                          job.tokenizer, o.chunk, events);
    o.after = WithChunk(job, o.chunk).tokens.total;
    // Facts stay verbatim, so a span made of little but facts does not
    // shrink. While the window has room that is no progress: nothing is
    // dropped to make a span smaller. Under real pressure (the view would
    // not fit) its oldest facts give way until the view shrinks, and the
    // audit row names each one.
    const bool pressure = r.before >= Threshold(profile, profile.emergency_threshold);
    if (o.after >= r.before && !o.chunk.facts.empty() && pressure) {
      GiveWayUnderPressure(job, r, gated_at, o);
    }
    if (o.after >= r.before) {
      events.push_back(AuditRow("no_progress", Tier::kSummarize, r.before, o.after,
                                DetailOf({{"model", o.chunk.summarizer_model}})));
      job.steps.Failed(Tier::kSummarize, r.before,
                       "the summary and its facts were no smaller than what they replace");
      return std::nullopt;
    }
    return o;
  }

  // The view once `chunk` replaces the zone, as the next commit stores it.
  static ContextView WithChunk(const CompactionJob& job, const SummaryChunk& chunk) {
    return ViewWithChunk(job, job.snapshot, chunk, job.commit.new_prune_boundary);
  }

  // Facts stay verbatim, so a span made of little but facts does not
  // shrink; under pressure its oldest facts give way until the view
  // shrinks (the audit row names each one), and the recall is gated again.
  static void GiveWayUnderPressure(CompactionJob& job, const Request& r, size_t gated_at,
                                   Outcome& o) {
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    SummaryChunk& chunk = o.chunk;
    int64_t excess = o.after - r.before + 1;
    size_t drop = 0;
    while (drop < chunk.facts.size() && excess > 0) excess -= chunk.facts[drop++].token_count;
    nlohmann::json dropped = nlohmann::json::array();
    for (size_t i = 0; i < drop; ++i) {
      dropped.push_back({{"sequence", chunk.facts[i].sequence}, {"text", chunk.facts[i].text}});
    }
    chunk.facts.erase(chunk.facts.begin(), chunk.facts.begin() + static_cast<long>(drop));
    // The recall gated above no longer holds: one low_recall row, for
    // the recall the chunk is committed with.
    events.erase(std::remove_if(events.begin() + static_cast<long>(gated_at), events.end(),
                                [](const CompactionEvent& e) { return e.event == "low_recall"; }),
                 events.end());
    events.push_back(AuditRow("facts_dropped", Tier::kSummarize, r.before, o.after,
                              DetailOf({{"facts", drop},
                                        {"reason", "the view would not fit"},
                                        {"dropped", std::move(dropped)}})));
    o.recall = GateRecall(job.snapshot.active_chunks, r.ledger.facts, /*complete=*/false,
                          profile, job.tokenizer, chunk, events);
    o.after = WithChunk(job, chunk).tokens.total;
  }

  // The `completed` audit row's detail for `chunk`, which replaces what
  // `step` planned.
  static nlohmann::json CompletedDetail(const SummaryChunk& chunk, const TierStep& step,
                                        const SummaryResult& summary, double recall) {
    nlohmann::json detail = {{"model", chunk.summarizer_model},
                             {"summarized_tokens", step.tokens},
                             {"summary_tokens", chunk.token_count},
                             {"facts", chunk.facts.size()},
                             {"constraints", chunk.constraints.size()},
                             {"recall", recall},
                             {"lost", chunk.lost.size()},
                             {"latency_ms", chunk.latency_ms}};
    if (!chunk.lost.empty()) {
      // Named in the audit row too, up to a bound that keeps it a row.
      nlohmann::json lost = nlohmann::json::array();
      for (size_t i = 0; i < chunk.lost.size() && i < kMaxLostInAudit; ++i) {
        lost.push_back({{"sequence", chunk.lost[i].sequence}, {"text", chunk.lost[i].text}});
      }
      detail["lost_facts"] = std::move(lost);
    }
    if (!summary.fallback_reason.empty()) detail["fallback_reason"] = summary.fallback_reason;
    return detail;
  }

  // The chunk goes into the commit, with the `completed` audit row (and the
  // reasoning one), and the step's progress.
  static void Complete(CompactionJob& job, const Request& r, const SummaryResult& summary,
                       Outcome o) {
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    const int64_t before = r.before;
    const int64_t after = o.after;
    const double recall = o.recall;
    SummaryChunk& chunk = o.chunk;
    const ContextView with_chunk = WithChunk(job, chunk);
    const TokenBreakdown summarized = with_chunk.tokens;
    chunk.lost = LostFacts(r.ledger.facts, with_chunk);
    events.push_back(WithBreakdown(
        AuditRow("completed", Tier::kSummarize, before, after,
                 DetailOf(CompletedDetail(chunk, r.step, summary, recall))),
        r.before_tokens, summarized));
    if (r.reasoning_summarized + r.reasoning_dropped > 0) {
      events.push_back(AuditRow(
          "reasoning_downgraded", Tier::kSummarize, before, after,
          DetailOf({{"summarized", r.reasoning_summarized},
                    {"dropped", r.reasoning_dropped},
                    {"policy",
                     profile.reasoning == ModelProfile::ReasoningPolicy::kDrop ? "drop" : "summarize"},
                    {"through", r.step.sequence}})));
    }
    job.commit.chunk = std::move(chunk);
    CompactionProgress p =
        CompletedStep(Tier::kSummarize, before, after, r.before_tokens, summarized);
    p.recall = recall;
    p.reasoning_summarized = r.reasoning_summarized;
    p.reasoning_dropped = r.reasoning_dropped;
    p.lost = job.commit.chunk->lost;
    for (const Item& item : job.snapshot.live_items) {
      if (item.data.kind == ItemKind::kReasoning && item.sequence > r.step.sequence) {
        ++p.reasoning_kept;
      }
    }
    job.steps.Completed(std::move(p));
  }

  // The items the summary replaces: the planned zone but its pinned items
  // and markers. Reasoning goes into the summary as the assistant's
  // attributed text, or nowhere, as the profile says; never back as
  // reasoning.
  static std::vector<Item> Zone(const CompactionJob& job, int64_t through, int& summarized,
                                int& dropped) {
    std::vector<Item> zone;
    for (const Item& item : job.snapshot.live_items) {
      if (item.sequence > through || item.data.pinned ||
          item.data.kind == ItemKind::kSummaryMarker) {
        continue;
      }
      if (item.data.kind == ItemKind::kReasoning) {
        if (job.profile.reasoning == ModelProfile::ReasoningPolicy::kDrop) {
          ++dropped;
          continue;
        }
        ++summarized;
      }
      zone.push_back(item);
    }
    return zone;
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewSummarizeTier() { return std::make_unique<SummarizeTier>(); }

}  // namespace convstate
