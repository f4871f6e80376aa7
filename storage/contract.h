#ifndef CONVSTATE_STORAGE_CONTRACT_H_
#define CONVSTATE_STORAGE_CONTRACT_H_

// What the Storage interface takes and returns: the requests and results of
// its calls, the snapshot a view is built from and how a held one catches
// up. Plain values over the domain model of services/core.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/core/types.h"

namespace convstate {

// The most conversations a redaction follows down a lineage of
// continuations (the erased conversation's own included).
inline constexpr size_t kMaxLineage = 10000;

struct NewConversation {
  ConversationKey key;
  std::string model;
  std::string system_prompt;
  std::string pinned_instructions;
  Metadata metadata;
  ProfileOverrides overrides;
  int64_t system_prompt_tokens = 0;
  int64_t pinned_instructions_tokens = 0;
  // Continuing another conversation of the tenant: its id, its incarnation
  // (Conversation::storage_key; what a redaction of it follows), and the
  // chunks carried over (ids are assigned on insert).
  std::string continued_from;
  int64_t continued_from_key = 0;
  std::vector<SummaryChunk> carried_chunks;
  // The source's turns carried over (token counts set), appended as the
  // new conversation's first items in the same transaction, and the
  // source's `redactions` count when they and the chunks were read: the
  // create is ABORTED if the source was erased from (or deleted) since.
  std::vector<ItemData> carried_items;
  int64_t continued_from_redactions = 0;
  // The tokenizer of every count above.
  std::string count_encoding;
  // The tenant's limits (0: none): RESOURCE_EXHAUSTED if this conversation
  // would pass max_conversations or its bytes max_stored_bytes, checked and
  // counted at once.
  TenantLimits tenant_limits;
};

// ForkConversation: a new conversation (`fork`) holding the source's items
// 1..at_sequence and the compaction state the source had when at_sequence
// was its last item (the view state recorded then: chunks active, prompts,
// model, pins, prune boundary, corrections), with the source's compaction
// policy as it is. If at_sequence is not the last item of the append that
// wrote it, the state is the one before that append.
struct ForkRequest {
  ConversationKey source;
  ConversationKey fork;
  // 0: the source's last item (a conversation without items forks empty).
  int64_t at_sequence = 0;
  // Replaces the source's metadata when set.
  std::optional<Metadata> metadata;
  // Checked and counted as a create plus the bytes copied.
  TenantLimits tenant_limits;
};

// RewindConversation: `key` continues from its item `to_sequence` with the
// compaction state a fork there would start from; what came after lives on
// in `abandoned`, a fork of the conversation as it was (every item, its
// state then) that shares items 1..to_sequence with it. Forks of `key` made
// past to_sequence are forks of `abandoned` afterwards (they share those
// items with it, not with what `key` appends next).
struct RewindRequest {
  ConversationKey key;
  int64_t to_sequence = 0;
  ConversationKey abandoned;
  // With a key: a rewind sent again answers as the first did (`replayed`);
  // the key used by another request is ALREADY_EXISTS.
  std::string idempotency_key;
  TenantLimits tenant_limits;
};

struct RewindResult {
  Conversation conversation;
  Conversation abandoned;
  bool replayed = false;
};

// What a view was built from after a change that was not an append
// (GetContextAt): recorded at every compaction_version.
struct ViewState {
  int64_t compaction_version = 0;
  // The conversation's version when it was recorded.
  int64_t version = 0;
  std::string model;
  std::string system_prompt;
  std::string pinned_instructions;
  ProfileOverrides overrides;
  int64_t summarized_through = 0;
  int64_t prune_boundary = 0;
  double token_correction = 1.0;
  double overflow_correction = 1.0;
  int64_t prompt_limit = 0;
  std::vector<int64_t> chunk_ids;
  // Pins set after the append, by sequence.
  std::vector<std::pair<int64_t, bool>> pins;
};

// UpdateConversation: each set field replaces the stored one.
struct ConversationUpdate {
  // The update applies only if the conversation is still at this
  // compaction_version (ABORTED otherwise): the counts below were made for
  // the conversation as read then. Negative: whatever it is.
  int64_t expected_compaction_version = -1;
  std::optional<std::string> model;
  std::optional<std::string> system_prompt;
  std::optional<std::string> pinned_instructions;
  std::optional<ProfileOverrides> overrides;
  // Counts of the texts as they are after the update.
  int64_t system_prompt_tokens = 0;
  int64_t pinned_instructions_tokens = 0;
  // The tokenizer the stored counts are in after the update.
  std::string count_encoding;
  // A new model: what an earlier provider refused says nothing about it
  // (overflow_correction back to 1, prompt_limit to none).
  bool reset_overflow = false;
  CompactionEvent event;
};

// Counts made again with another tokenizer: of the items and chunks given
// (chunk counts in token_count and in their facts' and constraints').
struct TokenRecount {
  std::string count_encoding;
  std::vector<std::pair<int64_t, int64_t>> items;  // sequence, count
  std::vector<SummaryChunk> chunks;
};

// Token usage a provider reported for the call that produced appended items,
// with convstate's own (uncorrected) estimate of that call's prompt.
struct UsageReport {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_input_tokens = 0;
  int64_t reasoning_tokens = 0;
  int64_t estimated_input_tokens = 0;
  // Whether the report may move the conversation's correction factor (only
  // for approximate tokenizers).
  bool correct = false;
};

// The next correction factor after a provider counted `reported` tokens
// where convstate estimated `estimated`: an exponential moving average of
// the ratio, ignoring reports too small or too far off to be trusted.
double UpdateCorrection(double current, int64_t reported, int64_t estimated);

struct AppendRequest {
  ConversationKey key;
  // Stored in this order; at least one.
  std::vector<ItemData> items;
  // Empty for no idempotency.
  std::string idempotency_key;
  // Fingerprint of the request, compared when the key was seen before.
  std::string request_fingerprint;
  std::optional<int64_t> expected_version;
  // Token counts must be set on `items`; storage fills in the usage's
  // estimated_input_tokens from the conversation as locked.
  std::optional<UsageReport> usage;
  // If not empty, the append is ABORTED unless the conversation is bound to
  // this model: the items' token counts were computed with its tokenizer,
  // outside the conversation's lock.
  std::string expected_model;
  // The tenant's limits (0: none): RESOURCE_EXHAUSTED if the append would
  // take the tenant's stored bytes past max_stored_bytes, checked and
  // counted at once, so that parallel appends cannot overshoot.
  TenantLimits tenant_limits;
  // RESOURCE_EXHAUSTED if the append would take the conversation's stored
  // bytes (its items' content and metadata, prompts, chunks, proposals)
  // past this; 0: no bound. What bounds every read of the conversation's
  // items, with compaction disabled too.
  int64_t max_conversation_bytes = 0;
};

// The prompt of the call that produced `items`, as convstate estimates it
// (uncorrected): the conversation as stored so far, plus the items of this
// append that came before the assistant's output (typically the user's
// message). What a provider's reported usage is compared with.
int64_t EstimatedPrompt(const Conversation& conversation, const std::vector<ItemData>& items);

struct AppendResult {
  std::vector<Item> items;
  int64_t version = 0;
  // True when the key had been used and these are the original items.
  bool replayed = false;
};


// A granted compaction lease.
struct CompactionLease {
  std::string holder;
  // Larger than every token granted before for this incarnation of the
  // conversation.
  int64_t token = 0;
  // The incarnation (Conversation::storage_key) it was granted on: a
  // conversation deleted and created again under the same id starts its
  // tokens afresh, so a token alone does not tell the two apart.
  int64_t incarnation = 0;
  absl::Time expires;
};

// The result of a compaction, applied atomically if the conversation is
// still in the state the compaction started from.
struct CompactionCommit {
  ConversationKey key;
  // Compare-and-set: the commit applies only if these still hold.
  int64_t expected_summarized_through = 0;
  int64_t expected_prune_boundary = 0;
  // And, when not negative, that the conversation is still at this
  // compaction_version: nothing else (a pin, a revert, a redaction, a model
  // change) happened since the commit was made.
  int64_t expected_compaction_version = -1;
  // At least expected_prune_boundary: the boundary never moves back.
  int64_t new_prune_boundary = 0;
  // A new chunk to store (its chunk_id is assigned by storage). With
  // `supersedes` empty it summarizes (expected_summarized_through,
  // chunk.through_sequence]; otherwise it is a fold that replaces those
  // chunks.
  std::optional<SummaryChunk> chunk;
  std::vector<int64_t> supersedes;
  // Items to pin (sorted): those a keep rule holds that this commit
  // summarizes or prunes past, so that they stay verbatim.
  std::vector<int64_t> pins;
  std::vector<CompactionEvent> events;
  // If set, the commit applies only while this lease is the latest and
  // unexpired of the same incarnation of the conversation (fencing: a
  // holder that lost it, or held it on a conversation since deleted and
  // created again, cannot commit).
  std::optional<CompactionLease> lease;
  // ApplyCompaction: the proposal this commit applies (0: none), marked
  // applied in the same transaction with the chunk written and
  // `proposal_answer` (what a retry of the apply is answered); the commit
  // is ABORTED if it was applied already.
  int64_t proposal_id = 0;
  std::string proposal_answer;
};

// A compaction proposal (Compact with dry_run) as storage keeps it: the
// service's own encoding of it, opaque here, until it expires.
struct ProposalRecord {
  // Per conversation, 1, 2, 3, ...; assigned by storage.
  int64_t proposal_id = 0;
  absl::Time expire_time;
  std::string body;
  // Once applied: the chunk written, the conversation's compaction_version
  // after it, and the answer the apply gave. 0 and empty before.
  int64_t applied_chunk_id = 0;
  int64_t applied_compaction_version = 0;
  std::string applied_answer;
};

// An erasure (RedactItems) as storage carries it out.
struct RedactRequest {
  ConversationKey key;
  // Sorted, distinct, positive.
  std::vector<int64_t> sequences;
  // What the items' content becomes, and its token count.
  std::string tombstone;
  int64_t tombstone_tokens = 0;
  // The audit row's "by" and "reason".
  std::string actor;
  std::string reason;
  // The key of the digest kept of what each item held (HMAC-SHA-256); empty
  // keeps none.
  std::string digest_key;
};

struct RedactResult {
  // The items as they now are, in sequence order.
  std::vector<Item> items;
  int64_t chunks_removed = 0;
  int64_t compaction_version = 0;
  // Summary chunks copied into conversations continued from this one (and
  // chunks derived from those) that were emptied and retired with it.
  int64_t continued_chunks_removed = 0;
};

// RevertCompaction as storage carries it out.
struct RevertRequest {
  ConversationKey key;
  int64_t chunk_id = 0;
  // The audit row's "by".
  std::string actor;
};

struct RevertResult {
  // The chunk as it now is (reverted).
  SummaryChunk chunk;
  // Chunks a reverted fold had merged, active again.
  std::vector<int64_t> reactivated;
  int64_t compaction_version = 0;
  int64_t summarized_through = 0;
  int64_t prune_boundary = 0;
};

// The name summary chunks emptied by a redaction carry as their model.
inline constexpr char kRedactedChunkModel[] = "redacted";

struct CompactionResult {
  // The conversation's version (unchanged by compactions) and its
  // compaction_version after this one.
  int64_t version = 0;
  int64_t compaction_version = 0;
  // 0 when no chunk was written.
  int64_t chunk_id = 0;
  // Sequence of the marker item written with the chunk; 0 when none.
  int64_t marker_sequence = 0;
};

// What BuildContext needs, read consistently in one snapshot.
struct ContextSnapshot {
  Conversation conversation;
  // Chunks not superseded, oldest first.
  std::vector<SummaryChunk> active_chunks;
  // Pinned items at or before the marker (they survive summarization).
  std::vector<Item> pinned_items;
  // Items after the latest marker, in sequence order.
  std::vector<Item> live_items;
};

// What changed in a conversation's context since a snapshot a caller
// already holds (Storage::LoadContextSince).
struct ContextDelta {
  enum class Kind {
    // Nothing a view shows: `snapshot` is empty; the held one is current.
    kUnchanged,
    // Only appends: `snapshot.conversation` is the row as it is and
    // `snapshot.live_items` holds the items appended since, in order.
    kAppended,
    // Anything else (a compaction, a pin, a model change, a recount, another
    // conversation under the same id, or no snapshot held): `snapshot` is
    // the whole context, as LoadContext returns it.
    kReloaded,
  };
  Kind kind = Kind::kReloaded;
  ContextSnapshot snapshot;
};

// A search of a conversation's whole history (every stored item, those
// compacted away included; never a redacted one or a summary marker) for
// the items that hold some of `terms` (words as SearchTerms splits them),
// by exchange: a turn (a user message and what follows it up to the next
// one) is found by the words of any of its items, so that a tool result is
// found through its call and the question that led to it, and a reply
// through the question it answers.
struct HistorySearch {
  ConversationKey key;
  std::vector<std::string> terms;
  // Terms held by more items than this are counted but not searched for:
  // they would bring back most of the conversation.
  // 0: a fifth of the items, at least 20 and at most 400 (a word in 400
  // items weighs little beside a rare one, and counting further costs).
  int64_t max_document_frequency = 0;
  // At most this many candidates: the items of the turns whose items hold
  // the most of the rarest terms (each term counted once per turn), best
  // turn first; within a turn, the items that hold the most first, then
  // its tool results that hold none.
  int max_items = 40;
  // Only the items a compaction took out of the view (at or before the
  // conversation's summarized_through or prune boundary): recall, whose
  // view shows the rest verbatim already.
  bool compacted_only = false;
  // Terms of `terms` already known to be held by more items than the cap
  // (a replica remembers them): not counted again (their count is taken as
  // the cap plus one), not searched by, but where the best turns' items
  // hold them they still add to those turns' scores.
  std::vector<std::string> known_common;
  // Besides the candidates: the assistant's reply to each user message
  // found (the first assistant message after it in its turn, holding no
  // term), at most kMaxReplies of them, best turn first. A fact stated in a
  // reply ("I would propose Monday 8 March") is found by the question that
  // led to it.
  bool replies = false;
  // Besides the candidates: the conversation's first kOpeningMessages user
  // messages (not erased, within what is searched and its first
  // kExchangeReach items), for a question about
  // its start ("what surname did I introduce myself with?"), whatever
  // words they hold (HistoryHits::opening).
  bool opening = false;
  // For each of `terms` (where given; a term beyond them is a word of its
  // own): the question word it comes from, and whether it stands in for
  // that word (another word for it: "delay" for "wait"). A turn counts a
  // word once: the larger of its own terms' weights added and its best
  // stand-in's weight, and kLesserReading of the smaller. A turn holding
  // "wait" and four words for it is not five words nearer the question.
  std::vector<int> word_of;
  std::vector<bool> stand_in;
};

// What the lesser of a word's two readings in a turn (its own terms, its
// stand-ins) adds to the turn's score (HistorySearch::word_of).
inline constexpr double kLesserReading = 0.4;

inline constexpr int kMaxReplies = 8;
inline constexpr int kOpeningMessages = 2;

// An item's text split as recall ranks it (services/compaction/recall):
// its pieces (TextLines, a long line cut by LinePieces; blank lines have
// none), each with the terms SearchTerms finds in it. A replica's copy of
// the history (storage/history_index.h) splits an item once, when the copy
// is made or brought up to date off the request path (or else the first
// time it answers a search with it), and keeps the split: ranking it reads
// these rather than splitting its text again.
struct ItemPieces {
  struct Piece {
    uint32_t line = 0;    // Its line's index.
    uint32_t offset = 0;  // Where it starts in its line, bytes.
    uint32_t size = 0;
    uint32_t from = 0;    // Its terms: terms[ids[from]] ... terms[ids[to - 1]].
    uint32_t to = 0;
    // Whether one of its terms is a value (IsValueTerm), and the sum of
    // their lengths (TermLength), worked out once.
    bool value = false;
    double length = 0;
  };
  // The item's terms: with `whole_text`, those of SearchTerms(text) first,
  // in its order (`whole` of them; 0 without), then any only a piece holds
  // (a word a long line's cut split in two).
  std::vector<std::string> terms;
  size_t whole = 0;
  std::vector<Piece> pieces;
  std::vector<uint32_t> ids;
  // The ids of `terms` in their byte order: a question's few terms are
  // looked up (IdOf) rather than each of the item's many.
  std::vector<uint32_t> sorted;
  // What it holds, roughly, in bytes.
  size_t bytes = 0;

