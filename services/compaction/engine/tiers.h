#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_

// The compaction tiers, cheapest first: what they are called and what makes
// them. A new tier is one value here, one line in the list of tiers.cc, and
// a file of its own (*_tier.cc) that plans its step and carries it out; the
// proto's CompactionTier gets the same value, so that clients learn its
// name.

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace convstate {

// Numbering matches convstate.v1.CompactionTier.
enum class Tier { kPrune = 1, kSummarize = 2, kFold = 3, kTruncate = 4 };

class CompactionTier;

struct TierEntry {
  Tier tier;
  // In audit rows, progress events, metrics and spans.
  const char* name;
  std::unique_ptr<CompactionTier> (*make)();
};

// Every tier, in the order a compaction plans and runs them.
absl::Span<const TierEntry> TierList();

// One of each tier of TierList(), in its order, made once: a tier holds no
// state.
const std::vector<std::unique_ptr<CompactionTier>>& Tiers();

// "prune", "summarize", ...
absl::string_view TierName(Tier tier);
std::optional<Tier> TierFromName(absl::string_view name);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_TIERS_H_
