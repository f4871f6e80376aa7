// End to end: the real convstate_server binary on loopback, a real
// PostgreSQL (from tools/test), and gRPC clients, through every RPC that is
// implemented so far.

#include <signal.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "migrations/embedded_migrations.h"
#include "services/grpc/byte_buffers.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using rpc::Message;
using testing::ServerProcess;
using rpc::SetDeadline;

constexpr absl::Duration kCallDeadline = absl::Seconds(20);
using v1::ConversationState;

class ServerE2eTest : public testing::E2eTest {
 protected:
  void StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--worker_threads=8", "--shutdown_grace_ms=10000"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    E2eTest::StartServer(flags);
  }

  v1::Conversation Create(const std::string& id) {
    v1::Conversation out;
    const grpc::Status s = E2eTest::Create(id, "gpt-4o", "You are a release engineer.", &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  grpc::Status Append(const std::string& id, const std::string& text,
                      v1::AppendTurnResponse* out, absl::Duration deadline = absl::Seconds(20)) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    *req.add_items() = Message(v1::ROLE_USER, text);
    grpc::ClientContext ctx;
    SetDeadline(ctx, deadline);
    return stub_->AppendTurn(&ctx, req, out);
  }

  int64_t ItemCount(const std::string& id) { return Get(id).item_count(); }

  // Sends `wire` as the request body of `method`, bypassing the typed stub.
  grpc::Status RawCall(const std::string& method, const std::string& wire,
                       std::string* body = nullptr) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    grpc::Slice slice(wire);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    absl::Notification done;
    grpc::Status status;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    if (body != nullptr && status.ok()) *body = BytesOf(response).value_or("");
    return status;
  }

  void AppendConcurrently();
};

