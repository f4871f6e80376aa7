// Health and server reflection as a client that has no compiled-in
// descriptors sees them: the Buf CLI (`buf curl`), asking for reflection v1
// and v1alpha in turn, against a real server and database.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"
#include "tests/server_process.h"
#include "tools/rpc/rpc_helpers.h"

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

// A loopback port no one listens on now (bound to port 0, then closed).
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// The probes' port (--health_port): health alone, in plaintext and without
// a credential, even when the API needs one; NOT_SERVING from the drain's
// start, like the API port's health.
TEST_F(HealthReflectionE2eTest, TheProbePortServesHealthAloneWithoutACredential) {
  const std::string access = std::string(std::getenv("TEST_TMPDIR")) + "/empty_access.textproto";
  {
    std::ofstream(access) << "# nobody\n";
  }
  ASSERT_EQ(chmod(access.c_str(), 0600), 0);
  const int probe_port = UnusedPort();
  ASSERT_NE(probe_port, 0);
  auto server = testing::StartServerOn(
      *db_, {"--otel_disabled", "--access_file=" + access,
             absl::StrCat("--health_port=", probe_port), "--shutdown_drain_ms=3000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", probe_port),
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("convstate.v1.ConversationState");
  grpc::health::v1::HealthCheckResponse status;
  {
    grpc::ClientContext ctx;
    rpc::SetDeadline(ctx);
    const grpc::Status s = health->Check(&ctx, req, &status);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  {
    // The API port still wants a credential for health.
    auto api = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        (*server)->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    rpc::SetDeadline(ctx);
    EXPECT_EQ(api->Check(&ctx, req, &status).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // Nothing but health on the probes' port.
    auto stub = v1::ConversationState::NewStub(channel);
    v1::ListConversationsRequest list;
    v1::ListConversationsResponse listed;
    grpc::ClientContext ctx;
    rpc::SetDeadline(ctx);
    EXPECT_EQ(stub->ListConversations(&ctx, list, &listed).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  grpc::ClientContext watch_ctx;
  rpc::SetDeadline(watch_ctx);
  auto stream = health->Watch(&watch_ctx, req);
  ASSERT_TRUE(stream->Read(&status));
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_EQ(::kill((*server)->pid(), SIGTERM), 0);
  ASSERT_TRUE(stream->Read(&status));
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  watch_ctx.TryCancel();
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
