// Tier 3: active chunks that outgrew their budget are merged into one that
// supersedes them, from their structured content (lines, facts, standing
// instructions), never from their rendered text. Stored on its own, after
// what the earlier tiers committed.

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "services/compaction/summarizers/transcript.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/engine/tier.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

bool EarlierFirst(const SummaryChunk& a, const SummaryChunk& b) {
  return a.from_sequence < b.from_sequence;
}

class FoldTier final : public CompactionTier {
 public:
  Tier tier() const override { return Tier::kFold; }
  bool NeedsStoredState() const override { return true; }

  // Folds every active chunk when, with the summary planned before it,
  // they pass their budget.
  void Plan(PlanState& state) const override {
    if (state.mode == CompactionMode::kTruncate || state.mode == CompactionMode::kPruneOnly) {
      return;
    }
    const ContextSnapshot& snap = *state.in.snapshot;
    const ModelProfile& p = state.in.profile;
    CompactionPlan& plan = state.plan;
    int64_t chunk_tokens = 0;
    for (const SummaryChunk& chunk : snap.active_chunks) chunk_tokens += chunk.token_count;
    chunk_tokens += state.new_chunk_tokens;
    const int64_t budget = static_cast<int64_t>(p.summarizer.chunk_budget_fraction *
                                                static_cast<double>(p.context_window));
    if (chunk_tokens <= budget || snap.active_chunks.size() < 2) return;
    TierStep step;
    step.tier = Tier::kFold;
    for (const SummaryChunk& chunk : snap.active_chunks) {
      step.chunks.push_back(chunk.chunk_id);
      step.tokens += chunk.token_count;
    }
    step.count = static_cast<int>(step.chunks.size());
    const int64_t merged = SummarySize(p, step.tokens);
    plan.projected_tokens = plan.projected_tokens - step.tokens + merged;
    plan.actions.push_back(absl::StrCat("fold ", step.count, " chunks (", step.tokens,
                                        " tokens, over the ", budget,
                                        "-token budget) into one of about ", merged));
    plan.steps.push_back(std::move(step));
  }

  void Run(CompactionJob& job) const override {
    std::optional<Folding> folding = Decide(job);
    if (folding.has_value()) Fold(job, *folding);
  }

 private:
  // The chunks a fold merges (oldest first) and those it leaves, with the
  // view's tokens before it.
  struct Folding {
    std::vector<SummaryChunk> folding;
    std::vector<SummaryChunk> staying;
    int64_t folded_tokens = 0;
    TokenBreakdown before;
  };

  // The decision, on what is stored by now: a fold once something was
  // committed (or the mode compacts ahead of need), when a plan for the
  // stored state folds.
  static std::optional<Folding> Decide(const CompactionJob& job) {
    const bool wanted = job.changed || job.mode == CompactionMode::kAuto ||
                        job.mode == CompactionMode::kAhead ||
                        job.mode == CompactionMode::kSummarize;
    if (job.failed || !wanted || !job.lease.has_value()) return std::nullopt;
    const CompactionPlan again =
        PlanCompaction(job.InputFor(job.snapshot), CompactionMode::kSummarize);
    const TierStep* step = again.Step(Tier::kFold);
    if (step == nullptr) return std::nullopt;
    Folding f;
    for (const SummaryChunk& chunk : job.snapshot.active_chunks) {
      const bool fold = std::find(step->chunks.begin(), step->chunks.end(), chunk.chunk_id) !=
                        step->chunks.end();
      (fold ? f.folding : f.staying).push_back(chunk);
    }
    std::sort(f.folding.begin(), f.folding.end(), EarlierFirst);
    for (const SummaryChunk& chunk : f.folding) f.folded_tokens += chunk.token_count;
    f.before = job.ViewOf(job.snapshot).tokens;
    return f;
  }

