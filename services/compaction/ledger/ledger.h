#ifndef CONVSTATE_SERVICES_COMPACTION_LEDGER_LEDGER_H_
#define CONVSTATE_SERVICES_COMPACTION_LEDGER_LEDGER_H_

// The fact ledger: hard facts and the user's standing instructions,
// extracted deterministically from the items a compaction replaces and
// shown verbatim in the view, so that no summary's paraphrase stands
// between the model and them.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "services/compaction/ledger/instructions.h"
#include "services/tokenizer/tokens.h"
#include "services/core/types.h"

namespace convstate {

// True if `text` contains one of `words` (callers pass lowercase text and
// words).
bool ContainsAny(absl::string_view text, std::initializer_list<absl::string_view> words);

// The sentences of `text`, trimmed: split at line breaks and after ". ",
// "? ", "! " and, unless `at_semicolons` is false, "; ", with list markers
// ("- ", "* ", "1. ") removed.
std::vector<std::string> SplitSentences(absl::string_view text, bool at_semicolons = true);

// True if `sentence` holds a hard fact: a token with a digit (ids,
// versions, numbers with units, dates, times), a path or URL, an
// identifier joined by '-', '_' or '.', a command or flag, an acronym, a
// capitalized name inside the sentence, or a decision stated as such.
bool HasHardFact(absl::string_view sentence);

// Lines of tool output that report an error, trimmed, at most `max_lines`
// of them, from anywhere in the output.
std::vector<std::string> ErrorLines(absl::string_view output, size_t max_lines);

struct Extraction {
  // Facts from user and assistant messages (blocks pasted between ```
  // fences count as data: their error lines, and lines unlike the rows
  // around them), and error lines of tool results; deduplicated, in order.
  std::vector<LedgerFact> facts;
  // The user's standing instructions, verbatim.
  std::vector<LedgerFact> constraints;
};

// Extracts the ledger of `items`, counting each rendered line with
// `tokenizer`. `tool_names` names results that omit their tool.
Extraction ExtractLedger(const std::vector<Item>& items,
                         const std::map<std::string, std::string>& tool_names,
                         const Tokenizer& tokenizer);

// The line the view shows for `fact`, e.g. "- U#12: Ticket INC-4821 ...".
std::string FactLine(const LedgerFact& fact);

// Tokens `fact` takes in the ledger: its line and the line break.
int64_t FactTokens(const LedgerFact& fact, const Tokenizer& tokenizer);

// Counts `chunk`'s text, facts and standing instructions again with
// `tokenizer` (a model change, a continuation under another model).
void CountChunk(SummaryChunk& chunk, const Tokenizer& tokenizer, int64_t per_message_tokens);

// A normalized form for deduplication (lowercase, single spaces).
std::string FactKey(absl::string_view text);

// The ids and figures of `text`: its words that hold a digit or are joined
// by '-', '_', '.', '/', ':', '#', '@' or '=', small numbers with the word
// before them, and names (two capitalized words), lowercased.
std::set<std::string> SpecificTokens(absl::string_view text);

// The same tokens as hashes, added to `out`: what the view compares on
// every call, without allocating a string per token.
using TokenHashes = absl::flat_hash_set<uint64_t>;
void AddSpecificTokenHashes(absl::string_view text, TokenHashes& out);

// The same tokens as a list of distinct hashes (what LedgerFact keeps).
std::vector<uint64_t> FactTokenHashes(absl::string_view text);

// A hash of FactKey(text), computed without building it.
uint64_t FactHash(absl::string_view text);

// What the ledger section shows: facts of the active chunks (given in the
// order of what they cover), deduplicated. When they do not all fit in
// `budget` tokens, facts go breadth first: every item's best fact ranks
// before any item's second one, and so on. Within a rank the least valuable
// go first, the oldest among equals: facts whose ids and figures a newer
// fact repeats, then tool lines, then the assistant's, then the user's; a
// decision or a specific id or figure raises a fact's value, and so does
// being the first to mention one. A fact whose ids and figures all stand in
// `live_tokens` (those of the live items) counts as repeated too.
struct LedgerSelection {
  // In conversation order; they point into the chunks given, which must
  // outlive the selection.
  std::vector<const LedgerFact*> shown;
  int omitted = 0;
  // Tokens of the shown facts' lines, without the header.
  int64_t tokens = 0;
};
LedgerSelection SelectLedger(const std::vector<const SummaryChunk*>& chunks, int64_t budget,
                             const TokenHashes& live_tokens = {});

// The standing instructions of the active chunks, deduplicated, in order.
std::vector<LedgerFact> CollectConstraints(const std::vector<const SummaryChunk*>& chunks);

// The share of `span_facts` (the facts of the span `chunk` replaces)
// present verbatim in the chunk's text or among the facts the ledger
// section shows once `chunk` is active beside `others` (the other active
// chunks) with `budget` tokens; 1 when there are none. The facts found in
// neither go to `missing`.
double MeasureRecall(const std::vector<LedgerFact>& span_facts, const SummaryChunk& chunk,
                     const std::vector<const SummaryChunk*>& others, int64_t budget,
                     std::vector<LedgerFact>* missing);

// The texts of the ledger section and of the standing instructions, with
// their headers.
std::string RenderLedger(const std::vector<const LedgerFact*>& facts);
std::string RenderConstraints(const std::vector<LedgerFact>& constraints);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_LEDGER_LEDGER_H_
