#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/core/types.h"
#include "services/tokenizer/tokens.h"

namespace convstate {

// The chunks a continuation (CreateConversation continue_from) starts with:
// `active` as they are, counted with the new conversation's tokenizer,
// ranges and fact sequences set to 0 (they name items of the source), the
// source recorded on each (the first source, down a chain).
std::vector<SummaryChunk> CarriedChunks(const std::vector<SummaryChunk>& active,
                                        const std::string& source_id, const Tokenizer& tokenizer,
                                        int32_t per_message_tokens);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_CONTINUATION_H_
