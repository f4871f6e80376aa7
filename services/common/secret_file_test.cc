#include "services/common/secret_file.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace convstate {
namespace {

std::string File(const std::string& name, mode_t mode) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << "secret\n";
  chmod(path.c_str(), mode);
  return path;
}

TEST(SecretFileTest, OnlyTheOwnerMayWriteAndNotEveryoneMayRead) {
  EXPECT_TRUE(CheckSecretFile("--key", File("private", 0600)).ok());
  EXPECT_TRUE(CheckSecretFile("--key", File("group_readable", 0640)).ok());
  for (mode_t mode : {0604, 0644, 0620, 0602, 0660, 0666}) {
    const absl::Status s = CheckSecretFile("--key", File("open", mode));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << std::oct << mode;
    EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s;
  }
  EXPECT_EQ(CheckSecretFile("--key", "/no/such/file").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convstate
