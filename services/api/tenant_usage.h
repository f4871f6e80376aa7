#ifndef CONVSTATE_SERVICES_API_TENANT_USAGE_H_
#define CONVSTATE_SERVICES_API_TENANT_USAGE_H_

// A limited tenant's stored bytes, as each replica checks an append
// against max_stored_bytes without a row every append of the tenant would
// lock: the tenant's total (the sum of its conversations' stored bytes)
// read at most every `refresh`, plus what this replica appended since.
//
// The overshoot is bounded: past the limit by at most what other replicas
// append within one refresh, and what this replica's appends in flight
// together hold (each checked before the others are counted). Creating a
// conversation still counts it exactly (storage locks the tenant's row
// then: max_conversations holds without overshoot).

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/clock.h"
#include "storage/storage.h"

namespace convstate {

class TenantBytes {
 public:
  // `storage` and `clock` outlive it.
  TenantBytes(Storage* storage, const Clock* clock, absl::Duration refresh = absl::Seconds(1));

  // RESOURCE_EXHAUSTED, naming the limit, when `adding` bytes would take
  // `tenant` past limits.max_stored_bytes as this replica knows it; OK
  // without a limit.
  absl::Status Check(const CallContext& ctx, const std::string& tenant,
                     const TenantLimits& limits, int64_t adding);
  // Counts `bytes` an append of `tenant` stored, until the next refresh.
  void Added(const std::string& tenant, int64_t bytes);

 private:
  struct Known {
    int64_t stored_bytes = 0;
    int64_t conversations = 0;
    absl::Time read_at = absl::InfinitePast();
    // What this replica had added (`added`) when the read began: what it
    // added since counts on top of the figure read.
    int64_t added_at_read = 0;
  };
  struct Tenant {
    Known known;
    int64_t added = 0;
  };

  Storage* const storage_;
  const Clock* const clock_;
  const absl::Duration refresh_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_TENANT_USAGE_H_
