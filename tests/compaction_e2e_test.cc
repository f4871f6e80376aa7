// Compaction end to end: the real server binary, a real PostgreSQL, a small
// 4,096-token window, and long conversations with tool calls. Prints the
// sawtooth of view sizes and what each compaction did.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>


#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/fake_llm_control.h"
#include "tests/server_process.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;
using testing::ControlFakeLlm;
using rpc::MakeItem;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;

constexpr int64_t kWindow = 4096;
constexpr char kExtractive[] = "convstate-extractive";


// One turn of a conversation about one of several topics.
struct TurnText {
  std::string question, call_args, tool, output, answer;
};

TurnText MakeTurn(int n, std::mt19937& rng) {
  static const char* kTopics[][4] = {
      {"deploy", "kubectl", "Why is the api deployment in staging-eu-1 not rolling out?",
       "Error: ImagePullBackOff registry.local/api:v1.%d not found"},
      {"database", "psql", "The migration 0042_add_index on orders is slow, can we speed it up?",
       "ERROR: canceling statement due to lock timeout on relation orders (pid %d)"},
      {"frontend", "npm", "The checkout button test fails in CI since yesterday, what changed?",
       "FAIL src/checkout.test.tsx: expected 'Pay 42.%d EUR' but got 'Pay NaN EUR'"},
      {"perf", "perf", "p99 latency of /search went from 80 ms to 350 ms after release 1.4.",
       "hot: 61.%d%% in regex_search (libsearch.so), 12%% in json_parse"},
  };
  const auto& t = kTopics[(n / 3) % 4];  // A few turns per topic, then the next.
  TurnText turn;
  turn.tool = t[1];
  turn.question = absl::StrCat("[turn ", n, "] ", t[2], " I need this fixed today.");
  turn.call_args = absl::StrCat(R"({"cmd": ")", t[1], " --context ", t[0], " --turn ", n, R"("})");
  char line[256];
  std::snprintf(line, sizeof(line), t[3], n);
  std::string output;
  const int lines = 5 + static_cast<int>(rng() % 40);
  for (int i = 0; i < lines; ++i) {
    absl::StrAppend(&output, "2026-11-22T03:", 10 + i % 50, ":00Z ", t[0], " worker-", rng() % 9,
                    " processed batch ", rng() % 100000, " in ", rng() % 900, "ms\n");
  }
  absl::StrAppend(&output, line, "\n");
  turn.output = output;
  turn.answer = absl::StrCat("The ", t[0], " issue in turn ", n,
                             " comes from the error above. We decided to roll back to the "
                             "previous version and open a ticket; next step is to verify in "
                             "staging-eu-1.");
  return turn;
}



class CompactionE2eTest : public testing::E2eTest {
 protected:
  void StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--model_profiles=" + testing::WriteTinyProfiles()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    E2eTest::StartServer(flags);
  }

  // The items of turn `n`: the question, a tool call, its result, the answer.
  static v1::AppendTurnRequest TurnAppend(const std::string& id, int n, const TurnText& turn) {
    v1::AppendTurnRequest append;
    append.set_conversation_id(id);
    const std::string call = absl::StrCat("call_", n);
    *append.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    *append.add_items() =
        MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL, turn.call_args, turn.tool, call);
    *append.add_items() =
        MakeItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, turn.output, turn.tool, call);
    *append.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE, turn.answer);
    return append;
  }

  // One turn: BuildContext with the question pending, then append the turn.
  // Returns the view.
  v1::BuildContextResponse Turn(const std::string& id, int n, std::mt19937& rng) {
    const TurnText turn = MakeTurn(n, rng);
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    *build.add_pending_input() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    v1::BuildContextResponse view;
    {
      grpc::ClientContext ctx;
      SetDeadline(ctx);
      const grpc::Status s = stub_->BuildContext(&ctx, build, &view);
      EXPECT_TRUE(s.ok()) << "turn " << n << ": " << s.error_message();
    }
    const v1::AppendTurnRequest append = TurnAppend(id, n, turn);
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status appended = stub_->AppendTurn(&ctx, append, &out);
    EXPECT_TRUE(appended.ok()) << "turn " << n << ": " << appended.error_code() << " "
                               << appended.error_message();
    return view;
  }

  std::vector<v1::SummaryChunk> Chunks(const std::string& id) {
    v1::ListSummariesRequest req;
    req.set_conversation_id(id);
    req.set_include_superseded(true);
    v1::ListSummariesResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    EXPECT_TRUE(stub_->ListSummaries(&ctx, req, &resp).ok());
    return {resp.chunks().begin(), resp.chunks().end()};
  }

  void Create(const std::string& id, const std::string& system_prompt) {
    ASSERT_TRUE(E2eTest::Create(id, "tiny-1", system_prompt).ok());
  }
};

