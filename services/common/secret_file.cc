#include "services/common/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace convstate {

absl::Status CheckSecretFile(absl::string_view what, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", path));
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": ", path, " is readable by every user; make it private (chmod 600) first"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", path,
                     " may be written by users other than its owner; make it private (chmod "
                     "600) first"));
  }
  return absl::OkStatus();
}

}  // namespace convstate
