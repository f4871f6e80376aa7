#include "services/compaction/ledger/ledger.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

Item Message(int64_t seq, Role role, std::string text) {
  Item item;
  item.sequence = seq;
  item.turn_index = seq;
  item.data.role = role;
  item.data.kind = ItemKind::kMessage;
  item.data.content = std::move(text);
  return item;
}

Item ToolResult(int64_t seq, std::string name, std::string text) {
  Item item = Message(seq, Role::kTool, std::move(text));
  item.data.kind = ItemKind::kToolResult;
  item.data.tool_name = std::move(name);
  item.data.tool_call_id = "c1";
  return item;
}

bool HasFact(const std::vector<LedgerFact>& facts, const std::string& needle) {
  for (const LedgerFact& f : facts) {
    if (f.text.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(LedgerTest, SplitsSentencesAndListsButNotVersions) {
  const auto s = SplitSentences("- First we pin v2.3.1. Then restart?\n2. Check /var/log; done");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], "First we pin v2.3.1.");
  EXPECT_EQ(s[1], "Then restart?");
  EXPECT_EQ(s[2], "Check /var/log");
  EXPECT_EQ(s[3], "done");
}

TEST(LedgerTest, RecognizesHardFacts) {
  for (const char* fact : {"The ticket is INC-4821.", "Latency went to 340 ms.",
                           "Logs are in /var/log/nginx.", "Run `kubectl get pods`.",
                           "Ask Priya about it.", "The host db-prod-eu is slow.",
                           "Use the checkout_service account.", "We decided to roll back.",
                           "The OOM killer fired.", "It is CrashLoopBackOff again."}) {
    EXPECT_TRUE(HasHardFact(fact)) << fact;
  }
  for (const char* plain : {"Thanks, that helps a lot.", "Can you look into it again?",
                            "That sounds like a follow-up for later.", "OK, let me check."}) {
    EXPECT_FALSE(HasHardFact(plain)) << plain;
  }
}

TEST(LedgerTest, RecognizesStandingInstructions) {
  for (const char* rule : {"Never restart the primary during business hours.",
                           "Please always ask before running a migration.",
                           "From now on, answer in French.",
                           "Do not touch prod until the freeze ends.",
                           "Remember that staging is shared with the QA team.",
                           "For the rest of this chat, use metric units."}) {
    EXPECT_TRUE(IsStandingInstruction(rule)) << rule;
  }
  for (const char* other : {"I never got the alert.", "Should we always page?",
                            "The job always fails at 3 am."}) {
    EXPECT_FALSE(IsStandingInstruction(other)) << other;
  }
}

TEST(LedgerTest, ExtractsFactsInstructionsAndErrorLinesWithProvenance) {
  auto tokenizer = NewApproximateTokenizer();
  std::string output;
  for (int i = 0; i < 400; ++i) absl::StrAppend(&output, "line ", i, " ok\n");
  absl::StrAppend(&output, "2026-11-02 ERROR pool exhausted: 200/200 connections\n");
  const std::vector<Item> items = {
      Message(1, Role::kUser, "Never deploy on Fridays. The service is checkout-api-v2 on host "
                              "web-eu-3. Thanks!"),
      Message(2, Role::kAssistant, "I will look. Nothing else to add"),
      ToolResult(3, "logs", output),
      Message(4, Role::kUser, "The service is checkout-api-v2 on host web-eu-3."),
  };
  const Extraction e = ExtractLedger(items, {}, *tokenizer);
  ASSERT_EQ(e.constraints.size(), 1u);
  EXPECT_EQ(e.constraints[0].text, "Never deploy on Fridays.");
  EXPECT_EQ(e.constraints[0].sequence, 1);
  EXPECT_TRUE(HasFact(e.facts, "checkout-api-v2 on host web-eu-3"));
  EXPECT_FALSE(HasFact(e.facts, "Thanks"));
  EXPECT_FALSE(HasFact(e.facts, "I will look"));
  // An error line 400 lines into the output still reaches the ledger.
  EXPECT_TRUE(HasFact(e.facts, "logs: 2026-11-02 ERROR pool exhausted: 200/200 connections"));
  // Said twice, stored once.
  int count = 0;
  for (const LedgerFact& f : e.facts) count += f.text.find("web-eu-3") != std::string::npos;
  EXPECT_EQ(count, 1);
  for (const LedgerFact& f : e.facts) EXPECT_GT(f.token_count, 0);
}

// A rule that goes on after a semicolon is kept whole; a fact's sentence
// ends at one.
TEST(LedgerTest, ARuleGoesOnAfterASemicolon) {
  auto tokenizer = NewApproximateTokenizer();
  const std::vector<Item> items = {Message(
      1, Role::kUser,
      "Second rule: nobody restarts a store's server while it is trading; it waits for the "
      "overnight window. Store 0340 runs agent 4.12.9; store 0341 runs 4.11.2.")};
  const Extraction e = ExtractLedger(items, {}, *tokenizer);
  ASSERT_EQ(e.constraints.size(), 1u);
  EXPECT_EQ(e.constraints[0].text,
            "Second rule: nobody restarts a store's server while it is trading; it waits for the "
            "overnight window.");
  EXPECT_TRUE(HasFact(e.facts, "Store 0340 runs agent 4.12.9"));
  EXPECT_FALSE(HasFact(e.facts, "it waits for the overnight window"));
}

TEST(LedgerTest, PastedBlocksKeepErrorLinesAndHeadersNotRows) {
  auto tokenizer = NewApproximateTokenizer();
  const std::vector<Item> items = {Message(
      1, Role::kUser,
      "The build #4471 failed again.\n```\nRun 88 for customer Gerda Hoffmann\nrow 1 ok 12ms\n"
      "row 2 ok 19ms\nrow 3 ok 9ms\nERROR: npm ETIMEDOUT\n```\nTicket is CI-88.")};
  const Extraction e = ExtractLedger(items, {}, *tokenizer);
  ASSERT_EQ(e.facts.size(), 4u);
  EXPECT_EQ(e.facts[0].text, "ERROR: npm ETIMEDOUT");
  EXPECT_TRUE(HasFact(e.facts, "The build #4471 failed again."));
  EXPECT_TRUE(HasFact(e.facts, "Run 88 for customer Gerda Hoffmann"));
  EXPECT_TRUE(HasFact(e.facts, "Ticket is CI-88."));
  EXPECT_FALSE(HasFact(e.facts, "row 1"));
}

TEST(LedgerTest, LongSentencesKeepTheirFactClausesAndStayValidUtf8) {
  auto tokenizer = NewApproximateTokenizer();
  std::string filler;
  for (int i = 0; i < 40; ++i) filler += "and then something happened \xE2\x94\x80\xE2\x94\x80, ";
  const std::vector<Item> items = {
      Message(1, Role::kAssistant, filler + "the fix is in /etc/app/pool.yaml, " + filler + "end.")};
  const Extraction e = ExtractLedger(items, {}, *tokenizer);
  ASSERT_FALSE(e.facts.empty());
  for (const LedgerFact& f : e.facts) {
    EXPECT_TRUE(IsValidUtf8(f.text));
    EXPECT_LE(f.text.size(), 300u);
  }
  EXPECT_TRUE(HasFact(e.facts, "the fix is in /etc/app/pool.yaml"));
}

TEST(LedgerTest, SelectionDeduplicatesAndDropsTheOldestOfEqualValueFirst) {
  SummaryChunk a, b;
  for (int i = 1; i <= 5; ++i) {
    a.facts.push_back(LedgerFact{i, i, Role::kUser, absl::StrCat("fact number ", i), 10});
  }
  b.facts.push_back(LedgerFact{6, 6, Role::kUser, "FACT  number 5", 10});  // Same as fact 5.
  b.facts.push_back(LedgerFact{7, 7, Role::kUser, "fact number 7", 10});
  const LedgerSelection s = SelectLedger({&a, &b}, 35);
  ASSERT_EQ(s.shown.size(), 3u);
  EXPECT_EQ(s.shown[0]->text, "fact number 4");
  EXPECT_EQ(s.shown[1]->text, "fact number 5");
  EXPECT_EQ(s.shown[2]->text, "fact number 7");
  EXPECT_EQ(s.omitted, 3);
  EXPECT_EQ(s.tokens, 30);
  EXPECT_NE(RenderLedger(s.shown).find("- U#4: fact number 4"), std::string::npos);
}

TEST(LedgerTest, SelectionDropsRepeatedAndLessSpecificFactsBeforeTheUsersOwn) {
  SummaryChunk a;
  a.facts = {
      LedgerFact{1, 1, Role::kUser, "The ticket is INC-4821 on db-orders-02.", 10},
      LedgerFact{2, 1, Role::kTool, "logs: ERROR pool exhausted", 10},
      LedgerFact{3, 1, Role::kAssistant, "Looking at db-orders-02 now.", 10},
      LedgerFact{4, 2, Role::kAssistant, "Priya owns it.", 10},
      LedgerFact{5, 2, Role::kUser, "Escalate INC-4821 and db-orders-02 to Priya.", 10},
  };
  const LedgerSelection s = SelectLedger({&a}, 30);
  ASSERT_EQ(s.shown.size(), 3u);
  // Fact 3 holds nothing that fact 5 does not repeat; the tool line is
  // worth least of the rest.
  EXPECT_EQ(s.shown[0]->sequence, 1);
  EXPECT_EQ(s.shown[1]->sequence, 4);
  EXPECT_EQ(s.shown[2]->sequence, 5);
  // With less room, fact 1 (repeated by fact 5, though the first to say it)
  // goes next.
  const LedgerSelection t = SelectLedger({&a}, 20);
  ASSERT_EQ(t.shown.size(), 2u);
  EXPECT_EQ(t.shown[0]->sequence, 4);
  // Ids the live items show count as repeated.
  SummaryChunk b;
  b.facts = {LedgerFact{1, 1, Role::kUser, "Host web-7 is down.", 10},
             LedgerFact{2, 1, Role::kUser, "Host web-8 is down.", 10}};
  TokenHashes live;
  AddSpecificTokenHashes("web-8 is back", live);
  const LedgerSelection u = SelectLedger({&b}, 10, live);
  ASSERT_EQ(u.shown.size(), 1u);
  EXPECT_EQ(u.shown[0]->sequence, 1);
}

TEST(LedgerTest, SpecificTokensAreIdsFiguresAndNames) {
  EXPECT_EQ(SpecificTokens("Ask Marcus Okafor about INC-4821 at 14:30, ndots to 2."),
            (std::set<std::string>{"marcus okafor", "inc-4821", "14:30", "to 2"}));
  EXPECT_EQ(SpecificTokens("The Route is fine"), (std::set<std::string>{}));
  EXPECT_EQ(SpecificTokens("Elif Demir asks"), (std::set<std::string>{"elif demir"}));
}

TEST(LedgerTest, FactHashIsTheHashOfTheFactKey) {
  EXPECT_EQ(FactHash("  Deploy  WEB-1\tnow "), FactHash("deploy web-1 now"));
  EXPECT_NE(FactHash("deploy web-1 now"), FactHash("deploy web-2 now"));
  TokenHashes a, b;
  AddSpecificTokenHashes("Ask Marcus Okafor about INC-4821", a);
  AddSpecificTokenHashes("Tell Marcus Okafor, inc-4821 is his", b);
  EXPECT_EQ(a, b);
}

TEST(LedgerTest, ErrorKeywordsCountOnlyAsWords) {
  EXPECT_TRUE(ErrorLines("x\nERROR: disk full\n", 3).size() == 1);
  EXPECT_TRUE(ErrorLines("npm ERR! code ETIMEDOUT\n", 3).size() == 1);
  EXPECT_TRUE(ErrorLines("nexus_errors_total{pod=\"a\"} 12\nfailed_jobs 0\n", 3).empty());
}

}  // namespace
}  // namespace convstate
