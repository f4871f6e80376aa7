#include "services/auth/rate_limiter.h"

#include "gtest/gtest.h"

namespace convstate::auth {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST(RateLimiterTest, ABurstIsAdmittedThenTheRateRefills) {
  RateLimiter limiter;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.Admit("acme", 2, 4, kStart)) << i;
  EXPECT_FALSE(limiter.Admit("acme", 2, 4, kStart));
  // Half a second at 2/s is one call.
  EXPECT_TRUE(limiter.Admit("acme", 2, 4, kStart + absl::Milliseconds(500)));
  EXPECT_FALSE(limiter.Admit("acme", 2, 4, kStart + absl::Milliseconds(500)));
}

TEST(RateLimiterTest, TenantsHaveBucketsOfTheirOwn) {
  RateLimiter limiter;
  EXPECT_TRUE(limiter.Admit("acme", 1, 1, kStart));
  EXPECT_FALSE(limiter.Admit("acme", 1, 1, kStart));
  EXPECT_TRUE(limiter.Admit("globex", 1, 1, kStart));
}

TEST(RateLimiterTest, NoRateAdmitsEverythingAndNoBurstIsOneSecond) {
  RateLimiter limiter;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Admit("acme", 0, 0, kStart));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit("globex", 3, 0, kStart)) << i;
  EXPECT_FALSE(limiter.Admit("globex", 3, 0, kStart));
}

TEST(RateLimiterTest, IdleTimeFillsNoMoreThanTheBurst) {
  RateLimiter limiter;
  EXPECT_TRUE(limiter.Admit("acme", 10, 2, kStart));
  const absl::Time later = kStart + absl::Hours(1);
  EXPECT_TRUE(limiter.Admit("acme", 10, 2, later));
  EXPECT_TRUE(limiter.Admit("acme", 10, 2, later));
  EXPECT_FALSE(limiter.Admit("acme", 10, 2, later));
}

}  // namespace
}  // namespace convstate::auth
