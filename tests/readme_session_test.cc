// Replays the grpcurl session of README.md against a fresh server and
// database with a client that knows nothing but what server reflection
// tells it: the Buf CLI's `buf curl` (grpcurl is not packaged here; both
// resolve every method through reflection alone). `tools/test` installs buf
// and passes its path in CONVSTATE_BUF. Responses come back as JSON; the
// checks parse them into this build's types.

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "convstate/v1/convstate.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"
#include "tests/server_process.h"
#include "tests/test_credentials.h"

namespace convstate {
namespace {

struct Call {
  std::string method;  // "package.Service/Method"
  std::string json;
};

std::string ReadReadme() {
  const std::string path =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/README.md");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<Call> ExtractCalls(const std::string& readme) {
  // grpcurl -plaintext -d '<json>' [\ newline] localhost:50051 <method>
  static const std::regex kCall(
      R"(grpcurl -plaintext -d '([^']*)'\s*(?:\\\s*)?localhost:50051 ([A-Za-z0-9_.]+/[A-Za-z0-9_]+))");
  std::vector<Call> calls;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), kCall);
       it != std::sregex_iterator(); ++it) {
    calls.push_back({(*it)[2].str(), (*it)[1].str()});
  }
  return calls;
}

using testing::Buf;
using testing::ShellQuote;
using Output = testing::BufOutput;

