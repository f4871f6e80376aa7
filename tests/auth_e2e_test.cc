// Authentication end to end: the real server with an access file whose
// tokens tools/make_token made, clients with and without tokens and client
// certificates (made here with openssl), each role, another tenant's
// conversations, tenants' limits, a file changed while the server runs,
// and no secret or content in the server's log or traces.

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tools/otlp/otlp_receiver.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_credentials.h"

namespace convstate {
namespace {

using testing::Buf;
using testing::MakeCa;
using testing::MakeCert;
using testing::MakeToken;
using rpc::Message;
using testing::ReadFile;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using testing::ShellQuote;
using testing::TestDir;
using testing::TlsCredentials;
using testing::Token;
using rpc::WaitUntil;
using Stub = v1::ConversationState::Stub;

// Every token of the suite, by name.
std::map<std::string, Token>& Tokens() {
  static auto* tokens = new std::map<std::string, Token>();
  return *tokens;
}

const std::string& Secret(const std::string& name) { return Tokens()[name].secret; }

constexpr char kPlanted[] = "PLANTED-CONTENT-7f3a9c";

class AuthE2eTest : public testing::E2eTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(MakeCa("ca") && MakeCa("other-ca")) << "openssl failed";
    ASSERT_TRUE(MakeCert("server", "ca") && MakeCert("gw-cert", "ca") &&
                MakeCert("unmapped", "ca") && MakeCert("expired", "ca", /*days=*/-1) &&
                MakeCert("stranger", "other-ca"));
    const struct {
      const char* tenant;
      const char* role;
      const char* name;
    } tokens[] = {
        {"acme", "gateway", "acme-gw"},     {"acme", "reader", "acme-reader"},
        {"acme", "operator", "acme-ops"},   {"globex", "gateway", "globex-gw"},
        {"small", "gateway", "small-gw"},   {"slow", "gateway", "slow-gw"},
        {"acme", "gateway", "late-gw"},
    };
    for (const auto& t : tokens) {
      Token token = MakeToken(t.tenant, t.role, t.name);
      ASSERT_FALSE(token.secret.empty()) << "tools/make_token failed for " << t.name;
      ASSERT_FALSE(token.entry.empty());
      Tokens()[t.name] = token;
    }
  }

  void SetUp() override {
    ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
    E2eTest::SetUp();
    access_file_ = absl::StrCat(TestDir(), "/", Name(), ".access");
    log_file_ = absl::StrCat(TestDir(), "/", Name(), ".log");
    std::remove(log_file_.c_str());
  }

  static std::string Name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // The access file: every token but those in `leave_out`, the mapped
  // certificate, and the limited tenants.
  void WriteAccess(const std::vector<std::string>& leave_out = {"late-gw"}) {
    std::string text =
        "tenants { id: 'small' max_conversations: 2 max_stored_bytes: 6000 }\n"
        "tenants { id: 'slow' max_requests_per_second: 0.001 burst: 3 }\n"
        "certificates { identity: 'gw-cert' tenant: 'acme' role: ROLE_GATEWAY }\n";
    for (const auto& [name, token] : Tokens()) {
      if (std::find(leave_out.begin(), leave_out.end(), name) == leave_out.end()) {
        absl::StrAppend(&text, token.entry, "\n");
      }
    }
    const std::string staging = access_file_ + ".new";
    std::ofstream(staging, std::ios::trunc) << text;
    chmod(staging.c_str(), 0600);
    std::rename(staging.c_str(), access_file_.c_str());  // Readers never see half a file.
  }

  void Start(std::vector<std::string> extra = {}, bool tls = false) {
    std::vector<std::string> flags = {"--otel_disabled", "--access_file=" + access_file_};
    if (tls) {
      flags.push_back("--tls_cert=" + TestDir() + "/server.pem");
      flags.push_back("--tls_key=" + TestDir() + "/server.key");
      flags.push_back("--tls_client_ca=" + TestDir() + "/ca.pem");
      flags.push_back("--tls_client_auth=optional");
    }
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto server = testing::StartServerOn(*db_, flags, log_file_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    creds_ = tls ? TlsCredentials("ca") : grpc::InsecureChannelCredentials();
  }

  // A new connection with `creds` (default: the server's kind, no client
  // certificate).
  std::unique_ptr<Stub> NewStub(std::shared_ptr<grpc::ChannelCredentials> creds = nullptr) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::ConversationState::NewStub(
        grpc::CreateCustomChannel(server_->address(), creds ? creds : creds_, args));
  }

