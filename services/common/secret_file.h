#ifndef CONVSTATE_SERVICES_COMMON_SECRET_FILE_H_
#define CONVSTATE_SERVICES_COMMON_SECRET_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace convstate {

// OK if `path` can be read and only its owner may change it and only its
// owner (and group) may read it: a key or a credential file. INVALID_ARGUMENT
// if it cannot be read; FAILED_PRECONDITION, naming `what` and the fix, if
// every user may read it or anyone but its owner may write it (someone else
// could plant a token or a key of their own). Checked at start and at every
// reload of such a file.
absl::Status CheckSecretFile(absl::string_view what, const std::string& path);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_SECRET_FILE_H_
