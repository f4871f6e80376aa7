#include "services/compaction/recall/recall.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "services/common/utf8.h"
#include "services/common/word_forms.h"

namespace convstate {
namespace {

// A delimiter for absl::StrSplit: any one of `chars`, looked up in a table
// built once for the split. absl::ByAnyChar builds its table again for
// every token it finds, which was an eighth of ranking's time
// (BENCHMARKS.md).
class AnyChar {
 public:
  explicit AnyChar(absl::string_view chars) {
    for (char ch : chars) in_[static_cast<unsigned char>(ch)] = true;
  }
  absl::string_view Find(absl::string_view text, size_t pos) const {
    for (size_t i = pos; i < text.size(); ++i) {
      if (in_[static_cast<unsigned char>(text[i])]) return text.substr(i, 1);
    }
    return absl::string_view(text.data() + text.size(), 0);
  }

 private:
  std::array<bool, 256> in_{};
};

// Question words (by their place in the question) with what each weighs.
// A question has a few dozen at most, and ranking makes thousands of these
// a call: a B-tree keeps them in a few nodes where std::map allocates one
// node a word (BENCHMARKS.md).
using WordWeights = absl::btree_map<int, double>;

const absl::flat_hash_set<absl::string_view>& StopwordList();

// Words nearly every question holds; they would match half the history.
// `w` is a search term: the list's words are compared in their one form.
bool IsStopword(absl::string_view w) {
  static const auto* const kForms = [] {
    auto* forms = new absl::flat_hash_set<std::string>();
    for (absl::string_view word : StopwordList()) forms->insert(WordForm(word));
    return forms;
  }();
  return kForms->contains(w);
}

const absl::flat_hash_set<absl::string_view>& StopwordList() {
  static const auto* const kWords = new absl::flat_hash_set<absl::string_view>{
      "a", "about", "again", "all", "also", "am", "an", "and", "any", "are", "as", "asking",
      "at", "back", "be", "been", "being", "but", "by", "can", "could", "did", "do", "does",
      "doing", "done", "for", "from", "get", "go", "going", "got", "had", "has", "have",
      "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
      "just", "know", "let", "like", "many", "me", "might", "more", "much", "must", "my", "need",
      "no", "not", "now", "of", "ok", "okay", "on", "one", "or", "our", "out", "please",
      "remind", "said", "say", "second", "she", "should", "show", "so", "some", "still",
      "tell", "than", "thanks", "that", "the", "their", "them", "then", "there", "these",
      "they", "this", "those", "to", "too", "up", "us", "very", "was", "we", "were", "what",
      "vs", "when", "where", "which", "who", "why", "will", "with", "would", "yes", "you", "your",
      "s", "t", "d", "ll", "m", "re", "ve",
      // Negations as they split ("weren't": "weren", "t"), and
      // conjunctions that join clauses, not things.
      "aren", "isn", "wasn", "weren", "didn", "doesn", "don", "hasn", "haven", "hadn",
      "couldn", "wouldn", "shouldn", "because", "whether", "yet", "while",
      // Words that name nothing, only qualify ("the switchover itself",
      // "the window around the peak", "how many altogether"), and whose
      // one form is no other word's ("even" is "evening"'s, "quite"
      // "quit"'s, "basically" "basic"'s, "actually" "actual"'s).
      "itself", "themselves", "himself", "herself", "myself", "yourself", "ourselves",
      "around", "really", "altogether", "anyway", "maybe", "perhaps", "already", "alone",
      "quickly", "roughly",
      // Prepositions that relate the things named, and name none.
      "during", "through", "via", "per", "according", "within", "across", "between"};
  return *kWords;
}

constexpr double kK1 = 1.2;
constexpr double kB = 0.75;
// Words a passage usually has: the length BM25 normalizes to.
constexpr double kAverageTerms = 12;
// Words a message of the talk around a tool's output usually has: longer
// ones count their words at a share (BM25's normalization, at most 1).
constexpr double kAverageTalkTerms = 40;
// A question word found in the passage's item but not in the passage itself
// (the service a config belongs to) counts this much.
constexpr double kItemContext = 0.6;
// A question word a chosen passage already answered counts this much in the
// passages chosen after it, so that the next pick answers another part.
constexpr double kCovered = 0.25;
// A value line of a later output that reads as an earlier one's, when the
// question asks for the first, counts this much.
constexpr double kLater = 0.5;
// A stand-in for a word the history holds itself (StandIns) weighs this
// share: the question was likely asked in the history's words, but a
// "pod" the history names is still the `maxReplicas` asked about as "the
// most pods".
constexpr double kHeldStandIn = 0.4;
// A passage holding a word only a contrast of the question holds ("not the
// vLLM serving one") scores this share.
constexpr double kContrasted = 0.5;
// Passages scoring less than this share of the first pick are not recalled.
constexpr double kRelativeFloor = 0.35;
// A word held by at most this many items is specific enough alone.
constexpr int64_t kRareItems = 3;
// In a history of at least kLongHistory items, a question of at least
// kMinOffTopicWords words whose words the history lacks entirely weigh
// this share of it or more is about something else (a recipe, a weekend
// away): what its everyday words match is not what it asks about, and
// nothing is recalled. A short history lacks many everyday words a real
// question holds, and a question of three words ("ticket # for the double
// charge?") lacks too few to tell.
constexpr int64_t kLongHistory = 100;
constexpr int kMinOffTopicWords = 4;
constexpr double kMaxUnseenShare = 0.6;
// A message that opens by saying it is about something else ("Unrelated:",
// "Off-topic, but", "Random question:") is, where the history lacks this
// share of its words or more, in a history of any length.
constexpr double kMaxUnseenShareAside = 0.25;
// The words of such an opening at most, before its ':' or ','.
constexpr size_t kMaxAsideWords = 6;
constexpr size_t kMaxTitleBytes = 160;
// Candidates the greedy pass weighs, the best by their own score.
constexpr size_t kMaxCandidates = 500;
// At most this many passages of one item.
constexpr int kMaxPerItem = 3;
// A question word too common to search by (held by more items than the
// search's cap) still tells lines of one item apart: it counts this share
// of its weight on a line.
constexpr double kCommonWord = 1.0;
// A question word only the item's exchange holds (its call, the question of
// its turn) counts this much on its lines: the output does not name what
// it is about, its exchange does.
constexpr double kExchangeContext = 1.0;
// A line holding a value, in an item whose exchange answers the question.
constexpr double kValueLine = 0.3;
// A line setting a name to a figure, when the question asks for a quantity.
constexpr double kFigureLine = 0.5;
// What a word of the question's other sentences weighs, when a sentence
// asks (ends with '?') and does not hold it; a sentence of at most
// kFragmentWords words is part of the question.
constexpr double kAside = 0.6;
constexpr size_t kFragmentWords = 5;
// What a word of a line weighs when the call of its output holds it too:
// the provenance line shows the call (a diff's header repeats its path).
constexpr double kShownInCall = 0.6;
// The share of the question's weight the first passage must answer (its
// words the history holds, and those it does not hold at all, of at least
// kMinUnseenBytes, as if one item held them).
constexpr double kMinAnswered = 0.3;
constexpr size_t kMinUnseenBytes = 4;
// The least a passage takes beside the section's header: its provenance
// line (about ten tokens when it names no call) and a short line. A room
// smaller than this recalls nothing, and nothing is ranked for it.
constexpr int64_t kMinPassageTokens = 16;
// Picks in a row that do not fit the room left: the room is as good as
// full (every further pick would be counted, and most would not fit
// either).
constexpr int kMaxMisfits = 8;
// A question word of a key a line sits under ("prod:" over "threads: 7")
// counts this much on the line, for at most kMaxKeys keys up.
constexpr double kUnderKey = 0.8;
// A record of a list (KeysOver::OpensRecord) is named by its lines this
// far down at most.
constexpr size_t kMaxRecordLines = 40;
constexpr int kMaxKeys = 3;
// Neighbouring lines shown with a value line, when at most this long.
constexpr size_t kMaxNeighbourBytes = 200;
// Of a call's arguments, the provenance shows this many bytes at most.
constexpr size_t kMaxCallShown = 120;

struct Candidate {
  RecalledPassage passage;
  // Question words the passage holds, with what each weighs on it (a word
  // too common to search by at a share of its weight).
  WordWeights line;
  // Question words its item, or its item's exchange, holds that the
  // passage does not, with what each weighs from there.
  WordWeights context;
  // Found for its value through its exchange.
  bool value = false;
  // The line has the answer's shape (a run's total time, a schedule, a
  // total, a digest), or the question asks for a quantity and the line sets
  // a name to a figure.
  bool figure = false;
  // What it is worth by itself (its line and context, no value weight,
  // nothing covered yet): the floor a pick is held to compares this.
  double worth = 0;
  // The lines of its item it shows, [first, last] (a value's neighbours
  // included), and where in its line a piece of a long line starts (npos:
  // it shows whole lines; a piece has no neighbours).
  size_t first_line = 0, last_line = 0, piece_offset = std::string::npos;
  // Its own line's LineTemplate (not its neighbours'), when the question
  // asks for the first or the last of alike lines (MarkLater).
  std::string own_template;
  // A later one of alike lines, when the question asks for the first (an
  // earlier one, when it asks for the last).
  bool later = false;
  // Its item's call holds a word only a contrast of the question holds.
  bool contrasted = false;
  // Its line holds a question word of its own (not only through the keys
  // it sits under; an opening message's passage holds none).
  bool own_words = false;
};

// `text` with each word holding a digit (a figure, a hash, an id) as '#':
// alike lines of two runs of a tool ("dry-run checksum 30a6359", "dry-run
// checksum 9b1c2e4") read the same.
std::string LineTemplate(absl::string_view text) {
  std::string out;
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    if (!out.empty()) out.push_back(' ');
    const bool figure = std::any_of(word.begin(), word.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    out.append(figure ? "#" : std::string(word));
  }
  return out;
}

// Whether a line's terms hold a value (IsValueTerm).
bool HoldsValue(const std::vector<std::string>& terms) {
  return std::any_of(terms.begin(), terms.end(), [](const std::string& t) { return IsValueTerm(t); });
}

}  // namespace

absl::string_view AfterLineNumber(absl::string_view line) {
  const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(line);
  // A path (a '/' or a '.', a letter, no white space) before ":N:".
  if (const size_t colon = stripped.find(':'); colon != absl::string_view::npos && colon > 0) {
    const absl::string_view path = stripped.substr(0, colon);
    size_t end = colon + 1;
    while (end < stripped.size() && absl::ascii_isdigit(static_cast<unsigned char>(stripped[end]))) {
      ++end;
    }
    if (end > colon + 1 && end < stripped.size() && stripped[end] == ':' &&
        path.find_first_of("/.") != absl::string_view::npos &&
        std::any_of(path.begin(), path.end(),
                    [](char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); }) &&
        std::none_of(path.begin(), path.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
      return stripped.substr(end + 1);
    }
  }
  size_t i = 0;
  while (i < stripped.size() && absl::ascii_isdigit(static_cast<unsigned char>(stripped[i]))) ++i;
  if (i == 0 || i >= stripped.size() || (stripped[i] != '\t' && stripped[i] != '|')) return line;
  absl::string_view rest = stripped.substr(i + 1);
  if (stripped[i] == '|' && absl::StartsWith(rest, " ")) rest.remove_prefix(1);
  return rest;
}

namespace {

// `line` without its leading white space and the number a file reader
// puts before each line ("    34\tMAX = 5", "34| MAX = 5").
absl::string_view WithoutLineNumber(absl::string_view line) {
  return absl::StripLeadingAsciiWhitespace(AfterLineNumber(line));
}

// `line` without a log line's time stamp and level ("2026-05-12
// 00:57:37,952 INFO  order lines written: 42838", "[12:04:55] WARN x"):
// what the program said. Unchanged when it does not open with a date or a
// time followed by a level.
absl::string_view WithoutLogPrefix(absl::string_view line) {
  size_t i = 0;
  bool clock = false;
  while (i < line.size()) {
    const char c = line[i];
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == ':' && i > 0 && i + 1 < line.size() &&
               absl::ascii_isdigit(static_cast<unsigned char>(line[i + 1]))) {
      clock = true;
      ++i;
    } else if (c == '-' || c == ',' || c == '.' || c == '[' || c == ']' || c == ' ' ||
               c == 'T' || c == 'Z' || c == '+') {
      ++i;
    } else {
      break;
    }
  }
  if (!clock) return line;
  static constexpr absl::string_view kLevels[] = {"TRACE", "DEBUG", "INFO",  "NOTICE", "WARNING",
                                                  "WARN",  "ERROR", "FATAL", "CRITICAL"};
  const absl::string_view rest = line.substr(i);
  for (absl::string_view level : kLevels) {
    if (!absl::StartsWith(rest, level) || rest.size() == level.size()) continue;
    absl::string_view said = rest.substr(level.size());
    if (said.front() == ']' || said.front() == ':') said.remove_prefix(1);
    else if (said.front() != ' ') continue;
    return absl::StripLeadingAsciiWhitespace(said);
  }
  return line;
}

// The value `line` sets a name to, whatever it holds ("replicas: 3",
// "GRACE_DAYS = 5", "\"port\": 8080", "unapplied_deltas | 6118", "order
// lines written: 42838"), with the name in `name_out`; empty when `line`
// is not a setting, a constant or a record's field.
absl::string_view Assigned(absl::string_view line, absl::string_view* name_out = nullptr) {
  line = WithoutLineNumber(line);
  line = WithoutLogPrefix(line);
  // A diff's or a plan's mark of a changed line ("+ size = 3750", "-
  // retries: 3", "~ replicas = 4"), a unified diff's right before the
  // name ("+max_wal_size = 160GB").
  if (line.size() > 2 && (line[0] == '+' || line[0] == '-' || line[0] == '~') &&
      line[1] == ' ') {
    line = absl::StripLeadingAsciiWhitespace(line.substr(2));
  } else if (line.size() > 1 && (line[0] == '+' || line[0] == '-') &&
             (absl::ascii_isalpha(static_cast<unsigned char>(line[1])) || line[1] == '_' ||
              line[1] == '"')) {
    line.remove_prefix(1);
  }
  size_t i = 0;
  // A name of up to four words before a colon ("order lines written:
  // 42838", "Total Objects: 1970").
  int spaces = 0;
  while (i < line.size() && (absl::ascii_isalnum(static_cast<unsigned char>(line[i])) ||
                             line[i] == '_' || line[i] == '-' || line[i] == '.' ||
                             line[i] == '"' || line[i] == '\'' ||
                             (line[i] == ' ' && spaces < 3 && i > 0 && line[i - 1] != ' ' &&
                              i + 1 < line.size() &&
                              absl::ascii_isalpha(static_cast<unsigned char>(line[i + 1]))))) {
    if (line[i] == ' ') ++spaces;
    ++i;
  }
  if (i == 0) return {};
  // Words before anything but a colon are not a name.
  if (spaces > 0 && (i >= line.size() || line[i] != ':')) return {};
  // A name holds a letter that is not a date's or a time's "T" ("13:42:17",
  // "2026-03-04T10:10:00Z" open log lines; they name nothing).
  const absl::string_view name = line.substr(0, i);
  bool letter = false;
  for (size_t k = 0; k < name.size() && !letter; ++k) {
    const bool date_t = name[k] == 'T' && k > 0 && k + 1 < name.size() &&
                        absl::ascii_isdigit(static_cast<unsigned char>(name[k - 1])) &&
                        absl::ascii_isdigit(static_cast<unsigned char>(name[k + 1]));
    letter = absl::ascii_isalpha(static_cast<unsigned char>(name[k])) && !date_t;
  }
  if (!letter) return {};
  while (i < line.size() && line[i] == ' ') ++i;
  // A record's field, as psql's expanded display and `Format-List` write
  // one ("unapplied_deltas | 6118"): one bar, not a table's row.
  const bool field = i < line.size() && line[i] == '|' &&
                     line.find('|', i + 1) == absl::string_view::npos;
  if (i >= line.size() || (line[i] != ':' && line[i] != '=' && !field)) return {};
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(i + 1));
  if (value.size() > 80) return {};
  if (name_out != nullptr) *name_out = name;
  return value;
}

// Whether an assigned value holds a digit, however short ("3", "30s").
bool HasDigit(absl::string_view value) {
  return value.find_first_of("0123456789") != absl::string_view::npos;
}

// Whether `line` sets a name to a value that holds a digit: a
// configuration's, a constant's or a record's line, whose figure is the
// answer.
bool AssignsFigure(absl::string_view line) { return HasDigit(Assigned(line)); }

// Whether `value` is a cron schedule's five fields ("20 4 * * *",
// "*/15 2-5 * * 1,3"): a time of day written as a schedule.
bool IsCronSchedule(absl::string_view value) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(value, AnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5) return false;
  // The most each field's numbers may be: minute, hour, day of the month,
  // month, day of the week ("dims = 64 128 256 512 1024" is no schedule).
  constexpr int kMost[] = {59, 23, 31, 12, 7};
  bool digit = false;
  for (size_t f = 0; f < fields.size(); ++f) {
    int number = -1;
    bool step = false;
    for (char c : fields[f]) {
      if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
        digit = true;
        number = std::max(number, 0) * 10 + (c - '0');
        if (!step && number > kMost[f]) return false;
        if (number > 1000) return false;
        continue;
      }
      if (c != '*' && c != '/' && c != ',' && c != '-') return false;
      step = c == '/';
      number = -1;
    }
  }
  return digit;
}

// The value `line` sets a name to a figure with (AssignsFigure), without
// its comment, its trailing separator and its quotes; empty when it sets
// none.
absl::string_view AssignedValue(absl::string_view line) {
  absl::string_view value = Assigned(line);
  if (!HasDigit(value)) return {};
  for (absl::string_view comment : {"#", "//"}) {
    if (size_t at = value.find(comment); at != absl::string_view::npos) value = value.substr(0, at);
  }
  value = absl::StripAsciiWhitespace(value);
  while (!value.empty() && (value.back() == ',' || value.back() == ';')) value.remove_suffix(1);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

// Whether an assigned `value` (AssignedValue) is a time of day: a cron
// schedule ("20 4 * * *") or a clock time ("04:20").
bool IsTimeOfDay(absl::string_view value) {
  if (IsCronSchedule(value)) return true;
  // H:MM or HH:MM, an hour below 24 and minutes below 60, then at most
  // ":SS" and a zone ("Z", " UTC").
  auto digits = [&](size_t from, size_t n, int most) {
    if (from + n > value.size()) return false;
    int v = 0;
    for (size_t k = from; k < from + n; ++k) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(value[k]))) return false;
      v = v * 10 + (value[k] - '0');
    }
    return v <= most;
  };
  const size_t colon = value.find(':');
  if (colon == absl::string_view::npos || colon == 0 || colon > 2 || !digits(0, colon, 23) ||
      !digits(colon + 1, 2, 59)) {
    return false;
  }
  absl::string_view rest = value.substr(colon + 3);
  if (absl::StartsWith(rest, ":")) {
    if (!digits(colon + 4, 2, 59)) return false;
    rest.remove_prefix(3);
  }
  rest = absl::StripLeadingAsciiWhitespace(rest);
  return rest.empty() || rest == "Z" || rest == "UTC";
}

// Whether `line` sets a name to a time of day ("schedule: \"20 4 * * *\"",
// "start_at = 04:20").
bool SetsTimeOfDay(absl::string_view line) { return IsTimeOfDay(AssignedValue(line)); }

