#ifndef CONVSTATE_STORAGE_POSTGRES_STORAGE_INTERNAL_H_
#define CONVSTATE_STORAGE_POSTGRES_STORAGE_INTERNAL_H_

// The Storage NewPostgresStorage opens, internal to the postgres_storage
// target. Its methods are defined in the file of their concern, named in
// the class below.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "services/common/thread_pool.h"
#include "services/common/trace.h"
#include "storage/cancel_watchdog.h"
#include "storage/distribution_key.h"
#include "storage/pg_util.h"
#include "storage/postgres_connection_pool.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_statements.h"
#include "storage/postgres_storage.h"
#include "storage/storage.h"

namespace convstate::pg {

// What a transaction does, for its span: db.operation.name and a
// low-cardinality db.query.summary ("{operation} {table}").
struct DbOperation {
  const char* name;
  const char* summary;
};

const DbOperation& DbOperationOf(absl::string_view operation);

class PostgresStorage final : public Storage {
 public:
  explicit PostgresStorage(const PostgresOptions& options);

  ~PostgresStorage() override;

  absl::Status Ping();
  // With copying forks (PostgresOptions::shared_forks false), FAILED_PRECONDITION
  // when forks in the database share items: this replica would read none
  // of what they share, and its rewinds and deletes would not hand it on.
  absl::Status CheckForkLayout();

  absl::Status Ping(const CallContext& ctx) override;

  // Conversations (postgres_conversations.cc).

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

  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override;

  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& ctx, absl::Time now,
                                                         int limit) override;

  absl::StatusOr<Conversation> UpdateConversation(const CallContext& ctx,
                                                  const ConversationKey& key,
                                                  const ConversationUpdate& u) override;

