#include "services/core/types.h"

namespace convstate {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
  }
  return "unknown";
}

absl::string_view ItemKindName(ItemKind kind) {
  switch (kind) {
    case ItemKind::kMessage: return "message";
    case ItemKind::kToolCall: return "tool_call";
    case ItemKind::kToolResult: return "tool_result";
    case ItemKind::kReasoning: return "reasoning";
    case ItemKind::kSummaryMarker: return "summary_marker";
  }
  return "unknown";
}

std::optional<Role> RoleFromName(absl::string_view name) {
  for (Role r : {Role::kSystem, Role::kUser, Role::kAssistant, Role::kTool}) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

std::optional<ItemKind> ItemKindFromName(absl::string_view name) {
  for (ItemKind k : {ItemKind::kMessage, ItemKind::kToolCall, ItemKind::kToolResult,
                     ItemKind::kReasoning, ItemKind::kSummaryMarker}) {
    if (ItemKindName(k) == name) return k;
  }
  return std::nullopt;
}

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
