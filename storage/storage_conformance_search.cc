// The conformance suite (storage_conformance.h): history search.

#include <string>

#include "absl/strings/str_cat.h"
#include "storage/rules.h"
#include "storage/storage_conformance.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;

// Recall searches everything ever stored, compacted away or not, ranks rare
// words above common ones, and never finds erased text or a marker.
TEST_P(StorageConformanceTest, SearchHistoryFindsRareWordsInTheWholeHistoryButNoErasedText) {
  Create("c");
  AppendRequest req;
  req.key = Key("c");
  req.items.push_back(Message(Role::kUser, "Move the Orders queue to host db-7.eu-west today"));
  ItemData tool = Message(Role::kTool, "config: guard_value=4711 for the orders queue");
  tool.kind = ItemKind::kToolResult;
  tool.tool_call_id = "call-1";
  req.items.push_back(tool);
  req.items.push_back(Message(Role::kUser, "my card is 4111-1111-1111-1111 for the orders"));
  for (int i = 4; i <= 30; ++i) {
    req.items.push_back(Message(Role::kAssistant, absl::StrCat("status of the orders step ", i)));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  CompactionCommit commit;
  commit.key = Key("c");
  commit.chunk = Chunk(1, 10, "summary of the first ten items");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());  // marker 31
  ASSERT_TRUE(storage_->RedactItems(ctx_, Erasure(Key("c"), {3}, "[erased 4111]", 2)).ok());

  HistorySearch search;
  search.key = Key("c");
  search.terms = SearchTerms("What guard value did the config show for the orders? 4111 summary");
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(hits->items, 31);
  EXPECT_EQ(hits->document_frequency["guard"], 1);
  EXPECT_EQ(hits->document_frequency["4111"], 0);     // erased
  EXPECT_EQ(hits->document_frequency["summari"], 0);  // markers are not searched
  // In 29 of 30 searchable items: counted up to the cap (a fifth, at least
  // 20) plus one, and not searched for: nothing is found by it alone.
  EXPECT_EQ(hits->document_frequency["order"], 21);
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2));

  // A host is found whole and by its parts; the turn that holds more of
  // it comes first, with its tool result that holds none of it (its
  // exchange); of equal scores the newest comes first.
  search.terms = SearchTerms("db-7.eu-west");
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->document_frequency["db-7.eu-west"], 1);
  EXPECT_EQ(hits->document_frequency["7"], 2);  // "step 7"
  EXPECT_THAT(Sequences(hits->found), ElementsAre(1, 2, 7));
  search.terms = {"guard", "db-7.eu-west"};
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2, 1));
  search.max_items = 1;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2));

  // With a cap above every count, common words are searched too; the
  // newest of equals comes first.
  search.terms = {"order"};
  search.max_document_frequency = 1000;
  search.max_items = 3;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->document_frequency["order"], 29);
  EXPECT_THAT(Sequences(hits->found), ElementsAre(30, 29, 28));

  search.key = Key("missing");
  EXPECT_EQ(storage_->SearchHistory(ctx_, search).status().code(), absl::StatusCode::kNotFound);
}

// A tool result whose lines do not name their subject is found through
// its exchange: its call's arguments and the question of its turn. With
// compacted_only, what is still in the view is not searched.
TEST_P(StorageConformanceTest, SearchHistoryFindsAToolResultThroughItsExchange) {
  Create("x");
  AppendRequest req;
  req.key = Key("x");
  auto turn = [&](const std::string& ask, const std::string& area, const std::string& sum) {
    req.items.push_back(Message(Role::kUser, ask));
    ItemData call = Message(Role::kAssistant,
                            absl::StrCat(R"({"query": "select * from dry_run where area = ')", area,
                                         R"('"})"));
    call.kind = ItemKind::kToolCall;
    call.tool_name = "psql";
    call.tool_call_id = absl::StrCat("call-", area);
    req.items.push_back(call);
    ItemData result = Message(Role::kTool, absl::StrCat("rows scanned 4410\ndry-run checksum ", sum,
                                                        "\nstatus ok"));
    result.kind = ItemKind::kToolResult;
    result.tool_name = "psql";
    result.tool_call_id = call.tool_call_id;
    req.items.push_back(result);
    req.items.push_back(Message(Role::kAssistant, "The dry run passed; the checksum is above."));
  };
  turn("What did the dry run show for the etl rewrite?", "etl rewrite", "30a6359");  // 1-4
  turn("And the dry run of the ledger move?", "ledger move", "77b01c2");             // 5-8
  for (int i = 0; i < 20; ++i) {
    req.items.push_back(Message(Role::kUser, absl::StrCat("Next step ", i, " please.")));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());

  HistorySearch search;
  search.key = Key("x");
  search.terms = SearchTerms("the etl rewrite's checksum");
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  // The turn of items 1-4: the question (1) and the call (2) hold "etl" and
  // "rewrit"; the result (3) holds neither and comes with them.
  ASSERT_FALSE(hits->found.empty());
  EXPECT_THAT(Sequences(hits->found), ::testing::IsSupersetOf({1, 2, 3}));
  EXPECT_EQ(hits->found[0].turn_index, 1);
  // ETL, spelled out.
  EXPECT_THAT(hits->exchange_terms[3], ::testing::IsSupersetOf({"extract", "rewrit"}));
  EXPECT_EQ(hits->calls[3], R"({"query": "select * from dry_run where area = 'etl rewrite'"})");
  // The other dry run's turn holds only the common words: it comes after.
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(hits->found[i].turn_index, 1) << i;

  // Nothing compacted yet: nothing to recall.
  search.compacted_only = true;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(hits->found, ::testing::IsEmpty());
  // Once items 1-8 are summarized, they are searched again.
  CompactionCommit commit;
  commit.key = Key("x");
  commit.chunk = Chunk(1, 8, "two dry runs");
  ASSERT_TRUE(storage_->CommitCompaction(ctx_, commit).ok());
  // (Whether or not the word index has them yet.)
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Sequences(hits->found), ::testing::IsSupersetOf({1, 2, 3}));
}

