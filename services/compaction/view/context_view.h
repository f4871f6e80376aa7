#ifndef CONVSTATE_SERVICES_COMPACTION_VIEW_CONTEXT_VIEW_H_
#define CONVSTATE_SERVICES_COMPACTION_VIEW_CONTEXT_VIEW_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/profiles/profile.h"
#include "services/tokenizer/tokens.h"
#include "services/core/types.h"
#include "storage/contract.h"

namespace convstate {

// Numbering matches convstate.v1.Section.
enum class Section {
  kSystem = 1,
  kPinned = 2,
  kSummary = 3,
  kLive = 4,
  kPending = 5,
  kLedger = 6,
  kRecalled = 7
};

// Numbering matches convstate.v1.ContextStatus.
enum class ContextStatus { kFull = 1, kPruned = 2, kSummarized = 3, kTruncated = 4 };

// One entry of the model's view, in the order to send.
struct ViewEntry {
  Section section = Section::kLive;
  Role role = Role::kUser;
  ItemKind kind = ItemKind::kMessage;
  std::string content;
  std::string tool_name;
  std::string tool_call_id;
  // The stored item shown; 0 for synthetic entries.
  int64_t sequence = 0;
  int64_t token_count = 0;
  bool pruned = false;
  int64_t summary_chunk_id = 0;
};

struct TokenBreakdown {
  int64_t system = 0;
  int64_t pinned = 0;
  int64_t summaries = 0;
  int64_t ledger = 0;
  int64_t live = 0;
  int64_t pending = 0;
  int64_t output_reserve = 0;
  // Tool results among the live entries, placeholders included (also in
  // `live`).
  int64_t tool_results = 0;
  // The RECALLED section (AddRecalled).
  int64_t recalled = 0;
  int64_t total = 0;
  int64_t context_window = 0;
  bool approximate = false;
};

struct ContextView {
  int64_t version = 0;
  int64_t compaction_version = 0;
  std::vector<ViewEntry> entries;
  TokenBreakdown tokens;
  ContextStatus status = ContextStatus::kFull;
  // Ledger facts that did not fit the ledger's budget.
  int ledger_facts_omitted = 0;
  // Summary chunks left out by truncation.
  int summaries_truncated = 0;
  // Standing instructions shown shortened to their rule (their lead-in
  // left out) because together they passed their budget; none is ever
  // left out.
  int instructions_shortened = 0;
};

// How to show the live items.
struct ViewOptions {
  // Tool results at or before this sequence (not pinned, not of a kept
  // tool) show as a placeholder. Defaults to the conversation's boundary.
  std::optional<int64_t> prune_boundary;
  // Live items before this sequence are left out of the view (emergency
  // truncation; storage keeps them). 0 for none.
  int64_t truncate_before = 0;
  // The oldest active chunks left out of the view (emergency truncation,
  // once every live item that may go is gone). 0 for none.
  size_t truncate_chunks = 0;
  // Tokens the ledger may take; unset for the profile's budget.
  std::optional<int64_t> ledger_budget;
  // Counts placeholders and section headers; required when anything may be
  // pruned or the chunks carry facts.
  const Tokenizer* tokenizer = nullptr;
};

// Assembles the view of `snapshot`: system prompt, pinned instructions,
// pinned items and the standing instructions kept by compactions, active
// summary chunks, the fact ledger, live items (pruned and truncated as
// `options` say), then `pending` (whose token counts must already be set).
// Nothing is tokenized but placeholders: stored counts are summed. For an
// approximate tokenizer every count is scaled by the conversation's
// correction factor, and for any tokenizer by its overflow correction
// (rounded up), so totals track what the provider counts.
// Status: TRUNCATED if anything was truncated, else SUMMARIZED with chunks,
// else PRUNED if a result is masked, else FULL.
ContextView AssembleView(const ContextSnapshot& snapshot, const ModelProfile& profile,
                         bool approximate, const std::vector<ItemData>& pending,
                         const ViewOptions& options = {});

// What the view scales stored counts by, so that totals track what the
// provider counts: the conversation's token correction when the tokenizer
// is approximate, times its overflow correction.
double ViewCorrection(const Conversation& conversation, bool approximate);

// `tokens` scaled by `correction`, rounded up.
int64_t Corrected(int64_t tokens, double correction);

// Adds the RECALLED entry after the live items and before the pending
// input; `tokens` as the view counts (corrections applied).
void AddRecalled(ContextView& view, std::string text, int64_t tokens);

// Numbering matches convstate.v1.CacheBreakpointKind.
enum class CacheBreakpointKind { kUnspecified = 0, kPinned = 1, kSummaries = 2, kPruneBoundary = 3 };

struct CacheBreakpoint {
  CacheBreakpointKind kind = CacheBreakpointKind::kUnspecified;
  // Index of the last entry before the breakpoint.
  int last_entry = 0;
  // Hex SHA-256 of the canonical encoding of entries 0..last_entry.
  std::string prefix_hash;
  int64_t prefix_tokens = 0;
};

struct ViewDigest {
  // Hex SHA-256 of the canonical encoding of every entry.
  std::string view_hash;
  // After the system prompt and pinned content, after the summaries and
  // ledger, and after the last live item at or before `prune_boundary`;
  // each only when its part of the view has entries.
  std::vector<CacheBreakpoint> breakpoints;
};

// The view's hash and cache breakpoints. The encoding of an entry: section,
// role, kind, sequence, summary chunk id and pruned as 8-byte big-endian
// integers, then content, tool name and tool call id each as an 8-byte
// big-endian length and the bytes. The token counts are not part of it.
ViewDigest DigestView(const ContextView& view, int64_t prune_boundary);

// The first breakpoint of `before` (in entry order) whose prefix `after`
// does not begin with any more: a provider's cache of it is lost.
// kUnspecified when `after` still begins with every one of them.
CacheBreakpointKind FirstInvalidated(const std::vector<CacheBreakpoint>& before,
                                     const ContextView& after);

// The text shown in place of a pruned tool result.
std::string PrunedPlaceholder(const std::string& tool_name, const std::string& call_id,
                              int64_t tokens);

// The tool name of every call id among `items` (results may omit it).
std::map<std::string, std::string> ToolNamesByCallId(const std::vector<Item>& items);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_VIEW_CONTEXT_VIEW_H_
