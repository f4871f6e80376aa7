#ifndef CONVSTATE_STORAGE_STORAGE_H_
#define CONVSTATE_STORAGE_STORAGE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/core/types.h"
#include "storage/contract.h"

namespace convstate {

// Per-call settings every storage operation honours.
struct CallContext {
  // The operation fails with DEADLINE_EXCEEDED rather than run past this.
  absl::Time deadline = absl::InfiniteFuture();
  // True once the caller has gone away (the RPC was cancelled); unset for
  // calls that cannot be cancelled. Long waits and summarizer calls stop
  // when it turns true. Must stay callable for the whole operation.
  std::function<bool()> cancelled;
  // Who makes the call: the credential's name, for audit rows; empty when
  // the server runs without authentication.
  std::string principal;
};

// True if the caller of `ctx` has cancelled.
inline bool IsCancelled(const CallContext& ctx) { return ctx.cancelled && ctx.cancelled(); }

// CANCELLED if the caller went away, DEADLINE_EXCEEDED if `ctx.deadline` is
// not after `now`, else OK.
inline absl::Status CheckDeadline(const CallContext& ctx, absl::Time now) {
  if (IsCancelled(ctx)) return absl::CancelledError("the caller cancelled the call");
  if (now >= ctx.deadline) {
    return absl::DeadlineExceededError("deadline passed before storage was reached");
  }
  return absl::OkStatus();
}

// CheckDeadline by the real clock.
inline absl::Status CheckDeadline(const CallContext& ctx) { return CheckDeadline(ctx, absl::Now()); }

// How much one page of a list may hold: at most `rows` rows and, after the
// first, rows only while those before them hold fewer than `bytes` bytes
// of text (contents, prompts, summaries, audit details), so that no page
// of large rows is read whole into memory nor outgrows a response.
struct PageLimit {
  int rows = 100;
  int64_t bytes = int64_t{4} << 20;
};

// One page of a list, in its order.
template <typename T>
struct Page {
  std::vector<T> rows;
  // True when rows follow the last one (ask from there for the next page).
  bool more = false;
};

// Where conversations live. Implementations are thread-safe; every method
// is atomic: it either applies fully or not at all.
//
// Errors common to every method: DEADLINE_EXCEEDED when `ctx.deadline`
// passes; UNAVAILABLE when the backend cannot be reached (safe to retry);
// ABORTED when a concurrent change won a race (retry the operation).
class Storage {
 public:
  virtual ~Storage() = default;

  // OK if the backend answers now; UNAVAILABLE (or DEADLINE_EXCEEDED) if
  // not. What the health service reports.
  virtual absl::Status Ping(const CallContext& ctx) = 0;

  // Stores a new conversation at version 0. ALREADY_EXISTS if the tenant
  // already has that id.
  virtual absl::StatusOr<Conversation> CreateConversation(
      const CallContext& ctx, const NewConversation& conversation) = 0;

  // NOT_FOUND if the tenant has no such conversation.
  virtual absl::StatusOr<Conversation> GetConversation(
      const CallContext& ctx, const ConversationKey& key) = 0;

  // How many conversations the tenant holds and the bytes of their items'
  // content.
  virtual absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& ctx,
                                                     const std::string& tenant_id) = 0;

  // The tenant's conversations with ids greater than `after_id`, ordered by
  // id, one page.
  virtual absl::StatusOr<Page<Conversation>> ListConversations(const CallContext& ctx,
                                                               const std::string& tenant_id,
                                                               const std::string& after_id,
                                                               const PageLimit& limit) = 0;

  // A new conversation from another one's items 1..at_sequence and its
  // compaction state then (ForkRequest); its `forked_from` names the source.
  // NOT_FOUND for an unknown source, ALREADY_EXISTS if the fork's id is
  // taken, OUT_OF_RANGE for a sequence the source does not have,
  // FAILED_PRECONDITION if at_sequence separates a tool call of its turn
  // from the call's result.
  virtual absl::StatusOr<Conversation> ForkConversation(const CallContext& ctx,
                                                        const ForkRequest& request) = 0;

  // RewindRequest, in one transaction. NOT_FOUND for an unknown
  // conversation, ALREADY_EXISTS if the abandoned id is taken (or the
  // idempotency key was used otherwise), OUT_OF_RANGE unless to_sequence is
  // below the last sequence, FAILED_PRECONDITION as ForkConversation.
  // Items after to_sequence leave the conversation (their copies stay in
  // the abandoned fork); its version and compaction_version move on; chunks
  // the state at to_sequence does not show are retired.
  virtual absl::StatusOr<RewindResult> RewindConversation(const CallContext& ctx,
                                                          const RewindRequest& request) = 0;

