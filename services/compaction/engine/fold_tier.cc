// Tier 3: active chunks that outgrew their budget are merged into one that
// supersedes them, from their structured content (lines, facts, standing
// instructions), never from their rendered text. Stored on its own, after
// what the earlier tiers committed.

#include <algorithm>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "services/compaction/summarizers/transcript.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

class FoldTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kFold; }
  bool NeedsStoredState() const override { return true; }

  void Run(CompactionJob& job) const override {
    const bool wanted = job.changed || job.mode == CompactionMode::kAuto ||
                        job.mode == CompactionMode::kAhead ||
                        job.mode == CompactionMode::kSummarize;
    if (job.failed || !wanted || !job.lease.has_value()) return;
    const CompactionPlan again = PlanCompaction(job.InputFor(job.snapshot), CompactionMode::kSummarize);
    if (again.fold.empty()) return;
    std::vector<SummaryChunk> folding;
    std::vector<SummaryChunk> staying;
    for (const SummaryChunk& chunk : job.snapshot.active_chunks) {
      const bool fold =
          std::find(again.fold.begin(), again.fold.end(), chunk.chunk_id) != again.fold.end();
      (fold ? folding : staying).push_back(chunk);
    }
    std::sort(folding.begin(), folding.end(), [](const SummaryChunk& a, const SummaryChunk& b) {
      return a.from_sequence < b.from_sequence;
    });
    int64_t folded_tokens = 0;
    for (const SummaryChunk& chunk : folding) folded_tokens += chunk.token_count;
    const TokenBreakdown fold_before = job.ViewOf(job.snapshot).tokens;
    const int64_t before = fold_before.total;
    job.steps.Started(Tier::kFold, before);
    SummaryRequest req = job.NewSummaryRequest();
    req.transcript = RenderChunks(folding);
    req.merge = MergeLines(folding);
    // Facts and instructions, each once, in order. The fold keeps the
    // facts the ledger would rank highest, up to twice its budget, so that
    // what every view ranks stays bounded however long the conversation
    // grows (ExpandSummary still has every item).
    SummaryChunk merged_content;
    std::vector<const SummaryChunk*> folded;
    for (const SummaryChunk& chunk : folding) folded.push_back(&chunk);
    for (const LedgerFact* f :
         SelectLedger(folded, 2 * FractionOfWindow(job.profile, job.profile.ledger.budget_fraction))
             .shown) {
      merged_content.facts.push_back(*f);
    }
    merged_content.constraints = CollectConstraints(folded);
    for (const LedgerFact& f : merged_content.facts) req.preserved.push_back(f.text);
    req.max_tokens = TextBudget(job.profile, folded_tokens / 2);
    std::vector<CompactionEvent> ignored;
    absl::StatusOr<SummaryResult> merged =
        job.cancelled() ? absl::CancelledError("the caller cancelled") : job.summarize(req, ignored);
    if (!merged.ok()) {
      job.failed = true;
      job.failure = "summarizer unavailable";
      job.events.push_back(AuditRow("failed", Tier::kFold, before, before,
                                    DetailOf({{"reason", std::string(merged.status().message())}})));
      job.steps.Failed(Tier::kFold, before, std::string(merged.status().message()));
      return;
    }
    std::string text = CutToTokens(merged->text, req.max_tokens, job.tokenizer);
    const int64_t tokens = CountSystemTokens(job.tokenizer, text, job.profile.per_message_tokens);
    if (tokens >= folded_tokens) {
      job.events.push_back(AuditRow("no_progress", Tier::kFold, folded_tokens, tokens));
      return;
    }
    CompactionCommit fold;
    fold.key = job.snapshot.conversation.key;
    fold.lease = job.lease;
    fold.expected_summarized_through = job.snapshot.conversation.summarized_through;
    fold.expected_prune_boundary = job.snapshot.conversation.prune_boundary;
    fold.new_prune_boundary = job.snapshot.conversation.prune_boundary;
    int64_t from = folding.front().from_sequence;
    int64_t through = folding.back().through_sequence;
    for (const SummaryChunk& c : folding) {
      from = std::min(from, c.from_sequence);
      through = std::max(through, c.through_sequence);
      fold.supersedes.push_back(c.chunk_id);
    }
    SummaryChunk chunk = ChunkOf(from, through, std::move(text), tokens, *merged);
    chunk.lines = std::move(merged->lines);
    chunk.facts = std::move(merged_content.facts);
    chunk.constraints = std::move(merged_content.constraints);
    // Recall against every fact of the folded chunks, kept or not.
    std::vector<LedgerFact> span_facts;
    absl::flat_hash_set<uint64_t> seen;
    for (const SummaryChunk* c : folded) {
      for (const LedgerFact& f : c->facts) {
        if (seen.insert(FactHash(f.text)).second) span_facts.push_back(f);
      }
    }
    const double recall = GateRecall(staying, span_facts, /*complete=*/true, job.profile,
                                     job.tokenizer, chunk, fold.events);
    const int64_t after = before - folded_tokens + chunk.token_count;
    ContextSnapshot folded_state;
    folded_state.conversation = job.snapshot.conversation;
    folded_state.pinned_items = job.snapshot.pinned_items;
    folded_state.live_items = job.snapshot.live_items;
    folded_state.active_chunks = staying;
    folded_state.active_chunks.push_back(chunk);
    std::sort(folded_state.active_chunks.begin(), folded_state.active_chunks.end(),
              [](const SummaryChunk& a, const SummaryChunk& b) {
                return a.from_sequence < b.from_sequence;
              });
    const TokenBreakdown fold_after = job.ViewOf(folded_state).tokens;
    fold.events.push_back(WithBreakdown(
        AuditRow("folded", Tier::kFold, before, after,
                 DetailOf({{"chunks", fold.supersedes.size()},
                           {"folded_tokens", folded_tokens},
                           {"summary_tokens", chunk.token_count},
                           {"recall", recall}})),
        fold_before, fold_after));
    fold.chunk = std::move(chunk);
    if (job.store(fold, Tier::kFold)) {
      CompactionProgress p;
      p.tier = Tier::kFold;
      p.tokens_before = before;
      p.tokens_after = after;
      p.recall = recall;
      p.before_tokens = fold_before;
      p.after_tokens = fold_after;
      job.steps.Completed(std::move(p));
    } else {
      job.events.insert(job.events.end(), fold.events.begin(), fold.events.end());
    }
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewFoldTier() { return std::make_unique<FoldTier>(); }

}  // namespace convstate
