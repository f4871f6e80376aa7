// Faults, with real processes: replicas killed mid-compaction, two replicas
// on one database, the database restarted under a running server. Loopback
// only; every wait is bounded.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>


#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/fake_llm_control.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using testing::ControlFakeLlm;
using testing::FakeLlmRequests;
using rpc::WaitUntil;  // From rpc_helpers.h.
using rpc::Message;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;

constexpr char kProfiles[] = R"pb(
  default_profile: "tiny"
  profiles {
    name: "tiny"
    context_window: 4096
    output_reserve: 512
    token_floor: 0
    tokenizer { encoding: "o200k_base" }
    recent { turns: 2 max_tokens: 1200 }
    tool_pruning { trigger_tokens: 100000 }
    summarizer { max_chunk_tokens: 250 chunk_budget_fraction: 0.15 }
  }
)pb";

std::string ProfilesFile() {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/fault_profiles.textproto";
  std::ofstream(path) << kProfiles;
  return path;
}

std::string Words(std::mt19937& rng, int n) {
  static const char* kWords[] = {"deploy", "error", "staging", "rollback", "latency", "index",
                                 "cache", "timeout", "retry", "shard", "replica", "lease"};
  std::string out;
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, kWords[rng() % 12], " ", rng() % 1000, " ");
  return out;
}

grpc::Status Create(ConversationState::Stub& stub, const std::string& id) {
  v1::CreateConversationRequest req;
  req.set_conversation_id(id);
  req.set_model("tiny");
  v1::Conversation out;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  return stub.CreateConversation(&ctx, req, &out);
}

grpc::Status AppendPair(ConversationState::Stub& stub, const std::string& id,
                        const std::string& text, v1::AppendTurnResponse* out,
                        const std::string& key = "") {
  v1::AppendTurnRequest req;
  req.set_conversation_id(id);
  req.set_idempotency_key(key);
  *req.add_items() = Message(v1::ROLE_USER, "Q " + text);
  *req.add_items() = Message(v1::ROLE_ASSISTANT, "A " + text);
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  return stub.AppendTurn(&ctx, req, out);
}

grpc::Status Build(ConversationState::Stub& stub, const std::string& id,
                   v1::BuildContextResponse* out, absl::Duration deadline = absl::Seconds(30)) {
  v1::BuildContextRequest req;
  req.set_conversation_id(id);
  grpc::ClientContext ctx;
  SetDeadline(ctx, deadline);
  return stub.BuildContext(&ctx, req, out);
}


// kill -9 while the summarizer call is in flight: nothing acknowledged is
// lost, no half-written chunk or marker exists, and once the dead replica's
// lease expires another replica compacts the conversation.
TEST(FaultE2eTest, KillDuringCompactionLosesNothingAndCompactsAgainAfterTheLease) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
  ASSERT_TRUE(llm.ok()) << llm.status();
  ASSERT_TRUE(ControlFakeLlm((*llm)->port(), R"({"default": {"kind": "hang"}})"));
  const std::vector<std::string> flags = {
      "--model_profiles=" + ProfilesFile(),
      absl::StrCat("--summarizer_url=http://127.0.0.1:", (*llm)->port(), "/v1"),
      "--summarizer_timeout_ms=500", "--summarizer_retries=0", "--compaction_lease_ms=1500",
      "--background_compaction=false", "--shutdown_grace_ms=100"};
  auto a = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(a.ok()) << a.status();
  auto stub = testing::StubFor(**a);
  ASSERT_TRUE(Create(*stub, "victim").ok());
  std::mt19937 rng(9);
  int acknowledged = 0;
  // Enough to pass the hard band (0.8 * 4096).
  for (int i = 0; i < 12; ++i) {
    v1::AppendTurnResponse out;
    ASSERT_TRUE(AppendPair(*stub, "victim", Words(rng, 60), &out).ok());
    acknowledged += 2;
  }
  // This call reaches the summarizer, which hangs; the replica holds the
  // lease when it dies.
  std::thread doomed([&] {
    v1::BuildContextResponse view;
    Build(*stub, "victim", &view, absl::Seconds(20));
  });
  ASSERT_TRUE(WaitUntil([&] {
    return *(*db)->QueryValue("SELECT coalesce(lease_expires_at > now(), false) FROM "
                              "conversations WHERE conversation_id = 'victim'") == "t";
  })) << "the compaction never took the lease";
  // The summarizer call is in flight once the LLM has it.
  ASSERT_TRUE(WaitUntil([&] { return FakeLlmRequests((*llm)->port()) >= 1; }));
  auto killed = (*a)->Stop(SIGKILL);
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(*killed, 128 + SIGKILL);
  doomed.join();

  // Nothing half-written, nothing lost.
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM summary_chunks"), "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items WHERE kind = 'summary_marker'"), "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items"), std::to_string(acknowledged));
  EXPECT_EQ(*(*db)->QueryValue("SELECT max(sequence) FROM items"), std::to_string(acknowledged));

  // A new replica, and an LLM that answers: the conversation compacts again
  // once the dead replica's lease has expired, without anyone's help.
  ASSERT_TRUE(ControlFakeLlm((*llm)->port(), R"({"default": {"kind": "answer"}})"));
  auto b = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(b.ok()) << b.status();
  auto stub_b = testing::StubFor(**b);
  const absl::Time start = absl::Now();
  v1::BuildContextResponse view;
  const grpc::Status s = Build(*stub_b, "victim", &view, absl::Seconds(20));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM summary_chunks"), "1");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items WHERE kind = 'summary_marker'"), "1");
}

