#include "services/compaction/ledger/instructions.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

using Words = std::initializer_list<absl::string_view>;

bool StartsWithAny(absl::string_view s, Words words) {
  for (absl::string_view w : words) {
    if (absl::StartsWith(s, w)) return true;
  }
  return false;
}

bool ContainsAny(absl::string_view s, Words words) {
  for (absl::string_view w : words) {
    if (absl::StrContains(s, w)) return true;
  }
  return false;
}

absl::string_view FirstWord(absl::string_view s) {
  s = absl::StripLeadingAsciiWhitespace(s);
  const size_t end = s.find_first_of(" ,.;:!?");
  return end == absl::string_view::npos ? s : s.substr(0, end);
}

// True if `word` reads as a report of the past ("got", "saw", "worked")
// rather than as the verb of an order ("restart", "deploy").
bool PastTense(absl::string_view word) {
  for (absl::string_view w :
       {"been", "had", "was", "were", "got", "saw", "seen", "did", "heard", "thought", "knew",
        "found", "made", "came", "went", "said", "told", "took", "gave", "ran", "broke", "left",
        "is", "are", "has", "seems", "seemed", "looks", "mind", "ever"}) {
    if (word == w) return true;
  }
  // "-ed" words, but not verbs that end so in their base form ("need",
  // "feed", "seed", "speed", "shred").
  return absl::EndsWith(word, "ed") && !absl::EndsWith(word, "eed") && word != "shred";
}

// Words after "don't" that make an idiom or a report, not a rule.
bool IdiomAfterDont(absl::string_view word) {
  for (absl::string_view w : {"know", "think", "worry", "understand", "see", "care", "mind",
                              "believe", "recall", "get", "have", "like", "want", "feel",
                              "expect", "remember", "agree", "mean", "need"}) {
    if (word == w) return true;
  }
  return false;
}

// Lead words a rule may start with that say nothing themselves.
absl::string_view StripLeadWords(absl::string_view s) {
  bool stripped = true;
  while (stripped) {
    stripped = false;
    s = absl::StripLeadingAsciiWhitespace(s);
    for (absl::string_view lead :
         {"please ", "and ", "also ", "so ", "but ", "then ", "just ", "oh ", "ok ", "okay ",
          "again ", "and please ", "i'd like you to ", "i want you to ", "i need you to ",
          "note that ", "that ",
          "for everything we do ", "for this incident ", "for this project ", "here ",
          "which is ", "basically ", "simply ", "seriously ", "really "}) {
      if (absl::ConsumePrefix(&s, lead)) stripped = true;
    }
  }
  return s;
}

