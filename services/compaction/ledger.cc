#include "services/compaction/ledger.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

// Longest fact the ledger keeps whole; longer sentences keep the clauses
// that hold facts.
constexpr size_t kMaxFactBytes = 280;
constexpr size_t kMaxInstructionBytes = 600;
constexpr size_t kMaxErrorLineBytes = 200;
constexpr size_t kErrorLinesPerResult = 3;

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool ContainsAny(absl::string_view lower, std::initializer_list<absl::string_view> words) {
  for (absl::string_view w : words) {
    if (absl::StrContains(lower, w)) return true;
  }
  return false;
}

bool StartsWithAny(absl::string_view lower, std::initializer_list<absl::string_view> words) {
  for (absl::string_view w : words) {
    if (absl::StartsWith(lower, w)) return true;
  }
  return false;
}

absl::string_view StripListMarker(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  for (absl::string_view marker : {"- ", "* ", "> ", "\xE2\x80\xA2 "}) {  // U+2022 bullet
    if (absl::ConsumePrefix(&line, marker)) return absl::StripLeadingAsciiWhitespace(line);
  }
  size_t digits = 0;
  while (digits < line.size() && IsDigit(line[digits])) ++digits;
  if (digits > 0 && digits + 1 < line.size() && (line[digits] == '.' || line[digits] == ')') &&
      line[digits + 1] == ' ') {
    line.remove_prefix(digits + 2);
  }
  return line;
}

// A word with the punctuation around it removed.
absl::string_view Core(absl::string_view word) {
  constexpr absl::string_view kPunct = "\"'()[]{}<>,.;:!?*";
  while (!word.empty() && kPunct.find(word.front()) != absl::string_view::npos) {
    word.remove_prefix(1);
  }
  while (!word.empty() && kPunct.find(word.back()) != absl::string_view::npos) {
    word.remove_suffix(1);
  }
  return word;
}

bool WordIsFact(absl::string_view raw, bool first) {
  if (raw.find('`') != absl::string_view::npos) return true;
  const absl::string_view w = Core(raw);
  if (w.empty()) return false;
  if (absl::StartsWith(w, "--") || absl::StartsWith(w, "$") || absl::StartsWith(w, "#") ||
      absl::StrContains(w, "://") || absl::StrContains(w, "@")) {
    return w.size() > 1;
  }
  int hyphens = 0, uppers = 0, lowers = 0;
  bool camel = false;
  for (size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    if (IsDigit(c)) return true;
    if (c == '/' && w.size() > 1) return true;
    const bool inner = i > 0 && i + 1 < w.size() && IsAlnum(w[i - 1]) && IsAlnum(w[i + 1]);
    if ((c == '_' || c == '.') && inner) return true;
    if (c == '-' && inner) ++hyphens;
    if (IsUpper(c)) {
      ++uppers;
      if (i > 0 && IsLower(w[i - 1])) camel = true;
    }
    if (IsLower(c)) ++lowers;
  }
  if (hyphens >= 2 || camel) return true;
  // Acronyms (OOM, TTL, DNS), but not "OK" or "I".
  if (lowers == 0 && uppers >= 2 && w != "OK") return true;
  // A capitalized word inside the sentence: a name of a person, product or place.
  if (!first && IsUpper(w[0]) && lowers > 0 && !absl::StartsWith(w, "I'")) return true;
  return false;
}

// Keeps the clauses of a long sentence that hold facts.
std::string ClipFact(const std::string& sentence) {
  if (sentence.size() <= kMaxFactBytes) return sentence;
  std::vector<std::string> kept;
  for (absl::string_view clause : absl::StrSplit(sentence, absl::ByAnyChar(",;"))) {
    clause = absl::StripAsciiWhitespace(clause);
    if (!clause.empty() && HasHardFact(clause)) kept.emplace_back(clause);
  }
  std::string out = kept.empty() ? sentence : absl::StrJoin(kept, " \xE2\x80\xA6 ");  // " … "
  if (out.size() <= kMaxFactBytes) return out;
  absl::string_view head = Utf8Prefix(out, kMaxFactBytes);
  const size_t space = head.rfind(' ');
  if (space != absl::string_view::npos && space > kMaxFactBytes / 2) head = head.substr(0, space);
  return absl::StrCat(head, " \xE2\x80\xA6");
}

