#include "services/common/utf8.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("Gr\xC3\xBC\xC3\x9F" "e"));                 // Grüße
  EXPECT_TRUE(IsValidUtf8("\xE4\xBD\xA0\xE5\xA5\xBD"));               // 你好
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB"));  // ZWJ emoji
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));                        // U+10FFFF
}

TEST(Utf8Test, RejectsMalformedText) {
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // Lone continuation byte.
  EXPECT_FALSE(IsValidUtf8("\xC3"));                  // Truncated sequence.
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));              // Overlong '/'.
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));          // Overlong, 3 bytes.
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));          // Surrogate U+D800.
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));      // Above U+10FFFF.
  EXPECT_FALSE(IsValidUtf8("ok\xE4\xBD"));            // Cut mid-character.
}

// Every cut of text mixing 1-, 2-, 3- and 4-byte characters, combining
// marks and emoji sequences, at every byte position, is valid UTF-8.
// Every scalar value encodes to valid UTF-8 of the right length, which
// decodes back to it.
TEST(Utf8Test, AppendUtf8EncodesEveryScalarValue) {
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(c, &s);
    ASSERT_TRUE(IsValidUtf8(s)) << std::hex << static_cast<uint32_t>(c);
    const size_t want = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), want) << std::hex << static_cast<uint32_t>(c);
    char32_t back = want == 1 ? static_cast<unsigned char>(s[0])
                              : static_cast<unsigned char>(s[0]) & (0x7F >> want);
    for (size_t i = 1; i < want; ++i) back = (back << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
    ASSERT_EQ(back, c);
  }
  std::string euro;
  AppendUtf8(0x20AC, &euro);
  EXPECT_EQ(euro, "\xE2\x82\xAC");
}

TEST(Utf8Test, EveryCutAtEveryPositionIsValid) {
  const std::vector<std::string> samples = {
      "Gr\xC3\xBC\xC3\x9F" "e \xE2\x94\x80\xE2\x94\x82 box",                   // Grüße ─│
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C",                 // 你好世界
      "e\xCC\x81t\xC3\xA9 n\xCC\x83",                                      // combining marks
      "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB \xF0\x9F\x87\xA9\xF0\x9F\x87\xAA",  // ZWJ, flag
      "a\xF0\x90\x8D\x88" "b\xE2\x82\xAC\xC2\xA2$",                      // 4, 3, 2, 1 bytes
  };
  for (const std::string& text : samples) {
    ASSERT_TRUE(IsValidUtf8(text));
    for (size_t n = 0; n <= text.size() + 1; ++n) {
      const absl::string_view head = Utf8Prefix(text, n);
      const absl::string_view tail = Utf8Suffix(text, n);
      EXPECT_TRUE(IsValidUtf8(head)) << n;
      EXPECT_TRUE(IsValidUtf8(tail)) << n;
      EXPECT_LE(head.size(), n);
      EXPECT_LE(tail.size(), n);
      // As long as possible: at most three bytes short (one character).
      EXPECT_GE(head.size() + 3, std::min(n, text.size()));
      EXPECT_GE(tail.size() + 3, std::min(n, text.size()));
      const size_t floor = Utf8Floor(text, n);
      const size_t ceil = Utf8Ceil(text, n);
      EXPECT_TRUE(IsValidUtf8(absl::string_view(text).substr(0, floor)));
      EXPECT_TRUE(IsValidUtf8(absl::string_view(text).substr(ceil)));
      EXPECT_LE(floor, std::min(n, text.size()));
      EXPECT_GE(ceil, std::min(n, text.size()));
    }
  }
}

TEST(Utf8Test, ToValidUtf8ReplacesWhatIsNotACharacter) {
  EXPECT_EQ(ToValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(ToValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // Cut short.
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // A surrogate.
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xC0\xAF\xF5\x80\x80\x80 ok")));
}

TEST(Utf8PrefixCharsTest, CountsCharactersNotBytes) {
  EXPECT_EQ(Utf8PrefixChars("f\xC3\xBCnf", 2), "f\xC3\xBC");
  EXPECT_EQ(Utf8PrefixChars("f\xC3\xBCnf", 0), "");
  EXPECT_EQ(Utf8PrefixChars("abc", 10), "abc");
  EXPECT_EQ(Utf8PrefixChars("\xF0\x9F\x98\x80x", 1), "\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace convstate