// Whether `line` sets a name to a plain figure, the whole value a number
// with at most a short unit ("GRACE_PERIOD_DAYS = 5", "replicas: 3",
// "timeout_ms: 30_000", "ttl = 90s  # cache") or a time of day: a
// setting's definition, not an expression that uses one.
bool SetsFigure(absl::string_view line) {
  const absl::string_view value = AssignedValue(line);
  if (IsTimeOfDay(value)) return true;
  size_t i = 0;
  if (i < value.size() && (value[i] == '-' || value[i] == '+')) ++i;
  if (i >= value.size() || !absl::ascii_isdigit(static_cast<unsigned char>(value[i]))) return false;
  while (i < value.size() && (absl::ascii_isdigit(static_cast<unsigned char>(value[i])) ||
                              value[i] == '_' || value[i] == '.' || value[i] == ',')) {
    ++i;
  }
  absl::string_view unit = absl::StripLeadingAsciiWhitespace(value.substr(i));
  if (unit == "%") return true;
  if (unit.size() > 4) return false;
  for (char ch : unit) {
    if (!absl::ascii_isalpha(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

// How long `terms` make a line for ranking (TermLength of each).
template <typename Terms>
double WordCount(const Terms& terms) {
  double n = 0;
  for (const std::string& t : terms) n += TermLength(t);
  return std::max(1.0, n);
}

// Whether `term` is one of the parts SearchTerms lists after `compound`
// (the term before it, when that was a compound; else "").
bool PartOf(absl::string_view compound, absl::string_view term) {
  return !compound.empty() && term.size() < compound.size() &&
         compound.find(term) != absl::string_view::npos;
}

// Whether SearchTerms lists parts after `term`.
bool IsCompound(absl::string_view term) {
  return term.find_first_of("-./:_@") != absl::string_view::npos;
}

// The sentences of `text`: each ends after a '.', '?' or '!' followed by
// white space (not the dot of a path or a host), or at a line's end; with
// `at_colon`, after a ':' followed by white space too (a lead-in: "Ops
// review in ten minutes, so quickly: what ...?").
std::vector<absl::string_view> Sentences(absl::string_view text, bool at_colon = false) {
  std::vector<absl::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool stop = text[i] == '\n' ||
                      ((text[i] == '.' || text[i] == '?' || text[i] == '!' ||
                        (at_colon && text[i] == ':')) &&
                       (i + 1 == text.size() ||
                        absl::ascii_isspace(static_cast<unsigned char>(text[i + 1]))));
    if (!stop) continue;
    out.push_back(text.substr(start, i + 1 - start));
    start = i + 1;
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

// A question's words in ASCII lowercase, split where a word ends: what the
// question's shape is read from (AsksQuantity and the others).
struct QuestionWords {
  explicit QuestionWords(absl::string_view text)
      : lower(absl::AsciiStrToLower(text)),
        words(absl::StrSplit(lower, AnyChar(" \t\n,.;:?!\"'()"), absl::SkipEmpty())) {}
  QuestionWords(const QuestionWords&) = delete;
  QuestionWords& operator=(const QuestionWords&) = delete;
  // Whether one of the question's words is one of `these`.
  bool HoldsAny(const absl::flat_hash_set<absl::string_view>& these) const {
    return std::any_of(words.begin(), words.end(),
                       [&](absl::string_view w) { return these.contains(w); });
  }
  // Whether "which" or "what" stands among the `within` words before word
  // `i` ("which NCCL build", "what's the exact cron").
  bool AskedWithin(size_t i, size_t within) const {
    for (size_t j = i >= within ? i - within : 0; j < i; ++j) {
      if (words[j] == "which" || words[j] == "what") return true;
    }
    return false;
  }
  const std::string lower;
  const std::vector<absl::string_view> words;  // Into `lower`.
};

// The words of measure that follow "how" in a question for a quantity
// ("how many", "how long", "how big").
const absl::flat_hash_set<absl::string_view>& Measures() {
  static const auto* const kMeasures = new absl::flat_hash_set<absl::string_view>{
      "many", "much", "long", "often", "big", "large", "far", "high", "low", "old", "small"};
  return *kMeasures;
}

// Whether `text` asks for a time of day: "what time", or "when" with a
// word of starting after it ("when does the export kick off?", "when
// does it run").
bool AsksTimeOfDay(const QuestionWords& question) {
  static const auto* const kStarts = new absl::flat_hash_set<absl::string_view>{
      "start", "starts", "run", "runs", "kick", "kicks", "fire", "fires", "trigger", "triggers"};
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i - 1] == "what" && words[i] == "time") return true;
    // "what's the exact cron on them", "which schedule does it run on".
    if ((words[i] == "cron" || words[i] == "crontab" || words[i] == "schedule") &&
        question.AskedWithin(i, 4)) {
      return true;
    }
    if (words[i - 1] != "when" || (words[i] != "does" && words[i] != "do")) continue;
    for (size_t j = i + 1; j < words.size() && j <= i + 6; ++j) {
      if (kStarts->contains(words[j])) return true;
    }
  }
  return false;
}

// Whether `text` asks for a day or a date: "what day", "which night",
// "what date", or a question opening with "when" that asks for no time of
// day ("When is the identity provider sync cutover planned for?").
bool AsksDate(const QuestionWords& question) {
  static const auto* const kDays = new absl::flat_hash_set<absl::string_view>{
      "day", "date", "night", "evening", "weekend", "weekday"};
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 1; i < words.size(); ++i) {
    if (kDays->contains(words[i]) && question.AskedWithin(i, 1)) return true;
  }
  if (words.empty() || words[0] != "when" || AsksTimeOfDay(question)) return false;
  // "When we first hit the health check, how big was the backlog?" asks
  // for what its other question word does.
  return std::none_of(words.begin() + 1, words.end(), [](absl::string_view w) {
    return w == "how" || w == "what" || w == "which" || w == "who";
  });
}

// Whether `text` asks for the first of several ("the first dry run",
// "what was it originally", "the initial value").
bool AsksFirst(const QuestionWords& question) {
  static const auto* const kFirst = new absl::flat_hash_set<absl::string_view>{
      "first", "initial", "initially", "original", "originally", "earliest"};
  return question.HoldsAny(*kFirst);
}

// Whether `text` asks for the last of alike lines in an output: "last" or
// "final" before a word for a line ("by the final warning", "what did the
// last line say", "the last KV-cache warning"), or "at the bottom". Not
// the last of something else ("the last wave's shops", "last night"), nor
// the last before an event ("the last step before it went NaN", "the last
// warning line before the crash"), which need not be an output's last line.
bool AsksLast(const QuestionWords& question) {
  static const auto* const kLines = new absl::flat_hash_set<absl::string_view>{
      "warning", "warnings", "line",     "lines",  "entry", "entries", "message",
      "messages", "error",   "errors",   "reading", "row",  "rows",    "record",
      "records",  "event",   "events"};
  constexpr size_t kWithin = 3;
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "bottom" && i >= 2 && words[i - 1] == "the" &&
        (words[i - 2] == "at" || words[i - 2] == "near" || words[i - 2] == "from")) {
      return true;
    }
    if (words[i] != "last" && words[i] != "final") continue;
    bool line = false, before = false;
    for (size_t j = i + 1; j < words.size() && j <= i + kWithin + 1; ++j) {
      line |= j <= i + kWithin && kLines->contains(words[j]);
      before |= words[j] == "before" || words[j] == "prior";
    }
    if (line && !before) return true;
  }
  return false;
}

// The month a lowercase word names (1 to 12: "march", "dec", "sept"), or 0.
int MonthOf(absl::string_view word) {
  static const auto* const kMonths = new absl::flat_hash_map<absl::string_view, int>{
      {"january", 1},  {"february", 2}, {"march", 3},     {"april", 4},    {"may", 5},
      {"june", 6},     {"july", 7},     {"august", 8},    {"september", 9}, {"october", 10},
      {"november", 11}, {"december", 12}, {"jan", 1},      {"feb", 2},      {"mar", 3},
      {"apr", 4},      {"jun", 6},      {"jul", 7},       {"aug", 8},      {"sep", 9},
      {"sept", 9},     {"oct", 10},     {"nov", 11},      {"dec", 12}};
  auto it = kMonths->find(word);
  return it == kMonths->end() ? 0 : it->second;
}

// `word` without an ordinal's ending ("8th", "22nd", "99th": "8", "22",
// "99").
absl::string_view WithoutOrdinal(absl::string_view word) {
  for (absl::string_view suffix : {"st", "nd", "rd", "th"}) {
    if (absl::ConsumeSuffix(&word, suffix)) break;
  }
  return word;
}

// The day of the month a lowercase word names ("8", "8th", "22nd"), or 0.
int DayOf(absl::string_view word) {
  word = WithoutOrdinal(word);
  int day = 0;
  return word.size() <= 2 && absl::SimpleAtoi(word, &day) && day >= 1 && day <= 31 ? day : 0;
}

// The word of `words` that names a day of the month beside the month's
// name at `i` ("Dec 2", then "2 Dec"), or npos.
size_t DayBeside(const std::vector<absl::string_view>& words, size_t i) {
  if (i + 1 < words.size() && DayOf(words[i + 1]) > 0) return i + 1;
  if (i > 0 && DayOf(words[i - 1]) > 0) return i - 1;
  return std::string::npos;
}

// Whether `line` states a day: a weekday's name, or a month's beside a
// day of the month ("Monday 8 March", "on March 8th", "14 Feb"). A time
// stamp's ISO date is not one (every log line holds one).
bool StatesDate(absl::string_view line) {
  static const auto* const kWeekdays = new absl::flat_hash_set<absl::string_view>{
      "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
  const std::string lower = absl::AsciiStrToLower(line);
  const std::vector<absl::string_view> tokens =
      absl::StrSplit(lower, AnyChar(" \t,.;:()/\"'"), absl::SkipEmpty());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (kWeekdays->contains(tokens[i])) return true;
    if (MonthOf(tokens[i]) > 0 && DayBeside(tokens, i) != std::string::npos) return true;
  }
  return false;
}

// Calls `found` with the month and day of each date `text` writes as a
// system does, until it returns true; whether it did. A date is eight
// digits of a year, month and day standing apart from other digits
// ("PRC_20261202_full.csv.gz"), or a year, month and day joined by '-' not
// followed by a time of day ("2026-12-02", not a log line's "2026-12-02
// 05:24:18" or "2026-12-02T05:24"), or a year and month alone ("month |
// 2026-11", day 0).
bool AnyDateWritten(absl::string_view text, absl::FunctionRef<bool(int, int)> found) {
  // A month and day that can be one ("20269999" is a number; day 0 is a
  // month written alone).
  auto fn = [&](int month, int day) {
    return month >= 1 && month <= 12 && day >= 0 && day <= 31 && found(month, day);
  };
  auto number = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t k = at; k < at + n; ++k) v = v * 10 + (text[k] - '0');
    return v;
  };
  auto digit = [&](size_t at) {
    return at < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[at]));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (!digit(i) || (i > 0 && digit(i - 1))) continue;
    size_t end = i;
    while (digit(end)) ++end;
    const int year = end - i >= 4 ? number(i, 4) : 0;
    if (year < 1990 || year > 2099) {
      i = end;
      continue;
    }
    if (end - i == 8 && number(i + 6, 2) > 0 && fn(number(i + 4, 2), number(i + 6, 2))) {
      return true;
    }
    if (end - i == 4 && end + 3 <= text.size() && text[end] == '-' && digit(end + 1) &&
        digit(end + 2) && !digit(end + 3)) {
      const int month = number(end + 1, 2);
      if (end + 3 == text.size() || text[end + 3] != '-' || !digit(end + 4)) {
        if (fn(month, 0)) return true;
      } else if (digit(end + 5) && !digit(end + 6)) {
        const absl::string_view after = text.substr(end + 6);
        const bool timed = (absl::StartsWith(after, "T") || absl::StartsWith(after, " ")) &&
                           after.size() >= 3 && digit(end + 7) && digit(end + 8);
        if (!timed && number(end + 4, 2) > 0 && fn(month, number(end + 4, 2))) return true;
      }
    }
    i = end;
  }
  return false;
}

// Whether `text` writes a date (AnyDateWritten) in `month` on `day`, or on
// any day of it when `day` is 0.
bool WritesDay(absl::string_view text, int month, int day) {
  return AnyDateWritten(text, [&](int m, int d) {
    return m == month && (day == 0 || d == day);
  });
}

// The month of the first date `text` writes (AnyDateWritten), or 0.
int FirstMonthWritten(absl::string_view text) {
  int month = 0;
  AnyDateWritten(text, [&](int m, int) {
    month = m;
    return true;
  });
  return month;
}

// Whether `text` asks how often something happens ("how often does the
// sensor re-check the bucket?", "how frequently"): a line setting an
// interval or a period answers it (SetsFrequency).
bool AsksFrequency(const QuestionWords& question) {
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i - 1] == "how" && (words[i] == "often" || words[i] == "frequently")) return true;
  }
  return false;
}

// Whether `line` sets a figure under a name of an interval or a period
// ("poke_interval=840", "scrape_interval: 30s", "refresh_period_s = 60",
// "every: 15m").
bool SetsFrequency(absl::string_view line) {
  absl::string_view name;
  if (!HasDigit(Assigned(line, &name))) return false;
  const std::string lower = absl::AsciiStrToLower(name);
  for (absl::string_view word : {"interval", "period", "every", "frequency", "cadence"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

// Whether `text` asks for a count or an amount: "how many", "how much", or
// a word of cost or total ("what did the namespace cost", "the total").
bool AsksTotal(const QuestionWords& question) {
  static const auto* const kAmounts = new absl::flat_hash_set<absl::string_view>{
      "cost", "costs", "costed", "spend", "spent", "total", "totals", "altogether",
      "whole"};
  absl::string_view before;
  for (absl::string_view word : question.words) {
    if (before == "how" && (word == "many" || word == "much")) return true;
    // "what did it add up to", "how much it all adds up to".
    if (word == "up" && (before == "add" || before == "added" || before == "adds")) return true;
    if (kAmounts->contains(word)) return true;
    before = word;
  }
  return false;
}

// Whether `line` states a total: it opens with "total" (any case) and holds
// a figure ("Total Objects: 1970", "TOTAL  571.99  ...  48,892.31",
// "total: 42 passed"), or opens with "sum" and a space or a colon before
// its figure (SQL*Plus's `compute sum` row: "sum      4109.40"; not
// "sum(bytes)").
bool StatesTotal(absl::string_view line) {
  line = WithoutLogPrefix(WithoutLineNumber(line));
  // A JSON key's quote ("\"total_tokens\": 398452475663").
  if (!line.empty() && line.front() == '"') line.remove_prefix(1);
  if (line.size() > 4 && absl::EqualsIgnoreCase(line.substr(0, 3), "sum") &&
      (line[3] == ' ' || line[3] == ':' || line[3] == '\t')) {
    const absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(4));
    return !rest.empty() && absl::ascii_isdigit(static_cast<unsigned char>(rest.front()));
  }
  if (line.size() < 6 || !absl::EqualsIgnoreCase(line.substr(0, 5), "total")) return false;
  if (absl::ascii_isalnum(static_cast<unsigned char>(line[5]))) return false;
  // `ls -l` opens with "total 48": disk blocks, not a count of anything.
  const absl::string_view rest = absl::StripAsciiWhitespace(line.substr(5));
  if (line[5] == ' ' && !rest.empty() &&
      rest.find_first_not_of("0123456789") == absl::string_view::npos) {
    return false;
  }
  return line.find_first_of("0123456789") != absl::string_view::npos;
}

// Whether `text` asks for a checksum or a hash ("what checksums did the
// dry runs come back with", "the image's digest"). Not "which commit": a
// line of code says "commit" too (`session.commit()`), and the hash that
// answers it stands on the line of the words it is asked with.
bool AsksHash(const QuestionWords& question) {
  static const auto* const kHashes = new absl::flat_hash_set<absl::string_view>{
      "checksum", "checksums", "hash",   "hashes",      "digest",      "digests",
      "sha",      "shas",      "sha1",   "sha256",      "fingerprint", "fingerprints",
      "md5",      "md5s",      "md5sum", "crc",         "crc32"};
  return question.HoldsAny(*kHashes);
}

// Whether `text` holds a figure: a token with two digits or more ("EUR
// 4,812.50", "PLAT-3397", "15:30").
bool HoldsFigure(absl::string_view text) {
  for (absl::string_view token : absl::StrSplit(text, AnyChar(" \t"), absl::SkipEmpty())) {
    int digits = 0;
    for (char c : token) digits += absl::ascii_isdigit(static_cast<unsigned char>(c)) ? 1 : 0;
    if (digits >= 2) return true;
  }
  return false;
}

// The words for a host, as said and in their one form ("which box",
// "what servers").
const absl::flat_hash_set<std::string>& HostWords() {
  static const auto* const kHosts = [] {
    auto* words = new absl::flat_hash_set<std::string>();
    for (const char* word : {"host", "hosts", "box", "boxes", "machine", "machines", "server",
                             "servers"}) {
      words->insert(word);
      words->insert(WordForm(word));
    }
    return words;
  }();
  return *kHosts;
}

// Whether `text` asks for a host's name ("what's the FQDN of the old
// box", "full hostname", "which box do we log on to"); not for a thing of
// a host ("what server version", "which machine type").
bool AsksHost(const QuestionWords& question) {
  const std::vector<absl::string_view>& words = question.words;
  static const auto* const kOfAHost = new absl::flat_hash_set<absl::string_view>{
      "version", "versions", "type", "types", "class", "port", "ports", "size", "sizes",
      "config", "error", "errors", "os", "count", "group", "pool"};
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "fqdn" || words[i] == "hostname" || words[i] == "hostnames") return true;
    if (words[i] == "host" && i + 1 < words.size() && words[i + 1] == "name") return true;
    if (HostWords().contains(words[i]) && question.AskedWithin(i, 1) &&
        (i + 1 == words.size() || !kOfAHost->contains(words[i + 1]))) {
      return true;
    }
  }
  return false;
}

// Whether `text` asks for a ticket: "ticket", "jira", a change record or
// request, an issue's, a case's or a pull request's number.
bool AsksTicket(const QuestionWords& question) {
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "ticket" || words[i] == "tickets" || words[i] == "jira") return true;
    const bool next_names = i + 1 < words.size() &&
                            (words[i + 1] == "number" || words[i + 1] == "record" ||
                             words[i + 1] == "request" || words[i + 1] == "id");
    if ((words[i] == "change" || words[i] == "issue" || words[i] == "case") && next_names) {
      return true;
    }
    // A pull request's number ("the PR number", "the pull request number").
    if ((words[i] == "pr" || words[i] == "request") && i + 1 < words.size() &&
        words[i + 1] == "number") {
      return true;
    }
  }
  return false;
}

// Whether `line` holds a tracker's key: letters, a hyphen and two digits
// or more ("MTR-4821", "PLAT-2612", "INC-40021"), or a number of three
// digits or more after '#' ("PR #2291").
bool StatesTicket(absl::string_view line) {
  for (absl::string_view token : absl::StrSplit(line, AnyChar(" \t,;:()[]{}<>\"'`=|"),
                                                absl::SkipEmpty())) {
    token = absl::StripSuffix(token, ".");
    if (absl::ConsumePrefix(&token, "#")) {
      if (token.size() >= 3 && std::all_of(token.begin(), token.end(), [](char c) {
            return absl::ascii_isdigit(static_cast<unsigned char>(c));
          })) {
        return true;
      }
      continue;
    }
    const size_t dash = token.find('-');
    if (dash == absl::string_view::npos || dash < 2 || dash > 10) continue;
    const absl::string_view key = token.substr(0, dash), number = token.substr(dash + 1);
    if (number.size() >= 2 && number.size() <= 9 &&
        std::all_of(key.begin(), key.end(),
                    [](char c) { return absl::ascii_isupper(static_cast<unsigned char>(c)); }) &&
        std::all_of(number.begin(), number.end(),
                    [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
      return true;
    }
  }
  return false;
}

// Whether `text` asks for a version: "version", or "build" or "release"
// a word or two after "which" or "what" ("which NCCL build", "what release").
bool AsksVersion(const QuestionWords& question) {
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "version" || words[i] == "versions") return true;
    // An image's tag ("which image tag is it running", "what tag").
    if ((words[i] == "tag" || words[i] == "tags") &&
        ((i > 0 && words[i - 1] == "image") || question.AskedWithin(i, 1))) {
      return true;
    }
    if ((words[i] == "build" || words[i] == "release") && question.AskedWithin(i, 3)) return true;
  }
  return false;
}

// Whether `question` asks for a constant of code ("the constant as
// written", "the millisecond constant near the top of that module").
bool AsksConstant(const QuestionWords& question) {
  static const auto* const kConstant =
      new absl::flat_hash_set<absl::string_view>{"constant", "constants"};
  return question.HoldsAny(*kConstant);
}

