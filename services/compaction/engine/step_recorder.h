#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_STEP_RECORDER_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_STEP_RECORDER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "services/common/trace.h"
#include "services/compaction/engine/tiers.h"
#include "services/compaction/view/context_view.h"
#include "services/core/types.h"
#include "services/telemetry/telemetry.h"

namespace convstate {

// Progress of a compaction, as StreamBuildContext reports it.
struct CompactionProgress {
  enum class Kind { kStarted, kCompleted, kFailed };
  Kind kind = Kind::kStarted;
  Tier tier = Tier::kPrune;
  int64_t tokens_before = 0;
  int64_t tokens_after = 0;
  std::string reason;
  // For a completed summary or fold: its recall of the span's facts.
  double recall = 0;
  // For a completed step: the view's tokens by section before and after.
  std::optional<TokenBreakdown> before_tokens;
  std::optional<TokenBreakdown> after_tokens;
  // For a completed summary: reasoning blocks left verbatim after it, and
  // those it summarized as text or dropped.
  int reasoning_kept = 0;
  int reasoning_summarized = 0;
  int reasoning_dropped = 0;
  // For "summarize": the span's facts the view no longer shows verbatim.
  std::vector<LedgerFact> lost;
};
using ProgressSink = std::function<void(const CompactionProgress&)>;

// The progress of a completed step of `tier`: the view's total before and
// after it, and its tokens by section; the caller adds the step's extras.
CompactionProgress CompletedStep(Tier tier, int64_t before, int64_t after,
                                 const TokenBreakdown& before_tokens,
                                 const TokenBreakdown& after_tokens);

// An audit row of step `tier` (empty for none) with `detail` (a JSON
// object's text).
CompactionEvent AuditRow(const std::string& event, std::optional<Tier> tier, int64_t before,
                         int64_t after, std::string detail = "{}");

// Where every step of a compaction is told: the caller's progress sink
// (StreamBuildContext's events), one span event per step on the
// compaction's span, the step metrics (count by tier and outcome,
// duration, compression ratio, recall). Audit rows are the tiers' own (they
// go into the commit they describe). Not thread-safe: one per compaction.
class StepRecorder {
 public:
  // `progress` and `telemetry` may be null.
  StepRecorder(ProgressSink progress, telemetry::Telemetry* telemetry)
      : progress_(std::move(progress)), telemetry_(telemetry) {}

  // Opens the compaction's span, the child of the calling thread's, and
  // makes it current until the recorder goes.
  void OpenSpan(const ConversationKey& key, const char* band, bool background,
                int64_t tokens_before);
  telemetry::Span& span() { return span_; }

  void Started(Tier tier, int64_t before);
  // `p` carries the step's tier, tokens and extras (kind is set here).
  void Completed(CompactionProgress p);
  void Failed(Tier tier, int64_t before, const std::string& reason);
  // Something the caller should know that is not a failure of the step
  // (reported with the failures, as "tier: what").
  void Note(Tier tier, const std::string& what);
  // A summarizer call, by outcome.
  void SummarizerCall(const absl::Status& status);
  // Time waited for the lease (not for background compactions).
  void LeaseWait(absl::Duration waited);
  // The steps that failed so far, as "tier: reason".
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void Report(CompactionProgress p);

  const ProgressSink progress_;
  telemetry::Telemetry* const telemetry_;
  telemetry::Span span_;
  std::optional<telemetry::ScopedSpan> scope_;
  absl::flat_hash_map<int, absl::Time> started_;
  std::vector<std::string> failures_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_STEP_RECORDER_H_
