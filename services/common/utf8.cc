#include "services/common/utf8.h"

#include <algorithm>
#include <cstdint>

namespace convstate {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The length of the well-formed character at s[i] (n bytes in all), or 0
// if none starts there.
size_t CharLength(const unsigned char* s, size_t i, size_t n) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t min;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (n - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t len = CharLength(s, i, text.size());
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ToValidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = CharLength(s, i, text.size());
    if (len == 0) {
      AppendUtf8(0xFFFD, &out);
      ++i;
      continue;
    }
    out.append(text.data() + i, len);
    i += len;
  }
  return out;
}

size_t Utf8Floor(absl::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  while (pos > 0 && pos < text.size() && IsContinuation(text[pos])) --pos;
  return pos;
}

size_t Utf8Ceil(absl::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  while (pos < text.size() && IsContinuation(text[pos])) ++pos;
  return pos;
}

absl::string_view Utf8PrefixChars(absl::string_view text, size_t max_chars) {
  size_t end = 0;
  for (size_t chars = 0; end < text.size() && chars < max_chars; ++chars) {
    ++end;
    while (end < text.size() && IsContinuation(text[end])) ++end;
  }
  return text.substr(0, end);
}

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return text.substr(0, Utf8Floor(text, max_bytes));
}

absl::string_view Utf8Suffix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return text.substr(Utf8Ceil(text, text.size() - max_bytes));
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace convstate
