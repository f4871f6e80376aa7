#include "services/common/fingerprint.h"

#include <string>

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
  // The empty string and the integer 0 (a string's length prefix alone);
  // a string of 8 bytes and the integer with those bytes.
  EXPECT_NE(Fingerprinter().Add("").value(), Fingerprinter().Add(int64_t{0}).value());
  EXPECT_NE(Fingerprinter().Add(int64_t{0}).Add(int64_t{0}).value(),
            Fingerprinter().Add("").Add("").value());
  EXPECT_NE(Fingerprinter().Add(std::string("\x01\0\0\0\0\0\0\0", 8)).value(),
            Fingerprinter().Add(int64_t{8}).Add(int64_t{1}).value());
  EXPECT_NE(Fingerprinter().Add(int64_t{1}).value(), Fingerprinter().Add(int64_t{2}).value());
  EXPECT_EQ(Fingerprinter().Add("x").Add(int64_t{7}).value(),
            Fingerprinter().Add("x").Add(int64_t{7}).value());
}

}  // namespace
}  // namespace convstate
