#include "services/compaction/ledger/ledger.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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
constexpr size_t kMaxFactBytes = 200;
constexpr size_t kMaxInstructionBytes = 600;
constexpr size_t kMaxErrorLineBytes = 200;
constexpr size_t kErrorLinesPerResult = 3;

// Calls `emit` with each character of FactKey(text): lowercase, runs of
// white space as one space, none at the ends. FactKey builds it, FactHash
// hashes it without building it.
template <typename Emit>
void ForEachKeyChar(absl::string_view text, Emit emit) {
  bool space = false, any = false;
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = any;
      continue;
    }
    if (space) emit(' ');
    space = false;
    any = true;
    emit(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
}

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// True if one of `words` stands in `lower` as a word of its own, not as
// part of an identifier ("error:" and "ERROR" count, "errors_total" does not).
bool ContainsWord(absl::string_view lower, std::initializer_list<absl::string_view> words) {
  auto ident = [](char c) { return IsAlnum(c) || c == '_'; };
  for (absl::string_view w : words) {
    for (size_t at = lower.find(w); at != absl::string_view::npos; at = lower.find(w, at + 1)) {
      const size_t end = at + w.size();
      if ((at == 0 || !ident(lower[at - 1])) && (end == lower.size() || !ident(lower[end]))) {
        return true;
      }
    }
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

// A long sentence cut to what holds its facts: each word that is a fact
// with a few words around it, windows that touch merged, the gaps marked
// " … ". The context narrows until the cut fits twice the usual length; a
// sentence with no fact word (a decision) keeps its head.
std::string ClipFact(const std::string& sentence) {
  if (sentence.size() <= kMaxFactBytes) return sentence;
  const std::vector<absl::string_view> words = absl::StrSplit(sentence, ' ', absl::SkipEmpty());
  std::vector<size_t> facts;
  for (size_t i = 0; i < words.size(); ++i) {
    if (WordIsFact(words[i], i == 0)) facts.push_back(i);
  }
  std::string out;
  for (int context : {4, 2, 1, 0}) {
    if (facts.empty()) break;
    std::vector<bool> keep(words.size(), false);
    for (size_t f : facts) {
      const size_t from = f >= static_cast<size_t>(context) ? f - context : 0;
      for (size_t i = from; i <= std::min(words.size() - 1, f + context); ++i) keep[i] = true;
    }
    out.clear();
    bool gap = false;
    for (size_t i = 0; i < words.size(); ++i) {
      if (!keep[i]) {
        gap = true;
        continue;
      }
      if (!out.empty() || gap) absl::StrAppend(&out, gap ? (out.empty() ? "\xE2\x80\xA6 " : " \xE2\x80\xA6 ") : " ");
      out.append(words[i].data(), words[i].size());
      gap = false;
    }
    if (gap) absl::StrAppend(&out, " \xE2\x80\xA6");
    if (out.size() <= 2 * kMaxFactBytes) return out;
  }
  if (out.empty()) out = sentence;
  absl::string_view head = Utf8Prefix(out, kMaxFactBytes);
  const size_t space = head.rfind(' ');
  if (space != absl::string_view::npos && space > kMaxFactBytes / 2) head = head.substr(0, space);
  return absl::StrCat(head, " \xE2\x80\xA6");
}

// The shape of a row: its first word with digits made alike ("order
// 84245323 ..." and "order 21170484 ..." share one).
std::string RowShape(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  std::string shape(line.substr(0, line.find(' ')));
  for (char& c : shape) {
    if (IsDigit(c)) c = '0';
  }
  return shape;
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

bool ContainsAny(absl::string_view text, std::initializer_list<absl::string_view> words) {
  for (absl::string_view w : words) {
    if (absl::StrContains(text, w)) return true;
  }
  return false;
}

std::vector<std::string> SplitSentences(absl::string_view text, bool at_semicolons) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    line = StripListMarker(line);
    size_t begin = 0;
    for (size_t i = 0; i <= line.size(); ++i) {
      const bool end =
          i == line.size() ||
          ((line[i] == '.' || line[i] == '?' || line[i] == '!' || (at_semicolons && line[i] == ';')) &&
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

std::vector<std::string> ErrorLines(absl::string_view output, size_t max_lines) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (absl::string_view line : absl::StrSplit(output, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    if (out.size() >= max_lines) break;
    line = absl::StripAsciiWhitespace(line);
    const std::string lower = absl::AsciiStrToLower(line);
    if (!ContainsWord(lower, {"error", "fatal", "exception", "failed", "failure", "panic",
                              "denied", "refused", "timed out", "timeout", "oomkilled",
                              "crashloopbackoff", "traceback", "segmentation fault", "unable to",
                              "err!", "not found"})) {
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
  ForEachKeyChar(text, [&key](char c) { key.push_back(c); });
  return key;
}

std::string FactLine(const LedgerFact& fact) {
  // Sequence 0: carried over from an earlier conversation, no item here.
  if (fact.sequence == 0) {
    return absl::StrCat("- ", std::string(1, RoleLetter(fact.role)), " (earlier): ", fact.text);
  }
  return absl::StrCat("- ", std::string(1, RoleLetter(fact.role)), "#", fact.sequence, ": ",
                      fact.text);
}

int64_t FactTokens(const LedgerFact& fact, const Tokenizer& tokenizer) {
  return tokenizer.CountTokens(FactLine(fact)) + 1;  // And its line break.
}

void CountChunk(SummaryChunk& chunk, const Tokenizer& tokenizer, int64_t per_message_tokens) {
  chunk.token_count = CountSystemTokens(tokenizer, chunk.text, per_message_tokens);
  for (std::vector<LedgerFact>* facts : {&chunk.facts, &chunk.constraints}) {
    for (LedgerFact& f : *facts) f.token_count = FactTokens(f, tokenizer);
  }
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
    fact.token_count = FactTokens(fact, tokenizer);
    fact.token_hashes = FactTokenHashes(fact.text);
    to.push_back(std::move(fact));
  };
  for (const Item& item : items) {
    const ItemData& d = item.data;
    if (d.kind == ItemKind::kMessage && (d.role == Role::kUser || d.role == Role::kAssistant)) {
      // Pasted blocks (between ``` fences) are data, like tool output: their
      // error lines are facts, and so are lines unlike the rows around them
      // (a ticket's header, an alert's title); rows of a table or a log,
      // whose first word recurs, are not.
      std::string prose;
      std::vector<absl::string_view> block;
      bool in_block = false;
      auto flush = [&] {
        std::map<std::string, int> shapes;
        for (absl::string_view line : block) ++shapes[RowShape(line)];
        for (absl::string_view line : block) {
          std::vector<std::string> errors = ErrorLines(line, 1);
          if (!errors.empty()) {
            add(out.facts, item, d.role, std::move(errors.front()));
          } else if (shapes[RowShape(line)] == 1) {
            absl::StrAppend(&prose, line, "\n");
          }
        }
        block.clear();
      };
      for (absl::string_view line : absl::StrSplit(d.content, '\n')) {
        if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "```")) {
          if (in_block) flush();
          in_block = !in_block;
          continue;
        }
        (in_block ? block.push_back(line) : absl::StrAppend(&prose, line, "\n"));
      }
      flush();  // An unclosed block.
      // A rule goes on after a semicolon ("nobody restarts a store's server
      // while it trades; it waits for the night"): its sentence is whole
      // there, a fact's ends at one.
      for (std::string& whole : SplitSentences(prose, /*at_semicolons=*/false)) {
        if (d.role == Role::kUser && IsStandingInstruction(whole)) {
          // The whole sentence, unless it is too long: then its rule.
          add(out.constraints, item, d.role,
              whole.size() <= kMaxInstructionBytes ? whole : RuleOf(whole, kMaxInstructionBytes));
          continue;
        }
        for (std::string& sentence : SplitSentences(whole)) {
          if (HasHardFact(sentence)) add(out.facts, item, d.role, ClipFact(sentence));
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

bool Capitalized(absl::string_view w) {
  if (w.size() < 2 || !IsUpper(w[0])) return false;
  for (char c : w.substr(1)) {
    if (!IsLower(c) && c != '-' && c != '\'') return false;
  }
  return true;
}

// Capitalized words that open sentences, not names.
bool CommonOpener(absl::string_view w) {
  static constexpr absl::string_view kOpeners[] = {
      "The", "This", "That", "These", "Those", "We", "It", "If", "In", "On", "For", "And", "But",
      "So", "Yes", "No", "Our", "My", "Your", "Its", "There", "Then", "When", "What", "Why",
      "How", "Please", "Also", "Only", "Once", "After", "Before", "One", "Let", "Do", "Did",
      "Ask", "Tell", "Check", "Set", "Run", "Use", "See", "Note", "Add", "Go", "Make", "Keep"};
  for (absl::string_view o : kOpeners) {
    if (w == o) return true;
  }
  return false;
}

namespace {

// Calls `emit(a, b)` for each id, figure or name of `text`: the token is
// a followed by b (b empty, or a two-word token's second word), to be
// lowercased by the receiver.
template <typename Emit>
void ForEachSpecificToken(absl::string_view text, Emit emit) {
  absl::string_view previous;
  int index = 0;
  for (absl::string_view raw : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const absl::string_view w = Core(raw);
    if (w.empty()) continue;
    ++index;
    // A person's or a product's name: two capitalized words in a row.
    if (Capitalized(w) && Capitalized(previous) && !(index == 2 && CommonOpener(previous))) {
      emit(previous, w);
    }
    bool digit = false, joined = false, all_digits = true;
    for (size_t i = 0; i < w.size(); ++i) {
      digit |= IsDigit(w[i]);
      all_digits &= IsDigit(w[i]);
      joined |= i > 0 && i + 1 < w.size() &&
                std::string_view("-_./:#@=").find(w[i]) != std::string_view::npos;
    }
    if (digit && all_digits && w.size() < 3) {
      // A small number says little alone: "ndots to 2" is not "2".
      emit(previous, w);
    } else if (digit || joined) {
      emit(w, absl::string_view());
    }
    previous = w;
  }
}

// FNV-1a over lowercased bytes.
uint64_t HashLower(uint64_t h, absl::string_view text) {
  for (char c : text) {
    h ^= static_cast<unsigned char>(absl::ascii_tolower(static_cast<unsigned char>(c)));
    h *= 1099511628211ull;
  }
  return h;
}

constexpr uint64_t kFnvBasis = 14695981039346656037ull;

uint64_t TokenHash(absl::string_view a, absl::string_view b) {
  uint64_t h = HashLower(kFnvBasis, a);
  if (!b.empty()) h = HashLower(HashLower(h, " "), b);
  return h;
}

}  // namespace

std::set<std::string> SpecificTokens(absl::string_view text) {
  std::set<std::string> out;
  ForEachSpecificToken(text, [&out](absl::string_view a, absl::string_view b) {
    out.insert(absl::AsciiStrToLower(b.empty() ? std::string(a) : absl::StrCat(a, " ", b)));
  });
  return out;
}

void AddSpecificTokenHashes(absl::string_view text, TokenHashes& out) {
  ForEachSpecificToken(text, [&out](absl::string_view a, absl::string_view b) {
    out.insert(TokenHash(a, b));
  });
}

std::vector<uint64_t> FactTokenHashes(absl::string_view text) {
  std::vector<uint64_t> out;
  ForEachSpecificToken(text, [&out](absl::string_view a, absl::string_view b) {
    const uint64_t h = TokenHash(a, b);
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  });
  return out;
}

uint64_t FactHash(absl::string_view text) {
  uint64_t h = kFnvBasis;
  ForEachKeyChar(text, [&h](char c) { h = HashLower(h, absl::string_view(&c, 1)); });
  return h;
}

namespace {

int FactValue(const LedgerFact& fact, bool specific, bool redundant, bool novel) {
  int value = fact.role == Role::kUser ? 3 : fact.role == Role::kAssistant ? 2 : 1;
  if (specific) value += 2;
  if (novel) value += 1;  // The first mention of an id or figure.
  // A decision stated as such (lowercase, or opening the sentence).
  if (ContainsAny(fact.text, {"decided", "decision", "we will ", "agreed", "going with",
                              "root cause", "Decided", "Decision", "We will ", "Agreed",
                              "Going with", "Root cause"})) {
    value += 2;
  }
  if (redundant) value -= 4;
  return value;
}

}  // namespace

LedgerSelection SelectLedger(const std::vector<const SummaryChunk*>& chunks, int64_t budget,
                             const TokenHashes& live_tokens) {
  // Runs on every view: hashes, not strings, so that no fact allocates,
  // and every table sized once (growing them was a third of its time).
  size_t facts = 0;
  for (const SummaryChunk* chunk : chunks) facts += chunk->facts.size();
  std::vector<const LedgerFact*> all;
  all.reserve(facts);
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(facts);
  int64_t total = 0;
  for (const SummaryChunk* chunk : chunks) {
    for (const LedgerFact& fact : chunk->facts) {
      if (seen.insert(FactHash(fact.text)).second) {
        all.push_back(&fact);
        total += fact.token_count;
      }
    }
  }
  LedgerSelection out;
  std::vector<bool> keep(all.size(), true);
  if (total > budget) {
    // Facts carry their token hashes from extraction; older ones (stored
    // before they did) are read again here.
    std::vector<std::vector<uint64_t>> computed(all.size());
    std::vector<const std::vector<uint64_t>*> tokens(all.size());
    size_t token_count = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i]->token_hashes.empty()) computed[i] = FactTokenHashes(all[i]->text);
      tokens[i] = all[i]->token_hashes.empty() ? &computed[i] : &all[i]->token_hashes;
      token_count += tokens[i]->size();
    }
    // token -> the oldest fact holding it, and the newest item holding it.
    absl::flat_hash_map<uint64_t, size_t> first_seen;
    absl::flat_hash_map<uint64_t, int64_t> last_item;
    first_seen.reserve(token_count);
    last_item.reserve(token_count);
    for (size_t i = 0; i < all.size(); ++i) {
      for (uint64_t t : *tokens[i]) {
        first_seen.emplace(t, i);
        int64_t& last = last_item[t];
        last = std::max(last, all[i]->sequence);
      }
    }
    std::vector<int> value(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      // Redundant: every id and figure it holds is in a fact of a later
      // item or in the live items the view shows verbatim anyway.
      bool redundant = !tokens[i]->empty();
      bool novel = false;
      for (uint64_t t : *tokens[i]) {
        redundant &= last_item[t] > all[i]->sequence || live_tokens.contains(t);
        novel |= first_seen[t] == i;
      }
      value[i] = FactValue(*all[i], !tokens[i]->empty(), redundant, novel);
    }
    // Breadth first: each item's best facts (its first among equals) rank
    // before any item's next ones, so that a message with a dozen figures
    // does not crowd out the one fact of another turn.
    absl::flat_hash_map<int64_t, std::vector<size_t>> by_item;
    by_item.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i) by_item[all[i]->sequence].push_back(i);
    std::vector<int> rank(all.size());
    for (auto& [sequence, facts] : by_item) {
      std::stable_sort(facts.begin(), facts.end(),
                       [&](size_t a, size_t b) { return value[a] > value[b]; });
      for (size_t r = 0; r < facts.size(); ++r) rank[facts[r]] = static_cast<int>(r);
    }
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (rank[a] != rank[b]) return rank[a] > rank[b];
      if (value[a] != value[b]) return value[a] < value[b];
      return a < b;
    });
    for (size_t i : order) {
      if (total <= budget) break;
      keep[i] = false;
      total -= all[i]->token_count;
      ++out.omitted;
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (!keep[i]) continue;
    out.shown.push_back(all[i]);
    out.tokens += all[i]->token_count;
  }
  return out;
}

std::vector<LedgerFact> CollectConstraints(const std::vector<const SummaryChunk*>& chunks) {
  std::vector<LedgerFact> out;
  absl::flat_hash_set<uint64_t> seen;
  for (const SummaryChunk* chunk : chunks) {
    for (const LedgerFact& c : chunk->constraints) {
      if (seen.insert(FactHash(c.text)).second) out.push_back(c);
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
  for (const LedgerFact* f : SelectLedger(all, budget).shown) shown.insert(FactKey(f->text));
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

std::string RenderLedger(const std::vector<const LedgerFact*>& facts) {
  std::string out = "Facts from the summarized turns, verbatim (U user, A assistant, T tool; "
                    "#n: item):";
  for (const LedgerFact* f : facts) absl::StrAppend(&out, "\n", FactLine(*f));
  return out;
}

std::string RenderConstraints(const std::vector<LedgerFact>& constraints) {
  std::string out = "Standing instructions the user gave earlier in this conversation, verbatim "
                    "(still in force):";
  for (const LedgerFact& c : constraints) absl::StrAppend(&out, "\n", FactLine(c));
  return out;
}

}  // namespace convstate
