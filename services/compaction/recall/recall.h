#ifndef CONVSTATE_SERVICES_COMPACTION_RECALL_RECALL_H_
#define CONVSTATE_SERVICES_COMPACTION_RECALL_RECALL_H_

// Recall: the passages of a conversation's whole history that answer what
// the user asks now, verbatim. Storage finds the candidate items by their
// rare words (Storage::SearchHistory); this ranks the lines of those items
// against the question, BM25 with the conversation's term statistics, and
// keeps the best ones within a token budget. No I/O here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "services/core/types.h"
#include "services/tokenizer/tokens.h"
#include "storage/contract.h"

namespace convstate {

// A question as recall searches it: its words (SearchTerms) without the
// words every question has ("what", "the", "did"), and for each term the
// word of the question it came from (a host and its parts are one word).
struct RecallQuery {
  std::vector<std::string> terms;
  std::vector<int> word_of;
  int words = 0;
  // The question asks for a quantity ("how many", "how long", ...): a line
  // setting a name to a figure is the answer's shape.
  bool asks_quantity = false;
  // ... and that quantity is how long something took ("how long did the
  // refresh take", "how much time did it run"): the line of an output
  // stating the longest duration ("in 0 hours 34 minutes") answers it
  // where the exchange names the subject, though the line holds none of
  // the question's words.
  bool asks_duration = false;
  // ... or a time of day ("what time does it start?"): a line setting a
  // schedule ("schedule: \"20 4 * * *\"") answers it the same way.
  bool asks_time_of_day = false;
  // ... or a day ("what night did we pencil in for the cutover?", "when
  // is it planned for?"): a line naming a weekday, or a day of a month
  // ("Monday 8 March"), answers it the same way.
  bool asks_date = false;
  // ... and the first of several alike ("the first dry run", or "the dry
  // run before we switched to the tuned profile", whose clause naming the
  // later change is not searched): of alike value lines, the earliest
  // item's counts most.
  bool asks_first = false;
  // ... or the last of alike lines in an output ("by the final warning",
  // "at the bottom of that tail"): of alike value lines, the latest item's
  // last counts most (the earliest item's, when it asks for the first as
  // well).
  bool asks_last = false;
  // ... or the later of several alike, after a change the question names
  // ("how long did the settlement job take once Rupert's date fix was
  // in?", whose clause naming the earlier change is not searched): of
  // alike value lines, the latest item's counts most.
  bool asks_later = false;
  // ... or how often something happens ("how often does the sensor
  // re-check?"): a line setting an interval ("poke_interval=840") answers
  // it the same way.
  bool asks_frequency = false;
  // ... or a count or an amount ("how many files", "what did it cost"): a
  // line stating a total ("Total Objects: 1970", a table's TOTAL row)
  // answers it the same way.
  bool asks_total = false;
  // ... or a checksum or a hash ("what checksum did the dry run
  // come back with?"): a line holding a hex digest ("dry-run checksum
  // 30a6359") answers it the same way, and a line naming checksums
  // without one ("checksum: per-batch") does not.
  bool asks_hash = false;
  // ... or a host's full name ("the FQDN of the old box", "full
  // hostname", "which box"): a line holding a dotted host name answers it
  // the same way, unless the host is the one the question names ("what
  // host does the ledger-db alias point to").
  bool asks_host = false;
  // ... or a ticket ("the ticket # for the double charge", "the change
  // record you opened"): a line holding a tracker's key ("MTR-4821",
  // "PLAT-2612", "#2291") answers it where it holds the question's words.
  bool asks_ticket = false;
  // ... or a version ("which version number is this release", "what NCCL
  // build is the image pinned to"): a line holding a release's number
  // ("v2.31.0", "NCCL_VERSION=2.18.6-1") answers it the same way.
  bool asks_version = false;
  // ... or a constant of code ("give me the constant as written"): a line
  // defining an upper-case name ("REVERSE_CHARGE_MIN_CENTS = 1_400_000")
  // answers it where it holds the question's words.
  bool asks_constant = false;
  // The days the question names ("the 2 Dec file", "on March 8th"): a line
  // writing one as a system does ("PRC_20261202_full.csv.gz",
  // "2026-12-02") holds the words that name it. A month named alone
  // ("February's cost") is a day 0: any day of it, and the lines of a
  // record whose first date is in it.
  struct NamedDay {
    int month = 0;
    int day = 0;
    std::string month_term, day_term;  // Their terms, as `terms` holds them.
  };
  std::vector<NamedDay> days;
  // ... or about the conversation's start ("what surname did I introduce
  // myself with?", "the company I named at the start"): the opening user
  // messages answer it (HistorySearch::opening), whatever words they hold.
  bool asks_start = false;
  // For each word: whether a sentence that asks (ends with '?') holds it,
  // or the text asks nothing that way. The words of the sentences around
  // the question ("Teodor wants to line the alert up with it.") and of a
  // contrast naming the thing beside the one asked for ("not the lines
  // table", "ignore the staging copy") count less (and see `contrast`).
  std::vector<bool> asked;
  // For each word: whether only a contrast holds it (the thing beside the
  // one asked for: "vllm" in "the trainer image, not the vLLM serving
  // one"). A passage holding one on its line, or of an output whose call
  // holds one (the staging copy's path), scores less (kContrasted),
  // and the word adds nothing to any passage's score; on a line it counts
  // toward nothing a passage answers, while its item or exchange holding
  // it still says the passage is near what is asked. The contrast runs to
  // its clause's end or to a "but" ("not the lines table but the header
  // table").
  std::vector<bool> contrast;
  // Whether only a contrast holds question word `word` (see `contrast`).
  bool Contrasted(int word) const {
    return word >= 0 && static_cast<size_t>(word) < contrast.size() && contrast[word];
  }
  // For each term: whether it stands in for its word (another word for it:
  // "store" for "shop", StandIns): it counts in full where the history holds
  // none of the word's own terms (the question was asked in other words
  // than the history's), and at kHeldStandIn of its weight where it does.
  std::vector<bool> stand_in;
  // The message opens by saying it is about something else ("Unrelated:",
  // "Off-topic, but"): those words are not searched, and a smaller share
  // of words the history lacks makes it recall nothing.
  bool aside = false;
};

// At most this many terms (the first ones): each costs the search a look-up.
inline constexpr size_t kMaxRecallTerms = 32;

// Candidate items a view's recall searches for and ranks
// (HistorySearch::max_items): whole items (tool outputs of kilobytes each),
// so few, from the best turns. A turn that reads a file and runs the tests
// brings two of them; 16 left the fourth or fifth best turn out when the
// best ones were long (a morning's overview).
inline constexpr int kRecallCandidates = 24;

RecallQuery ParseRecallQuery(absl::string_view text);

// The search of the history `query` ranks from (HistorySearch): its terms,
// and the replies to the user messages found, which may state what their
// question asked for. The caller sets the conversation, how many
// candidates (kRecallCandidates for a view's recall) and what is searched.
HistorySearch SearchFor(const RecallQuery& query);

// Whether `line` is a test runner's progress line ("tests/unit/test_vat.py
// ......s.... [ 41%]"): its figure is how far the run had got, no value a
// question asks for.
bool IsProgressLine(absl::string_view line);

// `line` after the number a file reader puts before each line ("    34\t",
// "34| "), or the path and number a search puts before each match
// ("app/batches.py:14:", as grep -n and rg -n print it), its indentation
// kept; `line` itself when it has none.
absl::string_view AfterLineNumber(absl::string_view line);

// One recalled passage: a line of a stored item (a long line is cut into
// pieces), with where it came from.
struct RecalledPassage {
  int64_t sequence = 0;
  int64_t turn_index = 0;
  Role role = Role::kUser;
  ItemKind kind = ItemKind::kMessage;
  std::string tool_name;
  // The item's first line, when it is short and not the passage itself: it
  // usually says what the item is ("# billing-ledger: migration settings").
  std::string title;
  // For a tool result: its call's arguments, as stored (cut).
  std::string call;
  std::string text;
  // Where the passage starts in the item's content (bytes).
  size_t offset = 0;
  double score = 0;
  // Tokens of `text` alone.
  int64_t tokens = 0;
};

struct RecallLimits {
  // Tokens the rendered section may take, header and provenance included.
  int64_t max_tokens = 0;
  int max_passages = 12;
  // Items the view shows verbatim already: their passages are skipped.
  absl::flat_hash_set<int64_t> shown;
  // The text the view shows besides its items (summaries, the ledger,
  // pinned content): a passage whose every sentence it holds (a question
  // an extractive summary quotes) is not recalled again.
  std::string shown_text;
  // Tokens the chat format adds to the one message the section is.
  int64_t per_message_tokens = 0;
};

// The passages of `hits.found` that answer `query`, best first, within
// `limits`: ranking first picks the exchanges (the items whose turn holds
// the question's words: a tool result through its call and the question of
// its turn), then the lines inside them. A passage must hold at least two
// of the question's words, or one that only a few items hold; or, in an
// item whose exchange answers the question so, hold a value (a number, a
// hash, an identifier: what a line that does not name its subject holds),
// and then it comes with the line either side of it. A line is also named
// by the keys it sits under ("prod:" over "threads: 7"), a table's header
// comes with its first row, and a line of the answer's shape (a duration,
// a time of day, an interval, a total) answers where the item or its
// exchange names the subject. What the user states in a long message is
// weighed against a message's length, not a line's. Every passage scores
// at least a third of the best one: an unrelated question recalls nothing.
// A room too small for a passage beside the header ranks nothing, and the
// picks stop once several in a row do not fit what is left.
std::vector<RecalledPassage> RankPassages(const RecallQuery& query, const HistoryHits& hits,
                                          const Tokenizer& tokenizer, const RecallLimits& limits);

// The section's text: a header, then the passages in the order they were
// said, each under its provenance ("[#12, turn 4, shell result]"); a line
// two passages of an item both show (the key they sit under) once.
std::string RenderRecalled(const std::vector<RecalledPassage>& passages);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_RECALL_RECALL_H_
