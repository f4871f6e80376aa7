#ifndef CONVSTATE_SERVICES_COMPACTION_CONTEXT_VIEW_H_
#define CONVSTATE_SERVICES_COMPACTION_CONTEXT_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/compaction/profile.h"
#include "services/core/types.h"

namespace convstate {

// Numbering matches convstate.v1.Section.
enum class Section { kSystem = 1, kPinned = 2, kSummary = 3, kLive = 4, kPending = 5 };

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
  int64_t live = 0;
  int64_t pending = 0;
  int64_t output_reserve = 0;
  int64_t total = 0;
  int64_t context_window = 0;
  bool approximate = false;
};

struct ContextView {
  int64_t version = 0;
  std::vector<ViewEntry> entries;
  TokenBreakdown tokens;
  ContextStatus status = ContextStatus::kFull;
};

// Assembles the view of `snapshot` as it stands: system prompt, pinned
// instructions and pinned items, active summary chunks, live items, then
// `pending` (whose token counts must already be set). Nothing is tokenized:
// stored counts are summed. For an approximate tokenizer every count is
// scaled by the conversation's correction factor (rounded up), so totals
// track what the provider counts. Status is SUMMARIZED when chunks are in
// use, else FULL. Decides nothing about compaction.
ContextView AssembleView(const ContextSnapshot& snapshot, const ModelProfile& profile,
                         bool approximate, const std::vector<ItemData>& pending);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_CONTEXT_VIEW_H_
