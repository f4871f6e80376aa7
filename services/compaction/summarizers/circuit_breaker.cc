#include "services/compaction/summarizers/circuit_breaker.h"

namespace convstate {

bool CircuitBreaker::Allow() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kOpen && clock_->Now() - opened_at_ >= open_for_) {
    state_ = State::kHalfOpen;
    trial_in_flight_ = false;
  }
  switch (state_) {
    case State::kClosed:
      return true;
    case State::kOpen:
      return false;
    case State::kHalfOpen:
      if (trial_in_flight_) return false;
      trial_in_flight_ = true;
      return true;
  }
  return false;
}

void CircuitBreaker::RecordSuccess() {
  absl::MutexLock lock(&mu_);
  state_ = State::kClosed;
  failures_ = 0;
  trial_in_flight_ = false;
}

void CircuitBreaker::RecordFailure() {
  absl::MutexLock lock(&mu_);
  trial_in_flight_ = false;
  if (state_ == State::kHalfOpen || ++failures_ >= failure_threshold_) {
    state_ = State::kOpen;
    opened_at_ = clock_->Now();
    failures_ = 0;
  }
}

CircuitBreaker::State CircuitBreaker::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

}  // namespace convstate