// Whether `line` defines a constant of code: an upper-case name (a letter
// and two characters more) set to a value, after the words that may open
// its definition ("REVERSE_CHARGE_MIN_CENTS = 1_400_000", "const
// MAX_BACKOFF_MS = 30000;", "static final int PAGE_SIZE = 500;",
// "#define MAX_RETRIES 5", "MAX_AGE: Final = 300"), not a comparison.
bool DefinesConstant(absl::string_view line) {
  static const auto* const kOpenings = new absl::flat_hash_set<absl::string_view>{
      "export", "const", "static", "final", "public", "private", "protected", "pub",
      "readonly", "constexpr", "inline", "int", "long", "float", "double", "str", "string",
      "bool", "auto", "var", "let", "val", "#define"};
  line = absl::StripLeadingAsciiWhitespace(WithoutLineNumber(line));
  if (line.size() > 2 && (line[0] == '+' || line[0] == '-') && line[1] != line[0]) {
    line = absl::StripLeadingAsciiWhitespace(line.substr(1));  // A diff's mark.
  }
  bool define = false;
  while (true) {
    const size_t end = line.find(' ');
    if (end == absl::string_view::npos) return false;
    const absl::string_view word = line.substr(0, end);
    if (!kOpenings->contains(word)) break;
    define |= word == "#define";
    line = absl::StripLeadingAsciiWhitespace(line.substr(end));
  }
  size_t n = 0;
  bool letter = false;
  while (n < line.size() && (absl::ascii_isupper(static_cast<unsigned char>(line[n])) ||
                             absl::ascii_isdigit(static_cast<unsigned char>(line[n])) ||
                             line[n] == '_')) {
    letter |= absl::ascii_isupper(static_cast<unsigned char>(line[n]));
    ++n;
  }
  const bool lower_follows =
      n < line.size() && absl::ascii_islower(static_cast<unsigned char>(line[n]));
  if (n < 3 || !letter || lower_follows) return false;
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(n));
  if (define) return !rest.empty();
  // A type after a colon ("MAX_AGE: Final[int] = 300").
  if (absl::ConsumePrefix(&rest, ":")) {
    const size_t eq = rest.find('=');
    if (eq == absl::string_view::npos) return false;
    rest = rest.substr(eq);
  }
  return absl::StartsWith(rest, "=") && !absl::StartsWith(rest, "==") &&
         !absl::StripAsciiWhitespace(rest.substr(1)).empty();
}

// Whether `text` asks about the conversation's start: "introduce(d)
// myself", "my introduction", or "the start", "the beginning", "the
// outset", "when we started" ("kicked off"), "first thing" said of the
// conversation: at the sentence's end, before "this morning", "today" or
// "earlier", or as "the start of this conversation" ("the start of the
// dry run" is not).
bool AsksStart(const QuestionWords& question) {
  // People introducing themselves ("what surname did I introduce myself
  // with?"), not a commit introducing a check.
  static const auto* const kIntroduce = new absl::flat_hash_set<absl::string_view>{
      "introduce", "introduced", "introduction", "introductions"};
  static const auto* const kSelves =
      new absl::flat_hash_set<absl::string_view>{"myself", "ourselves", "yourself"};
  const bool selves = question.HoldsAny(*kSelves);
  for (size_t i = 0; i < question.words.size(); ++i) {
    if (!kIntroduce->contains(question.words[i])) continue;
    const absl::string_view before = i > 0 ? question.words[i - 1] : "";
    if (selves || before == "i" || before == "we") return true;
  }
  static const auto* const kNow =
      new absl::flat_hash_set<absl::string_view>{"this", "today", "earlier"};
  static const auto* const kTalk = new absl::flat_hash_set<absl::string_view>{
      "conversation", "chat", "session", "thread", "day", "morning"};
  const absl::string_view text = question.lower;
  // "First thing" is the start where the user asks what they said then
  // ("as I wrote it first thing"), a time of day otherwise ("the tests we
  // ran first thing").
  static const auto* const kSaid = new absl::flat_hash_set<absl::string_view>{
      "said", "wrote", "gave", "told", "mentioned", "named", "typed"};
  bool said = false;
  for (size_t i = 1; i < question.words.size(); ++i) {
    said |= question.words[i - 1] == "i" && kSaid->contains(question.words[i]);
  }
  for (absl::string_view phrase : {"the start", "the beginning", "the outset", "we started",
                                    "we began", "we kicked off", "first thing"}) {
    if (phrase == "first thing" && !said) continue;
    for (size_t at = text.find(phrase); at != absl::string_view::npos;
         at = text.find(phrase, at + 1)) {
      absl::string_view rest = text.substr(at + phrase.size());
      if (!rest.empty() && absl::ascii_isalpha(static_cast<unsigned char>(rest[0]))) continue;
      rest = absl::StripLeadingAsciiWhitespace(rest);
      if (rest.empty() || absl::StrContains(",.?!;:)", rest[0])) return true;
      const std::vector<absl::string_view> next =
          absl::StrSplit(rest.substr(0, 48), AnyChar(" ,.?!;:"), absl::SkipEmpty());
      if (next.empty()) return true;
      if (kNow->contains(next[0])) return true;
      if (next[0] == "of" && next.size() >= 3 &&
          (next[1] == "this" || next[1] == "our" || next[1] == "the") &&
          kTalk->contains(next[2])) {
        return true;
      }
    }
  }
  return false;
}

// Whether `line` holds a release's number: three numbers joined by dots
// ("2.18.6-1", "1.4.0rc2"), or two or more after a 'v' ("v0.6.3",
// "v2.31"); not four (an IPv4 address) nor a plain decimal ("242.8").
bool StatesVersion(absl::string_view line) {
  for (absl::string_view token : absl::StrSplit(line, AnyChar(" \t,;:()[]{}<>\"'`=|@/"),
                                                absl::SkipEmpty())) {
    token = absl::StripSuffix(token, ".");
    const bool v = absl::ConsumePrefix(&token, "v") || absl::ConsumePrefix(&token, "V");
    int numbers = 0;
    size_t at = 0;
    while (at < token.size()) {
      size_t end = at;
      while (end < token.size() && absl::ascii_isdigit(static_cast<unsigned char>(token[end]))) {
        ++end;
      }
      if (end == at) break;
      ++numbers;
      at = end;
      if (at + 1 < token.size() && token[at] == '.' &&
          absl::ascii_isdigit(static_cast<unsigned char>(token[at + 1]))) {
        ++at;
        continue;
      }
      break;
    }
    if (numbers == 3 || (v && numbers >= 2 && numbers <= 4)) return true;
  }
  return false;
}

// The hosts' full names `line` holds: tokens of three labels or more
// joined by dots, the last a word of two to ten letters
// ("hallb-pg-14.corp.tarnow.net", "wms-gw01.phl.internal"); not a file's
// name ("values.canary.yaml") nor a version.
std::vector<absl::string_view> HostsIn(absl::string_view line) {
  std::vector<absl::string_view> hosts;
  for (absl::string_view token : absl::StrSplit(line, AnyChar(" \t,;()[]{}<>\"'`=|"),
                                                absl::SkipEmpty())) {
    token = absl::StripSuffix(absl::StripSuffix(token, "."), ":");
    if (const size_t colon = token.find(':'); colon != absl::string_view::npos) {
      token = token.substr(0, colon);  // A port.
    }
    if (token.find('/') != absl::string_view::npos || token.find('@') != absl::string_view::npos) {
      continue;
    }
    const std::vector<absl::string_view> labels = absl::StrSplit(token, '.');
    if (labels.size() < 3) continue;
    const absl::string_view last = labels.back();
    if (last.size() < 2 || last.size() > 10 ||
        !std::all_of(last.begin(), last.end(), [](char c) { return absl::ascii_islower(c); })) {
      continue;
    }
    static const auto* const kFiles = new absl::flat_hash_set<absl::string_view>{
        "yaml", "yml", "json", "py", "txt", "log", "csv", "gz", "tar", "conf", "ini", "toml",
        "sql", "md", "sh", "tf", "html", "xml", "parquet", "jsonl", "lock", "cfg", "zip"};
    if (kFiles->contains(last)) continue;
    if (std::all_of(labels.begin(), labels.end(), [](absl::string_view l) { return !l.empty(); })) {
      hosts.push_back(token);
    }
  }
  return hosts;
}

// Whether `line` holds a hex digest: a token of 7 to 64 hex digits with a
// letter and a digit among them ("30a6359", "sha256:9f86d0..."), standing
// alone: a part of a name ("exporter-febdfb11f-68e1e", a pod's) is not one.
bool StatesHash(absl::string_view line) {
  for (absl::string_view token :
       absl::StrSplit(line, AnyChar(" \t\"'`,;:=()[]{}<>"), absl::SkipEmpty())) {
    token = absl::StripSuffix(token, ".");
    if (token.size() < 7 || token.size() > 64) continue;
    bool digit = false, letter = false, hex = true;
    for (char ch : token) {
      digit |= absl::ascii_isdigit(static_cast<unsigned char>(ch));
      letter |= (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
      hex &= absl::ascii_isxdigit(static_cast<unsigned char>(ch));
    }
    if (hex && digit && letter) return true;
  }
  return false;
}

// The words of taking or lasting that make "how long" ask how long
// something took (AsksDuration).
const absl::flat_hash_set<absl::string_view>& TakingWords() {
  static const auto* const kTaking = new absl::flat_hash_set<absl::string_view>{
      "take", "took", "taken", "takes", "last", "lasted", "run", "ran", "spend", "spent",
      "going", "running", "hung", "hanging", "stuck", "waited", "waiting"};
  return *kTaking;
}

// The place among the question's words of the first of `taking` a few
// words after "how long" or "how much time"; npos when there is none.
size_t TakingWordAt(const QuestionWords& question,
                    const absl::flat_hash_set<absl::string_view>& taking) {
  // The thing that took it may be named at length ("how long did the full
  // rebuild of the core nightly dbt selection take").
  constexpr size_t kTakingWithin = 16;
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 1; i < words.size(); ++i) {
    const bool how_long = words[i - 1] == "how" && words[i] == "long";
    const bool how_much_time = i >= 2 && words[i - 2] == "how" && words[i - 1] == "much" &&
                               words[i] == "time";
    if (!how_long && !how_much_time) continue;
    for (size_t j = i + 1; j < words.size() && j <= i + kTakingWithin; ++j) {
      if (taking.contains(words[j])) return j;
    }
  }
  return std::string::npos;
}

// Whether `text` asks how long something took: "how long" or "how much
// time" with a word of taking or lasting after it ("how long did the
// refresh take", "how much time did it run"). A question for a setting
// without one ("how long does the DAG get before it pages?") is answered
// by the setting's line, which names it.
bool AsksDuration(const QuestionWords& question) {
  return TakingWordAt(question, TakingWords()) != std::string::npos;
}

// The seconds a unit of time stands for (0: not a unit of time).
double SecondsPer(absl::string_view unit) {
  static const auto* const kSeconds = new absl::flat_hash_map<absl::string_view, double>{
      {"ms", 0.001}, {"millisecond", 0.001}, {"milliseconds", 0.001}, {"s", 1}, {"sec", 1},
      {"secs", 1}, {"second", 1}, {"seconds", 1}, {"min", 60}, {"mins", 60}, {"minute", 60},
      {"minutes", 60}, {"h", 3600}, {"hr", 3600}, {"hrs", 3600}, {"hour", 3600}, {"hours", 3600},
      {"day", 86400}, {"days", 86400}};
  auto it = kSeconds->find(unit);
  return it == kSeconds->end() ? 0 : it->second;
}

// Whether the text before a figure makes it a period rather than how long
// something took: a setting ("--since=24h", "retention: 7 days" after
// "="), or a window ("over the last 6h", "every 5 min").
bool NamesAPeriod(absl::string_view before) {
  static const auto* const kPeriods = new absl::flat_hash_set<std::string>{
      "last",      "past",     "every",   "since", "within",  "window",  "range",
      "retention", "interval", "timeout", "ttl",   "lookback", "per"};
  before = absl::StripTrailingAsciiWhitespace(before);
  if (!before.empty() && before.back() == '=') return true;
  // "retention: 7 days" names a period; "elapsed: 41s" does not.
  if (!before.empty() && before.back() == ':') {
    before = absl::StripTrailingAsciiWhitespace(before.substr(0, before.size() - 1));
  }
  size_t start = before.size();
  while (start > 0 && absl::ascii_isalpha(static_cast<unsigned char>(before[start - 1]))) --start;
  return kPeriods->contains(absl::AsciiStrToLower(before.substr(start)));
}

// The seconds of a compact duration at the start of `text` of two parts or
// more ("13m18s", "1h05m", "2h30m10s": "m" is minutes there), and its
// length; {-1, 0} when there is none.
std::pair<double, size_t> CompactDuration(absl::string_view text) {
  double seconds = 0;
  size_t at = 0;
  int parts = 0;
  while (at < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[at]))) {
    size_t end = at;
    while (end < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[end]))) ++end;
    double per = 0;
    size_t unit = 0;
    if (absl::StartsWith(text.substr(end), "ms")) {
      per = 0.001, unit = 2;
    } else if (end < text.size()) {
      switch (text[end]) {
        case 'd': per = 86400, unit = 1; break;
        case 'h': per = 3600, unit = 1; break;
        case 'm': per = 60, unit = 1; break;
        case 's': per = 1, unit = 1; break;
        default: break;
      }
    }
    if (per == 0) break;
    double number = 0;
    if (!absl::SimpleAtod(text.substr(at, end - at), &number)) break;
    seconds += number * per;
    at = end + unit;
    ++parts;
  }
  const bool ends = at == text.size() || !absl::ascii_isalnum(static_cast<unsigned char>(text[at]));
  return parts >= 2 && ends ? std::pair(seconds, at) : std::pair(-1.0, size_t{0});
}

// The seconds of a clock-written duration at the start of `text` (H:MM:SS,
// its seconds with a fraction or not: "01:45:27", "0:00:01.23") and its
// length; {-1, 0} when there is none. Only where the words before it say
// it is a duration (NamesADuration): written so, a time of day looks the
// same.
std::pair<double, size_t> ClockDuration(absl::string_view text) {
  size_t at = 0;
  double seconds = 0;
  for (int part = 0; part < 3; ++part) {
    const size_t from = at;
    while (at < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[at]))) ++at;
    const size_t digits = at - from;
    if (digits == 0 || digits > 3 || (part > 0 && digits != 2)) return {-1.0, 0};
    int value = 0;
    for (size_t k = from; k < at; ++k) value = value * 10 + (text[k] - '0');
    if (part > 0 && value > 59) return {-1.0, 0};
    seconds = seconds * 60 + value;
    if (part < 2) {
      if (at >= text.size() || text[at] != ':') return {-1.0, 0};
      ++at;
    }
  }
  if (at + 1 < text.size() && text[at] == '.' &&
      absl::ascii_isdigit(static_cast<unsigned char>(text[at + 1]))) {
    const size_t from = at;
    ++at;
    while (at < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[at]))) ++at;
    double fraction = 0;
    if (absl::SimpleAtod(text.substr(from, at - from), &fraction)) seconds += fraction;
  }
  const bool ends = at == text.size() || !absl::ascii_isalnum(static_cast<unsigned char>(text[at]));
  return ends ? std::pair(seconds, at) : std::pair(-1.0, size_t{0});
}

// Whether the words just before a figure say it is how long something
// took ("elapsed 01:45:27", "wall clock 05:58:28", "done in 00:26:25",
// "Elapsed: 00:00:01.23"), rather than when ("started 22:00:05").
bool NamesADuration(absl::string_view before) {
  static const auto* const kTook = new absl::flat_hash_set<std::string>{
      "elapsed", "took", "taken", "duration", "runtime", "lasted", "in", "clock"};
  static const auto* const kTimes = new absl::flat_hash_set<std::string>{
      "wall", "run", "elapsed", "total", "cpu", "real"};
  // An estimate of a step ("estimated cutover ....... 01:30:33") is how
  // long it would take.
  static const auto* const kEstimated = new absl::flat_hash_set<std::string>{
      "estimated", "estimate", "expected", "projected"};
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(before, AnyChar(" \t:=,([\""),
                                            absl::SkipEmpty())) {
    // A summary's leader dots ("rows read ....... 207,595,143").
    if (w.find_first_not_of('.') == absl::string_view::npos) continue;
    words.push_back(absl::AsciiStrToLower(w));
  }
  if (words.empty()) return false;
  const std::string& last = words.back();
  if (kTook->contains(last) || kEstimated->contains(last)) return true;
  if (words.size() < 2) return false;
  const std::string& before_last = words[words.size() - 2];
  return kEstimated->contains(before_last) || (last == "time" && kTimes->contains(before_last));
}

// The duration `line` states, in seconds, as the sum of its numbers each
// followed by a unit of time ("in 0 hours 34 minutes and 31.67 seconds",
// "took 212 ms", "elapsed: 41s") and its clock-written durations
// ("elapsed 01:45:27"); -1 when it states none.
double StatedSeconds(absl::string_view line) {
  double total = -1;
  for (size_t i = 0; i < line.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(line[i]))) continue;
    // A duration written whole at a word's start: a clock the words before
    // it make one, or a compact one ("17m42s") they do not make a period.
    if (i == 0 || !absl::ascii_isalnum(static_cast<unsigned char>(line[i - 1]))) {
      const absl::string_view before = line.substr(0, i);
      std::pair<double, size_t> whole{-1.0, 0};
      if (const auto clock = ClockDuration(line.substr(i));
          clock.second > 0 && NamesADuration(before)) {
        whole = clock;
      } else if (const auto compact = CompactDuration(line.substr(i));
                 compact.second > 0 && !NamesAPeriod(before)) {
        whole = compact;
      }
      if (whole.second > 0) {
        total = std::max(total, 0.0) + whole.first;
        i += whole.second - 1;
        continue;
      }
    }
    if (i > 0 && (absl::ascii_isalnum(static_cast<unsigned char>(line[i - 1])) ||
                  line[i - 1] == '-' || line[i - 1] == '_' || line[i - 1] == '.')) {
      // A digit inside a word or an id ("v2", "part-00017").
      while (i < line.size() && absl::ascii_isalnum(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    // A figure, its thousands apart or not ("12,500 ms").
    size_t j = i;
    std::string figure;
    while (j < line.size()) {
      const unsigned char c = static_cast<unsigned char>(line[j]);
      const bool thousands = c == ',' && j + 3 < line.size() &&
                             absl::ascii_isdigit(static_cast<unsigned char>(line[j + 1])) &&
                             absl::ascii_isdigit(static_cast<unsigned char>(line[j + 2])) &&
                             absl::ascii_isdigit(static_cast<unsigned char>(line[j + 3])) &&
                             (j + 4 == line.size() ||
                              !absl::ascii_isdigit(static_cast<unsigned char>(line[j + 4])));
      if (!absl::ascii_isdigit(c) && c != '.' && !thousands) break;
      if (!thousands) figure.push_back(line[j]);
      ++j;
    }
    double number = 0;
    const bool parsed = absl::SimpleAtod(figure, &number) && !NamesAPeriod(line.substr(0, i));
    if (j < line.size() && line[j] == ' ') ++j;
    size_t k = j;
    while (k < line.size() && absl::ascii_isalpha(static_cast<unsigned char>(line[k]))) ++k;
    const bool unit_ends =
        k == line.size() || !absl::ascii_isalnum(static_cast<unsigned char>(line[k]));
    const double per = unit_ends ? SecondsPer(absl::AsciiStrToLower(line.substr(j, k - j))) : 0;
    if (parsed && per > 0) total = std::max(total, 0.0) + number * per;
    i = std::max(i, j > 0 ? j - 1 : 0);
  }
  return total;
}

// Whether the question asks for a quantity: "how" followed by a word of
// measure ("how many", "how long", "how big"...) or "in" followed by a
// unit ("in ms", "in minutes", "in GB"). A time of day and a total are
// quantities too (ParseRecallQuery).
bool AsksQuantity(const QuestionWords& question) {
  static const auto* const kOtherUnits = new absl::flat_hash_set<absl::string_view>{
      "bytes", "kb", "kib", "mb", "mib", "gb", "gib", "tb", "percent", "%"};
  // A percentile is a figure ("the worst p99", "what p95 did it settle at").
  auto percentile = [](absl::string_view w) {
    return w.size() >= 3 && w.size() <= 5 && w[0] == 'p' &&
           std::all_of(w.begin() + 1, w.end(),
                       [](char c) { return absl::ascii_isdigit(c) || c == '.'; });
  };
  // A measure's noun asked for ("what chunk size is defined", "which
  // timeout does it use") is a figure too.
  static const auto* const kMeasureNouns = new absl::flat_hash_set<absl::string_view>{
      "size", "count", "limit", "timeout", "length", "capacity", "threshold", "interval"};
  for (size_t i = 1; i < question.words.size(); ++i) {
    if (kMeasureNouns->contains(question.words[i]) && question.AskedWithin(i, 3)) return true;
  }
  absl::string_view before;
  for (absl::string_view word : question.words) {
    if (percentile(word)) return true;
    if (before == "how" && Measures().contains(word)) return true;
    if (before == "in" && (SecondsPer(word) > 0 || kOtherUnits->contains(word))) return true;
    before = word;
  }
  // A unit said last, alone ("... the canary hit? seconds", "Secs.").
  return SecondsPer(before) > 0 || kOtherUnits->contains(before);
}

// The forms of each abbreviation in `sentence` that spells out to several
// words ("mq": "messag", "queue"), in the order WordForms gives them.
std::vector<std::vector<std::string>> SpelledOut(absl::string_view sentence) {
  std::vector<std::vector<std::string>> out;
  const std::string lower = absl::AsciiStrToLower(sentence);
  for (absl::string_view word :
       absl::StrSplit(lower, AnyChar(" \t\n,.;:?!\"'()[]{}/-_@="), absl::SkipEmpty())) {
    std::vector<std::string> forms = WordForms(word);
    if (forms.size() > 1) out.push_back(std::move(forms));
  }
  return out;
}

// "max" for a term that asks for the most of something ("worst",
// "highest", "peak"), "min" for the least; nullptr for any other.
const std::string* ExtremeOf(const std::string& term) {
  static const auto* const kExtremes = [] {
    auto* m = new absl::flat_hash_map<std::string, std::string>();
    for (const char* w : {"worst", "highest", "peak", "maximum", "largest", "biggest"}) {
      (*m)[WordForm(w)] = "max";
    }
    for (const char* w : {"lowest", "smallest", "minimum", "fewest"}) (*m)[WordForm(w)] = "min";
    return m;
  }();
  auto it = kExtremes->find(term);
  return it == kExtremes->end() ? nullptr : &it->second;
}

// The terms of the question's words that only frame it as one for a
// quantity (AsksQuantity, AsksTimeOfDay, AsksDuration): "long" of "how
// long", "time" of "what time", "take" of "how long did it take" ("many"
// and "much" are stopwords already). They say what shape the answer has,
// not what it is about (a unit, "in minutes", says both, and stays).
absl::flat_hash_set<std::string> FrameTerms(const QuestionWords& question) {
  static const auto* const kPlaces = new absl::flat_hash_set<absl::string_view>{
      "bottom", "top", "end", "foot", "tail", "head"};
  absl::flat_hash_set<std::string> out;
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 1; i < words.size(); ++i) {
    const absl::string_view before = words[i - 1], word = words[i];
    // ... and where in an output the answer stands ("at the bottom of the
    // dry run", "at the end of the log"): not what it is about.
    const bool place = i >= 2 && words[i - 2] == "at" && before == "the" && kPlaces->contains(word);
    if ((before == "how" && Measures().contains(word)) || (before == "what" && word == "time") ||
        place) {
      for (std::string& term : SearchTerms(word)) out.insert(std::move(term));
    }
  }
  // "How long did the rehearsal take": the taking is how it is asked, not
  // what about ("3.2 Take the cold copy first" is no answer). A run ("how
  // long did the dry run run") or a last ('last' is "lasted"'s one form
  // too: "the last backup") often names the thing.
  static const auto* const kTakingOnly = new absl::flat_hash_set<absl::string_view>{
      "take", "took", "taken", "takes", "spend", "spent"};
  if (const size_t at = TakingWordAt(question, *kTakingOnly); at != std::string::npos) {
    for (std::string& term : SearchTerms(words[at])) out.insert(std::move(term));
  }
  return out;
}

