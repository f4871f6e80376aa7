#include "services/compaction/ledger/instructions.h"

#include "gtest/gtest.h"
#include "services/compaction/ledger/ledger.h"

namespace convstate {
namespace {

// Rules as users state them in real conversations: on their own, after a
// lead-in, inside a longer paragraph, in lists, as policies of a whole class
// of things. Each is one sentence as SplitSentences gives it.
TEST(InstructionsTest, FindsRulesWhereverTheyStand) {
  const char* rules[] = {
      "Never restart the primary during business hours.",
      "Please always ask before running a migration.",
      "From now on, answer in French.",
      "Do not touch prod until the freeze ends.",
      "Remember that staging is shared with the QA team.",
      "For the rest of this chat, use metric units.",
      "One rule for this incident: never restart, drain or evict anything in payments-core "
      "between 08:00 and 20:00 CET.",
      "Before we start, the payments people asked me to pass something on, and it matters for "
      "the whole project, so please keep it in mind every time: never restart, drain or evict "
      "anything in payments-core between 08:00 and 20:00 CET, even if a dashboard looks bad - "
      "they will handle it themselves.",
      "One more process point from the change board, since we'll be filing a lot of changes: "
      "every change to a production database needs a written rollback step before it is "
      "approved.",
      "Quick note after last night's incident on the storage array: the storage team asked "
      "that, until further notice, run every dry run with --throttle=50, because the "
      "unthrottled copies saturated the array twice.",
      "Please make sure every query you run against the replica has a LIMIT.",
      "We must not send customer emails from staging.",
      "Until further notice all schema changes go through Rafael.",
      "Going forward, cc Ines on anything that touches billing.",
      "Don't run kubectl delete on anything in kube-system.",
      "Also, no deploys without a ticket number in the commit message.",
      "I need you to always quote the exact error line.",
      "Any migration has to be rehearsed on the staging copy first.",
      "You must never paste customer data into the ticket.",
      "Keep in mind that the EU cluster is read-only for us.",
      "Under no circumstances drop a table in production.",
      "Important: avoid touching the ledger-archive replicas between 22:00 and 02:00 UTC.",
      "So, ground rules for the cutover weekend - nobody should merge to main without a second "
      "reviewer.",
      "Each change window must be announced in #ops an hour ahead.",
      "And a second rule from finance, also permanent: money stays in Decimal end to end.",
      "And please don't forget to page me before any failover.",
      "Just so you know, at all times the audit log stays on the old hall until legal signs off.",
      "Second rule, also permanent: nobody restarts a store's back-office server while that "
      "store is trading.",
  };
  for (const char* rule : rules) {
    EXPECT_TRUE(IsStandingInstruction(rule)) << rule;
  }
  EXPECT_GE(sizeof(rules) / sizeof(rules[0]), 20u);
}

// Sentences that only look like rules: questions, reports of the past,
// guesses, idioms, habits described, one-off asks.
TEST(InstructionsTest, LeavesSentencesThatOnlyLookLikeRules) {
  for (const char* other : {
           "I never got the alert.",
           "Should we always page?",
           "The job always fails at 3 am.",
           "We always had trouble with DNS on that cluster.",
           "It must have been the cache.",
           "That must be the old config.",
           "Don't worry about the warnings.",
           "I don't know why it restarted.",
           "Every time we deploy, something breaks.",
           "Did you make sure the copy finished?",
           "Never mind, I found it.",
           "The pods never came back after the drain.",
           "All of a sudden the latency doubled.",
           "I made sure the backup ran.",
           "Can you never restart it again?",
           "We never expected the array to fill up that fast.",
           "The runbook says it is always safe to retry.",
           "Thanks, that helps.",
           "Nobody knows why it restarted.",
           "Nobody noticed until the morning.",
       }) {
    EXPECT_FALSE(IsStandingInstruction(other)) << other;
  }
}

// What an instruction is shortened to: the rule, without its lead-in.
TEST(InstructionsTest, ShortensAnInstructionToItsRule) {
  EXPECT_EQ(RuleOf("One rule for this incident: never restart payments-core before 20:00 CET."),
            "never restart payments-core before 20:00 CET.");
  const std::string rule = RuleOf(
      "Before we start, something from the board: every change to a production database needs "
      "a written rollback step before it is approved, and a named reviewer, and a ticket, and a "
      "window agreed with the owners, and a test on staging, and a note in the changelog.",
      120);
  EXPECT_EQ(rule.rfind("every change to a production database needs", 0), 0u) << rule;
  EXPECT_LE(rule.size(), 124u);
  // A rule announced by its lead-in, stated as a plain sentence.
  EXPECT_EQ(RuleOf("And a second rule from finance, also permanent: money stays in Decimal end "
                   "to end, and no test may compare amounts as floats."),
            "money stays in Decimal end to end, and no test may compare amounts as floats.");
}

// Extraction keeps an instruction found inside a longer message, verbatim.
TEST(InstructionsTest, ExtractionKeepsARuleInsideAParagraph) {
  auto tokenizer = NewApproximateTokenizer();
  Item item;
  item.sequence = 7;
  item.data.role = Role::kUser;
  item.data.kind = ItemKind::kMessage;
  item.data.content =
      "Good. Before we start, the payments people asked me to pass something on: never restart, "
      "drain or evict anything in payments-core between 08:00 and 20:00 CET. The rest of the "
      "week is flexible.";
  const Extraction e = ExtractLedger({item}, {}, *tokenizer);
  ASSERT_EQ(e.constraints.size(), 1u);
  EXPECT_NE(e.constraints[0].text.find(
                "never restart, drain or evict anything in payments-core between 08:00 and 20:00 CET"),
            std::string::npos);
}

}  // namespace
}  // namespace convstate
