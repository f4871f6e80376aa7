#ifndef CONVSTATE_SERVICES_COMMON_WORD_FORMS_H_
#define CONVSTATE_SERVICES_COMMON_WORD_FORMS_H_

// Words as people write them, brought to one form so that a question finds
// a text whatever forms each uses: a few common abbreviations spelled out
// (kAbbreviations), then the Snowball English stemmer (Porter2, through
// Debian's libstemmer; the algorithm of PostgreSQL's english_stem too), so
// that "guards", "guarding" and "guard" are one word, and "DB" is
// "database". Words with a digit (ids, versions, hashes, hosts' parts) are
// kept as they are. Thread-safe.

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace convstate {

// The abbreviations spelled out before stemming, both in what is stored and
// in what is asked: {abbreviation, word or words}. Lowercase.
struct Abbreviation {
  const char* abbreviation;
  const char* word;
};
extern const Abbreviation kAbbreviations[];
extern const size_t kAbbreviationCount;

// The forms of `word` (WordForm), each word of its spelled-out phrase where
// an abbreviation stands for several ("mq" is "message queue").
std::vector<std::string> WordForms(absl::string_view word, bool spell_out = true);

// Calls `fn` with each of WordForms(word, spell_out), in order, without a
// copy of any: what `fn` is given lasts until the next call on this thread.
// For the words of every stored item (SearchTerms), where a copy per word
// costs as much as the look-up.
void ForEachWordForm(absl::string_view word, bool spell_out,
                     absl::FunctionRef<void(absl::string_view)> fn);

// Whether `word` (lowercase) is one of kAbbreviations.
bool IsAbbreviation(absl::string_view word);

// The one form of `word`, a lowercase run of ASCII letters and digits (as
// SearchTerms splits text): its abbreviation spelled out (unless
// `spell_out` is false: the "db" of a host name "db-7.west" is a name, not
// the word database), then stemmed; not stemmed when it holds a digit or
// is shorter than three letters.
std::string WordForm(absl::string_view word, bool spell_out = true);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_WORD_FORMS_H_
