// Compaction under the caller's control, end to end on a real server and
// database, through a client that knows only what reflection tells it (the
// Buf CLI, as grpcurl would): a dry run changes no view, an edited proposal
// puts its text in the view, a revert gives the view back, a keep rule
// holds its item through a summary, through_sequence ends a summary where
// it says, an idle conversation is compacted without a call, and a
// proposal made on one replica applies on another while appends go on.

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"

namespace convstate {
namespace {

using rpc::Message;
using testing::BufOutput;
using testing::ServerProcess;

class CompactionControlE2eTest : public testing::E2eTest {
 protected:
  // `method` of convstate.v1.ConversationState on `server` through buf
  // curl, its answer parsed into `out`; fails the test if the call fails.
  void Curl(const ServerProcess& server, const std::string& method, const std::string& json,
            google::protobuf::Message* out) {
    ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
    const BufOutput answer = testing::CurlConversationState(server.address(), method, json);
    ASSERT_EQ(answer.exit_code, 0) << method << ": " << answer.out;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(answer.out, out, lenient).ok())
        << answer.out;
  }

  v1::BuildContextResponse View(const ServerProcess& server, const std::string& id) {
    v1::BuildContextResponse view;
    Curl(server, "BuildContext", absl::StrCat(R"({"conversation_id": ")", id, R"("})"), &view);
    return view;
  }

  // Four turns; the first user message names a ticket.
  void AppendTurns(const std::string& id, int turns, int first = 0) {
    for (int t = first; t < first + turns; ++t) {
      const std::string ask = t == 0 ? "Track the rollout under ticket OPS-4711."
                                     : absl::StrCat("Roll web-", t, " to eu-west-1 next.");
      ASSERT_TRUE(Append(id, {Message(v1::ROLE_USER, ask),
                              Message(v1::ROLE_ASSISTANT,
                                      absl::StrCat("Done for web-", t, ". ",
                                                   std::string(300, 'r'), " All healthy."))})
                      .ok());
    }
  }
};

TEST_F(CompactionControlE2eTest, PreviewEditApplyRevertKeepAndBoundaryThroughReflection) {
  StartServer({"--background_compaction=false"});
  v1::Conversation created;
  Curl(*server_, "CreateConversation", R"({
    "conversation_id": "ctl", "model": "gpt-4o",
    "profile_overrides": {"recent_turns": 1},
    "compaction_policy": {"keep": [{"pattern": "ticket [A-Z]+-[0-9]+", "roles": ["ROLE_USER"]}]}
  })", &created);
  ASSERT_EQ(created.compaction_policy().keep_size(), 1);
  AppendTurns("ctl", 4);  // Items 1-8; item 1 names the ticket.
  const v1::BuildContextResponse before = View(*server_, "ctl");
  ASSERT_FALSE(before.view_hash().empty());

  // A dry run: a proposal, and the view as it was.
  v1::CompactResponse dry;
  Curl(*server_, "Compact",
       R"({"conversation_id": "ctl", "mode": "MODE_SUMMARIZE", "dry_run": true})", &dry);
  ASSERT_TRUE(dry.has_proposal()) << dry.DebugString();
  EXPECT_EQ(dry.summary_chunk_id(), 0);
  EXPECT_EQ(View(*server_, "ctl").view_hash(), before.view_hash());

  // Applied with the caller's text: that text is the view's summary, and
  // the ticket stays verbatim.
  v1::ApplyCompactionResponse applied;
  Curl(*server_, "ApplyCompaction",
       absl::StrCat(R"({"conversation_id": "ctl", "proposal_id": ")", dry.proposal().proposal_id(),
                    R"(", "summary_text": "Edited: web-1 to web-2 rolled out to eu-west-1."})"),
       &applied);
  EXPECT_TRUE(applied.edited());
  ASSERT_GT(applied.summary_chunk_id(), 0);
  const v1::BuildContextResponse compacted = View(*server_, "ctl");
  bool edited = false, ticket = false;
  for (const v1::ContextEntry& e : compacted.entries()) {
    edited |= e.section() == v1::SECTION_SUMMARY &&
              e.content().find("Edited: web-1 to web-2") != std::string::npos;
    ticket |= e.section() == v1::SECTION_PINNED &&
              e.content() == "Track the rollout under ticket OPS-4711.";
  }
  EXPECT_TRUE(edited) << compacted.DebugString();
  EXPECT_TRUE(ticket) << compacted.DebugString();

  // Reverted: the view before the compaction, byte for byte.
  v1::RevertCompactionResponse reverted;
  Curl(*server_, "RevertCompaction",
       absl::StrCat(R"({"conversation_id": "ctl", "chunk_id": )", applied.summary_chunk_id(), "}"),
       &reverted);
  EXPECT_TRUE(reverted.chunk().reverted());
  EXPECT_EQ(View(*server_, "ctl").view_hash(), before.view_hash());

  // A boundary: the chunk ends exactly there.
  v1::CompactResponse bounded;
  Curl(*server_, "Compact", R"({"conversation_id": "ctl", "through_sequence": 4})", &bounded);
  ASSERT_GT(bounded.summary_chunk_id(), 0) << bounded.DebugString();
  v1::ExpandSummaryResponse chunk;
  Curl(*server_, "ExpandSummary",
       absl::StrCat(R"({"conversation_id": "ctl", "chunk_id": )", bounded.summary_chunk_id(), "}"),
       &chunk);
  EXPECT_EQ(chunk.chunk().from_sequence(), 1);
  EXPECT_EQ(chunk.chunk().through_sequence(), 4);
}