// "source" forked at its item 20 as "fork".
grpc::Status ForkAt20(ConversationState::Stub& stub, v1::Conversation* out) {
  v1::ForkConversationRequest req;
  req.set_source_conversation_id("source");
  req.set_conversation_id("fork");
  req.set_at_sequence(20);
  grpc::ClientContext ctx;
  SetDeadline(ctx, absl::Seconds(30));
  return stub.ForkConversation(&ctx, req, out);
}

// "source" rewound to its item 10, the rest kept as "abandoned".
grpc::Status RewindTo10(ConversationState::Stub& stub, v1::RewindConversationResponse* out) {
  v1::RewindConversationRequest req;
  req.set_conversation_id("source");
  req.set_to_sequence(10);
  req.set_abandoned_conversation_id("abandoned");
  grpc::ClientContext ctx;
  SetDeadline(ctx, absl::Seconds(30));
  return stub.RewindConversation(&ctx, req, out);
}

// Rows of every per-conversation table whose conversation is gone: what a
// half-written fork would leave.
std::string Orphans(const ScratchDatabase& db) {
  std::string out;
  for (const char* table : {"items", "view_states", "summary_chunks", "compaction_events"}) {
    auto n = db.QueryValue(absl::StrCat("SELECT count(*) FROM ", table, " t WHERE NOT EXISTS "
                                        "(SELECT 1 FROM conversations c WHERE c.conv_key = "
                                        "t.conv_key)"));
    absl::StrAppend(&out, table, "=", n.ok() ? *n : n.status().ToString(), " ");
  }
  return out;
}