// True if `clause` (lowercase, lead words stripped) states a rule.
bool IsRuleClause(absl::string_view clause) {
  if (clause.empty()) return false;
  const bool guess = ContainsAny(clause, {"must have", "must've", "must be the", "must be a ",
                                          "must be some", "must be my", "must be our"});
  // Orders: "never restart ...", "always page ...", "don't touch ...".
  if (absl::StartsWith(clause, "never ")) {
    const absl::string_view next = FirstWord(clause.substr(6));
    if (!PastTense(next) && next != "again") return true;
  }
  if (absl::StartsWith(clause, "always ")) {
    if (!PastTense(FirstWord(clause.substr(7)))) return true;
  }
  for (absl::string_view dont : {"do not ", "don't ", "dont ", "do not ever ", "don't ever "}) {
    if (absl::StartsWith(clause, dont)) {
      const absl::string_view next = FirstWord(clause.substr(dont.size()));
      if (!IdiomAfterDont(next) || next == "forget") return true;
    }
  }
  if (StartsWithAny(clause, {"don't forget to ", "do not forget to ", "make sure ", "ensure ",
                             "remember ", "keep in mind ", "bear in mind ",
                             "avoid ", "no more ", "only ever ", "stop ", "refrain from ",
                             "under no circumstances", "without exception",
                             "keep every ", "keep all ", "before any ", "before every "})) {
    return true;
  }
  // Standing by their words: "from now on", "until further notice", ...
  if (ContainsAny(clause, {"from now on", "going forward", "for the rest of this",
                           "for the rest of the", "until further notice", "until i say otherwise",
                           "under no circumstances", "no matter what", "at all times",
                           "without exception", "never ever", "is not allowed",
                           "are not allowed", "is forbidden", "are forbidden",
                           "not allowed to", "is mandatory", "are mandatory",
                           "is off-limits", "are off-limits", "off limits"})) {
    return true;
  }
  // Obligations of someone: "you must ...", "we must not ...".
  if (!guess && ContainsAny(clause, {"you must ", "we must ", "must never ", "must always ",
                                     "must not ", "mustn't ", "you should never ",
                                     "you should always ", "we should never ",
                                     "we should always ", "you may not ", "we may not ",
                                     "you are not to ", "nobody may ", "no one may ",
                                     "nobody should ", "no one should "})) {
    return true;
  }
  // Rules for a whole class: "every change ... needs a rollback step",
  // "all deploys must ...", "any migration has to ...".
  if (StartsWithAny(clause, {"every ", "all ", "any ", "each "}) && !guess &&
      !absl::StartsWith(clause, "every time ") && !absl::StartsWith(clause, "all of a sudden") &&
      ContainsAny(clause, {" needs ", " need to ", " must ", " requires ", " require ",
                           " has to ", " have to ", " should ", " shall ", " is to ",
                           " are to ", " goes through ", " go through "})) {
    return true;
  }
  // "no deploys without a ticket", "no restarts before 18:00", and
  // "nobody restarts a store's server while it is trading": an act with
  // the condition it may not happen in (not "nobody knows why").
  const Words kConditions = {" without ", " unless ", " before ", " after ", " during ",
                             " outside ", " until ", " while "};
  if (absl::StartsWith(clause, "no ") && ContainsAny(clause, kConditions)) return true;
  for (absl::string_view nobody : {"nobody ", "no one "}) {
    if (absl::StartsWith(clause, nobody) &&
        !PastTense(FirstWord(clause.substr(nobody.size()))) && ContainsAny(clause, kConditions)) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<size_t> RuleStart(absl::string_view sentence) {
  const std::string lower = absl::AsciiStrToLower(sentence);
  absl::string_view s = absl::StripTrailingAsciiWhitespace(lower);
  if (s.empty() || s.back() == '?') return std::nullopt;
  // Clauses: split after ':', ',', ';', ' - ' and '(' (a rule often
  // follows a lead-in: "one rule for this incident: never ...").
  size_t begin = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    const bool end = i == s.size() || s[i] == ':' || s[i] == ',' || s[i] == ';' || s[i] == '(' ||
                     (s[i] == '-' && i > 0 && s[i - 1] == ' ' && i + 1 < s.size() &&
                      s[i + 1] == ' ');
    if (!end) continue;
    absl::string_view clause = s.substr(begin, i - begin);
    const absl::string_view stripped = StripLeadWords(clause);
    if (IsRuleClause(absl::StripTrailingAsciiWhitespace(stripped))) {
      return static_cast<size_t>(stripped.data() - s.data());
    }
    // A lead-in that announces a rule ("a second rule from finance, also
    // permanent: money stays in Decimal ..."): the rule is what follows the
    // colon, whatever its form.
    if (i < s.size() && s[i] == ':' &&
        ContainsAny(s.substr(0, i), {"rule", "permanent", "standing order", "policy"})) {
      const absl::string_view rest = StripLeadWords(s.substr(i + 1));
      if (!rest.empty()) return static_cast<size_t>(rest.data() - s.data());
    }
    begin = i + 1;
  }
  return std::nullopt;
}

bool IsStandingInstruction(absl::string_view sentence) {
  return RuleStart(sentence).has_value();
}

std::string RuleOf(absl::string_view instruction, size_t max_bytes) {
  absl::string_view rule = instruction;
  if (std::optional<size_t> start = RuleStart(instruction)) rule = instruction.substr(*start);
  rule = absl::StripAsciiWhitespace(rule);
  if (rule.size() <= max_bytes) return std::string(rule);
  absl::string_view cut = Utf8Prefix(rule, max_bytes);
  const size_t space = cut.rfind(' ');
  if (space != absl::string_view::npos && space > max_bytes / 2) cut = cut.substr(0, space);
  return absl::StrCat(cut, " ...");
}

}  // namespace convstate
