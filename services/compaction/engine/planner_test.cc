#include "services/compaction/engine/planner.h"

#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

// The plan's step of `tier`; an empty one when it has none.
TierStep StepOf(const CompactionPlan& plan, Tier tier) {
  const TierStep* step = plan.Step(tier);
  return step != nullptr ? *step : TierStep{};
}

bool Summarizes(const CompactionPlan& plan) { return plan.Step(Tier::kSummarize) != nullptr; }

// The prune boundary of `s` once `plan` is carried out.
int64_t PruneBoundary(const CompactionPlan& plan, const ContextSnapshot& s) {
  const TierStep* step = plan.Step(Tier::kPrune);
  return step != nullptr ? step->sequence : s.conversation.prune_boundary;
}

// Builds conversations item by item; token counts are given, not computed.
class Builder {
 public:
  Builder& User(int64_t tokens, bool pinned = false) {
    return Add(Role::kUser, ItemKind::kMessage, tokens, "", "", pinned);
  }
  Builder& Assistant(int64_t tokens) {
    return Add(Role::kAssistant, ItemKind::kMessage, tokens, "", "", false);
  }
  Builder& Call(const std::string& id, const std::string& tool, int64_t tokens = 20) {
    return Add(Role::kAssistant, ItemKind::kToolCall, tokens, tool, id, false);
  }
  Builder& Result(const std::string& id, const std::string& tool, int64_t tokens) {
    return Add(Role::kTool, ItemKind::kToolResult, tokens, tool, id, false);
  }
  ContextSnapshot Build() const {
    ContextSnapshot s;
    s.conversation.last_sequence = static_cast<int64_t>(items_.size());
    s.live_items = items_;
    return s;
  }

 private:
  Builder& Add(Role role, ItemKind kind, int64_t tokens, const std::string& tool,
               const std::string& id, bool pinned) {
    Item item;
    item.sequence = static_cast<int64_t>(items_.size()) + 1;
    item.data.role = role;
    item.data.kind = kind;
    item.data.token_count = tokens;
    item.data.tool_name = tool;
    item.data.tool_call_id = id;
    item.data.pinned = pinned;
    item.data.content = absl::StrCat("item ", item.sequence);
    items_.push_back(item);
    return *this;
  }
  std::vector<Item> items_;
};

ModelProfile Small() {
  ModelProfile p;
  p.context_window = 4096;
  p.output_reserve = 256;
  p.token_floor = 0;
  p.recent_turns = 2;
  p.recent_tokens = 1500;
  p.tool_pruning.trigger_tokens = 1000;
  p.tool_pruning.keep_recent = 1;
  p.tool_pruning.min_savings_tokens = 100;
  // These tests count results; the token share is tested on its own.
  p.tool_pruning.keep_recent_fraction = 1.0;
  p.summarizer.max_chunk_tokens = 300;
  p.summarizer.chunk_budget_fraction = 0.15;
  return p;
}

PlanInput Input(const ContextSnapshot* snap, const ModelProfile& p, const Tokenizer* t) {
  PlanInput in;
  in.snapshot = snap;
  in.profile = p;
  in.tokenizer = t;
  return in;
}

TEST(BandTest, FractionsOfTheWindowAndTheFloor) {
  ModelProfile p = Small();
  EXPECT_EQ(BandOf(2000, p), Band::kNormal);
  EXPECT_EQ(BandOf(2867, p), Band::kSoft);      // 0.70 * 4096 = 2867
  EXPECT_EQ(BandOf(3276, p), Band::kHard);      // 0.80 * 4096 = 3276
  EXPECT_EQ(BandOf(3891, p), Band::kEmergency);  // 0.95 * 4096 = 3891
  p.token_floor = 5000;
  EXPECT_EQ(BandOf(3891, p), Band::kNormal);
}