// A turn counts each question word once: a turn holding "wait" and three
// other words for it (its stand-ins) is not four words nearer the question
// than a turn holding "wait" and "policy". Without the words, each term is
// one.
TEST_P(StorageConformanceTest, SearchHistoryCountsAWordOnceThoughItsStandInsAreMany) {
  Create("w");
  AppendRequest req;
  req.key = Key("w");
  req.items.push_back(Message(Role::kUser, "Raise the wait, the delay, the backoff and the pause."));
  req.items.push_back(Message(Role::kUser, "The wait policy lives in the loader."));
  for (int i = 0; i < 20; ++i) {
    req.items.push_back(Message(Role::kUser, absl::StrCat("Next step ", i, " please.")));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());

  HistorySearch search;
  search.key = Key("w");
  search.terms = {"wait", "polici", "delay", "backoff", "paus"};
  search.max_items = 2;
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(Sequences(hits->found), ElementsAre(1, 2));

  search.word_of = {0, 1, 0, 0, 0};
  search.stand_in = {false, false, true, true, true};
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(Sequences(hits->found), ElementsAre(2, 1));
  // Each turn's terms are still all it holds.
  EXPECT_THAT(hits->exchange_terms[1], ElementsAre("backoff", "delay", "paus", "wait"));

  // Words given for the first terms only: the rest are words of their own.
  search.word_of = {0, 1};
  search.stand_in = {};
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(Sequences(hits->found), ElementsAre(1, 2));
}

// With replies, the assistant's reply to each user message found comes
// after the candidates (beyond max_items), its turn's terms as its
// exchange: a date proposed in a reply holding none of the question's
// words. Not an erased reply, nor a reply of another turn.
TEST_P(StorageConformanceTest, SearchHistoryBringsTheRepliesToTheQuestionsItFinds) {
  Create("r");
  AppendRequest req;
  req.key = Key("r");
  auto turn = [&](const std::string& ask, const std::string& reply) {
    req.items.push_back(Message(Role::kUser, ask));
    req.items.push_back(Message(Role::kAssistant, reply));
  };
  turn("What would a cutover slot for the identity provider sync look like?",
       "I would propose Monday 29 March, starting at 21:00 UTC.");                      // 1-2
  turn("And a cutover slot for the pricing database?",
       "I would propose Monday 8 March, after the second rehearsal.");                   // 3-4
  req.items.push_back(Message(Role::kUser, "Fine. The identity provider sync owner?"));  // 5
  for (int i = 0; i < 20; ++i) {
    req.items.push_back(Message(Role::kUser, absl::StrCat("Next step ", i, " please.")));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  ASSERT_TRUE(storage_->RedactItems(ctx_, Erasure(Key("r"), {4})).ok());

  HistorySearch search;
  search.key = Key("r");
  search.terms = SearchTerms("When is the identity provider sync cutover planned?");
  search.max_items = 1;
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  ASSERT_THAT(Sequences(hits->found), ElementsAre(1));
  search.replies = true;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  ASSERT_THAT(Sequences(hits->found), ElementsAre(1, 2));
  EXPECT_EQ(hits->exchange_terms[2], hits->exchange_terms[1]);
  EXPECT_THAT(hits->exchange_terms[2], ::testing::Contains("ident"));
  // Item 5 has no reply (item 6 is the user's next turn), and item 4 is
  // erased.
  search.max_items = 10;
  search.terms = SearchTerms("cutover slot identity provider sync pricing database");
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(Sequences(hits->found), ::testing::Contains(2));
  EXPECT_THAT(Sequences(hits->found), ::testing::Not(::testing::Contains(4)));
  EXPECT_THAT(Sequences(hits->found), ::testing::Not(::testing::Contains(6)));
}

// With opening, the conversation's first user messages come after the
// candidates whatever words they hold (HistoryHits::opening names them);
// an erased one is not among them, nor what the view still shows.
TEST_P(StorageConformanceTest, SearchHistoryBringsTheOpeningMessagesWhenAsked) {
  Create("o");
  AppendRequest req;
  req.key = Key("o");
  req.items.push_back(Message(Role::kUser, "Morning! I'm Dara Kowalczyk, billing team."));  // 1
  req.items.push_back(Message(Role::kAssistant, "Morning, Dara."));                         // 2
  req.items.push_back(Message(Role::kUser, "Ground rules: no direct pushes to main."));     // 3
  req.items.push_back(Message(Role::kAssistant, "Understood."));                            // 4
  req.items.push_back(Message(Role::kUser, "We ship v2.31.0 on Thursday."));               // 5
  for (int i = 0; i < 20; ++i) {
    req.items.push_back(Message(Role::kUser, absl::StrCat("Dry run ", i, " passed?")));
  }
  ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());

  HistorySearch search;
  search.key = Key("o");
  search.terms = SearchTerms("dry run");
  search.max_items = 3;
  auto hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(hits->opening, ::testing::IsEmpty());
  EXPECT_THAT(Sequences(hits->found), ::testing::Not(::testing::Contains(1)));
  search.opening = true;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(hits->opening, ElementsAre(1, 3));
  ASSERT_EQ(hits->found.size(), 5u);
  EXPECT_EQ(hits->found[3].sequence, 1);
  EXPECT_EQ(hits->found[4].sequence, 3);

  ASSERT_TRUE(storage_->RedactItems(ctx_, Erasure(Key("o"), {1})).ok());
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(hits->opening, ElementsAre(3, 5));
  // Nothing compacted yet: the view shows them.
  search.compacted_only = true;
  hits = storage_->SearchHistory(ctx_, search);
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_THAT(hits->opening, ::testing::IsEmpty());
  EXPECT_THAT(hits->found, ::testing::IsEmpty());
}

