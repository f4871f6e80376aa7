#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_SUMMARIES_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_SUMMARIES_H_

// What the tiers that write summaries (summarize, fold) share: the size a
// summary may have, the chunk that holds it, the recall gate, and the
// audit rows' token breakdowns.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "services/compaction/engine/tier.h"

namespace convstate {

// An audit row's detail, JSON text that is valid UTF-8 whatever it holds.
std::string DetailOf(const nlohmann::json& detail);

// `e` with the view's tokens by section before and after its step.
CompactionEvent WithBreakdown(CompactionEvent e, const TokenBreakdown& before,
                              const TokenBreakdown& after);

// Tokens a summary's text may have so that the chunk, with the per-message
// overhead, stays within the profile's cap; `wanted` is the size that would
// make the compaction worthwhile.
int64_t TextBudget(const ModelProfile& p, int64_t wanted);

// A chunk of [from, through] holding `text` (`tokens` tokens) as written by
// the summarizer that produced `result`.
SummaryChunk ChunkOf(int64_t from, int64_t through, std::string text, int64_t tokens,
                     const SummaryResult& result);

// Measures `chunk`'s recall of `span_facts` (its span's facts) against the
// ledger the view will show once it is active beside `others`. Below the
// profile's minimum, and if `complete`, the chunk is completed with the
// missing facts within its cap; a chunk that still falls short is committed
// with a "low_recall" audit row, never silently. Returns the recall, also
// stored with the chunk.
double GateRecall(const std::vector<SummaryChunk>& others, const std::vector<LedgerFact>& span_facts,
                  bool complete, const ModelProfile& profile, const Tokenizer& tokenizer,
                  SummaryChunk& chunk, std::vector<CompactionEvent>& events);

// True if a summary's `text` says nothing: empty, or only the header that
// names its span ("Summary of items #1-#4:"). Such a chunk is never
// committed.
bool SaysNothing(absl::string_view text);

// The attributed lines of chunks being folded, in order. A chunk without
// lines (written by an LLM, or before lines were kept) contributes the
// lines of its text, its header left out.
std::vector<SummaryLine> MergeLines(const std::vector<SummaryChunk>& chunks);

// The view of `s` once `chunk` replaces the items it covers, with tool
// results up to `prune_boundary` pruned.
ContextView ViewWithChunk(const CompactionJob& job, const ContextSnapshot& s,
                          const SummaryChunk& chunk, int64_t prune_boundary);

// The candidates (a span's facts) no entry of `view` shows verbatim: what
// a summary that `view` shows in place of the span lost.
std::vector<LedgerFact> LostFacts(const std::vector<LedgerFact>& candidates,
                                  const ContextView& view);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_SUMMARIES_H_