TEST(SafeCutTest, NeverSplitsACallFromItsResult) {
  const ContextSnapshot s =
      Builder().User(10).Call("a", "ls").Result("a", "ls", 5).Call("b", "cat").User(10).Result("b", "cat", 5).Build();
  EXPECT_EQ(SafeCut(s.live_items, 6), 6u);
  EXPECT_EQ(SafeCut(s.live_items, 5), 3u);  // Call b's result is at index 5.
  EXPECT_EQ(SafeCut(s.live_items, 2), 1u);  // Call a's result is at index 2.
  // Parallel calls: a before b, results a then b. No cut between a call
  // and its result, including the one before call b.
  const ContextSnapshot parallel =
      Builder().User(10).Call("a", "ls").Call("b", "cat").Result("a", "ls", 5).Result("b", "cat", 5).Build();
  EXPECT_EQ(SafeCut(parallel.live_items, 5), 5u);
  EXPECT_EQ(SafeCut(parallel.live_items, 4), 1u);
  EXPECT_EQ(SafeCut(parallel.live_items, 3), 1u);
  // A call still waiting for its result cannot be cut after.
  const ContextSnapshot open = Builder().User(10).Call("x", "ls").Build();
  EXPECT_EQ(SafeCut(open.live_items, 2), 1u);
}

TEST(PlannerTest, NothingBelowTheHardBandWhenPlanningByBand) {
  auto tok = NewApproximateTokenizer();
  const ContextSnapshot s = Builder().User(1000).Assistant(1000).Build();
  const CompactionPlan plan = PlanCompaction(Input(&s, Small(), tok.get()), CompactionMode::kByBand);
  EXPECT_EQ(plan.band, Band::kNormal);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.tokens_before, 2256);
}

TEST(PlannerTest, PrunesOldToolResultsKeepingRecentAndKeptTools) {
  auto tok = NewApproximateTokenizer();
  ModelProfile p = Small();
  p.tool_pruning.keep_tools = {"memory"};
  const ContextSnapshot s = Builder()
                                .User(10)
                                .Call("1", "grep").Result("1", "grep", 600)
                                .Call("2", "memory").Result("2", "memory", 600)
                                .Call("3", "grep").Result("3", "grep", 600)
                                .Call("4", "grep").Result("4", "grep", 600)
                                .Build();
  const CompactionPlan plan = PlanCompaction(Input(&s, p, tok.get()), CompactionMode::kPruneOnly);
  EXPECT_EQ(StepOf(plan, Tier::kPrune).count, 2);      // 1 and 3; 4 is the most recent, 2 is kept.
  EXPECT_EQ(PruneBoundary(plan, s), 7);      // Result of call 3.
  EXPECT_GT(StepOf(plan, Tier::kPrune).tokens, 1000);
  ViewOptions options;
  options.prune_boundary = PruneBoundary(plan, s);
  options.tokenizer = tok.get();
  const ContextView view = AssembleView(s, p, false, {}, options);
  int pruned = 0;
  for (const ViewEntry& e : view.entries) {
    if (e.pruned) {
      ++pruned;
      EXPECT_NE(e.content.find("grep"), std::string::npos) << e.content;
    }
  }
  EXPECT_EQ(pruned, 2);
  EXPECT_EQ(view.status, ContextStatus::kPruned);
}

TEST(PlannerTest, RecentResultsAreKeptOnlyWithinTheirShareOfTheWindow) {
  auto tok = NewApproximateTokenizer();
  ModelProfile p = Small();
  p.tool_pruning.keep_recent = 3;
  p.tool_pruning.keep_recent_fraction = 0.2;  // 819 tokens of a 4,096 window.
  const ContextSnapshot s = Builder()
                                .User(10)
                                .Call("1", "grep").Result("1", "grep", 600)
                                .Call("2", "grep").Result("2", "grep", 600)
                                .Call("3", "grep").Result("3", "grep", 600)
                                .Build();
  const CompactionPlan plan = PlanCompaction(Input(&s, p, tok.get()), CompactionMode::kPruneOnly);
  // Three may stay by count, but only one fits the share: bulky output goes first.
  EXPECT_EQ(StepOf(plan, Tier::kPrune).count, 2);
  EXPECT_EQ(PruneBoundary(plan, s), 5);
}

