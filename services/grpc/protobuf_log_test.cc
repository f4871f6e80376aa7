#include "services/grpc/protobuf_log.h"

#include <string>

#include "convstate/v1/convstate.pb.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

// A NewItem whose content is not UTF-8, as a client can send it.
std::string BadWire() {
  v1::NewItem item;
  item.set_content("ok");
  std::string wire = item.SerializeAsString();
  wire[wire.size() - 1] = '\xff';
  return wire;
}

TEST(ProtobufLogTest, InvalidUtf8IsCountedNotLoggedLineByLine) {
  RouteProtobufLogs(nullptr);
  const std::string wire = BadWire();
  const int64_t before = InvalidUtf8Strings();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 500; ++i) {
    v1::NewItem parsed;
    EXPECT_FALSE(parsed.ParseFromString(wire));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(InvalidUtf8Strings() - before, 500);
  // At most the one line a minute, and never the library's own.
  EXPECT_EQ(log.find("libprotobuf"), std::string::npos) << log;
  int lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_LE(lines, 1) << log;
}

}  // namespace
}  // namespace convstate