// Whether `text` holds every sentence of `passage` (of at least a few
// words; lines and sentences, stripped).
bool InText(absl::string_view text, absl::string_view passage) {
  if (text.empty()) return false;
  bool any = false;
  for (absl::string_view line : absl::StrSplit(passage, '\n')) {
    for (absl::string_view sentence : Sentences(line)) {
      sentence = absl::StripAsciiWhitespace(sentence);
      if (sentence.size() < 12) continue;
      if (!absl::StrContains(text, sentence)) return false;
      any = true;
    }
  }
  return any;
}

std::string Provenance(const RecalledPassage& p) {
  std::string what;
  switch (p.kind) {
    case ItemKind::kToolCall:
      what = absl::StrCat("call of ", p.tool_name.empty() ? "a tool" : p.tool_name);
      break;
    case ItemKind::kToolResult:
      what = absl::StrCat("result of ", p.tool_name.empty() ? "a tool" : p.tool_name);
      if (!p.call.empty()) {
        std::string call = absl::StrCat(absl::StripAsciiWhitespace(p.call));
        for (char& c : call) {
          if (c == '\n' || c == '\r' || c == '\t') c = ' ';
        }
        const size_t cut = Utf8Floor(call, kMaxCallShown);
        absl::StrAppend(&what, " ", call.substr(0, cut), cut < call.size() ? "..." : "");
      }
      break;
    default:
      what = std::string(RoleName(p.role));
  }
  std::string out = absl::StrCat("[#", p.sequence, ", turn ", p.turn_index, ", ", what);
  if (!p.title.empty()) absl::StrAppend(&out, ": \"", p.title, "\"");
  out += "]";
  return out;
}

// The words of `sentence` as written, lowercased, without a possessive
// "'s" and trailing punctuation; "" for a word holding other punctuation
// and after a word a punctuation mark ends (it ends a name).
std::vector<std::string> PlainWords(absl::string_view sentence) {
  std::vector<std::string> words;
  for (absl::string_view raw : absl::StrSplit(sentence, AnyChar(" \t\n"), absl::SkipEmpty())) {
    std::string word = absl::AsciiStrToLower(raw);
    if (absl::EndsWith(word, "'s")) word.resize(word.size() - 2);
    while (!word.empty() && absl::ascii_ispunct(static_cast<unsigned char>(word.back()))) {
      word.pop_back();
    }
    const bool plain = !word.empty() && word.size() == raw.size() &&
                       std::all_of(word.begin(), word.end(), [](char c) {
                         return absl::ascii_isalnum(static_cast<unsigned char>(c));
                       });
    const bool ends = !plain && !word.empty() &&
                      std::all_of(word.begin(), word.end(), [](char c) {
                        return absl::ascii_isalnum(static_cast<unsigned char>(c));
                      });
    words.push_back(plain || ends ? word : "");
    if (ends) words.push_back("");
  }
  return words;
}

// Other words for a word, as people and systems name the same thing
// ("shops" for a system's "stores", "bounced" for "rejected", a
// "rehearsal" for a dry run). A question's word stands in for by these
// in full where the history holds none of its own terms, and at
// kHeldStandIn of their weight where it does (QuestionWeights).
// Both ways; each a word or its form (both go through WordForm). A word
// with a meaning of its own in systems' output ("retry" against an
// "attempt") has none: its stand-ins are searched for candidates even
// where the history holds the word.
const absl::flat_hash_map<std::string, std::vector<std::string>>& StandIns() {
  static const auto* const kStandIns = [] {
    const std::vector<std::vector<std::string>> groups = {
        {"shop", "store", "branch", "outlet"},
        {"bounce", "reject", "refuse", "decline"},
        {"skip", "miss", "omit", "exclude", "ignore"},
        {"rehearsal", "dry-run", "dryrun", "trial"},
        {"blocker", "block"},
        {"cap", "limit", "max", "ceil", "quota", "throttle"},
        {"reinstall", "reimage", "rebuild", "wipe"},
        {"wait", "delay", "backoff", "pause"},
        {"disagree", "mismatch", "differ"},
        {"backlog", "pend", "queue", "queued"},
        {"expir", "ttl"},
        {"stale", "ttl"},
        {"crash", "panic"},
        {"reboot", "restart"},
        {"cutov", "switchov", "go-liv"},
        {"purg", "delet", "remov"},
        {"folder", "directori", "dir"},
        {"machin", "host", "server", "box"},
        {"pod", "replica"},
        {"owner", "maintainer"},
        {"upgrade", "bump"},
        {"rollback", "revert", "undo", "undon"},
        {"green", "pass"},
        {"red", "fail"},
        {"broken", "fail"},
        {"fail", "failure"},
        {"restore", "recover"},
        {"disk", "volume", "storage", "drive"},
        {"memory", "ram", "heap"},
        {"processor", "cpu"},
        {"error", "failure", "fault"},
        {"throughput", "rate", "speed"},
        {"minimum", "min", "floor", "fewest", "lowest"},
        {"maximum", "max", "most", "highest"},
        {"certificate", "cert", "tls", "ssl"},
        {"address", "endpoint", "url"},
        {"ticket", "jira"},
        {"nightly", "daily"},
        {"job", "task"},
        {"batch", "chunk"},
        {"percentage", "percent"},
        {"partial", "incomplete", "unfinished"},
        {"compile", "build"},
        {"ship", "deploy"},
        {"lifetime", "ttl"},
        {"capacity", "size"},
        {"hash", "checksum", "digest"},
        {"password", "credential", "token"},
        {"drop", "delete"},
        {"sleep", "wait", "interval"},
        {"concurrency", "parallel", "worker", "thread"},
        {"cost", "spend"},
        {"outage", "incident", "downtime"},
        {"alert", "alarm"},
        {"deploy", "rollout", "release"},
        {"timeout", "deadline"},
        {"credential", "secret"},
        {"slow", "latency", "lag"},
        {"tolerance", "threshold", "allowance"},
        {"company", "organization", "organisation", "employer"},
        {"tally", "count", "total"},
        {"duplicate", "double"},
        {"scottish", "scotland"},
        {"welsh", "wale"},
        {"english", "england"},
        {"irish", "ireland"},
        {"reckon", "estimate", "est", "eta"},
        {"bill", "invoic"},
        {"snapshot", "backup"},
        {"aws", "amazon"},
        {"gigabyte", "gb", "gib"},
        {"alia", "cname"},
    };
    auto* m = new absl::flat_hash_map<std::string, std::vector<std::string>>();
    for (const std::vector<std::string>& group : groups) {
      for (const std::string& word : group) {
        const std::string form = WordForm(word);
        for (const std::string& other : group) {
          if (other != word) (*m)[form].push_back(WordForm(other));
        }
      }
    }
    return m;
  }();
  return *kStandIns;
}

// Adds `term` to `q` as a term of question word `word` (standing in for
// it when `stand_in`), unless `q` has it already or holds kMaxRecallTerms;
// whether it was added. `terms`, `word_of` and `stand_in` grow together.
bool AddTerm(std::string term, int word, bool stand_in,
             absl::flat_hash_map<std::string, size_t>& index_of, RecallQuery& q) {
  if (index_of.contains(term) || q.terms.size() >= kMaxRecallTerms) return false;
  index_of[term] = q.terms.size();
  q.terms.push_back(std::move(term));
  q.word_of.push_back(word);
  q.stand_in.push_back(stand_in);
  return true;
}

// `word` (lowercase letters) in the other of the British and American
// spellings of a verb in -ise or -yse and its forms ("summariser" and
// "summarizer", "analysed" and "analyzed", "organisation" and
// "organization"), or "" where it has no other. The stemmer keeps the two
// apart ('summaris', 'summar').
std::string OtherSpelling(absl::string_view word) {
  static constexpr std::pair<absl::string_view, absl::string_view> kSuffixes[] = {
      {"isations", "izations"}, {"isation", "ization"}, {"isers", "izers"}, {"ising", "izing"},
      {"iser", "izer"},         {"ised", "ized"},       {"ises", "izes"},   {"ise", "ize"},
      {"ysers", "yzers"},       {"ysing", "yzing"},     {"yser", "yzer"},   {"ysed", "yzed"},
      {"yses", "yzes"},         {"yse", "yze"}};
  // A stem this long ("rise", "wise", "size" and "noise" have shorter
  // ones), and none of the words in -ise that no one writes in -ize
  // ("promise", "expertise", "enterprise").
  constexpr size_t kMinStem = 4;
  static const auto* const kOnlyInIse = new absl::flat_hash_set<absl::string_view>{
      "advert", "chast",  "compr", "comprom", "conc",  "desp",  "disgu",
      "enterpr", "exerc", "expert", "franch", "improv", "merchand", "otherw",
      "parad",  "prec",   "prem",  "prom",    "superv", "surpr", "telev",  "treat"};
  for (const auto& [british, american] : kSuffixes) {
    for (const auto& [from, to] : {std::pair(british, american), std::pair(american, british)}) {
      if (word.size() < from.size() + kMinStem || !absl::EndsWith(word, from)) continue;
      const absl::string_view stem = word.substr(0, word.size() - from.size());
      if (kOnlyInIse->contains(stem)) return "";
      return absl::StrCat(stem, to);
    }
  }
  return "";
}

// The other spelling (OtherSpelling) of each of the question's words that
// has one, as a term of that word: a history may write either. `lower` is
// the question in ASCII lowercase (QuestionWords::lower).
void AddOtherSpellings(absl::string_view lower, absl::flat_hash_map<std::string, size_t>& index_of,
                       RecallQuery& q) {
  // Split as SearchTerms splits: at any byte not a letter or digit.
  for (size_t at = 0; at < lower.size();) {
    size_t end = at;
    while (end < lower.size() && absl::ascii_isalnum(static_cast<unsigned char>(lower[end]))) ++end;
    const absl::string_view word(lower.data() + at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    const std::string other = OtherSpelling(word);
    if (other.empty()) continue;
    auto found = index_of.find(WordForm(word));
    if (found == index_of.end()) continue;
    AddTerm(WordForm(other), q.word_of[found->second], false, index_of, q);
  }
}

// The question's words' stand-ins (StandIns), as terms of those words.
void AddStandIns(absl::flat_hash_map<std::string, size_t>& index_of, RecallQuery& q) {
  for (size_t i = 0, n = q.terms.size(); i < n; ++i) {
    auto others = StandIns().find(q.terms[i]);
    if (others == StandIns().end()) continue;
    const int word = q.word_of[i];
    // Other words for the thing beside the one asked for name nothing.
    if (q.Contrasted(word)) continue;
    for (const std::string& other : others->second) AddTerm(other, word, true, index_of, q);
  }
}

// A percentile as a measurement writes it: "the 99th percentile" is
// `p99` (`p99_value`, `"p99_ms"`), a term of the word "percentile"; "the
// top 1%" ("top-1%", "top 5 percent") is where `p99` (`p95`) cuts it off,
// a term of the word "top".
void AddPercentiles(const QuestionWords& question,
                    absl::flat_hash_map<std::string, size_t>& index_of, RecallQuery& q) {
  // The question word of `term`, or -1. (Read before adding: adding a term
  // moves `index_of`'s entries.)
  auto word_of = [&](absl::string_view term) {
    auto found = index_of.find(term);
    return found == index_of.end() ? -1 : q.word_of[found->second];
  };
  const int percentile = word_of("percentil"), top = word_of("top");
  if (percentile < 0 && top < 0) return;
  // The question's words, a hyphenated one ("95th-percentile") in parts.
  std::vector<absl::string_view> words;
  for (absl::string_view w : question.words) {
    for (absl::string_view part : absl::StrSplit(w, '-', absl::SkipEmpty())) words.push_back(part);
  }
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    absl::string_view n = words[i + 1];
    if (top >= 0 && words[i] == "top") {
      const bool share = absl::ConsumeSuffix(&n, "%") ||
                         (i + 2 < words.size() && absl::StartsWith(words[i + 2], "percent"));
      int cut = 0;
      if (share && absl::SimpleAtoi(n, &cut) && cut >= 1 && cut <= 50) {
        AddTerm(absl::StrCat("p", 100 - cut), top, false, index_of, q);
      }
      continue;
    }
    if (percentile < 0 || !absl::StartsWith(words[i + 1], "percentile")) continue;
    n = WithoutOrdinal(words[i]);
    if (n.empty() || n.size() > 2 ||
        !std::all_of(n.begin(), n.end(), [](char c) { return absl::ascii_isdigit(c); })) {
      continue;
    }
    AddTerm(absl::StrCat("p", n), percentile, false, index_of, q);
  }
}

// The number `word` says, written in figures ("6", "twelve"), or -1.
int NumberSaid(absl::string_view word) {
  static const auto* const kNumbers = new absl::flat_hash_map<absl::string_view, int>{
      {"one", 1},     {"two", 2},       {"three", 3},     {"four", 4},    {"five", 5},
      {"six", 6},     {"seven", 7},     {"eight", 8},     {"nine", 9},    {"ten", 10},
      {"eleven", 11}, {"twelve", 12},   {"fifteen", 15},  {"twenty", 20}, {"thirty", 30},
      {"forty", 40},  {"forty-five", 45}, {"fifty", 50},  {"sixty", 60},  {"ninety", 90}};
  if (auto it = kNumbers->find(word); it != kNumbers->end()) return it->second;
  int n = 0;
  if (word.size() <= 5 && absl::SimpleAtoi(word, &n) && n >= 0) return n;
  return -1;
}

// A duration as a configuration or a log writes it short: "six hours" or
// "2 hrs" is `6h` or `2h` ("poke timeout 6h -> 2h"), "30 seconds" `30s`,
// "15 minutes" `15m` and `15min`, "7 days" `7d`, "250 milliseconds"
// `250ms`: terms standing in for the unit's word.
void AddCompactDurations(const QuestionWords& question,
                         absl::flat_hash_map<std::string, size_t>& index_of, RecallQuery& q) {
  static const auto* const kUnits =
      new absl::flat_hash_map<absl::string_view, std::vector<absl::string_view>>{
          {"second", {"s"}},  {"seconds", {"s"}},  {"sec", {"s"}},   {"secs", {"s"}},
          {"minute", {"m", "min"}}, {"minutes", {"m", "min"}}, {"min", {"m", "min"}},
          {"mins", {"m", "min"}},   {"hour", {"h"}},  {"hours", {"h"}},  {"hr", {"h"}},
          {"hrs", {"h"}},     {"day", {"d"}},      {"days", {"d"}},  {"week", {"w"}},
          {"weeks", {"w"}},   {"millisecond", {"ms"}}, {"milliseconds", {"ms"}}};
  const std::vector<absl::string_view>& words = question.words;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const int n = NumberSaid(words[i]);
    if (n < 0) continue;
    const auto unit = kUnits->find(words[i + 1]);
    if (unit == kUnits->end()) continue;
    // A term of the unit's word, or of the number's ("second" is too
    // common a word to search by).
    auto of_unit = index_of.find(WordForm(words[i + 1]));
    if (of_unit == index_of.end()) of_unit = index_of.find(WordForm(words[i]));
    if (of_unit == index_of.end()) continue;
    const int word = q.word_of[of_unit->second];
    for (absl::string_view suffix : unit->second) {
      AddTerm(absl::StrCat(n, suffix), word, true, index_of, q);
    }
  }
}

// `word` (lowercase) in the singular where it is a regular plural
// ("runs", "entries", "boxes", "caches" -> "run", "entry", "box",
// "cache"); as it is otherwise ("status", "address", "analysis", and
// names ending in an "s" of their own: "kubernetes", "postgres").
std::string Singular(absl::string_view word) {
  static const auto* const kNames = new absl::flat_hash_set<absl::string_view>{
      "kubernetes", "postgres", "jenkins", "windows", "series", "species",
      "news",       "devops",   "mlops",   "finops",  "gitops", "chaos"};
  if (word.size() < 4 || !absl::EndsWith(word, "s") || absl::EndsWith(word, "ss") ||
      absl::EndsWith(word, "us") || absl::EndsWith(word, "is") || kNames->contains(word)) {
    return std::string(word);
  }
  if (absl::EndsWith(word, "ies")) return absl::StrCat(word.substr(0, word.size() - 3), "y");
  // "caches", "headaches" lose their "s"; "reaches", "coaches" their "es".
  if (absl::EndsWith(word, "aches") && !absl::EndsWith(word, "eaches") &&
      !absl::EndsWith(word, "oaches")) {
    return std::string(word.substr(0, word.size() - 1));
  }
  for (absl::string_view es : {"xes", "ches", "shes", "sses"}) {
    if (absl::EndsWith(word, es)) return std::string(word.substr(0, word.size() - 2));
  }
  return std::string(word.substr(0, word.size() - 1));
}

// A name of two or three words as a system writes it ("message queue
// bridge" is the `message-queue-bridge` of a call's arguments, "web
// sessionize" a `web_sessionize`): the compound stands for the name's
// first word, where the history holds it. Its form with each word in the
// singular, where that differs, goes to `singular` with its word.
void AddNames(absl::string_view text, absl::flat_hash_map<std::string, size_t>& index_of,
              RecallQuery& q, std::vector<std::pair<std::string, int>>* singular) {
  for (absl::string_view sentence : Sentences(text)) {
    const std::vector<std::string> words = PlainWords(sentence);
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      for (size_t n : {size_t{3}, size_t{2}}) {
        if (i + n > words.size()) continue;
        bool name = true;
        for (size_t k = i; k < i + n; ++k) name &= !words[k].empty() && !IsStopword(WordForm(words[k]));
        if (!name) continue;
        auto first = index_of.find(WordForm(words[i]));
        if (first == index_of.end()) continue;
        const int word = q.word_of[first->second];
        for (const char* joiner : {"-", "_", ""}) {
          // Two words written as one ("gift cards" as `GIFTCARD`, "dry
          // run" as `dryrun`), in their one form.
          if (*joiner == '\0' && (n != 2 || words[i].size() < 3 || words[i + 1].size() < 3)) {
            continue;
          }
          std::string compound = words[i];
          for (size_t k = i + 1; k < i + n; ++k) absl::StrAppend(&compound, joiner, words[k]);
          if (*joiner == '\0') compound = WordForm(compound);
          if (*joiner != '\0' && singular != nullptr) {
            // Said in the plural, written in the singular ("the job runs
            // table" is `job_run`, "declarations header" a
            // `DECLARATION_HEADER`).
            std::string one = Singular(words[i]);
            for (size_t k = i + 1; k < i + n; ++k) absl::StrAppend(&one, joiner, Singular(words[k]));
            if (one != compound) singular->emplace_back(std::move(one), word);
          }
          AddTerm(std::move(compound), word, false, index_of, q);
        }
      }
    }
  }
}