  // One call with `authorization` (empty: no header).
  grpc::Status Call(const std::string& authorization,
                    const std::function<grpc::Status(Stub*, grpc::ClientContext*)>& call,
                    Stub* stub = nullptr) {
    std::unique_ptr<Stub> own;
    if (stub == nullptr) {
      own = NewStub();
      stub = own.get();
    }
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    const grpc::Status status = call(stub, &ctx);
    errors_.push_back(status.error_message());
    return status;
  }
  static std::string Bearer(const std::string& name) { return "Bearer " + Secret(name); }

  grpc::Status Create(const std::string& auth, const std::string& id,
                      const std::string& tenant = "", Stub* stub = nullptr) {
    return Call(auth, [&](Stub* s, grpc::ClientContext* ctx) {
      v1::CreateConversationRequest req;
      req.set_tenant_id(tenant);
      req.set_conversation_id(id);
      req.set_model("gpt-4o");
      v1::Conversation out;
      return s->CreateConversation(ctx, req, &out);
    }, stub);
  }
  grpc::Status Get(const std::string& auth, const std::string& id,
                   const std::string& tenant = "") {
    return Call(auth, [&](Stub* s, grpc::ClientContext* ctx) {
      v1::GetConversationRequest req;
      req.set_tenant_id(tenant);
      req.set_conversation_id(id);
      v1::Conversation out;
      return s->GetConversation(ctx, req, &out);
    });
  }
  grpc::Status Append(const std::string& auth, const std::string& id, const std::string& text) {
    return Call(auth, [&](Stub* s, grpc::ClientContext* ctx) {
      v1::AppendTurnRequest req;
      req.set_conversation_id(id);
      *req.add_items() = Message(v1::ROLE_USER, text);
      v1::AppendTurnResponse out;
      return s->AppendTurn(ctx, req, &out);
    });
  }
  grpc::Status Build(const std::string& auth, const std::string& id) {
    return Call(auth, [&](Stub* s, grpc::ClientContext* ctx) {
      v1::BuildContextRequest req;
      req.set_conversation_id(id);
      v1::BuildContextResponse out;
      return s->BuildContext(ctx, req, &out);
    });
  }
  grpc::Status HealthCheck(const std::string& auth) {
    auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(server_->address(), creds_));
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(10));
    if (!auth.empty()) ctx.AddMetadata("authorization", auth);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse out;
    return health->Check(&ctx, req, &out);
  }
  // `buf curl` (reflection only) with `authorization` (empty: none).
  testing::BufOutput Curl(const std::string& authorization, const std::string& rest) {
    std::string header;
    if (!authorization.empty()) {
      // Sent with the call and with the reflection requests (buf sends -H
      // headers with the call only), as grpcurl's -H does.
      const std::string quoted = ShellQuote("authorization: " + authorization);
      header = absl::StrCat("-H ", quoted, " --reflect-header ", quoted, " ");
    }
    return Buf(absl::StrCat("curl --protocol grpc --http2-prior-knowledge ", header, rest));
  }

  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string access_file_;
  std::string log_file_;
  // Every error message the server sent back.
  std::vector<std::string> errors_;
};

