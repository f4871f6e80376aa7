#ifndef CONVSTATE_STORAGE_MEMORY_STORAGE_H_
#define CONVSTATE_STORAGE_MEMORY_STORAGE_H_

#include <memory>

#include "services/common/clock.h"
#include "storage/storage.h"

namespace convstate {

// A Storage held in process memory, for unit tests and `--storage=memory`.
// Passes the same conformance suite as the PostgreSQL backend; loses
// everything when the process exits.
// `clock` judges lease expiry.
std::unique_ptr<Storage> NewMemoryStorage(const Clock* clock = Clock::Real());

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_MEMORY_STORAGE_H_
