#include "services/compaction/engine/keep_rules.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
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

// Patterns kept compiled between compactions; past this many different
// ones the cache starts again.
constexpr size_t kMaxCompiledPatterns = 4096;

// `pattern` compiled, once for every compaction that uses it: compiling
// costs more than matching a view's items (keep_rules_benchmark). RE2 is
// safe to match from several threads at once.
std::shared_ptr<const RE2> Compiled(const std::string& pattern) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* const cache =
      new absl::flat_hash_map<std::string, std::shared_ptr<const RE2>>();
  absl::MutexLock lock(&mu);
  if (auto it = cache->find(pattern); it != cache->end()) return it->second;
  if (cache->size() >= kMaxCompiledPatterns) cache->clear();
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxKeepPatternMemory);
  auto re = std::make_shared<const RE2>(pattern, options);
  cache->emplace(pattern, re);
  return re;
}

}  // namespace

Kept ApplyKeepRules(const ModelProfile& profile, ContextSnapshot& snapshot,
                    absl::Time deadline) {
  Kept kept;
  const ModelProfile::Policy& policy = profile.policy;
  if (policy.keep.empty()) return kept;
  std::vector<std::shared_ptr<const RE2>> patterns;
  for (const KeepRule& rule : policy.keep) {
    patterns.push_back(rule.pattern.empty() ? nullptr : Compiled(rule.pattern));
  }
  kept.budget = FractionOfWindow(profile, policy.keep_budget_fraction);
  int64_t used = 0;
  int64_t matched_bytes = 0;
  std::vector<Item>& live = snapshot.live_items;
  for (auto it = live.rbegin(); it != live.rend(); ++it) {
    if (it->data.pinned) continue;
    matched_bytes += static_cast<int64_t>(it->data.content.size());
    if (matched_bytes > kMaxKeepRuleBytes || absl::Now() >= deadline) {
      ++kept.unmatched;
      continue;
    }
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