TEST_F(AuthE2eTest, NoCredentialOrAnUnknownOneIsUnauthenticated) {
  WriteAccess();
  Start();
  EXPECT_EQ(Create("", "c").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status wrong = Create("Bearer cst_not-a-token-0123456789", "c");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(absl::StrContains(wrong.error_message(), "cst_not-a-token")) << wrong.error_message();
  EXPECT_EQ(Create("Basic " + Secret("acme-gw"), "c").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A token left out of the file is unknown too.
  EXPECT_EQ(Create(Bearer("late-gw"), "c").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Create(Bearer("acme-gw"), "c").ok());
  // Health and reflection ask for a credential as well.
  EXPECT_EQ(HealthCheck("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(HealthCheck("Bearer wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(HealthCheck(Bearer("acme-reader")).ok());
  const std::string address = server_->address();
  EXPECT_NE(Curl("", "--list-services http://" + address).exit_code, 0);
  const auto listed = Curl(Bearer("acme-reader"), "--list-services http://" + address);
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_TRUE(absl::StrContains(listed.out, "convstate.v1.ConversationState")) << listed.out;
  const auto health = Curl(Bearer("acme-reader"),
                           "-d '{}' http://" + address + "/grpc.health.v1.Health/Check");
  ASSERT_EQ(health.exit_code, 0) << health.out;
  EXPECT_TRUE(absl::StrContains(health.out, "\"SERVING\"")) << health.out;
}

TEST_F(AuthE2eTest, HealthAndReflectionCanBeLeftOpenWhileTheApiIsNot) {
  WriteAccess();
  Start({"--public_health", "--public_reflection"});
  EXPECT_TRUE(HealthCheck("").ok());
  const std::string address = server_->address();
  const auto health = Curl("", "-d '{}' http://" + address + "/grpc.health.v1.Health/Check");
  ASSERT_EQ(health.exit_code, 0) << health.out;
  EXPECT_TRUE(absl::StrContains(health.out, "\"SERVING\"")) << health.out;
  EXPECT_EQ(Create("", "c").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const auto api = Curl("", "-d '{\"conversationId\":\"c\",\"model\":\"gpt-4o\"}' http://" +
                                address +
                                "/convstate.v1.ConversationState/CreateConversation 2>&1");
  EXPECT_NE(api.exit_code, 0) << api.out;
  EXPECT_TRUE(absl::StrContains(api.out, "unauthenticated")) << api.out;
}

TEST_F(AuthE2eTest, EachRoleCallsWhatItMayAndNoMore) {
  WriteAccess();
  Start();
  ASSERT_TRUE(Create(Bearer("acme-gw"), "c").ok());
  EXPECT_TRUE(Append(Bearer("acme-gw"), "c", "hello").ok());
  EXPECT_TRUE(Build(Bearer("acme-gw"), "c").ok());
  auto compact = [&](const std::string& auth) {
    return Call(auth, [](Stub* s, grpc::ClientContext* ctx) {
      v1::CompactRequest req;
      req.set_conversation_id("c");
      v1::CompactResponse out;
      return s->Compact(ctx, req, &out);
    });
  };
  auto events = [&](const std::string& auth) {
    return Call(auth, [](Stub* s, grpc::ClientContext* ctx) {
      v1::ListCompactionEventsRequest req;
      req.set_conversation_id("c");
      v1::ListCompactionEventsResponse out;
      return s->ListCompactionEvents(ctx, req, &out);
    });
  };
  auto summaries = [&](const std::string& auth) {
    return Call(auth, [](Stub* s, grpc::ClientContext* ctx) {
      v1::ListSummariesRequest req;
      req.set_conversation_id("c");
      v1::ListSummariesResponse out;
      return s->ListSummaries(ctx, req, &out);
    });
  };
  auto items = [&](const std::string& auth) {
    return Call(auth, [](Stub* s, grpc::ClientContext* ctx) {
      v1::ListItemsRequest req;
      req.set_conversation_id("c");
      v1::ListItemsResponse out;
      return s->ListItems(ctx, req, &out);
    });
  };
  // The gateway: conversation calls, not the operator's.
  const grpc::Status denied = compact(Bearer("acme-gw"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "the gateway role may not call Compact");
  EXPECT_EQ(events(Bearer("acme-gw")).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(summaries(Bearer("acme-gw")).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The reader: reads only.
  EXPECT_TRUE(Get(Bearer("acme-reader"), "c").ok());
  EXPECT_TRUE(items(Bearer("acme-reader")).ok());
  EXPECT_EQ(Append(Bearer("acme-reader"), "c", "x").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Build(Bearer("acme-reader"), "c").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Create(Bearer("acme-reader"), "d").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The operator: everything.
  const grpc::Status compacted = compact(Bearer("acme-ops"));
  EXPECT_TRUE(compacted.ok()) << compacted.error_message();
  EXPECT_TRUE(events(Bearer("acme-ops")).ok());
  EXPECT_TRUE(summaries(Bearer("acme-ops")).ok());
  EXPECT_TRUE(Append(Bearer("acme-ops"), "c", "from the operator").ok());
}

TEST_F(AuthE2eTest, TheTenantComesFromTheCredential) {
  WriteAccess();
  Start();
  ASSERT_TRUE(Create(Bearer("acme-gw"), "shared-id").ok());
  EXPECT_EQ(*db_->QueryValue("SELECT string_agg(tenant_id, ',') FROM conversations"), "acme");
  // Another tenant's conversation does not exist for the caller.
  EXPECT_EQ(Get(Bearer("globex-gw"), "shared-id").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Append(Bearer("globex-gw"), "shared-id", "x").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Create(Bearer("globex-gw"), "shared-id").ok());
  EXPECT_EQ(*db_->QueryValue(
                "SELECT string_agg(tenant_id, ',' ORDER BY tenant_id) FROM conversations"),
            "acme,globex");
  // Naming another tenant is refused; naming one's own is the same as none.
  const grpc::Status other = Get(Bearer("acme-gw"), "shared-id", "globex");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(other.error_message(), "tenant_id")) << other.error_message();
  EXPECT_EQ(Create(Bearer("acme-gw"), "elsewhere", "globex").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Get(Bearer("acme-gw"), "shared-id", "acme").ok());
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM conversations"), "2");
}

TEST_F(AuthE2eTest, ClientCertificatesMapToATenantAndARole) {
  WriteAccess();
  Start({}, /*tls=*/true);
  auto mapped = NewStub(TlsCredentials("ca", "gw-cert"));
  const grpc::Status created = Create("", "by-cert", "", mapped.get());
  ASSERT_TRUE(created.ok()) << created.error_message();
  EXPECT_EQ(*db_->QueryValue("SELECT tenant_id FROM conversations"), "acme");
  // A certificate the CA signed but the access file does not name.
  auto unmapped = NewStub(TlsCredentials("ca", "unmapped"));
  EXPECT_EQ(Create("", "x", "", unmapped.get()).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A bearer token decides when both are sent.
  EXPECT_TRUE(Create(Bearer("globex-gw"), "by-token", "", unmapped.get()).ok());
  EXPECT_EQ(*db_->QueryValue("SELECT tenant_id FROM conversations WHERE conversation_id = "
                             "'by-token'"),
            "globex");
  // An expired certificate, or one from another CA, does not get through
  // the handshake.
  auto expired = NewStub(TlsCredentials("ca", "expired"));
  EXPECT_EQ(Create(Bearer("acme-gw"), "x", "", expired.get()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  auto stranger = NewStub(TlsCredentials("ca", "stranger"));
  EXPECT_EQ(Create(Bearer("acme-gw"), "x", "", stranger.get()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // No certificate (allowed: --tls_client_auth=optional) and no token.
  EXPECT_EQ(Create("", "x").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM conversations"), "2");
}

TEST_F(AuthE2eTest, TenantsLimitsAreEnforcedAndNamed) {
  WriteAccess();
  Start();
  ASSERT_TRUE(Create(Bearer("small-gw"), "a").ok());
  ASSERT_TRUE(Create(Bearer("small-gw"), "b").ok());
  const grpc::Status third = Create(Bearer("small-gw"), "c");
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(third.error_message(), "max_conversations 2"))
      << third.error_message();
  // Two conversations store well under a kilobyte (their rows and first
  // view states); 3,000 bytes of content fit once, not twice.
  ASSERT_TRUE(Append(Bearer("small-gw"), "a", std::string(3000, 'x')).ok());
  const grpc::Status full = Append(Bearer("small-gw"), "b", std::string(3000, 'y'));
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(full.error_message(), "max_stored_bytes 6000"))
      << full.error_message();
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items"), "1");
  // Room is made by deleting.
  ASSERT_TRUE(Call(Bearer("small-gw"), [](Stub* s, grpc::ClientContext* ctx) {
                v1::DeleteConversationRequest req;
                req.set_conversation_id("a");
                v1::DeleteConversationResponse out;
                return s->DeleteConversation(ctx, req, &out);
              }).ok());
  EXPECT_TRUE(Create(Bearer("small-gw"), "c").ok());
  // Other tenants are not limited by it.
  for (const char* id : {"g1", "g2", "g3"}) EXPECT_TRUE(Create(Bearer("globex-gw"), id).ok());
  // The rate: a burst of 3, then one call per 1,000 s.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Get(Bearer("slow-gw"), "none").error_code(), grpc::StatusCode::NOT_FOUND) << i;
  }
  const grpc::Status limited = Get(Bearer("slow-gw"), "none");
  EXPECT_EQ(limited.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(limited.error_message(), "max_requests_per_second"))
      << limited.error_message();
}

TEST_F(AuthE2eTest, TheAccessFileIsReadAgainWhenItChanges) {
  WriteAccess();
  Start({"--access_refresh_ms=100"});
  EXPECT_EQ(Create(Bearer("late-gw"), "c").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  WriteAccess(/*leave_out=*/{"acme-gw"});
  EXPECT_TRUE(WaitUntil([&] { return Create(Bearer("late-gw"), "c").ok(); }));
  EXPECT_EQ(Get(Bearer("acme-gw"), "c").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A file that no longer parses leaves the rules as they were.
  {
    std::ofstream(access_file_, std::ios::trunc) << "tokens { this does not parse";
  }
  // Once the server has read the broken file (a call makes it look, and it
  // says so), the rules it had stand.
  EXPECT_TRUE(WaitUntil([&] {
    (void)Get(Bearer("late-gw"), "c");
    return absl::StrContains(ReadFile(log_file_), "keeping the access rules read before");
  }));
  EXPECT_TRUE(Get(Bearer("late-gw"), "c").ok());
}

TEST_F(AuthE2eTest, StartRefusesAnExposedAccessFileOrNoChoiceAtAll) {
  WriteAccess();
  chmod(access_file_.c_str(), 0644);
  auto code = ServerProcess::RunToExit(
      {"--database_url=" + db_->url(), "--otel_disabled", "--access_file=" + access_file_});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
  code = ServerProcess::RunToExit({"--database_url=" + db_->url(), "--otel_disabled",
                                   "--access_file=" + TestDir() + "/no-such-file"});
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
  // Authentication is the default: without an access file, --auth=none
  // must be said.
  code = ServerProcess::RunToExit(
      {"--database_url=" + db_->url(), "--otel_disabled", "--auth=access_file"});
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
  // A file that does not parse stops the start too.
  chmod(access_file_.c_str(), 0600);
  { std::ofstream(access_file_, std::ios::trunc) << "tokens { name: 'x' }"; }
  code = ServerProcess::RunToExit(
      {"--database_url=" + db_->url(), "--otel_disabled", "--access_file=" + access_file_});
  ASSERT_TRUE(code.ok());
  EXPECT_NE(*code, 0);
  // --auth=none starts, and says what it means.
  auto open = testing::StartServerOn(*db_, {"--otel_disabled", "--auth=none"}, log_file_);
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_TRUE((*open)->Stop(SIGTERM).ok());
  EXPECT_TRUE(absl::StrContains(ReadFile(log_file_), "--auth=none: every caller may read"))
      << ReadFile(log_file_);
}

TEST_F(AuthE2eTest, NoSecretOrContentReachesTheLogTracesOrErrors) {
  auto receiver = otlp::OtlpReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  WriteAccess();
  Start({"--otel_disabled=false", "--otel_endpoint=" + (*receiver)->base_url(),
         "--otel_sampler=always_on"});
  ASSERT_TRUE(Create(Bearer("acme-gw"), "c").ok());
  ASSERT_TRUE(Append(Bearer("acme-gw"), "c", absl::StrCat("my card is ", kPlanted)).ok());
  ASSERT_TRUE(Build(Bearer("acme-gw"), "c").ok());
  // Failures of every kind, each carrying a secret somewhere.
  Create("Bearer cst_wrong-" + std::string(kPlanted), "c");
  Create("Basic " + Secret("acme-gw"), "c");
  Append(Bearer("acme-reader"), "c", kPlanted);
  Append(Bearer("globex-gw"), "c", kPlanted);
  Append(Bearer("acme-gw"), "c", std::string(kPlanted) + std::string(2 << 20, 'x'));
  Append(Bearer("acme-gw"), "c", std::string(kPlanted) + "\xff\xfe");
  Get(Bearer("acme-gw"), std::string(kPlanted) + " not an id");
  Get(Bearer("acme-gw"), "c", kPlanted);
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());
  ASSERT_TRUE((*receiver)->WaitFor([&] { return (*receiver)->span_count() >= 3; },
                                   absl::Seconds(10)));
  std::string traces;
  for (const auto& span : (*receiver)->spans()) absl::StrAppend(&traces, span.DebugString());
  const std::string log = ReadFile(log_file_);
  ASSERT_FALSE(log.empty());
  std::vector<std::string> secrets = {kPlanted, "cst_wrong"};
  for (const auto& [name, token] : Tokens()) secrets.push_back(token.secret);
  for (const std::string& secret : secrets) {
    EXPECT_FALSE(absl::StrContains(log, secret)) << secret << " in the log:\n" << log;
    EXPECT_FALSE(absl::StrContains(traces, secret)) << secret << " in a span";
    for (const std::string& error : errors_) {
      EXPECT_FALSE(absl::StrContains(error, secret)) << secret << " in the error: " << error;
    }
  }
  // The spans do name who called, by the credential's name.
  EXPECT_TRUE(absl::StrContains(traces, "acme-gw")) << traces.substr(0, 2000);
}

}  // namespace
}  // namespace convstate