  absl::Status SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                               const TokenRecount& recount) override;

  absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& ctx,
                                                      const ConversationKey& key, double correction,
                                                      int64_t prompt_limit,
                                                      const CompactionEvent& event) override;

  // Items: appends, pages, pins (postgres_items.cc).

  absl::StatusOr<AppendResult> AppendItems(const CallContext& ctx,
                                           const AppendRequest& request) override;

  absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                       int64_t after_sequence, const PageLimit& limit) override;

  absl::StatusOr<Item> SetPinned(const CallContext& ctx, const ConversationKey& key,
                                 int64_t sequence, bool pinned) override;

  // Views (postgres_context.cc).

  absl::StatusOr<ContextSnapshot> LoadContext(const CallContext& ctx,
                                              const ConversationKey& key) override;

  // One statement, so one round trip and one consistent snapshot: the
  // conversation row and the items appended since `held` when there is a
  // held snapshot (what a warm call needs), everything otherwise; and a
  // second one with everything when the row says more than appends
  // happened. No transaction is opened around them; the call's deadline
  // bounds them as it bounds everything Run does.
  absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& ctx, const ConversationKey& key,
                                                const Conversation* held) override;

  absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& ctx, const ConversationKey& key,
                                                int64_t version,
                                                int64_t compaction_version) override;

  // Compactions: commits, leases, audit rows, summaries, proposals,
  // reverts (postgres_compaction.cc).

  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                    const CompactionCommit& commit) override;

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

  absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& ctx, const ConversationKey& key,
                                              const std::string& body, absl::Duration ttl,
                                              const TenantLimits& limits,
                                              int64_t compaction_version) override;

  absl::StatusOr<ProposalRecord> GetProposal(const CallContext& ctx, const ConversationKey& key,
                                             int64_t proposal_id) override;

  absl::StatusOr<RevertResult> RevertCompaction(const CallContext& ctx,
                                                const RevertRequest& request) override;

  absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             int64_t after_event_id,
                                                             const PageLimit& limit) override;

  // History search and the word index (postgres_search.cc).

  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& ctx,
                                            const HistorySearch& search) override;
  // HistorySearch::replies: the replies to the user messages `hits` found.
  void AddReplies(pqxx::transaction_base& tx, const HistorySearch& search, HistoryHits& hits);
  // HistorySearch::opening: the conversation's first user messages.
  void AddOpening(pqxx::transaction_base& tx, const HistorySearch& search, HistoryHits& hits);

  // Forks (postgres_forks.cc).

  absl::StatusOr<Conversation> ForkConversation(const CallContext& ctx,
                                                const ForkRequest& request) override;

  absl::StatusOr<Page<Conversation>> ListForks(const CallContext& ctx, const ConversationKey& key,
                                               const std::string& after_id,
                                               const PageLimit& limit) override;

  absl::StatusOr<RewindResult> RewindConversation(const CallContext& ctx,
                                                  const RewindRequest& request) override;

  // Erasure (postgres_redaction.cc).

  absl::StatusOr<RedactResult> RedactItems(const CallContext& ctx,
                                           const RedactRequest& request) override;

 private:
  // Running statements (postgres_storage.cc, and the templates below the
  // class).

  // Runs the statement `name`: prepared on the connection, or, behind a
  // pooler, sent with its text as an unnamed statement (a pooler in
  // transaction mode hands each transaction any server connection, where a
  // statement prepared on another does not exist).
  template <typename... Args>
  pqxx::result Exec(pqxx::transaction_base& tx, const char* name, Args&&... args);

  // Exec of a statement about one conversation (Named): $1 its tenant, $2
  // its id, then `args`, and last its distribution key.
  template <typename... Args>
  pqxx::result ExecNamed(pqxx::transaction_base& tx, const char* name, const ConversationKey& key,
                         Args&&... args);

  // Exec of a statement that yields exactly one row.
  template <typename... Args>
  pqxx::row Exec1(pqxx::transaction_base& tx, const char* name, Args&&... args);

  static bool Limited(const TenantLimits& limits);

  // Locks the tenant's usage row until the transaction ends and returns
  // what it holds, counted again from the conversations when the row is new
  // or a minute old (which takes in what compactions added meanwhile).
  absl::StatusOr<TenantUsage> LockTenant(pqxx::transaction_base& tx, const std::string& tenant_id);

  // The conversation's internal key; NOT_FOUND if the tenant has no such
  // conversation.
  absl::StatusOr<int64_t> ConvKeyOf(pqxx::transaction_base& tx, const ConversationKey& key);

  void InsertEvents(pqxx::transaction_base& tx, int64_t conv_key,
                    const std::vector<CompactionEvent>& events);

  // Runs `fn` in a transaction of type `Tx` (pqxx::nontransaction for a
  // statement on its own) on a pooled connection, bounded by the call's
  // deadline inside the database (CancelWatchdog), and maps exceptions to
  // statuses. A connection found broken before anything was committed is
  // replaced and the call tried once more: that is what lets the storage
  // ride through a database restart. A write sent as a statement on its
  // own (`sent_alone`) commits as it runs, so a connection that breaks
  // under it leaves it in doubt: it is not sent again, and the caller is
  // told to send it again with its idempotency key. (Connections the
  // server closed while they were idle are not used: ConnectionPool.)
  //
  // Each transaction is a client span (child of the calling thread's span)
  // named by its query summary; no statement text or value goes in it.
  template <typename T, typename Tx = pqxx::work, typename Fn>
  absl::StatusOr<T> Run(const CallContext& ctx, absl::string_view operation, Fn fn,
                        bool sent_alone = false);

  // Items: appends, pages, pins (postgres_items.cc).

  // AppendItems in `tx`, uncommitted.
  absl::StatusOr<AppendResult> AppendIn(pqxx::transaction_base& tx, const AppendRequest& request);

  // AppendItems in one round trip (the append_items statement); nullopt
  // when the statement wrote nothing.
  absl::StatusOr<std::optional<AppendResult>> AppendInOneStatement(const CallContext& ctx,
                                                                   const AppendRequest& request);

  // Views (postgres_context.cc).

  // The rows of load_appended as a delta from `held`; kReloaded with nothing
  // read when more than appends happened.
  static absl::StatusOr<ContextDelta> ParseAppended(const pqxx::result& r,
                                                    const ConversationKey& key,
                                                    const Conversation& held);

  // The rows of load_context: the whole context.
  static absl::StatusOr<ContextDelta> ParseContext(const pqxx::result& r,
                                                   const ConversationKey& key);

  // Compactions: commits, leases, audit rows, summaries, proposals,
  // reverts (postgres_compaction.cc).

  // CommitCompaction with the conversation's row locked for as short a
  // time as it can be. Unless `locked`, the conversation and the next chunk
  // id (and for a fold the active chunks) are read without a lock, and one
  // statement (commit_at_once) applies everything, the view state with it,
  // only if nothing but appends changed the conversation meanwhile; a
  // proposal is marked applied after it. In `tx`, a transaction or, with
  // no proposal, each statement on its own. Appends, and the calls asking
  // for a compaction lease, wait for that row. nullopt, with nothing
  // written: something else changed it (or the checks failed on what was
  // read), and the commit is made again with the row locked from the read
  // on, where the checks say what changed and the statement cannot miss.
  absl::StatusOr<std::optional<CompactionResult>> CommitAsRead(pqxx::transaction_base& tx,
                                                               const CompactionCommit& commit,
                                                               bool locked, int64_t& conv_key,
                                                               int64_t& out_of_view);

  // Forks and rewinds (postgres_forks.cc).

  // Where a fork at `at` of `source` (its row, held) starts: the version
  // whose last view state it takes, that state (with the source's
  // compaction policy as it is now), and the last chunk id it can show.
  // FAILED_PRECONDITION where it cannot start.
  struct ForkPlan {
    int64_t at = 0;
    int64_t version = 0;
    ViewState state;
    int64_t last_chunk = 0;
  };
  absl::StatusOr<ForkPlan> PlanFork(pqxx::transaction_base& tx, const ConversationRow& source,
                                    int64_t at);
  // The fork `request` asks of `source` (its row, held), as `plan` says, in
  // `tx`; with `usage`, checked against and counted in the tenant's limits.
  absl::StatusOr<ConversationRow> ForkIn(pqxx::transaction_base& tx, const ConversationRow& source,
                                         const ForkRequest& request, const ForkPlan& plan,
                                         const std::optional<TenantUsage>& usage);
  // The conversation of `row` (locked) as it stood at request.to_sequence
  // (`back`), in `tx`: its later items handed to the abandoned fork (its
  // key `abandoned`), their derived rows and its later view states gone,
  // its chunks standing as there; returns its version.
  int64_t RewindIn(pqxx::transaction_base& tx, const ConversationRow& row,
                   const RewindRequest& request, const ForkPlan& back, int64_t abandoned,
                   bool limited);
  // The rows of fork_chunk_links or all_chunk_links.
  static std::vector<SummaryChunk> ChunkLinks(const pqxx::result& rows);
  // The state's pins through `through` on `conv_key`.
  void InsertPins(pqxx::transaction_base& tx, int64_t conv_key, const ViewState& state,
                  int64_t through);

  // History search and the word index (postgres_search.cc).

  // Indexes the words of the conversation's items through `through` after
  // the call, on the word indexer's thread: no call waits for it, nor does
  // the compaction's lease. A conversation is queued once however many
  // compactions come meanwhile; when the queue is full it is left to its
  // next compaction.
  void QueueWordIndexing(int64_t conv_key, int64_t through);

  // Indexes the words of the items through `through` not indexed yet
  // (migrations/0019), in a transaction of its own: the compaction is
  // committed whether or not this succeeds, and SearchHistory reads what is
  // not indexed from the items, so a failure costs searches time, not
  // results; the next compaction indexes what this one did not. The
  // conversation's row is held against a redaction from the read of the
  // indexed sequence on, so that the items are read after any redaction
  // that came first, and one that comes after finds their words to remove.
  void IndexWords(const CallContext& ctx, int64_t conv_key, int64_t through);

  // Erasure (postgres_redaction.cc).

  // What Erase did to one conversation.
  struct Erasure {
    std::vector<int64_t> retired;
    int64_t compaction_version = 0;
  };
  // The items one erasure tombstoned so far, with what they held: a
  // conversation sharing one (migrations/0025) finds it tombstoned when
  // its turn comes, and still loses what it held from its totals.
  struct Tombstoned {
    std::vector<int64_t> owners, sequences, bytes, tokens;
    // The (conversation, sequence) pairs each conversation's totals lost
    // already.
    std::set<std::pair<int64_t, int64_t>> counted;
  };

  // Erases `seqs` of the conversation `conv_key` (locked) with `digests`
  // (in their order): tombstones, their counts, every chunk derived from
  // them emptied and retired, the totals, the idempotency records, the
  // view state. Items already erased are left alone.
  Erasure Erase(pqxx::transaction_base& tx, int64_t conv_key, const std::vector<int64_t>& seqs,
                const std::vector<std::string>& digests, const RedactRequest& request,
                Tombstoned& tombstoned);

  // Conversations continued from the one `request` erased items of (and
  // from those, down the chain): their copies of the retired chunks (and
  // chunks derived from those), and the items carried over from an erased
  // item (pinned items, recent turns), go in the same transaction.
  absl::Status EraseContinuations(pqxx::transaction_base& tx, const RedactRequest& request,
                                  int64_t root_incarnation,
                                  const std::vector<int64_t>& retired_here,
                                  Tombstoned& tombstoned, RedactResult& result);

  // How long one conversation's indexing may take.
  static constexpr absl::Duration kWordIndexTimeout = absl::Seconds(10);
  // How long an indexing that found the conversation's row held waits
  // before it is queued again.
  static constexpr absl::Duration kWordIndexRetry = absl::Milliseconds(20);

  const PostgresOptions options_;
  ForkLayout Layout() const {
    return options_.shared_forks ? ForkLayout::kShared : ForkLayout::kCopied;
  }
  // Before the pool: destroyed after it, once no connection is in use.
  pg::CancelWatchdog watchdog_;
  ConnectionPool pool_;
  // The conversations whose words are due to be indexed, and through
  // which sequence (QueueWordIndexing).
  absl::Mutex words_mu_;
  absl::flat_hash_map<int64_t, int64_t> words_due_ ABSL_GUARDED_BY(words_mu_);
  bool words_stopping_ ABSL_GUARDED_BY(words_mu_) = false;
  // After the pool: destroyed first, so its thread ends while the pool is
  // still there. One thread at low priority: work nothing waits for.
  ThreadPool word_indexer_{1, 4096, "word index", /*niceness=*/10};
};