// The benchmark echo answers as many bytes as asked, only when switched
// on; methods nobody serves stay UNIMPLEMENTED either way.
TEST_F(ServerE2eTest, BenchEchoAnswersTheSizeAskedOnlyWhenOn) {
  StartServer();
  EXPECT_EQ(RawCall("/convstate.bench.Echo/Echo", "100").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  ASSERT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  StartServer({"--bench_echo"});
  std::string body;
  grpc::Status s = RawCall("/convstate.bench.Echo/Echo", "86016", &body);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(body.size(), 86016u);
  s = RawCall("/convstate.bench.Echo/Echo", "0", &body);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(body.empty());
  EXPECT_EQ(RawCall("/convstate.bench.Echo/Echo", "lots").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawCall("/convstate.bench.Echo/Echo", "999999999999").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawCall("/convstate.bench.Nothing/Here", "1").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // The API is served as before.
  v1::Conversation c = Create("after-echo");
  EXPECT_EQ(c.conversation_id(), "after-echo");
}

TEST_F(ServerE2eTest, ServesHealthAndReflection) {
  StartServer();
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "convstate.v1.ConversationState"}) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    grpc::Status s = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }

  // What `grpcurl list` and `grpcurl describe` ask.
  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallDeadline);
  auto stream = reflection->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  grpc::reflection::v1alpha::ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  std::set<std::string> services;
  for (const auto& s : listed.list_services_response().service()) services.insert(s.name());
  EXPECT_TRUE(services.count("convstate.v1.ConversationState")) << listed.DebugString();
  EXPECT_TRUE(services.count("grpc.health.v1.Health")) << listed.DebugString();
  EXPECT_TRUE(services.count("grpc.reflection.v1alpha.ServerReflection"));

  grpc::reflection::v1alpha::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("convstate.v1.ConversationState");
  ASSERT_TRUE(stream->Write(describe));
  grpc::reflection::v1alpha::ServerReflectionResponse described;
  ASSERT_TRUE(stream->Read(&described));
  bool found = false;
  for (const std::string& bytes : described.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    for (const auto& service : file.service()) {
      if (service.name() != "ConversationState") continue;
      found = true;
      // Every method of the API this binary was built with.
      EXPECT_EQ(service.method_size(),
                v1::BuildContextRequest::descriptor()->file()->service(0)->method_count());
    }
  }
  EXPECT_TRUE(found) << described.ShortDebugString();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerE2eTest, ConversationLifecycleThroughEveryImplementedRpc) {
  StartServer();
  v1::Conversation created = Create("release-42");
  EXPECT_EQ(created.tenant_id(), "default");
  EXPECT_EQ(created.version(), 0);

  // A turn with a tool call and its result, with an idempotency key.
  v1::AppendTurnRequest turn;
  turn.set_conversation_id("release-42");
  turn.set_idempotency_key("turn-1");
  *turn.add_items() = Message(v1::ROLE_USER, "Why did the deploy of v1.4 fail?");
  v1::NewItem call;
  call.set_role(v1::ROLE_ASSISTANT);
  call.set_kind(v1::ITEM_KIND_TOOL_CALL);
  call.set_tool_name("kubectl");
  call.set_tool_call_id("call_7");
  call.set_content(R"({"args":["logs","deploy/api"]})");
  *turn.add_items() = call;
  v1::NewItem result;
  result.set_role(v1::ROLE_TOOL);
  result.set_kind(v1::ITEM_KIND_TOOL_RESULT);
  result.set_tool_name("kubectl");
  result.set_tool_call_id("call_7");
  result.set_content("Error: ImagePullBackOff for registry.local/api:v1.4");
  *turn.add_items() = result;
  v1::AppendTurnResponse appended;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    grpc::Status s = stub_->AppendTurn(&ctx, turn, &appended);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(appended.items_size(), 3);
  EXPECT_EQ(appended.items(2).sequence(), 3);
  EXPECT_EQ(appended.version(), 1);
  EXPECT_FALSE(appended.replayed());
  {
    // The gateway retries after a timeout: same answer, nothing duplicated.
    v1::AppendTurnResponse retried;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->AppendTurn(&ctx, turn, &retried).ok());
    EXPECT_TRUE(retried.replayed());
    EXPECT_EQ(retried.items(0).sequence(), 1);
  }
  v1::AppendTurnResponse answer;
  ASSERT_TRUE(Append("release-42", "Thanks, fixing the image tag.", &answer).ok());
  EXPECT_EQ(answer.items(0).sequence(), 4);
  EXPECT_EQ(answer.items(0).turn_index(), 2);

  {
    v1::GetConversationRequest req;
    req.set_conversation_id("release-42");
    v1::Conversation got;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->GetConversation(&ctx, req, &got).ok());
    EXPECT_EQ(got.item_count(), 4);
    EXPECT_EQ(got.version(), 2);
    EXPECT_EQ(got.system_prompt(), "You are a release engineer.");
  }
  {
    Create("release-43");
    v1::ListConversationsRequest req;
    req.set_page_size(1);
    v1::ListConversationsResponse page;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->ListConversations(&ctx, req, &page).ok());
    ASSERT_EQ(page.conversations_size(), 1);
    EXPECT_EQ(page.conversations(0).conversation_id(), "release-42");
    EXPECT_FALSE(page.next_page_token().empty());
  }
  // Page tokens are the client's bytes: garbage in one is the caller's
  // mistake, refused before it reaches the database ("Yzr_" is base64url
  // of "c:" and a byte 0xFF, which PostgreSQL refuses as text).
  for (const char* garbage : {"Yzr_", "YzphIGI", "not base64!", "aTo5OTk5OTk5OTk5OTk5OTk5OTk5"}) {
    v1::ListConversationsRequest list;
    list.set_page_token(garbage);
    v1::ListConversationsResponse page;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    const grpc::Status s = stub_->ListConversations(&ctx, list, &page);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << garbage << ": "
                                                                 << s.error_message();
    v1::ListItemsRequest items;
    items.set_conversation_id("release-42");
    items.set_page_token(garbage);
    v1::ListItemsResponse item_page;
    grpc::ClientContext ictx;
    SetDeadline(ictx, kCallDeadline);
    EXPECT_EQ(stub_->ListItems(&ictx, items, &item_page).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << garbage;
  }
  {
    std::vector<int64_t> sequences;
    v1::ListItemsRequest req;
    req.set_conversation_id("release-42");
    req.set_page_size(3);
    for (int i = 0; i < 5; ++i) {
      v1::ListItemsResponse page;
      grpc::ClientContext ctx;
      SetDeadline(ctx, kCallDeadline);
      ASSERT_TRUE(stub_->ListItems(&ctx, req, &page).ok());
      for (const auto& item : page.items()) sequences.push_back(item.sequence());
      if (page.next_page_token().empty()) break;
      req.set_page_token(page.next_page_token());
    }
    EXPECT_EQ(sequences, (std::vector<int64_t>{1, 2, 3, 4}));
  }
  v1::BuildContextRequest build;
  build.set_conversation_id("release-42");
  *build.add_pending_input() = Message(v1::ROLE_USER, "Is it fixed now?");
  {
    v1::BuildContextResponse view;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->BuildContext(&ctx, build, &view).ok());
    EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
    EXPECT_EQ(view.version(), 2);
    // gpt-4o has an exact tokenizer (o200k_base) in the built-in profiles.
    EXPECT_FALSE(view.tokens().approximate());
    EXPECT_EQ(view.tokens().context_window(), 128000);
    ASSERT_EQ(view.entries_size(), 6);  // system + 4 live + pending
    EXPECT_EQ(view.entries(0).section(), v1::SECTION_SYSTEM);
    EXPECT_EQ(view.entries(3).content(), "Error: ImagePullBackOff for registry.local/api:v1.4");
    EXPECT_EQ(view.entries(5).section(), v1::SECTION_PENDING);
    int64_t live = 0;
    for (const auto& item : appended.items()) live += item.token_count();
    live += answer.items(0).token_count();
    EXPECT_EQ(view.tokens().live(), live);
    EXPECT_EQ(view.tokens().total(), view.tokens().system() + view.tokens().live() +
                                         view.tokens().pending() +
                                         view.tokens().output_reserve());
  }
  {
    // The streaming variant ends with the same context.
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    auto reader = stub_->StreamBuildContext(&ctx, build);
    std::vector<v1::BuildContextEvent> events;
    v1::BuildContextEvent event;
    while (reader->Read(&event)) events.push_back(event);
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_EQ(events.size(), 1u);
    ASSERT_TRUE(events[0].has_context());
    EXPECT_EQ(events[0].context().entries_size(), 6);
  }
  {
    v1::DeleteConversationRequest req;
    req.set_conversation_id("release-42");
    v1::DeleteConversationResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->DeleteConversation(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.items_deleted(), 4);
  }
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items"), "0");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM idempotency_keys"), "0");
  {
    v1::GetConversationRequest req;
    req.set_conversation_id("release-42");
    v1::Conversation got;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    EXPECT_EQ(stub_->GetConversation(&ctx, req, &got).error_code(), grpc::NOT_FOUND);
  }
}

