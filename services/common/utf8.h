#ifndef CONVSTATE_SERVICES_COMMON_UTF8_H_
#define CONVSTATE_SERVICES_COMMON_UTF8_H_

// UTF-8 checks and cuts. Every cut the service makes of text (tool output
// heads and tails, summary lines, token budgets) goes through these, so
// that nothing it writes ends inside a character.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace convstate {

// True if `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` with every byte that does not begin a well-formed character
// replaced by U+FFFD: for text from outside (a backend's answer) that the
// service stores or sends on.
std::string ToValidUtf8(absl::string_view text);

// The largest character boundary at or before `pos` (clamped to the size).
size_t Utf8Floor(absl::string_view text, size_t pos);

// The smallest character boundary at or after `pos` (clamped to the size).
size_t Utf8Ceil(absl::string_view text, size_t pos);

// The longest prefix of at most `max_bytes` that ends on a character
// boundary.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

// The first `max_chars` characters (code points) of `text`, counted by
// their lead bytes (as PostgreSQL's left() counts them).
absl::string_view Utf8PrefixChars(absl::string_view text, size_t max_chars);

// The longest suffix of at most `max_bytes` that starts on a character
// boundary.
absl::string_view Utf8Suffix(absl::string_view text, size_t max_bytes);

// Appends the UTF-8 encoding of `c` to `out`. `c` must be a Unicode scalar
// value (at most U+10FFFF, not a surrogate).
void AppendUtf8(char32_t c, std::string* out);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_UTF8_H_
