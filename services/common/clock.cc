#include "services/common/clock.h"

namespace convstate {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) const override { absl::SleepFor(d); }
  void WaitWithTimeout(absl::CondVar& cv, absl::Mutex& mu, absl::Duration d) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv.WaitWithTimeout(&mu, d);
  }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const kReal = new RealClock();
  return kReal;
}

}  // namespace convstate
