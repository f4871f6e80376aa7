#include "services/compaction/view/context_view.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/common/sha256.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

ViewEntry FromItem(Section section, const ItemData& data, int64_t sequence,
                   int64_t summary_chunk_id) {
  ViewEntry e;
  e.section = section;
  e.role = data.role;
  e.kind = data.kind;
  e.content = data.content;
  e.tool_name = data.tool_name;
  e.tool_call_id = data.tool_call_id;
  e.sequence = sequence;
  e.token_count = data.token_count;
  e.summary_chunk_id = summary_chunk_id;
  return e;
}

ViewEntry SystemEntry(Section section, const std::string& text, int64_t tokens) {
  ViewEntry e;
  e.section = section;
  e.role = Role::kSystem;
  e.kind = ItemKind::kMessage;
  e.content = text;
  e.token_count = tokens;
  return e;
}

// The standing instructions the view shows: those kept by compactions,
// and those of user messages truncated out of it. Never dropped: past their
// budget, the oldest are shortened to their rule, one by one, while that
// helps; `shortened` counts them.
std::vector<LedgerFact> ViewConstraints(const ContextSnapshot& snapshot,
                                        const std::vector<const SummaryChunk*>& chunks,
                                        const ModelProfile& profile, const ViewOptions& options,
                                        int* shortened) {
  std::vector<LedgerFact> constraints = CollectConstraints(chunks);
  if (options.truncate_before > 0) {
    // Items truncated away take their rules along unless the view keeps
    // them here.
    std::vector<Item> hidden;
    for (const Item& item : snapshot.live_items) {
      if (item.sequence < options.truncate_before && !item.data.pinned &&
          item.data.role == Role::kUser && item.data.kind == ItemKind::kMessage) {
        hidden.push_back(item);
      }
    }
    if (!hidden.empty() && options.tokenizer != nullptr) {
      absl::flat_hash_set<uint64_t> seen;
      for (const LedgerFact& c : constraints) seen.insert(FactHash(c.text));
      for (LedgerFact& c : ExtractLedger(hidden, {}, *options.tokenizer).constraints) {
        if (seen.insert(FactHash(c.text)).second) constraints.push_back(std::move(c));
      }
    }
  }
  const int64_t constraints_budget = FractionOfWindow(profile, profile.ledger.constraints_fraction);
  int64_t constraint_tokens = 0;
  for (const LedgerFact& c : constraints) constraint_tokens += c.token_count;
  for (size_t i = 0; i < constraints.size() && constraint_tokens > constraints_budget; ++i) {
    std::string rule = RuleOf(constraints[i].text);
    if (rule.size() >= constraints[i].text.size()) continue;
    LedgerFact& c = constraints[i];
    c.text = std::move(rule);
    const int64_t tokens = options.tokenizer != nullptr
                               ? FactTokens(c, *options.tokenizer)
                               : static_cast<int64_t>(FactLine(c).size() / 4) + 1;
    constraint_tokens -= c.token_count - tokens;
    c.token_count = tokens;
    ++*shortened;
  }
  return constraints;
}

}  // namespace

std::string PrunedPlaceholder(const std::string& tool_name, const std::string& call_id,
                              int64_t tokens) {
  return absl::StrCat("[output of tool ", tool_name.empty() ? "?" : tool_name, " (call ", call_id,
                      ") pruned to save ", tokens, " tokens; it is still in the history]");
}

std::map<std::string, std::string> ToolNamesByCallId(const std::vector<Item>& items) {
  std::map<std::string, std::string> names;
  for (const Item& item : items) {
    if (item.data.kind == ItemKind::kToolCall) names[item.data.tool_call_id] = item.data.tool_name;
  }
  return names;
}