TEST(PlannerTest, PruningThatSavesTooLittleIsSkipped) {
  auto tok = NewApproximateTokenizer();
  ModelProfile p = Small();
  p.tool_pruning.min_savings_tokens = 5000;
  const ContextSnapshot s =
      Builder().User(10).Call("1", "grep").Result("1", "grep", 600).Call("2", "grep").Result("2", "grep", 600).Build();
  const CompactionPlan plan = PlanCompaction(Input(&s, p, tok.get()), CompactionMode::kPruneOnly);
  EXPECT_EQ(StepOf(plan, Tier::kPrune).count, 0);
  EXPECT_EQ(PruneBoundary(plan, s), 0);
}

TEST(PlannerTest, SummarizesTheOldestZoneKeepingRecentTurns) {
  auto tok = NewApproximateTokenizer();
  const ContextSnapshot s = Builder()
                                .User(400).Assistant(400)      // turn 1: items 1-2
                                .User(400).Assistant(400)      // turn 2: items 3-4
                                .User(400).Assistant(400)      // turn 3: items 5-6
                                .User(350).Assistant(350)      // turn 4: items 7-8
                                .Build();
  // Ahead of need (the background), the hard band is enough.
  const CompactionPlan plan = PlanCompaction(Input(&s, Small(), tok.get()), CompactionMode::kAhead);
  EXPECT_EQ(plan.band, Band::kHard);  // 3100 + 256 reserve >= 0.8 * 4096
  ASSERT_TRUE(Summarizes(plan));
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).kept, 2);
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).sequence, 4);
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).tokens, 1600);
  EXPECT_LT(plan.projected_tokens, plan.tokens_before);
  EXPECT_FALSE(plan.actions.empty());
}

// On the call, a view that fits once old tool output is pruned keeps every
// turn verbatim: summaries replace only what would not fit.
TEST(PlannerTest, OnTheCallTheHardBandIsSummarizedUnderTheSoftBand) {
  auto tok = NewApproximateTokenizer();
  const ContextSnapshot hard = Builder()
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(350).Assistant(350)
                                   .Build();  // 3,356 of 4,096: hard band, fits.
  const ModelProfile p = Small();
  const CompactionPlan blocks = PlanCompaction(Input(&hard, p, tok.get()), CompactionMode::kByBand);
  EXPECT_EQ(blocks.band, Band::kHard);
  ASSERT_TRUE(Summarizes(blocks)) << "a view at the hard band is compacted before it is served";
  EXPECT_EQ(StepOf(blocks, Tier::kSummarize).sequence % 2, 0) << "cut inside a turn";
  EXPECT_LT(blocks.projected_tokens, Threshold(p, p.soft_threshold));
  // Below the hard band a call compacts nothing; the background does.
  const ContextSnapshot soft = Builder()
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(200).Assistant(200)
                                   .Build();
  const CompactionPlan waits = PlanCompaction(Input(&soft, p, tok.get()), CompactionMode::kByBand);
  EXPECT_EQ(waits.band, Band::kSoft);
  EXPECT_TRUE(waits.empty());
  const CompactionPlan ahead = PlanCompaction(Input(&soft, p, tok.get()), CompactionMode::kAhead);
  ASSERT_TRUE(Summarizes(ahead)) << "the background keeps the view under the soft band";
  EXPECT_LT(ahead.projected_tokens, Threshold(p, p.soft_threshold));
}

