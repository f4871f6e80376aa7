// Transport security end to end: the real server with certificates this
// test makes (openssl from Debian), clients with and without TLS and with
// and without client certificates, a private key that is not private, and
// a certificate rotated on disk while the server runs.


#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_credentials.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using testing::ServerProcess;
using testing::MakeCa;
using testing::MakeCert;
using testing::ReadFile;
using rpc::SetDeadline;
using testing::Shell;

std::string Dir() { return testing::TestDir(); }

class TlsE2eTest : public testing::E2eTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(MakeCa("ca") && MakeCa("other-ca")) << "openssl failed";
    ASSERT_TRUE(MakeCert("server", "ca") && MakeCert("gateway", "ca") &&
                MakeCert("stranger", "other-ca") && MakeCert("rotated", "other-ca"));
  }

  std::vector<std::string> Flags(std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--otel_disabled",
                                      "--tls_cert=" + Dir() + "/server.pem",
                                      "--tls_key=" + Dir() + "/server.key"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  void Start(std::vector<std::string> extra = {}) {
    auto server = testing::StartServerOn(*db_, Flags(std::move(extra)));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A health Check over a new channel with `creds`.
  grpc::Status Check(const std::shared_ptr<grpc::ChannelCredentials>& creds) {
    grpc::ChannelArguments args;
    // A new connection every time, not one shared with an earlier channel.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(server_->address(), creds, args);
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(5));
    return health->Check(&ctx, req, &out);
  }

  static std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca,
                                                       const std::string& client = "") {
    return testing::TlsCredentials(ca, client);
  }
};

TEST_F(TlsE2eTest, ServesTlsAndRefusesPlaintext) {
  Start();
  grpc::Status s = Check(Tls("ca"));
  EXPECT_TRUE(s.ok()) << s.error_message();
  // The whole API goes over it.
  auto stub = v1::ConversationState::NewStub(
      grpc::CreateChannel(server_->address(), Tls("ca")));
  v1::CreateConversationRequest create;
  create.set_conversation_id("over-tls");
  create.set_model("gpt-4o");
  v1::Conversation out;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  s = stub->CreateConversation(&ctx, create, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(Check(grpc::InsecureChannelCredentials()).ok());
  // A client that trusts another CA does not accept the server.
  EXPECT_FALSE(Check(Tls("other-ca")).ok());
}

TEST_F(TlsE2eTest, MutualTlsRequiresACertificateFromTheClientCa) {
  Start({"--tls_client_ca=" + Dir() + "/ca.pem"});
  grpc::Status s = Check(Tls("ca", "gateway"));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(Check(Tls("ca")).ok()) << "no client certificate";
  EXPECT_FALSE(Check(Tls("ca", "stranger")).ok()) << "a certificate from another CA";
  EXPECT_FALSE(Check(grpc::InsecureChannelCredentials()).ok());
}

TEST_F(TlsE2eTest, OptionalClientCertificatesAreVerifiedWhenPresented) {
  Start({"--tls_client_ca=" + Dir() + "/ca.pem", "--tls_client_auth=optional"});
  EXPECT_TRUE(Check(Tls("ca")).ok());
  EXPECT_TRUE(Check(Tls("ca", "gateway")).ok());
  EXPECT_FALSE(Check(Tls("ca", "stranger")).ok());
}

TEST_F(TlsE2eTest, AKeyEveryUserCanReadIsRefusedAtStart) {
  const std::string key = Dir() + "/exposed.key";
  ASSERT_TRUE(Shell("cp server.key exposed.key && chmod 644 exposed.key"));
  auto exit = ServerProcess::RunToExit({"--database_url=" + db_->url(), "--otel_disabled",
                                        "--tls_cert=" + Dir() + "/server.pem",
                                        "--tls_key=" + key});
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_NE(*exit, 0);
  // Half a pair is refused too.
  exit = ServerProcess::RunToExit(
      {"--database_url=" + db_->url(), "--tls_cert=" + Dir() + "/server.pem"});
  ASSERT_TRUE(exit.ok());
  EXPECT_NE(*exit, 0);
}

TEST_F(TlsE2eTest, ARotatedCertificateIsServedWithoutARestart) {
  ASSERT_TRUE(Shell("cp server.pem live.pem && cp server.key live.key && chmod 600 live.key"));
  auto server = testing::StartServerOn(*db_, {"--otel_disabled",
                                      "--tls_cert=" + Dir() + "/live.pem",
                                      "--tls_key=" + Dir() + "/live.key",
                                      "--tls_refresh_ms=1000"});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  EXPECT_TRUE(Check(Tls("ca")).ok());
  // The files are replaced by a certificate from another CA.
  ASSERT_TRUE(Shell("cp rotated.key live.key.new && cp rotated.pem live.pem.new && "
                    "mv live.key.new live.key && mv live.pem.new live.pem"));
  EXPECT_TRUE(rpc::WaitUntil([&] { return Check(Tls("other-ca")).ok(); },
                                 absl::Seconds(20)))
      << "the rotated certificate was not picked up";
  EXPECT_FALSE(Check(Tls("ca")).ok());
}

}  // namespace
}  // namespace convstate
