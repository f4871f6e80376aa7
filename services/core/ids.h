#ifndef CONVSTATE_SERVICES_CORE_IDS_H_
#define CONVSTATE_SERVICES_CORE_IDS_H_

// The ids that name tenants and conversations, and their rules.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convstate {

// A character an id may hold: [A-Za-z0-9._:-].
bool IsIdChar(char c);

// Ids: 1 to 128 characters of IsIdChar. INVALID_ARGUMENT naming `field`
// otherwise.
absl::Status ValidateId(absl::string_view field, absl::string_view id);

// An empty tenant is the tenant "default"; otherwise an id as above.
absl::StatusOr<std::string> NormalizeTenant(absl::string_view tenant_id);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_CORE_IDS_H_
