#include "services/compaction/summarizers/extractive.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/compaction/summarizers/transcript.h"

#include "gtest/gtest.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

std::vector<Item> Conversation() {
  std::vector<Item> items;
  auto add = [&](Role role, ItemKind kind, const std::string& text, const std::string& tool = "",
                 const std::string& id = "") {
    Item item;
    item.sequence = static_cast<int64_t>(items.size()) + 1;
    item.data.role = role;
    item.data.kind = kind;
    item.data.content = text;
    item.data.tool_name = tool;
    item.data.tool_call_id = id;
    items.push_back(item);
  };
  add(Role::kUser, ItemKind::kMessage,
      "I want to deploy the api service to staging. It runs on port 8443.");
  add(Role::kAssistant, ItemKind::kMessage, "Sure. Let me check the pods first. The weather is nice.");
  add(Role::kAssistant, ItemKind::kToolCall, R"({"cmd":"kubectl get pods -n staging"})", "bash", "c1");
  add(Role::kTool, ItemKind::kToolResult,
      "api-7f9 0/1 ImagePullBackOff\nError: image registry.local/api:v1.4 not found", "", "c1");
  add(Role::kAssistant, ItemKind::kMessage,
      "The deploy failed because the image tag v1.4 was never pushed. We decided to push it with "
      "`make push TAG=v1.4` instead of rebuilding. Anything else?");
  add(Role::kUser, ItemKind::kMessage, "ok. lol. nice. cool.");
  add(Role::kUser, ItemKind::kMessage, "Is the TLS certificate renewal still pending?");
  return items;
}

TEST(RenderTranscriptTest, AttributesEveryItem) {
  const std::string t = RenderTranscript(Conversation(), {{"c1", "bash"}});
  EXPECT_NE(t.find("[#1] User: I want to deploy"), std::string::npos) << t;
  EXPECT_NE(t.find("[#3] Assistant called tool bash (c1) with:"), std::string::npos) << t;
  // The result's tool name comes from its call.
  EXPECT_NE(t.find("[#4] Tool bash (c1) returned: api-7f9 0/1 ImagePullBackOff Error:"),
            std::string::npos)
      << t;
}

TEST(ExtractiveSummarizerTest, KeepsWhatMattersWithinBudgetDeterministically) {
  auto tok = NewApproximateTokenizer();
  auto summarizer = NewExtractiveSummarizer();
  SummaryRequest req;
  req.items = Conversation();
  req.tool_names = {{"c1", "bash"}};
  req.transcript = RenderTranscript(req.items, req.tool_names);
  req.max_tokens = 110;
  req.tokenizer = tok.get();
  auto a = summarizer->Summarize(req);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = summarizer->Summarize(req);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->text, b->text);  // Replayable.
  EXPECT_LE(tok->CountTokens(a->text), 110);
  EXPECT_LT(a->tokens_out, a->tokens_in);
  EXPECT_EQ(a->model, kExtractiveModel);
  // The goal, the error, the decision with its command, the open question.
  EXPECT_NE(a->text.find("I want to deploy the api service to staging"), std::string::npos) << a->text;
  EXPECT_NE(a->text.find("not found"), std::string::npos) << a->text;
  EXPECT_NE(a->text.find("make push TAG=v1.4"), std::string::npos) << a->text;
  EXPECT_NE(a->text.find("still pending?"), std::string::npos) << a->text;
  // Small talk goes first.
  EXPECT_EQ(a->text.find("weather"), std::string::npos) << a->text;
  EXPECT_EQ(a->text.find("lol"), std::string::npos) << a->text;
  // Who said it stays attached, in the original order.
  EXPECT_LT(a->text.find("User: I want"), a->text.find("Tool bash"));
  // Tool output enters as one attributed line, not as raw fragments.
  EXPECT_EQ(a->text.find("api-7f9 0/1"), std::string::npos) << a->text;
  EXPECT_FALSE(a->lines.empty());
}

