#include "services/compaction/engine/keep_rules.h"

#include <algorithm>
#include <memory>

#include "re2/re2.h"

namespace convstate {
namespace {

template <typename T>
bool AnyOf(const std::vector<T>& allowed, const T& value) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

bool Matches(const KeepRule& rule, const RE2* re, const Item& item) {
  if (item.data.kind == ItemKind::kSummaryMarker) return false;
  if (!AnyOf(rule.roles, item.data.role)) return false;
  if (!rule.tool_names.empty() && !AnyOf(rule.tool_names, item.data.tool_name)) return false;
  if (re == nullptr) return true;
  return re->ok() && RE2::PartialMatch(item.data.content, *re);
}

}  // namespace

Kept ApplyKeepRules(const ModelProfile& profile, ContextSnapshot& snapshot) {
  Kept kept;
  const ModelProfile::Policy& policy = profile.policy;
  if (policy.keep.empty()) return kept;
  RE2::Options options;
  options.set_log_errors(false);
  std::vector<std::unique_ptr<RE2>> patterns;
  for (const KeepRule& rule : policy.keep) {
    patterns.push_back(rule.pattern.empty() ? nullptr
                                            : std::make_unique<RE2>(rule.pattern, options));
  }
  kept.budget = FractionOfWindow(profile, policy.keep_budget_fraction);
  int64_t used = 0;
  std::vector<Item>& live = snapshot.live_items;
  for (auto it = live.rbegin(); it != live.rend(); ++it) {
    if (it->data.pinned) continue;
    bool match = false;
    for (size_t r = 0; r < policy.keep.size() && !match; ++r) {
      match = Matches(policy.keep[r], patterns[r].get(), *it);
    }
    if (!match) continue;
    if (used + it->data.token_count > kept.budget) {
      ++kept.over_budget;
      kept.over_budget_tokens += it->data.token_count;
      continue;
    }
    used += it->data.token_count;
    it->data.pinned = true;
    kept.sequences.push_back(it->sequence);
  }
  return kept;
}

}  // namespace convstate
