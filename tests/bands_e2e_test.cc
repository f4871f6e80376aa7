// The bands the API promises, end to end on a fresh server (its defaults,
// background compaction on) and a real database, through a client that
// knows only what reflection tells it (the Buf CLI, as grpcurl would): a
// gateway that drives a small window turn by turn gets every view that
// reaches the hard band compacted before it is served
// (CONTEXT_STATUS_SUMMARIZED right after the threshold is crossed, and the
// stream's compaction_started before its context); a conversation whose
// hard_band_policy serves while the background compacts gets the view as
// it stands, with its band and why; and a window shrunk without a reserve
// is not refused.

#include <string>

#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"

namespace convstate {
namespace {

using testing::BufOutput;
using testing::CurlConversationState;

// What users and assistants say in a support chat: a question, then an
// answer of a few sentences with a figure or two.
std::string Question(int turn) {
  return absl::StrCat("Turn ", turn, ": the cluster upgrade to 4.", 10 + turn,
                      " stalled again on node worker-", turn,
                      ". What should I check first, and is it safe to retry?");
}

std::string Answer(int turn) {
  return absl::StrCat(
      "For worker-", turn, " start with the machine config pool: if it reports degraded, the ",
      "node could not apply the rendered config. Check the kubelet journal on that node for ",
      "certificate or disk pressure errors, then look at the cluster operator conditions. ",
      "Retrying is safe once the pool is no longer degraded; drain the node first and keep ",
      "at least ", 2 + turn % 3, " replicas of each workload running while it reboots. ",
      "If the pool stays degraded after the retry, collect a must-gather archive and compare ",
      "the rendered config of worker-", turn, " with the one its pool expects: a mismatch ",
      "usually means a machine config was edited by hand. Roll that edit back, wait for the ",
      "pool to settle, and only then resume the upgrade from the console or with the CLI.");
}

class BandsE2eTest : public testing::E2eTest {
 protected:
  // `method` through buf curl, its answer parsed into `out`; fails the
  // test if the call fails.
  void Call(const std::string& method, const std::string& json, google::protobuf::Message* out) {
    ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
    const BufOutput answer = CurlConversationState(server_->address(), method, json);
    ASSERT_EQ(answer.exit_code, 0) << method << ": " << answer.out;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(answer.out, out, lenient).ok())
        << answer.out;
  }

  static std::string UserItem(const std::string& text) {
    return absl::StrCat(R"({"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": ")", text,
                        R"("})");
  }
  static std::string AssistantItem(const std::string& text) {
    return absl::StrCat(R"({"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_MESSAGE", "content": ")",
                        text, R"("})");
  }
};

