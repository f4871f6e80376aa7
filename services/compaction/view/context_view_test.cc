#include "services/compaction/view/context_view.h"

#include "services/compaction/ledger/ledger.h"
#include "services/tokenizer/tokens.h"

#include "gtest/gtest.h"

namespace convstate {
namespace {

Item MakeItem(int64_t seq, Role role, ItemKind kind, const std::string& text, int64_t tokens,
              bool pinned = false) {
  Item item;
  item.sequence = seq;
  item.data.role = role;
  item.data.kind = kind;
  item.data.content = text;
  item.data.token_count = tokens;
  item.data.pinned = pinned;
  return item;
}

TEST(AssembleViewTest, OrdersSectionsAndSumsStoredCounts) {
  ContextSnapshot snap;
  snap.conversation.version = 7;
  snap.conversation.system_prompt = "12345678";
  snap.conversation.system_prompt_tokens = 6;  // Stored at creation, not recounted.
  snap.conversation.pinned_instructions = "abcd";
  snap.conversation.pinned_instructions_tokens = 5;
  snap.pinned_items.push_back(MakeItem(1, Role::kUser, ItemKind::kMessage, "pin", 11, true));
  SummaryChunk chunk;
  chunk.chunk_id = 3;
  chunk.text = "summary";
  chunk.token_count = 20;
  snap.active_chunks.push_back(chunk);
  snap.live_items.push_back(MakeItem(5, Role::kUser, ItemKind::kSummaryMarker, "", 0));
  // Stored counts are used as they are: 100 is not what "hi" would count.
  snap.live_items.push_back(MakeItem(6, Role::kUser, ItemKind::kMessage, "hi", 100));
  snap.live_items.push_back(MakeItem(7, Role::kAssistant, ItemKind::kMessage, "yo", 50));
  ItemData pending;
  pending.role = Role::kUser;
  pending.content = "next";
  pending.token_count = 9;
  ModelProfile profile;
  profile.context_window = 1000;
  profile.output_reserve = 30;

  ContextView view = AssembleView(snap, profile, /*approximate=*/true, {pending});
  EXPECT_EQ(view.version, 7);
  ASSERT_EQ(view.entries.size(), 7u);
  EXPECT_EQ(view.entries[0].section, Section::kSystem);
  EXPECT_EQ(view.entries[1].section, Section::kPinned);
  EXPECT_EQ(view.entries[1].content, "abcd");
  EXPECT_EQ(view.entries[2].sequence, 1);
  EXPECT_EQ(view.entries[3].section, Section::kSummary);
  EXPECT_EQ(view.entries[3].summary_chunk_id, 3);
  EXPECT_EQ(view.entries[4].sequence, 6);
  EXPECT_EQ(view.entries[5].sequence, 7);
  EXPECT_EQ(view.entries[6].section, Section::kPending);

  EXPECT_EQ(view.tokens.system, 6);
  EXPECT_EQ(view.tokens.pinned, 5 + 11);
  EXPECT_EQ(view.tokens.summaries, 20);
  EXPECT_EQ(view.tokens.live, 150);
  EXPECT_EQ(view.tokens.pending, 9);
  EXPECT_EQ(view.tokens.output_reserve, 30);
  EXPECT_EQ(view.tokens.context_window, 1000);
  EXPECT_EQ(view.tokens.total, 6 + 16 + 20 + 150 + 9 + 30);
  EXPECT_TRUE(view.tokens.approximate);
  EXPECT_EQ(view.status, ContextStatus::kSummarized);
}

TEST(AssembleViewTest, ApproximateCountsFollowTheCorrectionFactor) {
  ContextSnapshot snap;
  snap.conversation.token_correction = 1.5;
  snap.live_items.push_back(MakeItem(1, Role::kUser, ItemKind::kMessage, "a", 10));
  snap.live_items.push_back(MakeItem(2, Role::kAssistant, ItemKind::kMessage, "b", 3));
  ModelProfile profile;
  profile.output_reserve = 100;
  ContextView approx = AssembleView(snap, profile, /*approximate=*/true, {});
  EXPECT_EQ(approx.entries[0].token_count, 15);
  EXPECT_EQ(approx.entries[1].token_count, 5);  // 4.5 rounds up.
  EXPECT_EQ(approx.tokens.live, 20);
  EXPECT_EQ(approx.tokens.total, 120);  // The reserve is not an estimate.
  // Exact tokenizers are never scaled.
  ContextView exact = AssembleView(snap, profile, /*approximate=*/false, {});
  EXPECT_EQ(exact.tokens.live, 13);
  EXPECT_FALSE(exact.tokens.approximate);
}

TEST(AssembleViewTest, EmptyConversationIsFullAndCostsOnlyTheReserve) {
  ModelProfile profile;
  ContextView view = AssembleView(ContextSnapshot{}, profile, /*approximate=*/true, {});
  EXPECT_TRUE(view.entries.empty());
  EXPECT_EQ(view.status, ContextStatus::kFull);
  EXPECT_EQ(view.tokens.total, profile.output_reserve);
}

TEST(TokensTest, ApproximateCountRoundsUp) {
  auto tokenizer = NewApproximateTokenizer(4.0);
  EXPECT_EQ(tokenizer->CountTokens(""), 0);
  EXPECT_EQ(tokenizer->CountTokens("a"), 1);
  EXPECT_EQ(tokenizer->CountTokens("abcd"), 1);
  EXPECT_EQ(tokenizer->CountTokens("abcde"), 2);
  ItemData call;
  call.content = "abcdefgh";
  call.tool_name = "grep";
  call.tool_call_id = "c1";
  EXPECT_EQ(CountItemTokens(*tokenizer, call, /*per_message=*/3), 3 + 2 + 1 + 1);
  EXPECT_EQ(CountSystemTokens(*tokenizer, "", 3), 0);
  EXPECT_EQ(CountSystemTokens(*tokenizer, "abcd", 3), 4);
}

TEST(ProfileTest, OverridesReplaceOnlyWhatIsSet) {
  ProfileOverrides o;
  o.context_window = 4096;
  o.output_reserve = 512;
  o.recent_turns = 2;
  ModelProfile p = ApplyOverrides(ModelProfile{}, o);
  EXPECT_EQ(p.context_window, 4096);
  EXPECT_EQ(p.output_reserve, 512);
  EXPECT_EQ(p.recent_turns, 2);
  EXPECT_EQ(p.soft_threshold, ModelProfile{}.soft_threshold);
  EXPECT_TRUE(ValidateProfile(p, "").ok());
}

TEST(ProfileTest, SizesScaleDownWithTheWindow) {
  ProfileOverrides o;
  o.context_window = 4096;
  const ModelProfile small = ApplyOverrides(ModelProfile{}, o);
  EXPECT_EQ(small.recent_tokens, 1024);                   // 0.25 of the window, not 8,000.
  EXPECT_EQ(small.tool_pruning.trigger_tokens, 409);      // 0.10, not 20,000.
  EXPECT_EQ(small.tool_pruning.min_savings_tokens, 81);   // 0.02, not 2,000.
  EXPECT_EQ(small.summarizer.max_chunk_tokens, 163);      // 0.04, not 2,000.
  // A large window keeps the absolute caps.
  o.context_window = 1'000'000;
  const ModelProfile large = ApplyOverrides(ModelProfile{}, o);
  EXPECT_EQ(large.recent_tokens, ModelProfile{}.recent_tokens);
  EXPECT_EQ(large.summarizer.max_chunk_tokens, ModelProfile{}.summarizer.max_chunk_tokens);
}

TEST(ProfileTest, InconsistentProfilesNameTheField) {
  ModelProfile p;
  p.output_reserve = p.context_window;
  absl::Status s = ValidateProfile(p, "profile_overrides.");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("profile_overrides.output_reserve"), absl::string_view::npos) << s;