TEST(PlannerTest, ServingWhileTheBackgroundWorksWaitsForTheEmergencyBand) {
  auto tok = NewApproximateTokenizer();
  ModelProfile p = Small();
  p.hard_band_policy = HardBandPolicy::kServeWhileBackground;
  const ContextSnapshot hard = Builder()
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(350).Assistant(350)
                                   .Build();  // 3,356 of 4,096: hard band, fits.
  const CompactionPlan waits =
      PlanCompaction(Input(&hard, p, tok.get()), CompactionMode::kByBandBehindBackground);
  EXPECT_EQ(waits.band, Band::kHard);
  EXPECT_TRUE(waits.empty());
  // The background under this policy summarizes only past the hard band.
  const CompactionPlan ahead = PlanCompaction(Input(&hard, p, tok.get()), CompactionMode::kAhead);
  EXPECT_TRUE(Summarizes(ahead));
  EXPECT_LT(ahead.projected_tokens, Threshold(p, p.hard_threshold));
  EXPECT_GE(ahead.projected_tokens, Threshold(p, p.soft_threshold) - 260)
      << "summarized more than it takes to fit under the hard band";
  // What would still not fit is summarized, and no more than it takes to
  // land under the hard band with room for a turn.
  Builder b;
  for (int t = 0; t < 14; ++t) b.User(130).Assistant(130);  // 3,640 + 256: emergency band.
  const ContextSnapshot full = b.Build();
  p.recent_turns = 1;
  const CompactionPlan plan =
      PlanCompaction(Input(&full, p, tok.get()), CompactionMode::kByBandBehindBackground);
  EXPECT_EQ(plan.band, Band::kEmergency);
  ASSERT_TRUE(Summarizes(plan));
  EXPECT_LT(StepOf(plan, Tier::kSummarize).sequence, 26);
  EXPECT_GT(StepOf(plan, Tier::kSummarize).sequence, 2);
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).sequence % 2, 0) << "cut inside a turn";
  EXPECT_LT(plan.projected_tokens, Threshold(p, p.hard_threshold) - 260);
  EXPECT_GT(plan.projected_tokens, Threshold(p, p.soft_threshold) - 260)
      << "summarized more than it takes to fit";
}

// What a call adds after compaction (its recalled section) counts against
// the bands: a view that would reach the hard band with it is compacted,
// by the call or ahead of it by the background.
TEST(PlannerTest, ACallsHeadroomCountsAgainstTheBands) {
  auto tok = NewApproximateTokenizer();
  const ContextSnapshot soft = Builder()
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(400).Assistant(400)
                                   .User(300).Assistant(300)
                                   .Build();  // In the soft band, under the hard one.
  const ModelProfile p = Small();
  PlanInput in = Input(&soft, p, tok.get());
  const CompactionPlan without = PlanCompaction(in, CompactionMode::kByBand);
  ASSERT_EQ(without.band, Band::kSoft);
  EXPECT_TRUE(without.empty());
  in.headroom = Threshold(p, p.hard_threshold) - without.tokens_before;
  const CompactionPlan with = PlanCompaction(in, CompactionMode::kByBand);
  EXPECT_EQ(with.band, Band::kSoft) << "the band reported is the view's own";
  ASSERT_TRUE(Summarizes(with));
  EXPECT_LT(with.projected_tokens + in.headroom, Threshold(p, p.soft_threshold));
  // The background's compaction ahead of need makes that room too, so
  // that the next call need not: a view under the soft band that reaches
  // it with what a call adds is compacted ahead.
  const ContextSnapshot under = Builder()
                                    .User(400).Assistant(400)
                                    .User(400).Assistant(400)
                                    .User(300).Assistant(300)
                                    .Build();
  PlanInput ahead_in = Input(&under, p, tok.get());
  const CompactionPlan alone = PlanCompaction(ahead_in, CompactionMode::kAhead);
  ASSERT_EQ(alone.band, Band::kNormal);
  EXPECT_TRUE(alone.empty());
  ahead_in.headroom = Threshold(p, p.soft_threshold) - alone.tokens_before + 1;
  const CompactionPlan ahead = PlanCompaction(ahead_in, CompactionMode::kAhead);
  ASSERT_TRUE(Summarizes(ahead));
  EXPECT_LT(ahead.projected_tokens + ahead_in.headroom, Threshold(p, p.soft_threshold));
  // An idle conversation's compaction (kAuto) adds nothing after it.
  EXPECT_TRUE(PlanCompaction(ahead_in, CompactionMode::kAuto).empty());
}

