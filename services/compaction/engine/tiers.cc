#include "services/compaction/engine/tiers.h"

#include "services/compaction/engine/tier.h"

namespace convstate {

// Each defined in its *_tier.cc.
std::unique_ptr<CompactionTier> NewPruneTier();
std::unique_ptr<CompactionTier> NewSummarizeTier();
std::unique_ptr<CompactionTier> NewFoldTier();
std::unique_ptr<CompactionTier> NewTruncateTier();

namespace {

constexpr TierEntry kTierList[] = {
    {Tier::kPrune, "prune", &NewPruneTier},
    {Tier::kSummarize, "summarize", &NewSummarizeTier},
    {Tier::kFold, "fold", &NewFoldTier},
    {Tier::kTruncate, "truncate", &NewTruncateTier},
};

}  // namespace

absl::Span<const TierEntry> TierList() { return kTierList; }

const std::vector<std::unique_ptr<CompactionTier>>& Tiers() {
  static const auto* const tiers = [] {
    auto* made = new std::vector<std::unique_ptr<CompactionTier>>();
    for (const TierEntry& e : kTierList) made->push_back(e.make());
    return made;
  }();
  return *tiers;
}

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
