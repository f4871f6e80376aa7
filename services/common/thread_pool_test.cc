#include "services/common/thread_pool.h"

#include <atomic>

#include <stdexcept>

#include "absl/synchronization/notification.h"
#include "services/common/task_guard.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(ThreadPoolTest, RunsEveryQueuedTaskBeforeJoining) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2, 1000);
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(pool.Schedule([&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 500);
}

TEST(ThreadPoolTest, RefusesWorkBeyondTheQueueLimit) {
  absl::Notification release;
  absl::Notification started;
  ThreadPool pool(1, 1);
  ASSERT_TRUE(pool.Schedule([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();  // The only thread is busy; the queue is empty.
  EXPECT_TRUE(pool.Schedule([] {}));
  EXPECT_FALSE(pool.Schedule([] {}));  // Queue full.
  release.Notify();
}

TEST(ThreadPoolTest, ATaskThatThrowsEndsAloneAndTheThreadGoesOn) {
  const int64_t before = EscapedExceptions();
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1, 100, "test pool");
    ASSERT_TRUE(pool.Schedule([] { throw std::runtime_error("bad answer"); }));
    ASSERT_TRUE(pool.Schedule([&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(EscapedExceptions(), before + 1);
}

}  // namespace
}  // namespace convstate
