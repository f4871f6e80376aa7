#ifndef CONVSTATE_SERVICES_COMMON_THREAD_POOL_H_
#define CONVSTATE_SERVICES_COMMON_THREAD_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace convstate {

// A fixed set of threads running queued work in FIFO order. Blocking work
// (database calls) runs here rather than on gRPC's own threads. A task that
// throws is abandoned, counted and logged under `name` (RunGuarded); the
// thread goes on with the next one.
class ThreadPool {
 public:
  // `threads` at least 1; at most `max_queued` tasks wait at once. A
  // positive `niceness` lowers the threads' scheduling priority (Linux
  // nice, per thread), so that work which can wait yields the CPU to work
  // a caller waits for.
  ThreadPool(int threads, size_t max_queued, std::string name = "thread pool",
             int niceness = 0);
  // Runs every task already queued, then joins the threads.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`. False, and `task` dropped, when the queue is full or the
  // pool is shutting down.
  bool Schedule(std::function<void()> task);

 private:
  void Work();

  const size_t max_queued_;
  const int niceness_;
  const std::string name_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_THREAD_POOL_H_
