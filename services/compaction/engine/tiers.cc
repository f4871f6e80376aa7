#include "services/compaction/engine/tiers.h"

namespace convstate {

absl::string_view TierName(Tier tier) {
  for (const TierEntry& e : kTierList) {
    if (e.tier == tier) return e.name;
  }
  return "unknown";
}

std::optional<Tier> TierFromName(absl::string_view name) {
  for (const TierEntry& e : kTierList) {
    if (e.name == name) return e.tier;
  }
  return std::nullopt;
}

}  // namespace convstate
