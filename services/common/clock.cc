#include "services/common/clock.h"

namespace convstate {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) const override { absl::SleepFor(d); }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const kReal = new RealClock();
  return kReal;
}

}  // namespace convstate