TEST(ReadmeSessionTest, EveryGrpcurlCallSucceedsAgainstAFreshServer) {
  const std::string readme = ReadReadme();
  ASSERT_FALSE(readme.empty()) << "README.md not found in runfiles";
  const std::vector<Call> calls = ExtractCalls(readme);
  std::set<std::string> methods;
  for (const Call& c : calls) methods.insert(c.method);
  const std::set<std::string> expected = {
      "convstate.v1.ConversationState/CreateConversation",
      "convstate.v1.ConversationState/AppendTurn",
      "convstate.v1.ConversationState/BuildContext",
      "convstate.v1.ConversationState/ListItems",
      "convstate.v1.ConversationState/InspectContext",
      "convstate.v1.ConversationState/Compact",
      "convstate.v1.ConversationState/ListSummaries",
      "convstate.v1.ConversationState/ExpandSummary",
      "convstate.v1.ConversationState/ListCompactionEvents",
      "convstate.v1.ConversationState/PinItem",
      "grpc.health.v1.Health/Check",
      "convstate.v1.ConversationState/DeleteConversation",
      "convstate.v1.ConversationState/UpdateConversation",
      "convstate.v1.ConversationState/GetContextAt",
      "convstate.v1.ConversationState/SearchHistory",
      "convstate.v1.ConversationState/ApplyCompaction",
      "convstate.v1.ConversationState/RevertCompaction",
      "convstate.v1.ConversationState/ForkConversation",
      "convstate.v1.ConversationState/ListForks",
      "convstate.v1.ConversationState/RewindConversation",
  };
  for (const std::string& m : expected) {
    EXPECT_TRUE(methods.count(m)) << "the README's session no longer calls " << m;
  }
  EXPECT_NE(readme.find("grpcurl -plaintext localhost:50051 list"), std::string::npos);

  auto db = testing::ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
  const std::string base = absl::StrCat("http://", (*server)->address());
  const std::string common = "curl --protocol grpc --http2-prior-knowledge ";

  // `grpcurl ... list` and `describe`: through reflection only.
  const Output services = Buf(absl::StrCat(common, "--list-services ", base));
  ASSERT_EQ(services.exit_code, 0) << services.out;
  for (const char* name : {"convstate.v1.ConversationState", "grpc.health.v1.Health"}) {
    EXPECT_NE(services.out.find(name), std::string::npos) << services.out;
  }
  const Output described = Buf(absl::StrCat(common, "--list-methods ", base));
  ASSERT_EQ(described.exit_code, 0) << described.out;
  for (const char* method :
       {"convstate.v1.ConversationState/BuildContext", "grpc.health.v1.Health/Check"}) {
    EXPECT_NE(described.out.find(method), std::string::npos) << described.out;
  }

  std::string last_demo_hash;
  for (const Call& call : calls) {
    SCOPED_TRACE(call.method);
    const Output out =
        Buf(absl::StrCat(common, "-d ", ShellQuote(call.json), " ", base, "/", call.method));
    ASSERT_EQ(out.exit_code, 0) << out.out;
    const std::string& json = out.out;
    const std::string name = std::vector<std::string>(absl::StrSplit(call.method, '/')).back();
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    auto parse = [&](google::protobuf::Message* m) {
      return google::protobuf::util::JsonStringToMessage(json, m, lenient).ok();
    };
    if (call.method == "grpc.health.v1.Health/Check") {
      EXPECT_NE(json.find("SERVING"), std::string::npos) << json;
      EXPECT_EQ(json.find("NOT_SERVING"), std::string::npos) << json;
    }
    if (name == "BuildContext") {
      v1::BuildContextResponse view;
      ASSERT_TRUE(parse(&view)) << json;
      const bool overflow = call.json.find("provider_overflow") != std::string::npos;
      const bool demo = view.conversation_id() == "demo";
      if (overflow) {
        // The refused view does not come back.
        EXPECT_NE(view.view_hash(), last_demo_hash) << json;
        EXPECT_LT(view.tokens().total() - view.tokens().output_reserve(), 900) << json;
      } else if (demo && last_demo_hash.empty()) {
        EXPECT_EQ(view.entries_size(), 8) << json;  // system + 6 items + pending
        EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
        last_demo_hash = view.view_hash();
      } else if (demo) {
        // After UpdateConversation: the new model's window.
        EXPECT_EQ(view.tokens().context_window(), 200000) << json;
      } else {
        EXPECT_EQ(view.entries_size(), 2) << json;  // system + pending
        EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
      }
      EXPECT_EQ(view.view_hash().size(), 64u) << json;
      ASSERT_FALSE(view.cache_breakpoints().empty()) << json;
      EXPECT_EQ(view.cache_breakpoints(0).kind(), v1::CACHE_BREAKPOINT_KIND_PINNED) << json;
    }
    if (name == "GetContextAt") {
      v1::BuildContextResponse past;
      ASSERT_TRUE(parse(&past)) << json;
      EXPECT_EQ(past.entries_size(), 7) << json;  // The first view, without its pending input.
      EXPECT_EQ(past.version(), 2) << json;
      EXPECT_EQ(past.compaction_version(), 1) << json;
      EXPECT_EQ(past.view_hash().size(), 64u) << json;
    }
    if (name == "ForkConversation") {
      v1::Conversation fork;
      ASSERT_TRUE(parse(&fork)) << json;
      EXPECT_EQ(fork.forked_from().conversation_id(), "demo") << json;
      EXPECT_EQ(fork.forked_from().sequence(), 4) << json;
      EXPECT_EQ(fork.item_count(), 4) << json;
      EXPECT_EQ(fork.version(), 1) << json;
    }
    if (name == "RewindConversation") {
      v1::RewindConversationResponse rewound;
      ASSERT_TRUE(parse(&rewound)) << json;
      EXPECT_EQ(rewound.conversation().last_sequence(), 1) << json;
      EXPECT_EQ(rewound.abandoned().conversation_id(), "demo-retry-old") << json;
      EXPECT_EQ(rewound.abandoned().last_sequence(), 4) << json;
    }
    if (name == "ListForks") {
      v1::ListForksResponse forks;
      ASSERT_TRUE(parse(&forks)) << json;
      ASSERT_EQ(forks.forks_size(), 1) << json;
      EXPECT_EQ(forks.forks(0).conversation_id(), "demo-retry") << json;
    }
    if (name == "UpdateConversation") {
      v1::Conversation updated;
      ASSERT_TRUE(parse(&updated)) << json;
      if (call.json.find("\"model\"") != std::string::npos) {
        EXPECT_EQ(updated.model(), "claude-sonnet-4-5") << json;
      } else {
        EXPECT_EQ(updated.compaction_policy().keep_size(), 1) << json;
      }
    }
    if (name == "CreateConversation" && json.find("\"strict\"") != std::string::npos) {
      v1::Conversation strict;
      ASSERT_TRUE(parse(&strict)) << json;
      ASSERT_TRUE(strict.profile_overrides().has_compaction_enabled()) << json;
      EXPECT_FALSE(strict.profile_overrides().compaction_enabled()) << json;
    }
    if (name == "Compact") {
      v1::CompactResponse compacted;
      ASSERT_TRUE(parse(&compacted)) << json;
      if (call.json.find("dry_run") != std::string::npos) {
        // A proposal, and nothing stored.
        EXPECT_EQ(compacted.summary_chunk_id(), 0) << json;
        EXPECT_EQ(compacted.proposal().proposal_id(), "1") << json;
        EXPECT_LT(compacted.proposal().after().total(), compacted.proposal().before().total())
            << json;
      } else {
        EXPECT_GT(compacted.summary_chunk_id(), 0) << json;
        EXPECT_LT(compacted.tokens_after(), compacted.tokens_before()) << json;
      }
    }
    if (name == "ApplyCompaction") {
      v1::ApplyCompactionResponse applied;
      ASSERT_TRUE(parse(&applied)) << json;
      EXPECT_EQ(applied.summary_chunk_id(), 1) << json;
      EXPECT_LT(applied.tokens_after(), applied.tokens_before()) << json;
    }
    if (name == "RevertCompaction") {
      v1::RevertCompactionResponse reverted;
      ASSERT_TRUE(parse(&reverted)) << json;
      EXPECT_TRUE(reverted.chunk().reverted()) << json;
      EXPECT_EQ(reverted.summarized_through(), 0) << json;
    }
    if (name == "ListSummaries") {
      v1::ListSummariesResponse listed;
      ASSERT_TRUE(parse(&listed)) << json;
      EXPECT_EQ(listed.chunks_size(), 1) << json;
    }
    if (name == "ExpandSummary") {
      v1::ExpandSummaryResponse expanded;
      ASSERT_TRUE(parse(&expanded)) << json;
      // The first turn: the question, the call, its result, the answer.
      EXPECT_EQ(expanded.items_size(), 4) << json;
      EXPECT_FALSE(expanded.chunk().facts().empty()) << json;
    }
    if (name == "SearchHistory") {
      v1::SearchHistoryResponse found;
      ASSERT_TRUE(parse(&found)) << json;
      // The kubectl output of the first turn, summarized away by now.
      bool answered = false;
      for (const v1::RecalledPassage& p : found.passages()) {
        answered |= p.sequence() == 3 && p.text().find("manifest unknown") != std::string::npos;
      }
      EXPECT_TRUE(answered) << json;
    }
    if (name == "PinItem") {
      v1::Item pinned;
      ASSERT_TRUE(parse(&pinned)) << json;
      EXPECT_TRUE(pinned.pinned()) << json;
      EXPECT_EQ(pinned.sequence(), 4) << json;
    }
    if (name == "ListCompactionEvents") {
      v1::ListCompactionEventsResponse audit;
      ASSERT_TRUE(parse(&audit)) << json;
      ASSERT_FALSE(audit.events().empty()) << json;
      bool completed = false;
      for (const auto& e : audit.events()) completed |= e.event() == "completed";
      EXPECT_TRUE(completed) << json;
    }
    if (name == "AppendTurn") {
      v1::AppendTurnResponse appended;
      ASSERT_TRUE(parse(&appended)) << json;
      EXPECT_GE(appended.items_size(), 2) << json;
      EXPECT_FALSE(appended.replayed()) << json;
    }
  }
}

