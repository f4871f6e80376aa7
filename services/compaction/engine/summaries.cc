#include "services/compaction/engine/summaries.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {

using Json = nlohmann::json;

std::string DetailOf(const Json& detail) {
  return detail.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

Json BreakdownJson(const TokenBreakdown& t) {
  return Json{{"system", t.system},   {"pinned", t.pinned},
              {"summaries", t.summaries}, {"ledger", t.ledger},
              {"live", t.live},       {"tool_results", t.tool_results},
              {"pending", t.pending}, {"total", t.total}};
}

}  // namespace

CompactionEvent WithBreakdown(CompactionEvent e, const TokenBreakdown& before,
                              const TokenBreakdown& after) {
  Json detail = Json::parse(e.detail, nullptr, /*allow_exceptions=*/false);
  if (!detail.is_object()) detail = Json::object();
  detail["before"] = BreakdownJson(before);
  detail["after"] = BreakdownJson(after);
  e.detail = DetailOf(detail);
  return e;
}

int64_t TextBudget(const ModelProfile& p, int64_t wanted) {
  const int64_t cap = p.summarizer.max_chunk_tokens - p.per_message_tokens;
  return std::max<int64_t>(16, std::min(cap, std::max<int64_t>(32, wanted)));
}

SummaryChunk ChunkOf(int64_t from, int64_t through, std::string text, int64_t tokens,
                     const SummaryResult& result) {
  SummaryChunk chunk;
  chunk.from_sequence = from;
  chunk.through_sequence = through;
  chunk.text = std::move(text);
  chunk.token_count = tokens;
  chunk.summarizer_model = result.model;
  chunk.prompt_version = result.prompt_version;
  chunk.tokens_in = result.tokens_in;
  chunk.tokens_out = result.tokens_out;
  chunk.latency_ms = result.latency_ms;
  return chunk;
}

double GateRecall(const std::vector<SummaryChunk>& others, const std::vector<LedgerFact>& span_facts,
                  bool complete, const ModelProfile& profile, const Tokenizer& tokenizer,
                  SummaryChunk& chunk, std::vector<CompactionEvent>& events) {
  std::vector<const SummaryChunk*> rest;
  for (const SummaryChunk& c : others) rest.push_back(&c);
  const int64_t budget = FractionOfWindow(profile, profile.ledger.budget_fraction);
  std::vector<LedgerFact> missing;
  double recall = MeasureRecall(span_facts, chunk, rest, budget, &missing);
  if (complete && recall < profile.ledger.min_recall && !missing.empty()) {
    const int64_t cap = profile.summarizer.max_chunk_tokens;
    std::string text = chunk.text + "\nFacts:";
    int64_t tokens = CountSystemTokens(tokenizer, text, profile.per_message_tokens);
    int added = 0;
    for (const LedgerFact& f : missing) {
      const std::string line = absl::StrCat("\n", FactLine(f));
      const int64_t cost = tokenizer.CountTokens(line);
      if (tokens + cost > cap) continue;
      text += line;
      tokens += cost;
      ++added;
    }
    if (added > 0) {
      chunk.text = std::move(text);
      chunk.token_count = CountSystemTokens(tokenizer, chunk.text, profile.per_message_tokens);
      const double before = recall;
      recall = MeasureRecall(span_facts, chunk, rest, budget, nullptr);
      events.push_back(AuditRow(
          "recall_completed", std::nullopt, 0, 0,
          DetailOf({{"recall_before", before}, {"recall", recall}, {"facts_added", added}})));
    }
  }
  if (recall < profile.ledger.min_recall) {
    events.push_back(AuditRow("low_recall", std::nullopt, 0, 0,
                              DetailOf({{"recall", recall},
                                        {"min_recall", profile.ledger.min_recall},
                                        {"facts", chunk.facts.size()}})));
  }
  chunk.recall = recall;
  return recall;
}

bool SaysNothing(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "Summary of ") && absl::EndsWith(line, ":")) continue;
    if (line == "Facts:") continue;
    return false;
  }
  return true;
}

std::vector<SummaryLine> MergeLines(const std::vector<SummaryChunk>& chunks) {
  std::vector<SummaryLine> out;
  for (const SummaryChunk& c : chunks) {
    if (!c.lines.empty()) {
      out.insert(out.end(), c.lines.begin(), c.lines.end());
      continue;
    }
    for (absl::string_view line : absl::StrSplit(c.text, '\n', absl::SkipWhitespace())) {
      if (absl::StartsWith(line, "Summary of ") || absl::StartsWith(line, "Facts:")) continue;
      out.push_back(SummaryLine{c.from_sequence, "Summary", std::string(line), 1});
    }
  }
  return out;
}

ContextView ViewWithChunk(const CompactionJob& job, const ContextSnapshot& s,
                          const SummaryChunk& chunk, int64_t prune_boundary) {
  ContextSnapshot next;
  next.conversation = s.conversation;
  next.conversation.prune_boundary = prune_boundary;
  next.active_chunks = s.active_chunks;
  next.active_chunks.push_back(chunk);
  next.pinned_items = s.pinned_items;
  for (const Item& item : s.live_items) {
    if (item.sequence > chunk.through_sequence) {
      next.live_items.push_back(item);
    } else if (item.data.pinned) {
      next.pinned_items.push_back(item);
    }
  }
  return job.ViewOf(next);
}

std::vector<LedgerFact> LostFacts(const std::vector<LedgerFact>& candidates,
                                  const ContextView& view) {
  std::string shown;
  for (const ViewEntry& e : view.entries) absl::StrAppend(&shown, e.content, "\n");
  std::vector<LedgerFact> lost;
  for (const LedgerFact& f : candidates) {
    if (shown.find(f.text) == std::string::npos) lost.push_back(f);
  }
  return lost;
}

}  // namespace convstate