TEST(PlannerTest, OnTheCallAViewThatFitsAfterPruningIsNotSummarized) {
  auto tok = NewApproximateTokenizer();
  // Old tool output goes first; the view then fits and nothing is summarized.
  const ContextSnapshot bulky = Builder()
                                    .User(300).Call("1", "grep").Result("1", "grep", 900)
                                    .Assistant(300)
                                    .User(300).Call("2", "grep").Result("2", "grep", 900)
                                    .Assistant(300)
                                    .User(300).Assistant(300)
                                    .Build();  // 3,900 + 256 reserve: past the emergency band.
  ModelProfile p = Small();
  p.tool_pruning.keep_recent = 0;
  p.tool_pruning.min_savings_tokens = 100;
  const CompactionPlan pruned = PlanCompaction(Input(&bulky, p, tok.get()), CompactionMode::kByBand);
  EXPECT_GT(StepOf(pruned, Tier::kPrune).count, 0);
  EXPECT_FALSE(Summarizes(pruned));
  EXPECT_LT(pruned.projected_tokens, Threshold(p, p.hard_threshold));
}

TEST(PlannerTest, SummarizesOnlyWhatBringsTheViewUnderTheSoftBand) {
  auto tok = NewApproximateTokenizer();
  ModelProfile p = Small();
  p.recent_turns = 1;
  Builder b;
  for (int t = 0; t < 12; ++t) b.User(130).Assistant(130);  // 3,120 tokens + 256 reserve.
  const ContextSnapshot s = b.Build();
  // Compact(auto), as an operator asks: back under the soft band.
  const CompactionPlan plan = PlanCompaction(Input(&s, p, tok.get()), CompactionMode::kAuto);
  EXPECT_EQ(plan.band, Band::kHard);
  ASSERT_TRUE(Summarizes(plan));
  // Everything but the last turn could go; only the oldest turns do, enough
  // to land under the soft band (2,867) with room for one more turn.
  EXPECT_LT(StepOf(plan, Tier::kSummarize).sequence, 22);
  EXPECT_GT(StepOf(plan, Tier::kSummarize).sequence, 2);
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).sequence % 2, 0) << "cut inside a turn";
  EXPECT_LT(plan.projected_tokens, Threshold(p, p.soft_threshold) - 260);
  // Compact(summarize) takes everything older than the recent buffer.
  const CompactionPlan all = PlanCompaction(Input(&s, p, tok.get()), CompactionMode::kSummarize);
  EXPECT_EQ(StepOf(all, Tier::kSummarize).sequence, 22);
}

TEST(PlannerTest, TruncationDropsTheOldestSummariesWhenLiveItemsAreNotEnough) {
  auto tok = NewApproximateTokenizer();
  ContextSnapshot s = Builder().User(100).Assistant(100).Build();
  for (int i = 0; i < 4; ++i) {
    SummaryChunk c;
    c.chunk_id = i + 1;
    c.from_sequence = i * 10 + 1;
    c.through_sequence = i * 10 + 9;
    c.token_count = 1100;
    s.active_chunks.push_back(c);
  }
  const ModelProfile p = Small();
  const PlanInput in = Input(&s, p, tok.get());
  const int64_t limit = Threshold(p, p.hard_threshold);
  const Truncation t = PlanTruncation(in, 0, limit);
  EXPECT_EQ(t.chunks, 2u);
  EXPECT_FALSE(t.ledger_budget.has_value());
  ViewOptions options;
  options.tokenizer = tok.get();
  options.truncate_before = t.before_sequence;
  options.truncate_chunks = t.chunks;
  const ContextView view = AssembleView(s, p, false, {}, options);
  EXPECT_LT(view.tokens.total, limit);
  EXPECT_EQ(view.status, ContextStatus::kTruncated);
  EXPECT_EQ(view.summaries_truncated, 2);
  // The newest summaries stay.
  int64_t first_chunk = 0;
  for (const ViewEntry& e : view.entries) {
    if (e.section == Section::kSummary && first_chunk == 0) first_chunk = e.summary_chunk_id;
  }
  EXPECT_EQ(first_chunk, 3);
}

