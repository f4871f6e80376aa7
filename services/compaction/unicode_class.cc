#include "services/compaction/unicode_class.h"

#include <array>

#include <unicode/uchar.h>

namespace convstate::unicode {
namespace {

uint8_t Compute(char32_t c) {
  uint8_t flags = 0;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER:
      flags = kLetter | kUpperish;
      break;
    case U_LOWERCASE_LETTER:
      flags = kLetter | kLowerish;
      break;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      flags = kLetter | kUpperish | kLowerish;
      break;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      flags = kMark | kUpperish | kLowerish;
      break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      flags = kNumber;
      break;
    default:
      break;
  }
  if (u_isUWhiteSpace(static_cast<UChar32>(c))) flags |= kSpace;
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

}  // namespace convstate::unicode
