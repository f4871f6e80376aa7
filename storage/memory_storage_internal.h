#ifndef CONVSTATE_STORAGE_MEMORY_STORAGE_INTERNAL_H_
#define CONVSTATE_STORAGE_MEMORY_STORAGE_INTERNAL_H_

// The Storage NewMemoryStorage makes, internal to the memory_storage
// target. Its methods are defined in the file of their concern, named in
// the class below.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/clock.h"
#include "storage/history_index.h"
#include "storage/storage.h"

namespace convstate::in_memory {

struct IdempotencyRecord {
  std::string fingerprint;
  int64_t first_sequence = 0;
  int64_t last_sequence = 0;
  int64_t version = 0;
};

struct ConversationState {
  Conversation conversation;
  std::string lease_holder;
  absl::Time lease_expires = absl::InfinitePast();
  std::vector<Item> items;  // items[i].sequence == i + 1
  // What it stores, as its tenant's byte limit counts it (TenantUsage).
  int64_t stored_bytes = 0;
  std::vector<SummaryChunk> chunks;
  std::vector<CompactionEvent> events;
  std::map<std::string, IdempotencyRecord> idempotency;
  // GetContextAt: what each compaction_version's views were built from.
  std::vector<ViewState> states;
  // When idle compaction is due; InfiniteFuture: not.
  absl::Time idle_due = absl::InfiniteFuture();
  // Compaction proposals by id, and the last id given.
  std::map<int64_t, ProposalRecord> proposals;
  int64_t last_proposal_id = 0;
  // The incarnation (storage_key) of the conversation this one continues;
  // 0 if none.
  int64_t continued_from_key = 0;
  // SearchHistory's index of `items`, brought up to date by each search;
  // null after a redaction.
  std::shared_ptr<HistoryIndex> index;
};

class MemoryStorage final : public Storage {
 public:
  explicit MemoryStorage(const Clock* clock);

  // Conversations, items, views (memory_storage.cc).

  absl::StatusOr<Conversation> CreateConversation(const CallContext& ctx,
                                                  const NewConversation& nc) override;

  absl::StatusOr<Conversation> GetConversation(const CallContext& ctx,
                                               const ConversationKey& key) override;

  absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& ctx,
                                             const std::string& tenant_id) override;

  absl::StatusOr<Page<Conversation>> ListConversations(const CallContext& ctx,
                                                       const std::string& tenant_id,
                                                       const std::string& after_id,
                                                       const PageLimit& limit) override;

  absl::StatusOr<int64_t> DeleteConversation(const CallContext& ctx,
                                             const ConversationKey& key) override;