TEST(PlannerTest, RecentBufferDegradesWhenItAloneIsTooLarge) {
  auto tok = NewApproximateTokenizer();
  const ContextSnapshot s = Builder()
                                .User(200).Assistant(200)
                                .User(200).Assistant(1400)   // turn 2: 1600 > recent cap
                                .User(300).Assistant(1300)   // turn 3: 1600
                                .Build();
  const CompactionPlan plan =
      PlanCompaction(Input(&s, Small(), tok.get()), CompactionMode::kSummarize);
  ASSERT_TRUE(Summarizes(plan));
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).kept, 0);  // Even one turn is over 1500 tokens.
  EXPECT_EQ(StepOf(plan, Tier::kSummarize).sequence, 6);
}

TEST(PlannerTest, SystemPromptLargerThanTheWindowCannotFit) {
  auto tok = NewApproximateTokenizer();
  ContextSnapshot s = Builder().User(10).Build();
  s.conversation.system_prompt = "x";
  s.conversation.system_prompt_tokens = 5000;
  const CompactionPlan plan = PlanCompaction(Input(&s, Small(), tok.get()), CompactionMode::kByBand);
  ASSERT_TRUE(plan.cannot_fit.has_value());
  EXPECT_EQ(plan.cannot_fit->rfind("system prompt (5000 tokens) does not fit", 0), 0u)
      << *plan.cannot_fit;
}

TEST(PlannerTest, FoldsChunksOverTheirBudget) {
  auto tok = NewApproximateTokenizer();
  ContextSnapshot s = Builder().User(400).Assistant(400).User(400).Assistant(400).User(300).Assistant(300).User(300).Assistant(300).Build();
  for (int i = 0; i < 3; ++i) {
    SummaryChunk c;
    c.chunk_id = i + 1;
    c.token_count = 300;
    s.active_chunks.push_back(c);
  }
  const CompactionPlan plan = PlanCompaction(Input(&s, Small(), tok.get()), CompactionMode::kAuto);
  EXPECT_EQ(StepOf(plan, Tier::kFold).chunks, (std::vector<int64_t>{1, 2, 3}));
}

