#include "services/api/tenant_quota.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace convstate {

TenantQuota::TenantQuota(LimitsOf limits, Storage* storage, absl::Duration max_age)
    : limits_(std::move(limits)), storage_(storage), max_age_(max_age) {}

absl::Status TenantQuota::AdmitConversation(const CallContext& ctx, const std::string& tenant) {
  if (!limits_) return absl::OkStatus();
  const int64_t max = limits_(tenant).max_conversations;
  if (max <= 0) return absl::OkStatus();
  absl::StatusOr<TenantUsage> usage = storage_->GetTenantUsage(ctx, tenant);
  if (!usage.ok()) return usage.status();
  if (usage->conversations >= max) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", tenant, "' holds ", usage->conversations,
        " conversations, its limit (max_conversations ", max,
        "); delete conversations or raise the limit"));
  }
  return absl::OkStatus();
}

absl::Status TenantQuota::AdmitBytes(const CallContext& ctx, const std::string& tenant,
                                     int64_t bytes) {
  if (!limits_) return absl::OkStatus();
  const int64_t max = limits_(tenant).max_stored_bytes;
  if (max <= 0) return absl::OkStatus();
  int64_t held = 0;
  bool fresh = false;
  {
    absl::MutexLock lock(&mu_);
    const Seen& seen = seen_[tenant];
    if (absl::Now() - seen.read_at < max_age_) {
      held = seen.stored_bytes + seen.appended_since;
      fresh = true;
    }
  }
  if (!fresh) {
    const absl::Time read_at = absl::Now();
    absl::StatusOr<TenantUsage> usage = storage_->GetTenantUsage(ctx, tenant);
    if (!usage.ok()) return usage.status();
    held = usage->stored_bytes;
    absl::MutexLock lock(&mu_);
    seen_[tenant] = Seen{usage->stored_bytes, read_at, 0};
  }
  if (held + bytes > max) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", tenant, "' stores ", held, " bytes; ", bytes,
        " more would pass its limit (max_stored_bytes ", max,
        "); delete conversations or raise the limit"));
  }
  return absl::OkStatus();
}

void TenantQuota::Appended(const std::string& tenant, int64_t bytes) {
  if (!limits_) return;
  absl::MutexLock lock(&mu_);
  auto it = seen_.find(tenant);
  if (it != seen_.end()) it->second.appended_since += bytes;
}

}  // namespace convstate
