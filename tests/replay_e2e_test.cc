// The fidelity replay, short: the first turns of the on-call conversation
// through a real server and PostgreSQL at an 8k window, where it already
// takes several summary compactions. Checks what tools/replay reports in
// full: the view keeps more planted facts than a FIFO window over the same
// items, the standing instruction is in every view after it was given, no
// view exceeds the window or holds invalid UTF-8, and no call fails.

#include <algorithm>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tests/server_process.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

// The RECALLED section's budget under the default profile: 5% of the
// window, and at least recall.min_tokens (640) up to a tenth of it.
int64_t RecallBudget(int64_t window) {
  return std::max(window * 5 / 100, std::min<int64_t>(640, window / 10));
}

using testing::ScratchDatabase;
using testing::ServerProcess;

TEST(ReplayE2eTest, ShortReplayKeepsMoreFactsThanFifoAndTheInstructionEverywhere) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  // Compactions in line with the calls, so that every run is the same.
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto conversation = replay::Load(ServerProcess::RunfilePath("tools/replay_data/oncall.jsonl"),
                                   ServerProcess::RunfilePath("tools/replay_data/oncall_facts.jsonl"),
                                   ServerProcess::RunfilePath("tools/replay_data/oncall_probes.jsonl"));
  ASSERT_TRUE(conversation.ok()) << conversation.status();
  ASSERT_GE(conversation->turns(), 50);
  ASSERT_GE(conversation->facts.size(), 50u);

  replay::Options options;
  options.target = (*server)->address();
  options.window = 8192;
  options.max_turns = 30;
  auto r = replay::Run(*conversation, options);
  ASSERT_TRUE(r.ok()) << r.status();
  SCOPED_TRACE(replay::Report({*r}));

  EXPECT_TRUE(r->errors.empty());
  EXPECT_EQ(r->views_over_window, 0);
  EXPECT_EQ(r->views_invalid_utf8, 0);
  EXPECT_GE(r->chunks_written - r->folds, 4) << "the short replay should summarize at least 4 times";
  // The rule given at turn 2 is in every view after it.
  EXPECT_GT(r->instruction_views, 20);
  EXPECT_EQ(r->instruction_kept, r->instruction_views);
  // More of the conversation's facts than truncation keeps, and most of
  // what the user and the assistant said.
  EXPECT_GT(r->facts.present(), r->fifo_facts.present());
  EXPECT_GE(r->facts.message * 10, r->facts.message_total * 8);
  // Never fewer facts than FIFO, at any probe turn or at the end.
  for (const std::string& loss : replay::LossesToFifo(*r)) ADD_FAILURE() << loss;
  // Right after each compaction the view is back under the hard band:
  // additive chunks and a budgeted ledger, not a growing rolling summary.
  ASSERT_FALSE(r->tokens_after_compaction.empty());
  for (int64_t tokens : r->tokens_after_compaction) EXPECT_LT(tokens, 8192 * 8 / 10);
}