// How many bytes of `text` open it by saying it is about something else:
// a few words before its first ':' or ',', one of them "unrelated",
// "off-topic" (or "off topic") or "tangent", or opening with "random"
// said of the message ("Totally off-topic:", "Random one while things
// run:", "Random, but"); 0 otherwise. Those words name no
// subject: a history that holds an earlier aside holds them too.
size_t AsideOpening(absl::string_view text) {
  const size_t end = text.find_first_of(":,");
  if (end == absl::string_view::npos) return 0;
  std::vector<std::string> words;
  for (absl::string_view raw :
       absl::StrSplit(text.substr(0, end), AnyChar(" \t\n"), absl::SkipEmpty())) {
    words.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(raw)));
  }
  if (words.empty() || words.size() > kMaxAsideWords) return 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool off_topic = w == "off-topic" || w == "offtopic" ||
                           (w == "off" && i + 1 < words.size() && words[i + 1] == "topic");
    // "Random:", "Random one ...", "Random question:", not "random seed".
    const bool random = w == "random" && i == 0 &&
                        (words.size() == 1 || words[1] == "one" || words[1] == "question" ||
                         words[1] == "thought" || words[1] == "aside");
    if (w == "unrelated" || w == "tangent" || random || off_topic) return end + 1;
  }
  return 0;
}

// Whether the "after" at `at` of `lower` follows "how long" or "how soon"
// ("how long after a view can an order credit it"): a duration asked for,
// not a clause.
bool AfterHowLong(absl::string_view lower, size_t at) {
  const absl::string_view before = absl::StripTrailingAsciiWhitespace(lower.substr(0, at));
  return absl::EndsWith(before, "how long") || absl::EndsWith(before, "how soon");
}

}  // namespace

// `text` without its clauses about something else than what is asked:
// one pointing to a change made later than it, "before" (or "prior to")
// up to the clause's end, where the clause says someone did something
// ("before we switched to the tuned batch profile", "before I bumped it")
// or names a change ("before the batch profile change", "before
// Thandiwe's batch changes"), which `later_change` tells; one pointing to
// a change made earlier, "after" or "once" so ("once Rupert's date fix was
// in", "after the coupon fix went in"), which `earlier_change` tells; and
// one setting
// something aside ("leaving aside the flaky timeout one", "apart from the
// retries", "not counting staging"). "Before it failed" or "before they
// expire" say what is asked about, and stay. A contrast ("not the lines
// table", "ignore the staging copy") goes to `contrasted`: its words
// are said aside, and mark a passage of the thing beside the one asked for
// (RecallQuery::contrast).
std::string WithoutOtherThings(absl::string_view text, bool* later_change,
                               bool* earlier_change, std::vector<std::string>* contrasted) {
  static const auto* const kChanges = new absl::flat_hash_set<absl::string_view>{
      "change",  "changes", "changed", "switch",  "fix",     "fixes", "bump",
      "upgrade", "update",  "patch",   "rollout", "cutover", "tweak", "tweaks"};
  static const auto* const kPeople =
      new absl::flat_hash_set<absl::string_view>{"we", "i", "someone"};
  constexpr absl::string_view kBefore[] = {"before ", "prior to "};
  constexpr absl::string_view kAfter[] = {"after ", "once "};
  constexpr absl::string_view kAside[] = {"leaving aside ", "leave aside ", "setting aside ",
                                          "apart from ",    "aside from ",  "except ",
                                          "excluding ",     "not counting ", "other than "};
  // A contrast names the thing beside the one asked for ("not the lines
  // table", "ignore the staging copy"): often a sibling of the same
  // output, whose words the answer's neighbours share.
  constexpr absl::string_view kContrast[] = {"not the ",    "ignore the ", "ignoring the ",
                                             "rather than ", "instead of "};
  std::string out;
  size_t at = 0;
  const std::string lower = absl::AsciiStrToLower(text);
  for (size_t from = 0; from < lower.size();) {
    size_t start = std::string::npos, words_at = 0;
    enum { kLaterClause, kEarlierClause, kSetAsideClause, kContrastClause } clause = kLaterClause;
    auto look_for = [&](absl::Span<const absl::string_view> openings, auto kind) {
      for (absl::string_view opening : openings) {
        const size_t pos = lower.find(opening.data(), from, opening.size());
        if (pos != std::string::npos && pos < start &&
            (pos == 0 || !absl::ascii_isalpha(static_cast<unsigned char>(lower[pos - 1])))) {
          start = pos;
          words_at = pos + opening.size();
          clause = kind;
        }
      }
    };
    look_for(kBefore, kLaterClause);
    look_for(kAfter, kEarlierClause);
    look_for(kAside, kSetAsideClause);
    look_for(kContrast, kContrastClause);
    if (start == std::string::npos) break;
    // The clause runs to its punctuation (a dash between spaces too: "before
    // I write Perth up - how many CRC errors ..."), or to a "but" that turns
    // to what is asked ("not the lines table but the header table").
    size_t end = lower.find_first_of(",;:.?!()\n", words_at);
    if (end == std::string::npos) end = lower.size();
    for (absl::string_view turn : {" but ", " - ", " \u2013 ", " \u2014 ", " -- "}) {
      if (const size_t at = lower.find(turn.data(), words_at, turn.size()); at < end) end = at;
    }
    const std::vector<absl::string_view> words = absl::StrSplit(
        absl::string_view(lower).substr(words_at, end - words_at), ' ', absl::SkipEmpty());
    bool later = false, first = false;
    for (size_t i = 0; i < words.size(); ++i) {
      const absl::string_view w = absl::StripSuffix(words[i], "'s");
      first |= w == "first";
      later |= kChanges->contains(w);
      later |= i == 0 && kPeople->contains(w) && words.size() > 1;
    }
    // Someone named doing something ("before Anouk touched the batch
    // settings", "before Ottilie reworked its batches": a name as written,
    // capitalized), or a thing as it was changed ("before the tuned batch
    // profile"): the name or "the", then a verb in the past.
    if (words.size() > 2 && words[1].size() > 4 && absl::EndsWith(words[1], "ed")) {
      const absl::string_view first_written = absl::StripLeadingAsciiWhitespace(
          text.substr(words_at, end - words_at));
      later |= words[0] == "the" ||
               (absl::ascii_isupper(static_cast<unsigned char>(first_written.front())) &&
                !kPeople->contains(words[0]));
    }
    if (clause == kContrastClause) {
      contrasted->push_back(std::string(text.substr(words_at, end - words_at)));
      absl::StrAppend(&out, text.substr(at, start - at));
      at = end;
    } else if (clause == kEarlierClause &&
               (!later || AfterHowLong(lower, start) || first ||
                (end < lower.size() && lower[end] != ',' && lower[end] != '?'))) {
      // "How long after someone sees an ad" asks for a duration; "after
      // the first refund patch" for one point of several, not the latest; a clause
      // running on to a sentence's end names what is asked about as often
      // as the change ("After Anouk changed the batching on the search
      // cluster we re-ran it."): kept.
    } else if (clause == kSetAsideClause || later) {
      absl::StrAppend(&out, text.substr(at, start - at));
      at = end;
      *later_change |= clause == kLaterClause;
      *earlier_change |= clause == kEarlierClause;
    }
    from = end;
  }
  absl::StrAppend(&out, text.substr(at));
  return out;
}

// `text` with a few phrases people say for a word systems write put as
// that word: "in one go", "at a time", "at once" (how many at once is a
// batch's size) as "batch"; "response time" as "latency"; tests that "came
// back green" or "went red" as "passed" and "failed"; "how big" asks for a
// size too. A phrase that only frames the question ("start to finish")
// is put as nothing.
std::string WithIdiomsSaid(std::string text) {
  static constexpr std::pair<absl::string_view, absl::string_view> kIdioms[] = {
      {"in one go", "batch"},        {"in a single go", "batch"},
      {"at a time", "batch"},        {"at once", "batch"},
      {"response time", "latency"},  {"response times", "latency"},
      {"came back green", "passed"}, {"were green", "passed"},
      {"was green", "passed"},       {"went green", "passed"},
      {"came back red", "failed"},   {"were red", "failed"},
      {"was red", "failed"},         {"went red", "failed"},
      {"how big", "how big size"},   {"how large", "how large size"},
      // "How deep" asks for a depth, "how wide" a width: the measure's
      // noun is what an output writes (`queueDepth`, `max_width`).
      {"how deep", "how deep depth"},  {"how wide", "how wide width"},
      {"how high", "how high height"}, {"how heavy", "how heavy weight"},
      {"how far", "how far distance"}, {"how fast", "how fast speed"},
      {"how old", "how old age"},
      // Phrasal verbs for what a system names in one word.
      {"back out", "rollback"},      {"backed out", "rollback"},
      {"backing out", "rollback"},   {"roll back", "rollback"},
      {"rolled back", "rollback"},   {"rolling back", "rollback"},
      {"rolls back", "rollback"},    {"roll it back", "rollback"},
      {"spin up", "provision"},
      {"spun up", "provisioned"},    {"tear down", "teardown"},
      {"torn down", "teardown"},
      // Written as one word where a system counts it (`max_inflight`).
      {"in flight", "inflight"},
      // The whole of a run's time: no start or end to search for.
      {"from start to finish", ""}, {"start to finish", ""},
      // What never came is missing ("never turned up on Tillwise").
      {"never turned up", "missing"}, {"never showed up", "missing"},
      {"never arrived", "missing"},   {"never made it", "missing"},
      {"didn't turn up", "missing"},  {"didn't show up", "missing"},
      {"didn't arrive", "missing"},   {"didn't make it", "missing"}};
  const std::string lower = absl::AsciiStrToLower(text);
  std::string out;
  size_t at = 0;
  for (size_t i = 0; i < lower.size();) {
    bool replaced = false;
    for (const auto& [idiom, word] : kIdioms) {
      if (absl::string_view(lower).substr(i, idiom.size()) != idiom) continue;
      const size_t end = i + idiom.size();
      if ((i > 0 && absl::ascii_isalnum(static_cast<unsigned char>(lower[i - 1]))) ||
          (end < lower.size() && absl::ascii_isalnum(static_cast<unsigned char>(lower[end])))) {
        continue;
      }
      absl::StrAppend(&out, absl::string_view(text).substr(at, i - at), word);
      at = i = end;
      replaced = true;
      break;
    }
    if (!replaced) ++i;
  }
  absl::StrAppend(&out, absl::string_view(text).substr(at));
  return out;
}

RecallQuery ParseRecallQuery(absl::string_view asked_text) {
  RecallQuery q;
  const size_t aside = AsideOpening(asked_text);
  q.aside = aside > 0;
  asked_text.remove_prefix(aside);
  // A clause naming a later change ("before we switched to the tuned
  // profile") says which of several is asked for, the earlier; its words
  // are the later one's, and are not searched, nor those of a clause
  // setting something aside.
  bool before_later = false, after_earlier = false;
  std::vector<std::string> contrasted;
  const std::string without_later = WithIdiomsSaid(
      WithoutOtherThings(asked_text, &before_later, &after_earlier, &contrasted));
  const absl::string_view text = without_later;
  const QuestionWords question(text);
  q.asks_duration = AsksDuration(question);
  q.asks_time_of_day = AsksTimeOfDay(question);
  q.asks_date = AsksDate(question);
  q.asks_first = AsksFirst(question) || before_later;
  q.asks_last = AsksLast(question);
  q.asks_later = after_earlier && !q.asks_first && !q.asks_last;
  q.asks_frequency = AsksFrequency(question);
  q.asks_total = AsksTotal(question);
  q.asks_hash = AsksHash(question);
  q.asks_host = AsksHost(question);
  q.asks_ticket = AsksTicket(question);
  q.asks_version = AsksVersion(question);
  q.asks_constant = AsksConstant(question);
  q.asks_start = AsksStart(question);
  // The days the question names ("the 2 Dec file"), and the months it
  // names alone ("February's cost", "early May": any day of them). A word
  // that is a month only sometimes ("may", "mar", "sep" for a separator,
  // "jan") names one alone only as a name: capitalised, and not opening a
  // sentence.
  for (size_t i = 0; i < question.words.size(); ++i) {
    const absl::string_view word = question.words[i];
    const int month = MonthOf(word);
    if (month == 0) continue;
    const std::vector<std::string> month_terms = SearchTerms(word);
    if (month_terms.empty()) continue;
    if (const size_t k = DayBeside(question.words, i); k != std::string::npos) {
      const std::vector<std::string> day_terms = SearchTerms(question.words[k]);
      if (!day_terms.empty()) {
        q.days.push_back({month, DayOf(question.words[k]), month_terms.front(), day_terms.front()});
      }
      continue;
    }
    if (word == "may" || word == "mar" || word == "sep" || word == "jan") {
      const size_t at = static_cast<size_t>(word.data() - question.lower.data());
      size_t before = at;
      while (before > 0 && text[before - 1] == ' ') --before;
      if (!absl::ascii_isupper(static_cast<unsigned char>(text[at])) || before == 0 ||
          absl::StrContains(".?!:", text[before - 1])) {
        continue;
      }
    }
    q.days.push_back({month, 0, month_terms.front(), ""});
  }
  q.asks_quantity =
      AsksQuantity(question) || q.asks_time_of_day || q.asks_total || q.asks_frequency;
  const bool asks = absl::StrContains(text, '?');
  const absl::flat_hash_set<std::string> frame = FrameTerms(question);
  // Each term once, by its place in q.terms.
  absl::flat_hash_map<std::string, size_t> index_of;
  // A lead-in before a colon is a sentence of its own: a short one names
  // the subject ("Customs: per Oracle's stats, ...") and asks with the
  // question; a long one is talk around it.
  std::vector<absl::string_view> sentences = Sentences(text, /*at_colon=*/true);
  const size_t contrasts_from = sentences.size();
  sentences.insert(sentences.end(), contrasted.begin(), contrasted.end());
  for (size_t s = 0; s < sentences.size(); ++s) {
    const absl::string_view sentence = sentences[s];
    // A short fragment ("In minutes.", "The connector setting.") goes with
    // the question it follows; a contrast is said aside.
    const bool asked =
        s < contrasts_from &&
        (!asks || absl::EndsWith(absl::StripTrailingAsciiWhitespace(sentence), "?") ||
         std::vector<absl::string_view>(
             absl::StrSplit(sentence, AnyChar(" \t\n"), absl::SkipEmpty()))
                 .size() <= kFragmentWords);
    // SearchTerms lists a compound before its parts: the parts belong to
    // the compound's word. An abbreviation spelled out to several words
    // ("MQ", "message queue") is one word of the question too: a question
    // holding "message" and "queue" apart does not answer for it twice.
    std::string compound;
    const std::vector<std::vector<std::string>> spelled = SpelledOut(sentence);
    std::vector<std::string> rest;  // The spelled-out words still to come.
    for (std::string& term : SearchTerms(sentence)) {
      bool spelled_part = !rest.empty() && term == rest.front();
      if (spelled_part) {
        rest.erase(rest.begin());
      } else {
        rest.clear();
        for (const std::vector<std::string>& forms : spelled) {
          if (forms.front() == term) {
            rest.assign(forms.begin() + 1, forms.end());
            break;
          }
        }
      }
      const bool part = spelled_part || PartOf(compound, term);
      if (!part) {
        compound = IsCompound(term) ? term : "";
        if (IsStopword(term) || frame.contains(term)) continue;
      } else if (IsStopword(term) || (term.size() < 2 && !absl::ascii_isdigit(term[0]))) {
        continue;
      }
      if (auto seen = index_of.find(term); seen != index_of.end()) {
        if (asked) q.asked[q.word_of[seen->second]] = true;
        continue;
      }
      if (!part) {
        ++q.words;
        q.asked.push_back(asked);
        q.contrast.push_back(s >= contrasts_from);
      }
      if (q.words == 0) continue;
      if (!AddTerm(std::move(term), q.words - 1, false, index_of, q)) return q;
      // An extreme of a quantity asked for is found where a line writes it
      // short ("the worst p99, in secs" in "max=4.068"); not of anything
      // else ("the smallest cog" of a bicycle).
      if (const std::string* extreme = q.asks_quantity ? ExtremeOf(q.terms.back()) : nullptr;
          extreme != nullptr && !part) {
        AddTerm(*extreme, q.words - 1, false, index_of, q);
      }
    }
  }
  // A word hyphenated in the question and written as one elsewhere
  // ("in-flight" and the `max_inflight` of a config, "roll-back"): the
  // joined form stands for it too.
  for (size_t i = 0, n = q.terms.size(); i < n && q.terms.size() < kMaxRecallTerms; ++i) {
    const std::string& term = q.terms[i];
    if (term.find('-') == std::string::npos ||
        !std::all_of(term.begin(), term.end(), [](char c) { return c == '-' || absl::ascii_isalpha(static_cast<unsigned char>(c)); })) {
      continue;
    }
    std::string joined = absl::StrReplaceAll(term, {{"-", ""}});
    if (joined.size() >= 4) AddTerm(std::move(joined), q.word_of[i], false, index_of, q);
  }
  AddPercentiles(question, index_of, q);
  AddCompactDurations(question, index_of, q);
  std::vector<std::pair<std::string, int>> singular;
  AddNames(text, index_of, q, &singular);
  AddOtherSpellings(question.lower, index_of, q);
  AddStandIns(index_of, q);
  // The singular forms last: the terms the question says come first.
  for (auto& [term, word] : singular) AddTerm(std::move(term), word, false, index_of, q);
  return q;
}

