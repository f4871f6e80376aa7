#ifndef CONVSTATE_STORAGE_RULES_H_
#define CONVSTATE_STORAGE_RULES_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/context_delta.h"
#include "storage/contract.h"
#include "services/core/types.h"

namespace convstate {

// Checks `commit` against the conversation as locked for it and its active
// chunks; every backend calls this before writing anything. ABORTED when
// the compare-and-set expectations fail (a concurrent compaction won);
// INVALID_ARGUMENT when the commit itself is malformed.
absl::Status CheckCompaction(const Conversation& conversation,
                             const std::vector<SummaryChunk>& active_chunks,
                             const CompactionCommit& commit);

// Checks an append against the conversation as locked for it: ABORTED
// when expected_version or expected_model says the caller saw another
// conversation than the one stored.
absl::Status CheckAppend(const Conversation& conversation, const AppendRequest& request);

// The append's usage report with the estimate of the prompt it reports on
// filled in (nullopt when it reports none), and the conversation's token
// correction after it.
std::optional<UsageReport> EstimatedUsage(const Conversation& conversation,
                                          const AppendRequest& request);
double CorrectionAfter(const Conversation& conversation,
                       const std::optional<UsageReport>& usage);

// Checks `update` against the conversation as locked for it: ABORTED if
// it was made for another compaction_version than the conversation's (a
// concurrent change; read again and retry).
absl::Status CheckUpdate(const Conversation& conversation, const ConversationUpdate& update);

// The marker item that records a chunk in the log.
ItemData MarkerFor(const SummaryChunk& chunk);

// The items of an append as stored after `last_sequence` and
// `last_turn_index`: sequences one after another, the turn index moved by
// each item that starts a turn, appended at `version`. Creation times are
// left to the backend.
std::vector<Item> NumberAppended(const std::vector<ItemData>& items, int64_t last_sequence,
                                 int64_t last_turn_index, int64_t version);

// What a conversation stores, by the measure its tenant's byte limit
// counts (TenantUsage::stored_bytes): the bytes of its text and a fixed
// amount per row for the rest. (migrations/0015_stored_bytes.sql counts
// the same in SQL; the tables written off the append path are counted by
// the database itself.)
inline constexpr int64_t kConversationRowBytes = 128;
inline constexpr int64_t kItemRowBytes = 64;
inline constexpr int64_t kIdempotencyRowBytes = 64;
inline constexpr int64_t kUsageRowBytes = 64;
// A stored compaction proposal: its body and this per row.
inline constexpr int64_t kProposalRowBytes = 64;
int64_t StoredBytes(const ItemData& item);
int64_t StoredBytes(const std::vector<ItemData>& items);
int64_t StoredBytes(const std::string& system_prompt, const std::string& pinned_instructions,
                    const Metadata& metadata, const ProfileOverrides& overrides);
// What an append stores: its items, its idempotency record, its usage row.
int64_t StoredBytes(const AppendRequest& request);

// The check every backend makes, under the tenant's lock, before it stores
// `adding` more bytes (and `conversations` more conversations) for a tenant
// that holds `usage`: RESOURCE_EXHAUSTED naming the limit that would be
// passed (0: none).
absl::Status CheckTenantLimits(const std::string& tenant_id, const TenantUsage& usage,
                               int64_t adding, int64_t conversations,
                               const TenantLimits& limits);

// The snapshot a view was built from at `version` under `state`: `now`
// (the conversation as it is) with the recorded fields put back, `chunks`
// (the ones the state names) active, and `items` (those stored by then,
// in sequence order) split into live and pinned with the state's pins.
ContextSnapshot SnapshotAt(const Conversation& now, const ViewState& state, int64_t version,
                           std::vector<SummaryChunk> chunks, std::vector<Item> items);

// The audit row of a conversation created from another one's state:
// "continued", with where from and what was carried.
CompactionEvent ContinuedEvent(const NewConversation& nc, int64_t facts);

// RESOURCE_EXHAUSTED, naming the bound, when `adding` bytes would take a
// conversation holding `stored` past request.max_conversation_bytes.
absl::Status CheckConversationBytes(const AppendRequest& request, int64_t stored, int64_t adding);

// Whether a continuation may be created from its source as it is now
// (`redactions`: its count, nullopt when the source incarnation is gone):
// ABORTED when the source was erased from, or deleted, after the new
// conversation's chunks and turns were read from it.
absl::Status CheckHandoffSource(const NewConversation& nc, std::optional<int64_t> redactions);

// The append of a continuation's carried turns (its first items): the same
// idempotency record a later append of them would find.
AppendRequest CarriedAppend(const NewConversation& nc);

// Forks (ForkRequest).

// The last sequence a fork of `source` at `at_sequence` shares (0: the
// source's last item): OUT_OF_RANGE past its last item or below 0.
absl::StatusOr<int64_t> ForkPoint(const Conversation& source, int64_t at_sequence);

// FAILED_PRECONDITION if a tool call at or before `at` has its result after
// it: `turn` holds the items of at's turn (any order; others are ignored).
absl::Status CheckForkSplit(const ConversationKey& source, int64_t at,
                            const std::vector<Item>& turn);

// The version whose last view state a fork at an item starts from: the
// last one before the next append (`next_version`, the version of the next
// item that is not a summary marker; -1 if none: the conversation's
// `current_version`), so that what changed after the item's append and
// before the next one (pins, compactions, a rewind) is in it; the one
// before the item's own append when that append wrote items after it.
int64_t ForkStateVersion(int64_t appended_version, int64_t next_version,
                         int64_t current_version);

// How the chunks stand in a fork at `at` (or in a conversation rewound to
// it), given the source's `chunks` as they are now (id, superseded_by,
// summarizer_model, through_sequence), the state it starts from and the
// last chunk id that state's history holds: each chunk active, superseded
// by a kept chunk, or retired (superseded by itself); a chunk an erasure
// emptied since is retired, and the summarized range then ends at the
// last chunk still active (its items are live again, as the erasure made
// them in the source); a retired chunk that holds text of items after `at`
// is emptied (those items left the conversation; their copy lives on in
// the fork a rewind makes).
struct ForkChunks {
  std::vector<int64_t> ids;
  std::vector<int64_t> superseded_by;
  std::vector<int64_t> emptied;
  int64_t summarized_through = 0;
};
ForkChunks PlanForkChunks(const std::vector<SummaryChunk>& chunks, const ViewState& state,
                          int64_t last_chunk, int64_t at);

// The `forked` audit row of a fork: from where, at which sequence.
CompactionEvent ForkedEvent(const ForkRequest& request, int64_t at);

// What a rewind leaves in its conversation's audit rows where they quoted
// the text of an item that left it.
inline constexpr char kRewoundText[] = "[rewound: in the abandoned conversation]";

// What a rewind's idempotency record holds as its fingerprint.
std::string RewindFingerprint(const RewindRequest& request);

// OUT_OF_RANGE unless `to` is below the conversation's last sequence.
absl::Status CheckRewindPoint(const Conversation& c, int64_t to);

// The `rewound` audit row: to which sequence, where the rest went.
CompactionEvent RewoundEvent(const RewindRequest& request, int64_t items_after);

// A conversation's place among forks: its id and incarnation, the
// incarnation it was forked from (0: none) and the last sequence it shares
// with that one.
struct ForkLink {
  std::string id;
  int64_t key = 0;
  int64_t parent_key = 0;
  int64_t at = 0;
  // The id of the conversation it was forked from (when known).
  std::string parent_id;
};

// Of `children` (the forks of a conversation being deleted), the one that
// shares the most with it (the latest fork point; the first id of those):
// it takes over what the others shared with the deleted one (its items
// too, where forks share them: migrations/0025). Null for none.
const ForkLink* ForkHeir(const std::vector<ForkLink>& children);

// The links of `children` (the forks of `deleted`) once `deleted` is gone,
// so that each still reaches every copy it shares: the heir (ForkHeir)
// becomes a fork of the deleted one's source at its fork point (or a
// conversation of its own); a fork that shared only what the deleted one
// had from its source goes to that source; the others, which shared the
// deleted one's own items, become forks of the heir.
std::vector<ForkLink> RelinkForks(const ForkLink& deleted, std::vector<ForkLink> children);

// An erasure of `sequences` of `start` reaches every conversation of
// `family` that holds a copy of one of those items: its source while the
// item is at or before the fork point, and its forks likewise, transitively.
// Returns each other member reached with the sequences to erase there, in
// the order reached; RESOURCE_EXHAUSTED past kMaxLineage of them.
absl::StatusOr<std::vector<std::pair<ForkLink, std::vector<int64_t>>>> ForkFamilyErasure(
    const std::vector<ForkLink>& family, const ForkLink& start,
    const std::vector<int64_t>& sequences);

// The `items_redacted` audit row of a redaction: who, which, why, and how
// many chunks went with it.
CompactionEvent RedactedEvent(const RedactRequest& request, int64_t chunks_removed);

// The `items_redacted` audit row of a conversation continued from the one
// `request` redacted, whose copies of `chunks_removed` chunks went with it.
CompactionEvent ContinuedErasedEvent(const RedactRequest& request, int64_t chunks_removed);

// What a redacted item keeps of its content: "hmac-sha256:<hex>" under
// `key`, or nothing when the key is empty.
std::string RedactedDigest(const std::string& key, const std::string& content);

// Where a redaction of `sequences` cuts the summaries: the start of the
// innermost chunk (not already emptied) holding the earliest of them that
// any chunk holds. Every chunk ending at or after it is derived from a
// redacted item or comes after one, and goes; nullopt if no chunk holds
// any of them.
std::optional<int64_t> RedactionCut(const std::vector<SummaryChunk>& chunks,
                                    const std::vector<int64_t>& sequences);

// What a redaction does to the summaries of one conversation continued,
// directly or not, from the conversation it erased items of.
struct ContinuedErasure {
  // Chunks to empty and retire: those carried over from a chunk that was
  // retired in the conversation it was carried from, and every chunk that
  // folded one of those in (the fold holds its text and facts).
  std::vector<int64_t> retire;
  // Chunks that only a chunk of `retire` had superseded: active again.
  std::vector<int64_t> reactivate;
};

// The ContinuedErasure of `chunks` (a continued conversation's, all of
// them), given the chunk ids retired so far in each conversation it may
// have carried chunks from (`retired`, by conversation id).
ContinuedErasure EraseContinued(
    const std::vector<SummaryChunk>& chunks,
    const std::map<std::string, std::set<int64_t>>& retired);

// What reverting chunk `chunk_id` of a conversation does, from all its
// chunks: the chunks to make active again (those it folded), and where the
// summaries and the prune boundary then end. Only the newest active chunk
// of the conversation's own compactions can be reverted:
// NOT_FOUND for no such chunk; FAILED_PRECONDITION for a chunk that is
// not active (folded into another, reverted, or emptied by a redaction,
// which is never reverted), one carried over from another conversation, or
// one with a newer active chunk after it (named, to revert first).
struct RevertPlan {
  std::vector<int64_t> reactivate;
  int64_t summarized_through = 0;
  int64_t prune_boundary = 0;
};
absl::StatusOr<RevertPlan> PlanRevert(const Conversation& conversation,
                                      const std::vector<SummaryChunk>& chunks, int64_t chunk_id);

// NOT_FOUND for a proposal `key` does not have (or no longer has).
absl::Status ProposalNotFound(const ConversationKey& key, int64_t proposal_id);

// SaveProposal's ABORTED for a proposal made at compaction_version
// `made_at` of a conversation now at `now`.
absl::Status StaleProposal(const ConversationKey& key, int64_t made_at, int64_t now);

// `detail` (an audit row's JSON) with the text of each fact in its
// `dropped` and `lost_facts` arrays whose sequence is one of `erased`
// replaced by `tombstone`; as it was when there is none.
std::string EraseEventFacts(const std::string& detail, const std::vector<int64_t>& erased,
                            const std::string& tombstone);

// The `reverted` audit row of a revert: who, which chunk, what it covered
// and what became active again.
CompactionEvent RevertedEvent(const RevertRequest& request, const SummaryChunk& chunk,
                              const RevertPlan& plan);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_RULES_H_
