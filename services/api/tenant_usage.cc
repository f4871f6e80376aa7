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
  Known known;
  int64_t added = 0;
  bool stale = true;
  {
    absl::MutexLock lock(&mu_);
    if (tenants_.size() >= kMaxTenants && !tenants_.contains(tenant)) tenants_.clear();
    Tenant& t = tenants_[tenant];
    added = t.added;
    if (now - t.known.read_at < refresh_) {
      known = t.known;
      stale = false;
    }
  }
  if (stale) {
    // Several calls may read at once; each figure is as good as the other.
    absl::StatusOr<convstate::TenantUsage> usage = storage_->GetTenantUsage(ctx, tenant);
    if (!usage.ok()) return usage.status();
    known = Known{usage->stored_bytes, usage->conversations, now, added};
    absl::MutexLock lock(&mu_);
    Tenant& t = tenants_[tenant];
    t.known = known;
    added = t.added;
  }
  // What this replica appended since the read began counts on top of it
  // (an append the read already saw may count twice: the safe side).
  const int64_t stored = known.stored_bytes + (added - known.added_at_read);
  return CheckTenantLimits(tenant, convstate::TenantUsage{known.conversations, stored}, adding,
                           0, limits);
}

void TenantBytes::Added(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it != tenants_.end()) it->second.added += bytes;
}

}  // namespace convstate