// kill -9 while a fork, and then a rewind, is being written (held at its
// view states by a lock the test takes, after the items were shared with
// it, and a rewind's items after its point moved to its abandoned fork):
// the transaction never commits, so there is no fork, no abandoned branch,
// no segment of shared items and no moved item, and the source is as it
// was; once the lock is gone and a replica is back, both succeed whole.
TEST(FaultE2eTest, KillDuringAForkOrARewindLeavesAllOrNothing) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::vector<std::string> flags = {"--model_profiles=" + ProfilesFile(),
                                          "--background_compaction=false",
                                          "--shutdown_grace_ms=100"};
  auto a = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(a.ok()) << a.status();
  auto stub = testing::StubFor(**a);
  ASSERT_TRUE(Create(*stub, "source").ok());
  std::mt19937 rng(11);
  constexpr int kTurns = 30;
  for (int i = 0; i < kTurns; ++i) {
    v1::AppendTurnResponse out;
    ASSERT_TRUE(AppendPair(*stub, "source", Words(rng, 20), &out).ok());
  }
  const std::string items = std::to_string(2 * kTurns);
  const std::string version =
      *(*db)->QueryValue("SELECT version FROM conversations WHERE conversation_id = 'source'");
  auto lock_waiters = [&] {
    return *(*db)->QueryValue(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = "
        "current_database()");
  };
  auto client_backends = [&] {
    return *(*db)->QueryValue(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND "
        "datname = current_database() AND pid <> pg_backend_pid()");
  };

  // Each write is held at its view states (both a fork and a rewind copy
  // them), the replica killed, the lock let go.
  auto kill_while_held = [&](std::unique_ptr<testing::ServerProcess>& server,
                             const std::function<grpc::Status()>& call) {
    auto holder = std::make_unique<pqxx::connection>((*db)->url());
    auto hold = std::make_unique<pqxx::work>(*holder);
    hold->exec("LOCK TABLE view_states IN SHARE MODE");
    grpc::Status status;
    std::thread doomed([&] { status = call(); });
    const bool held = WaitUntil([&] { return lock_waiters() == "1"; });
    auto killed = server->Stop(SIGKILL);
    doomed.join();
    hold->abort();
    hold.reset();
    holder.reset();
    EXPECT_TRUE(held) << "the write never reached the view states";
    ASSERT_TRUE(killed.ok());
    EXPECT_EQ(*killed, 128 + SIGKILL);
    EXPECT_FALSE(status.ok());
    // The dead replica's backends go (the held one after the lock).
    EXPECT_TRUE(WaitUntil([&] { return client_backends() == "0"; }));
  };

  std::unique_ptr<testing::ServerProcess> server = std::move(*a);
  v1::Conversation forked;
  kill_while_held(server, [&] { return ForkAt20(*stub, &forked); });
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM conversations"), "1");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items"), items);
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM item_segments"), "0");
  EXPECT_EQ(Orphans(**db), "items=0 view_states=0 summary_chunks=0 compaction_events=0 ");

  auto b = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(b.ok()) << b.status();
  server = std::move(*b);
  stub = testing::StubFor(*server);
  v1::RewindConversationResponse rewound;
  kill_while_held(server, [&] { return RewindTo10(*stub, &rewound); });
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM conversations"), "1");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items"), items);
  EXPECT_EQ(*(*db)->QueryValue("SELECT version FROM conversations WHERE conversation_id = "
                               "'source'"),
            version);
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM item_segments"), "0");
  EXPECT_EQ(Orphans(**db), "items=0 view_states=0 summary_chunks=0 compaction_events=0 ");

  // Back: both, whole.
  auto c = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(c.ok()) << c.status();
  stub = testing::StubFor(**c);
  grpc::Status s = ForkAt20(*stub, &forked);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(forked.item_count(), 20);
  s = RewindTo10(*stub, &rewound);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rewound.conversation().item_count(), 10);
  EXPECT_EQ(rewound.abandoned().item_count(), 2 * kTurns);
  // The fork and the abandoned branch share what they hold of the source
  // (the source's items after 10 moved to the abandoned branch): no item
  // was copied.
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM items"), items);
  EXPECT_EQ(Orphans(**db), "items=0 view_states=0 summary_chunks=0 compaction_events=0 ");
}

