#ifndef CONVSTATE_SERVICES_COMMON_CLOCK_H_
#define CONVSTATE_SERVICES_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convstate {

// Time, injected so that timeouts, leases and breakers are testable
// without sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Waits `d` (a fake clock returns at once).
  virtual void SleepFor(absl::Duration d) const = 0;
  // Waits on `cv` (with `mu` held) until it is signalled or `d` has passed.
  // A fake clock counts `d` as passed and returns at once.
  virtual void WaitWithTimeout(absl::CondVar& cv, absl::Mutex& mu, absl::Duration d) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    mu.Unlock();
    SleepFor(d);
    mu.Lock();
    (void)cv;
  }
  // The process's real clock.
  static Clock* Real();
};

// A clock that moves only when told to; SleepFor advances it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) const override { const_cast<FakeClock*>(this)->Advance(d); }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_CLOCK_H_