char RoleLetter(Role role) {
  switch (role) {
    case Role::kUser: return 'U';
    case Role::kAssistant: return 'A';
    case Role::kTool: return 'T';
    case Role::kSystem: return 'S';
  }
  return '?';
}

}  // namespace

std::vector<std::string> SplitSentences(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    line = StripListMarker(line);
    size_t begin = 0;
    for (size_t i = 0; i <= line.size(); ++i) {
      const bool end = i == line.size() ||
                       ((line[i] == '.' || line[i] == '?' || line[i] == '!' || line[i] == ';') &&
                        (i + 1 == line.size() || line[i + 1] == ' '));
      if (!end) continue;
      const size_t stop = i < line.size() && line[i] != ';' ? i + 1 : i;
      absl::string_view s = absl::StripAsciiWhitespace(line.substr(begin, stop - begin));
      if (!s.empty()) out.emplace_back(s);
      begin = i + 1;
    }
  }
  return out;
}

bool HasHardFact(absl::string_view sentence) {
  const std::string lower = absl::AsciiStrToLower(sentence);
  if (ContainsAny(lower, {"decided", "decision", "we will ", "we'll ", "agreed", "going with",
                          "go with ", "we chose", "approved", "the plan is", "conclusion",
                          "root cause"})) {
    return true;
  }
  bool first = true;
  for (absl::string_view word : absl::StrSplit(sentence, ' ', absl::SkipEmpty())) {
    if (WordIsFact(word, first)) return true;
    first = false;
  }
  return false;
}

bool IsStandingInstruction(absl::string_view sentence) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(sentence));
  if (lower.empty() || lower.back() == '?') return false;
  absl::string_view s = lower;
  for (absl::string_view lead : {"please ", "and ", "also ", "so ", "oh, ", "but ", "important: ",
                                 "rule: ", "one more thing: ", "note: "}) {
    absl::ConsumePrefix(&s, lead);
  }
  if (StartsWithAny(s, {"never ", "always ", "do not ", "don't ", "dont ", "remember ",
                        "make sure ", "avoid ", "from now on", "going forward", "until further",
                        "no more ", "stop ", "only ever "})) {
    return true;
  }
  return ContainsAny(s, {"from now on", "going forward", "for the rest of", "until further notice",
                         "under no circumstances", "no matter what", "you must ", "you should never",
                         "you should always", "must never ", "must always ", "must not ",
                         "never ever"});
}

std::vector<std::string> ErrorLines(absl::string_view output, size_t max_lines) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (absl::string_view line : absl::StrSplit(output, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    if (out.size() >= max_lines) break;
    line = absl::StripAsciiWhitespace(line);
    const std::string lower = absl::AsciiStrToLower(line);
    if (!ContainsAny(lower, {"error", "fatal", "exception", "failed", "failure", "panic",
                             "denied", "refused", "timed out", "timeout", "oomkilled",
                             "crashloopbackoff", "traceback", "segmentation fault", "unable to"})) {
      continue;
    }
    std::string text(Utf8Prefix(line, kMaxErrorLineBytes));
    if (seen.insert(FactKey(text)).second) out.push_back(std::move(text));
  }
  return out;
}

std::string FactKey(absl::string_view text) {
  std::string key;
  key.reserve(text.size());
  bool space = false;
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = !key.empty();
      continue;
    }
    if (space) key.push_back(' ');
    space = false;
    key.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return key;
}

std::string FactLine(const LedgerFact& fact) {
  return absl::StrCat("- ", std::string(1, RoleLetter(fact.role)), "#", fact.sequence, ": ",
                      fact.text);
}