// Clients that cancel StreamBuildContext at random points of a compaction
// (before it starts, while the summarizer works, while events are written)
// never bring the server down, and a client that stays gets its view.
TEST(FaultE2eTest, CancelledStreamsAtAnyPointLeaveTheServerServing) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
  ASSERT_TRUE(llm.ok()) << llm.status();
  ASSERT_TRUE(ControlFakeLlm((*llm)->port(), R"({"default": {"kind": "answer", "delay_ms": 300}})"));
  auto server = testing::StartServerOn(
      **db, {"--model_profiles=" + ProfilesFile(),
       absl::StrCat("--summarizer_url=http://127.0.0.1:", (*llm)->port(), "/v1"),
       "--summarizer_retries=0", "--background_compaction=false", "--shutdown_grace_ms=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::StubFor(**server);
  std::mt19937 rng(17);
  constexpr int kRounds = 24;
  for (int round = 0; round < kRounds; ++round) {
    const std::string id = absl::StrCat("cancel-", round);
    ASSERT_TRUE(Create(*stub, id).ok());
    for (int i = 0; i < 12; ++i) {  // Past the hard band: the next build compacts.
      v1::AppendTurnResponse out;
      ASSERT_TRUE(AppendPair(*stub, id, Words(rng, 60), &out).ok());
    }
    v1::BuildContextRequest req;
    req.set_conversation_id(id);
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(20));
    auto reader = stub->StreamBuildContext(&ctx, req);
    const int cancel_after_ms = static_cast<int>(rng() % 700);
    std::thread canceller([&ctx, cancel_after_ms] {
      absl::SleepFor(absl::Milliseconds(cancel_after_ms));
      ctx.TryCancel();
    });
    v1::BuildContextEvent event;
    while (reader->Read(&event)) {
    }
    canceller.join();
    const grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::CANCELLED) << s.error_message();
  }
  // Still serving: a client that does not cancel gets its summarized view.
  v1::BuildContextResponse view;
  const grpc::Status s = Build(*stub, "cancel-0", &view);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
  // What each cancelled call left behind: every appended item, gap-free;
  // summary chunks that tile the history without overlap, one marker each;
  // no lease held; a view that builds.
  for (int round = 0; round < kRounds; ++round) {
    const std::string id = absl::StrCat("cancel-", round);
    v1::ListItemsRequest req;
    req.set_conversation_id(id);
    req.set_page_size(1000);
    v1::ListItemsResponse items;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub->ListItems(&ctx, req, &items).ok()) << id;
    int appended = 0;
    for (int i = 0; i < items.items_size(); ++i) {
      EXPECT_EQ(items.items(i).sequence(), i + 1) << id;
      appended += items.items(i).kind() != v1::ITEM_KIND_SUMMARY_MARKER;
    }
    EXPECT_EQ(appended, 24) << id;
    v1::ListSummariesRequest sreq;
    sreq.set_conversation_id(id);
    sreq.set_include_superseded(true);
    v1::ListSummariesResponse chunks;
    grpc::ClientContext sctx;
    SetDeadline(sctx);
    ASSERT_TRUE(stub->ListSummaries(&sctx, sreq, &chunks).ok()) << id;
    int64_t next = 1;
    for (const auto& chunk : chunks.chunks()) {
      bool fold = false;
      for (const auto& other : chunks.chunks()) fold |= other.superseded_by() == chunk.chunk_id();
      if (fold) continue;
      EXPECT_EQ(chunk.from_sequence(), next) << id << " chunk " << chunk.chunk_id();
      next = chunk.through_sequence() + 1;
    }
    v1::BuildContextResponse after;
    EXPECT_TRUE(Build(*stub, id, &after).ok()) << id;
  }
  EXPECT_EQ(*(*db)->QueryValue(
                "SELECT count(*) FROM conversations c WHERE "
                "(SELECT count(*) FROM summary_chunks s WHERE s.conv_key = c.conv_key) <> "
                "(SELECT count(*) FROM items i WHERE i.conv_key = c.conv_key "
                "AND i.kind = 'summary_marker')"),
            "0");
  EXPECT_EQ(*(*db)->QueryValue("SELECT count(*) FROM conversations WHERE lease_holder IS NOT NULL "
                               "AND lease_expires_at > now()"),
            "0");
  auto stopped = (*server)->Stop(SIGTERM);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, 0);
}

