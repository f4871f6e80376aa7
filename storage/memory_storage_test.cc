#include "storage/memory_storage.h"

#include "storage/storage_conformance.h"

namespace convstate {
namespace {

INSTANTIATE_TEST_SUITE_P(Memory, StorageConformanceTest,
                         testing::Values(StorageFactory{"memory",
                                                        [] { return NewMemoryStorage(); }}),
                         StorageFactoryName);

}  // namespace
}  // namespace convstate
