#include "services/compaction/summarizer.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace convstate {
namespace {

constexpr size_t kMaxRenderedBytes = 4000;

std::string Clip(const std::string& text) {
  if (text.size() <= kMaxRenderedBytes) return text;
  // Head and tail: errors tend to be at the end of tool output.
  size_t head = kMaxRenderedBytes * 2 / 3;
  size_t tail = kMaxRenderedBytes - head;
  while (head > 0 && (static_cast<unsigned char>(text[head]) & 0xC0) == 0x80) --head;
  size_t tail_start = text.size() - tail;
  while (tail_start < text.size() && (static_cast<unsigned char>(text[tail_start]) & 0xC0) == 0x80) {
    ++tail_start;
  }
  return absl::StrCat(text.substr(0, head), " [... ", tail_start - head, " bytes omitted ...] ",
                      text.substr(tail_start));
}

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

struct Sentence {
  size_t order;
  std::string speaker;
  std::string text;
  int score = 0;
};

bool ContainsAny(absl::string_view lower, std::initializer_list<absl::string_view> words) {
  for (absl::string_view w : words) {
    if (absl::StrContains(lower, w)) return true;
  }
  return false;
}

int Score(const Sentence& s, bool first_from_user) {
  const std::string lower = absl::AsciiStrToLower(s.text);
  int score = 1;
  if (ContainsAny(lower, {"error", "fail", "exception", "traceback", "refused", "denied",
                          "timeout", "timed out", "panic", "fatal", "cannot", "can't", "unable",
                          "not found", "invalid", "crash"})) {
    score += 4;
  }
  if (ContainsAny(lower, {"decided", "decision", "we will", "we'll", "let's", "agreed",
                          "going to", "instead", "chose", "should", "plan", "fix", "resolved",
                          "works now", "fixed"})) {
    score += 3;
  }
  if (ContainsAny(lower, {"$ ", "`", "--", "sudo ", "git ", "kubectl", "docker", "npm ",
                          "bazel ", "make ", "curl ", "ssh ", "called tool"})) {
    score += 2;
  }
  if (ContainsAny(lower, {"todo", "open question", "still", "pending", "next step", "remaining",
                          "not yet", "blocked"}) ||
      absl::StrContains(s.text, "?")) {
    score += 2;
  }
  if (s.speaker == "User" && ContainsAny(lower, {"i want", "i need", "goal", "trying to",
                                                 "help me", "please", "how do i", "can you"})) {
    score += 3;
  }
  if (first_from_user) score += 4;
  bool digit = false, path = false, ident = false;
  for (size_t i = 0; i < s.text.size(); ++i) {
    const char c = s.text[i];
    digit |= std::isdigit(static_cast<unsigned char>(c)) != 0;
    path |= c == '/' && i + 1 < s.text.size() && std::isalnum(static_cast<unsigned char>(s.text[i + 1]));
    ident |= (c == '_' || c == '.') && i > 0 && i + 1 < s.text.size() &&
             std::isalnum(static_cast<unsigned char>(s.text[i - 1])) &&
             std::isalpha(static_cast<unsigned char>(s.text[i + 1]));
  }
  score += digit + 2 * path + 2 * ident;
  if (s.text.size() < 12) score -= 1;
  return score;
}

class ExtractiveSummarizer final : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    if (req.tokenizer == nullptr || req.max_tokens <= 0) {
      return absl::InvalidArgumentError("extractive summarizer needs a tokenizer and a budget");
    }
    const absl::Time start = absl::Now();
    // Units: each transcript line is "Speaker...: text"; split into sentences.
    std::vector<Sentence> sentences;
    bool seen_user = false;
    for (absl::string_view line : absl::StrSplit(req.transcript, '\n', absl::SkipEmpty())) {
      const size_t colon = line.find(": ");
      std::string speaker = colon == absl::string_view::npos ? "" : std::string(line.substr(0, colon));
      absl::string_view body = colon == absl::string_view::npos ? line : line.substr(colon + 2);
      const std::string who = speaker.empty() ? "" : speaker.substr(speaker.find(' ') + 1);
      bool first_user_line = false;
      if (absl::StartsWith(who, "User") && !seen_user) {
        seen_user = true;
        first_user_line = true;
      }
      size_t begin = 0;
      for (size_t i = 0; i <= body.size(); ++i) {
        const bool end = i == body.size() ||
                         ((body[i] == '.' || body[i] == '?' || body[i] == '!' || body[i] == ';') &&
                          (i + 1 == body.size() || body[i + 1] == ' '));
        if (!end) continue;
        std::string text(absl::StripAsciiWhitespace(body.substr(begin, i - begin + (i < body.size()))));
        begin = i + 1;
        if (text.empty()) continue;
        if (text.size() > 400) text = text.substr(0, 400) + " ...";
        Sentence s{sentences.size(), speaker, text};
        s.score = Score(Sentence{0, who, text}, first_user_line);
        first_user_line = false;
        sentences.push_back(std::move(s));
      }
    }
    // Highest scores first (earlier first among equals), within the budget.
    std::vector<size_t> order(sentences.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sentences[a].score > sentences[b].score; });
    const std::string header = "Summary of earlier conversation (extracted, in order):";
    int64_t used = req.tokenizer->CountTokens(header);
    std::vector<bool> keep(sentences.size(), false);
    // First what carries a signal, best first; then, only if that left most
    // of the budget unused, plain sentences in order as context.
    constexpr int kSignal = 2;
    auto take = [&](size_t i) {
      const int64_t cost = req.tokenizer->CountTokens(sentences[i].speaker) +
                           req.tokenizer->CountTokens(sentences[i].text) + 2;
      if (used + cost > req.max_tokens) return;
      keep[i] = true;
      used += cost;
    };
    for (size_t i : order) {
      if (sentences[i].score >= kSignal) take(i);
    }
    if (used < req.max_tokens / 2) {
      for (size_t i = 0; i < sentences.size(); ++i) {
        if (sentences[i].score > 0 && !keep[i]) take(i);
      }
    }
    std::string text = header;
    std::string last_speaker;
    for (size_t i = 0; i < sentences.size(); ++i) {
      if (!keep[i]) continue;
      if (sentences[i].speaker != last_speaker) {
        absl::StrAppend(&text, "\n", sentences[i].speaker, ": ", sentences[i].text);
        last_speaker = sentences[i].speaker;
      } else {
        absl::StrAppend(&text, " ", sentences[i].text);
      }
    }
    SummaryResult result;
    result.text = CutToTokens(text, req.max_tokens, *req.tokenizer);
    result.model = kExtractiveModel;
    result.prompt_version = kExtractivePromptVersion;
    result.tokens_in = req.tokenizer->CountTokens(req.transcript);
    result.tokens_out = req.tokenizer->CountTokens(result.text);
    result.latency_ms = absl::ToInt64Milliseconds(absl::Now() - start);
    return result;
  }
};

}  // namespace

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
    absl::StrAppend(&out, "[#", c.from_sequence, "-", c.through_sequence, "] Summary: ",
                    OneLine(c.text), "\n");
  }
  return out;
}

std::string CutToTokens(const std::string& text, int64_t max_tokens, const Tokenizer& tokenizer) {
  if (tokenizer.CountTokens(text) <= max_tokens) return text;
  // Binary search on the byte length, then back off to a space or newline.
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    while (mid < text.size() && (static_cast<unsigned char>(text[mid]) & 0xC0) == 0x80) ++mid;
    if (tokenizer.CountTokens(absl::string_view(text).substr(0, mid)) + 2 <= max_tokens) {
      lo = mid;
    } else {
      hi = mid - 1;
      while (hi > lo && (static_cast<unsigned char>(text[hi]) & 0xC0) == 0x80) --hi;
    }
  }
  size_t cut = lo;
  const size_t space = text.find_last_of(" \n", cut);
  if (space != std::string::npos && space > cut / 2) cut = space;
  return text.substr(0, cut) + " ...";
}

std::unique_ptr<Summarizer> NewExtractiveSummarizer() {
  return std::make_unique<ExtractiveSummarizer>();
}

}  // namespace convstate
