#include "services/common/thread_pool.h"

#include <atomic>

#include "absl/synchronization/notification.h"
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

}  // namespace
}  // namespace convstate