TEST_F(CompactionE2eTest, SixtyTurnsNeverOverflowAndCompactAdditively) {
  StartServer();
  Create("long", "You are an on-call assistant. Be precise and cite commands.");
  // A pinned instruction early on: it must survive every compaction.
  {
    v1::AppendTurnRequest req;
    req.set_conversation_id("long");
    v1::NewItem pinned =
        MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE,
             "Standing rule: never restart production without asking me first.");
    pinned.set_pinned(true);
    *req.add_items() = pinned;
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->AppendTurn(&ctx, req, &out).ok());
  }
  std::mt19937 rng(60);
  std::vector<int64_t> totals;
  std::vector<std::string> statuses;
  int compactions_seen = 0;
  double compacting_ms = 0, plain_ms = 0;
  int compacting_calls = 0, plain_calls = 0;
  for (int n = 1; n <= 60; ++n) {
    const TurnText turn = MakeTurn(n, rng);
    v1::BuildContextRequest build;
    build.set_conversation_id("long");
    *build.add_pending_input() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const auto start = std::chrono::steady_clock::now();
    auto reader = stub_->StreamBuildContext(&ctx, build);
    std::vector<v1::BuildContextEvent> events;
    v1::BuildContextEvent event;
    while (reader->Read(&event)) events.push_back(event);
    const grpc::Status status = reader->Finish();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(status.ok()) << "turn " << n << ": " << status.error_message();
    ASSERT_FALSE(events.empty());
    ASSERT_TRUE(events.back().has_context()) << "the context is always the last event";
    const v1::BuildContextResponse& view = events.back().context();
    bool compacted = false;
    bool started = false;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      if (events[i].has_compaction_started()) started = true;
      if (events[i].has_compaction_completed()) {
        EXPECT_TRUE(started) << "completed before started, turn " << n;
        compacted = true;
      }
      EXPECT_FALSE(events[i].has_compaction_failed())
          << "turn " << n << ": " << events[i].compaction_failed().reason();
    }
    if (compacted) {
      ++compactions_seen;
      compacting_ms += ms;
      ++compacting_calls;
    } else {
      plain_ms += ms;
      ++plain_calls;
    }
    // The view never exceeds the window, and the pinned rule is always in it.
    EXPECT_LE(view.tokens().total(), kWindow) << "turn " << n;
    bool pinned_seen = false;
    for (const auto& e : view.entries()) {
      pinned_seen |= e.content().rfind("Standing rule", 0) == 0;
    }
    EXPECT_TRUE(pinned_seen) << "turn " << n;
    EXPECT_FALSE(view.tokens().approximate());
    totals.push_back(view.tokens().total());
    statuses.push_back(v1::ContextStatus_Name(view.context_status()).substr(15));

    v1::AppendTurnRequest append;
    append.set_conversation_id("long");
    const std::string id = absl::StrCat("call_", n);
    *append.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    *append.add_items() =
        MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL, turn.call_args, turn.tool, id);
    *append.add_items() = MakeItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, turn.output, turn.tool, id);
    *append.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE, turn.answer);
    v1::AppendTurnResponse out;
    grpc::ClientContext actx;
    SetDeadline(actx);
    const grpc::Status appended = stub_->AppendTurn(&actx, append, &out);
    ASSERT_TRUE(appended.ok()) << "turn " << n << ": " << appended.error_code() << " "
                               << appended.error_message();
  }
  EXPECT_GE(compactions_seen, 3);

  // The full history is intact: 1 pinned + 60 * 4 items, plus one marker per
  // chunk written.
  v1::ListSummariesRequest list;
  list.set_conversation_id("long");
  list.set_include_superseded(true);
  v1::ListSummariesResponse chunks;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListSummaries(&ctx, list, &chunks).ok());
  }
  int64_t items = 0;
  v1::ListItemsRequest page;
  page.set_conversation_id("long");
  page.set_page_size(1000);
  v1::ListItemsResponse listed;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->ListItems(&ctx, page, &listed).ok());
    items = listed.items_size();
  }
  EXPECT_GE(items, 1 + 60 * 4 + chunks.chunks_size());
  // Background compactions may still be committing: count in one snapshot.
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items WHERE kind <> 'summary_marker'"),
            std::to_string(1 + 60 * 4));
  EXPECT_EQ(*db_->QueryValue("SELECT (SELECT count(*) FROM summary_chunks) = "
                             "(SELECT count(*) FROM items WHERE kind = 'summary_marker')"),
            "t");
  int superseded = 0, folds = 0;
  for (const auto& c : chunks.chunks()) {
    superseded += c.superseded_by() != 0;
    // A fold covers more than one earlier chunk's range.
    for (const auto& other : chunks.chunks()) {
      if (other.superseded_by() == c.chunk_id()) {
        ++folds;
        break;
      }
    }
    EXPECT_LE(c.token_count(), 250);
    EXPECT_FALSE(c.text().empty());
  }
  EXPECT_GE(chunks.chunks_size(), 3) << "additive chunks";
  EXPECT_GE(folds, 1) << "at least one fold";
  EXPECT_GE(superseded, 2);
  // Additive: the first chunk is still stored as it was written.
  EXPECT_EQ(chunks.chunks(0).from_sequence(), 1);

  // The sawtooth, and each compaction from the audit trail.
  std::printf("\nview tokens before each turn (window %lld):\n", static_cast<long long>(kWindow));
  for (size_t i = 0; i < totals.size(); ++i) {
    std::printf("  turn %2zu: %5lld  %s\n", i + 1, static_cast<long long>(totals[i]),
                statuses[i].c_str());
  }
  auto rows = db_->QueryValue(
      "SELECT string_agg(event || ' ' || tier || ' ' || tokens_before || '->' || tokens_after || ' "
      "' || detail::text, E'\\n' ORDER BY event_id) FROM compaction_events "
      "WHERE event IN ('completed', 'folded', 'pruned', 'truncated', 'failed', 'no_progress')");
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::printf("\ncompaction events (before->after):\n%s\n", rows->c_str());
  std::printf("\nchunks:\n");
  for (const auto& c : chunks.chunks()) {
    std::printf("  chunk %lld: items %lld-%lld, %lld tokens (from %lld in), superseded by %lld\n",
                static_cast<long long>(c.chunk_id()), static_cast<long long>(c.from_sequence()),
                static_cast<long long>(c.through_sequence()), static_cast<long long>(c.token_count()),
                static_cast<long long>(c.tokens_in()), static_cast<long long>(c.superseded_by()));
  }
  std::printf("\nStreamBuildContext mean: %.2f ms with compaction (%d calls), %.2f ms without (%d)\n",
              compacting_calls ? compacting_ms / compacting_calls : 0.0, compacting_calls,
              plain_calls ? plain_ms / plain_calls : 0.0, plain_calls);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM compaction_events WHERE event = 'failed'"), "0");
}