TEST(SearchTermsTest, SplitsLikeTheIndex) {
  // Words in their one form (stemmed; an abbreviation spelled out: "DB"
  // is "databas"), compounds as written beside their parts, which may be
  // names: the "db" of a host is there as written and spelled out.
  EXPECT_THAT(SearchTerms("Deploy db-7.EU-west at 08:00, ok? user@x"),
              ElementsAre("deploy", "db-7.eu-west", "db", "databas", "7", "eu", "west", "at",
                          "08:00", "08", "00", "ok", "user@x", "user", "x"));
  // Plurals, inflections and possessives as people write them.
  EXPECT_THAT(SearchTerms("the vendor contract's guards"),
              ElementsAre("the", "vendor", "contract", "s", "guard"));
  EXPECT_THAT(SearchTerms("Checksums planning DB"), ElementsAre("checksum", "plan", "databas"));
  // A word negated by "un" holds the word too: "not yet applied" finds
  // "unapplied"; a short one ("undo", "until") is a word of its own.
  EXPECT_THAT(SearchTerms("unapplied undo until"),
              ElementsAre("unappli", "appli", "undo", "until"));
  EXPECT_THAT(SearchTerms("--a-- \xC3\xA9t\xC3\xA9 b_"), ElementsAre("a", "t", "b"));
  // Camel case, as code writes names: whole, and its parts.
  EXPECT_THAT(SearchTerms("maxReplicas: 27"),
              ElementsAre("maxreplica", "max", "replica", "27"));
  EXPECT_THAT(SearchTerms("CronJobs"), ElementsAre("cronjob", "cron", "job"));
  EXPECT_THAT(SearchTerms("kind: CronJob, HTTPServer"),
              ElementsAre("kind", "cronjob", "cron", "job", "httpserver", "http", "server"));
  EXPECT_THAT(SearchTerms("BenchmarkAppendParallel-8"),
              ElementsAre("benchmarkappendparallel-8", "benchmarkappendparallel", "benchmark",
                          "append", "parallel", "8"));
  // A part after a digit: JSON keys ("p95LatencyMs"); not in a name of
  // capitals and digits ("SHA256", "H100").
  EXPECT_THAT(SearchTerms("\"p95LatencyMs\": 3235"),
              ElementsAre("p95latencyms", "p95", "latenc", "ms", "millisecond", "3235"));
  EXPECT_THAT(SearchTerms("SHA256 H100"), ElementsAre("sha256", "h100"));
  EXPECT_THAT(SearchTerms("the subs svc"), ElementsAre("the", "subscript", "servic"));
  // Not when a part would be one letter: "IdP" is the abbreviation.
  EXPECT_THAT(SearchTerms("IdP iPhone"), ElementsAre("ident", "provid", "iphon"));
  // A test runner's marks are the words they stand for: jest's cross and
  // its "● Suite › test" title of a failure, a tick; not a bullet alone.
  EXPECT_THAT(SearchTerms("\u2715 disables refund (220 ms)"),
              ElementsAre("fail", "disabl", "refund", "220", "millisecond"));
  EXPECT_THAT(SearchTerms("\u25cf RefundDialog \u203a disables"),
              ElementsAre("fail", "refunddialog", "refund", "dialog", "disabl"));
  EXPECT_THAT(SearchTerms("\u2713 renders"), ElementsAre("pass", "render"));
  EXPECT_THAT(SearchTerms("\u25cf ledger.service - Ledger\n\u203a"),
              ElementsAre("ledger.service", "ledger", "servic"));
}

}  // namespace
}  // namespace convstate
