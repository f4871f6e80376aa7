#include "services/compaction/summarizers/extractive.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "services/common/utf8.h"
#include "services/compaction/ledger/ledger.h"
#include "services/compaction/summarizers/transcript.h"

namespace convstate {
namespace {

// One summary line of a tool call or result.
constexpr size_t kMaxToolLineBytes = 160;
// One sentence in a summary line.
constexpr size_t kMaxSentenceBytes = 400;

// How much a sentence of `speaker` matters to a summary.
int Score(absl::string_view speaker, absl::string_view text, bool opens_turn) {
  const std::string lower = absl::AsciiStrToLower(text);
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
  if (ContainsAny(lower, {"todo", "open question", "still", "pending", "next step", "remaining",
                          "not yet", "blocked"}) ||
      absl::StrContains(text, "?")) {
    score += 2;
  }
  if (speaker == "User") {
    score += 2;  // The user's own words first.
    if (ContainsAny(lower, {"i want", "i need", "goal", "trying to", "help me", "please",
                            "how do i", "can you", "could you"})) {
      score += 3;
    }
    if (opens_turn) score += 3;  // The request that opened the turn.
  }
  // Acknowledgements and small talk ("ok.", "lol.") carry nothing.
  if (text.size() < 12) return 0;
  return score;
}

std::string ToolName(const ItemData& d, const std::map<std::string, std::string>& names) {
  if (!d.tool_name.empty()) return d.tool_name;
  auto it = names.find(d.tool_call_id);
  return it == names.end() ? "tool" : it->second;
}

// The first non-empty line of `text`, on one line, cut to `max_bytes`.
std::string FirstLine(absl::string_view text, size_t max_bytes) {
  for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line.size() <= max_bytes) return std::string(line);
    return absl::StrCat(Utf8Prefix(line, max_bytes), " ...");
  }
  return "";
}

// What a tool call asked for, readably: the string values of its JSON
// arguments ("cmd", "query", ...) joined, or the arguments as they are.
std::string CallArguments(const std::string& content) {
  const nlohmann::json args = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object()) return content;
  std::vector<std::string> parts;
  for (const auto& [key, value] : args.items()) {
    if (value.is_string()) parts.push_back(value.get<std::string>());
  }
  return parts.empty() ? content : absl::StrJoin(parts, " ");
}

// The lines a summary may draw on, from the items themselves. Sentences
// already in the ledger are left to it.
std::vector<SummaryLine> CandidateLines(const SummaryRequest& req) {
  std::set<std::string> preserved;
  for (const std::string& p : req.preserved) preserved.insert(FactKey(p));
  std::vector<SummaryLine> out;
  for (const Item& item : req.items) {
    const ItemData& d = item.data;
    switch (d.kind) {
      case ItemKind::kMessage: {
        if (d.role != Role::kUser && d.role != Role::kAssistant) break;
        const std::string speaker = d.role == Role::kUser ? "User" : "Assistant";
        bool first = StartsTurn(d);
        for (std::string& sentence : SplitSentences(d.content)) {
          if (preserved.contains(FactKey(sentence))) {
            first = false;
            continue;
          }
          if (sentence.size() > kMaxSentenceBytes) {
            sentence = absl::StrCat(Utf8Prefix(sentence, kMaxSentenceBytes), " ...");
          }
          const int score = Score(speaker, sentence, first);
          first = false;
          out.push_back(SummaryLine{item.sequence, speaker, std::move(sentence), score});
        }
        break;
      }
      case ItemKind::kToolCall:
        out.push_back(SummaryLine{
            item.sequence, "Assistant",
            absl::StrCat("ran ", ToolName(d, req.tool_names), ": ",
                         OneLine(FirstLine(CallArguments(d.content), kMaxToolLineBytes))),
            2});
        break;
      case ItemKind::kToolResult: {
        // What came back, in one line: its error lines if it has any
        // (wherever they are), else its first line and its size.
        const std::vector<std::string> errors = ErrorLines(d.content, 2);
        std::string text;
        for (const std::string& e : errors) {
          if (preserved.contains(FactKey(absl::StrCat(ToolName(d, req.tool_names), ": ", e)))) continue;
          absl::StrAppend(&text, text.empty() ? "" : " | ",
                          e.size() > kMaxToolLineBytes
                              ? absl::StrCat(Utf8Prefix(e, kMaxToolLineBytes), " ...")
                              : e);
        }
        if (text.empty() && errors.empty()) {
          const int64_t lines = std::count(d.content.begin(), d.content.end(), '\n') + 1;
          text = absl::StrCat(FirstLine(d.content, kMaxToolLineBytes), " (", lines, " lines)");
        }
        if (text.empty()) break;  // Its errors are all in the ledger.
        out.push_back(SummaryLine{item.sequence,
                                  absl::StrCat("Tool ", ToolName(d, req.tool_names)),
                                  absl::StrCat("returned: ", text), errors.empty() ? 1 : 4});
        break;
      }
      default:
        break;  // Reasoning is never summarized into the narrative here.
    }
  }
  return out;
}