bool IsProgressLine(absl::string_view line) {
  line = absl::StripTrailingAsciiWhitespace(line);
  if (!absl::EndsWith(line, "%]")) return false;
  const size_t open = line.rfind('[');
  if (open == absl::string_view::npos) return false;
  size_t run = 0, longest = 0;
  for (char c : line.substr(0, open)) {
    run = (c == '.' || c == 'F' || c == 'E' || c == 's' || c == 'x' || c == 'X') ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest >= 5;
}

HistorySearch SearchFor(const RecallQuery& query) {
  HistorySearch search;
  search.terms = query.terms;
  search.word_of = query.word_of;
  search.stand_in = query.stand_in;
  search.replies = true;
  search.opening = query.asks_start;
  return search;
}

namespace {

// What the question's words weigh in one conversation's history.
struct QuestionWeights {
  bool asks_quantity = false;
  bool asks_duration = false;
  bool asks_time_of_day = false;
  bool asks_date = false;
  bool asks_frequency = false;
  bool asks_total = false;
  bool asks_hash = false;
  bool asks_host = false;
  bool asks_ticket = false;
  bool asks_version = false;
  bool asks_constant = false;
  // Whether it asks for the first or the last of alike lines.
  bool asks_order = false;
  // When it asks for a host, the question's own terms (not its
  // stand-ins), whether the history holds them or not: a host the question
  // names (`billing-api`, the `ledger-db` of "the prod DB alias") is not
  // the one it asks for (StatesAskedName).
  absl::flat_hash_set<std::string> own_terms;
  // Searched terms: the question word each stands for and its weight.
  absl::flat_hash_map<std::string, std::pair<int, double>> weight_of;
  // Words only a few items hold: specific enough alone.
  absl::flat_hash_set<int> rare_words;
  // Terms too common to search by, with what they weigh on a line.
  absl::flat_hash_map<std::string, std::pair<int, double>> common_of;
  // Words only a contrast holds (RecallQuery::contrast): their terms stay
  // in `weight_of` and `common_of`, so that a line holding one is known
  // (Score). On a line they answer nothing (no score, no worth, no share
  // answered, no count): the line is of the thing beside the asked one.
  // Around it, in its item or exchange, they say the passage is near what
  // is asked (the lines table's output holds the header table's too).
  absl::flat_hash_set<int> contrast;
  // Question words the history does not hold at all (none of their
  // terms), with what a word one item holds would weigh: the question is
  // about them too, and nothing recalled answers them.
  WordWeights unseen;
  // The days the question names (RecallQuery::days), with the words that
  // name each and what they weigh: a line writing the day holds them.
  struct Day {
    int month = 0, day = 0;
    WordWeights words;
  };
  std::vector<Day> days;
  // The words of the days `text` writes (WritesDay).
  WordWeights DayWordsIn(absl::string_view text) const {
    WordWeights words;
    for (const Day& day : days) {
      if (WritesDay(text, day.month, day.day)) words.insert(day.words.begin(), day.words.end());
    }
    return words;
  }
  // Whether it names a month alone (a Day of day 0).
  bool NamesMonth() const {
    return std::any_of(days.begin(), days.end(), [](const Day& d) { return d.day == 0; });
  }
  // The words of the months named alone that are `month`.
  WordWeights MonthWords(int month) const {
    WordWeights words;
    for (const Day& day : days) {
      if (day.day == 0 && day.month == month) words.insert(day.words.begin(), day.words.end());
    }
    return words;
  }

  QuestionWeights(const RecallQuery& query, const HistoryHits& hits)
      : asks_quantity(query.asks_quantity),
        asks_duration(query.asks_duration),
        asks_time_of_day(query.asks_time_of_day),
        asks_date(query.asks_date),
        asks_frequency(query.asks_frequency),
        asks_total(query.asks_total),
        asks_hash(query.asks_hash),
        asks_host(query.asks_host),
        asks_ticket(query.asks_ticket),
        asks_version(query.asks_version),
        asks_constant(query.asks_constant),
        asks_order(query.asks_first || query.asks_last || query.asks_later) {
    for (size_t i = 0; query.asks_host && i < query.terms.size(); ++i) {
      if (i >= query.stand_in.size() || !query.stand_in[i]) own_terms.insert(query.terms[i]);
    }
    // Terms nearly every item holds weigh nothing.
    const int64_t cap = MaxDocumentFrequency(HistorySearch{}, hits.items);
    for (int w = 0; w < query.words; ++w) {
      if (query.Contrasted(w)) contrast.insert(w);
    }
    // The words the history holds a term of their own of: their stand-ins
    // count less (kHeldStandIn).
    absl::flat_hash_set<int> held;
    for (size_t i = 0; i < query.terms.size(); ++i) {
      auto df = hits.document_frequency.find(query.terms[i]);
      const bool stand_in = i < query.stand_in.size() && query.stand_in[i];
      if (!stand_in && df != hits.document_frequency.end() && df->second > 0) {
        held.insert(query.word_of[i]);
      }
    }
    absl::flat_hash_set<int> seen_words;
    for (size_t i = 0; i < query.terms.size(); ++i) {
      auto df = hits.document_frequency.find(query.terms[i]);
      if (df == hits.document_frequency.end()) continue;
      const bool stand_in = i < query.stand_in.size() && query.stand_in[i];
      const int word = query.word_of[i];
      const double share =
          (static_cast<size_t>(word) < query.asked.size() && !query.asked[word] ? kAside : 1.0) *
          (stand_in && held.contains(word) ? kHeldStandIn : 1.0);
      if (df->second < 1) {
        if (query.terms[i].size() >= kMinUnseenBytes) {
          unseen[word] = share * TermWeight(hits.items, 1);
        }
        continue;
      }
      seen_words.insert(word);
      if (df->second > cap) {
        common_of[query.terms[i]] = {word, share * kCommonWord * TermWeight(hits.items, df->second)};
        continue;
      }
      weight_of[query.terms[i]] = {word, share * TermWeight(hits.items, df->second)};
      if (df->second <= kRareItems) rare_words.insert(word);
    }
    for (int w : seen_words) unseen.erase(w);
    // A day's words weigh what they weigh in the history; those it lacks
    // ("Dec" where every date is written 2026-12-02) what a word one item
    // holds would.
    for (const RecallQuery::NamedDay& named : query.days) {
      Day day{named.month, named.day, {}};
      for (const std::string* term : {&named.month_term, &named.day_term}) {
        const auto at = std::find(query.terms.begin(), query.terms.end(), *term);
        if (at == query.terms.end()) continue;
        const int word = query.word_of[static_cast<size_t>(at - query.terms.begin())];
        if (auto it = weight_of.find(*term); it != weight_of.end()) {
          day.words[word] = it->second.second;
        } else if (auto common = common_of.find(*term); common != common_of.end()) {
          day.words[word] = common->second.second;
        } else if (auto lacked = unseen.find(word); lacked != unseen.end()) {
          day.words[word] = lacked->second;
        }
      }
      if (!day.words.empty()) days.push_back(std::move(day));
    }
    for (const auto& [term, word_weight] : weight_of) {
      for (std::string& probe : SurfaceProbes(term)) searched_probes.push_back(std::move(probe));
    }
    for (const auto& [term, word_weight] : common_of) {
      for (std::string& probe : SurfaceProbes(term)) common_probes.push_back(std::move(probe));
    }
  }

  // What a text must hold (one of them, in ASCII lowercase) for any of the
  // searched terms, or of the common ones, to be among its words
  // (SurfaceProbes).
  std::vector<std::string> searched_probes;
  std::vector<std::string> common_probes;

  // Where in `lower` (a whole item's text, in ASCII lowercase) one of
  // `probes` occurs, [start, end) each, by start: the pieces holding none
  // of them hold none of their words, and are not split into words.
  static std::vector<std::pair<size_t, size_t>> ProbesIn(const std::string& lower,
                                                        const std::vector<std::string>& probes) {
    std::vector<std::pair<size_t, size_t>> at;
    for (const std::string& probe : probes) {
      for (size_t pos = lower.find(probe); pos != std::string::npos;
           pos = lower.find(probe, pos + 1)) {
        at.emplace_back(pos, pos + probe.size());
      }
    }
    std::sort(at.begin(), at.end());
    return at;
  }
  static bool Within(const std::vector<std::pair<size_t, size_t>>& at, size_t from, size_t to) {
    for (auto it = std::lower_bound(at.begin(), at.end(), std::pair<size_t, size_t>(from, 0));
         it != at.end() && it->first < to; ++it) {
      if (it->second <= to) return true;
    }
    return false;
  }

  // Each word's weight in a text of `terms`: its heaviest term there.
  static WordWeights WordsIn(
      const absl::flat_hash_map<std::string, std::pair<int, double>>& weights,
      absl::Span<const std::string> terms) {
    WordWeights words;
    for (const std::string& t : terms) {
      auto w = weights.find(t);
      if (w == weights.end()) continue;
      double& best = words[w->second.first];
      best = std::max(best, w->second.second);
    }
    return words;
  }
  WordWeights Words(absl::Span<const std::string> terms) const {
    return WordsIn(weight_of, terms);
  }
  WordWeights Common(absl::Span<const std::string> terms) const {
    return WordsIn(common_of, terms);
  }
  // Every question word the history holds, with its weight.
  WordWeights AllWords() const {
    WordWeights words;
    for (const auto* weights : {&weight_of, &common_of}) {
      for (const auto& [term, word_weight] : *weights) {
        double& best = words[word_weight.first];
        best = std::max(best, word_weight.second);
      }
    }
    return words;
  }
  // What every question word the history holds weighs together.
  double Total() const {
    double sum = UnseenWeight();
    for (const auto& [w, weight] : AllWords()) sum += weight;
    return sum;
  }
  // What the question words the history does not hold weigh together.
  double UnseenWeight() const {
    double sum = 0;
    for (const auto& [w, weight] : unseen) sum += weight;
    return sum;
  }
  // Whether the question is about something else than a history of
  // `items` (kMaxUnseenShare).
  bool OffTopic(int64_t items, int words, bool aside) const {
    const double total = Total();
    if (total <= 0) return false;
    if (aside) return UnseenWeight() / total >= kMaxUnseenShareAside;
    if (items < kLongHistory || words < kMinOffTopicWords) return false;
    return UnseenWeight() / total >= kMaxUnseenShare;
  }
  // Whether `words` answer the question as a passage must: two of its
  // words, or a rare one.
  bool Answers(const WordWeights& words) const {
    bool answers = words.size() >= 2;
    for (const auto& [w, weight] : words) answers |= rare_words.contains(w);
    return answers;
  }
};

// Where the piece (line, offset in it) of `lines` stating the longest
// duration is (a run's total after its steps' times), if one states any.
std::optional<std::pair<size_t, size_t>> LongestDuration(
    const std::vector<std::pair<size_t, absl::string_view>>& lines) {
  std::optional<std::pair<size_t, size_t>> at;
  double most = -1;
  for (size_t li = 0; li < lines.size(); ++li) {
    for (const auto& [offset, piece] : LinePieces(lines[li].second)) {
      const double seconds = StatedSeconds(piece);
      if (seconds > most) {
        most = seconds;
        at = {li, offset};
      }
    }
  }
  return at;
}

// Outputs stating a digest on more lines than this (a git log, whose every
// line holds one) answer a question for one only with its words beside it.
constexpr int kFewDigests = 3;

// Where the pieces (line, offset in it) of `lines` stating a digest are,
// when at most kFewDigests lines state one: a checksum query's result
// (`checksum | c6e95c33...` under the call that computed it) answers a
// question for a digest of what its exchange names, whatever words the
// line holds.
std::vector<std::pair<size_t, size_t>> FewDigests(
    const std::vector<std::pair<size_t, absl::string_view>>& lines) {
  // Whether `line` holds a run of 7 hex digits or more with a letter and a
  // digit among them: what a digest StatesHash finds is one, and most lines
  // hold none (a pass over their bytes, no split).
  auto may_state = [](absl::string_view line) {
    size_t run = 0;
    bool digit = false, letter = false;
    for (const char c : line) {
      const bool d = c >= '0' && c <= '9';
      const bool l = (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!d && !l) {
        run = 0;
        digit = letter = false;
        continue;
      }
      ++run;
      digit |= d;
      letter |= l;
      if (run >= 7 && digit && letter) return true;
    }
    return false;
  };
  std::vector<std::pair<size_t, size_t>> at;
  int stating = 0;
  for (size_t li = 0; li < lines.size(); ++li) {
    if (!may_state(lines[li].second)) continue;
    bool states = false;
    for (const auto& [offset, piece] : LinePieces(lines[li].second)) {
      if (!StatesHash(piece)) continue;
      states = true;
      at.emplace_back(li, offset);
    }
    if (states && ++stating > kFewDigests) return {};
  }
  return at;
}

// The pieces (line, offset) of `item` (its `lines`) of the answer's shape
// by their place alone: the longest duration, an output's few digests.
std::vector<std::pair<size_t, size_t>> ShapedByPlace(
    const QuestionWeights& q, const Item& item,
    const std::vector<std::pair<size_t, absl::string_view>>& lines) {
  std::vector<std::pair<size_t, size_t>> at;
  if (q.asks_duration) {
    if (const auto longest = LongestDuration(lines)) at.push_back(*longest);
  }
  if (q.asks_hash && item.data.kind == ItemKind::kToolResult) {
    for (const auto& digest : FewDigests(lines)) at.push_back(digest);
  }
  return at;
}

// Adds to `words` the question's words `item`'s exchange holds and the
// item does not (`own`), with what each weighs as context of its lines;
// whether there was any. What a turn's question and call say is the
// context of its answers: a tool's result and the assistant's reply. The
// question and the call stand for their own words (a result's provenance
// names its call). The exchange is the turn's talk (`talk`: each word at
// the share its message gives it) and the item's own call (`call`, its
// terms): what another
// tool's output of the same turn holds (a long log read beside it) does
// not say what this one is about.
bool AddExchangeWords(const Item& item, const HistoryHits& hits, const QuestionWeights& q,
                      const std::vector<std::string>& call, const WordWeights* talk,
                      const WordWeights& own, WordWeights& words) {
  const bool answer = item.data.kind == ItemKind::kToolResult ||
                      (item.data.kind == ItemKind::kMessage && item.data.role == Role::kAssistant);
  auto exchange = hits.exchange_terms.find(item.sequence);
  if (!answer || exchange == hits.exchange_terms.end()) return false;
  const WordWeights called = q.Words(call);
  bool any = false;
  for (const auto& [w, weight] : q.Words(exchange->second)) {
    if (own.contains(w)) continue;
    double share = called.contains(w) ? 1.0 : 0.0;
    if (talk != nullptr) {
      if (auto said = talk->find(w); said != talk->end()) share = std::max(share, said->second);
    }
    if (share <= 0) continue;
    any = true;
    words[w] = weight * kExchangeContext * share;
  }
  return any;
}

// A piece of a found item's text, with what the ranking needs of its words.
struct Piece {
  size_t line;
  size_t offset;
  absl::string_view text;
  // Of the answer's shape, when the question asks for a duration, a time
  // of day, a total or a digest (ShapedByPlace), whatever words it holds.
  bool shaped = false;
  // Whether its words are known yet (a piece that may hold only common
  // words is split only when its item's values matter).
  bool known = false;
  WordWeights words;   // The question's searched words among them.
  WordWeights common;  // Its words too common to search by.
  bool holds_value = false;      // HoldsValue of its terms.
  double length = 1;             // WordCount of its terms.
};

// `piece` with its words known, from its terms.
void Know(const QuestionWeights& q, const std::vector<std::string>& terms, Piece& piece) {
  piece.words = q.Words(terms);
  piece.common = q.Common(terms);
  piece.holds_value = HoldsValue(terms);
  piece.length = WordCount(terms);
  piece.known = true;
}

// An item's pieces that matter to the question: those holding a searched
// word (`pieces`), and those holding only common words or having the
// answer's shape (`common_only`, known or not).
struct ItemPiecesFound {
  std::vector<Piece> pieces;
  std::vector<Piece> common_only;
  absl::string_view title;  // The item's first line, when short.

  // Adds `p`, its words known, where it belongs: among `pieces` when it
  // holds a searched word, else among `common_only` when it holds a common
  // one or has the answer's shape, else nowhere. SplitHere and FromKept
  // both sort by this, so that both find the same candidates.
  void AddKnown(Piece p) {
    if (!p.words.empty()) {
      pieces.push_back(std::move(p));
    } else if (!p.common.empty() || p.shaped) {
      common_only.push_back(std::move(p));
    }
  }
};

// Whether a piece of `lines` has the answer's shape (Piece::shaped).
bool Shaped(const QuestionWeights& q, const std::vector<std::pair<size_t, size_t>>& shaped_at,
            size_t li, size_t offset, absl::string_view piece) {
  // A duration's, a time of day's or a total's line answers the question's
  // shape, whatever words it holds. (A digest's does only where its output
  // states few: FewDigests.)
  return std::find(shaped_at.begin(), shaped_at.end(), std::pair(li, offset)) !=
             shaped_at.end() || (q.asks_time_of_day && SetsTimeOfDay(piece)) ||
         (q.asks_date && StatesDate(piece)) ||
         (q.asks_frequency && SetsFrequency(piece)) ||
         (q.asks_total && StatesTotal(piece));
}

// The pieces of `content` found by splitting it here: only the pieces that
// may hold a searched word (a probe of one) are split into words first;
// those that may hold only common ones are split later, if at all.
ItemPiecesFound SplitHere(const QuestionWeights& q, const std::string& content,
                          const std::vector<std::pair<size_t, absl::string_view>>& lines,
                          const std::vector<std::pair<size_t, size_t>>& shaped_at) {
  ItemPiecesFound found;
  const std::string lower = absl::AsciiStrToLower(content);
  const auto searched = QuestionWeights::ProbesIn(lower, q.searched_probes);
  const auto common = QuestionWeights::ProbesIn(lower, q.common_probes);
  for (size_t li = 0; li < lines.size(); ++li) {
    if (absl::StripAsciiWhitespace(lines[li].second).empty()) continue;
    for (const auto& [offset, piece] : LinePieces(lines[li].second)) {
      const size_t at = lines[li].first + offset;
      Piece p{li, offset, piece, Shaped(q, shaped_at, li, offset, piece)};
      if (QuestionWeights::Within(searched, at, at + piece.size())) {
        // A probe's piece holding none of the searched terms is what
        // FromKept finds it: a piece of common words or of the answer's
        // shape, or none (the keys over it could make it a candidate).
        Know(q, SearchTerms(piece), p);
        found.AddKnown(std::move(p));
      } else if (QuestionWeights::Within(common, at, at + piece.size()) || p.shaped) {
        found.common_only.push_back(std::move(p));
      }
    }
  }
  return found;
}

// The same from the pieces the search kept (ItemPieces): each of the
// question's terms looked up in the item once, no text split; the pieces
// and their words are those SplitHere finds.
ItemPiecesFound FromKept(const QuestionWeights& q, const ItemPieces& kept,
                         const std::vector<std::pair<size_t, absl::string_view>>& lines,
                         const std::vector<std::pair<size_t, size_t>>& shaped_at) {
  // By term id: its word and weight, when the question searched or counts it.
  std::vector<const std::pair<int, double>*> searched(kept.terms.size(), nullptr);
  std::vector<const std::pair<int, double>*> common(kept.terms.size(), nullptr);
  for (const auto& [t, w] : q.weight_of) {
    if (const int64_t id = kept.IdOf(t); id >= 0) searched[static_cast<size_t>(id)] = &w;
  }
  for (const auto& [t, w] : q.common_of) {
    if (const int64_t id = kept.IdOf(t); id >= 0) common[static_cast<size_t>(id)] = &w;
  }
  ItemPiecesFound found;
  for (const ItemPieces::Piece& kp : kept.pieces) {
    if (kp.line >= lines.size()) break;
    const absl::string_view line = lines[kp.line].second;
    const absl::string_view piece = line.substr(kp.offset, kp.size);
    Piece p{kp.line, kp.offset, piece, Shaped(q, shaped_at, kp.line, kp.offset, piece)};
    for (uint32_t k = kp.from; k < kp.to; ++k) {
      if (const auto* w = searched[kept.ids[k]]; w != nullptr) {
        double& best = p.words[w->first];
        best = std::max(best, w->second);
      }
      if (const auto* w = common[kept.ids[k]]; w != nullptr) {
        double& best = p.common[w->first];
        best = std::max(best, w->second);
      }
    }
    p.holds_value = kp.value;
    p.length = std::max(1.0, kp.length);
    p.known = true;
    found.AddKnown(std::move(p));
  }
  return found;
}

// How far `content` (a line after its number, AfterLineNumber) is
// indented, or -1 for a blank line.
int IndentOf(absl::string_view content) {
  const size_t at = content.find_first_not_of(" \t");
  if (at == absl::string_view::npos || absl::StripAsciiWhitespace(content.substr(at)).empty()) {
    return -1;
  }
  return static_cast<int>(at);
}

// Calls `fn` with line `k` of `lines` and each line of the block it opens
// (those after it indented more, blank lines among them), at most `limit`
// lines in all, until `fn` returns true.
void ForEachLineOfBlock(const std::vector<std::pair<size_t, absl::string_view>>& lines, size_t k,
                        size_t limit, absl::FunctionRef<bool(size_t)> fn) {
  const int indent = IndentOf(AfterLineNumber(lines[k].second));
  for (size_t j = k; j < lines.size() && j - k < limit; ++j) {
    const int in = IndentOf(AfterLineNumber(lines[j].second));
    if (j > k && in >= 0 && in <= indent) return;
    if (fn(j)) return;
  }
}

// Whether `line` is a table's header: three columns or more (apart by two
// spaces or more, or by bars), no digit, no sentence.
bool IsTableHeader(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty() || line.find_first_of("0123456789.,;") != absl::string_view::npos) return false;
  int columns = 1;
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    if (line[i] == '|' || (line[i] == ' ' && line[i + 1] == ' ')) {
      ++columns;
      while (i + 1 < line.size() && (line[i + 1] == ' ' || line[i + 1] == '|')) ++i;
    }
  }
  return columns >= 3;
}

// Whether `line` only draws a table's rule ("----+----", "=====").
bool IsRule(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  return !line.empty() && line.find_first_not_of("-+=| ") == absl::string_view::npos;
}

// Whether `line` is a key that opens a block of lines under it: it ends
// with ':' (YAML's "prod:", a Python "def"), '{' or '[' (JSON's
// "\"result\": {"), or '(' (a call whose arguments follow one a line:
// `manifest = S3KeySensor(` over its `poke_interval=840,`), its comment
// aside. Not a listing's indented continuation ("Total Objects: 39" over
// "   Total Size: 1.5 GiB").
bool OpensBlock(absl::string_view line) {
  if (const size_t hash = line.find(" #"); hash != absl::string_view::npos) {
    line = line.substr(0, hash);
  }
  line = absl::StripTrailingAsciiWhitespace(line);
  return !line.empty() && absl::StrContains(":{[(", line.back());
}

// The path a search's match line opens with ("app/batches.py" of
// "app/batches.py:14:BATCH_SEND_SIZE = 640"), or "": `content` is the
// line's AfterLineNumber.
absl::string_view SearchPathOf(absl::string_view line, absl::string_view content) {
  if (content.data() == line.data()) return {};
  const absl::string_view prefix =
      absl::StripLeadingAsciiWhitespace(line.substr(0, content.data() - line.data()));
  if (!absl::EndsWith(prefix, ":")) return {};  // A file reader's line number.
  return prefix.substr(0, prefix.find(':'));
}

