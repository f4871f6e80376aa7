// Exact agreement with the reference tokenizer on every character: every
// code point assigned in Unicode 16.0 (but surrogates), in contexts that
// expose the class the split patterns give it (tools/golden/
// generate_codepoints.js, which wrote the reference's token counts and id
// fingerprints). Needs the vocabularies that tools/test installs.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "services/common/utf8.h"
#include "services/tokenizer/bpe_tokenizer.h"
#include "services/tokenizer/unicode_class.h"

namespace convstate {
namespace {

// The generator's Entry(c): a letter on each side, four in a row, a digit,
// a space before, an underscore and a letter after.
void AppendEntry(char32_t c, std::string* out) {
  std::string ch;
  AppendUtf8(c, &ch);
  absl::StrAppend(out, "a", ch, "B", ch, ch, ch, ch, "1 ", ch, "_a\n");
}

// What the generator (tools/golden/generate_codepoints.js) records of a
// document's ids: FNV-1a over each id as 8 little-endian bytes, untagged.
std::string FingerprintOf(const std::vector<uint32_t>& ids) {
  uint64_t h = 14695981039346656037ull;
  for (uint32_t id : ids) {
    for (int k = 0; k < 8; ++k) {
      h ^= k < 4 ? (id >> (8 * k)) & 0xff : 0;
      h *= 1099511628211ull;
    }
  }
  return absl::StrFormat("%016x", h);
}

struct Document {
  std::string encoding;
  uint32_t first = 0;
  uint32_t last = 0;
  size_t tokens = 0;
  std::string fingerprint;
};

std::vector<Document> ReadGolden() {
  std::ifstream in(absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                                "/services/tokenizer/testdata/tokenizer_codepoints.txt"));
  std::vector<Document> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string first, last;
    Document d;
    fields >> d.encoding >> first >> last >> d.tokens >> d.fingerprint;
    if (!absl::SimpleHexAtoi(first, &d.first) || !absl::SimpleHexAtoi(last, &d.last) ||
        d.fingerprint.size() != 16) {
      ADD_FAILURE() << "malformed golden line: " << line;
      continue;
    }
    out.push_back(d);
  }
  return out;
}

TEST(TokenizerCodepointsTest, SameTokensAsTheReferenceForEveryAssignedCodePoint) {
  const char* vocab = std::getenv("CONVSTATE_VOCAB_DIR");
  ASSERT_NE(vocab, nullptr) << "CONVSTATE_VOCAB_DIR is not set: run under tools/test";
  const std::vector<Document> documents = ReadGolden();
  ASSERT_FALSE(documents.empty()) << "golden file missing";
  std::unique_ptr<BpeTokenizer> tokenizers[2];
  const char* names[2] = {"cl100k_base", "o200k_base"};
  for (int i = 0; i < 2; ++i) {
    auto t = BpeTokenizer::LoadFile(names[i], absl::StrCat(vocab, "/", names[i], ".tiktoken"));
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizers[i] = std::move(*t);
  }
  int64_t code_points = 0;
  int mismatches = 0;
  uint32_t covered_until[2] = {0, 0};  // Documents follow each other.
  for (const Document& d : documents) {
    const int e = d.encoding == names[0] ? 0 : 1;
    ASSERT_EQ(d.encoding, names[e]);
    ASSERT_GE(d.first, covered_until[e]) << "documents out of order";
    // Every code point skipped between documents is unassigned: the golden
    // file and this tokenizer's tables agree on what is assigned.
    for (uint32_t c = covered_until[e]; c < d.first; ++c) {
      ASSERT_TRUE(unicode::IsSurrogate(c) || !unicode::IsAssigned(c))
          << std::hex << "U+" << c << " is assigned here but not in the reference's data";
    }
    covered_until[e] = d.last + 1;
    std::string text;
    for (uint32_t c = d.first; c <= d.last; ++c) {
      if (unicode::IsSurrogate(c) || !unicode::IsAssigned(c)) continue;
      AppendEntry(c, &text);
      if (e == 0) ++code_points;
    }
    const std::vector<uint32_t> ids = tokenizers[e]->Encode(text);
    if ((ids.size() != d.tokens || FingerprintOf(ids) != d.fingerprint) && ++mismatches <= 10) {
      ADD_FAILURE() << d.encoding << std::hex << " U+" << d.first << "..U+" << d.last << std::dec
                    << ": " << ids.size() << " tokens, the reference " << d.tokens
                    << (ids.size() == d.tokens ? " (same count, other ids)" : "");
    }
    EXPECT_EQ(tokenizers[e]->CountTokens(text), static_cast<int64_t>(d.tokens));
  }
  // Unicode 16.0 assigns 292,531 code points that are not surrogates...
  // with the private-use planes; the file must cover all of them.
  EXPECT_EQ(code_points, 292531);
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << documents.size() << " documents differ";
}

}  // namespace
}  // namespace convstate