TEST_F(BandsE2eTest, AViewAtTheHardBandIsSummarizedBeforeItIsServed) {
  StartServer();  // The server's defaults: background compaction on.
  v1::Conversation created;
  Call("CreateConversation", R"({
    "conversation_id": "small-window", "model": "gpt-4o",
    "system_prompt": "You are an OpenShift support assistant.",
    "profile_overrides": {"context_window": 1200, "soft_threshold": 0.5, "hard_threshold": 0.6}
  })", &created);
  // Only the window was given: the reserve scales with it.
  v1::InspectContextResponse inspected;
  Call("InspectContext", R"({"conversation_id": "small-window"})", &inspected);
  EXPECT_EQ(inspected.thresholds().hard(), 720);
  EXPECT_LE(inspected.tokens().output_reserve(), 300) << "more than a quarter of the window";
  EXPECT_GT(inspected.tokens().output_reserve(), 0);

  // Three turns stored before the next call: the view crosses the hard
  // threshold with no call in between that could have started the
  // background.
  for (int turn = 1; turn <= 3; ++turn) {
    v1::AppendTurnResponse appended;
    Call("AppendTurn",
         absl::StrCat(R"({"conversation_id": "small-window", "idempotency_key": "turn-)", turn,
                      R"(", "items": [)", UserItem(Question(turn)), ", ",
                      AssistantItem(Answer(turn)), "]}"),
         &appended);
  }
  int blocking = 0, over_hard = 0;
  for (int turn = 4; turn <= 10; ++turn) {
    const std::string pending = UserItem(Question(turn));
    v1::InspectContextResponse before;
    Call("InspectContext",
         absl::StrCat(R"({"conversation_id": "small-window", "pending_input": [)", pending, "]}"),
         &before);
    if (turn == 4) ASSERT_GE(before.band(), v1::BAND_HARD) << before.tokens().total() << " tokens";
    const BufOutput stream = CurlConversationState(
        server_->address(), "StreamBuildContext",
        absl::StrCat(R"({"conversation_id": "small-window", "pending_input": [)", pending, "]}"));
    ASSERT_EQ(stream.exit_code, 0) << stream.out;
    const size_t context_at = stream.out.find("\"context\"");
    ASSERT_NE(context_at, std::string::npos) << stream.out;
    // The last event is the context: parse it alone.
    const size_t open = stream.out.rfind("\n{", context_at);
    v1::BuildContextEvent last;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    stream.out.substr(open == std::string::npos ? 0 : open + 1), &last, lenient)
                    .ok())
        << stream.out;
    const v1::BuildContextResponse& view = last.context();
    SCOPED_TRACE(absl::StrCat("turn ", turn, ": ", before.tokens().total(),
                              " tokens before the call, ", view.tokens().total(), " served"));
    // Whatever the background did meanwhile, a view at the hard band is
    // served only when compaction cannot bring it lower, and says why (in
    // a window this small, summaries and the fact ledger alone can take
    // the room between the recent turn and the hard threshold).
    if (view.tokens().total() >= 720) {
      ++over_hard;
      EXPECT_GE(view.band(), v1::BAND_HARD);
      EXPECT_NE(view.band_reason().find("compaction cannot bring the view under"),
                std::string::npos)
          << view.band_reason();
      EXPECT_LT(view.tokens().total(), before.tokens().total()) << "nothing was compacted";
    } else {
      EXPECT_LT(view.band(), v1::BAND_HARD);
      EXPECT_EQ(view.band_reason(), "");
    }
    const size_t started_at = stream.out.find("\"compactionStarted\"");
    if (started_at != std::string::npos) {
      ++blocking;
      EXPECT_LT(started_at, context_at) << "compaction_started after the context";
    }
    if (turn == 4) {
      // Right after the threshold was crossed: compacted on this call,
      // and the stream said so first.
      ASSERT_NE(started_at, std::string::npos) << "no compaction_started: " << stream.out;
      EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
      EXPECT_LT(view.tokens().total(), 720);
    }
    v1::AppendTurnResponse appended;
    Call("AppendTurn",
         absl::StrCat(R"({"conversation_id": "small-window", "idempotency_key": "turn-)", turn,
                      R"(", "items": [)", pending, ", ", AssistantItem(Answer(turn)), "]}"),
         &appended);
  }
  EXPECT_GE(blocking, 1);
  EXPECT_LT(over_hard, 7) << "no view of this conversation was brought under the hard band";
  v1::BuildContextResponse final_view;
  Call("BuildContext", R"({"conversation_id": "small-window"})", &final_view);
  EXPECT_EQ(final_view.context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
}

TEST_F(BandsE2eTest, ServingWhileTheBackgroundCompactsSaysSo) {
  StartServer();
  v1::Conversation created;
  Call("CreateConversation", R"({
    "conversation_id": "latency-first", "model": "gpt-4o",
    "profile_overrides": {"context_window": 1200, "soft_threshold": 0.5, "hard_threshold": 0.6,
                          "hard_band_policy": "HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND"}
  })", &created);
  EXPECT_EQ(created.profile_overrides().hard_band_policy(),
            v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND);
  // Four turns appended at once: the view is in the hard band, below the
  // emergency one.
  for (int turn = 1; turn <= 4; ++turn) {
    v1::AppendTurnResponse appended;
    Call("AppendTurn",
         absl::StrCat(R"({"conversation_id": "latency-first", "items": [)",
                      UserItem(Question(turn)), ", ", AssistantItem(Answer(turn)), "]}"),
         &appended);
  }
  v1::InspectContextResponse before;
  Call("InspectContext", R"({"conversation_id": "latency-first"})", &before);
  ASSERT_EQ(before.band(), v1::BAND_HARD) << before.tokens().total() << " tokens";
  v1::BuildContextResponse view;
  Call("BuildContext", R"({"conversation_id": "latency-first"})", &view);
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
  EXPECT_EQ(view.band(), v1::BAND_HARD);
  EXPECT_NE(view.band_reason().find("SERVE_WHILE_BACKGROUND"), std::string::npos)
      << view.band_reason();
}

TEST_F(BandsE2eTest, AShrunkWindowWithoutAReserveIsNotRefused) {
  StartServer();
  v1::Conversation created;
  Call("CreateConversation", R"({
    "conversation_id": "shrunk", "model": "gpt-4o",
    "profile_overrides": {"context_window": 4096}
  })", &created);
  v1::InspectContextResponse inspected;
  Call("InspectContext", R"({"conversation_id": "shrunk"})", &inspected);
  EXPECT_EQ(inspected.tokens().context_window(), 4096);
  EXPECT_EQ(inspected.tokens().output_reserve(), 524);  // 16,384 of 128,000, scaled.
  // An explicit reserve that leaves no room is still refused, naming it.
  const BufOutput refused = CurlConversationState(server_->address(), "CreateConversation", R"({
    "conversation_id": "no-room", "model": "gpt-4o",
    "profile_overrides": {"context_window": 4096, "output_reserve": 16384}
  })", /*with_errors=*/true);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("output_reserve"), std::string::npos) << refused.out;
}

}  // namespace
}  // namespace convstate
