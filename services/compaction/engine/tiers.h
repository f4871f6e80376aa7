#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_

// The compaction tiers, cheapest first: what they are called and what makes
// them. A new tier is one value and one line here, and a file of its own
// (*_tier.cc) defining its factory; the proto's CompactionTier gets the same
// value, so that clients learn its name.

#include <memory>
#include <optional>

#include "absl/strings/string_view.h"

namespace convstate {

// Numbering matches convstate.v1.CompactionTier.
enum class Tier { kPrune = 1, kSummarize = 2, kFold = 3, kTruncate = 4 };

class CompactionTier;
std::unique_ptr<CompactionTier> NewPruneTier();
std::unique_ptr<CompactionTier> NewSummarizeTier();
std::unique_ptr<CompactionTier> NewFoldTier();
std::unique_ptr<CompactionTier> NewTruncateTier();

struct TierEntry {
  Tier tier;
  // In audit rows, progress events, metrics and spans.
  const char* name;
  std::unique_ptr<CompactionTier> (*make)();
};

// Every tier, in the order a compaction runs them.
inline constexpr TierEntry kTierList[] = {
    {Tier::kPrune, "prune", &NewPruneTier},
    {Tier::kSummarize, "summarize", &NewSummarizeTier},
    {Tier::kFold, "fold", &NewFoldTier},
    {Tier::kTruncate, "truncate", &NewTruncateTier},
};

// "prune", "summarize", ...
absl::string_view TierName(Tier tier);
std::optional<Tier> TierFromName(absl::string_view name);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_
