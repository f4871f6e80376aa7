#include "tools/convstatectl/client.h"

#include "gtest/gtest.h"

namespace convstate::ctl {
namespace {

TEST(ClientTest, KnowsWhichAddressesAreThisMachine) {
  for (const char* a : {"localhost:50051", "127.0.0.1:50051", "127.1.2.3:1", "[::1]:50051",
                        "dns:///localhost:50051", "ipv4:127.0.0.1:50051", "unix:/tmp/s"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"10.0.0.5:50051", "convstate.internal:443", "[2001:db8::1]:50051",
                        "dns:///convstate:50051", "localhost.evil.example:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(ClientTest, ATokenIsNeverSentInPlaintextToAnotherMachine) {
  ClientOptions options;
  options.address = "10.0.0.5:50051";
  options.token = "cst_secret";
  auto refused = Client::Connect(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message().find("cst_secret"), std::string::npos);
  options.token.clear();
  EXPECT_TRUE(Client::Connect(options).ok());  // No secret to leak.
  options.token = "cst_secret";
  options.address = "localhost:50051";
  EXPECT_TRUE(Client::Connect(options).ok());
}

}  // namespace
}  // namespace convstate::ctl
