// Erasure end to end: a secret a user typed is summarized into chunks, the
// ledger and the idempotency record, then RedactItems removes it, and a
// scan of every table, the views and the server's log finds it nowhere;
// DeleteConversation is held to the same scan. The erasure scenario that
// both backends run (tests/erasure_scenario.h) is held to a full pg_dump of
// the database.

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/sha256.h"
#include "tests/erasure_scenario.h"
#include "tests/fake_llm_control.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"
#include "tests/test_credentials.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using testing::ControlFakeLlm;
using rpc::MakeItem;
using testing::MakeToken;
using rpc::Message;
using testing::ReadFile;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using testing::TestDir;
using v1::ConversationState;

constexpr char kSecret[] = "ACCT-7731-SECRET";
constexpr char kRedactionKey[] = "0123456789abcdef0123456789abcdef-redaction-test-key";
const std::string kSecretMessage =
    absl::StrCat("Remember this for later: my bank account number is ", kSecret, ".");

// The erasure scenario's calls through a server, with `bearer`'s
// credential.
class GrpcErasureApi : public testing::ErasureApi {
 public:
  GrpcErasureApi(ConversationState::Stub* stub, std::string bearer)
      : stub_(stub), bearer_(std::move(bearer)) {}

  absl::StatusOr<v1::Conversation> CreateConversation(
      const v1::CreateConversationRequest& req) override {
    return Call(&ConversationState::Stub::CreateConversation, req);
  }
  absl::StatusOr<v1::Conversation> GetConversation(const v1::GetConversationRequest& req) override {
    return Call(&ConversationState::Stub::GetConversation, req);
  }
  absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const v1::AppendTurnRequest& req) override {
    return Call(&ConversationState::Stub::AppendTurn, req);
  }
  absl::StatusOr<v1::ListItemsResponse> ListItems(const v1::ListItemsRequest& req) override {
    return Call(&ConversationState::Stub::ListItems, req);
  }
  absl::StatusOr<v1::BuildContextResponse> BuildContext(
      const v1::BuildContextRequest& req) override {
    return Call(&ConversationState::Stub::BuildContext, req);
  }
  absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const v1::InspectContextRequest& req) override {
    return Call(&ConversationState::Stub::InspectContext, req);
  }
  absl::StatusOr<v1::BuildContextResponse> GetContextAt(
      const v1::GetContextAtRequest& req) override {
    return Call(&ConversationState::Stub::GetContextAt, req);
  }
  absl::StatusOr<v1::CompactResponse> Compact(const v1::CompactRequest& req) override {
    return Call(&ConversationState::Stub::Compact, req);
  }
  absl::StatusOr<v1::ApplyCompactionResponse> ApplyCompaction(
      const v1::ApplyCompactionRequest& req) override {
    return Call(&ConversationState::Stub::ApplyCompaction, req);
  }
  absl::StatusOr<v1::ListSummariesResponse> ListSummaries(
      const v1::ListSummariesRequest& req) override {
    return Call(&ConversationState::Stub::ListSummaries, req);
  }
  absl::StatusOr<v1::ExpandSummaryResponse> ExpandSummary(
      const v1::ExpandSummaryRequest& req) override {
    return Call(&ConversationState::Stub::ExpandSummary, req);
  }
  absl::StatusOr<v1::ListCompactionEventsResponse> ListCompactionEvents(
      const v1::ListCompactionEventsRequest& req) override {
    return Call(&ConversationState::Stub::ListCompactionEvents, req);
  }
  absl::StatusOr<v1::SearchHistoryResponse> SearchHistory(
      const v1::SearchHistoryRequest& req) override {
    return Call(&ConversationState::Stub::SearchHistory, req);
  }
  absl::StatusOr<v1::RedactItemsResponse> RedactItems(const v1::RedactItemsRequest& req) override {
    return Call(&ConversationState::Stub::RedactItems, req);
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (ConversationState::Stub::*method)(grpc::ClientContext*, const Request&,
                                                      Response*),
      const Request& req) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ctx.AddMetadata("authorization", "Bearer " + bearer_);
    Response out;
    const grpc::Status s = (stub_->*method)(&ctx, req, &out);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    }
    return out;
  }

  ConversationState::Stub* const stub_;
  const std::string bearer_;
};