  p = ModelProfile{};
  p.soft_threshold = 0.9;
  s = ValidateProfile(p, "");
  EXPECT_NE(s.message().find("soft_threshold"), absl::string_view::npos) << s;

  p = ModelProfile{};
  p.emergency_threshold = 1.5;
  s = ValidateProfile(p, "");
  EXPECT_NE(s.message().find("emergency_threshold"), absl::string_view::npos) << s;
}

ContextSnapshot CacheSnapshot(int live_items) {
  ContextSnapshot snap;
  snap.conversation.system_prompt = "You are terse.";
  snap.conversation.system_prompt_tokens = 4;
  snap.conversation.prune_boundary = 3;
  SummaryChunk chunk;
  chunk.chunk_id = 1;
  chunk.text = "earlier: the deploy failed";
  chunk.token_count = 6;
  snap.active_chunks.push_back(chunk);
  for (int i = 0; i < live_items; ++i) {
    snap.live_items.push_back(MakeItem(2 + i, i % 2 ? Role::kAssistant : Role::kUser,
                                       ItemKind::kMessage, "turn " + std::to_string(i), 3));
  }
  return snap;
}

TEST(DigestViewTest, BreakpointsSitAfterEachStablePartAndKeepTheirHashAsTurnsGrow) {
  ModelProfile profile;
  const ContextSnapshot small = CacheSnapshot(4);
  const ContextView view = AssembleView(small, profile, false, {});
  const ViewDigest digest = DigestView(view, small.conversation.prune_boundary);
  ASSERT_EQ(digest.breakpoints.size(), 3u);
  EXPECT_EQ(digest.breakpoints[0].kind, CacheBreakpointKind::kPinned);
  EXPECT_EQ(digest.breakpoints[0].last_entry, 0);
  EXPECT_EQ(digest.breakpoints[0].prefix_tokens, 4);
  EXPECT_EQ(digest.breakpoints[1].kind, CacheBreakpointKind::kSummaries);
  EXPECT_EQ(digest.breakpoints[1].last_entry, 1);
  EXPECT_EQ(digest.breakpoints[2].kind, CacheBreakpointKind::kPruneBoundary);
  EXPECT_EQ(view.entries[digest.breakpoints[2].last_entry].sequence, 3);
  EXPECT_EQ(digest.view_hash.size(), 64u);

  // More turns: every prefix hash stays, the whole view's hash does not.
  const ContextSnapshot larger = CacheSnapshot(9);
  const ViewDigest grown = DigestView(AssembleView(larger, profile, false, {}), 3);
  ASSERT_EQ(grown.breakpoints.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(grown.breakpoints[i].prefix_hash, digest.breakpoints[i].prefix_hash) << i;
  }
  EXPECT_NE(grown.view_hash, digest.view_hash);
  EXPECT_EQ(FirstInvalidated(digest.breakpoints, AssembleView(larger, profile, false, {})),
            CacheBreakpointKind::kUnspecified);

  // A new summary changes the prefix from the summaries on.
  ContextSnapshot summarized = larger;
  summarized.active_chunks[0].text = "earlier: the deploy failed, then was rolled back";
  const ViewDigest changed = DigestView(AssembleView(summarized, profile, false, {}), 3);
  EXPECT_EQ(changed.breakpoints[0].prefix_hash, digest.breakpoints[0].prefix_hash);
  EXPECT_EQ(FirstInvalidated(digest.breakpoints, AssembleView(summarized, profile, false, {})),
            CacheBreakpointKind::kSummaries);
  // Pruning further on keeps what came before it: nothing is invalidated.
  ContextSnapshot pruned = larger;
  pruned.live_items[4].data.kind = ItemKind::kToolResult;
  pruned.live_items[4].data.role = Role::kTool;
  const ContextView before_prune = AssembleView(pruned, profile, false, {});
  const ViewDigest at3 = DigestView(before_prune, 3);
  ContextView after_prune = before_prune;
  after_prune.entries[6].content = "[pruned]";
  after_prune.entries[6].pruned = true;
  EXPECT_EQ(FirstInvalidated(at3.breakpoints, after_prune), CacheBreakpointKind::kUnspecified);
  // A view shorter than a prefix has lost it.
  ContextView cut = before_prune;
  cut.entries.resize(2);
  EXPECT_EQ(FirstInvalidated(at3.breakpoints, cut), CacheBreakpointKind::kPruneBoundary);
}

TEST(DigestViewTest, TheHashCoversEveryFieldOfTheEncodingButNotTokenCounts) {
  ModelProfile profile;
  const ContextSnapshot snap = CacheSnapshot(2);
  const ContextView base = AssembleView(snap, profile, false, {});
  const std::string hash = DigestView(base, 0).view_hash;
  ContextView recounted = base;
  recounted.entries[2].token_count += 10;
  EXPECT_EQ(DigestView(recounted, 0).view_hash, hash);
  // Moving bytes between fields changes it: fields are length-prefixed.
  ContextView moved = base;
  moved.entries[2].tool_name = "a";
  ContextView moved2 = base;
  moved2.entries[2].tool_call_id = "a";
  EXPECT_NE(DigestView(moved, 0).view_hash, hash);
  EXPECT_NE(DigestView(moved, 0).view_hash, DigestView(moved2, 0).view_hash);
  ContextView role = base;
  role.entries[2].role = Role::kAssistant;
  EXPECT_NE(DigestView(role, 0).view_hash, hash);
  // No summaries, no pruned items: only the pinned breakpoint.
  ContextSnapshot plain = CacheSnapshot(2);
  plain.active_chunks.clear();
  const ViewDigest only = DigestView(AssembleView(plain, profile, false, {}), 0);
  ASSERT_EQ(only.breakpoints.size(), 1u);
  EXPECT_EQ(only.breakpoints[0].kind, CacheBreakpointKind::kPinned);
}

TEST(AssembleViewTest, CountsToolResultsApart) {
  ModelProfile profile;
  ContextSnapshot snap;
  snap.live_items.push_back(MakeItem(1, Role::kUser, ItemKind::kMessage, "run it", 5));
  snap.live_items.push_back(MakeItem(2, Role::kAssistant, ItemKind::kToolCall, "{}", 7));
  snap.live_items.push_back(MakeItem(3, Role::kTool, ItemKind::kToolResult, "ok", 40));
  const ContextView view = AssembleView(snap, profile, false, {});
  EXPECT_EQ(view.tokens.live, 52);
  EXPECT_EQ(view.tokens.tool_results, 40);
}

}  // namespace
}  // namespace convstate

