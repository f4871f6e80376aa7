#ifndef CONVSTATE_SERVICES_COMMON_TASK_GUARD_H_
#define CONVSTATE_SERVICES_COMMON_TASK_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace convstate {

// Runs `task` and catches whatever it throws, so that one bad input (a
// malformed answer from a backend, a bug on one request's path) ends that
// task alone instead of the process. What was caught is counted
// (EscapedExceptions) and logged: the first from each `where` at once, then
// at most one line a minute per `where`, saying how many were caught in
// between. Returns false, with `error` (if not null) set to a short
// description that names no data, when `task` threw.
bool RunGuarded(absl::string_view where, const std::function<void()>& task,
                std::string* error = nullptr);

// Exceptions RunGuarded caught since the process started (all `where`s).
int64_t EscapedExceptions();

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_COMMON_TASK_GUARD_H_