// A full dump of `db` in plain format, by the pg_dump of the PostgreSQL
// that tools/test runs (PG_BIN, tools/lib/common.sh); "" and `error` set if
// it failed.
std::string PgDump(const ScratchDatabase& db, std::string* error) {
  const std::string common = ServerProcess::RunfilePath("tools/lib/common.sh");
  const std::string dump = TestDir() + "/erasure-dump.sql";
  const std::string err = TestDir() + "/pg_dump.err";
  const std::string command =
      absl::StrCat("bash -c 'source ", common, " && \"$PG_BIN/pg_dump\" --no-owner ",
                   "--no-privileges --file=", dump, " --dbname=", db.url(), "' 2>", err);
  const int rc = std::system(command.c_str());
  if (rc != 0) {
    *error = absl::StrCat("pg_dump failed (", rc, "): ", ReadFile(err));
    return "";
  }
  return ReadFile(dump);
}

// Where a plain-format dump holds the secret, one line each ("" when
// nowhere): "table.column: what (the row)" for the rows of each table's
// COPY block, what the line holds for the rest of the dump.
std::string DumpLeaks(const std::string& dump) {
  std::string out;
  std::string table;
  std::vector<std::string> columns;
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    if (!table.empty()) {
      if (line == "\\.") {
        table.clear();
        continue;
      }
      const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
      for (size_t i = 0; i < fields.size(); ++i) {
        const std::string found = testing::SecretIn(fields[i]);
        if (found.empty()) continue;
        absl::StrAppend(&out, table, ".", i < columns.size() ? columns[i] : "?", ": ", found,
                        " (the row: \"", absl::CHexEscape(line.substr(0, 200)), "\")\n");
      }
      continue;
    }
    // COPY public.items (conv_key, sequence, ...) FROM stdin;
    if (absl::StartsWith(line, "COPY ")) {
      const size_t open = line.find(" (");
      const size_t close = line.rfind(") FROM stdin;");
      if (open != absl::string_view::npos && close != absl::string_view::npos && close > open) {
        table = std::string(line.substr(5, open - 5));
        columns = absl::StrSplit(line.substr(open + 2, close - open - 2), ", ");
        continue;
      }
    }
    const std::string found = testing::SecretIn(line);
    if (!found.empty()) absl::StrAppend(&out, "outside the table data: ", found, "\n");
  }
  return out;
}

// The columns of `db`'s tables that hold a form of the secret, as
// "table.column: rows" lines: where a dump's finding lives.
std::string PlacesHolding(const ScratchDatabase& db) {
  auto columns = db.QueryValue(
      "SELECT string_agg(c.table_name || '.' || c.column_name, ',' ORDER BY c.table_name, "
      "c.ordinal_position) FROM information_schema.columns c JOIN information_schema.tables t "
      "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
      "WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.data_type IN "
      "('text', 'character varying', 'character', 'json', 'jsonb', 'tsvector', 'ARRAY', "
      "'USER-DEFINED', 'bytea')");
  EXPECT_TRUE(columns.ok()) << columns.status();
  if (!columns.ok()) return "";
  std::vector<std::string> forms;
  for (const std::string& form : testing::SecretForms()) {
    const bool digits = form.find_first_not_of("0123456789") == std::string::npos;
    std::string escaped;
    for (char c : form) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) escaped += '\\';
      escaped += c;
    }
    forms.push_back(digits ? absl::StrCat("(^|[^0-9a-z])", escaped, "($|[^0-9a-z])") : escaped);
  }
  const std::string pattern = absl::StrJoin(forms, "|");
  std::vector<std::string> counts;
  for (absl::string_view place : absl::StrSplit(*columns, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(place, '.');
    counts.push_back(absl::StrCat("SELECT '", place, "' AS place, count(*) AS n FROM \"", parts[0],
                                  "\" WHERE \"", parts[1], "\"::text ~* '", pattern, "'"));
  }
  auto found = db.QueryValue(absl::StrCat(
      "SELECT coalesce(string_agg(place || ': ' || n, E'\\n' ORDER BY place), '') FROM (",
      absl::StrJoin(counts, " UNION ALL "), ") x WHERE n > 0"));
  EXPECT_TRUE(found.ok()) << found.status();
  return found.value_or("");
}