  // The conversations forked from this incarnation of `key` with ids greater
  // than `after_id`, ordered by id, one page. NOT_FOUND if `key` does not
  // exist.
  virtual absl::StatusOr<Page<Conversation>> ListForks(const CallContext& ctx,
                                                       const ConversationKey& key,
                                                       const std::string& after_id,
                                                       const PageLimit& limit) = 0;

  // Removes the conversation and everything under it; returns how many items
  // it had. NOT_FOUND if the tenant has no such conversation.
  virtual absl::StatusOr<int64_t> DeleteConversation(
      const CallContext& ctx, const ConversationKey& key) = 0;

  // Appends `request.items` with the next sequence numbers (gap-free, in
  // order, even under concurrent appends), assigns turn indexes, and bumps
  // the version by one. With an idempotency key seen before: returns the
  // original result with `replayed` set if the fingerprint matches, and
  // ALREADY_EXISTS if it does not. NOT_FOUND for an unknown conversation;
  // ABORTED if `expected_version` is set and differs.
  virtual absl::StatusOr<AppendResult> AppendItems(
      const CallContext& ctx, const AppendRequest& request) = 0;

  // The items of the conversation's whole history that hold some of
  // `search.terms`, and how many items hold each term (see HistorySearch).
  // Reads an index: the cost follows the matches, not the history's
  // length. NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<HistoryHits> SearchHistory(const CallContext& ctx,
                                                    const HistorySearch& search) = 0;

  // Items with sequence greater than `after_sequence`, in order, one page.
  // NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                               int64_t after_sequence,
                                               const PageLimit& limit) = 0;

  // The conversation, its active summary chunks, pinned items behind the
  // latest marker and the live items after it, from one consistent
  // snapshot. NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<ContextSnapshot> LoadContext(
      const CallContext& ctx, const ConversationKey& key) = 0;

  // The context as it changed since `held`, the conversation row of a
  // snapshot the caller keeps (null: none), in one read: the row alone when
  // nothing changed, the row and the appended items when only appends
  // happened, the whole context otherwise (see ContextDelta and DeltaKind).
  // NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& ctx,
                                                        const ConversationKey& key,
                                                        const Conversation* held) = 0;

  // Applies a compaction in one transaction: the new chunk with a marker
  // item appended to the log, superseded chunks marked, summarized_through
  // and prune_boundary moved, the audit events, the version bumped. ABORTED
  // (and nothing written) if the conversation's summarized_through or
  // prune_boundary no longer match the commit's expectations, or a chunk to
  // supersede is not active. The conversation's compaction_version moves,
  // its version does not. INVALID_ARGUMENT if the commit would move a
  // boundary backwards or past the log. NOT_FOUND for an unknown
  // conversation.
  virtual absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                            const CompactionCommit& commit) = 0;

  // Takes the conversation's compaction lease for `duration` if no one
  // holds an unexpired one; nullopt if someone does. Expiry is judged by
  // the backend's clock (the database's for PostgreSQL), so replicas agree.
  // NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& ctx, const ConversationKey& key, const std::string& holder,
      absl::Duration duration) = 0;

  // Gives the lease back early; nothing happens if it is no longer the
  // latest one.
  virtual absl::Status ReleaseCompactionLease(const CallContext& ctx, const ConversationKey& key,
                                              const CompactionLease& lease) = 0;

  // Pins or unpins the item at `sequence`, overriding the flag it was
  // appended with, and bumps the conversation's compaction_version (not its
  // version). Returns the item as it now is. NOT_FOUND for an unknown
  // conversation or item, or a summary marker.
  virtual absl::StatusOr<Item> SetPinned(const CallContext& ctx, const ConversationKey& key,
                                         int64_t sequence, bool pinned) = 0;

  // Erases the content of the items at `request.sequences` (see
  // RedactItems in the API): each becomes `request.tombstone` with the
  // SHA-256 of what it held; every chunk whose span holds one of them, and
  // every chunk after the first such, is emptied and retired (superseded by
  // itself, model kRedactedChunkModel); summarized_through moves back to
  // the last chunk still active; idempotency records covering them lose
  // their fingerprint; compaction_version moves and an `items_redacted`
  // event is written, all at once. NOT_FOUND for an unknown conversation or
  // sequence, INVALID_ARGUMENT for a summary marker; items already redacted
  // are left alone. Conversations continued from this incarnation (and from
  // those, down the lineage, each once) lose their copies in the same
  // transaction; RESOURCE_EXHAUSTED, with nothing erased, if that lineage
  // passes kMaxLineage conversations.
  virtual absl::StatusOr<RedactResult> RedactItems(const CallContext& ctx,
                                                   const RedactRequest& request) = 0;

  // Keeps a compaction proposal of `key` (`body`, the service's encoding,
  // made from the conversation at `compaction_version`) for `ttl` by the
  // backend's clock, with the next proposal id of the conversation, and
  // drops the conversation's expired ones. The body counts in the
  // conversation's stored bytes: RESOURCE_EXHAUSTED if it would take the
  // tenant past `limits`. ABORTED if the conversation's compaction_version
  // has moved since (a compaction or an erasure came between: a proposal
  // made before an erasure may hold what it erased). NOT_FOUND for an
  // unknown conversation. An erasure deletes the conversation's proposals.
  virtual absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& ctx,
                                                      const ConversationKey& key,
                                                      const std::string& body, absl::Duration ttl,
                                                      const TenantLimits& limits,
                                                      int64_t compaction_version) = 0;

  // An unexpired proposal of `key`, applied or not. NOT_FOUND for an
  // unknown conversation, or a proposal it does not have or that expired.
  virtual absl::StatusOr<ProposalRecord> GetProposal(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     int64_t proposal_id) = 0;

  // Idle compaction: `key` is to be compacted at `due` unless a later call
  // moves it (nullopt: not at all). NOT_FOUND for an unknown conversation.
  virtual absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                                  std::optional<absl::Time> due) = 0;

  // Up to `limit` conversations whose idle due time is at or before `now`,
  // oldest due first, each with its due time cleared in the same step: a
  // conversation is claimed by one caller only, across replicas.
  virtual absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& ctx,
                                                                 absl::Time now, int limit) = 0;

  // Reverts the summary chunk `request.chunk_id` (see RevertCompaction in
  // the API and PlanRevert): the chunk is marked reverted and leaves the
  // view, chunks it folded are active again, summarized_through moves back
  // to the last active chunk and the prune boundary to where it was before
  // the chunk's compaction; a compaction running meanwhile loses its lease;
  // compaction_version moves and a `reverted` event is written, all at once.
  virtual absl::StatusOr<RevertResult> RevertCompaction(const CallContext& ctx,
                                                        const RevertRequest& request) = 0;

  // Appends audit events that change no state (a failed or truncating
  // compaction). NOT_FOUND for an unknown conversation.
  // Applies `update` and writes its audit row, moving compaction_version.
  // NOT_FOUND for an unknown conversation.
  virtual absl::StatusOr<Conversation> UpdateConversation(const CallContext& ctx,
                                                         const ConversationKey& key,
                                                         const ConversationUpdate& update) = 0;

  // Stores counts made with another tokenizer and records it as the
  // conversation's count_encoding. The view's content does not change, so
  // neither version moves.
  virtual absl::Status SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                                       const TokenRecount& recount) = 0;

  // What the view of `key` was built from at `version`: the items stored by
  // then, and the state recorded at `compaction_version` (or, when it is
  // negative, the last one recorded at or before `version`), with the
  // conversation's fields as they were then. NOT_FOUND for an unknown
  // conversation; OUT_OF_RANGE for a version it has not reached or a
  // compaction_version it has no record of or had not reached by then.
  virtual absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& ctx,
                                                        const ConversationKey& key,
                                                        int64_t version,
                                                        int64_t compaction_version) = 0;

  // A provider refused a view as too long: raises the conversation's
  // overflow_correction to `correction` (never lowers it), lowers its
  // prompt_limit to `prompt_limit` (> 0; never raises it), moves its
  // compaction_version, and writes `event` to the audit, in one
  // transaction. Returns the conversation as it is after.
  virtual absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             double correction,
                                                             int64_t prompt_limit,
                                                             const CompactionEvent& event) = 0;

  virtual absl::Status RecordCompactionEvents(const CallContext& ctx,
                                              const ConversationKey& key,
                                              const std::vector<CompactionEvent>& events) = 0;

  // Summary chunks with ids greater than `after_chunk_id`, oldest first,
  // one page; superseded ones too if asked.
  virtual absl::StatusOr<Page<SummaryChunk>> ListSummaries(const CallContext& ctx,
                                                           const ConversationKey& key,
                                                           bool include_superseded,
                                                           int64_t after_chunk_id,
                                                           const PageLimit& limit) = 0;

  // The compaction audit trail after `after_event_id`, oldest first, one
  // page.
  virtual absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(
      const CallContext& ctx, const ConversationKey& key, int64_t after_event_id,
      const PageLimit& limit) = 0;
};

// Every summary chunk of `key` (page after page): for tests and tools that
// read small conversations whole.
absl::StatusOr<std::vector<SummaryChunk>> AllSummaries(Storage& storage, const CallContext& ctx,
                                                       const ConversationKey& key,
                                                       bool include_superseded);

// The whole audit trail of `key` (page after page), as AllSummaries.
absl::StatusOr<std::vector<CompactionEvent>> AllCompactionEvents(Storage& storage,
                                                                 const CallContext& ctx,
                                                                 const ConversationKey& key);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_STORAGE_H_
