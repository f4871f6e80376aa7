#ifndef CONVSTATE_STORAGE_DISTRIBUTION_KEY_H_
#define CONVSTATE_STORAGE_DISTRIBUTION_KEY_H_

#include <cstdint>

#include "services/core/types.h"

namespace convstate {

// The conversation's key in PostgreSQL (conv_key): the column every table is
// partitioned, and on Citus distributed, by. It is the first 63 bits of
// SHA-256(tenant_id, a NUL byte, conversation_id), so any replica computes it
// from a request with no lookup, and every statement about one conversation
// names the one partition or shard that holds it. Migration 0013's SQL
// function conversation_key() computes the same.
int64_t DistributionKey(const ConversationKey& key);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_DISTRIBUTION_KEY_H_
