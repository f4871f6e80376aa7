// Health and server reflection as a client that has no compiled-in
// descriptors sees them: the Buf CLI (`buf curl`), asking for reflection v1
// and v1alpha in turn, against a real server and database.

#include <signal.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using testing::Buf;
using testing::ScratchDatabase;
using testing::ServerProcess;

constexpr char kCurl[] = "curl --protocol grpc --http2-prior-knowledge ";

class HealthReflectionE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
    E2eTest::SetUp();
  }

  std::string Health(const std::string& address, const std::string& protocol) {
    const auto out = Buf(absl::StrCat(kCurl, "--reflect-protocol ", protocol, " -d '{}' http://",
                                      address, "/grpc.health.v1.Health/Check"));
    return out.exit_code == 0 ? out.out : absl::StrCat("exit ", out.exit_code, ": ", out.out);
  }
};

TEST_F(HealthReflectionE2eTest, BothReflectionVersionsListAndDescribeEveryService) {
  auto server = testing::StartServerOn(*db_, {"--otel_disabled"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (const char* protocol : {"grpc-v1", "grpc-v1alpha"}) {
    SCOPED_TRACE(protocol);
    const auto services = Buf(absl::StrCat(kCurl, "--reflect-protocol ", protocol,
                                           " --list-services http://", (*server)->address()));
    ASSERT_EQ(services.exit_code, 0) << services.out;
    for (const char* name : {"convstate.v1.ConversationState", "grpc.health.v1.Health",
                             "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"}) {
      EXPECT_TRUE(absl::StrContains(services.out, name)) << services.out;
    }
    const auto methods = Buf(absl::StrCat(kCurl, "--reflect-protocol ", protocol,
                                          " --list-methods http://", (*server)->address()));
    ASSERT_EQ(methods.exit_code, 0) << methods.out;
    EXPECT_TRUE(absl::StrContains(methods.out, "convstate.v1.ConversationState/BuildContext"));
    EXPECT_TRUE(absl::StrContains(methods.out, "grpc.health.v1.Health/Watch"));
    const std::string health = Health((*server)->address(), protocol);
    EXPECT_TRUE(absl::StrContains(health, "\"SERVING\"")) << health;
  }
}

TEST_F(HealthReflectionE2eTest, HealthIsNotServingWhileDrainingAtShutdown) {
  auto server = testing::StartServerOn(*db_, {"--otel_disabled", "--shutdown_drain_ms=5000"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(absl::StrContains(Health((*server)->address(), "grpc-v1"), "\"SERVING\""));
  ASSERT_EQ(::kill((*server)->pid(), SIGTERM), 0);
  // During the drain the server still answers, and says it is going away.
  bool not_serving = false;
  const absl::Time until = absl::Now() + absl::Seconds(4);
  while (!not_serving && absl::Now() < until) {
    not_serving = absl::StrContains(Health((*server)->address(), "grpc-v1"), "NOT_SERVING");
  }
  EXPECT_TRUE(not_serving) << "health never said NOT_SERVING while draining";
  auto code = (*server)->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST_F(HealthReflectionE2eTest, WatchStreamsTheStatusAndItsChange) {
  auto server = testing::StartServerOn(*db_, {"--otel_disabled", "--shutdown_drain_ms=3000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("convstate.v1.ConversationState");
  auto stream = health->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse status;
  ASSERT_TRUE(stream->Read(&status));
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_EQ(::kill((*server)->pid(), SIGTERM), 0);
  ASSERT_TRUE(stream->Read(&status));
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  ctx.TryCancel();
  // A service the server does not have is reported as unknown.
  grpc::ClientContext unknown_ctx;
  unknown_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  req.set_service("no.such.Service");
  auto unknown = health->Watch(&unknown_ctx, req);
  ASSERT_TRUE(unknown->Read(&status));
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
  unknown_ctx.TryCancel();
  auto code = (*server)->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace convstate
