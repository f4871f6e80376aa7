#ifndef CONVSTATE_SERVICES_AUTH_RATE_LIMITER_H_
#define CONVSTATE_SERVICES_AUTH_RATE_LIMITER_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace convstate::auth {

// Calls per second per tenant, on this replica: a token bucket per tenant
// that fills at `rate` up to `burst`. Thread-safe.
class RateLimiter {
 public:
  // True if one more call of `tenant` fits at `now`. A rate of 0 admits
  // everything; a burst of 0 is one second's worth (at least 1).
  bool Admit(absl::string_view tenant, double rate, int64_t burst, absl::Time now);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time filled;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate::auth

#endif  // CONVSTATE_SERVICES_AUTH_RATE_LIMITER_H_
