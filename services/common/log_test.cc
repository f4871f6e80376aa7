#include "services/common/log.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(LogTest, AFloodOfOneEventIsOneLineAPeriod) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 1000; ++i) {
    LogThrottled(LogLevel::kWarning, "test flood", "database unreachable", absl::Hours(1));
  }
  LogThrottled(LogLevel::kWarning, "another event", "something else", absl::Hours(1));
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "database unreachable"));
  EXPECT_TRUE(absl::StrContains(out, "something else"));
}

TEST(LogTest, TheNextLineSaysHowManyWereLeftOut) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    LogThrottled(LogLevel::kWarning, "test counted", "event", absl::ZeroDuration());
  }
  const std::string every = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(every), 5);  // A zero period leaves nothing out.
  ::testing::internal::CaptureStderr();
  FakeClock clock;
  for (int i = 0; i < 3; ++i) {
    LogThrottled(LogLevel::kWarning, "test counted 2", "event", absl::Milliseconds(50), &clock);
  }
  clock.Advance(absl::Milliseconds(60));
  LogThrottled(LogLevel::kWarning, "test counted 2", "event", absl::Milliseconds(50), &clock);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "and 2 more like it")) << out;
}

}  // namespace
}  // namespace convstate
