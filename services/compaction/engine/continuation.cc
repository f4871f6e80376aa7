#include "services/compaction/engine/continuation.h"

#include <algorithm>
#include <string>

#include "services/compaction/ledger/ledger.h"

namespace convstate {

std::vector<SummaryChunk> CarriedChunks(const std::vector<SummaryChunk>& active,
                                        const std::string& source_id, const Tokenizer& tokenizer,
                                        int32_t per_message_tokens) {
  std::vector<SummaryChunk> out;
  for (const SummaryChunk& c : active) {
    SummaryChunk carried = c;
    carried.source_conversation_id = source_id;
    carried.source_chunk_id = c.source_chunk_id != 0 ? c.source_chunk_id : c.chunk_id;
    if (!c.source_conversation_id.empty()) carried.source_conversation_id = c.source_conversation_id;
    carried.chunk_id = 0;
    carried.superseded_by = 0;
    carried.from_sequence = 0;
    carried.through_sequence = 0;
    carried.lines.clear();  // Attributed to items of the source.
    for (std::vector<LedgerFact>* facts : {&carried.facts, &carried.constraints}) {
      for (LedgerFact& f : *facts) {
        f.sequence = 0;
        f.turn_index = 0;
      }
    }
    CountChunk(carried, tokenizer, per_message_tokens);
    out.push_back(std::move(carried));
  }
  return out;
}

namespace {

// The first item of the newest `recent_turns` turns of `source`'s live
// items (0 for none, or when the turns hold no item).
int64_t FirstOfRecentTurns(const ContextSnapshot& source, int recent_turns) {
  if (recent_turns <= 0) return 0;
  const int64_t last_turn = source.conversation.last_turn_index;
  for (const Item& item : source.live_items) {
    if (item.data.kind == ItemKind::kSummaryMarker) continue;
    if (item.turn_index > last_turn - recent_turns) return item.sequence;
  }
  return 0;
}

}  // namespace

int64_t HandoffThrough(const ContextSnapshot& source, int recent_turns) {
  const int64_t first_recent = FirstOfRecentTurns(source, recent_turns);
  int64_t through = 0;
  bool unsummarized = false;
  for (const Item& item : source.live_items) {
    if (first_recent != 0 && item.sequence >= first_recent) break;
    through = item.sequence;
    unsummarized |= item.data.kind != ItemKind::kSummaryMarker && !item.data.pinned;
  }
  return unsummarized ? through : 0;
}

std::vector<ItemData> CarriedItems(const ContextSnapshot& source, int recent_turns) {
  const int64_t first_recent = FirstOfRecentTurns(source, recent_turns);
  std::vector<const Item*> carried;
  for (const Item& item : source.pinned_items) carried.push_back(&item);
  for (const Item& item : source.live_items) {
    const bool recent = first_recent != 0 && item.sequence >= first_recent;
    if (item.data.kind != ItemKind::kSummaryMarker && (item.data.pinned || recent)) {
      carried.push_back(&item);
    }
  }
  std::sort(carried.begin(), carried.end(),
            [](const Item* a, const Item* b) { return a->sequence < b->sequence; });
  std::vector<ItemData> out;
  int64_t last = 0;
  for (const Item* item : carried) {
    if (item->sequence == last) continue;
    last = item->sequence;
    ItemData data = item->data;
    data.metadata[kContinuedFromSequenceKey] = std::to_string(item->sequence);
    data.token_count = 0;
    out.push_back(std::move(data));
  }
  return out;
}

}  // namespace convstate