namespace convstate {
namespace {

// Standing instructions are never left out: past their share of the window
// the oldest are shortened to their rule, and the view says how many.
TEST(AssembleViewTest, InstructionsPastTheirBudgetAreShortenedNeverDropped) {
  auto tok = NewApproximateTokenizer();
  ContextSnapshot snap;
  SummaryChunk chunk;
  chunk.chunk_id = 1;
  chunk.from_sequence = 1;
  chunk.through_sequence = 40;
  chunk.text = "Summary of items #1-#40:\nUser: the migration plan.";
  chunk.token_count = 12;
  for (int i = 0; i < 12; ++i) {
    LedgerFact c;
    c.sequence = 1 + 3 * i;
    c.role = Role::kUser;
    c.text = "Before we go on, something the change board asked me to pass on for the whole "
             "project, so please keep it in mind: never touch cluster " +
             std::to_string(i) + " during the freeze.";
    c.token_count = FactTokens(c, *tok);
    chunk.constraints.push_back(c);
  }
  snap.active_chunks.push_back(chunk);
  ModelProfile profile;
  profile.context_window = 4096;  // 5%: 204 tokens for instructions.
  profile.output_reserve = 256;
  ViewOptions options;
  options.tokenizer = tok.get();
  const ContextView view = AssembleView(snap, profile, false, {}, options);
  std::string text;
  for (const ViewEntry& e : view.entries) text += e.content + "\n";
  for (int i = 0; i < 12; ++i) {
    EXPECT_NE(text.find("never touch cluster " + std::to_string(i) + " during the freeze"),
              std::string::npos)
        << "rule " << i << " lost:\n" << text;
  }
  EXPECT_GT(view.instructions_shortened, 0);
  // The oldest are the ones shortened; the newest stay whole.
  EXPECT_EQ(text.find("change board asked me to pass on for the whole project, so please keep "
                      "it in mind: never touch cluster 0 "),
            std::string::npos);
  EXPECT_NE(text.find("keep it in mind: never touch cluster 11 during"), std::string::npos);
}

}  // namespace
}  // namespace convstate