// Two replicas, eight clients, four conversations, appends and context
// builds interleaved: every acknowledged append is present, sequences are
// gap-free, and every compaction wrote exactly one chunk and one marker,
// with additive chunks that neither overlap nor leave gaps.
TEST(FaultE2eTest, TwoReplicasHammeredTogetherStayConsistent) {
  auto db = ScratchDatabase::Create(/*migrate=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::vector<std::string> flags = {"--model_profiles=" + ProfilesFile(),
                                          "--worker_threads=8"};
  auto r1 = testing::StartServerOn(**db, flags);
  auto r2 = testing::StartServerOn(**db, flags);
  ASSERT_TRUE(r1.ok() && r2.ok());
  const std::vector<std::string> ids = {"h0", "h1", "h2", "h3"};
  {
    auto stub = testing::StubFor(**r1);
    for (const auto& id : ids) ASSERT_TRUE(Create(*stub, id).ok());
  }
  constexpr int kClients = 8;
  constexpr int kRounds = 25;
  std::atomic<int> failures{0};
  std::vector<std::map<std::string, std::vector<std::string>>> acked(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = testing::StubFor(c % 2 ? **r1 : **r2);
      std::mt19937 rng(100 + c);
      for (int round = 0; round < kRounds; ++round) {
        const std::string& id = ids[(c + round) % ids.size()];
        const std::string text = absl::StrCat("c", c, "r", round, " ", Words(rng, 25));
        v1::AppendTurnResponse out;
        grpc::Status s = AppendPair(*stub, id, text, &out, absl::StrCat("c", c, "-", round));
        if (!s.ok()) {
          ++failures;
          ADD_FAILURE() << "append: " << s.error_code() << " " << s.error_message();
          continue;
        }
        acked[c][id].push_back("Q " + text);
        v1::BuildContextResponse view;
        s = Build(*stub, id, &view);
        if (!s.ok()) {
          ++failures;
          ADD_FAILURE() << "build: " << s.error_code() << " " << s.error_message();
        } else if (view.tokens().total() > 4096) {
          ADD_FAILURE() << "view over the window: " << view.tokens().total();
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);

  auto stub = testing::StubFor(**r2);
  int compactions = 0;
  for (const auto& id : ids) {
    v1::ListItemsRequest req;
    req.set_conversation_id(id);
    req.set_page_size(1000);
    v1::ListItemsResponse items;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub->ListItems(&ctx, req, &items).ok());
    std::set<std::string> contents;
    for (int i = 0; i < items.items_size(); ++i) {
      EXPECT_EQ(items.items(i).sequence(), i + 1) << id;
      contents.insert(items.items(i).content());
    }
    for (int c = 0; c < kClients; ++c) {
      for (const std::string& text : acked[c][id]) {
        EXPECT_TRUE(contents.count(text)) << "lost: " << text;
      }
    }
    v1::ListSummariesRequest sreq;
    sreq.set_conversation_id(id);
    sreq.set_include_superseded(true);
    v1::ListSummariesResponse chunks;
    grpc::ClientContext sctx;
    SetDeadline(sctx);
    ASSERT_TRUE(stub->ListSummaries(&sctx, sreq, &chunks).ok());
    // Chunks that summarize (not folds) tile the history without overlap.
    int64_t next = 1;
    for (const auto& chunk : chunks.chunks()) {
      bool fold = false;
      for (const auto& other : chunks.chunks()) fold |= other.superseded_by() == chunk.chunk_id();
      if (fold) continue;
      EXPECT_EQ(chunk.from_sequence(), next) << id << " chunk " << chunk.chunk_id();
      next = chunk.through_sequence() + 1;
      ++compactions;
    }
  }
  EXPECT_GT(compactions, 0);
  // One marker per chunk. Background compactions may still be committing,
  // so this is checked in one statement, that is, one snapshot.
  EXPECT_EQ(*(*db)->QueryValue(
                "SELECT count(*) FROM conversations c WHERE "
                "(SELECT count(*) FROM summary_chunks s WHERE s.conv_key = c.conv_key) <> "
                "(SELECT count(*) FROM items i WHERE i.conv_key = c.conv_key "
                "AND i.kind = 'summary_marker')"),
            "0");
  std::printf("two replicas: %d summaries written without overlap\n", compactions);
}

// Runs `script` in bash with the project's tools/lib/common.sh sourced;
// returns its standard output, trimmed.
std::string Shell(const std::string& script) {
  const std::string common = ServerProcess::RunfilePath("tools/lib/common.sh");
  // Standard error (the scripts' log lines) goes to the test log.
  const std::string command = absl::StrCat("bash -c 'source ", common, "; ", script, "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  pclose(pipe);
  return std::string(absl::StripAsciiWhitespace(out));
}

// The database goes away under a running server: calls fail with
// UNAVAILABLE meanwhile, and succeed again once it is back, without
// restarting the server.
TEST(FaultE2eTest, DatabaseRestartIsUnavailableThenRecovers) {
  const std::string dir = Shell("mktemp -d /tmp/convstate-fault-pg-XXXXXX");
  ASSERT_EQ(dir.rfind("/tmp/convstate-fault-pg-", 0), 0u) << dir;
  const std::string port = Shell(absl::StrCat("pg_start ", dir, " fast >/dev/null; echo $PG_PORT"));
  ASSERT_FALSE(port.empty());
  ASSERT_EQ(port.find_first_not_of("0123456789"), std::string::npos) << port;
  const std::string url = absl::StrCat("postgresql://postgres@127.0.0.1:", port, "/postgres");
  struct Cleanup {
    std::string dir;
    ~Cleanup() { Shell(absl::StrCat("pg_stop ", dir, "; rm -rf ", dir)); }
  } cleanup{dir};

  auto server = ServerProcess::Start({"--database_url=" + url, "--model_profiles=" + ProfilesFile(),
                                      "--db_connect_timeout_ms=1000", "--health_interval_ms=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::StubFor(**server);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  // Waits (bounded) until health reports `want` for the whole server.
  auto health_becomes = [&](grpc::health::v1::HealthCheckResponse::ServingStatus want) {
    return WaitUntil([&] {
      grpc::health::v1::HealthCheckRequest req;
      grpc::health::v1::HealthCheckResponse resp;
      grpc::ClientContext ctx;
      SetDeadline(ctx, absl::Seconds(2));
      return health->Check(&ctx, req, &resp).ok() && resp.status() == want;
    });
  };
  EXPECT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::SERVING));
  ASSERT_TRUE(Create(*stub, "survivor").ok());
  v1::AppendTurnResponse out;
  ASSERT_TRUE(AppendPair(*stub, "survivor", "before", &out).ok());

  Shell(absl::StrCat("pg_stop ", dir));
  // Load balancers see it: health follows the database.
  EXPECT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::NOT_SERVING));
  grpc::Status down = AppendPair(*stub, "survivor", "during", &out);
  EXPECT_EQ(down.error_code(), grpc::UNAVAILABLE) << down.error_message();
  v1::BuildContextResponse view;
  EXPECT_EQ(Build(*stub, "survivor", &view).error_code(), grpc::UNAVAILABLE);

  Shell(absl::StrCat("PG_FIXED_PORT=", port, " pg_start ", dir, " fast >/dev/null"));
  grpc::Status up;
  // The first call after may still find a dead connection.
  WaitUntil([&] { return (up = AppendPair(*stub, "survivor", "after", &out)).ok(); });
  ASSERT_TRUE(up.ok()) << up.error_message();
  EXPECT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::SERVING));
  ASSERT_TRUE(Build(*stub, "survivor", &view).ok());
  // "before" and "after" are there; "during" was refused, not half-stored.
  EXPECT_EQ(view.entries_size(), 4);
}

// The primary is lost and its synchronous standby promoted, under load: a
// server given both hosts (libpq multi-host, target_session_attrs=
// read-write) follows the promotion without a restart. Meanwhile calls are
// UNAVAILABLE and health NOT_SERVING; a client that retries each append
// with its idempotency key finds every acknowledged turn exactly once.
TEST(FaultE2eTest, FailoverToAPromotedStandbyLosesNothingAcknowledged) {
  // Two clusters under one folder the postgres user may enter.
  const std::string dir = Shell("d=$(mktemp -d /tmp/convstate-failover-XXXXXX); chmod 755 $d; echo $d");
  ASSERT_EQ(dir.rfind("/tmp/convstate-failover-", 0), 0u) << dir;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      Shell(absl::StrCat("pg_stop ", dir, "/primary immediate; pg_stop ", dir,
                         "/standby immediate; rm -rf ", dir));
    }
  } cleanup{dir};
  // A durable primary (not the tests' fast settings), and its standby.
  const std::string primary =
      Shell(absl::StrCat("pg_start ", dir, "/primary >/dev/null; echo $PG_PORT"));
  ASSERT_FALSE(primary.empty());
  ASSERT_EQ(primary.find_first_not_of("0123456789"), std::string::npos) << primary;
  Shell(absl::StrCat("psql postgresql://postgres@127.0.0.1:", primary,
                     "/postgres -qc \"CREATE DATABASE convstate\" >/dev/null"));
  const std::string standby = Shell(absl::StrCat("pg_standby_start ", primary, " ", dir,
                                                 "/standby >/dev/null; echo $PG_PORT"));
  ASSERT_FALSE(standby.empty());
  ASSERT_EQ(standby.find_first_not_of("0123456789"), std::string::npos) << standby;
  const std::string url =
      absl::StrCat("postgresql://postgres@127.0.0.1:", primary, ",127.0.0.1:", standby,
                   "/convstate?target_session_attrs=read-write");
  auto server = ServerProcess::Start({"--database_url=" + url,
                                      "--model_profiles=" + ProfilesFile(),
                                      "--db_connect_timeout_ms=1000", "--health_interval_ms=100",
                                      "--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::StubFor(**server);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto health_becomes = [&](grpc::health::v1::HealthCheckResponse::ServingStatus want) {
    return WaitUntil([&] {
      grpc::health::v1::HealthCheckRequest req;
      grpc::health::v1::HealthCheckResponse resp;
      grpc::ClientContext ctx;
      SetDeadline(ctx, absl::Seconds(2));
      return health->Check(&ctx, req, &resp).ok() && resp.status() == want;
    });
  };
  ASSERT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::SERVING));
  constexpr int kWriters = 4;
  for (int w = 0; w < kWriters; ++w) ASSERT_TRUE(Create(*stub, absl::StrCat("w", w)).ok());

  // Each writer appends turn after turn; an append that fails is sent again
  // with the same key until it is acknowledged (or the test gives up).
  std::atomic<bool> stop{false};
  std::atomic<int> after_promotion{0};
  std::atomic<bool> promoted{false};
  std::vector<std::vector<std::string>> acknowledged(kWriters);
  std::vector<std::thread> writers;
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; !stop; ++n) {
        const std::string key = absl::StrCat("w", w, "-turn-", n);
        v1::AppendTurnResponse out;
        while (!AppendPair(*stub, absl::StrCat("w", w), key, &out, key).ok()) {
          if (absl::Now() > give_up) return;
          absl::SleepFor(absl::Milliseconds(50));
        }
        acknowledged[w].push_back(key);
        if (promoted) ++after_promotion;
      }
    });
  }
  ASSERT_TRUE(WaitUntil([&] {
    size_t total = 0;
    for (const auto& a : acknowledged) total += a.size();
    return total >= 40;
  }));
  // The primary is lost, hard: no shutdown, no last words.
  Shell(absl::StrCat("pg_stop ", dir, "/primary immediate"));
  EXPECT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::NOT_SERVING));
  const absl::Time promotion = absl::Now();
  Shell(absl::StrCat("pg_promote ", dir, "/standby"));
  promoted = true;
  // Appends resume within seconds, through the same server.
  ASSERT_TRUE(WaitUntil([&] { return after_promotion >= 20; }, absl::Seconds(30)));
  const absl::Duration resumed = absl::Now() - promotion;
  EXPECT_LT(resumed, absl::Seconds(30));
  EXPECT_TRUE(health_becomes(grpc::health::v1::HealthCheckResponse::SERVING));
  stop = true;
  for (std::thread& t : writers) t.join();

  // Every acknowledged turn is stored exactly once, in order, with no gap.
  int total = 0;
  for (int w = 0; w < kWriters; ++w) {
    std::vector<v1::Item> items;
    ASSERT_TRUE(rpc::ListAllItems(*stub, absl::StrCat("w", w), items).ok());
    std::vector<std::string> stored;
    int64_t expected_sequence = 1;
    for (const v1::Item& item : items) {
      EXPECT_EQ(item.sequence(), expected_sequence++);
      if (item.role() == v1::ROLE_USER) stored.push_back(item.content().substr(2));
    }
    // What is stored is what was acknowledged, each once; a last append in
    // flight when the writer stopped may be stored without its answer.
    ASSERT_GE(stored.size(), acknowledged[w].size());
    EXPECT_LE(stored.size(), acknowledged[w].size() + 1);
    for (size_t i = 0; i < acknowledged[w].size(); ++i) {
      EXPECT_EQ(stored[i], acknowledged[w][i]) << "writer " << w << " turn " << i;
    }
    total += static_cast<int>(acknowledged[w].size());
  }
  std::printf("failover: %d turns acknowledged, appends resumed %s after the promotion\n", total,
              absl::FormatDuration(resumed).c_str());
}

}  // namespace
}  // namespace convstate
