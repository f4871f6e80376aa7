#ifndef CONVSTATE_SERVICES_COMPACTION_ENGINE_KEEP_RULES_H_
#define CONVSTATE_SERVICES_COMPACTION_ENGINE_KEEP_RULES_H_

// The keep rules of a compaction policy: items they match stay verbatim,
// like pinned items, within the policy's budget.

#include <cstdint>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/profiles/profile.h"
#include "storage/contract.h"

namespace convstate {

struct Kept {
  // The live items the rules hold, newest first, that were not pinned.
  std::vector<int64_t> sequences;
  // Matches past the budget, left to compaction like any item.
  int over_budget = 0;
  int64_t over_budget_tokens = 0;
  int64_t budget = 0;
  // Items not matched at all: past kMaxKeepRuleBytes of content (the
  // newest are matched first), or reached after the deadline.
  int unmatched = 0;
};

// Marks the live items of `snapshot` that `profile`'s keep rules match as
// pinned (in the snapshot only), newest first while their tokens stay
// within policy.keep_budget_fraction of the window; says which, and what
// did not fit. Patterns that do not compile within kMaxKeepPatternMemory
// match nothing (they are checked when a policy is set); items past
// kMaxKeepRuleBytes of content (the newest are matched first) are not
// matched, nor those reached once `deadline` (the compaction's) has passed.
Kept ApplyKeepRules(const ModelProfile& profile, ContextSnapshot& snapshot,
                    absl::Time deadline = absl::InfiniteFuture());

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMPACTION_ENGINE_KEEP_RULES_H_
