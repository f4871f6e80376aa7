#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_COMPACTION_RUNNER_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_COMPACTION_RUNNER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "services/telemetry/telemetry.h"
#include "absl/synchronization/mutex.h"
#include "services/common/clock.h"
#include "services/compaction/view/context_view.h"
#include "services/profiles/model_registry.h"
#include "services/compaction/engine/planner.h"
#include "services/compaction/engine/step_recorder.h"
#include "services/compaction/engine/tier.h"
#include "services/compaction/summarizers/summarizer.h"
#include "storage/storage.h"

namespace convstate {

struct CompactionOutcome {
  // The view after compaction (truncated if it had to be).
  ContextView view;
  CompactionPlan plan;
  int64_t tokens_before = 0;
  // The conversation's version and compaction_version after the compaction.
  int64_t version = 0;
  int64_t compaction_version = 0;
  // The summary chunk written, if any (the fold's if there was one).
  int64_t chunk_id = 0;
  // The conversation's prune boundary the view was built with.
  int64_t prune_boundary = 0;
  // The context as last read from storage by the call (after its commit,
  // or after the lease or the compaction it waited for), for a caller that
  // keeps contexts between calls; null when the call read nothing.
  std::shared_ptr<const ContextSnapshot> stored;
  // The first cache breakpoint whose prefix this call's compaction or
  // truncation changed; kUnspecified when none did.
  CacheBreakpointKind invalidated_breakpoint = CacheBreakpointKind::kUnspecified;
  // Steps that were planned and did not happen, as "tier: reason" (a
  // summary that would not have been smaller than its span, a summarizer
  // that failed); empty when every planned step was done.
  std::vector<std::string> not_done;

  // A dry run's result: the commit the compaction would store (with its
  // chunk; unset when there was nothing to summarize), the view's tokens
  // once it is stored, the facts of the span, and the size the summary's
  // text was allowed.
  std::optional<CompactionCommit> proposal;
  TokenBreakdown proposal_tokens;
  std::vector<LedgerFact> span_facts;
  int64_t summary_text_budget = 0;
};

// What a caller asks of one compaction beyond its mode (Compact).
struct CompactionControl {
  // CompactionMode::kSummarize: summarize exactly through this sequence;
  // 0: the planner's choice.
  int64_t through_sequence = 0;
  // Plan, prune and summarize in memory and store nothing (no lease, no
  // audit row): the outcome's `proposal` says what would be stored. Only
  // the tiers that need nothing stored before them run.
  bool dry_run = false;
  // A call's modes: what the call adds to the view afterwards (see
  // PlanInput::headroom).
  int64_t headroom = 0;
};

// A summary `chunk` of `snapshot` (a proposal's) with `text` in its place:
// counted, its recall of `span_facts` measured again (with a low_recall row
// in `events` when it falls short), its attributed lines dropped (the text
// is the caller's), and the facts the view with it (tool results through
// `prune_boundary` pruned) no longer shows verbatim. Returns the view's
// tokens with it.
TokenBreakdown Reword(const ContextSnapshot& snapshot, const ResolvedProfile& profile,
                      std::string text, int64_t prune_boundary,
                      const std::vector<LedgerFact>& span_facts, SummaryChunk& chunk,
                      std::vector<CompactionEvent>& events);

// How long before a lease expires its holder stops calling the summarizer:
// a quarter of the lease, at most two seconds.
inline absl::Duration LeaseMargin(absl::Duration lease) {
  return std::min(absl::Seconds(2), lease / 4);
}

// The view BuildContext returns for `snapshot` when it compacts nothing:
// assembled as stored, truncated when over the emergency band or the
// window, as Run does. Used to rebuild past views (GetContextAt).
ContextView ViewAsBuilt(const ContextSnapshot& snapshot, const ResolvedProfile& profile);

// Why `out`'s view (built by a call in `mode`) stands at or above the hard
// band; empty when it is below. Names the policy that served it, the steps
// that did not happen, or the parts no compaction removes.
std::string WhyOverHardBand(const CompactionOutcome& out, const ModelProfile& profile,
                            CompactionMode mode);

// Runs compactions: plan, summarize outside any transaction, commit with a
// compare-and-set, fold, and truncate the view as the last resort. Every
// step writes an audit row. Thread-safe.
class CompactionRunner {
 public:
  struct Options {
    // Who holds the lease: this replica.
    std::string holder = "convstate";
    // How long a compaction may hold the conversation; a replica that dies
    // frees it after this. Summarizer calls are cut at the lease's end less
    // LeaseMargin; the server refuses to start with a summarizer whose
    // timeouts and retries do not fit in that.
    absl::Duration lease = absl::Seconds(60);
    // How often the request waiting for a lease checks whether it is free
    // (at once when this process gives it back).
    absl::Duration poll = absl::Milliseconds(20);
    // How many calls for one conversation wait, in this process, for a
    // compaction in flight and then share what it stored; the others get
    // the view as it stands (truncated if it does not fit), so that one
    // conversation never holds every worker.
    int waiting_calls = 4;
    const Clock* clock = Clock::Real();
    // Where compaction steps are counted and timed; null: nowhere. Spans
    // need no pointer: a compaction's span is the child of the calling
    // thread's current span.
    telemetry::Telemetry* telemetry = nullptr;
  };

  // `storage` and `summarizer` must outlive the runner.
  CompactionRunner(Options options, Storage* storage, Summarizer* summarizer);