template <typename... Args>
pqxx::result PostgresStorage::Exec(pqxx::transaction_base& tx, const char* name, Args&&... args) {
  if (!options_.pooler) return tx.exec_prepared(name, std::forward<Args>(args)...);
  return tx.exec_params(SqlOf(Layout(), name), std::forward<Args>(args)...);
}

template <typename... Args>
pqxx::result PostgresStorage::ExecNamed(pqxx::transaction_base& tx, const char* name,
                                        const ConversationKey& key, Args&&... args) {
  return Exec(tx, name, key.tenant_id, key.conversation_id, std::forward<Args>(args)...,
              DistributionKey(key));
}

template <typename... Args>
pqxx::row PostgresStorage::Exec1(pqxx::transaction_base& tx, const char* name, Args&&... args) {
  pqxx::result r = Exec(tx, name, std::forward<Args>(args)...);
  if (r.size() != 1) {
    throw pqxx::unexpected_rows(
        absl::StrCat("expected 1 row from ", name, ", got ", r.size()));
  }
  return r[0];
}

template <typename T, typename Tx, typename Fn>
absl::StatusOr<T> PostgresStorage::Run(const CallContext& ctx, absl::string_view operation, Fn fn,
                                       bool sent_alone) {
  const DbOperation& op = DbOperationOf(operation);
  telemetry::Span span = telemetry::StartSpan(op.summary, telemetry::SpanKind::kClient);
  if (span.recording()) {
    span.SetAttribute("db.system.name", "postgresql");
    span.SetAttribute("db.operation.name", op.name);
    span.SetAttribute("db.query.summary", op.summary);
  }
  for (int attempt = 0;; ++attempt) {
    RETURN_IF_ERROR(CheckDeadline(ctx));
    ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                     pool_.Acquire(ctx.deadline));
    // Inside the database the call's deadline bounds it, however many
    // statements it runs; a call without one gets the default timeout.
    const int64_t watch = watchdog_.Watch(
        conn.get(), ctx.deadline == absl::InfiniteFuture() ? absl::Now() + options_.default_timeout
                                                           : ctx.deadline);
    absl::StatusOr<T> result = absl::InternalError("unreachable");
    bool retry = false;
    try {
      Tx tx(*conn);
      result = fn(tx);
    } catch (const pqxx::in_doubt_error& e) {
      result = pg::ExceptionToStatus(e, operation);
    } catch (const pqxx::broken_connection& e) {
      retry = attempt == 0 && !sent_alone;
      result = sent_alone ? pg::InDoubt(operation, e.what()) : pg::ExceptionToStatus(e, operation);
    } catch (const pqxx::sql_error& e) {
      span.SetAttribute("db.response.status_code", e.sqlstate());
      result = pg::ExceptionToStatus(e, operation);
    } catch (const std::exception& e) {
      result = pg::ExceptionToStatus(e, operation);
    }
    // A connection a cancel was sent on is closed, not reused: a cancel
    // that arrived late must not reach the next call's statement.
    if (watchdog_.Unwatch(watch)) conn.reset();
    pool_.Release(std::move(conn));
    if (retry) {
      span.AddEvent("retry on a new connection");
      continue;
    }
    if (!result.ok()) {
      span.SetAttribute("error.type", absl::StatusCodeToString(result.status().code()));
      // A conversation that is not there is an answer, not a failure.
      if (!absl::IsNotFound(result.status()) && !absl::IsAlreadyExists(result.status()) &&
          !absl::IsFailedPrecondition(result.status())) {
        span.SetError(result.status().message());
      }
    }
    return result;
  }
}

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_POSTGRES_STORAGE_INTERNAL_H_
