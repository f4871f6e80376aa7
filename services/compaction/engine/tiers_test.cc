#include "services/compaction/engine/tiers.h"

#include "gtest/gtest.h"
#include "services/compaction/engine/tier.h"

namespace convstate {
namespace {

// The list names each tier once, and what it makes is that tier: the
// planner and the runner take the list's order and names on trust.
TEST(TiersTest, EachTierOfTheListIsMadeOnceUnderItsName) {
  const auto& tiers = Tiers();
  ASSERT_EQ(tiers.size(), TierList().size());
  for (size_t i = 0; i < tiers.size(); ++i) {
    const TierEntry& e = TierList()[i];
    EXPECT_EQ(tiers[i]->tier(), e.tier) << e.name;
    EXPECT_EQ(TierName(e.tier), e.name);
    EXPECT_EQ(TierFromName(e.name), e.tier);
  }
  EXPECT_EQ(TierFromName("compress"), std::nullopt);
}

}  // namespace
}  // namespace convstate