class ExtractiveSummarizer final : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    if (req.tokenizer == nullptr || req.max_tokens <= 0) {
      return absl::InvalidArgumentError("extractive summarizer needs a tokenizer and a budget");
    }
    const absl::Time start = absl::Now();
    std::vector<SummaryLine> candidates;
    if (!req.merge.empty()) {
      // A fold: the chunks' own lines, each once.
      std::set<std::string> seen;
      for (const SummaryLine& line : req.merge) {
        if (seen.insert(absl::StrCat(line.speaker, "\n", FactKey(line.text))).second) {
          candidates.push_back(line);
        }
      }
    } else {
      candidates = CandidateLines(req);
      // A span whose every line the ledger keeps still gets a summary that
      // says something: its lines, ledger or not.
      if (candidates.empty() && !req.preserved.empty()) {
        SummaryRequest all = req;
        all.preserved.clear();
        candidates = CandidateLines(all);
      }
    }
    int64_t from = 0, through = 0;
    if (!req.items.empty()) {
      from = req.items.front().sequence;
      through = req.items.back().sequence;
    } else if (!req.merge.empty()) {
      from = req.merge.front().sequence;
      through = req.merge.back().sequence;
    }
    // Highest scores first (earlier first among equals), within the budget.
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return candidates[a].score > candidates[b].score;
    });
    int64_t used = req.tokenizer->CountTokens(RenderSummaryLines({}, from, through));
    std::vector<bool> keep(candidates.size(), false);
    for (size_t i : order) {
      if (candidates[i].score <= 0) continue;
      const int64_t cost = req.tokenizer->CountTokens(candidates[i].text) + 3;
      if (used + cost > req.max_tokens) continue;
      keep[i] = true;
      used += cost;
    }
    // Nothing fit whole: the best line, cut to the budget, rather than a
    // summary that says nothing.
    if (std::find(keep.begin(), keep.end(), true) == keep.end() && !order.empty() &&
        candidates[order.front()].score > 0) {
      SummaryLine& best = candidates[order.front()];
      const int64_t room = req.max_tokens - used - 3;
      if (room > 8) {
        best.text = CutToTokens(best.text, room, *req.tokenizer);
        keep[order.front()] = true;
      }
    }
    SummaryResult result;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (keep[i]) result.lines.push_back(std::move(candidates[i]));
    }
    result.text = CutToTokens(RenderSummaryLines(result.lines, from, through), req.max_tokens,
                              *req.tokenizer);
    result.model = kExtractiveModel;
    result.prompt_version = kExtractivePromptVersion;
    result.tokens_in = req.tokenizer->CountTokens(req.transcript);
    result.tokens_out = req.tokenizer->CountTokens(result.text);
    result.latency_ms = absl::ToInt64Milliseconds(absl::Now() - start);
    return result;
  }
};

}  // namespace

std::unique_ptr<Summarizer> NewExtractiveSummarizer() {
  return std::make_unique<ExtractiveSummarizer>();
}

}  // namespace convstate