ContextView AssembleView(const ContextSnapshot& snapshot, const ModelProfile& profile,
                         bool approximate, const std::vector<ItemData>& pending,
                         const ViewOptions& options) {
  const Conversation& c = snapshot.conversation;
  const double correction = ViewCorrection(c, approximate);
  auto scale = [correction](int64_t n) { return Corrected(n, correction); };
  ContextView view;
  view.version = c.version;
  view.compaction_version = c.compaction_version;
  view.entries.reserve(2 + snapshot.pinned_items.size() + snapshot.active_chunks.size() +
                       snapshot.live_items.size() + pending.size());
  TokenBreakdown& t = view.tokens;

  auto add = [&](ViewEntry e, int64_t& section) {
    e.token_count = scale(e.token_count);
    section += e.token_count;
    view.entries.push_back(std::move(e));
  };
  if (!c.system_prompt.empty()) {
    add(SystemEntry(Section::kSystem, c.system_prompt, c.system_prompt_tokens), t.system);
  }
  if (!c.pinned_instructions.empty()) {
    add(SystemEntry(Section::kPinned, c.pinned_instructions, c.pinned_instructions_tokens),
        t.pinned);
  }
  for (const Item& item : snapshot.pinned_items) {
    add(FromItem(Section::kPinned, item.data, item.sequence, 0), t.pinned);
  }
  // Chunks in the order of what they cover: a fold written after a newer
  // chunk still comes first.
  std::vector<const SummaryChunk*> chunks;
  for (const SummaryChunk& chunk : snapshot.active_chunks) chunks.push_back(&chunk);
  std::sort(chunks.begin(), chunks.end(), [](const SummaryChunk* a, const SummaryChunk* b) {
    return a->from_sequence < b->from_sequence;
  });
  // What compactions kept verbatim: standing instructions (pinned, never
  // truncated) and facts, from every active chunk.
  auto header_tokens = [&](const std::string& text, int64_t lines) {
    if (options.tokenizer != nullptr) {
      return CountSystemTokens(*options.tokenizer, text, profile.per_message_tokens);
    }
    return static_cast<int64_t>(text.size() / 4) + lines + profile.per_message_tokens;
  };
  std::vector<LedgerFact> constraints =
      ViewConstraints(snapshot, chunks, profile, options, &view.instructions_shortened);
  if (!constraints.empty()) {
    int64_t tokens = 0;
    for (const LedgerFact& c : constraints) tokens += c.token_count;
    const std::string text = RenderConstraints(constraints);
    add(SystemEntry(Section::kPinned, text, tokens + header_tokens(RenderConstraints({}), 0)),
        t.pinned);
  }
  const size_t dropped = std::min(options.truncate_chunks, chunks.size());
  view.summaries_truncated = static_cast<int>(dropped);
  for (size_t i = dropped; i < chunks.size(); ++i) {
    ViewEntry e = SystemEntry(Section::kSummary, chunks[i]->text, chunks[i]->token_count);
    e.summary_chunk_id = chunks[i]->chunk_id;
    add(std::move(e), t.summaries);
  }
  // Ids and figures the live items show verbatim anyway (only needed when
  // the ledger is over its budget, which SelectLedger finds out).
  TokenHashes live_tokens;
  const int64_t ledger_budget =
      options.ledger_budget.value_or(FractionOfWindow(profile, profile.ledger.budget_fraction));
  int64_t fact_tokens = 0;
  for (const SummaryChunk* chunk : chunks) {
    for (const LedgerFact& f : chunk->facts) fact_tokens += f.token_count;
  }
  if (fact_tokens > ledger_budget) {
    auto counted = [&](const Item& item) {
      return item.sequence >= options.truncate_before && item.data.kind != ItemKind::kToolResult;
    };
    // Sized once, at about one id or figure per 16 bytes of text.
    size_t bytes = 0;
    for (const Item& item : snapshot.live_items) {
      if (counted(item)) bytes += item.data.content.size();
    }
    live_tokens.reserve(bytes / 16);
    for (const Item& item : snapshot.live_items) {
      if (counted(item)) AddSpecificTokenHashes(item.data.content, live_tokens);
    }
  }
  const LedgerSelection ledger = SelectLedger(chunks, ledger_budget, live_tokens);
  view.ledger_facts_omitted = ledger.omitted;
  if (!ledger.shown.empty()) {
    add(SystemEntry(Section::kLedger, RenderLedger(ledger.shown),
                    ledger.tokens + header_tokens(RenderLedger({}), 0)),
        t.ledger);
  }
  const int64_t boundary = options.prune_boundary.value_or(c.prune_boundary);
  const auto& keep = profile.tool_pruning.keep_tools;
  std::map<std::string, std::string> tool_names;
  if (boundary > 0) tool_names = ToolNamesByCallId(snapshot.live_items);
  bool pruned_any = false;
  bool truncated_any = false;
  for (const Item& item : snapshot.live_items) {
    // Markers record where a summary begins; the chunk itself is shown above.
    if (item.data.kind == ItemKind::kSummaryMarker) continue;
    if (item.sequence < options.truncate_before && !item.data.pinned) {
      truncated_any = true;
      continue;
    }
    ViewEntry e = FromItem(Section::kLive, item.data, item.sequence, item.summary_chunk_id);
    if (item.data.kind == ItemKind::kToolResult && item.sequence <= boundary &&
        !item.data.pinned && options.tokenizer != nullptr) {
      std::string name = item.data.tool_name;
      if (name.empty()) name = tool_names[item.data.tool_call_id];
      if (std::find(keep.begin(), keep.end(), name) == keep.end()) {
        e.content = PrunedPlaceholder(name, item.data.tool_call_id, item.data.token_count);
        e.token_count = CountSystemTokens(*options.tokenizer, e.content, profile.per_message_tokens);
        e.pruned = true;
        pruned_any = true;
      }
    }
    const bool result = e.kind == ItemKind::kToolResult;
    add(std::move(e), t.live);
    if (result) t.tool_results += view.entries.back().token_count;
  }
  for (const ItemData& data : pending) add(FromItem(Section::kPending, data, 0, 0), t.pending);
  t.output_reserve = profile.output_reserve;
  t.context_window = profile.context_window;
  t.approximate = approximate;
  t.total = t.system + t.pinned + t.summaries + t.ledger + t.live + t.recalled + t.pending +
            t.output_reserve;
  truncated_any |= dropped > 0;
  view.status = truncated_any                     ? ContextStatus::kTruncated
                : !snapshot.active_chunks.empty() ? ContextStatus::kSummarized
                : pruned_any                      ? ContextStatus::kPruned
                                                  : ContextStatus::kFull;
  return view;
}