  absl::StatusOr<AppendResult> AppendItems(const CallContext& ctx,
                                           const AppendRequest& request) override;

  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& ctx,
                                            const HistorySearch& search) override;

  absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                       int64_t after_sequence, const PageLimit& limit) override;

  absl::StatusOr<ContextSnapshot> LoadContext(const CallContext& ctx,
                                              const ConversationKey& key) override;

  absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& ctx, const ConversationKey& key,
                                                const Conversation* held) override;

  absl::Status Ping(const CallContext& ctx) override;

  absl::StatusOr<Item> SetPinned(const CallContext& ctx, const ConversationKey& key,
                                 int64_t sequence, bool pinned) override;

  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override;

  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& ctx, absl::Time now,
                                                         int limit) override;

  absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& ctx, const ConversationKey& key,
                                                int64_t version,
                                                int64_t compaction_version) override;

  absl::StatusOr<Conversation> UpdateConversation(const CallContext& ctx,
                                                  const ConversationKey& key,
                                                  const ConversationUpdate& u) override;

  absl::Status SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                               const TokenRecount& recount) override;

  absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& ctx,
                                                      const ConversationKey& key, double correction,
                                                      int64_t prompt_limit,
                                                      const CompactionEvent& event) override;

  // Compactions: commits, proposals, reverts, leases, audit rows, summaries
  // (memory_compaction.cc).

  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                    const CompactionCommit& commit) override;

  absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& ctx, const ConversationKey& key,
                                              const std::string& body, absl::Duration ttl,
                                              const TenantLimits& limits,
                                              int64_t compaction_version) override;

  absl::StatusOr<ProposalRecord> GetProposal(const CallContext& ctx, const ConversationKey& key,
                                             int64_t proposal_id) override;

  absl::StatusOr<RevertResult> RevertCompaction(const CallContext& ctx,
                                                const RevertRequest& request) override;

  absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& ctx, const ConversationKey& key, const std::string& holder,
      absl::Duration duration) override;

  absl::Status ReleaseCompactionLease(const CallContext& ctx, const ConversationKey& key,
                                      const CompactionLease& lease) override;

  absl::Status RecordCompactionEvents(const CallContext& ctx, const ConversationKey& key,
                                      const std::vector<CompactionEvent>& events) override;

  absl::StatusOr<Page<SummaryChunk>> ListSummaries(const CallContext& ctx,
                                                   const ConversationKey& key,
                                                   bool include_superseded, int64_t after_chunk_id,
                                                   const PageLimit& limit) override;

  absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             int64_t after_event_id,
                                                             const PageLimit& limit) override;

  // Forks (memory_forks.cc).

  absl::StatusOr<Conversation> ForkConversation(const CallContext& ctx,
                                                const ForkRequest& request) override;

  absl::StatusOr<Page<Conversation>> ListForks(const CallContext& ctx, const ConversationKey& key,
                                               const std::string& after_id,
                                               const PageLimit& limit) override;

  absl::StatusOr<RewindResult> RewindConversation(const CallContext& ctx,
                                                  const RewindRequest& request) override;

  // Erasure (memory_redaction.cc).

  absl::StatusOr<RedactResult> RedactItems(const CallContext& ctx,
                                           const RedactRequest& request) override;

 private:
  // The state and its bookkeeping (memory_storage.cc).

  // AppendItems to `state`, under the lock.
  absl::StatusOr<AppendResult> AppendTo(ConversationState& state, const AppendRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static std::vector<SummaryChunk> Active(const ConversationState& state);

  // Records what views are built from now (at every compaction_version).
  static void RecordState(ConversationState& state);

  TenantUsage UsageOf(const std::string& tenant_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What a chunk, a view state and an audit row store here (PostgreSQL
  // counts the rows it writes).
  static constexpr int64_t kChunkRowBytes = 64;
  static constexpr int64_t kViewStateRowBytes = 64;
  static constexpr int64_t kEventRowBytes = 64;
  static int64_t ChunkBytes(const SummaryChunk& c);

  static void AddEvents(ConversationState& state, const std::vector<CompactionEvent>& events,
                        absl::Time now);

  // Stored times are truncated to microseconds, as PostgreSQL keeps them.
  absl::Time Now() const;

  absl::StatusOr<ConversationState*> Find(const ConversationKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Forks (memory_forks.cc).

  // Where a fork at `at` starts: the version whose last state it takes,
  // that state (one of the source's), and the last chunk id it can show.
  struct ForkPlan {
    int64_t at = 0;
    int64_t version = 0;
    const ViewState* state = nullptr;
    int64_t last_chunk = 0;
  };
  static absl::StatusOr<ForkPlan> PlanFork(const ConversationState& source,
                                           const ConversationKey& key, int64_t at);
  // Makes `state` (the source's data, or a copy) what the plan says: items
  // through `at`, the state's fields and pins, chunks past it retired,
  // later view states gone.
  static void ApplyForkState(ConversationState& state, const ForkPlan& point);
  // The conversations of `tenant` continued from `from_id` (incarnation
  // `from_key`, or by id when none was kept) are continued from `to_id`
  // (`to_key`) instead, which holds every item they carried.
  static void MoveContinuations(std::map<std::string, ConversationState>& tenant,
                                const std::string& from_id, int64_t from_key,
                                const std::string& to_id, int64_t to_key);
  // The fork `request` asks of `source`, not yet stored.
  absl::StatusOr<ConversationState> ForkOf(const ConversationState& source,
                                           const ForkRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Erasure (memory_redaction.cc).

  // The conversations continued from `root_id` (incarnation `root_key`),
  // level by level; RESOURCE_EXHAUSTED past kMaxLineage.
  using Lineage = std::vector<std::vector<std::string>>;
  static absl::StatusOr<Lineage> ContinuedFrom(
      const std::map<std::string, ConversationState>& tenant, const std::string& root_id,
      int64_t root_key);
  // Down `levels` (from request.key): their copies of the chunks `retired`
  // (by conversation) go, and the items carried over from an erased one.
  void EraseLineage(std::map<std::string, ConversationState>& tenant, const Lineage& levels,
                    const RedactRequest& request,
                    std::map<std::string, std::set<int64_t>> retired, RedactResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Erases `seqs` of `state` (tombstones, with digests under `digest_key`),
  // retires every chunk derived from them, and makes their idempotency
  // records forget; returns the chunks retired. The items as they now are
  // go to `items` when given.
  static std::vector<int64_t> EraseItems(ConversationState& state, const std::vector<int64_t>& seqs,
                                         const std::string& digest_key,
                                         const RedactRequest& request, std::vector<Item>* items);

  // Empties and retires the chunks `retire` (superseded by themselves,
  // model kRedactedChunkModel), makes `reactivate` active again, and moves
  // summarized_through back to the last active chunk.
  static void Retire(ConversationState& state, const std::vector<int64_t>& retire,
                     const std::vector<int64_t>& reactivate);

  // A redaction or a revert changed `state`: its views are built anew
  // (compaction version), any compaction running on it loses its lease and
  // cannot commit what it read before, and `event` is written.
  void Erased(ConversationState& state, const CompactionEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  absl::Mutex mu_;
  // tenant id -> conversation id -> state.
  std::map<std::string, std::map<std::string, ConversationState>> tenants_ ABSL_GUARDED_BY(mu_);
  int64_t last_storage_key_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convstate::in_memory

#endif  // CONVSTATE_STORAGE_MEMORY_STORAGE_INTERNAL_H_
