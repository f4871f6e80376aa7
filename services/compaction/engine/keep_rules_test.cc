#include "services/compaction/engine/keep_rules.h"

#include <string>

#include "gtest/gtest.h"

namespace convstate {
namespace {

Item Stored(int64_t sequence, std::string content) {
  Item item;
  item.sequence = sequence;
  item.turn_index = sequence;
  item.data.role = Role::kUser;
  item.data.kind = ItemKind::kMessage;
  item.data.content = std::move(content);
  item.data.token_count = 10;
  return item;
}

ModelProfile WithRule(const std::string& pattern) {
  ModelProfile p;
  KeepRule rule;
  rule.pattern = pattern;
  p.policy.keep.push_back(rule);
  p.policy.keep_budget_fraction = 0.5;
  return p;
}

TEST(KeepRulesTest, HoldTheNewestMatchesWithinTheirBudget) {
  ContextSnapshot s;
  s.live_items = {Stored(1, "ticket OPS-1"), Stored(2, "nothing here"), Stored(3, "ticket OPS-3")};
  const Kept kept = ApplyKeepRules(WithRule("ticket [A-Z]+-[0-9]+"), s);
  EXPECT_EQ(kept.sequences, (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(s.live_items[0].data.pinned);
  EXPECT_FALSE(s.live_items[1].data.pinned);
  EXPECT_EQ(kept.unmatched, 0);
}

// One compaction matches at most kMaxKeepRuleBytes of content, the newest
// first: what lies past it is not held.
TEST(KeepRulesTest, MatchAtMostTheirByteBudgetNewestFirst) {
  const std::string big(kMaxKeepRuleBytes / 2 + 1, 'x');
  ContextSnapshot s;
  s.live_items = {Stored(1, big + " keep"), Stored(2, big + " keep"), Stored(3, "keep")};
  const Kept kept = ApplyKeepRules(WithRule("keep"), s);
  EXPECT_EQ(kept.sequences, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(kept.unmatched, 1);
  EXPECT_FALSE(s.live_items[0].data.pinned);
}

// A pattern that would take more than kMaxKeepPatternMemory to compile
// matches nothing (a policy setting it is refused before it is stored).
TEST(KeepRulesTest, APatternPastItsMemoryMatchesNothing) {
  ContextSnapshot s;
  s.live_items = {Stored(1, std::string(200, 'a'))};
  EXPECT_TRUE(ApplyKeepRules(WithRule("\\pL{100}"), s).sequences.empty());
  EXPECT_EQ(ApplyKeepRules(WithRule("\\pL{10}"), s).sequences, (std::vector<int64_t>{1}));
}

// Matching stops at the compaction's deadline: what is left is unmatched,
// and left to compaction like any item.
TEST(KeepRulesTest, NothingIsMatchedPastTheDeadline) {
  ContextSnapshot s;
  s.live_items = {Stored(1, "keep this"), Stored(2, "keep that")};
  const Kept late = ApplyKeepRules(WithRule("keep"), s, absl::Now() - absl::Seconds(1));
  EXPECT_TRUE(late.sequences.empty());
  EXPECT_EQ(late.unmatched, 2);
  EXPECT_FALSE(s.live_items[0].data.pinned);
  EXPECT_EQ(ApplyKeepRules(WithRule("keep"), s, absl::Now() + absl::Minutes(1)).sequences.size(),
            2u);
}

}  // namespace
}  // namespace convstate
