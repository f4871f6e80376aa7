#include "storage/distribution_key.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/sha256.h"

namespace convstate {

int64_t DistributionKey(const ConversationKey& key) {
  const std::string digest =
      Sha256::Hex(absl::StrCat(key.tenant_id, std::string(1, '\0'), key.conversation_id));
  uint64_t first = 0;
  // 16 lowercase hex digits always parse.
  if (!absl::SimpleHexAtoi(digest.substr(0, 16), &first)) std::abort();
  return static_cast<int64_t>(first & 0x7fffffffffffffffULL);
}

}  // namespace convstate
