// convstatectl against a real server and PostgreSQL: every command, its
// JSON output and exit codes, export and import; and its HTML report of a
// compacted conversation rendered by a real headless Chromium, whose DOM and
// layout are checked against what the API answers. The screenshot is kept
// as a test output (report.png in TEST_UNDECLARED_OUTPUTS_DIR).

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_credentials.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using rpc::Message;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using ::testing::HasSubstr;

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

std::string Tmp() { return std::getenv("TEST_TMPDIR"); }

// Runs a command line; its exit code, stdout and stderr.
Outcome Shell(const std::string& command) {
  const std::string out = Tmp() + "/cmd.out", err = Tmp() + "/cmd.err";
  const int status = std::system((command + " >" + out + " 2>" + err).c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = testing::ReadFile(out);
  r.err = testing::ReadFile(err);
  return r;
}

class ConvstatectlE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto db = ScratchDatabase::Create(/*migrate=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = db->release();
    // No background compaction: the view stays as the test leaves it
    // between the report's calls and the test's own.
    auto server = testing::StartServerOn(
        *db_, {"--model_profiles=" + testing::WriteTinyProfiles(), "--background_compaction=false"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    stub_ = testing::StubFor(*server_).release();
    // A conversation of 36 turns on a 4,096-token window, with facts and an
    // instruction, compacted every 12 turns.
    Call([](grpc::ClientContext* ctx) {
      v1::CreateConversationRequest req;
      req.set_conversation_id("ops");
      req.set_model("tiny-ops");
      req.set_system_prompt("You are the on-call assistant.");
      v1::Conversation out;
      return stub_->CreateConversation(ctx, req, &out);
    });
    for (int n = 1; n <= 36; ++n) {
      v1::AppendTurnRequest req;
      req.set_conversation_id("ops");
      *req.add_items() = Message(
          v1::ROLE_USER,
          n == 1 ? "Always answer in British English and never restart the primary database."
                 : absl::StrCat("Turn ", n, ": the queue depth on shard ", n % 7,
                                " reached ", 1000 + 37 * n,
                                " messages; the deploy of build 4.", n,
                                " is held until the replica catches up. The pager rotation for",
                                " week ", n, " is owned by engineer ", 100 + n * 3,
                                ", and the error budget left is ", 90 - n, " minutes; the",
                                " incident ticket INC-", 5000 + n, " tracks the lag on host db-",
                                n % 5, "."));
      *req.add_items() = Message(
          v1::ROLE_ASSISTANT,
          absl::StrCat("Noted for turn ", n, ": I will watch shard ", n % 7,
                       " and report when the replica lag drops below ", 5 + n % 4,
                       " seconds, then release build 4.", n, "."));
      Call([&](grpc::ClientContext* ctx) {
        v1::AppendTurnResponse out;
        return stub_->AppendTurn(ctx, req, &out);
      });
      if (n % 12 == 0) {
        Call([](grpc::ClientContext* ctx) {
          v1::CompactRequest req;
          req.set_conversation_id("ops");
          req.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
          v1::CompactResponse out;
          return stub_->Compact(ctx, req, &out);
        });
      }
    }
  }

  static void TearDownTestSuite() {
    delete stub_;
    delete server_;
    delete db_;
  }

  template <typename F>
  static void Call(F f) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = f(&ctx);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static std::string Ctl() {
    return ServerProcess::RunfilePath("tools/convstatectl/convstatectl");
  }

  static Outcome Cli(const std::string& args) {
    return Shell(absl::StrCat(Ctl(), " --address=", server_->address(), " ", args));
  }

  static inline ScratchDatabase* db_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  static inline v1::ConversationState::Stub* stub_ = nullptr;
};

TEST_F(ConvstatectlE2eTest, HealthListAndShow) {
  Outcome r = Cli("health");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Cli("list");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("conversation"));
  EXPECT_THAT(r.out, HasSubstr("ops "));
  r = Cli("show ops --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"conversationId\":\"ops\""));
  EXPECT_THAT(r.out, HasSubstr("\"model\":\"tiny-ops\""));
  r = Cli("show ops");
  EXPECT_THAT(r.out, HasSubstr("system prompt        You are the on-call assistant."));
}

TEST_F(ConvstatectlE2eTest, ItemsFromASequence) {
  Outcome r = Cli("items ops --from 3 --limit 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("\"sequence\":\"3\""));
  EXPECT_THAT(lines[1], HasSubstr("\"sequence\":\"4\""));
  r = Cli("items ops --limit 1");
  EXPECT_THAT(r.out, HasSubstr("Always answer in British English"));
}

TEST_F(ConvstatectlE2eTest, ViewInspectAndTheAuditTrail) {
  Outcome r = Cli("view ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("section"));
  EXPECT_THAT(r.out, HasSubstr("summary"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("total +[0-9]+ +[0-9.]+% +of 4096"));
  r = Cli("inspect ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("band [a-z]+ \\(soft 2867, hard 3276, "
                                              "emergency 3891 tokens\\)"));
  r = Cli("history ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("completed"));
  r = Cli("summaries ops --all");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("active"));
  r = Cli("expand ops 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("chunk 1: items 1-"));
}

TEST_F(ConvstatectlE2eTest, CompactOnAnotherConversation) {
  const Outcome exported = Cli("export ops");
  ASSERT_EQ(exported.code, 0) << exported.err;
  std::ofstream(Tmp() + "/c.jsonl") << exported.out;
  ASSERT_EQ(Cli(absl::StrCat("import ", Tmp(), "/c.jsonl --as to-compact")).code, 0);
  Outcome r = Cli("compact to-compact --mode prune --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"tokensBefore\""));
  r = Cli("compact to-compact --mode bogus");
  EXPECT_EQ(r.code, 64);
  EXPECT_THAT(r.err, HasSubstr("--mode: auto, prune, summarize or truncate"));
}

TEST_F(ConvstatectlE2eTest, ExportThenImportKeepsEveryItem) {
  const std::string file = Tmp() + "/ops.jsonl";
  Outcome r = Cli("export ops");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ofstream(file) << r.out;
  r = Cli(absl::StrCat("import ", file, " --as ops-copy"));
  ASSERT_EQ(r.code, 0) << r.err;
  // The originals less the summary markers compaction wrote.
  const std::string original = testing::ReadFile(file);
  int items = 0, markers = 0;
  for (absl::string_view line : absl::StrSplit(original, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "{\"item\":")) continue;
    ++items;
    markers += absl::StrContains(line, "ITEM_KIND_SUMMARY_MARKER");
  }
  EXPECT_GT(markers, 0);
  EXPECT_EQ(r.out, absl::StrCat("imported ops-copy: ", items - markers, " items\n"));
  r = Cli("items ops-copy --limit 1000 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(r.out, '\n', absl::SkipEmpty())).size(),
            static_cast<size_t>(items - markers));
  // Importing again under the same id: the conversation exists.
  r = Cli(absl::StrCat("import ", file, " --as ops-copy"));
  EXPECT_EQ(r.code, 6) << r.err;  // ALREADY_EXISTS
  r = Cli(absl::StrCat("import ", Tmp(), "/missing.jsonl"));
  EXPECT_EQ(r.code, 66);
}

TEST_F(ConvstatectlE2eTest, ForkAndListForks) {
  Outcome r = Cli("fork ops --at 4 --as ops-branch");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("forked ops at item 4 into ops-branch (4 items"));
  r = Cli("show ops-branch");
  EXPECT_THAT(r.out, ::testing::ContainsRegex("forked from +ops at item 4"));
  r = Cli("items ops-branch --limit 1000 --json");
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(r.out, '\n', absl::SkipEmpty())).size(), 4u);
  r = Cli("forks ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("ops-branch +4 +4 +tiny-ops"));
  // A rewind of the branch: items 3 and 4 go to a fork of their own.
  r = Cli("rewind ops-branch 2 --as ops-branch-rest");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "rewound ops-branch to item 2 (version 3); items 3-4 live on in "
                   "ops-branch-rest\n");
  // Below its fork point (4): what it shared with ops is the abandoned
  // fork's, which is ops's fork now; ops-branch shares items 1-2 with it.
  r = Cli("forks ops --json");
  EXPECT_THAT(r.out, HasSubstr("\"conversationId\":\"ops-branch-rest\""));
  r = Cli("show ops-branch");
  EXPECT_THAT(r.out, ::testing::ContainsRegex("forked from +ops at item 2"));
  r = Cli("rewind ops-branch 2");
  EXPECT_EQ(r.code, 11) << r.err;  // Nothing after item 2 now: OUT_OF_RANGE.
  r = Cli("fork ops --at -1");
  EXPECT_EQ(r.code, 64);
  r = Cli("fork ops --at 100000");
  EXPECT_EQ(r.code, 11) << r.err;  // OUT_OF_RANGE
  r = Cli("fork nobody");
  EXPECT_EQ(r.code, 5) << r.err;
}

TEST_F(ConvstatectlE2eTest, FailuresExitWithTheirStatus) {
  Outcome r = Cli("show nobody");
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  r = Cli("frobnicate ops");
  EXPECT_EQ(r.code, 64);
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  r = Cli("show");
  EXPECT_EQ(r.code, 64);
  r = Cli("--bogus list");
  EXPECT_EQ(r.code, 64);
  r = Shell(Ctl() + " --address=127.0.0.1:1 --timeout_ms=2000 health");
  EXPECT_EQ(r.code, 14) << r.err;  // UNAVAILABLE
  r = Shell(Ctl() + " --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("exit codes"));
}

// Over TLS with a bearer token or a client certificate, as an operator
// reaches a deployed server: the credential decides the tenant; a wrong
// token is UNAUTHENTICATED (16), a reader's token may not compact
// (PERMISSION_DENIED, 7).
TEST_F(ConvstatectlE2eTest, TlsAndTokens) {
  ASSERT_TRUE(testing::MakeCa("ca") && testing::MakeCert("server", "ca") &&
              testing::MakeCert("ops-cert", "ca"))
      << "openssl failed";
  const testing::Token op = testing::MakeToken("acme", "operator", "ops-team");
  const testing::Token reader = testing::MakeToken("acme", "reader", "auditor");
  ASSERT_FALSE(op.secret.empty() || reader.secret.empty());
  const std::string access = Tmp() + "/access.textproto";
  std::ofstream(access) << op.entry << "\n" << reader.entry << "\n"
                        << "certificates { identity: 'ops-cert' tenant: 'acme' role: "
                           "ROLE_OPERATOR }\n";
  ASSERT_EQ(chmod(access.c_str(), 0600), 0);
  const std::string dir = testing::TestDir();
  auto secured = testing::StartServerOn(*db_, {"--access_file=" + access,
                                       "--tls_cert=" + dir + "/server.pem",
                                       "--tls_key=" + dir + "/server.key",
                                       "--tls_client_ca=" + dir + "/ca.pem",
                                       "--tls_client_auth=optional"});
  ASSERT_TRUE(secured.ok()) << secured.status();
  const std::string base = absl::StrCat(Ctl(), " --address=localhost:", (*secured)->port(),
                                        " --cacert=", dir, "/ca.pem");
  Outcome r = Shell(absl::StrCat(base, " --token=", op.secret, " --json show acme-ops"));
  EXPECT_EQ(r.code, 5) << r.err;  // Not created yet, in the token's tenant.
  // Written by hand, as an operator might.
  std::ofstream(Tmp() + "/acme.jsonl")
      << "{\"conversation\": {\"conversationId\": \"acme-ops\", \"model\": \"gpt-4o\"}}\n";
  r = Shell(absl::StrCat("CONVSTATE_TOKEN=", op.secret, " ", base, " import ", Tmp(),
                         "/acme.jsonl"));
  EXPECT_EQ(r.code, 0) << r.err;
  r = Shell(absl::StrCat(base, " --token=", op.secret, " --json show acme-ops"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"tenantId\":\"acme\""));
  // A client certificate instead of a token (mutual TLS).
  r = Shell(absl::StrCat(base, " --cert=", dir, "/ops-cert.pem --key=", dir,
                         "/ops-cert.key history acme-ops"));
  EXPECT_EQ(r.code, 0) << r.err;
  r = Shell(absl::StrCat(base, " --cert=", dir, "/ops-cert.pem history acme-ops"));
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--cert and --key go together"));
  r = Shell(absl::StrCat(base, " --token=", reader.secret, " compact acme-ops"));
  EXPECT_EQ(r.code, 7) << r.err;
  r = Shell(absl::StrCat(base, " --token=cst_wrong show acme-ops"));
  EXPECT_EQ(r.code, 16) << r.err;
  EXPECT_THAT(r.err, HasSubstr("UNAUTHENTICATED"));
  // Plaintext to a TLS port does not get through.
  r = Shell(absl::StrCat(Ctl(), " --address=localhost:", (*secured)->port(),
                         " --timeout_ms=2000 --token=", op.secret, " show acme-ops"));
  EXPECT_EQ(r.code, 14) << r.err;
}

// Numbers the page carries in an attribute, from Chromium's serialized DOM.
std::vector<std::string> Matches(const std::string& dom, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

TEST_F(ConvstatectlE2eTest, ReportRendersInChromiumWithTheApisNumbers) {
  const std::string report = Tmp() + "/report.html";
  Outcome r = Cli("report ops");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ofstream(report) << r.out;

  // What the API says now.
  v1::BuildContextResponse view;
  Call([&](grpc::ClientContext* ctx) {
    v1::BuildContextRequest req;
    req.set_conversation_id("ops");
    return stub_->BuildContext(ctx, req, &view);
  });
  v1::ListCompactionEventsResponse events;
  Call([&](grpc::ClientContext* ctx) {
    v1::ListCompactionEventsRequest req;
    req.set_conversation_id("ops");
    return stub_->ListCompactionEvents(ctx, req, &events);
  });
  v1::ListSummariesResponse chunks;
  Call([&](grpc::ClientContext* ctx) {
    v1::ListSummariesRequest req;
    req.set_conversation_id("ops");
    req.set_include_superseded(true);
    return stub_->ListSummaries(ctx, req, &chunks);
  });
  int completed = 0;
  // The steps of the sawtooth: compactions that moved the view.
  for (const auto& e : events.events()) {
    completed += (e.event() == "completed" || e.event() == "pruned" || e.event() == "folded" ||
                  e.event() == "truncated") &&
                 e.tokens_before() > 0;
  }
  ASSERT_GE(completed, 2) << Cli("history ops").out;
  int facts = 0;
  for (const auto& c : chunks.chunks()) {
    if (c.superseded_by() == 0) facts += c.facts_size() + c.constraints_size();
  }

  // A page that loads the report in a frame and, once laid out, writes the
  // drawn size of every bar segment and point into its own DOM.
  const std::string check = Tmp() + "/check.html";
  std::ofstream(check) << R"(<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="f" src="report.html" width="1200" height="900"></iframe>
<script>
document.getElementById('f').onload = () => {
  const doc = document.getElementById('f').contentDocument;
  const lines = [];
  for (const r of doc.querySelectorAll('rect.segment')) {
    lines.push('segment ' + r.dataset.section + ' ' + r.dataset.tokens + ' ' +
               r.getBoundingClientRect().width.toFixed(2));
  }
  const w = doc.querySelector('rect.window');
  lines.push('window ' + w.dataset.tokens + ' ' + w.getBoundingClientRect().width.toFixed(2));
  let drawn = 0;
  for (const c of doc.querySelectorAll('circle.point')) {
    if (c.getBoundingClientRect().width > 0) drawn++;
  }
  lines.push('points ' + drawn);
  document.getElementById('out').textContent = lines.join('\n');
};
</script></body></html>)";
  const std::string chromium =
      "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--allow-file-access-from-files --user-data-dir=" +
      Tmp() + "/chromium --virtual-time-budget=5000 ";
  Outcome dom = Shell(chromium + "--dump-dom file://" + report);
  ASSERT_EQ(dom.code, 0) << dom.err;
  Outcome laid = Shell(chromium + "--dump-dom file://" + check);
  ASSERT_EQ(laid.code, 0) << laid.err;

  // The DOM as Chromium built it: one bar segment per section, each with
  // the API's tokens; a point before and after each compaction, and now.
  std::map<std::string, std::string> segments;
  const std::regex segment_re(
      R"re(<rect class="segment" data-section="([a-z]+)" data-tokens="([0-9]+)")re");
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), segment_re);
       it != std::sregex_iterator(); ++it) {
    segments[(*it)[1].str()] = (*it)[2].str();
  }
  const v1::TokenBreakdown& t = view.tokens();
  EXPECT_EQ(segments["system"], absl::StrCat(t.system()));
  EXPECT_EQ(segments["ledger"], absl::StrCat(t.ledger()));
  EXPECT_EQ(segments["pinned"], absl::StrCat(t.pinned()));
  EXPECT_EQ(segments["summaries"], absl::StrCat(t.summaries()));
  EXPECT_EQ(segments["live"], absl::StrCat(t.live()));
  EXPECT_EQ(segments["pending"], absl::StrCat(t.pending()));
  EXPECT_EQ(segments["reserve"], absl::StrCat(t.output_reserve()));
  EXPECT_GT(t.summaries(), 0);
  EXPECT_EQ(Matches(dom.out, R"re(<circle class="point" data-event-id)re").size(),
            2u * completed);
  EXPECT_EQ(Matches(dom.out, R"re(class="point now" data-phase="now" data-tokens="([0-9]+)")re"),
            std::vector<std::string>{absl::StrCat(t.total())});
  EXPECT_EQ(Matches(dom.out, R"re(<tr class="chunk[^"]*" id="chunk-([0-9]+)")re").size(),
            static_cast<size_t>(chunks.chunks_size()));
  EXPECT_EQ(Matches(dom.out, R"re(<tr class="fact ([a-z]+)")re").size(),
            static_cast<size_t>(facts));
  EXPECT_EQ(Matches(dom.out, R"re(data-band="(soft|hard|emergency)")re").size(), 6u);
  EXPECT_THAT(dom.out, HasSubstr(absl::StrCat("The window now: ", t.total(), " of ",
                                              t.context_window(), " tokens")));

  // As laid out: every segment as wide as its share of the window.
  const std::string out = Matches(laid.out, R"re(<pre id="out">([^<]*)</pre>)re").at(0);
  ASSERT_NE(out, "pending") << laid.out;
  double window_px = 0;
  int64_t window_tokens = 0;
  int drawn_points = -1;
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f[0] == "window") {
      ASSERT_TRUE(absl::SimpleAtoi(f[1], &window_tokens));
      ASSERT_TRUE(absl::SimpleAtod(f[2], &window_px));
    } else if (f[0] == "points") {
      ASSERT_TRUE(absl::SimpleAtoi(f[1], &drawn_points));
    } else {
      rows.push_back(f);
    }
  }
  EXPECT_EQ(window_tokens, t.context_window());
  ASSERT_GT(window_px, 100);
  ASSERT_EQ(rows.size(), 7u) << out;
  for (const auto& f : rows) {
    double px = 0;
    int64_t tokens = 0;
    ASSERT_TRUE(absl::SimpleAtoi(f[2], &tokens) && absl::SimpleAtod(f[3], &px)) << out;
    EXPECT_NEAR(px, window_px * tokens / std::max<int64_t>(t.context_window(), t.total()), 1.0)
        << f[1];
  }
  EXPECT_EQ(drawn_points, 2 * completed + 1);  // And now.

  // The screenshot, kept with the test's outputs.
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  const std::string png = std::string(outputs != nullptr ? outputs : Tmp().c_str()) + "/report.png";
  Outcome shot = Shell(chromium + "--hide-scrollbars --window-size=1100,1500 --screenshot=" + png +
                   " file://" + report);
  ASSERT_EQ(shot.code, 0) << shot.err;
  const std::string image = testing::ReadFile(png);
  ASSERT_GT(image.size(), 10000u);
  EXPECT_EQ(image.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace convstate
