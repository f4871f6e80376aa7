#ifndef CONVSTATE_SERVICES_COMMON_STATUS_MACROS_H_
#define CONVSTATE_SERVICES_COMMON_STATUS_MACROS_H_

// RETURN_IF_ERROR and ASSIGN_OR_RETURN, which this Abseil does not ship.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVSTATE_CONCAT_INNER_(a, b) a##b
#define CONVSTATE_CONCAT_(a, b) CONVSTATE_CONCAT_INNER_(a, b)

// Returns `expr`'s status from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    ::absl::Status convstate_status_ = (expr);          \
    if (!convstate_status_.ok()) return convstate_status_; \
  } while (false)

// `lhs = *expr` if `expr` (an absl::StatusOr) is OK, else returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  CONVSTATE_ASSIGN_OR_RETURN_IMPL_( \
      CONVSTATE_CONCAT_(convstate_statusor_, __LINE__), lhs, expr)

#define CONVSTATE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                     \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

namespace convstate {

// Returns `status` with `context` prefixed to its message, code unchanged.
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      std::string(context) + ": " + std::string(status.message()));
}

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_STATUS_MACROS_H_
