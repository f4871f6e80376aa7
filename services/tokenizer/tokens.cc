#include "services/tokenizer/tokens.h"

#include <cmath>

namespace convstate {
namespace {

class ApproximateTokenizer final : public Tokenizer {
 public:
  explicit ApproximateTokenizer(double bytes_per_token)
      : bytes_per_token_(bytes_per_token > 0 ? bytes_per_token : 4.0) {}

  int64_t CountTokens(absl::string_view text) const override {
    return static_cast<int64_t>(std::ceil(static_cast<double>(text.size()) / bytes_per_token_));
  }
  bool approximate() const override { return true; }

 private:
  const double bytes_per_token_;
};

}  // namespace

std::unique_ptr<Tokenizer> NewApproximateTokenizer(double bytes_per_token) {
  return std::make_unique<ApproximateTokenizer>(bytes_per_token);
}

int64_t CountItemTokens(const Tokenizer& tokenizer, const ItemData& item, int64_t per_message) {
  return per_message + tokenizer.CountTokens(item.content) +
         tokenizer.CountTokens(item.tool_name) + tokenizer.CountTokens(item.tool_call_id);
}

int64_t CountSystemTokens(const Tokenizer& tokenizer, absl::string_view text,
                          int64_t per_message) {
  if (text.empty()) return 0;
  return per_message + tokenizer.CountTokens(text);
}

}  // namespace convstate