TEST_F(ServerE2eTest, BadInputGetsAPreciseStatusAndStoresNothing) {
  StartServer({"--max_item_bytes=1000", "--max_message_bytes=65536"});
  Create("c1");
  v1::AppendTurnResponse out;

  // Invalid UTF-8 on the wire: protobuf would refuse the message as a whole;
  // the server names the field.
  v1::AppendTurnRequest bad;
  bad.set_conversation_id("c1");
  *bad.add_items() = Message(v1::ROLE_USER, "fine");
  *bad.add_items() = Message(v1::ROLE_ASSISTANT, "broken \xC3\x28 text");
  grpc::Status s = RawCall("/convstate.v1.ConversationState/AppendTurn", bad.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "items[1].content: not valid UTF-8");

  s = RawCall("/convstate.v1.ConversationState/AppendTurn", "\x1a\xff\xff\xff");
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "request is not a valid convstate.v1.AppendTurnRequest");

  // Over the item limit: INVALID_ARGUMENT naming the field.
  s = Append("c1", std::string(1001, 'x'), &out);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "items[0].content: 1001 bytes exceeds the limit of 1000");
  // Over the message limit: refused by gRPC before it reaches the service.
  s = Append("c1", std::string(70000, 'x'), &out);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();

  s = Append("no-such-conversation", "hello", &out);
  EXPECT_EQ(s.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "conversation 'no-such-conversation' not found");
  s = Append("bad id!", "hello", &out);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);

  {
    v1::CreateConversationRequest again;
    again.set_conversation_id("c1");
    again.set_model("gpt-4o");
    v1::Conversation conv;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    s = stub_->CreateConversation(&ctx, again, &conv);
    EXPECT_EQ(s.error_code(), grpc::ALREADY_EXISTS);
    EXPECT_EQ(s.error_message(), "conversation 'c1' already exists");
  }
  {
    v1::CompactRequest req;
    req.set_conversation_id("c1");
    req.set_mode(static_cast<v1::CompactRequest::Mode>(42));
    v1::CompactResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    s = stub_->Compact(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "mode: unknown mode 42");
  }
  {
    v1::ListSummariesRequest req;
    req.set_conversation_id("nobody");
    v1::ListSummariesResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    EXPECT_EQ(stub_->ListSummaries(&ctx, req, &resp).error_code(), grpc::NOT_FOUND);
  }
  EXPECT_EQ(ItemCount("c1"), 0);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items"), "0");
}