// The long conversation (rules inside longer messages, facts stated once):
// at 8k and 32k, the view never keeps fewer facts than FIFO at a probe turn
// or at the end, and every rule is in every view after it was given.
TEST(ReplayE2eTest, LongReplayNeverLosesToFifoAndKeepsEveryRule) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto conversation =
      replay::Load(ServerProcess::RunfilePath("tools/replay_data/migration.jsonl"),
                   ServerProcess::RunfilePath("tools/replay_data/migration_facts.jsonl"),
                   ServerProcess::RunfilePath("tools/replay_data/migration_probes.jsonl"));
  ASSERT_TRUE(conversation.ok()) << conversation.status();
  ASSERT_GE(conversation->turns(), 120);
  for (int64_t window : {8192, 32768}) {
    replay::Options options;
    options.target = (*server)->address();
    options.window = window;
    auto r = replay::Run(*conversation, options);
    ASSERT_TRUE(r.ok()) << r.status();
    SCOPED_TRACE(replay::Report({*r}));
    EXPECT_TRUE(r->errors.empty());
    EXPECT_EQ(r->views_over_window, 0);
    EXPECT_EQ(r->instructions.size(), 3u);
    for (const auto& in : r->instructions) {
      EXPECT_EQ(in.kept, in.views) << "the rule of turn " << in.turn;
      EXPECT_TRUE(in.in_final_view) << "the rule of turn " << in.turn;
    }
    EXPECT_GE(r->probes.size(), 4u);
    for (const std::string& loss : replay::LossesToFifo(*r)) ADD_FAILURE() << loss;
    // The questions about old tool output: the RECALLED section brings the
    // asked-for facts back (FIFO has none of them), within its budget.
    int asked = 0, found = 0;
    for (const auto& q : r->recalls) {
      asked += q.asked;
      found += q.in_view;
      EXPECT_LE(q.recalled_tokens, RecallBudget(window)) << "turn " << q.turn;
    }
    EXPECT_EQ(asked, 12);
    EXPECT_GE(found * 10, asked * 8) << found << " of " << asked << " asked-for facts recalled";
  }
}

// Asked-for facts in the view across a replay's recall questions.
struct RecallCount {
  int asked = 0;
  int found = 0;
};

// Loads tools/replay_data's `name` conversation with `probes`, replays it
// at `window` on `target`, and checks what every recall replay holds to:
// no error, no loss to FIFO (nor a standing rule lost), nothing recalled
// for the unrelated question, recall within 5% of the window. Returns the
// asked-for facts found in the view.
RecallCount ReplayRecall(const std::string& target, const std::string& name,
                         const std::string& probes, int64_t window) {
  RecallCount count;
  auto conversation = replay::Load(
      ServerProcess::RunfilePath("tools/replay_data/" + name + ".jsonl"),
      ServerProcess::RunfilePath("tools/replay_data/" + name + "_facts.jsonl"),
      ServerProcess::RunfilePath(probes));
  EXPECT_TRUE(conversation.ok()) << conversation.status();
  if (!conversation.ok()) return count;
  EXPECT_GE(conversation->turns(), 120);
  replay::Options options;
  options.target = target;
  options.window = window;
  auto r = replay::Run(*conversation, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return count;
  SCOPED_TRACE(replay::Report({*r}));
  EXPECT_TRUE(r->errors.empty());
  for (const std::string& loss : replay::LossesToFifo(*r)) ADD_FAILURE() << loss;
  for (const auto& q : r->recalls) {
    count.asked += q.asked;
    count.found += q.in_view;
    if (q.asked == 0) {
      EXPECT_EQ(q.recalled_tokens, 0) << "turn " << q.turn << ": unrelated";
    }
    EXPECT_LE(q.recalled_tokens, RecallBudget(window)) << "turn " << q.turn;
  }
  std::printf("%s at %lld: %d of %d asked-for facts in the view\n", probes.c_str(),
              static_cast<long long>(window), count.found, count.asked);
  return count;
}

// The platform programme (tool outputs whose lines do not name their
// subject, questions in other words than the stored text): at 8k, 16k and
// 32k, the view never loses to FIFO, no view is above the hard band, and
// the RECALLED section holds the asked-for tool facts: at least 80% of the
// tuning questions', and of the held-out ones (never tuned with) what the
// ranking finds today (12 of 16 at 8k, 14 at 16k and 32k: BENCHMARKS.md,
// "Recall"), so that it does not fall back; the unrelated question adds
// nothing.
TEST(ReplayE2eTest, PlatformReplayRecallsWhatTheUserMeans) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (int64_t window : {8192, 16384, 32768}) {
    const RecallCount tuning = ReplayRecall((*server)->address(), "platform",
                                            "tools/replay_data/platform_probes.jsonl", window);
    EXPECT_GE(tuning.found * 10, tuning.asked * 8)
        << tuning.found << " of " << tuning.asked << " at " << window;
    const RecallCount held_out = ReplayRecall(
        (*server)->address(), "platform", "tools/replay_data/platform_heldout_probes.jsonl", window);
    EXPECT_GE(held_out.found, window == 8192 ? 12 : 14)
        << held_out.found << " of " << held_out.asked << " at " << window;
  }
}

