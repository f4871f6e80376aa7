#include "services/core/ids.h"

#include "absl/strings/str_cat.h"

namespace convstate {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == ':' || c == '-';
}

absl::Status ValidateId(absl::string_view field, absl::string_view id) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (id.empty()) return invalid("required");
  if (id.size() > 128) return invalid("longer than 128 characters");
  for (char c : id) {
    if (!IsIdChar(c)) return invalid("only letters, digits and . _ : - are allowed");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NormalizeTenant(absl::string_view tenant_id) {
  if (tenant_id.empty()) return std::string("default");
  if (absl::Status s = ValidateId("tenant_id", tenant_id); !s.ok()) return s;
  return std::string(tenant_id);
}

}  // namespace convstate
