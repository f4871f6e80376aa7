// Fuzzes every text cut and the transcript rendering: whatever the input,
// each cut of valid UTF-8 is valid UTF-8 and within its bound, and a
// transcript of items holding the input is valid UTF-8 when they are.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "services/common/utf8.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/compaction/summarizers/transcript.h"
#include "services/tokenizer/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convstate;
  if (size < 2) return 0;
  const size_t bound = data[0] * 7 + data[1];
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool valid = IsValidUtf8(text);
  const size_t floor = Utf8Floor(text, bound);
  const size_t ceil = Utf8Ceil(text, bound);
  if (floor > bound && bound <= text.size()) std::abort();
  if (ceil < std::min(bound, text.size())) std::abort();
  const absl::string_view prefix = Utf8Prefix(text, bound);
  const absl::string_view suffix = Utf8Suffix(text, bound);
  if (prefix.size() > bound || suffix.size() > bound) std::abort();
  if (valid && (!IsValidUtf8(prefix) || !IsValidUtf8(suffix))) std::abort();
  static const auto* const kTokenizer = NewApproximateTokenizer().release();
  const std::string cut = CutToTokens(text, static_cast<int64_t>(bound % 200), *kTokenizer);
  if (valid && !IsValidUtf8(cut)) std::abort();
  std::vector<Item> items(3);
  items[0].sequence = 1;
  items[0].data.role = Role::kUser;
  items[0].data.content = text;
  items[1].sequence = 2;
  items[1].data.role = Role::kAssistant;
  items[1].data.kind = ItemKind::kToolCall;
  items[1].data.tool_name = "kubectl";
  items[1].data.tool_call_id = "call-1";
  items[1].data.content = text;
  items[2].sequence = 3;
  items[2].data.role = Role::kTool;
  items[2].data.kind = ItemKind::kToolResult;
  items[2].data.tool_call_id = "call-1";
  items[2].data.content = text + text + text;
  const std::string transcript = RenderTranscript(items, {{"call-1", "kubectl"}});
  if (valid && !IsValidUtf8(transcript)) std::abort();
  return 0;
}