// While another session holds the conversation's row, an append with a
// short deadline gives up in time and leaves nothing behind.
TEST_F(ServerE2eTest, DeadlineIsHonouredInsideTheDatabase) {
  StartServer();
  Create("locked");
  pqxx::connection holder(db_->url());
  pqxx::work tx(holder);
  tx.exec("SELECT 1 FROM conversations WHERE conversation_id = 'locked' FOR UPDATE");
  v1::AppendTurnResponse out;
  grpc::Status s = Append("locked", "too late", &out, absl::Milliseconds(500));
  EXPECT_EQ(s.error_code(), grpc::DEADLINE_EXCEEDED) << s.error_message();
  // Hold the lock until the server's statement is cancelled (no one waits
  // on it any more), then let go: the item must never appear.
  ASSERT_TRUE(rpc::WaitUntil([&] {
    return *db_->QueryValue("SELECT count(*) FROM pg_stat_activity "
                            "WHERE wait_event_type = 'Lock'") == "0";
  }));
  tx.abort();
  EXPECT_EQ(ItemCount("locked"), 0);
  ASSERT_TRUE(Append("locked", "on time", &out).ok());
  EXPECT_EQ(out.items(0).sequence(), 1);
}

// SIGTERM lets a call in flight finish, then the process exits 0; a new
// process on the same database (migrations applied a second time) sees
// everything that was acknowledged.
TEST_F(ServerE2eTest, SigtermFinishesCallsInFlightAndDataSurvivesRestart) {
  StartServer();
  Create("busy");
  pqxx::connection holder(db_->url());
  auto tx = std::make_unique<pqxx::work>(holder);
  tx->exec("SELECT 1 FROM conversations WHERE conversation_id = 'busy' FOR UPDATE");

  grpc::Status in_flight;
  v1::AppendTurnResponse in_flight_out;
  std::thread caller([&] { in_flight = Append("busy", "in flight", &in_flight_out); });
  // The call is in flight once its statement waits on the lock.
  ASSERT_TRUE(rpc::WaitUntil([&] {
    return *db_->QueryValue("SELECT count(*) FROM pg_stat_activity "
                            "WHERE wait_event_type = 'Lock'") != "0";
  }));
  auto health = grpc::health::v1::Health::NewStub(channel_);
  std::thread terminator([&] {
    auto code = server_->Stop(SIGTERM);
    EXPECT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  });
  // The server is draining once health no longer says SERVING.
  EXPECT_TRUE(rpc::WaitUntil([&] {
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(1));
    return !health->Check(&ctx, req, &resp).ok() ||
           resp.status() != grpc::health::v1::HealthCheckResponse::SERVING;
  }));
  tx->abort();
  caller.join();
  terminator.join();
  ASSERT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(in_flight_out.items(0).sequence(), 1);

  StartServer();
  EXPECT_EQ(ItemCount("busy"), 1);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM schema_migrations"),
            std::to_string(EmbeddedMigrations().size()));
}

