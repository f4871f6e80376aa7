#ifndef CONVSTATE_SERVICES_API_HISTORY_CACHE_H_
#define CONVSTATE_SERVICES_API_HISTORY_CACHE_H_

// Each replica's copies of the histories it recalls from
// (storage/history_index.h): a BuildContext's recall reads from storage
// only what was compacted since the replica's last look, and ranks in
// memory, rather than running the search statement on every call.
//
// A copy is made on a background thread the first time a conversation is
// searched here (that search, and any until the copy is ready, goes to
// storage as before); a conversation too large for its share of the budget
// is never copied. A copy answers only while the conversation's
// `redactions` count (read with the call's row) is the one it was made at:
// an erasure on any replica makes every replica read the history again.

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/common/clock.h"
#include "services/common/thread_pool.h"
#include "storage/history_index.h"
#include "storage/storage.h"

namespace convstate {

class HistoryCache {
 public:
  // Keeps at most `max_bytes` of copies (0: none; every search goes to
  // storage), none over a quarter of it, none unused for longer than
  // `idle`. `storage` and `clock` outlive it.
  HistoryCache(Storage* storage, const Clock* clock, int64_t max_bytes,
               absl::Duration idle = absl::Minutes(10));
  // Waits for a copy being made.
  ~HistoryCache();

  HistoryCache(const HistoryCache&) = delete;
  HistoryCache& operator=(const HistoryCache&) = delete;

  // Storage::SearchHistory of `search` on `conversation`, the row this call
  // read: from the copy when there is one (brought up to the row first),
  // else from storage.
  absl::StatusOr<HistoryHits> Search(const CallContext& ctx, const Conversation& conversation,
                                     const HistorySearch& search);

  // Brings the conversation's copy up to `conversation` (a row a
  // compaction just wrote), or starts making one, so that the next recall
  // reads nothing: called off the request path, after a background
  // compaction.
  void Refresh(const CallContext& ctx, const Conversation& conversation);

  // Refresh on the thread that makes copies, for a conversation that has a
  // copy already (a compaction a call ran in the foreground): the next
  // call's recall then reads nothing on its own path. False when the
  // queue is full (the next recall catches up itself).
  bool RefreshLater(const Conversation& conversation);

  // Waits until the copies and refreshes queued so far are done (one
  // thread makes them, in order): tests wait for it.
  void Flush();

  // Drops the copies of the conversation (erased or deleted here; other
  // replicas learn of an erasure from the row, and drop a deleted
  // conversation's copy when it has been unused for `idle`).
  void Forget(const ConversationKey& key);

  // What the copies hold, and how many there are.
  int64_t bytes() const;
  size_t size() const;
  // True once the conversation's copy is ready (tests wait for it).
  bool Holds(int64_t storage_key) const;
  // True when a copy made at `conversation`'s redactions is ready: Search
  // then reads storage only to catch up.
  bool Ready(const Conversation& conversation) const;

 private:
  struct Copy {
    ConversationKey key;
    int64_t storage_key = 0;
    int64_t redactions = 0;
    absl::Mutex mu;
    // Null until made, and for a conversation too large to copy.
    std::unique_ptr<HistoryIndex> index ABSL_GUARDED_BY(mu);
    // Whether `index` is set, and what it holds through: read without
    // waiting for `mu`, to read what is missing from the database before
    // taking it (no lock is held while the database is read).
    std::atomic<bool> ready{false};
    std::atomic<int64_t> through{0};
    // The bytes this copy is counted for in `bytes_`, and its last use.
    int64_t counted = 0;
    absl::Time used;
  };
  using Order = std::list<std::shared_ptr<Copy>>;

  // The conversation's items after `after`, through at least `upto` (whole
  // pages), read with no lock held; RESOURCE_EXHAUSTED past a quarter of
  // the budget.
  absl::StatusOr<std::vector<Item>> ReadAfter(const CallContext& ctx, const ConversationKey& key,
                                              int64_t after, int64_t upto) const;
  // Each item's pieces (HistoryIndex::PiecesOf), split ahead; or none.
  using Pieces = std::vector<std::shared_ptr<const ItemPieces>>;
  // Adds `items` (read after what the copy held then) to `copy`'s index,
  // with their `pieces` when split ahead, skipping what it has gained
  // since; false when they do not follow on (another history) or the copy
  // grew past its share, which loses its index for good.
  bool Add(Copy& copy, const std::vector<Item>& items, Pieces pieces) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(copy.mu);
  void Make(std::shared_ptr<Copy> copy, int64_t upto);
  // Brings `copy`'s index through `upto`, reading what is missing (and,
  // with `split`, splitting it into pieces, off the request path) before
  // taking its lock; true when it is there, and then `then` has run on the
  // index under the lock. A copy grown past its share loses its index for
  // good.
  bool CatchUp(const CallContext& ctx, Copy& copy, int64_t upto, bool split,
               absl::FunctionRef<void(HistoryIndex&)> then);
  // What `copy`'s index holds, in bytes (0 without one).
  static int64_t Bytes(Copy& copy);
  // Drops `copy`'s index for good: it grew past its share.
  static void Lose(Copy& copy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(copy.mu);
  // The most one copy may hold: a quarter of the budget.
  int64_t Share() const { return max_bytes_ / 4; }
  // The conversation's copy, most recently used now; with `true` when it
  // is new (being made on the maker thread, through `upto`).
  std::pair<std::shared_ptr<Copy>, bool> Admit(const Conversation& conversation, int64_t upto);
  // Counts `copy` at `bytes` (while it is kept; negative: drops it), then
  // drops the least recently used copies while over the budget, and those
  // unused for longer than `idle_`.
  void Account(const std::shared_ptr<Copy>& copy, int64_t bytes);
  void Drop(Order::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Storage* const storage_;
  const Clock* const clock_;
  const int64_t max_bytes_;
  const absl::Duration idle_;
  mutable absl::Mutex mu_;
  // Most recently used first.
  Order order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, Order::iterator> copies_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Last, so that it stops (and finishes what it makes) before the rest.
  std::unique_ptr<ThreadPool> maker_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_HISTORY_CACHE_H_