TEST_F(CompactionE2eTest, CompactModesInspectAndCannotFit) {
  StartServer();
  Create("manual", "You are terse.");
  std::mt19937 rng(7);
  for (int n = 1; n <= 4; ++n) {
    const TurnText turn = MakeTurn(n, rng);
    v1::AppendTurnRequest append;
    append.set_conversation_id("manual");
    const std::string id = absl::StrCat("c", n);
    *append.add_items() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    *append.add_items() =
        MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL, turn.call_args, turn.tool, id);
    *append.add_items() =
        MakeItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, turn.output + turn.output, turn.tool, id);
    *append.add_items() = MakeItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE, turn.answer);
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->AppendTurn(&ctx, append, &out).ok());
  }
  auto compact = [&](v1::CompactRequest::Mode mode) {
    v1::CompactRequest req;
    req.set_conversation_id("manual");
    req.set_mode(mode);
    req.set_instructions("focus on the decisions");
    v1::CompactResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->Compact(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };
  // Inspect first: it says what would happen and changes nothing.
  v1::InspectContextRequest inspect;
  inspect.set_conversation_id("manual");
  v1::InspectContextResponse seen;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->InspectContext(&ctx, inspect, &seen).ok());
  }
  EXPECT_NE(seen.band(), v1::BAND_UNSPECIFIED);
  EXPECT_GT(seen.tokens().total(), 0);

  const v1::CompactResponse pruned = compact(v1::CompactRequest::MODE_PRUNE_ONLY);
  EXPECT_LT(pruned.tokens_after(), pruned.tokens_before());
  EXPECT_EQ(pruned.context_status(), v1::CONTEXT_STATUS_PRUNED);
  EXPECT_EQ(pruned.summary_chunk_id(), 0);

  const v1::CompactResponse summarized = compact(v1::CompactRequest::MODE_SUMMARIZE);
  EXPECT_GT(summarized.summary_chunk_id(), 0);
  EXPECT_EQ(summarized.context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
  EXPECT_LT(summarized.tokens_after(), summarized.tokens_before());
  // Compactions move compaction_version, never the version appends compare.
  EXPECT_GT(summarized.compaction_version(), pruned.compaction_version());
  EXPECT_EQ(summarized.version(), pruned.version());

  const v1::CompactResponse truncated = compact(v1::CompactRequest::MODE_TRUNCATE);
  // Truncation is view-only: storage and versions stay as they were.
  EXPECT_EQ(truncated.version(), summarized.version());
  EXPECT_EQ(truncated.compaction_version(), summarized.compaction_version());
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM items WHERE kind <> 'summary_marker'"), "16");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) FROM compaction_events WHERE event = 'pruned'"), "1");

  // A system prompt larger than the window: a clear, typed error.
  v1::CreateConversationRequest big;
  big.set_conversation_id("huge");
  big.set_model("tiny-1");
  std::string prompt;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&prompt, "rule ", i, " applies. ");
  big.set_system_prompt(prompt);
  v1::Conversation created;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->CreateConversation(&ctx, big, &created).ok());
  }
  v1::BuildContextRequest build;
  build.set_conversation_id("huge");
  v1::BuildContextResponse view;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  const grpc::Status s = stub_->BuildContext(&ctx, build, &view);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("system prompt ("), std::string::npos) << s.error_message();
}

