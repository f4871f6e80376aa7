#include "services/tokenizer/pretokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(SplitPattern pattern, absl::string_view text) {
  std::vector<std::string> pieces;
  Pretokenizer(pattern).Split(text, [&](absl::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

// Expected splits below are derived by hand from the regexes in
// pretokenizer.h; the golden test checks the end result against the
// reference tokenizer.
TEST(PretokenizerTest, Cl100kWordsSpacesAndContractions) {
  EXPECT_THAT(Split(SplitPattern::kCl100k, "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(Split(SplitPattern::kCl100k, "it's 'sad"), ElementsAre("it", "'s", " '", "sad"));
  EXPECT_THAT(Split(SplitPattern::kCl100k, "WE'RE"), ElementsAre("WE", "'RE"));
  EXPECT_THAT(Split(SplitPattern::kCl100k, "'\xC5\xBF"), ElementsAre("'\xC5\xBF"));  // 'ſ
}

TEST(PretokenizerTest, Cl100kDigitsGroupByThree) {
  EXPECT_THAT(Split(SplitPattern::kCl100k, "1234567"), ElementsAre("123", "456", "7"));
  EXPECT_THAT(Split(SplitPattern::kCl100k, "a 12"), ElementsAre("a", " ", "12"));
}

TEST(PretokenizerTest, Cl100kWhitespaceRules) {
  // \s+(?!\S) leaves the last space to the next word.
  EXPECT_THAT(Split(SplitPattern::kCl100k, "a   b"), ElementsAre("a", "  ", " b"));
  // \s*[\r\n]+ ends at the last newline of a whitespace run.
  EXPECT_THAT(Split(SplitPattern::kCl100k, "a \n\n  b"), ElementsAre("a", " \n\n", " ", " b"));
  // Trailing whitespace is one piece.
  EXPECT_THAT(Split(SplitPattern::kCl100k, "a   "), ElementsAre("a", "   "));
  // A tab is a valid prefix of a word.
  EXPECT_THAT(Split(SplitPattern::kCl100k, "\tfoo"), ElementsAre("\tfoo"));
}

TEST(PretokenizerTest, Cl100kSymbols) {
  EXPECT_THAT(Split(SplitPattern::kCl100k, "x = !!\n\ny"), ElementsAre("x", " =", " !!\n\n", "y"));
  EXPECT_THAT(Split(SplitPattern::kCl100k, "a/b"), ElementsAre("a", "/b"));
}

TEST(PretokenizerTest, O200kCaseRules) {
  EXPECT_THAT(Split(SplitPattern::kO200k, "HelloWORLD"), ElementsAre("Hello", "WORLD"));
  EXPECT_THAT(Split(SplitPattern::kO200k, "iPhone"), ElementsAre("i", "Phone"));
  EXPECT_THAT(Split(SplitPattern::kO200k, "ABCdef"), ElementsAre("ABCdef"));
  EXPECT_THAT(Split(SplitPattern::kO200k, "they're"), ElementsAre("they're"));
  EXPECT_THAT(Split(SplitPattern::kO200k, "DON'T"), ElementsAre("DON'T"));
}

TEST(PretokenizerTest, O200kSymbolsKeepSlashesAndNewlines) {
  EXPECT_THAT(Split(SplitPattern::kO200k, "a//\nb"), ElementsAre("a", "//\n", "b"));
}

TEST(PretokenizerTest, PiecesAlwaysCoverTheText) {
  const std::string text =
      "Grüße 你好 e\xCC\x81 \xF0\x9F\x9A\x80\xF0\x9F\x9A\x80 1234 x\r\n\r\n  y\t\tz '' 'll";
  for (SplitPattern p : {SplitPattern::kCl100k, SplitPattern::kO200k}) {
    std::string joined;
    for (const std::string& piece : Split(p, text)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace convstate
