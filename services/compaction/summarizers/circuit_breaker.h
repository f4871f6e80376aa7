#ifndef CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_CIRCUIT_BREAKER_H_
#define CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_CIRCUIT_BREAKER_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/clock.h"

namespace convstate {

// Stops calling a failing dependency for a while. Closed: calls go through;
// `failure_threshold` failures in a row open it. Open: calls are refused
// until `open_for` has passed. Half-open: one trial call goes through; its
// success closes the breaker, its failure opens it again. Thread-safe.
class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };

  CircuitBreaker(int failure_threshold, absl::Duration open_for, const Clock* clock)
      : failure_threshold_(failure_threshold < 1 ? 1 : failure_threshold),
        open_for_(open_for),
        clock_(clock) {}

  // True if a call may go out now (in half-open, only one at a time).
  bool Allow();
  void RecordSuccess();
  void RecordFailure();
  State state() const;

 private:
  const int failure_threshold_;
  const absl::Duration open_for_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time opened_at_ ABSL_GUARDED_BY(mu_);
  bool trial_in_flight_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_SUMMARIZERS_CIRCUIT_BREAKER_H_