double ViewCorrection(const Conversation& conversation, bool approximate) {
  return (approximate ? conversation.token_correction : 1.0) * conversation.overflow_correction;
}

int64_t Corrected(int64_t tokens, double correction) {
  return correction == 1.0 ? tokens : static_cast<int64_t>(std::ceil(tokens * correction));
}

void AddRecalled(ContextView& view, std::string text, int64_t tokens) {
  ViewEntry e = SystemEntry(Section::kRecalled, text, tokens);
  auto at = std::find_if(view.entries.begin(), view.entries.end(),
                         [](const ViewEntry& x) { return x.section == Section::kPending; });
  view.entries.insert(at, std::move(e));
  view.tokens.recalled += tokens;
  view.tokens.total += tokens;
}

namespace {

void AppendInt(int64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> shift) & 0xff));
  }
}

void AppendText(const std::string& text, std::string* out) {
  AppendInt(static_cast<int64_t>(text.size()), out);
  out->append(text);
}

// The canonical encoding of one entry (see convstate.v1 view_hash).
void AppendEntry(const ViewEntry& e, std::string* out) {
  AppendInt(static_cast<int64_t>(e.section), out);
  AppendInt(static_cast<int64_t>(e.role), out);
  AppendInt(static_cast<int64_t>(e.kind), out);
  AppendInt(e.sequence, out);
  AppendInt(e.summary_chunk_id, out);
  AppendInt(e.pruned ? 1 : 0, out);
  AppendText(e.content, out);
  AppendText(e.tool_name, out);
  AppendText(e.tool_call_id, out);
}

}  // namespace

ViewDigest DigestView(const ContextView& view, int64_t prune_boundary) {
  ViewDigest digest;
  // Where each breakpoint goes: after the last entry of its part, if the
  // part has anything.
  int last_pinned = -1, last_summaries = -1, last_pruned_live = -1;
  for (size_t i = 0; i < view.entries.size(); ++i) {
    const ViewEntry& e = view.entries[i];
    switch (e.section) {
      case Section::kSystem:
      case Section::kPinned:
        last_pinned = static_cast<int>(i);
        break;
      case Section::kSummary:
      case Section::kLedger:
        last_summaries = static_cast<int>(i);
        break;
      case Section::kLive:
        if (e.sequence > 0 && e.sequence <= prune_boundary) last_pruned_live = static_cast<int>(i);
        break;
      case Section::kRecalled:
      case Section::kPending:
        break;
    }
  }
  const std::pair<CacheBreakpointKind, int> wanted[] = {
      {CacheBreakpointKind::kPinned, last_pinned},
      {CacheBreakpointKind::kSummaries, last_summaries},
      {CacheBreakpointKind::kPruneBoundary, last_pruned_live}};
  Sha256 hash;
  std::string encoded;
  int64_t tokens = 0;
  size_t next = 0;
  for (size_t i = 0; i < view.entries.size(); ++i) {
    encoded.clear();
    AppendEntry(view.entries[i], &encoded);
    hash.Update(encoded);
    tokens += view.entries[i].token_count;
    while (next < 3 && wanted[next].second < static_cast<int>(i)) ++next;
    for (size_t k = next; k < 3; ++k) {
      if (wanted[k].second != static_cast<int>(i)) continue;
      digest.breakpoints.push_back(
          CacheBreakpoint{wanted[k].first, static_cast<int>(i), hash.HexDigest(), tokens});
    }
  }
  digest.view_hash = hash.HexDigest();
  return digest;
}

CacheBreakpointKind FirstInvalidated(const std::vector<CacheBreakpoint>& before,
                                     const ContextView& after) {
  Sha256 hash;
  std::string encoded;
  size_t next = 0;
  for (size_t i = 0; i < after.entries.size() && next < before.size(); ++i) {
    encoded.clear();
    AppendEntry(after.entries[i], &encoded);
    hash.Update(encoded);
    while (next < before.size() && before[next].last_entry == static_cast<int>(i)) {
      if (hash.HexDigest() != before[next].prefix_hash) return before[next].kind;
      ++next;
    }
  }
  // A prefix longer than the new view is gone.
  return next < before.size() ? before[next].kind : CacheBreakpointKind::kUnspecified;
}

}  // namespace convstate
