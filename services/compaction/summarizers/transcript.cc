#include "services/compaction/summarizers/transcript.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/utf8.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

constexpr size_t kMaxRenderedBytes = 4000;

// Head and tail of a long text (errors tend to be at the end of tool
// output), with the error lines of the middle between them.
std::string Clip(const std::string& text) {
  if (text.size() <= kMaxRenderedBytes) return text;
  const absl::string_view head = Utf8Prefix(text, kMaxRenderedBytes * 2 / 3);
  const absl::string_view tail = Utf8Suffix(text, kMaxRenderedBytes / 3);
  const absl::string_view middle =
      absl::string_view(text).substr(head.size(), text.size() - head.size() - tail.size());
  std::string out = absl::StrCat(head, " [... ", middle.size(), " bytes omitted");
  const std::vector<std::string> errors = ErrorLines(middle, 5);
  if (!errors.empty()) absl::StrAppend(&out, "; error lines: ", absl::StrJoin(errors, " | "));
  absl::StrAppend(&out, " ...] ", tail);
  return out;
}

}  // namespace

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string RenderTranscript(const std::vector<Item>& items,
                             const std::map<std::string, std::string>& tool_names) {
  std::string out;
  for (const Item& item : items) {
    const ItemData& d = item.data;
    if (d.kind == ItemKind::kSummaryMarker) continue;
    std::string name = d.tool_name;
    if (name.empty()) {
      auto it = tool_names.find(d.tool_call_id);
      if (it != tool_names.end()) name = it->second;
    }
    absl::StrAppend(&out, "[#", item.sequence, "] ");
    switch (d.kind) {
      case ItemKind::kToolCall:
        absl::StrAppend(&out, "Assistant called tool ", name, " (", d.tool_call_id,
                        ") with: ", OneLine(Clip(d.content)));
        break;
      case ItemKind::kToolResult:
        absl::StrAppend(&out, "Tool ", name, " (", d.tool_call_id, ") returned: ",
                        OneLine(Clip(d.content)));
        break;
      case ItemKind::kReasoning:
        absl::StrAppend(&out, "Assistant (reasoning): ", OneLine(Clip(d.content)));
        break;
      default: {
        const char* who = d.role == Role::kUser        ? "User"
                          : d.role == Role::kAssistant ? "Assistant"
                                                       : "System";
        absl::StrAppend(&out, who, ": ", OneLine(Clip(d.content)));
      }
    }
    out.push_back('\n');
  }
  return out;
}

std::string RenderChunks(const std::vector<SummaryChunk>& chunks) {
  std::string out;
  for (const SummaryChunk& c : chunks) {
    absl::StrAppend(&out, "[#", c.from_sequence, "-", c.through_sequence, "]\n");
    if (!c.lines.empty()) {
      for (const SummaryLine& line : c.lines) {
        absl::StrAppend(&out, line.speaker, ": ", OneLine(line.text), "\n");
      }
    } else {
      absl::StrAppend(&out, OneLine(c.text), "\n");
    }
  }
  return out;
}

std::string RenderSummaryLines(const std::vector<SummaryLine>& lines, int64_t from_sequence,
                               int64_t through_sequence) {
  std::string text =
      absl::StrCat("Summary of items #", from_sequence, "-#", through_sequence, ":");
  std::string last_speaker;
  for (const SummaryLine& line : lines) {
    if (line.speaker != last_speaker) {
      absl::StrAppend(&text, "\n", line.speaker, ": ", line.text);
      last_speaker = line.speaker;
    } else {
      absl::StrAppend(&text, " ", line.text);
    }
  }
  return text;
}

std::string CutToTokens(const std::string& text, int64_t max_tokens, const Tokenizer& tokenizer) {
  if (tokenizer.CountTokens(text) <= max_tokens) return text;
  // Binary search over character boundaries for the longest prefix that
  // fits with the " ..." mark, then back off to a space or newline.
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    const size_t mid = Utf8Ceil(text, lo + (hi - lo + 1) / 2);
    if (mid > lo && mid <= hi &&
        tokenizer.CountTokens(absl::string_view(text).substr(0, mid)) + 2 <= max_tokens) {
      lo = mid;
    } else {
      const size_t down = Utf8Floor(text, mid == 0 ? 0 : mid - 1);
      if (down <= lo) break;
      hi = down;
    }
  }
  size_t cut = lo;
  const size_t space = text.find_last_of(" \n", cut);
  if (space != std::string::npos && space > cut / 2) cut = space;
  return text.substr(0, cut) + " ...";
}

}  // namespace convstate