// The coding session (source files, test runs, git output and deployment
// configs whose value lines do not name their component; questions in the
// developer's own words): at 8k, 16k and 32k, with the tuning questions and
// the held-out ones, the view never loses to FIFO, keeps both standing
// rules, the unrelated question adds nothing, and recall finds at least 9
// of each set's 11 asked-for tool facts (80%; 10 today).
TEST(ReplayE2eTest, CodingReplayRecallsWhatTheDeveloperMeans) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (const char* probes : {"tools/replay_data/coding_probes.jsonl",
                             "tools/replay_data/coding_heldout_probes.jsonl"}) {
    for (int64_t window : {8192, 16384, 32768}) {
      const RecallCount c = ReplayRecall((*server)->address(), "coding", probes, window);
      EXPECT_GE(c.found, 9) << c.found << " of " << c.asked << " at " << window;
    }
  }
}

// The analytics engineer's day (Airflow, dbt, Spark, Kafka and Terraform
// outputs whose value lines do not name their DAG, model or topic; chatty
// questions with asides, abbreviations, durations and times of day): at
// 8k, 16k and 32k, the view never loses to FIFO, the unrelated question
// adds nothing, recall finds at least 80% of the tuning questions' facts,
// and of the held-out ones what it finds today (7 of 16 at 8k, 9 at 16k
// and 32k; the aim is 80%, not reached: BENCHMARKS.md, "Recall"), so that
// it does not fall back.
TEST(ReplayE2eTest, AnalyticsReplayRecallsWhatTheEngineerMeans) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (int64_t window : {8192, 16384, 32768}) {
    const RecallCount tuning = ReplayRecall((*server)->address(), "analytics",
                                            "tools/replay_data/analytics_probes.jsonl", window);
    EXPECT_GE(tuning.found * 10, tuning.asked * 8)
        << tuning.found << " of " << tuning.asked << " at " << window;
    const RecallCount held_out =
        ReplayRecall((*server)->address(), "analytics",
                     "tools/replay_data/analytics_heldout_probes.jsonl", window);
    EXPECT_GE(held_out.found, window == 8192 ? 7 : 9)
        << held_out.found << " of " << held_out.asked << " at " << window;
  }
}

// The ML platform engineer's day (training logs, Hydra configs, GPU and
// NCCL diagnostics, listings, Prometheus and cost tables), written apart
// from the ranking by another hand: recall finds what it finds today (11,
// 13 and 13 of the 15 tuning questions' facts; 5, 5 and 6 of the 16
// held-out ones, never looked at: far from the 80% aimed at, BENCHMARKS.md,
// "Recall"), so that it does not fall back; the unrelated question adds
// nothing.
TEST(ReplayE2eTest, MlopsReplayRecallsWhatTheEngineerMeans) {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::StartServerOn(**db, {"--background_compaction=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  for (int64_t window : {8192, 16384, 32768}) {
    const RecallCount tuning = ReplayRecall((*server)->address(), "mlops",
                                            "tools/replay_data/mlops_probes.jsonl", window);
    EXPECT_GE(tuning.found, window == 8192 ? 11 : 13)
        << tuning.found << " of " << tuning.asked << " at " << window;
    const RecallCount held_out = ReplayRecall(
        (*server)->address(), "mlops", "tools/replay_data/mlops_heldout_probes.jsonl", window);
    EXPECT_GE(held_out.found, 5) << held_out.found << " of " << held_out.asked << " at " << window;
  }
}

}  // namespace
}  // namespace convstate
