#ifndef CONVSTATE_SERVICES_GRPC_EVENT_WRITER_H_
#define CONVSTATE_SERVICES_GRPC_EVENT_WRITER_H_

#include <atomic>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"

namespace convstate {

// A server stream of raw messages (StreamBuildContext, health Watch).
// Writes events as they come, one write in flight at a time, then the
// status once every queued event is out. Send and Close may be called from
// any thread. StartWrite and Finish are called with no lock held: gRPC may
// run OnWriteDone or OnDone inline from them.
//
// Two owners share the object: gRPC, until OnDone, and the producer (the
// worker computing a view, the health service's watch list), until Release. It is deleted when both are
// done, so the producer may call Send, Close or Cancelled after the client
// went away: they turn into no-ops once the call has ended.
class EventWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  void Send(grpc::ByteBuffer event) {
    mu_.Lock();
    if (closing_ || done_) {  // Nothing may follow Close; no one reads after OnDone.
      mu_.Unlock();
      return;
    }
    queue_.push_back(std::move(event));
    Step();
  }
  void Close(grpc::Status status) {
    mu_.Lock();
    if (closing_ || done_) {
      mu_.Unlock();
      return;
    }
    closing_ = true;
    status_ = std::move(status);
    Step();
  }
  // True once the client cancelled or the call ended.
  bool Cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The producer is done with this object.
  void Release() { Unref(); }

  void OnWriteDone(bool ok) override {
    mu_.Lock();
    writing_ = false;
    queue_.pop_front();
    if (!ok) {  // The client went away: nothing more can be written.
      cancelled_.store(true, std::memory_order_release);
      queue_.clear();
      if (!closing_) {
        closing_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
    }
    Step();
  }
  // The call ends: nothing more is written, whatever the producer does.
  void OnCancel() override {
    cancelled_.store(true, std::memory_order_release);
    Close(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
  }
  void OnDone() override {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      queue_.clear();
    }
    cancelled_.store(true, std::memory_order_release);
    Unref();
  }

 private:
  ~EventWriter() override = default;

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Called with mu_ held: decides the next step, releases mu_, takes it.
  void Step() ABSL_UNLOCK_FUNCTION(mu_) {
    if (writing_ || finished_ || done_) {
      mu_.Unlock();
    } else if (!queue_.empty()) {
      writing_ = true;
      // A deque keeps references valid on push_back; only OnWriteDone pops.
      grpc::ByteBuffer* next = &queue_.front();
      mu_.Unlock();
      StartWrite(next);
    } else if (closing_) {
      finished_ = true;
      const grpc::Status status = status_;
      mu_.Unlock();
      Finish(status);  // May run OnDone inline; the producer's reference keeps this alive.
    } else {
      mu_.Unlock();
    }
  }

  // gRPC's reference and the producer's.
  std::atomic<int> refs_{2};
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_GRPC_EVENT_WRITER_H_