// Random conversations, random windows: the planner's rules hold, and
// applying its plan (with summaries at their projected size, then view
// truncation) always yields a view that fits, or a cannot-fit outcome.
TEST(PlannerTest, RandomConversationsKeepEveryRule) {
  auto tok = NewApproximateTokenizer();
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 300; ++trial) {
    Builder b;
    const int turns = 1 + rng() % 25;
    int call = 0;
    for (int t = 0; t < turns; ++t) {
      b.User(10 + rng() % 400, rng() % 20 == 0);
      const int steps = rng() % 4;
      for (int k = 0; k < steps; ++k) {
        if (rng() % 2) {
          // One to three calls made in parallel, then their results.
          std::vector<std::pair<std::string, std::string>> calls;
          for (int p = 1 + rng() % 3; p > 0; --p) {
            calls.emplace_back(absl::StrCat("c", ++call), rng() % 3 ? "grep" : "keep_me");
            b.Call(calls.back().first, calls.back().second, 10 + rng() % 50);
          }
          for (const auto& [id, tool] : calls) {
            if (!(t == turns - 1 && k == steps - 1 && rng() % 3 == 0)) {
              b.Result(id, tool, 10 + rng() % 1500);
            }
          }
        } else {
          b.Assistant(10 + rng() % 600);
        }
      }
    }
    ContextSnapshot s = b.Build();
    s.conversation.system_prompt = "sys";
    s.conversation.system_prompt_tokens = rng() % 600;
    s.conversation.prune_boundary = rng() % 3 == 0 ? rng() % (s.live_items.size() + 1) : 0;
    // Any profile validation accepts: fractions and budgets at random.
    ModelProfile base = Small();
    base.recent_turns = rng() % 5;
    base.recent_tokens = 200 + rng() % 4000;
    base.tool_pruning.keep_tools = {"keep_me"};
    base.tool_pruning.keep_recent_fraction = 0.01 + (rng() % 100) / 100.0;
    base.summarizer.chunk_budget_fraction = 0.01 + (rng() % 98) / 100.0;
    base.summarizer.max_chunk_fraction = 0.01 + (rng() % 100) / 100.0;
    base.ledger.budget_fraction = 0.01 + (rng() % 100) / 100.0;
    base.ledger.constraints_fraction = 0.01 + (rng() % 100) / 100.0;
    base.soft_threshold = 0.3 + (rng() % 40) / 100.0;
    base.hard_threshold = base.soft_threshold + (rng() % 20) / 100.0;
    base.emergency_threshold = std::min(1.0, base.hard_threshold + (rng() % 20) / 100.0);
    ProfileOverrides o;
    o.context_window = 2000 + rng() % 20000;
    o.output_reserve = rng() % 1000;
    const ModelProfile p = ApplyOverrides(base, o);
    ASSERT_TRUE(ValidateProfile(p, "").ok()) << ValidateProfile(p, "");
    // Summaries already active, with facts and standing instructions, some
    // larger than their budget would allow.
    for (int c = rng() % 4; c > 0; --c) {
      SummaryChunk chunk;
      chunk.chunk_id = c;
      chunk.from_sequence = -100 * c;
      chunk.through_sequence = -100 * c + 50;
      chunk.token_count = 10 + rng() % 3000;
      for (int f = rng() % 30; f > 0; --f) {
        chunk.facts.push_back(LedgerFact{f, f, Role::kUser, absl::StrCat("fact ", c, "-", f),
                                         static_cast<int64_t>(5 + rng() % 40)});
      }
      for (int f = rng() % 3; f > 0; --f) {
        chunk.constraints.push_back(LedgerFact{f, f, Role::kUser,
                                               absl::StrCat("never ", c, "-", f),
                                               static_cast<int64_t>(5 + rng() % 60)});
      }
      s.active_chunks.push_back(chunk);
    }
    const PlanInput in = Input(&s, p, tok.get());
    const CompactionMode mode = rng() % 2 ? CompactionMode::kAuto : CompactionMode::kByBand;
    const CompactionPlan plan = PlanCompaction(in, mode);
    SCOPED_TRACE(absl::StrCat("trial ", trial));

    EXPECT_GE(PruneBoundary(plan, s), s.conversation.prune_boundary);
    if (plan.cannot_fit.has_value()) continue;
    if (Summarizes(plan)) {
      // No call in the summarized zone has its result outside it.
      std::set<std::string> results_inside;
      for (const Item& item : s.live_items) {
        if (item.sequence <= StepOf(plan, Tier::kSummarize).sequence && item.data.kind == ItemKind::kToolResult) {
          results_inside.insert(item.data.tool_call_id);
        }
      }
      for (const Item& item : s.live_items) {
        if (item.sequence <= StepOf(plan, Tier::kSummarize).sequence && item.data.kind == ItemKind::kToolCall) {
          EXPECT_TRUE(results_inside.count(item.data.tool_call_id)) << "call " << item.sequence;
        }
      }
    }
    // Apply: boundary, then the summary as a chunk of its projected size.
    ContextSnapshot after = s;
    after.conversation.prune_boundary = PruneBoundary(plan, s);
    if (Summarizes(plan)) {
      after.live_items.clear();
      for (const Item& item : s.live_items) {
        if (item.sequence > StepOf(plan, Tier::kSummarize).sequence) {
          after.live_items.push_back(item);
        } else if (item.data.pinned) {
          after.pinned_items.push_back(item);
        }
      }
      SummaryChunk chunk;
      chunk.chunk_id = 100;
      chunk.from_sequence = 1;
      chunk.through_sequence = StepOf(plan, Tier::kSummarize).sequence;
      chunk.token_count = std::min(p.summarizer.max_chunk_tokens, StepOf(plan, Tier::kSummarize).tokens / 4 + 64);
      after.active_chunks.push_back(chunk);
    }
    PlanInput in_after = Input(&after, p, tok.get());
    const int64_t limit = static_cast<int64_t>(p.hard_threshold * p.context_window);
    const Truncation t = PlanTruncation(in_after, after.conversation.prune_boundary, limit);
    ViewOptions options;
    options.tokenizer = tok.get();
    options.truncate_before = t.before_sequence;
    options.truncate_chunks = t.chunks;
    options.ledger_budget = t.ledger_budget;
    const ContextView view = AssembleView(after, p, false, {}, options);
    // Pinned items always survive.
    for (const Item& item : s.live_items) {
      if (!item.data.pinned) continue;
      bool found = false;
      for (const ViewEntry& e : view.entries) found |= e.sequence == item.sequence;
      EXPECT_TRUE(found) << "pinned item " << item.sequence << " lost";
    }
    // What truncation never removes: system prompt, pinned content and
    // standing instructions, the reserve. Whenever they leave room, the
    // view is under the hard threshold; it never exceeds the window unless
    // they alone do (the planner's cannot-fit case).
    const int64_t fixed = view.tokens.system + view.tokens.pinned + view.tokens.output_reserve;
    if (fixed < limit) {
      EXPECT_LT(view.tokens.total, limit);
    }
    if (fixed <= p.context_window) {
      EXPECT_LE(view.tokens.total, p.context_window);
    }
  }
}

