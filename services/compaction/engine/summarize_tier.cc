// Tier 2: the oldest zone of live items becomes a summary chunk (added to
// the commit), with the zone's facts and standing instructions kept
// verbatim beside it.

#include <algorithm>
#include <map>
#include <memory>

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

class SummarizeTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kSummarize; }

  void Run(CompactionJob& job) const override {
    const CompactionPlan& plan = job.plan;
    if (!plan.summarize) return;
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    const TokenBreakdown summarize_before = job.step_tokens;
    const int64_t before = plan.tokens_before - plan.prune_savings;
    job.steps.Started(Tier::kSummarize, before);
    events.push_back(AuditRow("started", Tier::kSummarize, before, before,
                              DetailOf({{"from", job.commit.expected_summarized_through + 1},
                                        {"through", plan.summarize_through}})));
    int reasoning_summarized = 0;
    int reasoning_dropped = 0;
    std::vector<Item> zone = Zone(job, reasoning_summarized, reasoning_dropped);
    // What the view will keep verbatim whatever the summary says.
    const std::map<std::string, std::string> tool_names =
        ToolNamesByCallId(job.snapshot.live_items);
    Extraction ledger = ExtractLedger(zone, tool_names, job.tokenizer);
    SummaryRequest req = job.NewSummaryRequest();
    req.transcript = RenderTranscript(zone, tool_names);
    req.items = std::move(zone);
    req.tool_names = tool_names;
    for (const LedgerFact& f : ledger.facts) req.preserved.push_back(f.text);
    for (const LedgerFact& f : ledger.constraints) req.preserved.push_back(f.text);
    // A summary must be clearly smaller than what it replaces, and within
    // the chunk cap once the chat format's overhead is added.
    req.max_tokens = TextBudget(profile, plan.summarize_tokens / 5);
    job.summary_text_budget = req.max_tokens;
    job.span_facts = ledger.facts;
    absl::StatusOr<SummaryResult> summary =
        job.cancelled() ? absl::CancelledError("the caller cancelled") : job.summarize(req, events);
    if (!summary.ok()) {
      job.failed = true;
      job.failure = "summarizer unavailable";
      LogWarning("summarizer failed for ", job.snapshot.conversation.key.conversation_id, ": ",
                 summary.status().ToString());
      events.push_back(AuditRow("failed", Tier::kSummarize, before, before,
                                DetailOf({{"reason", std::string(summary.status().message())},
                                          {"code", absl::StatusCodeToString(summary.status().code())}})));
      job.steps.Failed(Tier::kSummarize, before, std::string(summary.status().message()));
      return;
    }
    std::string text = summary->text;
    int64_t tokens = CountSystemTokens(job.tokenizer, text, profile.per_message_tokens);
    if (tokens > req.max_tokens + profile.per_message_tokens) {
      events.push_back(AuditRow("summary_oversize", Tier::kSummarize, tokens, req.max_tokens,
                                DetailOf({{"model", summary->model}})));
      text = CutToTokens(text, req.max_tokens, job.tokenizer);
      tokens = CountSystemTokens(job.tokenizer, text, profile.per_message_tokens);
    }
    if (SaysNothing(text) || tokens >= plan.summarize_tokens) {
      const char* why = SaysNothing(text) ? "the summary says nothing"
                                          : "the summary was no smaller than what it replaces";
      events.push_back(AuditRow("no_progress", Tier::kSummarize, plan.summarize_tokens, tokens,
                                DetailOf({{"model", summary->model}, {"reason", why}})));
      job.steps.Failed(Tier::kSummarize, before, why);
      return;
    }
    SummaryChunk chunk = ChunkOf(job.commit.expected_summarized_through + 1,
                                 plan.summarize_through, std::move(text), tokens, *summary);
    chunk.lines = std::move(summary->lines);
    chunk.facts = ledger.facts;
    chunk.constraints = std::move(ledger.constraints);
    const size_t gated_at = events.size();
    double recall = GateRecall(job.snapshot.active_chunks, ledger.facts, /*complete=*/true,
                               profile, job.tokenizer, chunk, events);
    int64_t after = ViewWithChunk(job, job.snapshot, chunk, plan.prune_boundary).tokens.total;
    // Facts stay verbatim, so a span made of little but facts does not
    // shrink. While the window has room that is no progress: nothing is
    // dropped to make a span smaller. Under real pressure (the view would
    // not fit) its oldest facts give way until the view shrinks, and the
    // audit row names each one.
    const bool pressure = before >= Threshold(profile, profile.emergency_threshold);
    if (after >= before && !chunk.facts.empty() && pressure) {
      after = GiveWayUnderPressure(job, ledger, before, after, gated_at, chunk, recall);
    }
    if (after >= before) {
      events.push_back(AuditRow("no_progress", Tier::kSummarize, before, after,
                                DetailOf({{"model", chunk.summarizer_model}})));
      job.steps.Failed(Tier::kSummarize, before,
                       "the summary and its facts were no smaller than what they replace");
      return;
    }
    Complete(job, std::move(chunk), ledger, *summary, Outcome{before, after, recall},
             summarize_before, reasoning_summarized, reasoning_dropped);
  }

 private:
  struct Outcome {
    int64_t before = 0;
    int64_t after = 0;
    double recall = 0;
  };

  // Facts stay verbatim, so a span made of little but facts does not
  // shrink; under pressure its oldest facts give way until the view
  // shrinks (the audit row names each one), and the recall is gated again.
  // Returns the view's tokens with the chunk as it now is.
  int64_t GiveWayUnderPressure(CompactionJob& job, const Extraction& ledger, int64_t before,
                               int64_t after, size_t gated_at, SummaryChunk& chunk,
                               double& recall) const {
    const CompactionPlan& plan = job.plan;
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    int64_t excess = after - before + 1;
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
    events.push_back(AuditRow("facts_dropped", Tier::kSummarize, before, after,
                              DetailOf({{"facts", drop},
                                        {"reason", "the view would not fit"},
                                        {"dropped", std::move(dropped)}})));
    recall = GateRecall(job.snapshot.active_chunks, ledger.facts, /*complete=*/false, profile,
                        job.tokenizer, chunk, events);
    after = ViewWithChunk(job, job.snapshot, chunk, plan.prune_boundary).tokens.total;
    return after;
  }

  // The chunk goes into the commit, with the `completed` audit row (and the
  // reasoning one), and the step's progress.
  void Complete(CompactionJob& job, SummaryChunk chunk, const Extraction& ledger,
                const SummaryResult& result, const Outcome& outcome,
                const TokenBreakdown& summarize_before, int reasoning_summarized,
                int reasoning_dropped) const {
    const CompactionPlan& plan = job.plan;
    const ModelProfile& profile = job.profile;
    std::vector<CompactionEvent>& events = job.commit.events;
    const int64_t before = outcome.before;
    const int64_t after = outcome.after;
    const double recall = outcome.recall;
    const SummaryResult* summary = &result;
    const ContextView with_chunk = ViewWithChunk(job, job.snapshot, chunk, plan.prune_boundary);
    const TokenBreakdown summarized = with_chunk.tokens;
    chunk.lost = LostFacts(ledger.facts, with_chunk);
    nlohmann::json detail = {{"model", chunk.summarizer_model},
                             {"summarized_tokens", plan.summarize_tokens},
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
    if (!summary->fallback_reason.empty()) detail["fallback_reason"] = summary->fallback_reason;
    events.push_back(WithBreakdown(
        AuditRow("completed", Tier::kSummarize, before, after, DetailOf(detail)),
        summarize_before, summarized));
    if (reasoning_summarized + reasoning_dropped > 0) {
      events.push_back(AuditRow(
          "reasoning_downgraded", Tier::kSummarize, before, after,
          DetailOf({{"summarized", reasoning_summarized},
                    {"dropped", reasoning_dropped},
                    {"policy",
                     profile.reasoning == ModelProfile::ReasoningPolicy::kDrop ? "drop" : "summarize"},
                    {"through", plan.summarize_through}})));
    }
    job.commit.chunk = std::move(chunk);
    CompactionProgress p;
    p.tier = Tier::kSummarize;
    p.tokens_before = before;
    p.tokens_after = after;
    p.recall = recall;
    p.before_tokens = summarize_before;
    p.after_tokens = summarized;
    p.reasoning_summarized = reasoning_summarized;
    p.reasoning_dropped = reasoning_dropped;
    p.lost = job.commit.chunk->lost;
    for (const Item& item : job.snapshot.live_items) {
      if (item.data.kind == ItemKind::kReasoning && item.sequence > plan.summarize_through) {
        ++p.reasoning_kept;
      }
    }
    job.steps.Completed(std::move(p));
  }

  // The items the summary replaces: the planned zone but its pinned items
  // and markers. Reasoning goes into the summary as the assistant's
  // attributed text, or nowhere, as the profile says; never back as
  // reasoning.
  static std::vector<Item> Zone(const CompactionJob& job, int& summarized, int& dropped) {
    std::vector<Item> zone;
    for (const Item& item : job.snapshot.live_items) {
      if (item.sequence > job.plan.summarize_through || item.data.pinned ||
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
