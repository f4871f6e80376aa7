#include "services/compaction/summarizers/circuit_breaker.h"

#include "gtest/gtest.h"

namespace convstate {
namespace {

using State = CircuitBreaker::State;

TEST(CircuitBreakerTest, OpensAfterConsecutiveFailuresAndRecovers) {
  FakeClock clock;
  CircuitBreaker breaker(3, absl::Seconds(30), &clock);
  EXPECT_TRUE(breaker.Allow());
  breaker.RecordFailure();
  breaker.RecordFailure();
  breaker.RecordSuccess();  // A success resets the count.
  breaker.RecordFailure();
  breaker.RecordFailure();
  EXPECT_EQ(breaker.state(), State::kClosed);
  breaker.RecordFailure();
  EXPECT_EQ(breaker.state(), State::kOpen);
  EXPECT_FALSE(breaker.Allow());

  clock.Advance(absl::Seconds(29));
  EXPECT_FALSE(breaker.Allow());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(breaker.Allow());   // The one half-open trial.
  EXPECT_FALSE(breaker.Allow());  // Nobody else while it runs.
  EXPECT_EQ(breaker.state(), State::kHalfOpen);
  breaker.RecordFailure();        // The trial failed: open again.
  EXPECT_EQ(breaker.state(), State::kOpen);
  EXPECT_FALSE(breaker.Allow());

  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(breaker.Allow());
  breaker.RecordSuccess();
  EXPECT_EQ(breaker.state(), State::kClosed);
  EXPECT_TRUE(breaker.Allow());
  EXPECT_TRUE(breaker.Allow());
}

}  // namespace
}  // namespace convstate