class RedactionE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    operator_ = MakeToken("acme", "operator", "privacy-officer");
    ASSERT_FALSE(operator_.secret.empty()) << "tools/make_token failed";
    access_ = TestDir() + "/access.textproto";
    std::ofstream(access_, std::ios::trunc) << operator_.entry << "\n";
    chmod(access_.c_str(), 0600);
    key_file_ = TestDir() + "/redaction.key";
    std::ofstream(key_file_, std::ios::trunc) << kRedactionKey << "\n";
    chmod(key_file_.c_str(), 0600);
    log_file_ = TestDir() + "/redaction-server.log";
    server_ = Start({});
    ASSERT_NE(server_, nullptr);
    stub_ = testing::StubFor(*server_);
  }

  // A server (a replica: every one shares the database) with `extra` flags.
  std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = {
        "--model_profiles=" + testing::WriteTinyProfiles(), "--otel_disabled",
        "--background_compaction=false", "--access_file=" + access_};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto server = testing::StartServerOn(*db_, flags, log_file_);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  void Prepare(grpc::ClientContext& ctx) {
    SetDeadline(ctx);
    ctx.AddMetadata("authorization", "Bearer " + operator_.secret);
  }

  void Create(const std::string& id) {
    v1::CreateConversationRequest req;
    req.set_conversation_id(id);
    req.set_model("tiny-1");
    v1::Conversation out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = stub_->CreateConversation(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // Appends `items`; the sequence of the first.
  int64_t Append(const std::string& id, std::vector<v1::NewItem> items,
                 const std::string& idempotency_key = "") {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    req.set_idempotency_key(idempotency_key);
    for (v1::NewItem& item : items) *req.add_items() = std::move(item);
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = stub_->AppendTurn(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? out.items(0).sequence() : 0;
  }

  // A turn of ordinary work, about 200 tokens.
  void Filler(const std::string& id, int n) {
    Append(id, {Message(v1::ROLE_USER, absl::StrCat("[turn ", n, "] Why is api-", n,
                                                    " slow on port ", 8000 + n, "?")),
                Message(v1::ROLE_ASSISTANT,
                        absl::StrCat("api-", n, " waits on db-", n, " because the orders table "
                                     "lacks an index on customer_id; we decided to add the "
                                     "index and roll back release 1.", n, " tonight, after the "
                                     "batch window closes at 02:00 UTC. That should settle it "
                                     "for now, and nothing else needs to change until the "
                                     "next review comes around, so there is no rush on "
                                     "anything else in the meantime. The other services look "
                                     "healthy and their dashboards show nothing unusual for "
                                     "this hour of the night. If anything changes I will say "
                                     "so before we go any further with the plan as it stands."))});
  }

  v1::BuildContextResponse Build(const std::string& id, ConversationState::Stub* stub = nullptr) {
    v1::BuildContextRequest req;
    req.set_conversation_id(id);
    v1::BuildContextResponse out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = (stub ? stub : stub_.get())->BuildContext(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  v1::RedactItemsResponse Redact(const std::string& id, std::vector<int64_t> sequences) {
    v1::RedactItemsRequest req;
    req.set_conversation_id(id);
    for (int64_t s : sequences) req.add_sequences(s);
    req.set_reason("erasure request 2026-118");
    v1::RedactItemsResponse out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = stub_->RedactItems(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  v1::CompactResponse Summarize(const std::string& id) {
    v1::CompactRequest req;
    req.set_conversation_id(id);
    req.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    v1::CompactResponse out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = stub_->Compact(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  // Rows of every table of the schema whose text holds `needle`, as
  // "table: count" lines.
  std::string RowsHolding(const std::string& needle) {
    auto tables = db_->QueryValue(
        "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
    EXPECT_TRUE(tables.ok());
    std::string found;
    for (absl::string_view table : absl::StrSplit(*tables, ',')) {
      auto count = db_->QueryValue(absl::StrCat("SELECT count(*) FROM ", table, " t WHERE t::text LIKE '%",
                                                needle, "%'"));
      EXPECT_TRUE(count.ok()) << table;
      if (count.ok() && *count != "0") absl::StrAppend(&found, table, ": ", *count, "\n");
    }
    return found;
  }

  testing::Token operator_;
  std::string access_;
  std::string key_file_;
  std::string log_file_;
};

TEST_F(RedactionE2eTest, ARedactedSecretIsNowhereAfterwards) {
  Create("c");
  Filler("c", 1);
  const int64_t secret_at =
      Append("c", {Message(v1::ROLE_USER, kSecretMessage),
                   Message(v1::ROLE_ASSISTANT, "Noted, I will keep that account number.")},
             "append-with-the-secret");
  ASSERT_GT(secret_at, 0);
  for (int n = 2; n <= 40; ++n) {
    Filler("c", n);
    Build("c");
  }
  // The secret has spread: into summary chunks (text or ledger) as well as
  // the item itself.
  const std::string before = RowsHolding(kSecret);
  ASSERT_TRUE(absl::StrContains(before, "summary_chunks")) << before;
  ASSERT_TRUE(absl::StrContains(before, "items")) << before;

  v1::RedactItemsRequest req;
  req.set_conversation_id("c");
  req.add_sequences(secret_at);
  req.set_reason("erasure request 2026-118");
  v1::RedactItemsResponse out;
  {
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status s = stub_->RedactItems(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(out.items_size(), 1);
  const v1::Item& tombstone = out.items(0);
  EXPECT_EQ(tombstone.sequence(), secret_at);
  EXPECT_EQ(tombstone.role(), v1::ROLE_USER);
  EXPECT_EQ(tombstone.kind(), v1::ITEM_KIND_MESSAGE);
  EXPECT_TRUE(tombstone.redacted());
  // Without a redaction key nothing of the content is kept, not even a hash.
  EXPECT_EQ(tombstone.redacted_sha256(), "");
  EXPECT_EQ(tombstone.redacted_digest(), "");
  EXPECT_FALSE(absl::StrContains(tombstone.content(), kSecret));
  EXPECT_GT(out.chunks_removed(), 0);

  // The view goes on, compacting again from the tombstone.
  for (int n = 41; n <= 50; ++n) {
    Filler("c", n);
    const v1::BuildContextResponse view = Build("c");
    EXPECT_FALSE(absl::StrContains(view.DebugString(), kSecret)) << "turn " << n;
  }
  EXPECT_EQ(RowsHolding(kSecret), "");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) > 0 FROM summary_chunks"), "t")
      << "compaction should have run again after the redaction";
  // Who, when, which, why.
  v1::ListCompactionEventsRequest events_req;
  events_req.set_conversation_id("c");
  v1::ListCompactionEventsResponse events;
  {
    grpc::ClientContext ctx;
    Prepare(ctx);
    ASSERT_TRUE(stub_->ListCompactionEvents(&ctx, events_req, &events).ok());
  }
  bool audited = false;
  for (const auto& e : events.events()) {
    if (e.event() != "items_redacted") continue;
    audited = true;
    EXPECT_TRUE(absl::StrContains(e.detail_json(), "privacy-officer")) << e.detail_json();
    EXPECT_TRUE(absl::StrContains(e.detail_json(), "erasure request 2026-118")) << e.detail_json();
    EXPECT_TRUE(absl::StrContains(e.detail_json(), absl::StrCat(secret_at))) << e.detail_json();
    EXPECT_TRUE(e.has_create_time());
  }
  EXPECT_TRUE(audited);

  // A deleted conversation leaves nothing behind either.
  Create("d");
  Append("d", {Message(v1::ROLE_USER, kSecretMessage)}, "d-key");
  for (int n = 1; n <= 30; ++n) {
    Filler("d", n);
    Build("d");
  }
  ASSERT_NE(RowsHolding(kSecret), "");
  {
    v1::DeleteConversationRequest del;
    del.set_conversation_id("d");
    v1::DeleteConversationResponse gone;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ASSERT_TRUE(stub_->DeleteConversation(&ctx, del, &gone).ok());
  }
  EXPECT_EQ(RowsHolding(kSecret), "");
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());
  const std::string log = ReadFile(log_file_);
  EXPECT_FALSE(log.empty());
  EXPECT_FALSE(absl::StrContains(log, kSecret)) << log;
}

TEST_F(RedactionE2eTest, BadRequestsAreRefusedAndChangeNothing) {
  Create("c");
  const int64_t first = Append("c", {Message(v1::ROLE_USER, "hello")});
  auto redact = [&](std::vector<int64_t> sequences, const std::string& reason) {
    v1::RedactItemsRequest req;
    req.set_conversation_id("c");
    for (int64_t s : sequences) req.add_sequences(s);
    req.set_reason(reason);
    v1::RedactItemsResponse out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    return stub_->RedactItems(&ctx, req, &out);
  };
  EXPECT_EQ(redact({}, "why").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(redact({first}, "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(redact({0}, "why").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(redact({first, 99}, "why").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(*db_->QueryValue("SELECT content FROM items"), "hello");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM compaction_events WHERE event = "
                             "'items_redacted'"),
            "0");
  // Twice is once.
  ASSERT_TRUE(redact({first}, "why").ok());
  ASSERT_TRUE(redact({first}, "why again").ok());
  EXPECT_EQ(*db_->QueryValue("SELECT redacted_digest FROM items"), "");
}

// Every copy of a redacted secret goes at once: the pinned item, the
// ledger and the summaries of its conversation, the copies carried into a
// conversation continued from it, another replica's cached context, and
// the rebuilt view of a version from before the redaction. With a
// redaction key, the item keeps a keyed digest, never a plain hash.
TEST_F(RedactionE2eTest, EveryCopyOfARedactedSecretGoesAtOnce) {
  server_ = Start({"--redaction_key_file=" + key_file_});
  ASSERT_NE(server_, nullptr);
  stub_ = testing::StubFor(*server_);
  auto replica = Start({"--redaction_key_file=" + key_file_});
  ASSERT_NE(replica, nullptr);
  auto other = testing::StubFor(*replica);
  Create("a");
  Filler("a", 1);
  // The user's message, pinned, and the assistant's echo of the secret,
  // which the summary and its ledger take in.
  const int64_t secret_at =
      Append("a", {Message(v1::ROLE_USER, kSecretMessage),
                   Message(v1::ROLE_ASSISTANT,
                           absl::StrCat("Noted: the account number is ", kSecret, "."))});
  ASSERT_GT(secret_at, 0);
  {
    v1::PinItemRequest pin;
    pin.set_conversation_id("a");
    pin.set_sequence(secret_at);
    v1::Item pinned;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ASSERT_TRUE(stub_->PinItem(&ctx, pin, &pinned).ok());
  }
  for (int n = 2; n <= 5; ++n) Filler("a", n);
  {
    const v1::CompactResponse c = Summarize("a");
    ASSERT_NE(c.summary_chunk_id(), 0) << absl::StrJoin(c.not_done(), "; ");
  }
  const v1::BuildContextResponse old_view = Build("a");
  bool pinned_copy = false;
  for (const auto& e : old_view.entries()) {
    pinned_copy |= e.section() == v1::SECTION_PINNED && absl::StrContains(e.content(), kSecret);
  }
  ASSERT_TRUE(pinned_copy) << old_view.DebugString();
  ASSERT_TRUE(absl::StrContains(Build("a", other.get()).DebugString(), kSecret));  // Cached there.
  {
    v1::CreateConversationRequest req;
    req.set_conversation_id("b");
    req.set_continue_from("a");
    v1::Conversation out;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ASSERT_TRUE(stub_->CreateConversation(&ctx, req, &out).ok());
  }
  ASSERT_TRUE(absl::StrContains(Build("b").DebugString(), kSecret)) << Build("b").DebugString();
  ASSERT_TRUE(absl::StrContains(Build("b", other.get()).DebugString(), kSecret));

  const v1::RedactItemsResponse out = Redact("a", {secret_at, secret_at + 1});
  ASSERT_EQ(out.items_size(), 2);
  EXPECT_EQ(out.items(0).redacted_digest(),
            "hmac-sha256:" + HmacSha256Hex(kRedactionKey, kSecretMessage));
  EXPECT_EQ(out.items(0).redacted_sha256(), "");
  EXPECT_GT(out.continued_chunks_removed(), 0);

  for (ConversationState::Stub* stub : {stub_.get(), other.get()}) {
    for (const char* id : {"a", "b"}) {
      EXPECT_FALSE(absl::StrContains(Build(id, stub).DebugString(), kSecret)) << id;
    }
  }
  {
    v1::GetContextAtRequest req;
    req.set_conversation_id("a");
    req.set_version(old_view.version());
    req.set_compaction_version(old_view.compaction_version());
    v1::BuildContextResponse then;
    grpc::ClientContext ctx;
    Prepare(ctx);
    ASSERT_TRUE(stub_->GetContextAt(&ctx, req, &then).ok());
    EXPECT_FALSE(absl::StrContains(then.DebugString(), kSecret)) << then.DebugString();
  }
  EXPECT_EQ(RowsHolding(kSecret), "");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM compaction_events WHERE event = "
                             "'items_redacted' AND detail->>'continued_from' = 'a'"),
            "1");
}

// A compaction that is waiting on the summarizer when the items it read are
// redacted commits nothing it made of them.
TEST_F(RedactionE2eTest, ACompactionRunningDuringARedactionCommitsNothingOfIt) {
  auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
  ASSERT_TRUE(llm.ok()) << llm.status();
  const int llm_port = (*llm)->port();
  // The fake's summary quotes the start of the transcript: the secret.
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "answer", "delay_ms": 3000}})"));
  server_ = Start({absl::StrCat("--summarizer_url=http://127.0.0.1:", llm_port, "/v1"),
                   "--summarizer_model=fake-sum", "--summarizer_retries=0"});
  ASSERT_NE(server_, nullptr);
  stub_ = testing::StubFor(*server_);
  Create("r");
  const int64_t secret_at = Append("r", {Message(v1::ROLE_USER, kSecretMessage)});
  for (int n = 1; n <= 8; ++n) Filler("r", n);
  std::thread compaction([&] { Summarize("r"); });
  ASSERT_TRUE(rpc::WaitUntil([&] { return testing::FakeLlmRequests(llm_port) >= 1; }));
  Redact("r", {secret_at});
  compaction.join();
  EXPECT_EQ(RowsHolding(kSecret), "");
  // The compaction was discarded, not failed: the next one summarizes the
  // tombstone.
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "answer"}})"));
  EXPECT_NE(Summarize("r").summary_chunk_id(), 0);
  EXPECT_EQ(RowsHolding(kSecret), "");
}

// The erasure scenario (tests/erasure_scenario.h): a secret in a user
// message and a tool result, previewed by a dry run (a stored proposal),
// applied, previewed again, carried into a continuation, searched for and
// recalled (the word index and the caches hold it), then every item that
// held it redacted in every conversation. Afterwards no form of it
// (as written, lower case, each word the index keeps; base64 decoded too)
// is in a full pg_dump of the database, nothing the API answers holds it,
// the replay of the applied proposal does not, nor does the server's log.
TEST_F(RedactionE2eTest, AnErasedSecretIsNowhereInADumpOfTheDatabase) {
  server_ = Start({"--redaction_key_file=" + key_file_});
  ASSERT_NE(server_, nullptr);
  stub_ = testing::StubFor(*server_);
  GrpcErasureApi api(stub_.get(), operator_.secret);
  testing::ErasureScenario s;
  ASSERT_NO_FATAL_FAILURE(testing::SpreadTheSecret(api, s));
  // A compaction's words are indexed after it commits, off the call path.
  ASSERT_TRUE(rpc::WaitUntil([&] {
    auto indexed = db_->QueryValue(absl::StrCat(
        "SELECT count(*) > 0 FROM item_words WHERE search::text LIKE '%#",
        testing::SecretForms()[0], "%'"));
    return indexed.ok() && *indexed == "t";
  })) << "the secret's words never reached the word index";
  const std::string before = PlacesHolding(*db_);
  for (const char* place : {"items.content", "items.search", "summary_chunks.",
                            "compaction_proposals.body", "item_words.search", "word_counts.word"}) {
    EXPECT_TRUE(absl::StrContains(before, place)) << place << " in\n" << before;
  }

  ASSERT_NO_FATAL_FAILURE(testing::EraseTheSecret(api, s));
  EXPECT_EQ(testing::WhatTheApiStillAnswers(api, s), "");
  const std::string replay = testing::ReplayOfTheAppliedProposal(api, s);
  EXPECT_EQ(testing::SecretIn(replay), "") << replay;
  RecordProperty("replay_after_erasure", replay);

  std::string error;
  const std::string dump = PgDump(*db_, &error);
  ASSERT_FALSE(dump.empty()) << error;
  ASSERT_TRUE(absl::StrContains(dump, "[redacted]")) << "the dump holds no tombstone";
  EXPECT_EQ(DumpLeaks(dump), "") << "columns holding it:\n" << PlacesHolding(*db_);

  ASSERT_TRUE(server_->Stop(SIGTERM).ok());
  const std::string log = ReadFile(log_file_);
  EXPECT_FALSE(log.empty());
  EXPECT_EQ(testing::SecretIn(log), "");
}

}  // namespace
}  // namespace convstate
