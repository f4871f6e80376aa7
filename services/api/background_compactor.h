#ifndef CONVSTATE_SERVICES_API_BACKGROUND_COMPACTOR_H_
#define CONVSTATE_SERVICES_API_BACKGROUND_COMPACTOR_H_

// Compaction off the call path: in the background, when a BuildContext
// finds a conversation in the soft band, and when a conversation has been
// idle for its prompt cache's lifetime (idle compaction).
//
// Idle compaction: a conversation above its idle band whose last
// BuildContext is older than its prompt cache's lifetime is compacted in
// the background, under the lease, so that the next call neither waits for
// a compaction nor throws a warm cache away. Each BuildContext above the
// band pushes the conversation's due time forward (written at most once
// every quarter lifetime, off the call path); a sweeper on every replica
// claims what is due, each conversation by one replica only.

#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/api/context_cache.h"
#include "services/api/history_cache.h"
#include "services/api/profile_resolver.h"
#include "services/common/thread_pool.h"
#include "services/compaction/engine/compaction_runner.h"
#include "storage/storage.h"

namespace convstate {

// Schedules and runs background and idle compactions on threads of its
// own: a pool for compactions (below the calls' threads in priority), one
// thread for idle due times, and the idle sweeper. Thread-safe.
class BackgroundCompactor {
 public:
  struct Options {
    // Lease holder name, lease length, clock and telemetry of compactions.
    CompactionRunner::Options compaction;
    // Threads that run background compactions, each one conversation's at
    // a time (a summarizer call mostly waits on the network).
    int threads = 4;
    // Idle compaction: compact a conversation at or above `idle_band` once
    // its last BuildContext is older than its profile's prompt_cache_ttl_s;
    // look for due conversations every `idle_scan` (0: never by itself;
    // SweepIdle does one look).
    bool idle_compaction = true;
    Band idle_band = Band::kSoft;
    absl::Duration idle_scan = absl::Seconds(5);
  };

  // Everything but `options` must outlive the compactor; its destructor
  // waits for the compactions already running and drops queued ones.
  BackgroundCompactor(Options options, Storage* storage, CompactionRunner* runner,
                      ContextCache* cache, HistoryCache* history,
                      const ProfileResolver* profiles);
  ~BackgroundCompactor();

  BackgroundCompactor(const BackgroundCompactor&) = delete;
  BackgroundCompactor& operator=(const BackgroundCompactor&) = delete;

  // Starts a background compaction of `key` unless one is already queued or
  // running in this process (the lease keeps it to one across replicas).
  // Its span joins the trace of the calling thread's span.
  void CompactInBackground(const ConversationKey& key);

  // A view of `key` in `band` was built: moves its idle due time a prompt
  // cache lifetime on when it is at or above the idle band (written off the
  // call path, at most every quarter lifetime). `prompt_cache_ttl_s` 0: idle
  // compaction does not apply to the conversation.
  void NoteBuilt(const ConversationKey& key, Band band, int64_t prompt_cache_ttl_s);

  // Claims the conversations whose idle due time has come and compacts them
  // (those still above the idle band); returns how many were compacted. The
  // sweeper calls it every idle_scan.
  int SweepIdle();

 private:
  // What a compaction off the call path starts from: the conversation's
  // context as stored (the one this replica keeps, brought up to date),
  // its profile, and its counts from that profile's tokenizer.
  struct Counted {
    ContextSnapshot snapshot;
    ResolvedProfile resolved;
  };
  absl::StatusOr<Counted> LoadCounted(const CallContext& ctx, const ConversationKey& key);
  // Compacts a claimed conversation if it is still above the band, with an
  // `idle` audit row; true if it did.
  bool CompactIdle(const ConversationKey& key);
  void SweepIdleUntilStopped();

  const Options options_;
  Storage* const storage_;
  CompactionRunner* const runner_;
  ContextCache* const cache_;
  HistoryCache* const history_;
  const ProfileResolver* const profiles_;
  // background_mu_ guards the conversations queued or running and the stop
  // flag (the sweeper waits on it).
  absl::Mutex background_mu_;
  absl::flat_hash_set<std::string> background_keys_ ABSL_GUARDED_BY(background_mu_);
  bool stopping_ ABSL_GUARDED_BY(background_mu_) = false;
  // idle_mu_ guards the due times this replica wrote, by conversation.
  absl::Mutex idle_mu_;
  absl::flat_hash_map<std::string, absl::Time> idle_noted_ ABSL_GUARDED_BY(idle_mu_);
  // Last members: destroyed first, while everything their tasks use still is.
  std::unique_ptr<ThreadPool> background_;
  std::unique_ptr<ThreadPool> idle_writes_;
  std::unique_ptr<std::thread> idle_sweeper_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_BACKGROUND_COMPACTOR_H_