TEST(ExtractiveSummarizerTest, LeavesWhatTheLedgerHoldsToTheLedger) {
  auto tok = NewApproximateTokenizer();
  SummaryRequest req;
  req.items = Conversation();
  req.tool_names = {{"c1", "bash"}};
  req.preserved = {"It runs on port 8443."};
  req.max_tokens = 400;
  req.tokenizer = tok.get();
  auto r = NewExtractiveSummarizer()->Summarize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text.find("8443"), std::string::npos) << r->text;
  EXPECT_NE(r->text.find("I want to deploy"), std::string::npos) << r->text;
}

TEST(ExtractiveSummarizerTest, AFoldMergesLinesAndNeverNestsSummaries) {
  auto tok = NewApproximateTokenizer();
  auto summarizer = NewExtractiveSummarizer();
  SummaryRequest first;
  first.items = Conversation();
  first.tool_names = {{"c1", "bash"}};
  first.max_tokens = 300;
  first.tokenizer = tok.get();
  auto a = summarizer->Summarize(first);
  ASSERT_TRUE(a.ok());
  SummaryRequest fold;
  fold.merge = a->lines;
  fold.merge.insert(fold.merge.end(), a->lines.begin(), a->lines.end());  // Duplicates go.
  fold.max_tokens = 300;
  fold.tokenizer = tok.get();
  auto f = summarizer->Summarize(fold);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->lines.size(), a->lines.size());
  // One header, the fold's own: no summary inside a summary.
  EXPECT_EQ(f->text.find("Summary of items"), 0u);
  EXPECT_EQ(f->text.find("Summary of items", 1), std::string::npos) << f->text;
  // Attribution survives the fold.
  EXPECT_NE(f->text.find("User: I want to deploy"), std::string::npos) << f->text;
}

TEST(CutToTokensTest, CutsAtABoundaryWithinTheBudget) {
  auto tok = NewApproximateTokenizer(1.0);  // One byte, one token.
  const std::string text = "alpha beta gamma delta epsilon";
  EXPECT_EQ(CutToTokens(text, 100, *tok), text);
  const std::string cut = CutToTokens(text, 15, *tok);
  EXPECT_LE(tok->CountTokens(cut), 15);
  EXPECT_EQ(cut, "alpha beta ...");
}

TEST(CutToTokensTest, NeverCutsInsideACharacter) {
  auto tok = NewApproximateTokenizer(1.0);
  const std::string text =
      "\xE2\x94\x80\xE2\x94\x80 box \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB e\xCC\x81 "
      "\xE4\xBD\xA0\xE5\xA5\xBD\xC3\xBC\xC3\x9F";
  for (int64_t budget = 1; budget <= static_cast<int64_t>(text.size()) + 2; ++budget) {
    const std::string cut = CutToTokens(text, budget, *tok);
    EXPECT_TRUE(IsValidUtf8(cut)) << budget;
  }
}

TEST(RenderTranscriptTest, LongOutputsKeepHeadTailAndErrorLinesInValidUtf8) {
  std::string output;
  for (int i = 0; i < 300; ++i) output += "\xE2\x94\x82 row " + std::to_string(i) + " fine\n";
  output += "FATAL: disk /dev/sda1 full\n";
  for (int i = 0; i < 300; ++i) output += "\xE2\x94\x82 row " + std::to_string(i) + " fine\n";
  Item item;
  item.sequence = 1;
  item.data.role = Role::kTool;
  item.data.kind = ItemKind::kToolResult;
  item.data.tool_name = "df";
  item.data.content = output;
  const std::string t = RenderTranscript({item}, {});
  EXPECT_TRUE(IsValidUtf8(t));
  EXPECT_NE(t.find("FATAL: disk /dev/sda1 full"), std::string::npos);
  EXPECT_LT(t.size(), 4500u);
}

}  // namespace
}  // namespace convstate
