#ifndef CONVSTATE_STORAGE_STORAGE_CONFORMANCE_INTERNAL_H_
#define CONVSTATE_STORAGE_STORAGE_CONFORMANCE_INTERNAL_H_

// What the conformance suite's files share besides the fixture
// (storage_conformance.h), internal to the storage_conformance target.
// Defined, each with what it makes, in storage_conformance.cc.

#include <cstdint>
#include <string>
#include <vector>

#include "storage/storage.h"

namespace convstate {

ItemData Message(Role role, const std::string& text);
std::vector<int64_t> Sequences(const std::vector<Item>& items);
// A request erasing `sequences` of `key`'s conversation for the reason
// "erasure", each left as `tombstone` of `tokens` tokens.
RedactRequest Erasure(const ConversationKey& key, std::vector<int64_t> sequences,
                      const std::string& tombstone = "[erased]", int64_t tokens = 1);
void AppendSix(Storage& storage, const CallContext& ctx, const ConversationKey& key);
CompactionEvent Event(const std::string& name);

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_STORAGE_CONFORMANCE_INTERNAL_H_
