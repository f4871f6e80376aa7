#include "services/tokenizer/pretokenizer.h"

#include "services/tokenizer/unicode_class.h"

namespace convstate {
namespace {

using unicode::ClassOf;

// A read-only view of the text with the class tests the patterns need.
class Text {
 public:
  explicit Text(absl::string_view t)
      : s_(reinterpret_cast<const unsigned char*>(t.data())), n_(t.size()) {}

  size_t size() const { return n_; }

  // Code point at `pos` and the position after it.
  char32_t At(size_t pos, size_t& next) const {
    if (s_[pos] < 0x80) {
      next = pos + 1;
      return s_[pos];
    }
    int len;
    const char32_t c = unicode::DecodeUtf8(s_ + pos, n_ - pos, len);
    next = pos + len;
    return c;
  }

  // Advances past characters whose classes satisfy `pred`.
  template <typename Pred>
  size_t Scan(size_t pos, Pred pred) const {
    while (pos < n_) {
      size_t next;
      const char32_t c = At(pos, next);
      if (!pred(c)) break;
      pos = next;
    }
    return pos;
  }

  // Byte length of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `pos`, or 0.
  size_t Contraction(size_t pos) const {
    if (pos >= n_ || s_[pos] != '\'') return 0;
    size_t p1;
    if (pos + 1 >= n_) return 0;
    const char32_t a = Fold(At(pos + 1, p1));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p1 - pos;
    if (p1 >= n_) return 0;
    size_t p2;
    const char32_t b = Fold(At(p1, p2));
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return p2 - pos;
    }
    return 0;
  }

 private:
  // Simple case folding, as far as the contraction letters need it.
  static char32_t Fold(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
    if (c == 0x017F) return 's';  // LATIN SMALL LETTER LONG S folds to s.
    return c;
  }

  const unsigned char* s_;
  size_t n_;
};

inline bool IsCrLf(char32_t c) { return c == '\r' || c == '\n'; }
inline bool IsLetter(char32_t c) { return ClassOf(c) & unicode::kLetter; }
inline bool IsNumber(char32_t c) { return ClassOf(c) & unicode::kNumber; }
inline bool IsSpace(char32_t c) { return ClassOf(c) & unicode::kSpace; }
inline bool IsUpperish(char32_t c) { return ClassOf(c) & unicode::kUpperish; }
inline bool IsLowerish(char32_t c) { return ClassOf(c) & unicode::kLowerish; }
// [^\r\n\p{L}\p{N}]
inline bool IsPrefix(char32_t c) {
  return !IsCrLf(c) && !(ClassOf(c) & (unicode::kLetter | unicode::kNumber));
}
// [^\s\p{L}\p{N}]
inline bool IsSymbol(char32_t c) {
  return !(ClassOf(c) & (unicode::kLetter | unicode::kNumber | unicode::kSpace));
}

// \p{N}{1,3}
size_t Digits(const Text& t, size_t pos) {
  size_t end = pos;
  for (int k = 0; k < 3 && end < t.size(); ++k) {
    size_t next;
    if (!IsNumber(t.At(end, next))) break;
    end = next;
  }
  return end;
}

// ` ?[^\s\p{L}\p{N}]+` followed by `trailer*`, or 0 if it does not match.
template <typename Trailer>
size_t Symbols(const Text& t, size_t pos, Trailer trailer) {
  size_t start = pos;
  size_t next;
  if (t.At(pos, next) == ' ' && next < t.size()) {
    size_t after;
    if (IsSymbol(t.At(next, after))) start = next;
  }
  size_t after_first;
  if (!IsSymbol(t.At(start, after_first))) return 0;
  const size_t end = t.Scan(after_first, IsSymbol);
  return t.Scan(end, trailer);
}

// `\s*[\r\n]+|\s+(?!\S)|\s+` at `pos`, where the character at `pos` is
// whitespace.
size_t Whitespace(const Text& t, size_t pos) {
  // The whitespace run, remembering the last CR/LF and the last character.
  size_t end = pos;
  size_t last_crlf_end = 0;
  size_t last_char_start = pos;
  while (end < t.size()) {
    size_t next;
    const char32_t c = t.At(end, next);
    if (!IsSpace(c)) break;
    if (IsCrLf(c)) last_crlf_end = next;
    last_char_start = end;
    end = next;
  }
  if (last_crlf_end != 0) return last_crlf_end;        // \s*[\r\n]+
  if (end == t.size()) return end;                     // \s+(?!\S) at the end
  if (last_char_start > pos) return last_char_start;   // \s+(?!\S): leave one
  return end;                                          // \s+
}

size_t Cl100kPiece(const Text& t, size_t pos) {
  size_t next;
  const char32_t c = t.At(pos, next);
  // '(?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c == '\'') {
    if (size_t k = t.Contraction(pos)) return pos + k;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (IsLetter(c)) return t.Scan(next, IsLetter);
  if (IsPrefix(c) && next < t.size()) {
    size_t after;
    if (IsLetter(t.At(next, after))) return t.Scan(after, IsLetter);
  }
  // \p{N}{1,3}
  if (IsNumber(c)) return Digits(t, pos);
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  if (size_t end = Symbols(t, pos, IsCrLf)) return end;
  return Whitespace(t, pos);
}

// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` from `start`,
// backtracking on the first run as the regex engine does; 0 if no match.
size_t UpperThenLower(const Text& t, size_t start, std::vector<size_t>& bounds) {
  bounds.clear();
  size_t p = start;
  bounds.push_back(p);
  while (p < t.size()) {
    size_t next;
    if (!IsUpperish(t.At(p, next))) break;
    p = next;
    bounds.push_back(p);
  }
  // Greedy first: the longest upper run after which a lower run starts.
  for (size_t k = bounds.size(); k-- > 0;) {
    const size_t at = bounds[k];
    if (at >= t.size()) continue;
    size_t next;
    if (IsLowerish(t.At(at, next))) return t.Scan(next, IsLowerish);
  }
  return 0;
}

size_t O200kPiece(const Text& t, size_t pos) {
  thread_local std::vector<size_t> bounds;
  size_t next;
  const char32_t c = t.At(pos, next);
  const bool prefix = IsPrefix(c) && next < t.size();
  // [^\r\n\p{L}\p{N}]?[U]*[L]+(?i:'s|...)?
  if (prefix) {
    if (size_t end = UpperThenLower(t, next, bounds)) return end + t.Contraction(end);
  }
  if (size_t end = UpperThenLower(t, pos, bounds)) return end + t.Contraction(end);
  // [^\r\n\p{L}\p{N}]?[U]+[L]*(?i:'s|...)?
  for (size_t start : {prefix ? next : pos, pos}) {
    size_t after;
    if (start < t.size() && IsUpperish(t.At(start, after))) {
      const size_t upper = t.Scan(after, IsUpperish);
      const size_t end = t.Scan(upper, IsLowerish);
      return end + t.Contraction(end);
    }
  }
  // \p{N}{1,3}
  if (IsNumber(c)) return Digits(t, pos);
  // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
  if (size_t end = Symbols(t, pos, [](char32_t ch) { return IsCrLf(ch) || ch == '/'; })) {
    return end;
  }
  return Whitespace(t, pos);
}

}  // namespace

size_t Pretokenizer::PieceEnd(absl::string_view text, size_t pos) const {
  const Text t(text);
  return pattern_ == SplitPattern::kCl100k ? Cl100kPiece(t, pos) : O200kPiece(t, pos);
}

}  // namespace convstate
