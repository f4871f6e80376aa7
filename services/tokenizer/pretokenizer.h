#ifndef CONVSTATE_SERVICES_TOKENIZER_PRETOKENIZER_H_
#define CONVSTATE_SERVICES_TOKENIZER_PRETOKENIZER_H_

#include <cstddef>
#include <vector>

#include "absl/strings/string_view.h"

namespace convstate {

// The split patterns of OpenAI's encodings. Text is cut into pieces by the
// pattern before byte-pair encoding; tokens never cross a piece boundary.
enum class SplitPattern {
  // '(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kCl100k,
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?|
  // \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kO200k,
};

// Finds pieces exactly as the regex engine of the reference implementation
// does (leftmost-first alternation, greedy quantifiers with backtracking),
// without a regex engine: in time linear in the text.
class Pretokenizer {
 public:
  explicit Pretokenizer(SplitPattern pattern) : pattern_(pattern) {}

  // The end (byte offset) of the piece of `text` that starts at `pos`
  // (`pos` < text.size()). `text` must be valid UTF-8.
  size_t PieceEnd(absl::string_view text, size_t pos) const;

  // Calls `emit(piece)` for every piece of `text`, in order.
  template <typename Emit>
  void Split(absl::string_view text, Emit&& emit) const {
    for (size_t pos = 0; pos < text.size();) {
      const size_t end = PieceEnd(text, pos);
      emit(text.substr(pos, end - pos));
      pos = end;
    }
  }

 private:
  SplitPattern pattern_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_TOKENIZER_PRETOKENIZER_H_
