// Transport security end to end: the real server with certificates this
// test makes (openssl from Debian), clients with and without TLS and with
// and without client certificates, a private key that is not private, and
// a certificate rotated on disk while the server runs.

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/pg_harness.h"
#include "tests/rpc_helpers.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using testing::ServerProcess;
using testing::SetDeadline;

std::string Dir() { return std::getenv("TEST_TMPDIR"); }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command in the test's directory; true if it exited 0.
bool Shell(const std::string& command) {
  return std::system(absl::StrCat("cd '", Dir(), "' && ", command, " >/dev/null 2>&1").c_str()) ==
         0;
}

// A CA named `ca` (ca.pem, ca.key).
bool MakeCa(const std::string& ca) {
  return Shell(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                            "-nodes -keyout ", ca, ".key -out ", ca, ".pem -days 2 -subj /CN=", ca));
}

// A certificate `name`.pem / `name`.key signed by `ca`, valid for
// localhost and 127.0.0.1.
bool MakeCert(const std::string& name, const std::string& ca) {
  return Shell(absl::StrCat(
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ", name,
             ".key -out ", name, ".csr -subj /CN=", name)) &&
         Shell(absl::StrCat("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > ", name,
                            ".ext && openssl x509 -req -in ", name, ".csr -CA ", ca,
                            ".pem -CAkey ", ca, ".key -CAcreateserial -out ", name,
                            ".pem -days 2 -extfile ", name, ".ext")) &&
         chmod(absl::StrCat(Dir(), "/", name, ".key").c_str(), 0600) == 0;
}

class TlsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(MakeCa("ca") && MakeCa("other-ca")) << "openssl failed";
    ASSERT_TRUE(MakeCert("server", "ca") && MakeCert("gateway", "ca") &&
                MakeCert("stranger", "other-ca") && MakeCert("rotated", "other-ca"));
  }

  void SetUp() override {
    auto db = ScratchDatabase::Create(/*migrate=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }

  std::vector<std::string> Flags(std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--database_url=" + db_->url(), "--otel_disabled",
                                      "--tls_cert=" + Dir() + "/server.pem",
                                      "--tls_key=" + Dir() + "/server.key"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  void Start(std::vector<std::string> extra = {}) {
    auto server = ServerProcess::Start(Flags(std::move(extra)));
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
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = Read(Dir() + "/" + ca + ".pem");
    if (!client.empty()) {
      options.pem_cert_chain = Read(Dir() + "/" + client + ".pem");
      options.pem_private_key = Read(Dir() + "/" + client + ".key");
    }
    return grpc::SslCredentials(options);
  }

  std::unique_ptr<ScratchDatabase> db_;
  std::unique_ptr<ServerProcess> server_;
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
  auto server = ServerProcess::Start({"--database_url=" + db_->url(), "--otel_disabled",
                                      "--tls_cert=" + Dir() + "/live.pem",
                                      "--tls_key=" + Dir() + "/live.key",
                                      "--tls_refresh_ms=1000"});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  EXPECT_TRUE(Check(Tls("ca")).ok());
  // The files are replaced by a certificate from another CA.
  ASSERT_TRUE(Shell("cp rotated.key live.key.new && cp rotated.pem live.pem.new && "
                    "mv live.key.new live.key && mv live.pem.new live.pem"));
  EXPECT_TRUE(testing::WaitUntil([&] { return Check(Tls("other-ca")).ok(); },
                                 absl::Seconds(20)))
      << "the rotated certificate was not picked up";
  EXPECT_FALSE(Check(Tls("ca")).ok());
}

}  // namespace
}  // namespace convstate
