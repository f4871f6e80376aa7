#include "services/auth/rate_limiter.h"

#include <algorithm>

namespace convstate::auth {

bool RateLimiter::Admit(absl::string_view tenant, double rate, int64_t burst, absl::Time now) {
  if (rate <= 0) return true;
  const double capacity = burst > 0 ? static_cast<double>(burst) : std::max(1.0, rate);
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = buckets_.try_emplace(tenant);
  Bucket& bucket = it->second;
  if (fresh) {
    bucket.tokens = capacity;
  } else {
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - bucket.filled));
    bucket.tokens = std::min(capacity, bucket.tokens + elapsed * rate);
  }
  bucket.filled = now;
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}

}  // namespace convstate::auth
