#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/core/types.h"
#include "storage/contract.h"
#include "services/tokenizer/tokens.h"

namespace convstate {

// The chunks a continuation (CreateConversation continue_from) starts with:
// `active` as they are, counted with the new conversation's tokenizer,
// ranges and fact sequences set to 0 (they name items of the source), the
// source recorded on each (the first source, down a chain).
std::vector<SummaryChunk> CarriedChunks(const std::vector<SummaryChunk>& active,
                                        const std::string& source_id, const Tokenizer& tokenizer,
                                        int32_t per_message_tokens);

// Where a continuation summarizes its source before carrying its chunks:
// through the item before the newest `recent_turns` turns (through its last
// item when none), or 0 when everything there is summarized already
// (pinned items and markers need no summary).
int64_t HandoffThrough(const ContextSnapshot& source, int recent_turns);

// The items a continuation starts with, in their order: the source's
// pinned items and every item of its newest `recent_turns` turns (summary
// markers left out), each once, with its source sequence in metadata.
// Token counts are left to the caller (the new conversation's tokenizer).
std::vector<ItemData> CarriedItems(const ContextSnapshot& source, int recent_turns);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_
