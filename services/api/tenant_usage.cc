#include "services/api/tenant_usage.h"

#include "storage/rules.h"

namespace convstate {
namespace {

// Tenants whose figures a replica keeps; beyond it, they are read again.
constexpr size_t kMaxTenants = 100000;

}  // namespace

TenantBytes::TenantBytes(Storage* storage, const Clock* clock, absl::Duration refresh)
    : storage_(storage), clock_(clock), refresh_(refresh) {}

absl::Status TenantBytes::Check(const CallContext& ctx, const std::string& tenant,
                                const TenantLimits& limits, int64_t adding) {
  if (limits.max_stored_bytes <= 0) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  bool stale = true;
  Known known;
  {
    absl::MutexLock lock(&mu_);
    auto it = known_.find(tenant);
    if (it != known_.end() && now - it->second.read_at < refresh_) {
      known = it->second;
      stale = false;
    }
  }
  if (stale) {
    // Several calls may read at once; each figure is as good as the other.
    absl::StatusOr<convstate::TenantUsage> usage = storage_->GetTenantUsage(ctx, tenant);
    if (!usage.ok()) return usage.status();
    known = Known{usage->stored_bytes, usage->conversations, now};
    absl::MutexLock lock(&mu_);
    if (known_.size() >= kMaxTenants) known_.clear();
    known_[tenant] = known;
  }
  return CheckTenantLimits(tenant, convstate::TenantUsage{known.conversations, known.stored_bytes},
                           adding, 0, limits);
}

void TenantBytes::Added(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = known_.find(tenant);
  if (it != known_.end()) it->second.stored_bytes += bytes;
}

}  // namespace convstate