// The normal gateway loop with optimistic concurrency: BuildContext (version
// v), then AppendTurn with expected_version v. Compactions, in line or in
// the background, never make that append ABORTED.
TEST_F(CompactionE2eTest, TheGatewayLoopWithExpectedVersionSurvivesCompactions) {
  StartServer();  // Background compaction on, as deployed.
  Create("loop", "You are an on-call assistant.");
  std::mt19937 rng(5);
  int64_t compactions = 0;
  for (int n = 1; n <= 30; ++n) {
    const TurnText turn = MakeTurn(n, rng);
    v1::BuildContextRequest build;
    build.set_conversation_id("loop");
    *build.add_pending_input() = MakeItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, turn.question);
    v1::BuildContextResponse view;
    {
      grpc::ClientContext ctx;
      SetDeadline(ctx);
      ASSERT_TRUE(stub_->BuildContext(&ctx, build, &view).ok());
    }
    compactions = std::max(compactions, view.compaction_version());
    v1::AppendTurnRequest append = TurnAppend("loop", n, turn);
    append.set_expected_version(view.version());
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub_->AppendTurn(&ctx, append, &out);
    ASSERT_TRUE(s.ok()) << "turn " << n << ": " << s.error_message();
    EXPECT_EQ(out.version(), view.version() + 1);
  }
  EXPECT_GT(compactions, 3) << "the loop should have compacted along the way";
}

