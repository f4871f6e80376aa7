#ifndef CONVSTATE_STORAGE_STORAGE_CONFORMANCE_H_
#define CONVSTATE_STORAGE_STORAGE_CONFORMANCE_H_

// The conformance suite every Storage backend passes. A backend's test
// instantiates it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, StorageConformanceTest,
//       testing::Values(StorageFactory{"memory", [] { return NewMemoryStorage(); }}),
//       StorageFactoryName);
//
// Tests use a fresh tenant each, so one database may serve the whole suite.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/storage.h"

namespace convstate {

// The items of one ListItems page of at most `rows` rows.
absl::StatusOr<std::vector<Item>> ItemRows(Storage& storage, const CallContext& ctx,
                                           const ConversationKey& key, int64_t after, int rows);

// A summary chunk of items `from`..`through` reading `text`, as a
// summarizer would have made it.
SummaryChunk Chunk(int64_t from, int64_t through, const std::string& text);

struct StorageFactory {
  std::string name;
  std::function<std::unique_ptr<Storage>()> make;
};

inline std::string StorageFactoryName(
    const testing::TestParamInfo<StorageFactory>& info) {
  return info.param.name;
}

class StorageConformanceTest : public testing::TestWithParam<StorageFactory> {
 protected:
  void SetUp() override;

  // A conversation key in this test's own tenant.
  ConversationKey Key(const std::string& conversation_id) const;
  // Creates conversation `id` with model "test-model".
  Conversation Create(const std::string& id);
  // Appends one user message per call.
  AppendResult AppendText(const ConversationKey& key, const std::string& text);

  std::unique_ptr<Storage> storage_;
  std::string tenant_;
  CallContext ctx_;
};

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_STORAGE_CONFORMANCE_H_