  // Builds the view of `snapshot` for `pending`, compacting first as `mode`
  // says. RESOURCE_EXHAUSTED when even the parts that are never removed do
  // not fit, naming the largest. A summarizer that fails is not an error:
  // the view is truncated instead (status TRUNCATED) and the audit says why.
  // A compaction that loses a race to a concurrent one is discarded and the
  // view built from the winner's result.
  //
  // Anything that commits first takes the conversation's compaction lease.
  // While another compaction holds it, one request per conversation in this
  // process waits for the lease, until `ctx.deadline` (then
  // DEADLINE_EXCEEDED) or cancellation (CANCELLED), and re-plans from fresh
  // state once it has it. Up to Options::waiting_calls - 1 more wait until
  // no one in this process is at it, then re-plan from fresh state: what
  // the compaction they waited for stored is shared, and only a call that
  // still needs more takes the lease. The calls past that do not wait: they
  // get the view as it stands, truncated if it does not fit. With
  // `background`, a held lease means someone is already at it: nothing is
  // done and the view returned as is.
  absl::StatusOr<CompactionOutcome> Run(const CallContext& ctx, ContextSnapshot snapshot,
                                        const ResolvedProfile& profile,
                                        const std::vector<ItemData>& pending,
                                        CompactionMode mode, const std::string& instructions,
                                        const ProgressSink& progress, bool background = false,
                                        const CompactionControl& control = {});

 private:
  // The lease, or nullopt: when `background` and someone else holds it;
  // when this call waited for another compaction in this process and then
  // `settled` (which re-plans from fresh state) said there is nothing left
  // to store; or when too many calls wait already.
  absl::StatusOr<std::optional<CompactionLease>> AcquireLease(
      const CallContext& ctx, const ConversationKey& key, bool background,
      const std::function<absl::StatusOr<bool>()>& settled);
  // The lease from storage, remembered as held here when granted.
  absl::StatusOr<std::optional<CompactionLease>> TakeFromStorage(const CallContext& ctx,
                                                                 const ConversationKey& key);
  // AcquireLease once the lease was refused or is held in this process:
  // the first call waits for it; the next ones wait until no one in this
  // process is at the conversation; each asks `settled` when a compaction
  // of this process it waited for is done.
  absl::StatusOr<std::optional<CompactionLease>> WaitForLease(
      const CallContext& ctx, const ConversationKey& key,
      const std::function<absl::StatusOr<bool>()>& settled);
  // Brings the job's snapshot up to date (only what was appended, when
  // nothing else changed) and plans again if anything did.
  absl::Status Refresh(CompactionJob& job);

  // Summarizes `req` in one request, or, when its transcript is larger than
  // the summarizer model takes (profile.summarizer.input_limit), in
  // consecutive pieces whose results are joined (and audited in `events`).
  absl::StatusOr<SummaryResult> SummarizeInPieces(const SummaryRequest& req,
                                                  const ModelProfile& profile,
                                                  const Tokenizer& tokenizer, StepRecorder& steps,
                                                  std::vector<CompactionEvent>& events);

  // Stores what the tiers so far left in the job's commit (if anything),
  // before a tier that reads what is stored.
  void CommitPending(CompactionJob& job);
  // Stores `c` (`tier`'s), and on success reads the conversation again.
  // ABORTED (a concurrent compaction won) counts as stored. False, with an
  // audit row, when it could not be stored.
  bool Store(CompactionJob& job, CompactionOutcome& out, const CompactionCommit& c, Tier tier);
  // The compaction lease for `job`, and the plan again from what is stored
  // once it is held; false when `background` and someone else is at it.
  // `waited_ms`: how long it took.
  absl::StatusOr<bool> TakeLease(CompactionJob& job, bool background, int64_t& waited_ms);

  // Starts the job's commit from the stored state (and, for a call, the
  // threshold_hit audit row).
  static void StartCommit(CompactionJob& job, int64_t lock_wait_ms);
  // The outcome once the tiers ran and what they left is stored: the view,
  // the versions, the cache breakpoint the compaction invalidated, and the
  // audit rows of steps that stored nothing (written here).
  CompactionOutcome Finished(CompactionJob& job, CompactionOutcome out,
                             const std::vector<CacheBreakpoint>& breakpoints_before);

  // The outcome when compaction is switched off: the view as it is, or
  // RESOURCE_EXHAUSTED when it does not fit (FAILED_PRECONDITION for a
  // Compact call).
  static absl::StatusOr<CompactionOutcome> Uncompacted(CompactionJob job, CompactionMode mode);

  // Adds to the job's commit the pins of the items the keep rules hold
  // that it passes (summarizes or prunes past), and says when some did not
  // fit the rules' budget.
  static void KeepPins(CompactionJob& job);

  // The outcome of a dry run once its tiers ran: what the commit would
  // store, nothing stored.
  static CompactionOutcome Proposed(CompactionJob& job, CompactionOutcome out);

  // Forgets the lease of `key` this process held, and wakes the waiter of
  // `key`, if any, once it gave it back.
  void Released(const ConversationKey& key);

  const Options options_;
  Storage* const storage_;
  Summarizer* const summarizer_;
  absl::Mutex wait_mu_;
  // Conversations whose lease this process holds.
  absl::flat_hash_set<std::string> held_ ABSL_GUARDED_BY(wait_mu_);
  // Conversations someone in this process waits on for their lease, the
  // calls waiting behind that one, and the signal that this process gave a
  // lease back or stopped waiting for one.
  absl::flat_hash_set<std::string> waiting_ ABSL_GUARDED_BY(wait_mu_);
  absl::flat_hash_map<std::string, int> following_ ABSL_GUARDED_BY(wait_mu_);
  absl::CondVar released_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_COMPACTION_RUNNER_H_