// PinItem keeps an old item in every view, past summaries; UnpinItem takes
// it out again.
TEST_F(CompactionE2eTest, APinnedItemOutlivesTheSummaryOfItsTurn) {
  StartServer({"--background_compaction=false"});
  Create("pins", "You are terse.");
  std::mt19937 rng(3);
  for (int n = 1; n <= 3; ++n) Turn("pins", n, rng);
  auto pin = [&](bool on, int64_t sequence) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::Item item;
    if (on) {
      v1::PinItemRequest req;
      req.set_conversation_id("pins");
      req.set_sequence(sequence);
      return std::make_pair(stub_->PinItem(&ctx, req, &item), item);
    }
    v1::UnpinItemRequest req;
    req.set_conversation_id("pins");
    req.set_sequence(sequence);
    return std::make_pair(stub_->UnpinItem(&ctx, req, &item), item);
  };
  auto [pinned, item] = pin(true, 4);  // The first turn's answer.
  ASSERT_TRUE(pinned.ok()) << pinned.error_message();
  EXPECT_TRUE(item.pinned());
  EXPECT_EQ(pin(true, 999).first.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(pin(true, 0).first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    v1::CompactRequest req;
    req.set_conversation_id("pins");
    req.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    v1::CompactResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(stub_->Compact(&ctx, req, &resp).ok());
    ASSERT_GT(resp.summary_chunk_id(), 0);
  }
  auto shows = [&](int64_t sequence) {
    v1::BuildContextRequest build;
    build.set_conversation_id("pins");
    v1::BuildContextResponse view;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    EXPECT_TRUE(stub_->BuildContext(&ctx, build, &view).ok());
    for (const auto& e : view.entries()) {
      if (e.sequence() == sequence) return e.section();
    }
    return v1::SECTION_UNSPECIFIED;
  };
  EXPECT_EQ(shows(4), v1::SECTION_PINNED);
  ASSERT_TRUE(pin(false, 4).first.ok());
  EXPECT_EQ(shows(4), v1::SECTION_UNSPECIFIED);
}