TEST_F(CompactionControlE2eTest, AConversationLeftAloneAboveItsBandIsCompactedWhenItsCacheIsCold) {
  StartServer({"--background_compaction=false", "--idle_scan_ms=200"});
  v1::Conversation created;
  Curl(*server_, "CreateConversation", R"({
    "conversation_id": "idle", "model": "gpt-4o",
    "profile_overrides": {"context_window": 4000, "output_reserve": 200, "token_floor": 500,
                          "recent_turns": 1, "prompt_cache_ttl_s": 1}
  })", &created);
  // Into the soft band (2,800 of 4,000) and not past the hard one.
  v1::BuildContextResponse view;
  for (int t = 1; view.tokens().total() < 2850 && t < 200; ++t) {
    AppendTurns("idle", 1, t);
    ASSERT_TRUE(Build("idle", &view).ok());
  }
  ASSERT_LT(view.tokens().total(), 3200) << "past the hard band";
  // Left alone: nothing calls BuildContext from here.
  bool idle = false;
  for (int i = 0; i < 60 && !idle; ++i) {
    absl::SleepFor(absl::Milliseconds(250));
    v1::ListCompactionEventsResponse events;
    Curl(*server_, "ListCompactionEvents", R"({"conversation_id": "idle"})", &events);
    for (const v1::CompactionEvent& e : events.events()) idle |= e.event() == "idle";
  }
  EXPECT_TRUE(idle) << "no idle compaction within 15 s";
  EXPECT_GT(Get("idle").compaction_version(), view.compaction_version());
}

TEST_F(CompactionControlE2eTest, AProposalMadeOnOneReplicaAppliesOnAnotherWhileAppendsGoOn) {
  StartServer({"--replica_id=a"});
  auto other = testing::StartServerOn(*db_, {"--replica_id=b"});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(Create("two", "gpt-4o").ok());
  AppendTurns("two", 6);
  v1::CompactResponse dry;
  Curl(*server_, "Compact",
       R"({"conversation_id": "two", "mode": "MODE_SUMMARIZE", "dry_run": true})", &dry);
  ASSERT_TRUE(dry.has_proposal()) << dry.DebugString();
  const int64_t last_before = Get("two").last_sequence();

  // Appends on replica a while replica b applies: both succeed; the summary
  // covers the proposal's range and the appended items stay live.
  std::atomic<bool> appended{true};
  std::thread appender([&] {
    for (int i = 0; i < 5; ++i) {
      appended = appended && Append("two", {Message(v1::ROLE_USER, absl::StrCat("more ", i))}).ok();
    }
  });
  v1::ApplyCompactionResponse applied;
  Curl(**other, "ApplyCompaction",
       absl::StrCat(R"({"conversation_id": "two", "proposal_id": ")", dry.proposal().proposal_id(),
                    R"("})"),
       &applied);
  appender.join();
  EXPECT_TRUE(appended);
  ASSERT_GT(applied.summary_chunk_id(), 0);
  v1::ExpandSummaryResponse chunk;
  Curl(*server_, "ExpandSummary",
       absl::StrCat(R"({"conversation_id": "two", "chunk_id": )", applied.summary_chunk_id(), "}"),
       &chunk);
  EXPECT_EQ(chunk.chunk().through_sequence(), dry.proposal().through_sequence());
  EXPECT_LT(chunk.chunk().through_sequence(), last_before);
  const v1::BuildContextResponse view = View(*server_, "two");
  EXPECT_EQ(view.entries(view.entries_size() - 1).content(), "more 4");
  // Applied again, on the first replica: the same answer, nothing stored.
  v1::ApplyCompactionResponse again;
  Curl(*server_, "ApplyCompaction",
       absl::StrCat(R"({"conversation_id": "two", "proposal_id": ")", dry.proposal().proposal_id(),
                    R"("})"),
       &again);
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.summary_chunk_id(), applied.summary_chunk_id());
}

}  // namespace
}  // namespace convstate
