#ifndef CONVSTATE_SERVICES_TOKENIZER_UNICODE_CLASS_H_
#define CONVSTATE_SERVICES_TOKENIZER_UNICODE_CLASS_H_

#include <cstddef>
#include <cstdint>

namespace convstate::unicode {

// The character classes that tokenizer split patterns use, as bit flags.
enum Class : uint8_t {
  kLetter = 1 << 0,     // \p{L}
  kNumber = 1 << 1,     // \p{N}
  kUpperish = 1 << 2,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerish = 1 << 3,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kSpace = 1 << 4,      // \s: the White_Space property
  kMark = 1 << 5,       // \p{M}
};

// The classes of code point `c`, by Unicode 16.0 (General_Category and
// White_Space, the version the reference tokenizer's regex engine uses).
// A table lookup in the BMP, a binary search above it.
uint8_t ClassOf(char32_t c);

// Whether `c` is assigned in Unicode 16.0 (General_Category other than Cn).
// Surrogates count as assigned, though UTF-8 cannot carry them.
bool IsAssigned(char32_t c);

// Whether `c` is a surrogate code point (U+D800..U+DFFF).
inline bool IsSurrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

// Decodes the UTF-8 character at `s[0..n)`; sets `len` to its byte length.
// Malformed bytes decode as U+FFFD with length 1.
inline char32_t DecodeUtf8(const unsigned char* s, size_t n, int& len) {
  const unsigned char c = s[0];
  if (c < 0x80) {
    len = 1;
    return c;
  }
  if ((c & 0xE0) == 0xC0 && n >= 2) {
    len = 2;
    return (char32_t(c & 0x1F) << 6) | (s[1] & 0x3F);
  }
  if ((c & 0xF0) == 0xE0 && n >= 3) {
    len = 3;
    return (char32_t(c & 0x0F) << 12) | (char32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
  }
  if ((c & 0xF8) == 0xF0 && n >= 4) {
    len = 4;
    return (char32_t(c & 0x07) << 18) | (char32_t(s[1] & 0x3F) << 12) |
           (char32_t(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
  }
  len = 1;
  return 0xFFFD;
}

}  // namespace convstate::unicode

#endif  // CONVSTATE_SERVICES_TOKENIZER_UNICODE_CLASS_H_
