#include "services/common/fingerprint.h"

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(FingerprintTest, IsStableAcrossRuns) {
  // Pinned value (computed independently with a few lines of Python): a change here would invalidate stored idempotency keys and
  // migration checksums.
  EXPECT_EQ(Fingerprinter().Add("convstate").Hex(), "adc0a62062beae4f");
}

TEST(FingerprintTest, FieldBoundariesMatter) {
  EXPECT_NE(Fingerprinter().Add("ab").Add("c").value(),
            Fingerprinter().Add("a").Add("bc").value());
}

TEST(FingerprintTest, IntegersAndStringsDiffer) {
  EXPECT_NE(Fingerprinter().Add(int64_t{1}).value(),
            Fingerprinter().Add(int64_t{2}).value());
  EXPECT_EQ(Fingerprinter().Add("x").Add(int64_t{7}).value(),
            Fingerprinter().Add("x").Add(int64_t{7}).value());
}

}  // namespace
}  // namespace convstate
