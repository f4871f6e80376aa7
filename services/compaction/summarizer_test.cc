#include "services/compaction/summarizer.h"

#include "gtest/gtest.h"

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
  req.transcript = RenderTranscript(Conversation(), {{"c1", "bash"}});
  req.max_tokens = 160;
  req.tokenizer = tok.get();
  auto a = summarizer->Summarize(req);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = summarizer->Summarize(req);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->text, b->text);  // Replayable.
  EXPECT_LE(tok->CountTokens(a->text), 160);
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
}

TEST(CutToTokensTest, CutsAtABoundaryWithinTheBudget) {
  auto tok = NewApproximateTokenizer(1.0);  // One byte, one token.
  const std::string text = "alpha beta gamma delta epsilon";
  EXPECT_EQ(CutToTokens(text, 100, *tok), text);
  const std::string cut = CutToTokens(text, 15, *tok);
  EXPECT_LE(tok->CountTokens(cut), 15);
  EXPECT_EQ(cut, "alpha beta ...");
}

}  // namespace
}  // namespace convstate
