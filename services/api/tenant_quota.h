#ifndef CONVSTATE_SERVICES_API_TENANT_QUOTA_H_
#define CONVSTATE_SERVICES_API_TENANT_QUOTA_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/core/types.h"
#include "storage/storage.h"

namespace convstate {

// Tenants' limits on what they hold: conversations (checked against
// storage at each CreateConversation) and stored bytes (checked at each
// AppendTurn against a figure read at most `max_age` ago on this replica,
// plus what this replica appended since). Over a limit: RESOURCE_EXHAUSTED
// naming it. Thread-safe.
class TenantQuota {
 public:
  using LimitsOf = std::function<TenantLimits(const std::string& tenant)>;

  // `limits` null: no limits. `storage` must outlive this object.
  TenantQuota(LimitsOf limits, Storage* storage, absl::Duration max_age = absl::Seconds(1));

  // One more conversation for `tenant`.
  absl::Status AdmitConversation(const CallContext& ctx, const std::string& tenant);
  // `bytes` more of content for `tenant`.
  absl::Status AdmitBytes(const CallContext& ctx, const std::string& tenant, int64_t bytes);
  // An append of `bytes` committed.
  void Appended(const std::string& tenant, int64_t bytes);

 private:
  struct Seen {
    int64_t stored_bytes = 0;
    absl::Time read_at = absl::InfinitePast();
    int64_t appended_since = 0;
  };

  const LimitsOf limits_;
  Storage* const storage_;
  const absl::Duration max_age_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Seen> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_TENANT_QUOTA_H_