// The LLM summarizer through the real server, with the fake LLM program:
// LLM summaries while it answers; when it fails, views come back TRUNCATED
// and the audit says why; while the circuit is open the extractive
// summarizer stands in; when the LLM recovers, LLM summaries again.
TEST_F(CompactionE2eTest, LlmFailuresTruncateThenFallBackThenRecover) {
  auto llm = ServerProcess::StartProgram("tests/fake_llm_server", {}, "fake llm listening on ");
  ASSERT_TRUE(llm.ok()) << llm.status();
  const int llm_port = (*llm)->port();
  StartServer({absl::StrCat("--summarizer_url=http://127.0.0.1:", llm_port, "/v1"),
               "--summarizer_model=fake-sum", "--summarizer_timeout_ms=2000",
               "--summarizer_retries=0", "--summarizer_failure_threshold=2",
               "--summarizer_open_ms=300",
               // Failures must meet the calls this test makes, not a
               // background compaction (tested on its own).
               "--background_compaction=false"});
  Create("llm", "You are an on-call assistant.");
  std::mt19937 rng(11);
  int n = 0;
  auto models = [&] {
    std::vector<std::string> out;
    for (const auto& c : Chunks("llm")) out.push_back(c.summarizer_model());
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const std::string& m) {
    return std::find(v.begin(), v.end(), m) != v.end();
  };
  // 1. The LLM answers: its summaries are used.
  while (n < 30 && !has(models(), "fake-sum")) {
    EXPECT_LE(Turn("llm", ++n, rng).tokens().total(), kWindow);
  }
  ASSERT_TRUE(has(models(), "fake-sum")) << "no LLM summary after " << n << " turns";

  // 2. The LLM fails: the view is truncated, never overflowing, and the
  // audit records the failure.
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "fail", "status": 500}})"));
  bool truncated = false;
  for (int i = 0; i < 20 && !truncated; ++i) {
    const v1::BuildContextResponse view = Turn("llm", ++n, rng);
    EXPECT_LE(view.tokens().total(), kWindow);
    truncated = view.context_status() == v1::CONTEXT_STATUS_TRUNCATED;
  }
  EXPECT_TRUE(truncated);
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) > 0 FROM compaction_events WHERE event = 'failed' "
                             "AND detail->>'reason' LIKE '%HTTP 500%'"),
            "t");
  EXPECT_EQ(*db_->QueryValue("SELECT count(*) > 0 FROM compaction_events WHERE event = "
                             "'truncated' AND detail->>'reason' = 'summarizer unavailable'"),
            "t");

  // 3. The circuit is open: the extractive summarizer stands in.
  for (int i = 0; i < 20 && !has(models(), kExtractive); ++i) {
    EXPECT_LE(Turn("llm", ++n, rng).tokens().total(), kWindow);
  }
  EXPECT_TRUE(has(models(), kExtractive));

  // 4. The LLM recovers: after the open period, LLM summaries again.
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "answer"}})"));
  const size_t before = Chunks("llm").size();
  // Turns until an LLM summary appears: once the 300 ms open period is over.
  const bool recovered = rpc::WaitUntil([&] {
    EXPECT_LE(Turn("llm", ++n, rng).tokens().total(), kWindow);
    const auto chunks = Chunks("llm");
    for (size_t k = before; k < chunks.size(); ++k) {
      if (chunks[k].summarizer_model() == "fake-sum") return true;
    }
    return false;
  });
  EXPECT_TRUE(recovered);

  // 5. The LLM hangs: each call still answers in bounded time (the 2 s
  // summarizer timeout) with a view that fits (truncated only if pruning
  // was not enough), and the audit says the summarizer did not answer.
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "hang"}})"));
  bool timed_out = false;
  for (int i = 0; i < 10 && !timed_out; ++i) {
    const absl::Time start = absl::Now();
    const v1::BuildContextResponse view = Turn("llm", ++n, rng);
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
    EXPECT_LE(view.tokens().total(), kWindow);
    timed_out = *db_->QueryValue("SELECT count(*) > 0 FROM compaction_events WHERE event = "
                                 "'failed' AND detail->>'reason' LIKE '%did not answer%'") == "t";
  }
  EXPECT_TRUE(timed_out);
  // 6. The LLM rambles: asked again with a tighter limit, then cut to the
  // budget, and the audit says so (once the circuit let it be asked again).
  ASSERT_TRUE(ControlFakeLlm(llm_port, R"({"default": {"kind": "oversize"}})"));
  bool oversize = false;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (!oversize && absl::Now() < give_up) {
    EXPECT_LE(Turn("llm", ++n, rng).tokens().total(), kWindow);
    oversize = *db_->QueryValue(
                   "SELECT count(*) > 0 FROM compaction_events WHERE event = 'summary_oversize'") ==
               "t";
  }
  EXPECT_TRUE(oversize);
  for (const auto& c : Chunks("llm")) EXPECT_LE(c.token_count(), 250) << c.chunk_id();
}

}  // namespace
}  // namespace convstate