// Concurrent appends from `kClients` clients, then the checks: no call
// failed and the sequences have no gap.
void ServerE2eTest::AppendConcurrently() {
  Create("hot");
  constexpr int kClients = 8;
  constexpr int kAppends = 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = ConversationState::NewStub(
          grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
      for (int i = 0; i < kAppends; ++i) {
        v1::AppendTurnRequest req;
        req.set_conversation_id("hot");
        req.set_idempotency_key(absl::StrCat("c", c, "-", i));
        *req.add_items() = Message(
            v1::ROLE_USER, absl::StrCat("client ", c, " turn ", i,
                                        ". The rollout looks fine so far and nothing else needs "
                                        "doing right now, thanks for checking it once more."));
        v1::AppendTurnResponse out;
        grpc::ClientContext ctx;
        SetDeadline(ctx, kCallDeadline);
        if (!stub->AppendTurn(&ctx, req, &out).ok()) ++failures;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ItemCount("hot"), kClients * kAppends);
  EXPECT_EQ(*db_->QueryValue("SELECT max(sequence) = count(*) AND min(sequence) = 1 FROM items"),
            "t");
}

TEST_F(ServerE2eTest, ConcurrentClientsGetGapFreeSequences) {
  StartServer();
  AppendConcurrently();
}

// The server behind PgBouncer in transaction mode: it migrates through it at
// start, and serves concurrent appends without gaps, views and compactions,
// over server connections the pooler hands from one transaction to the next.
TEST_F(ServerE2eTest, WorksThroughPgBouncerInTransactionMode) {
  auto pooled = db_->pooler_url();
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  StartServer({"--database_url=" + *pooled, "--db_pooler=transaction"});
  AppendConcurrently();
  v1::BuildContextRequest build;
  build.set_conversation_id("hot");
  v1::BuildContextResponse view;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    const grpc::Status s = stub_->BuildContext(&ctx, build, &view);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(view.entries_size(), 1 + 8 * 20);  // The system prompt and every item.
  v1::CompactRequest compact;
  compact.set_conversation_id("hot");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  v1::CompactResponse compacted;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    const grpc::Status s = stub_->Compact(&ctx, compact, &compacted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_GT(compacted.summary_chunk_id(), 0);
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kCallDeadline);
    ASSERT_TRUE(stub_->BuildContext(&ctx, build, &view).ok());
  }
  EXPECT_LT(view.entries_size(), 1 + 8 * 20);
}

TEST_F(ServerE2eTest, MigrateOnlyAppliesAndExits) {
  auto code = ServerProcess::RunToExit({"--database_url=" + db_->url(), "--migrate_only"});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM schema_migrations"),
            std::to_string(EmbeddedMigrations().size()));
}

// The layout this test runs on (plain tables, or hash partitions in the
// `_partitioned` variant) is laid out at the first start, holds the rows,
// and cannot be changed by a later start.
TEST_F(ServerE2eTest, LaysOutTheDatabaseAtItsFirstStartAndKeepsIt) {
  const int partitions = testing::TestHashPartitions();
  StartServer();
  Create("laid-out");
  v1::AppendTurnResponse appended;
  ASSERT_TRUE(Append("laid-out", "first", &appended).ok());
  EXPECT_EQ(*db_->QueryValue("SELECT hash_partitions FROM schema_layout"),
            std::to_string(partitions));
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM pg_partitioned_table"),
            partitions > 0 ? "4" : "0");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM pg_inherits i JOIN pg_class c "
                               "ON c.oid = i.inhrelid WHERE c.relkind = 'r'"),
            std::to_string(4 * partitions));
  // The row is in the partition its key hashes to, found through the parent.
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items"), "1");
  ASSERT_TRUE(server_->Stop(SIGTERM).ok());

  auto other = ServerProcess::RunToExit({"--database_url=" + db_->url(), "--migrate_only",
                                         "--db_hash_partitions=" + std::to_string(partitions + 2)});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, 1);
  auto unset = ServerProcess::RunToExit({"--database_url=" + db_->url(), "--migrate_only"});
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(*unset, 0);
}

TEST_F(ServerE2eTest, UnreachableDatabaseStopsStartupWithAnError) {
  auto code = ServerProcess::RunToExit(
      {"--database_url=postgresql://postgres@127.0.0.1:1/none", "--db_connect_timeout_ms=2000"});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1);
}

TEST_F(ServerE2eTest, BadFlagsAreRefusedWithUsage) {
  auto code = ServerProcess::RunToExit({"--port=notaport"});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
}

}  // namespace
}  // namespace convstate