// TruncationPoint subtracts counts instead of assembling a view per cut:
// it must pick the same, earliest safe cut as assembling views would.
TEST(PlannerTest, TruncationPointMatchesABruteForceSearch) {
  auto tok = NewApproximateTokenizer();
  std::mt19937 rng(77);
  for (int trial = 0; trial < 200; ++trial) {
    Builder b;
    int call = 0;
    const int turns = 1 + rng() % 12;
    for (int t = 0; t < turns; ++t) {
      b.User(10 + rng() % 300, rng() % 10 == 0);
      for (int k = rng() % 3; k > 0; --k) {
        const std::string id = absl::StrCat("c", ++call);
        b.Call(id, "grep", 10 + rng() % 40);
        if (rng() % 5) b.Result(id, "grep", 10 + rng() % 800);
      }
      b.Assistant(10 + rng() % 300);
    }
    ContextSnapshot s = b.Build();
    s.conversation.token_correction = 1.0 + (rng() % 5) / 10.0;
    ModelProfile p = Small();
    PlanInput in = Input(&s, p, tok.get());
    in.approximate = rng() % 2;
    const int64_t target = 500 + rng() % 3000;
    // Brute force: the first safe cut whose assembled view is under target.
    int64_t expected = -1;
    ViewOptions options;
    options.tokenizer = tok.get();
    if (AssembleView(s, p, in.approximate, {}, options).tokens.total < target) expected = 0;
    for (size_t i = 1; expected < 0 && i <= s.live_items.size(); ++i) {
      if (i < s.live_items.size() && SafeCut(s.live_items, i) != i) continue;
      options.truncate_before =
          i < s.live_items.size() ? s.live_items[i].sequence : s.live_items.back().sequence + 1;
      if (AssembleView(s, p, in.approximate, {}, options).tokens.total < target) {
        expected = options.truncate_before;
      }
    }
    if (expected < 0) expected = s.live_items.back().sequence + 1;
    EXPECT_EQ(TruncationPoint(in, 0, target), expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace convstate