// For each line of `lines`, the nearest line above it indented less (the
// key or the statement it sits under), or -1. A search's match lines sit
// under lines of their own file only.
std::vector<int> Parents(const std::vector<std::pair<size_t, absl::string_view>>& lines) {
  std::vector<int> parents(lines.size(), -1);
  std::vector<std::pair<int, int>> open;  // (line, indent), indents rising.
  absl::string_view path;
  for (size_t i = 0; i < lines.size(); ++i) {
    const absl::string_view content = AfterLineNumber(lines[i].second);
    const int indent = IndentOf(content);
    if (indent < 0) continue;
    if (const absl::string_view at = SearchPathOf(lines[i].second, content); at != path) {
      open.clear();
      path = at;
    }
    while (!open.empty() && open.back().second >= indent) open.pop_back();
    if (!open.empty()) parents[i] = open.back().first;
    open.emplace_back(static_cast<int>(i), indent);
  }
  return parents;
}

// `pieces` in the order of their item's text.
void SortByPlace(std::vector<Piece>& pieces) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::pair(a.line, a.offset) < std::pair(b.line, b.offset);
  });
}

// Adds to `pieces` (an item's holding the question's searched words) its
// `common_only` ones, in the order of the item's text: all of them where
// the item's values are worth showing (`values`), only those of the
// answer's shape where its shapes are (`shapes`).
void JoinCommonOnly(const QuestionWeights& q, bool values, bool shapes,
                    std::vector<Piece>& common_only, std::vector<Piece>& pieces) {
  if (!shapes) return;
  bool added = false;
  for (Piece& p : common_only) {
    if (!values && !p.shaped) continue;
    if (!p.known) Know(q, SearchTerms(p.text), p);
    pieces.push_back(std::move(p));
    added = true;
  }
  if (added) SortByPlace(pieces);
}

// Line `i` of `lines` without its trailing white space, when it is short
// enough to show beside a passage (kMaxNeighbourBytes); empty otherwise.
absl::string_view Shown(const std::vector<std::pair<size_t, absl::string_view>>& lines, size_t i) {
  if (i >= lines.size()) return {};
  const absl::string_view line = absl::StripTrailingAsciiWhitespace(lines[i].second);
  return line.size() <= kMaxNeighbourBytes ? line : absl::string_view();
}

// Whether `line` is a comment: after its number in a file read, '#',
// ';', "//" or "--" and a space ("# keep below the idle timeout").
bool IsComment(absl::string_view line) {
  line = WithoutLineNumber(line);
  for (absl::string_view mark : {"# ", "; ", "// ", "-- "}) {
    if (absl::StartsWith(line, mark)) return true;
  }
  return false;
}

// The question's words of the keys a line of an item sits under
// (Parents, OpensBlock), each key's split once (most keys are over many
// lines).
class KeysOver {
 public:
  KeysOver(const QuestionWeights& q,
           const std::vector<std::pair<size_t, absl::string_view>>& lines, bool needed)
      : q_(q), lines_(lines), parents_(needed ? Parents(lines) : std::vector<int>()) {}

  // The line `li` sits under (Parents), or -1.
  int Parent(size_t li) const { return parents_.empty() ? -1 : parents_[li]; }

  // Whether key line `k` holds a word of the question.
  bool Names(int k) { return !WordsOf(k).empty(); }

  // Adds to `under` the question's words of the keys over line `li` (at
  // most kMaxKeys up) that `words` (the line's own) does not hold, at
  // kUnderKey of their weight; returns the nearest key holding one, or -1.
  int Over(size_t li, const WordWeights& words, WordWeights& under) {
    int nearest = -1;
    // A comment right above a setting says what it is ("; abort when
    // rejected/read goes above reject_guard" over "reject_guard =
    // 0.0125").
    if (li > 0 && AssignsFigure(lines_[li].second) && IsComment(lines_[li - 1].second) &&
        !Shown(lines_, li - 1).empty()) {
      for (const auto& [w, weight] : q_.Words(SearchTerms(lines_[li - 1].second))) {
        if (words.contains(w) || under.contains(w)) continue;
        under[w] = weight * kUnderKey;
        nearest = static_cast<int>(li - 1);
      }
    }
    int k = parents_[li];
    for (int depth = 0; k >= 0 && depth < kMaxKeys;
         ++depth, k = parents_[static_cast<size_t>(k)]) {
      for (const auto& [w, weight] : WordsOf(k)) {
        if (words.contains(w) || under.contains(w)) continue;
        under[w] = weight * kUnderKey;
        if (nearest < 0) nearest = k;
      }
    }
    return nearest;
  }

 private:
  const WordWeights& WordsOf(int k) {
    auto [it, added] = words_.try_emplace(k);
    if (added) {
      const absl::string_view key = Shown(lines_, static_cast<size_t>(k));
      if (OpensRecord(static_cast<size_t>(k))) {
        it->second = RecordWords(static_cast<size_t>(k));
      } else if (OpensBlock(key)) {
        it->second = q_.Words(SearchTerms(key));
      }
    }
    return it->second;
  }

  // Whether line `k` opens one record of a list, which no key names: a
  // "{" right under a JSON array's "[" (not a document's outer brace).
  // YAML's "- " items are not read so: a file list's "- path:
  // generation_config.json" then named its sizes for a question about
  // generation settings (BENCHMARKS.md).
  bool OpensRecord(size_t k) const {
    const absl::string_view line = absl::StripAsciiWhitespace(AfterLineNumber(lines_[k].second));
    if (line != "{" || parents_[k] < 0) return false;
    return absl::EndsWith(
        absl::StripTrailingAsciiWhitespace(lines_[static_cast<size_t>(parents_[k])].second), "[");
  }

  // The question's words of what names the record opened at line `k`: the
  // names its lines set a key to, rather than figures ("on_hand_qty" of
  // "column": "on_hand_qty" names the expectation whose "unexpected_count"
  // under "result" is asked for; the key "column" names nothing), at most
  // kMaxRecordLines down.
  WordWeights RecordWords(size_t k) {
    std::vector<std::string> terms;
    ForEachLineOfBlock(lines_, k, kMaxRecordLines, [&](size_t j) {
      const absl::string_view line = Shown(lines_, j);
      const absl::string_view value = line.empty() ? absl::string_view() : Assigned(line);
      if (!value.empty() && !HasDigit(value)) {
        for (std::string& term : SearchTerms(value)) terms.push_back(std::move(term));
      }
      return false;
    });
    return q_.Words(terms);
  }

  const QuestionWeights& q_;
  const std::vector<std::pair<size_t, absl::string_view>>& lines_;
  const std::vector<int> parents_;
  absl::flat_hash_map<int, WordWeights> words_;
};

// For a month named alone, the month of the record each line of `lines`
// sits in: that of the first date written in the nearest block over it
// (at most kMaxKeys up) that writes one, a cost report's period
// (`"Start": "2026-02-01"`) over its `"Amount"`; 0 where none does.
class RecordMonths {
 public:
  RecordMonths(const std::vector<std::pair<size_t, absl::string_view>>& lines,
               const KeysOver& keys)
      : lines_(lines), keys_(keys) {}

  int Of(size_t li) {
    int k = keys_.Parent(li);
    for (int depth = 0; k >= 0 && depth < kMaxKeys;
         ++depth, k = keys_.Parent(static_cast<size_t>(k))) {
      if (const int month = OfBlock(static_cast<size_t>(k)); month > 0) return month;
    }
    return 0;
  }

 private:
  // The month of the first date the block opened at line `k` writes, or 0.
  int OfBlock(size_t k) {
    auto [at, added] = months_.try_emplace(k, 0);
    // (A lambda may not capture a structured binding in C++20.)
    int& month = at->second;
    if (!added) return month;
    ForEachLineOfBlock(lines_, k, lines_.size(), [&](size_t j) {
      month = FirstMonthWritten(lines_[j].second);
      return month > 0;
    });
    return month;
  }

  const std::vector<std::pair<size_t, absl::string_view>>& lines_;
  const KeysOver& keys_;
  absl::flat_hash_map<size_t, int> months_;
};

// Adds to `pieces` (an item's, in an output whose exchange answers the
// question) the lines setting a figure right under a key that names what
// is asked: "days = 400 -> 60" under "expiration {" of the raw bucket's
// rule answers, though it holds none of the question's words. Not under a
// file's outer block ("service {" does not single out its settings), nor
// in a block whose own lines answer already ("batch_size = 1750" under
// "batch {" is the answer, not its siblings).
void AddFiguresUnderNamingKeys(const std::vector<std::pair<size_t, absl::string_view>>& lines,
                               KeysOver& keys, std::vector<Piece>& pieces) {
  absl::flat_hash_set<size_t> have;
  absl::flat_hash_set<int> answered;
  for (const Piece& p : pieces) {
    have.insert(p.line);
    if (AssignsFigure(lines[p.line].second)) answered.insert(keys.Parent(p.line));
  }
  const size_t before = pieces.size();
  for (size_t li = 0; li < lines.size(); ++li) {
    const int parent = keys.Parent(li);
    if (have.contains(li) || parent < 0 || answered.contains(parent) ||
        !AssignsFigure(lines[li].second) || Shown(lines, li).empty() || !keys.Names(parent)) {
      continue;
    }
    Piece p{li, 0, lines[li].second, false};
    p.known = true;
    p.holds_value = true;
    p.length = std::max(1.0, WordCount(SearchTerms(lines[li].second)));
    pieces.push_back(std::move(p));
  }
  if (pieces.size() > before) SortByPlace(pieces);
}

// The first row under line `li` of `lines` when it is a table's header (a
// rule between them aside) and the row holds a figure and is short enough
// to show; npos otherwise.
size_t FirstRowUnder(const std::vector<std::pair<size_t, absl::string_view>>& lines, size_t li) {
  if (!IsTableHeader(lines[li].second)) return std::string::npos;
  size_t row = li + 1;
  while (row < lines.size() && IsRule(lines[row].second)) ++row;
  return HasDigit(Shown(lines, row)) ? row : std::string::npos;
}

// BM25's length normalization of a passage of `length` words (WordCount)
// of `item`. What the user states (a ticket opened, a name, a time) is
// weighed as talk, against a message's usual length: a long message's
// words count as much on it as they lend the outputs of its turn (TalkOf,
// at most in full; a short one keeps a line's weight). Not a question
// that states nothing: its turn's outputs answer it.
double LengthNorm(const Item& item, absl::string_view piece, double length) {
  auto norm = [&](double average) {
    return (kK1 + 1) / (1 + kK1 * (1 - kB + kB * length / average));
  };
  const bool stated = item.data.kind == ItemKind::kMessage && item.data.role == Role::kUser &&
                      (!absl::StrContains(piece, "?") || HoldsFigure(piece));
  return stated ? std::max(norm(kAverageTerms), std::min(1.0, norm(kAverageTalkTerms)))
                : norm(kAverageTerms);
}

// Whether `piece` holds a value (IsValueTerm) that is not one of the
// question's terms: what it says beyond naming the subject ("webdocs-v9"
// asked about is no answer).
bool HoldsValueBeyond(const QuestionWeights& q, absl::string_view piece) {
  for (const std::string& t : SearchTerms(piece)) {
    if (IsValueTerm(t) && !q.weight_of.contains(t) && !q.common_of.contains(t)) return true;
  }
  return false;
}

// A passage of `item` (its call's arguments `call`) starting at `offset`
// in its content.
RecalledPassage PassageOf(const Item& item, const std::string& call, size_t offset,
                          std::string text) {
  RecalledPassage p;
  p.sequence = item.sequence;
  p.turn_index = item.turn_index;
  p.role = item.data.role;
  p.kind = item.data.kind;
  p.tool_name = item.data.tool_name;
  p.call = call;
  p.offset = offset;
  p.text = std::move(text);
  return p;
}

// What candidate `c`'s words weigh: on its line (`on_line`: its own words,
// common ones, the keys it sits under; at `norm`, and less where its call
// shows them) and as context (`item_words`, its item's and exchange's,
// that its line lacks); its worth, both together, but for the words only
// a contrast holds (`contrast`) on its line.
void Weigh(std::initializer_list<const WordWeights*> on_line, double norm,
           const WordWeights& shown, const WordWeights& item_words,
           const absl::flat_hash_set<int>& contrast, Candidate& c) {
  for (const WordWeights* words : on_line) {
    for (const auto& [w, weight] : *words) c.line[w] = std::max(c.line[w], weight * norm);
  }
  for (auto& [w, weight] : c.line) weight *= shown.contains(w) ? kShownInCall : 1.0;
  for (const auto& [w, weight] : item_words) {
    if (!c.line.contains(w)) c.context[w] = weight;
  }
  c.worth = 0;
  for (const auto& [w, weight] : c.line) c.worth += contrast.contains(w) ? 0 : weight;
  for (const auto& [w, weight] : c.context) c.worth += weight;
}

// Whether `piece` counts one of the question's words: a figure right
// before it ("853 passed, 69 skipped", "(35 rows)", "3 blockers"), as a
// test runner's or a query's summary states how many.
bool CountsQuestionWord(const QuestionWeights& q, absl::string_view piece) {
  const std::vector<absl::string_view> tokens =
      absl::StrSplit(piece, AnyChar(" \t,;()[]|=:"), absl::SkipEmpty());
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const absl::string_view n = tokens[i];
    if (!absl::ascii_isdigit(static_cast<unsigned char>(n.front())) ||
        !std::all_of(n.begin(), n.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '_';
        })) {
      continue;
    }
    // The word as a sentence ends it or a quote holds it ("853 passed.").
    absl::string_view word = tokens[i + 1];
    while (!word.empty() && absl::StrContains("\"'`", word.front())) word.remove_prefix(1);
    while (!word.empty() && absl::StrContains(".!?\"'`", word.back())) word.remove_suffix(1);
    const bool letters = std::all_of(word.begin(), word.end(), [](char c) {
      return absl::ascii_isalpha(static_cast<unsigned char>(c));
    });
    if (word.empty() || !letters) continue;
    const std::string form = WordForm(absl::AsciiStrToLower(word));
    for (const auto* weights : {&q.weight_of, &q.common_of}) {
      auto found = weights->find(form);
      if (found != weights->end() && !q.contrast.contains(found->second.first)) return true;
    }
  }
  return false;
}

// Whether `piece` holds a ticket's, a version's or a host's name the
// question asks for (AsksTicket, AsksVersion, AsksHost), or defines the
// constant it asks for (AsksConstant). A host the
// question names itself ("what host does the billing-api name get pointed
// to") is not the one it asks for.
bool StatesAskedName(const QuestionWeights& q, absl::string_view piece) {
  if ((q.asks_ticket && StatesTicket(piece)) || (q.asks_version && StatesVersion(piece)) ||
      (q.asks_constant && DefinesConstant(piece))) {
    return true;
  }
  if (!q.asks_host) return false;
  for (absl::string_view host : HostsIn(piece)) {
    // Its first label's words, but those asking for a host ("which
    // server": `mon-server-01`) and the other words for one ("which box":
    // `db-host-3`, "host" standing in for "box").
    bool named = false;
    for (const std::string& term : SearchTerms(host.substr(0, host.find('.')))) {
      named |= q.own_terms.contains(term) && !HostWords().contains(term);
    }
    if (!named) return true;
  }
  return false;
}

// Whether `words` hold one only a contrast of the question holds.
bool HoldsContrast(const QuestionWeights& q, const WordWeights& words) {
  return std::any_of(words.begin(), words.end(),
                     [&](const auto& word) { return q.contrast.contains(word.first); });
}

// The item's first line, when short: it usually says what the item is.
absl::string_view TitleOf(const std::vector<std::pair<size_t, absl::string_view>>& lines) {
  for (const auto& [at, line] : lines) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty()) continue;
    return stripped.size() <= kMaxTitleBytes ? stripped : absl::string_view();
  }
  return {};
}

// What a passage of `piece` (of line `li` of `lines`) shows, and the
// lines it spans: with `beside`, for a whole line, the lines either side
// (those setting a figure, where the line itself answers: `eligible`);
// the key it sits under above it (`key_line`, or -1); and under a
// table's header holding the question's words, its first row (`row`, or
// npos), which names the columns (a listing's newest run, a query's only
// row).
struct PassageText {
  std::string text;
  size_t first_line = 0, last_line = 0, row = std::string::npos;
};

PassageText TextAround(const std::vector<std::pair<size_t, absl::string_view>>& lines, size_t li,
                       absl::string_view piece, bool beside, bool eligible, int key_line) {
  PassageText out{std::string(absl::StripTrailingAsciiWhitespace(piece)), li, li};
  const bool whole = piece.size() == lines[li].second.size();
  auto shown_beside = [&](absl::string_view n) {
    return !n.empty() && (!eligible || AssignsFigure(n));
  };
  if (beside && whole) {
    if (li > 0 && shown_beside(Shown(lines, li - 1))) {
      out.text = absl::StrCat(Shown(lines, li - 1), "\n  ", out.text);
      out.first_line = li - 1;
    }
    if (shown_beside(Shown(lines, li + 1))) {
      absl::StrAppend(&out.text, "\n  ", Shown(lines, li + 1));
      out.last_line = li + 1;
    }
  }
  if (key_line >= 0 && static_cast<size_t>(key_line) < out.first_line) {
    out.text = absl::StrCat(Shown(lines, static_cast<size_t>(key_line)), "\n  ", out.text);
  }
  if (eligible && out.last_line == li && whole) out.row = FirstRowUnder(lines, li);
  if (out.row != std::string::npos) {
    absl::StrAppend(&out.text, "\n  ", Shown(lines, out.row));
    out.last_line = out.row;
  }
  return out;
}

