#ifndef CONVSTATE_SERVICES_API_CONTEXT_CACHE_H_
#define CONVSTATE_SERVICES_API_CONTEXT_CACHE_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "services/compaction/engine/planner.h"
#include "services/core/types.h"
#include "services/telemetry/telemetry.h"
#include "storage/storage.h"

namespace convstate {

// What a replica keeps of a conversation between calls: the context as
// last read, and the serialized answer to a BuildContext without pending
// input for it, when that answer compacted nothing. Immutable once shared.
struct CachedContext {
  std::shared_ptr<const ContextSnapshot> snapshot;
  // The BuildContextResponse wire bytes; null when none was kept.
  std::shared_ptr<const std::string> plain_view;
  // The plain view's band, status (convstate.v1.ContextStatus) and total,
  // for the call's span and metrics when it is served again, and whether
  // serving it asks for a background compaction (as building it did).
  Band band = Band::kNormal;
  int status = 0;
  int64_t view_tokens = 0;
  bool compact_in_background = false;
  // The profile's prompt cache lifetime when idle compaction applies to
  // the conversation (0: it does not), for serving it again (NoteBuilt).
  int64_t prompt_cache_ttl_s = 0;
};

// A view a BuildContext just built, as the cache policy
// (ContextCache::KeepView) decides what of it the next call can use.
struct BuiltView {
  // The context the call read (ContextCache::Current), and whether its
  // counts were made again with another tokenizer (the model changed).
  std::shared_ptr<const CachedContext> read;
  bool recounted = false;
  // The conversation's versions after the call, and the context a
  // compaction read after committing (null when none did).
  int64_t version = 0;
  int64_t compaction_version = 0;
  std::shared_ptr<const ContextSnapshot> stored;
  // The call had no pending input, no provider overflow and no recall
  // query.
  bool plain = false;
  // What building the view did: its status, the cache breakpoint it
  // invalidated, and whether it compacted nothing (an empty plan, or
  // compaction off for the conversation).
  ContextStatus status = ContextStatus::kFull;
  CacheBreakpointKind invalidated = CacheBreakpointKind::kUnspecified;
  bool compacted_nothing = false;
  // For serving the view again (CachedContext's fields of the same names),
  // and the response itself, serialized only when it is kept.
  Band band = Band::kNormal;
  int response_status = 0;
  int64_t view_tokens = 0;
  bool compact_in_background = false;
  int64_t prompt_cache_ttl_s = 0;
  const google::protobuf::MessageLite* response = nullptr;
};

// Bytes `snapshot` holds, roughly: its text and a fixed cost per element.
int64_t SnapshotBytes(const ContextSnapshot& snapshot);

// Conversations' contexts kept by one replica, at most `max_bytes` of
// them, the least recently used let go first. Nothing here is trusted
// without asking storage: every use checks the conversation's versions
// (Storage::LoadContextSince), so a change made by another replica is
// seen on the next call. Thread-safe.
class ContextCache {
 public:
  // `max_bytes` 0 keeps nothing. `telemetry` may be null.
  ContextCache(int64_t max_bytes, telemetry::Telemetry* telemetry);

  ContextCache(const ContextCache&) = delete;
  ContextCache& operator=(const ContextCache&) = delete;

  // The entry for `key`, or null; marks it recently used.
  std::shared_ptr<const CachedContext> Get(const ConversationKey& key);
  // Keeps `entry` for `key` in place of any other, then lets the least
  // recently used entries go until the cache is within its bound. An entry
  // larger than the bound is not kept.
  void Put(const ConversationKey& key, std::shared_ptr<const CachedContext> entry);
  void Erase(const ConversationKey& key);
  // Keeps `snapshot`, a context read from storage, for `key` unless the
  // entry held is of the same conversation at the same state or a later
  // one (its compaction_version, then its version): what a compaction
  // read after committing, so that the next call reads only what was
  // appended since instead of the whole context.
  void Offer(const ConversationKey& key, std::shared_ptr<const ContextSnapshot> snapshot);

  // The conversation's context as it is now: the entry held, brought up to
  // date by one storage read (Storage::LoadContextSince; an entry of a
  // conversation that is gone is let go). Counts the lookup.
  absl::StatusOr<std::shared_ptr<const CachedContext>> Current(const CallContext& ctx,
                                                               Storage& storage,
                                                               const ConversationKey& key);

  // The cache policy after a BuildContext built a view of `key`: the
  // context read stays good while the conversation is as it was read
  // (kept, with the view serialized when it is the same for the next call
  // without pending input: nothing compacted, truncated or invalidated);
  // else what a compaction read after committing is offered; else the
  // entry goes. Returns the kept serialized view, or null.
  std::shared_ptr<const std::string> KeepView(const ConversationKey& key, const BuiltView& built);

  // Counts a lookup's outcome: what LoadContextSince had to read.
  void CountLookup(ContextDelta::Kind kind) const;

  struct Stats {
    int64_t bytes = 0;
    int64_t entries = 0;
    int64_t evictions = 0;
    // Lookups by what LoadContextSince had to read.
    int64_t hits = 0;
    int64_t appended = 0;
    int64_t misses = 0;
  };
  Stats stats() const;

 private:
  struct Node {
    std::string key;
    std::shared_ptr<const CachedContext> entry;
    int64_t bytes = 0;
  };
  // Put with the lock held and the entry's bytes counted.
  void PutLocked(std::string k, std::shared_ptr<const CachedContext> entry, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unlink(std::list<Node>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Report() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  telemetry::Telemetry* const telemetry_;
  mutable absl::Mutex mu_;
  // Most recently used first.
  std::list<Node> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<Node>::iterator> index_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::atomic<int64_t> hits_{0};
  mutable std::atomic<int64_t> appended_{0};
  mutable std::atomic<int64_t> misses_{0};
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_CONTEXT_CACHE_H_
