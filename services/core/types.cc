#include "services/core/types.h"

#include "absl/strings/str_cat.h"

namespace convstate {

std::string KeyText(const ConversationKey& key) {
  return absl::StrCat(key.tenant_id, "/", key.conversation_id);
}

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

}  // namespace convstate
