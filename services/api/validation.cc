#include "services/api/validation.h"

#include "re2/re2.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"
#include "services/common/utf8.h"
#include "services/core/types.h"

namespace convstate {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

bool ModelChar(char c) { return IsIdChar(c) || c == '/' || c == '@' || c == '+'; }

constexpr int kMaxToolFieldBytes = 256;

}  // namespace

absl::Status ValidateText(absl::string_view field, absl::string_view text, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return Invalid(field, absl::StrCat(text.size(), " bytes exceeds the limit of ", max_bytes));
  }
  if (!IsValidUtf8(text)) return Invalid(field, "not valid UTF-8");
  if (text.find('\0') != absl::string_view::npos) {
    return Invalid(field, "contains a NUL character");
  }
  return absl::OkStatus();
}

absl::Status ValidateModelName(absl::string_view field, absl::string_view model) {
  if (model.empty()) return Invalid(field, "required");
  if (model.size() > 256) return Invalid(field, "longer than 256 characters");
  for (char c : model) {
    if (!ModelChar(c)) {
      return Invalid(field, "only letters, digits and . _ : - / @ + are allowed");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMetadata(absl::string_view field,
                              const google::protobuf::Map<std::string, std::string>& metadata,
                              const Limits& limits) {
  if (static_cast<int>(metadata.size()) > limits.max_metadata_entries) {
    return Invalid(field, absl::StrCat(metadata.size(), " entries exceeds the limit of ",
                                       limits.max_metadata_entries));
  }
  for (const auto& [key, value] : metadata) {
    const std::string path = absl::StrCat(field, "[\"", key, "\"]");
    if (key.empty()) return Invalid(field, "keys must not be empty");
    if (absl::StartsWith(key, kReservedMetadataPrefix)) {
      return Invalid(path, absl::StrCat("keys under \"", kReservedMetadataPrefix,
                                        "\" are the service's own and may not be set"));
    }
    if (absl::Status s = ValidateText(absl::StrCat(field, " key"), key,
                                      limits.max_metadata_key_bytes);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ValidateText(path, value, limits.max_metadata_value_bytes); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNewItem(absl::string_view field, const v1::NewItem& item,
                             const Limits& limits) {
  const std::string f(field);
  if (item.role() == v1::ROLE_UNSPECIFIED) return Invalid(f + ".role", "required");
  if (!v1::Role_IsValid(item.role())) {
    return Invalid(f + ".role", absl::StrCat("unknown role ", item.role()));
  }
  if (item.kind() == v1::ITEM_KIND_UNSPECIFIED) return Invalid(f + ".kind", "required");
  if (!v1::ItemKind_IsValid(item.kind())) {
    return Invalid(f + ".kind", absl::StrCat("unknown kind ", item.kind()));
  }
  const bool is_tool_item =
      item.kind() == v1::ITEM_KIND_TOOL_CALL || item.kind() == v1::ITEM_KIND_TOOL_RESULT;
  switch (item.kind()) {
    case v1::ITEM_KIND_SUMMARY_MARKER:
      return Invalid(f + ".kind", "summary markers are written by the service, not by clients");
    case v1::ITEM_KIND_TOOL_CALL:
      if (item.role() != v1::ROLE_ASSISTANT) {
        return Invalid(f + ".role", "a tool call must come from the assistant");
      }
      if (item.tool_name().empty()) return Invalid(f + ".tool_name", "required for a tool call");
      break;
    case v1::ITEM_KIND_TOOL_RESULT:
      if (item.role() != v1::ROLE_TOOL) {
        return Invalid(f + ".role", "a tool result must have role ROLE_TOOL");
      }
      break;
    case v1::ITEM_KIND_REASONING:
      if (item.role() != v1::ROLE_ASSISTANT) {
        return Invalid(f + ".role", "reasoning must come from the assistant");
      }
      break;
    default:  // A message.
      if (item.role() == v1::ROLE_TOOL) {
        return Invalid(f + ".kind", "an item with role ROLE_TOOL must be a tool result");
      }
      break;
  }
  if (is_tool_item && item.tool_call_id().empty()) {
    return Invalid(f + ".tool_call_id", "required for tool calls and tool results");
  }
  if (!is_tool_item && (!item.tool_call_id().empty() || !item.tool_name().empty())) {
    return Invalid(f + (item.tool_name().empty() ? ".tool_call_id" : ".tool_name"),
                   "only tool calls and tool results carry tool fields");
  }
  if (absl::Status s = ValidateText(f + ".content", item.content(), limits.max_item_bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateText(f + ".tool_name", item.tool_name(), kMaxToolFieldBytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateText(f + ".tool_call_id", item.tool_call_id(), kMaxToolFieldBytes);
      !s.ok()) {
    return s;
  }
  return ValidateMetadata(f + ".metadata", item.metadata(), limits);
}

absl::Status ValidatePolicy(absl::string_view field, const v1::CompactionPolicy& policy) {
  constexpr int kMaxRules = 32;
  constexpr int kMaxPatternBytes = 1024;
  constexpr int kMaxToolNames = 16;
  RETURN_IF_ERROR(ValidateText(absl::StrCat(field, ".instructions"), policy.instructions(), 4096));
  if (policy.keep_size() > kMaxRules) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".keep: at most ", kMaxRules, " rules, got ", policy.keep_size()));
  }
  for (int i = 0; i < policy.keep_size(); ++i) {
    const v1::KeepRule& rule = policy.keep(i);
    const std::string at = absl::StrCat(field, ".keep[", i, "]");
    RETURN_IF_ERROR(ValidateText(absl::StrCat(at, ".pattern"), rule.pattern(), kMaxPatternBytes));
    if (!rule.pattern().empty()) {
      RE2::Options options;
      options.set_log_errors(false);
      options.set_max_mem(kMaxKeepPatternMemory);
      const RE2 re(rule.pattern(), options);
      if (!re.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".pattern: not an RE2 expression: ", re.error()));
      }
    }
    for (int role : rule.roles()) {
      if (role < v1::ROLE_SYSTEM || role > v1::ROLE_TOOL) {
        return absl::InvalidArgumentError(absl::StrCat(at, ".roles: unknown role ", role));
      }
    }
    if (rule.tool_names_size() > kMaxToolNames) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".tool_names: at most ", kMaxToolNames));
    }
    for (const std::string& tool : rule.tool_names()) {
      RETURN_IF_ERROR(ValidateText(absl::StrCat(at, ".tool_names"), tool, 128));
    }
  }
  if (policy.has_keep_budget_fraction() &&
      !(policy.keep_budget_fraction() > 0.0 && policy.keep_budget_fraction() < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".keep_budget_fraction: must be in (0, 1)"));
  }
  return absl::OkStatus();
}

}  // namespace convstate
