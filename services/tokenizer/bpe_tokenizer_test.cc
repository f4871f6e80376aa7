#include "services/tokenizer/bpe_tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;

// All 256 bytes, then `merges` in rank order.
std::vector<std::pair<std::string, uint32_t>> Vocabulary(const std::vector<std::string>& merges) {
  std::vector<std::pair<std::string, uint32_t>> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(std::string(1, static_cast<char>(b)), b);
  for (const std::string& m : merges) ranks.emplace_back(m, static_cast<uint32_t>(ranks.size()));
  return ranks;
}

TEST(BpeTokenizerTest, MergesLowestRankFirstAndLeftmostAmongEquals) {
  auto t = BpeTokenizer::FromRanks("toy", SplitPattern::kCl100k,
                                   Vocabulary({"aa", "ab", "aaa", "aab"}));
  ASSERT_TRUE(t.ok()) << t.status();
  // "aaab": pairs aa(256) at 0, aa(256) at 1, ab(257) at 2; the leftmost aa
  // merges -> [aa][a][b]. Then [aa]+[a] = aaa (258) and [a]+[b] = ab (257):
  // ab is lower -> [aa][ab]; "aaab" itself is not a token.
  EXPECT_THAT((*t)->Encode("aaab"), ElementsAre(256, 257));
  // "aaa": [aa][a] then aaa (258).
  EXPECT_THAT((*t)->Encode("aaa"), ElementsAre(258));
  EXPECT_THAT((*t)->Encode("ab"), ElementsAre(257));
  EXPECT_THAT((*t)->Encode("b"), ElementsAre('b'));
  // Pieces "aaab" (2 tokens) and " aaab" ([ ][aa][ab]: 3 tokens).
  EXPECT_EQ((*t)->CountTokens("aaab aaab"), 5);

}

TEST(BpeTokenizerTest, DecodeInvertsEncode) {
  auto t = BpeTokenizer::FromRanks("toy", SplitPattern::kO200k, Vocabulary({"he", "ll", "hell", "o w"}));
  ASSERT_TRUE(t.ok());
  const std::string text = "hello world, \xE4\xBD\xA0\xE5\xA5\xBD!";
  auto decoded = (*t)->Decode((*t)->Encode(text));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, text);
  EXPECT_EQ((*t)->Decode({999999}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BpeTokenizerTest, RejectsIncompleteVocabularies) {
  std::vector<std::pair<std::string, uint32_t>> ranks = {{"a", 0}};
  EXPECT_FALSE(BpeTokenizer::FromRanks("bad", SplitPattern::kCl100k, ranks).ok());
}

// Long pieces take the heap merge, short ones tiktoken's own loop; both must
// give the same tokens. A piece of one letter repeated is split by neither
// pattern, so its length decides the path.
TEST(BpeTokenizerTest, HeapMergeAgreesWithTheReferenceMerge) {
  std::vector<std::string> merges;
  std::mt19937 rng(7);
  const std::string alphabet = "abc";
  // Random merges over a small alphabet: many overlapping candidates.
  for (int i = 0; i < 300; ++i) {
    std::string m;
    const int len = 2 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) m += alphabet[rng() % alphabet.size()];
    if (std::find(merges.begin(), merges.end(), m) == merges.end()) merges.push_back(m);
  }
  auto t = BpeTokenizer::FromRanks("toy", SplitPattern::kCl100k, Vocabulary(merges));
  ASSERT_TRUE(t.ok()) << t.status();
  for (int trial = 0; trial < 200; ++trial) {
    const int len = 97 + static_cast<int>(rng() % 400);  // Above the small-piece limit.
    std::string text;
    for (int k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
    // The same piece encoded whole (heap) and as the concatenation of the
    // reference merge's... is not decomposable, so compare against a
    // brute-force merge written independently here.
    std::vector<std::string> parts;
    for (char c : text) parts.emplace_back(1, c);
    while (true) {
      size_t best = parts.size();
      size_t best_rank = SIZE_MAX;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = std::find(merges.begin(), merges.end(), parts[i] + parts[i + 1]);
        if (it != merges.end() && static_cast<size_t>(it - merges.begin()) < best_rank) {
          best_rank = it - merges.begin();
          best = i;
        }
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + best + 1);
    }
    std::vector<uint32_t> expected;
    for (const std::string& p : parts) {
      if (p.size() == 1) {
        expected.push_back(static_cast<unsigned char>(p[0]));
      } else {
        expected.push_back(256 + (std::find(merges.begin(), merges.end(), p) - merges.begin()));
      }
    }
    ASSERT_EQ((*t)->Encode(text), expected) << text;
  }
}

}  // namespace
}  // namespace convstate