// The candidate passages of one found item, added to `out` (texts already
// in `seen` are not added again).
void AddCandidates(const Item& item, const HistoryHits& hits, const QuestionWeights& q,
                   const WordWeights* talk, absl::flat_hash_set<std::string>& seen,
                   std::vector<Candidate>& out) {
  const std::string& content = item.data.content;
  const auto lines = TextLines(content);
  const std::vector<std::pair<size_t, size_t>> shaped_at = ShapedByPlace(q, item, lines);
  auto kept = hits.pieces.find(item.sequence);
  ItemPiecesFound found = kept != hits.pieces.end() && kept->second != nullptr
                              ? FromKept(q, *kept->second, lines, shaped_at)
                              : SplitHere(q, content, lines, shaped_at);
  std::vector<Piece>& pieces = found.pieces;
  std::vector<Piece>& common_only = found.common_only;
  const absl::string_view title = TitleOf(lines);
  // The item's words, and its exchange's (its turn's: the call, the
  // question that led to it) that it does not hold itself.
  WordWeights own;
  for (const Piece& p : pieces) {
    for (const auto& [w, weight] : p.words) own[w] = weight;
  }
  // Each word with what it weighs as context of the item's lines.
  WordWeights item_words;
  for (const auto& [w, weight] : own) item_words[w] = weight * kItemContext;
  std::string call;
  if (auto it = hits.calls.find(item.sequence); it != hits.calls.end()) call = it->second;
  const std::vector<std::string> call_terms = SearchTerms(call);
  bool through_exchange = AddExchangeWords(item, hits, q, call_terms, talk, own, item_words);
  // A call writing a day the question names ("s3 ls .../dt=2026-12-01/")
  // names it for its output, as its words do.
  const WordWeights day_in_call = q.DayWordsIn(call);
  for (const auto& [w, weight] : day_in_call) {
    if (own.contains(w)) continue;
    item_words[w] = std::max(item_words[w], weight * kExchangeContext);
    through_exchange = true;
  }
  if (item_words.empty()) return;
  WordWeights shown = q.Words(call_terms);
  for (const auto& [w, weight] : q.Common(call_terms)) shown[w] = weight;
  shown.insert(day_in_call.begin(), day_in_call.end());
  // An output whose call names the thing beside the one asked for (the
  // staging copy's path) is of that thing, whatever its lines hold.
  const bool of_contrast = HoldsContrast(q, shown);
  // A value's line does not name its subject: where the exchange names it
  // as a passage must, a line holding a value is worth showing.
  const bool values = through_exchange && q.Answers(item_words);
  // A line of the answer's shape (a duration, a time of day, an interval,
  // a total) answers where the item or its exchange names the subject.
  const bool shapes = values || q.Answers(item_words);
  JoinCommonOnly(q, values, shapes, common_only, pieces);
  // The keys each line sits under, in a text nested by indentation (a
  // YAML or JSON file, `kubectl describe`, code): they name it.
  KeysOver keys(q, lines, !pieces.empty());
  if (values && !pieces.empty()) AddFiguresUnderNamingKeys(lines, keys, pieces);
  RecordMonths record_months(lines, keys);
  for (const Piece& p : pieces) {
    const size_t li = p.line;
    const size_t line_at = lines[li].first;
    const absl::string_view line = lines[li].second;
    const size_t offset = p.offset;
    const absl::string_view piece = p.text;
    // A line writing a day the question names holds the words naming it
    // (a copy of the piece's words only then).
    WordWeights dated = q.days.empty() ? WordWeights() : q.DayWordsIn(piece);
    if (dated.empty() && q.NamesMonth() && FirstMonthWritten(piece) == 0) {
      if (const int month = record_months.Of(li); month > 0) dated = q.MonthWords(month);
    }
    if (!dated.empty()) dated.insert(p.words.begin(), p.words.end());
    const WordWeights& words = dated.empty() ? p.words : dated;
    const WordWeights& common = p.common;
    // The question's words of the keys the line sits under ("prod:" over
    // "threads: 7"), and the nearest of those keys holding one.
    WordWeights under;
    const int key_line = piece.size() == line.size() ? keys.Over(li, words, under) : -1;
    WordWeights named = words;
    named.insert(under.begin(), under.end());
    const bool eligible = q.Answers(named);
    // A value line holds a word of the question too (often a common
    // one: "checksum"), or any line with a number would do. In an output
    // found through its exchange, a line that answers and holds a value is
    // one as well.
    const absl::string_view assigned = Assigned(piece);
    const bool holds_value = (p.holds_value || HasDigit(assigned)) && !IsProgressLine(piece);
    const bool shape = shapes && p.shaped;
    const bool asked_words = !words.empty() || !common.empty();
    // A message stating a ticket, a version or a host beside a word of the
    // question answers a question for one: talk names what it states
    // ("charged twice for the same usage (MTR-4821)" for "the ticket # for
    // the double charge").
    const bool stated = item.data.kind == ItemKind::kMessage && asked_words &&
                        StatesAskedName(q, piece);
    const bool value = (values && asked_words && holds_value) || shape || stated;
    // ... and so is a line naming its subject itself, in two of the
    // question's words or more ("dry-run summary for billing-ledger:
    // verification checksum sha256:aece3e47"): it ranks as one, though it
    // needs no lines around it to say what it is.
    std::set<int> own_words;
    for (const auto& [w, weight] : named) own_words.insert(w);
    for (const auto& [w, weight] : common) own_words.insert(w);
    const bool named_value = value || (eligible && own_words.size() >= 2 && holds_value &&
                                       HoldsValueBeyond(q, piece));
    if (!eligible && !value) continue;
    // A test runner's progress line ("tests/unit/test_vat.py ..... [ 41%]")
    // names a file and holds dots: no answer, though it holds the words
    // of a question about the run.
    if (IsProgressLine(piece)) continue;
    // The lines around a value may say what it is; around one holding the
    // question's words, in a block of settings or a record's fields, they
    // may be the setting asked for by other names.
    const bool block = eligible && ((value && HasDigit(assigned)) ||
                                    (q.asks_quantity && !assigned.empty()));
    PassageText around = TextAround(lines, li, piece, (value || block) && (!eligible || block),
                                    eligible, key_line);
    std::string& text = around.text;
    const size_t first_line = around.first_line, last_line = around.last_line;
    const size_t row = around.row;
    if (!seen.insert(text).second) continue;
    Candidate c;
    c.passage = PassageOf(item, call, line_at + offset, std::move(text));
    if (absl::StripAsciiWhitespace(piece) != title) c.passage.title = std::string(title);
    Weigh({&common, &words, &under}, LengthNorm(item, piece, p.length), shown, item_words,
          q.contrast, c);
    c.contrasted = of_contrast;
    c.own_words = asked_words;
    if (q.asks_order) c.own_template = LineTemplate(piece);
    c.value = named_value || row != std::string::npos;
    c.figure = shape ||
               (q.asks_quantity && (SetsFigure(piece) || CountsQuestionWord(q, piece))) ||
               ((values || eligible) && q.asks_hash && !c.line.empty() && StatesHash(piece)) ||
               (!c.line.empty() && StatesAskedName(q, piece));
    // A reply's line of the answer's shape answers its turn's question
    // ("I would propose Monday 29 March" after "What would a cutover slot
    // for the identity provider sync look like?"): the question's words
    // are its own.
    if (c.figure && through_exchange && item.data.kind == ItemKind::kMessage) {
      for (const auto& [w, weight] : c.context) c.line[w] = std::max(c.line[w], weight);
      c.context.clear();
    }
    c.first_line = first_line;
    c.last_line = last_line;
    c.piece_offset = piece.size() == line.size() ? std::string::npos : offset;
    out.push_back(std::move(c));
  }
}

// The candidate passages of an opening message (HistoryHits::opening) for
// a question about the conversation's start: its first kMaxPerItem pieces,
// each answering the whole question (the user's introduction is what it
// asks about, in whatever words).
void AddOpeningCandidates(const Item& item, const QuestionWeights& q,
                          absl::flat_hash_set<std::string>& seen, std::vector<Candidate>& out) {
  WordWeights all = q.AllWords();
  all.insert(q.unseen.begin(), q.unseen.end());
  const auto lines = TextLines(item.data.content);
  int added = 0;
  for (size_t li = 0; li < lines.size() && added < kMaxPerItem; ++li) {
    if (absl::StripAsciiWhitespace(lines[li].second).empty()) continue;
    for (const auto& [offset, piece] : LinePieces(lines[li].second)) {
      if (added >= kMaxPerItem) break;
      std::string text(absl::StripTrailingAsciiWhitespace(piece));
      if (!seen.insert(text).second) continue;
      Candidate c;
      c.passage = PassageOf(item, "", lines[li].first + offset, std::move(text));
      c.context = all;
      for (const auto& [w, weight] : all) c.worth += weight;
      c.value = c.figure = true;
      c.first_line = c.last_line = li;
      c.piece_offset = piece.size() == lines[li].second.size() ? std::string::npos : offset;
      out.push_back(std::move(c));
      ++added;
    }
  }
}

// Each found turn's talk: the question's words its messages hold, each at
// the share a long message's words count (a morning's long greeting shares
// a word or two with most questions).
absl::flat_hash_map<int64_t, WordWeights> TalkOf(const HistoryHits& hits,
                                                 const QuestionWeights& weights) {
  absl::flat_hash_map<int64_t, WordWeights> talk;
  for (const Item& item : hits.found) {
    if (item.data.kind != ItemKind::kMessage || item.redacted) continue;
    // Its words: kept by the search's copy, or split here.
    std::vector<std::string> split;
    absl::Span<const std::string> terms;
    if (auto kept = hits.pieces.find(item.sequence); kept != hits.pieces.end() && kept->second) {
      terms = absl::MakeConstSpan(kept->second->terms).subspan(0, kept->second->whole);
    } else {
      split = SearchTerms(item.data.content);
      terms = split;
    }
    const double length = WordCount(terms);
    const double share = std::min(
        1.0, (kK1 + 1) / (1 + kK1 * (1 - kB + kB * length / kAverageTalkTerms)));
    for (const auto& [w, weight] : weights.Words(terms)) {
      double& best = talk[item.turn_index][w];
      best = std::max(best, share);
    }
  }
  return talk;
}

// The passage holding a value that shows the lines of candidate `i` and
// more, in the same item (the best by its own worth), or -1: where `i`
// names the subject and a line beside it holds the value (`name =
// "weasyprint"` over `version = "63.3"`), the value's passage is shown
// rather than the name's alone, which would keep it out.
int ValueAround(const std::vector<Candidate>& candidates, const std::vector<bool>& taken,
                size_t i) {
  const Candidate& c = candidates[i];
  if (c.value || c.piece_offset != std::string::npos) return -1;
  int best = -1;
  for (size_t k = 0; k < candidates.size(); ++k) {
    const Candidate& v = candidates[k];
    if (k == i || taken[k] || !v.value || v.passage.sequence != c.passage.sequence ||
        v.piece_offset != std::string::npos || v.first_line > c.first_line ||
        v.last_line < c.last_line) {
      continue;
    }
    if (best < 0 || v.worth > candidates[static_cast<size_t>(best)].worth) best = static_cast<int>(k);
  }
  return best;
}

// For a question asking for the first of several alike outputs ("the
// first dry run, before the batch change") or for the last of an output's
// alike lines ("by the final warning"): marks `later` the value lines said
// after one (in the order asked for) whose own line reads the same but for
// its figures (LineTemplate; the neighbours shown around it aside), and
// they count less. Alike lines are of one thing where the earlier one's
// line, item and exchange hold each question word the later one's do: the
// first health check of the label printers is not a later one of the
// route optimiser's, whose output reads the same. `first_item`: the
// earliest item counts most (else the latest); `last_line`: within an
// item, the last of alike lines does (else the first).
void MarkLater(std::vector<Candidate>& candidates, bool first_item, bool last_line) {
  // Where each passage was said, in the order asked for: its item (the
  // earliest first, or the latest), then its place in the item (the first
  // line first, or the last).
  auto said = [&](const Candidate& c) {
    const int64_t offset = static_cast<int64_t>(c.passage.offset);
    return std::pair(first_item ? c.passage.sequence : -c.passage.sequence,
                     last_line ? -offset : offset);
  };
  auto holds = [](const Candidate& c, int word) {
    return c.line.contains(word) || c.context.contains(word);
  };
  // Whether `earlier`'s words hold each of `later`'s.
  auto covers = [&](const Candidate& earlier, const Candidate& later) {
    for (const auto& [w, weight] : later.line) {
      if (!holds(earlier, w)) return false;
    }
    for (const auto& [w, weight] : later.context) {
      if (!holds(earlier, w)) return false;
    }
    return true;
  };
  // (A passage without a line of its own, an opening message's, is alike
  // to none.)
  absl::flat_hash_map<std::string, std::vector<size_t>> alike;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].value && !candidates[i].figure) continue;
    if (candidates[i].own_template.empty()) continue;
    alike[candidates[i].own_template].push_back(i);
  }
  for (auto& [text, group] : alike) {
    // In the order asked for: only those before a line can cover it.
    std::sort(group.begin(), group.end(), [&](size_t a, size_t b) {
      return said(candidates[a]) < said(candidates[b]);
    });
    for (size_t n = 1; n < group.size(); ++n) {
      Candidate& c = candidates[group[n]];
      for (size_t m = 0; m < n; ++m) {
        const Candidate& before = candidates[group[m]];
        if (said(before) < said(c) && covers(before, c)) {
          c.later = true;
          break;
        }
      }
    }
  }
}

// The candidate passages of the items `hits` found, but those the view
// shows: with `about_start`, the opening messages' first (they take their
// texts before other candidates of theirs), then every item's
// (AddCandidates).
std::vector<Candidate> CandidatesOf(const HistoryHits& hits, const QuestionWeights& weights,
                                    const RecallLimits& limits, bool about_start) {
  std::vector<Candidate> candidates;
  absl::flat_hash_set<std::string> seen_texts;
  const absl::flat_hash_map<int64_t, WordWeights> talk = TalkOf(hits, weights);
  if (about_start) {
    for (const Item& item : hits.found) {
      if (limits.shown.contains(item.sequence) || item.redacted ||
          std::find(hits.opening.begin(), hits.opening.end(), item.sequence) ==
              hits.opening.end()) {
        continue;
      }
      AddOpeningCandidates(item, weights, seen_texts, candidates);
    }
  }
  for (const Item& item : hits.found) {
    if (limits.shown.contains(item.sequence) || item.redacted) continue;
    auto turn_talk = talk.find(item.turn_index);
    AddCandidates(item, hits, weights, turn_talk == talk.end() ? nullptr : &turn_talk->second,
                  seen_texts, candidates);
  }
  return candidates;
}

// What candidate `c` scores for `query` given the question words earlier
// picks answered (`covered`). A value line is worth a little more than the
// item's other lines that hold the same words (it holds what the question
// asks for): it is picked first of them. What earlier picks answered
// orders the picks; the floor a pick is held to compares what each is
// worth by itself (Candidate::worth), so a passage as good as the first is
// not dropped.
double Score(const RecallQuery& query, const absl::flat_hash_set<int>& covered,
             const Candidate& c) {
  auto share = [&](int w) { return covered.contains(w) ? kCovered : 1.0; };
  // A passage holding a word of the contrast on its line is of the thing
  // beside the one asked for; the contrast's words add nothing.
  double contrast = c.contrasted ? kContrasted : 1.0;
  double s = 0;
  for (const auto& [w, weight] : c.line) {
    if (query.Contrasted(w)) {
      contrast = kContrasted;
      continue;
    }
    s += weight * share(w);
  }
  double context = 0;
  for (const auto& [w, weight] : c.context) {
    if (!query.Contrasted(w)) context += weight * share(w);
  }
  // A figure line holding none of the question's words (a schedule, a
  // run's total time), or only through the keys it sits under, is the
  // answer's shape in an item its exchange names: what the exchange says
  // counts as its own.
  const double order = (c.later ? kLater : 1.0) * contrast;
  if (c.figure && !c.own_words) {
    return order * (s + context) * (1 + kValueLine) * (1 + kFigureLine);
  }
  return order * (s * (c.value ? 1 + kValueLine : 1.0) * (c.figure ? 1 + kFigureLine : 1.0) +
                  context);
}

}  // namespace

std::vector<RecalledPassage> RankPassages(const RecallQuery& query, const HistoryHits& hits,
                                          const Tokenizer& tokenizer,
                                          const RecallLimits& limits) {
  std::vector<RecalledPassage> chosen;
  if (query.terms.empty() || hits.found.empty() || limits.max_tokens <= 0) return chosen;
  // The section's header and its message's framing, and a room too small
  // for any passage: nothing to rank (a view near its hard band).
  int64_t used = limits.per_message_tokens + tokenizer.CountTokens(RenderRecalled({})) + 1;
  if (limits.max_tokens - used < kMinPassageTokens) return chosen;
  const QuestionWeights weights(query, hits);
  // A question about the conversation's start asks about it in whatever
  // words: the opening messages answer it though the history lacks them.
  const bool about_start = query.asks_start && !hits.opening.empty();
  if (!about_start &&
      (weights.weight_of.empty() || weights.OffTopic(hits.items, query.words, query.aside))) {
    return chosen;
  }
  std::vector<Candidate> candidates = CandidatesOf(hits, weights, limits, about_start);

  // Greedy: the best passage, then the best one given what is answered.
  absl::flat_hash_set<int> covered;
  auto score = [&](const Candidate& c) { return Score(query, covered, c); };
  // How much of the question a passage answers, on its line or through its
  // item and exchange: a question the history has only a word or two of
  // in common with (a poem, the weather) recalls nothing.
  const double total = weights.Total();
  auto answered = [&](const Candidate& c) {
    WordWeights words;
    for (const auto* part : {&weights.weight_of, &weights.common_of}) {
      for (const auto& [term, word_weight] : *part) {
        if (c.context.contains(word_weight.first) ||
            (c.line.contains(word_weight.first) && !weights.contrast.contains(word_weight.first))) {
          double& best = words[word_weight.first];
          best = std::max(best, word_weight.second);
        }
      }
    }
    // Only an opening message answers for the words the history lacks.
    for (const auto& [w, weight] : weights.unseen) {
      if (c.context.contains(w)) words[w] = weight;
    }
    double sum = 0;
    for (const auto& [w, weight] : words) sum += weight;
    return total > 0 ? sum / total : 0;
  };
  // "The first dry run": the earliest counts; "by the final warning", the
  // last line of its item.
  if (query.asks_first || query.asks_last) {
    MarkLater(candidates, query.asks_first || !query.asks_last, query.asks_last);
  } else if (query.asks_later) {
    // "Once Rupert's date fix was in": the latest of alike outputs.
    MarkLater(candidates, /*first_item=*/false, /*last_line=*/false);
  }
  // The greedy pass looks at the best candidates by their own score only.
  if (candidates.size() > kMaxCandidates) {
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < candidates.size(); ++i) order.emplace_back(-score(candidates[i]), i);
    std::nth_element(order.begin(), order.begin() + kMaxCandidates, order.end());
    std::vector<Candidate> best;
    for (size_t k = 0; k < kMaxCandidates; ++k) best.push_back(std::move(candidates[order[k].second]));
    candidates = std::move(best);
  }
  std::vector<bool> taken(candidates.size(), false);
  std::vector<bool> answers_enough(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    answers_enough[i] = answered(candidates[i]) >= kMinAnswered;
  }
  absl::flat_hash_map<int64_t, int> per_item;
  absl::flat_hash_set<int64_t> items_shown;
  // The lines (or pieces of a long line) the picks show, by item: a
  // passage showing one of them again (a value's neighbour picked for its
  // own words) is not picked.
  absl::flat_hash_set<std::tuple<int64_t, size_t, size_t>> lines_shown;
  auto shows_again = [&](const Candidate& c) {
    for (size_t l = c.first_line; l <= c.last_line; ++l) {
      if (lines_shown.contains({c.passage.sequence, l, c.piece_offset})) return true;
    }
    return false;
  };
  double first = 0;
  int misfits = 0;
  while (static_cast<int>(chosen.size()) < limits.max_passages && misfits < kMaxMisfits) {
    int best = -1;
    double best_score = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      // An item's passages are capped; a line of the answer's shape (a
      // figure asked for) has one more place than the item's other lines.
      const bool shape = query.asks_quantity && candidates[i].figure;
      if (taken[i] || per_item[candidates[i].passage.sequence] >= kMaxPerItem + (shape ? 1 : 0)) {
        continue;
      }
      // The first pick answers enough of the question: the best by its
      // words, when they are a few of the question's, is not it.
      if (chosen.empty() && !answers_enough[i]) continue;
      // Below the floor by its own worth: never picked.
      if (candidates[i].worth < kRelativeFloor * first) continue;
      const double s = score(candidates[i]);
      if (s > best_score || (s == best_score && best >= 0 &&
                             candidates[i].passage.sequence > candidates[best].passage.sequence)) {
        best = static_cast<int>(i);
        best_score = s;
      }
    }
    if (best < 0) break;
    if (const int around = ValueAround(candidates, taken, static_cast<size_t>(best)); around >= 0) {
      best = around;
      best_score = score(candidates[static_cast<size_t>(best)]);
    }
    taken[best] = true;
    Candidate& c = candidates[best];
    if (shows_again(c) || InText(limits.shown_text, c.passage.text)) continue;
    c.passage.tokens = tokenizer.CountTokens(c.passage.text);
    int64_t cost = c.passage.tokens + 2;
    if (!items_shown.contains(c.passage.sequence)) {
      cost += tokenizer.CountTokens(Provenance(c.passage)) + 1;
    }
    if (used + cost > limits.max_tokens) {  // A smaller one may fit.
      ++misfits;
      continue;
    }
    misfits = 0;
    if (chosen.empty()) first = c.worth;
    used += cost;
    items_shown.insert(c.passage.sequence);
    ++per_item[c.passage.sequence];
    for (size_t l = c.first_line; l <= c.last_line; ++l) {
      lines_shown.insert({c.passage.sequence, l, c.piece_offset});
    }
    // A question asking for a quantity is answered by a figure: the words
    // of a line without one (a test named after the setting) stay open.
    if (!query.asks_quantity || c.figure) {
      for (const auto& [w, weight] : c.line) covered.insert(w);
    }
    c.passage.score = best_score;
    chosen.push_back(c.passage);
  }
  return chosen;
}

std::string RenderRecalled(const std::vector<RecalledPassage>& passages) {
  std::string out =
      "Recalled from earlier in this conversation: verbatim excerpts of stored turns that match "
      "the question (newer turns take precedence over them).";
  std::vector<const RecalledPassage*> ordered;
  for (const RecalledPassage& p : passages) ordered.push_back(&p);
  std::sort(ordered.begin(), ordered.end(), [](const RecalledPassage* a, const RecalledPassage* b) {
    return std::pair(a->sequence, a->offset) < std::pair(b->sequence, b->offset);
  });
  int64_t last = 0;
  // An item's lines already shown: the key a line sits under comes with
  // each passage beneath it ("def with_key(...)" over two of its lines),
  // and is shown once.
  absl::flat_hash_set<absl::string_view> shown;
  for (const RecalledPassage* p : ordered) {
    if (p->sequence != last) {
      absl::StrAppend(&out, "\n", Provenance(*p));
      shown.clear();
    }
    last = p->sequence;
    // A passage's lines after its first are joined with "\n  ".
    std::vector<absl::string_view> lines = absl::StrSplit(p->text, "\n  ");
    std::vector<absl::string_view> kept;
    for (absl::string_view line : lines) {
      if (shown.insert(line).second) kept.push_back(line);
    }
    if (!kept.empty()) absl::StrAppend(&out, "\n  ", absl::StrJoin(kept, "\n  "));
  }
  return out;
}

}  // namespace convstate
