#include "services/common/sha256.h"

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(Sha256Test, KnownDigestsAndIncrementalReads) {
  EXPECT_EQ(Sha256::Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.Update("a");
  const std::string partial = h.HexDigest();
  h.Update("bc");
  EXPECT_EQ(partial, Sha256::Hex("a"));
  EXPECT_EQ(h.HexDigest(), Sha256::Hex("abc"));
}

TEST(Sha256Test, HmacOfTheStandardExample) {
  EXPECT_EQ(HmacSha256Hex("key", "The quick brown fox jumps over the lazy dog"),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
  EXPECT_NE(HmacSha256Hex("other key", "abc"), HmacSha256Hex("key", "abc"));
}

}  // namespace
}  // namespace convstate
