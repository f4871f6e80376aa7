#include "storage/contract.h"

#include <algorithm>
#include <cmath>

namespace convstate {

int64_t EstimatedPrompt(const Conversation& c, const std::vector<ItemData>& items) {
  int64_t prompt = c.system_prompt_tokens + c.pinned_instructions_tokens + c.item_tokens;
  for (const ItemData& item : items) {
    if (item.role == Role::kAssistant) break;
    prompt += item.token_count;
  }
  return prompt;
}

double UpdateCorrection(double current, int64_t reported, int64_t estimated) {
  // Below this the fixed parts of a prompt dominate and the ratio is noise.
  constexpr int64_t kMinEstimate = 64;
  // How much one report moves the factor.
  constexpr double kWeight = 0.3;
  if (reported <= 0 || estimated < kMinEstimate) return current;
  const double ratio = static_cast<double>(reported) / static_cast<double>(estimated);
  // A ratio this far off is a report about some other prompt.
  if (ratio < 0.25 || ratio > 4.0) return current;
  return current + kWeight * (ratio - current);
}

}  // namespace convstate
