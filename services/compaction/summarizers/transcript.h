#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_TRANSCRIPT_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_TRANSCRIPT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/core/types.h"
#include "services/tokenizer/tokens.h"

// What summarizers read and write as text: items and chunks rendered with
// attribution, summary lines under their header, and texts cut to a token
// budget.
namespace convstate {

// Renders `items` for a summarizer, each line attributed: "User: ...",
// "Assistant: ...", "Assistant called tool X (call c) with: ...", "Tool X
// (call c) returned: ...", "Assistant (reasoning): ...". Very long tool
// outputs keep their head and tail. `tool_names` names results that omit it.
std::string RenderTranscript(const std::vector<Item>& items,
                             const std::map<std::string, std::string>& tool_names);

// Renders chunks being folded, oldest first: their attributed lines where
// they have them, else their text; never a summary's header.
std::string RenderChunks(const std::vector<SummaryChunk>& chunks);

// Renders summary lines under a header naming the span they cover.
std::string RenderSummaryLines(const std::vector<SummaryLine>& lines, int64_t from_sequence,
                               int64_t through_sequence);

// Cuts `text` to at most `max_tokens` tokens, at a line or word boundary
// (never inside a UTF-8 character).
std::string CutToTokens(const std::string& text, int64_t max_tokens, const Tokenizer& tokenizer);

// `text` with its line breaks made spaces.
std::string OneLine(std::string text);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_TRANSCRIPT_H_
