#ifndef CONVSTATE_SERVICES_TOKENIZER_TOKENS_H_
#define CONVSTATE_SERVICES_TOKENIZER_TOKENS_H_

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "services/core/types.h"

namespace convstate {

// Counts tokens of text the way one model family's tokenizer does.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Tokens in `text` (valid UTF-8).
  virtual int64_t CountTokens(absl::string_view text) const = 0;
  // True when counts are an estimate rather than the model's own.
  virtual bool approximate() const = 0;
};

// An estimate of `bytes_per_token` UTF-8 bytes per token, rounded up. Used
// for models without an exact tokenizer; 4.0 is the usual figure for
// English text with BPE vocabularies.
std::unique_ptr<Tokenizer> NewApproximateTokenizer(double bytes_per_token = 4.0);

// What `item` costs in a model's view: its content, its tool name and call
// id, and `per_message` tokens for the chat format around it.
int64_t CountItemTokens(const Tokenizer& tokenizer, const ItemData& item, int64_t per_message);

// What a system message with `text` costs; 0 for empty text.
int64_t CountSystemTokens(const Tokenizer& tokenizer, absl::string_view text,
                          int64_t per_message);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_TOKENIZER_TOKENS_H_