  // The action: the merged chunk, stored with the audit row and progress
  // that describe it.
  static void Fold(CompactionJob& job, const Folding& f) {
    const int64_t before = f.before.total;
    job.steps.Started(Tier::kFold, before);
    std::vector<const SummaryChunk*> folded;
    for (const SummaryChunk& chunk : f.folding) folded.push_back(&chunk);
    SummaryChunk content = MergedContent(job, folded);
    SummaryRequest req = job.NewSummaryRequest();
    req.transcript = RenderChunks(f.folding);
    req.merge = MergeLines(f.folding);
    for (const LedgerFact& fact : content.facts) req.preserved.push_back(fact.text);
    req.max_tokens = TextBudget(job.profile, f.folded_tokens / 2);
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
    if (tokens >= f.folded_tokens) {
      job.events.push_back(AuditRow("no_progress", Tier::kFold, f.folded_tokens, tokens));
      return;
    }
    int64_t from = f.folding.front().from_sequence;
    int64_t through = f.folding.back().through_sequence;
    for (const SummaryChunk& c : f.folding) {
      from = std::min(from, c.from_sequence);
      through = std::max(through, c.through_sequence);
    }
    SummaryChunk chunk = ChunkOf(from, through, std::move(text), tokens, *merged);
    chunk.lines = std::move(merged->lines);
    chunk.facts = std::move(content.facts);
    chunk.constraints = std::move(content.constraints);
    Store(job, f, folded, std::move(chunk));
  }

  // Facts and instructions of `folded`, each once, in order. The fold
  // keeps the facts the ledger would rank highest, up to twice its budget,
  // so that what every view ranks stays bounded however long the
  // conversation grows (ExpandSummary still has every item).
  static SummaryChunk MergedContent(const CompactionJob& job,
                                    const std::vector<const SummaryChunk*>& folded) {
    SummaryChunk content;
    const int64_t cap = 2 * FractionOfWindow(job.profile, job.profile.ledger.budget_fraction);
    for (const LedgerFact* f : SelectLedger(folded, cap).shown) content.facts.push_back(*f);
    content.constraints = CollectConstraints(folded);
    return content;
  }

  // Commits `chunk` in place of the folded ones, gated for recall against
  // every fact they held, kept or not.
  static void Store(CompactionJob& job, const Folding& f,
                    const std::vector<const SummaryChunk*>& folded, SummaryChunk chunk) {
    const int64_t before = f.before.total;
    CompactionCommit fold;
    fold.key = job.snapshot.conversation.key;
    fold.lease = job.lease;
    fold.expected_summarized_through = job.snapshot.conversation.summarized_through;
    fold.expected_prune_boundary = job.snapshot.conversation.prune_boundary;
    fold.new_prune_boundary = job.snapshot.conversation.prune_boundary;
    for (const SummaryChunk& c : f.folding) fold.supersedes.push_back(c.chunk_id);
    std::vector<LedgerFact> span_facts;
    absl::flat_hash_set<uint64_t> seen;
    for (const SummaryChunk* c : folded) {
      for (const LedgerFact& fact : c->facts) {
        if (seen.insert(FactHash(fact.text)).second) span_facts.push_back(fact);
      }
    }
    const double recall = GateRecall(f.staying, span_facts, /*complete=*/true, job.profile,
                                     job.tokenizer, chunk, fold.events);
    const int64_t after = before - f.folded_tokens + chunk.token_count;
    ContextSnapshot folded_state;
    folded_state.conversation = job.snapshot.conversation;
    folded_state.pinned_items = job.snapshot.pinned_items;
    folded_state.live_items = job.snapshot.live_items;
    folded_state.active_chunks = f.staying;
    folded_state.active_chunks.push_back(chunk);
    std::sort(folded_state.active_chunks.begin(), folded_state.active_chunks.end(), EarlierFirst);
    const TokenBreakdown fold_after = job.ViewOf(folded_state).tokens;
    fold.events.push_back(WithBreakdown(
        AuditRow("folded", Tier::kFold, before, after,
                 DetailOf({{"chunks", fold.supersedes.size()},
                           {"folded_tokens", f.folded_tokens},
                           {"summary_tokens", chunk.token_count},
                           {"recall", recall}})),
        f.before, fold_after));
    fold.chunk = std::move(chunk);
    if (!job.store(fold, Tier::kFold)) {
      job.events.insert(job.events.end(), fold.events.begin(), fold.events.end());
      return;
    }
    CompactionProgress p = CompletedStep(Tier::kFold, before, after, f.before, fold_after);
    p.recall = recall;
    job.steps.Completed(std::move(p));
  }
};

}  // namespace

std::unique_ptr<CompactionTier> NewFoldTier() { return std::make_unique<FoldTier>(); }

}  // namespace convstate