// The Security section's session: grpcurl over TLS with a bearer token.
struct SecureCall {
  std::string token;   // "TOKEN" or "OPERATOR_TOKEN"
  std::string method;  // "package.Service/Method", or "list"
  std::string json;
};

std::vector<SecureCall> ExtractSecureCalls(const std::string& readme) {
  // grpcurl -cacert ca.pem -H "authorization: Bearer $TOKEN" [-d '<json>'] [\ newline]
  //   localhost:50443 <method or list>
  static const std::regex kCall(
      R"re(grpcurl -cacert ca\.pem -H "authorization: Bearer \$([A-Z_]+)"(?: -d '([^']*)')?\s*(?:\\\s*)?localhost:50443 ([A-Za-z0-9_.]+/[A-Za-z0-9_]+|list))re");
  std::vector<SecureCall> calls;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), kCall);
       it != std::sregex_iterator(); ++it) {
    calls.push_back({(*it)[1].str(), (*it)[3].str(), (*it)[2].str()});
  }
  return calls;
}

TEST(ReadmeSessionTest, TheSecureSessionRunsWithTlsAndTokens) {
  const std::string readme = ReadReadme();
  const std::vector<SecureCall> calls = ExtractSecureCalls(readme);
  std::set<std::string> methods;
  for (const SecureCall& c : calls) methods.insert(c.method);
  for (const char* m : {"list", "grpc.health.v1.Health/Check",
                        "convstate.v1.ConversationState/CreateConversation",
                        "convstate.v1.ConversationState/AppendTurn",
                        "convstate.v1.ConversationState/BuildContext",
                        "convstate.v1.ConversationState/RedactItems"}) {
    EXPECT_TRUE(methods.count(m)) << "the README's secure session no longer calls " << m;
  }
  // What the section's set-up makes: a CA, a certificate for localhost, a
  // gateway's and an operator's token in a private access file.
  ASSERT_TRUE(testing::MakeCa("ca") && testing::MakeCert("server", "ca")) << "openssl failed";
  const std::map<std::string, testing::Token> tokens = {
      {"TOKEN", testing::MakeToken("acme", "gateway", "acme-gateway")},
      {"OPERATOR_TOKEN", testing::MakeToken("acme", "operator", "privacy-officer")}};
  const std::string dir = testing::TestDir();
  const std::string access = dir + "/access.textproto";
  {
    std::ofstream out(access, std::ios::trunc);
    for (const auto& [name, token] : tokens) {
      ASSERT_FALSE(token.secret.empty()) << "tools/make_token failed";
      out << token.entry << "\n";
    }
  }
  ASSERT_EQ(chmod(access.c_str(), 0600), 0);
  auto db = testing::ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(
      **db, {"--otel_disabled", "--tls_cert=" + dir + "/server.pem",
       "--tls_key=" + dir + "/server.key", "--access_file=" + access});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
  const std::string base = absl::StrCat("https://127.0.0.1:", (*server)->port());
  const std::string tls = absl::StrCat("curl --protocol grpc --cacert ", ShellQuote(dir + "/ca.pem"), " ");
  auto with_token = [&](const std::string& name) {
    const std::string header = ShellQuote("authorization: Bearer " + tokens.at(name).secret);
    return absl::StrCat(tls, "-H ", header, " --reflect-header ", header, " ");
  };
  for (const SecureCall& call : calls) {
    SCOPED_TRACE(call.method);
    ASSERT_TRUE(tokens.count(call.token)) << "unknown variable $" << call.token;
    const Output out =
        call.method == "list"
            ? Buf(absl::StrCat(with_token(call.token), "--list-services ", base))
            : Buf(absl::StrCat(with_token(call.token), "-d ", ShellQuote(call.json), " ", base,
                               "/", call.method));
    ASSERT_EQ(out.exit_code, 0) << out.out;
    if (call.method == "list") {
      EXPECT_NE(out.out.find("convstate.v1.ConversationState"), std::string::npos) << out.out;
    }
    if (call.method == "grpc.health.v1.Health/Check") {
      EXPECT_NE(out.out.find("\"SERVING\""), std::string::npos) << out.out;
    }
    if (call.method == "convstate.v1.ConversationState/BuildContext") {
      EXPECT_NE(out.out.find("My card ends in 4242."), std::string::npos) << out.out;
    }
    if (call.method == "convstate.v1.ConversationState/RedactItems") {
      v1::RedactItemsResponse redacted;
      google::protobuf::util::JsonParseOptions lenient;
      lenient.ignore_unknown_fields = true;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.out, &redacted, lenient).ok())
          << out.out;
      ASSERT_EQ(redacted.items_size(), 1) << out.out;
      EXPECT_TRUE(redacted.items(0).redacted()) << out.out;
      EXPECT_EQ(redacted.items(0).content().find("4242"), std::string::npos) << out.out;
    }
  }
  // Without the header: refused.
  const Output refused = Buf(absl::StrCat(tls, "-d '{}' ", base, "/grpc.health.v1.Health/Check"));
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_EQ(*(*db)->QueryValue("SELECT tenant_id FROM conversations"), "acme");
}

}  // namespace
}  // namespace convstate
