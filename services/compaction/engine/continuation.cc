#include "services/compaction/engine/continuation.h"

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

}  // namespace convstate