  // The id of `term` in `terms`, or -1 when the item does not hold it.
  int64_t IdOf(absl::string_view term) const;
};

// Whether a term is a value: a word with a digit (an id, a figure, a hash,
// a version) of three characters or more, or a compound (a host, a path, a
// key=value pair's key). A line holds a value when one of its terms is one.
bool IsValueTerm(absl::string_view t);
// How long a term makes a line for ranking: a figure counts half a word (a
// test's failed comparison of two lists of numbers is one statement, not a
// long line).
double TermLength(absl::string_view t);

// Splits `text` (an item's content) into its ItemPieces; `whole_text`: the
// terms of the whole text first (what a message's talk is ranked by; an
// output's are not read, and splitting the whole text too doubled the work).
ItemPieces SplitIntoPieces(absl::string_view text, bool whole_text);

// The lines of `text` (split at '\n'), each with where it starts.
std::vector<std::pair<size_t, absl::string_view>> TextLines(absl::string_view text);

// Lines longer than this are cut into pieces of about this size: a passage
// recall shows is a line or a piece of one.
inline constexpr size_t kMaxPassageBytes = 400;

// The pieces of `line` at most about kMaxPassageBytes long, each with where
// it starts, cut after a sentence or at a space where there is one.
std::vector<std::pair<size_t, absl::string_view>> LinePieces(absl::string_view line);

struct HistoryHits {
  // The items the conversation holds (its item_count).
  int64_t items = 0;
  // For each term: how many of those items hold it.
  std::map<std::string, int64_t> document_frequency;
  // The candidates, best first.
  std::vector<Item> found;
  // For each candidate (by sequence): the searched terms its turn's items
  // hold, its own included.
  std::map<int64_t, std::vector<std::string>> exchange_terms;
  // For each candidate tool result: the content of its call (the tool's
  // arguments), its first kMaxCallChars characters.
  std::map<int64_t, std::string> calls;
  // For each candidate (by sequence), where the search keeps them: its
  // text's pieces (a replica's copy keeps them; PostgreSQL does not, and
  // the ranking splits the text itself).
  std::map<int64_t, std::shared_ptr<const ItemPieces>> pieces;
  // The opening messages among `found` (HistorySearch::opening), by
  // sequence, first first.
  std::vector<int64_t> opening;
};

// The last sequence `search` covers in `conversation`: what a compaction
// took out of the view (summarized, or pruned) when compacted_only, else
// the whole history.
int64_t SearchedThrough(const HistorySearch& search, const Conversation& conversation);

// How much of a tool call's content HistoryHits::calls holds, in
// characters (code points).
inline constexpr size_t kMaxCallChars = 200;
// How far from a turn's matching items the search looks for the rest of
// the turn's items (sequences either side).
inline constexpr int64_t kExchangeReach = 64;

// What a conversation's overrides hold in text (its compaction policy's
// instructions and keep rules): counted in its stored bytes and in a
// list page's byte budget, as its prompts are.
int64_t OverridesBytes(const ProfileOverrides& overrides);

// The words a text is searched by: lowercase runs of letters and digits,
// each in its one form (services/common/word_forms.h: abbreviations spelled
// out, Snowball English stems, values as written), with words joined by
// '-', '.', '/', ':', '_' or '@' (hosts, paths, ids) kept whole, as
// written, beside their parts (stemmed, and also spelled out: the "db" of
// "db-7" may be a name, that of "pricing-db" is a database), and a
// camel-cased word ("maxReplicas", "CronJob") likewise kept whole beside its
// parts, each once, in order. A test runner's marks are the words they
// stand for: a failed test's cross ("✕") and jest's "● Suite › test"
// title of a failure "fail", a tick ("✓") "pass" (items stored before
// these were read keep the words they were stored with; their lines, split
// when searched, hold them). What is stored and what is asked go through
// the same split: both backends and the ranking.
std::vector<std::string> SearchTerms(absl::string_view text);

// Lowercase pieces of text of which at least one occurs in the ASCII
// lowercase of any text whose SearchTerms hold `term`: the term itself when
// it is kept as written (a compound, a value), else the part of it a stem
// keeps of its word as written (without the "e", "i" or "l" a stem may
// write at its end: "possibility" is "possibl", found by "possib"), and
// each abbreviation spelled out as it ("db" for "databas"). A text holding none of them cannot hold the term, and need
// not be split to know it.
std::vector<std::string> SurfaceProbes(absl::string_view term);

// How much a search term weighs in a conversation of `items` items of which
// `document_frequency` hold it (BM25's inverse document frequency): rare
// words (hosts, ids, names) weigh more than common ones.
double TermWeight(int64_t items, int64_t document_frequency);

// The most items a search term may be held by and still be searched for.
int64_t MaxDocumentFrequency(const HistorySearch& search, int64_t items);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_CONTRACT_H_