Extraction ExtractLedger(const std::vector<Item>& items,
                         const std::map<std::string, std::string>& tool_names,
                         const Tokenizer& tokenizer) {
  Extraction out;
  std::set<std::string> seen;
  auto add = [&](std::vector<LedgerFact>& to, const Item& item, Role role, std::string text) {
    if (!seen.insert(FactKey(text)).second) return;
    LedgerFact fact;
    fact.sequence = item.sequence;
    fact.turn_index = item.turn_index;
    fact.role = role;
    fact.text = std::move(text);
    fact.token_count = tokenizer.CountTokens(FactLine(fact)) + 1;  // And its line break.
    to.push_back(std::move(fact));
  };
  for (const Item& item : items) {
    const ItemData& d = item.data;
    if (d.kind == ItemKind::kMessage && (d.role == Role::kUser || d.role == Role::kAssistant)) {
      for (std::string& sentence : SplitSentences(d.content)) {
        if (d.role == Role::kUser && IsStandingInstruction(sentence)) {
          add(out.constraints, item, d.role, std::string(Utf8Prefix(sentence, kMaxInstructionBytes)));
        } else if (HasHardFact(sentence)) {
          add(out.facts, item, d.role, ClipFact(sentence));
        }
      }
    } else if (d.kind == ItemKind::kToolResult) {
      std::string name = d.tool_name;
      if (name.empty()) {
        auto it = tool_names.find(d.tool_call_id);
        if (it != tool_names.end()) name = it->second;
      }
      for (std::string& line : ErrorLines(d.content, kErrorLinesPerResult)) {
        add(out.facts, item, Role::kTool, absl::StrCat(name.empty() ? "tool" : name, ": ", line));
      }
    }
  }
  return out;
}

LedgerSelection SelectLedger(const std::vector<const SummaryChunk*>& chunks, int64_t budget) {
  std::vector<const LedgerFact*> all;
  std::set<std::string> seen;
  for (const SummaryChunk* chunk : chunks) {
    for (const LedgerFact& fact : chunk->facts) {
      if (seen.insert(FactKey(fact.text)).second) all.push_back(&fact);
    }
  }
  // The newest facts that fit; the oldest go first.
  LedgerSelection out;
  size_t first = all.size();
  while (first > 0 && out.tokens + all[first - 1]->token_count <= budget) {
    --first;
    out.tokens += all[first]->token_count;
  }
  out.omitted = static_cast<int>(first);
  for (size_t i = first; i < all.size(); ++i) out.shown.push_back(*all[i]);
  return out;
}

std::vector<LedgerFact> CollectConstraints(const std::vector<const SummaryChunk*>& chunks) {
  std::vector<LedgerFact> out;
  std::set<std::string> seen;
  for (const SummaryChunk* chunk : chunks) {
    for (const LedgerFact& c : chunk->constraints) {
      if (seen.insert(FactKey(c.text)).second) out.push_back(c);
    }
  }
  return out;
}

double MeasureRecall(const std::vector<LedgerFact>& span_facts, const SummaryChunk& chunk,
                     const std::vector<const SummaryChunk*>& others, int64_t budget,
                     std::vector<LedgerFact>* missing) {
  if (span_facts.empty()) return 1.0;
  std::vector<const SummaryChunk*> all = others;
  all.push_back(&chunk);
  std::sort(all.begin(), all.end(), [](const SummaryChunk* a, const SummaryChunk* b) {
    return a->from_sequence < b->from_sequence;
  });
  std::set<std::string> shown;
  for (const LedgerFact& f : SelectLedger(all, budget).shown) shown.insert(FactKey(f.text));
  int present = 0;
  for (const LedgerFact& f : span_facts) {
    if (shown.contains(FactKey(f.text)) || absl::StrContains(chunk.text, f.text)) {
      ++present;
    } else if (missing != nullptr) {
      missing->push_back(f);
    }
  }
  return static_cast<double>(present) / static_cast<double>(span_facts.size());
}

std::string RenderLedger(const std::vector<LedgerFact>& facts) {
  std::string out =
      "Facts kept verbatim from the summarized part of the conversation (U user, A assistant, "
      "T tool output; #n is the item they came from):";
  for (const LedgerFact& f : facts) absl::StrAppend(&out, "\n", FactLine(f));
  return out;
}

std::string RenderConstraints(const std::vector<LedgerFact>& constraints) {
  std::string out = "Standing instructions the user gave earlier in this conversation, verbatim "
                    "(still in force):";
  for (const LedgerFact& c : constraints) absl::StrAppend(&out, "\n", FactLine(c));
  return out;
}

}  // namespace convstate
