#include "services/compaction/recall/recall.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "services/common/utf8.h"
#include "services/common/word_forms.h"
#include "storage/contract.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const char* const kServices[] = {"billing-ledger", "orders-api", "search-index", "fleet-tracker",
                                 "invoice-render"};

Item Stored(int64_t sequence, Role role, ItemKind kind, std::string content,
            std::string tool = "") {
  Item item;
  item.sequence = sequence;
  item.turn_index = sequence / 3 + 1;
  item.data.role = role;
  item.data.kind = kind;
  item.data.content = std::move(content);
  item.data.tool_name = std::move(tool);
  return item;
}

// A history like a migration's: for each service a config read and a dry
// run (long tool outputs with one guard value and one checksum each), and
// chatter that mentions the service and the words of the question.
std::vector<Item> History() {
  std::vector<Item> items;
  int64_t seq = 0;
  int guard = 1000;
  for (const char* service : kServices) {
    items.push_back(Stored(++seq, Role::kUser, ItemKind::kMessage,
                           absl::StrCat("Next is ", service, ". Read its config and do a dry run.")));
    std::string config = absl::StrCat("# ", service, ": migration settings\nservice: ", service,
                                      "\ntables:\n");
    for (int t = 0; t < 40; ++t) absl::StrAppend(&config, "  - name: table_", t, "\n");
    absl::StrAppend(&config, "  guard_value: ", guard++, "\nowner: platform\n");
    items.push_back(Stored(++seq, Role::kTool, ItemKind::kToolResult, config, "shell"));
    std::string log;
    for (int l = 0; l < 30; ++l) absl::StrAppend(&log, "INFO copy rows batch ", l, " ok\n");
    absl::StrAppend(&log, "dry-run summary for ", service, ": verification checksum sha256:",
                    std::string(service, 2), "77aa", guard, "\n");
    items.push_back(Stored(++seq, Role::kTool, ItemKind::kToolResult, log, "migrate"));
    items.push_back(Stored(++seq, Role::kAssistant, ItemKind::kMessage,
                           absl::StrCat("The dry run for ", service,
                                        " finished; the config looks fine and I checked the "
                                        "guard before running it.")));
  }
  return items;
}

HistoryHits HitsFor(const std::vector<Item>& items, const RecallQuery& q) {
  HistoryHits hits;
  hits.items = static_cast<int64_t>(items.size());
  for (const std::string& term : q.terms) {
    int64_t df = 0;
    for (const Item& item : items) {
      const std::vector<std::string> terms = SearchTerms(item.data.content);
      df += std::find(terms.begin(), terms.end(), term) != terms.end();
    }
    hits.document_frequency[term] = df;
  }
  hits.found = items;
  return hits;
}

// A history of the user's `message` (item 1) and the `tool`'s `output`
// after it (item 2), for OutputAfterMessage.
std::vector<Item> MessageThenOutput(std::string message, std::string output, std::string tool) {
  return {Stored(1, Role::kUser, ItemKind::kMessage, std::move(message)),
          Stored(2, Role::kTool, ItemKind::kToolResult, std::move(output), std::move(tool))};
}

// HitsFor a history where item 2 is a tool's output after the user's
// message (item 1), its exchange, weighed as in a history of a thousand
// items.
HistoryHits OutputAfterMessage(const std::vector<Item>& items, const RecallQuery& q) {
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  hits.exchange_terms[2] = SearchTerms(items[0].data.content);
  return hits;
}

// The same for a history of several such pairs (items 1 and 2, 3 and 4,
// ...): each output's exchange is the message before it.
HistoryHits OutputsAfterMessages(const std::vector<Item>& items, const RecallQuery& q) {
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  for (size_t i = 1; i < items.size(); i += 2) {
    hits.exchange_terms[items[i].sequence] = SearchTerms(items[i - 1].data.content);
  }
  return hits;
}

// The terms standing in for the question's words (StandIns).
std::vector<std::string> StandInsOf(absl::string_view question) {
  const RecallQuery q = ParseRecallQuery(question);
  std::vector<std::string> out;
  for (size_t i = 0; i < q.terms.size(); ++i) {
    if (q.stand_in[i]) out.push_back(q.terms[i]);
  }
  return out;
}

class RecallTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> tokenizer_ = NewApproximateTokenizer();

  // The text of the best passage for `q` in `hits` within `max_tokens`
  // ("" when nothing is recalled).
  std::string First(const RecallQuery& q, const HistoryHits& hits, int64_t max_tokens) {
    const std::vector<RecalledPassage> got = Rank(q, hits, max_tokens, 1);
    return got.empty() ? "" : got[0].text;
  }

  // The same over `items`, weighed as in a history of a thousand items.
  std::string Best(const RecallQuery& q, const std::vector<Item>& items, int64_t max_tokens) {
    HistoryHits hits = HitsFor(items, q);
    hits.items = 1000;
    return First(q, hits, max_tokens);
  }

  // The best passage for `q` in `hits` within `max_tokens`, the view
  // showing the turn's question (item 1); none when nothing is recalled.
  std::vector<RecalledPassage> BestBesideQuestion(const RecallQuery& q, const HistoryHits& hits,
                                                  int64_t max_tokens = 300) {
    RecallLimits limits;
    limits.max_tokens = max_tokens;
    limits.shown = {1};
    limits.max_passages = 1;
    return RankPassages(q, hits, *tokenizer_, limits);
  }

  // RankPassages within `max_tokens` and `max_passages`.
  std::vector<RecalledPassage> Rank(const RecallQuery& q, const HistoryHits& hits,
                                    int64_t max_tokens, int max_passages = 12) {
    RecallLimits limits;
    limits.max_tokens = max_tokens;
    limits.max_passages = max_passages;
    return RankPassages(q, hits, *tokenizer_, limits);
  }
};

TEST_F(RecallTest, QuestionWordsLeaveOutWhatEveryQuestionSays) {
  const RecallQuery q = ParseRecallQuery(
      "Going back to billing-ledger: what guard value did its config show?");
  // Words in their one form ("config" is "configuration", stemmed); the
  // compound as written beside its parts; last, the hyphenated word joined
  // and the name of two words as a system writes it (joined too, in its
  // one form), for its first word; then the stand-ins ("invoicing" for
  // "billing").
  EXPECT_THAT(q.terms, ElementsAre("billing-ledger", "bill", "ledger", "guard", "valu",
                                   "configur", "billingledger", "guard-value", "guard_value",
                                   "guardvalu", "invoic"));
  EXPECT_THAT(q.word_of, ElementsAre(0, 0, 0, 1, 2, 3, 0, 1, 1, 1, 0));
  EXPECT_EQ(q.words, 4);
  EXPECT_THAT(ParseRecallQuery("What did you say, and why?").terms, IsEmpty());
  // Words that only qualify name nothing, nor make names with the words
  // beside them; a word whose one form a qualifier would share stays.
  const RecallQuery qualified = ParseRecallQuery(
      "How long would the switchover itself take, in the window around dispatch peak, "
      "altogether? And which evening, actually, was the quit signal basically quite a basic one?");
  EXPECT_THAT(qualified.terms, AllOf(Not(Contains("itself")), Not(Contains("around")),
                                     Not(Contains("altogeth")), Not(Contains("switchover-itself")),
                                     Not(Contains("window-around"))));
  EXPECT_THAT(qualified.terms, Contains("dispatch-peak"));
  EXPECT_THAT(qualified.terms,
              ::testing::IsSupersetOf(
                  {WordForm("evening"), WordForm("actual"), WordForm("quit"), WordForm("basic")}));
  // Prepositions relate the things named: "rows hvmig refused during the
  // compare run" makes no "refuse-during", and takes no term's place.
  const RecallQuery related = ParseRecallQuery(
      "How many rows did hvmig refuse during the compare run, per the log, according to Ana, "
      "via the relay, within the hour, across the shards, through the night, between retries?");
  for (const char* word : {"dure", "during", "per", "accord", "via", "within", "across",
                           "through", "between", "refuse-during", "hvmig-refuse-during"}) {
    EXPECT_THAT(related.terms, Not(Contains(word))) << word;
  }
  EXPECT_THAT(related.terms, ::testing::IsSupersetOf({std::string("hvmig"), WordForm("refuse"),
                                                      std::string("compare-run")}));
  // A negation as it splits ("weren't") and a conjunction name nothing,
  // and make no names with the words beside them ("dry-run-because").
  const RecallQuery joined = ParseRecallQuery(
      "How many shops were skipped in the dry run because their agents weren't enrolled yet, "
      "and whether the rest didn't fail while I was out?");
  for (const char* word : {"becaus", "weren", "yet", "whether", "didn", "while",
                           "dry-run-because", "run-because", "agents-weren"}) {
    EXPECT_THAT(joined.terms, Not(Contains(word))) << word;
  }
  EXPECT_THAT(joined.terms, ::testing::IsSupersetOf({std::string("dry-run"), WordForm("enrolled"),
                                                     WordForm("agent")}));
  // A long pending message searches by its first words only.
  std::string essay;
  for (int i = 0; i < 500; ++i) absl::StrAppend(&essay, "word", i, " ");
  const RecallQuery long_one = ParseRecallQuery(essay);
  EXPECT_EQ(long_one.terms.size(), kMaxRecallTerms);
  EXPECT_EQ(long_one.terms.front(), "word0");
}

TEST_F(RecallTest, ANameOfSeveralWordsIsSearchedAsASystemWritesIt) {
  const RecallQuery q =
      ParseRecallQuery("What did the message queue bridge's first dry run show? And web sessionize?");
  auto word_of = [&](const std::string& term) {
    auto it = std::find(q.terms.begin(), q.terms.end(), term);
    return it == q.terms.end() ? -1 : q.word_of[static_cast<size_t>(it - q.terms.begin())];
  };
  for (const char* compound : {"message-queue-bridge", "message_queue_bridge", "message-queue",
                               "queue-bridge", "web-sessionize", "web_sessionize"}) {
    EXPECT_NE(word_of(compound), -1) << compound;
  }
  // Each stands for its name's first word, not for a word of its own.
  EXPECT_EQ(word_of("message-queue-bridge"), word_of("messag"));
  EXPECT_EQ(word_of("web_sessionize"), word_of("web"));
  // Not across a sentence, a comma or a stopword.
  EXPECT_EQ(word_of("bridge-first"), -1);
  EXPECT_EQ(word_of("show-and"), -1);
  EXPECT_THAT(ParseRecallQuery("the bridge, first").terms, Not(::testing::Contains("bridge-first")));
  // A hyphenated word is also searched as one ("max_inflight" holds
  // "inflight"), for the same word.
  const RecallQuery hyphen = ParseRecallQuery("What was the cap on in-flight messages?");
  auto at = [&](const std::string& term) {
    return std::find(hyphen.terms.begin(), hyphen.terms.end(), term) - hyphen.terms.begin();
  };
  ASSERT_LT(static_cast<size_t>(at("inflight")), hyphen.terms.size());
  EXPECT_EQ(hyphen.word_of[at("inflight")], hyphen.word_of[at("in-flight")]);
  EXPECT_THAT(ParseRecallQuery("the bridge first").terms, ::testing::Contains("bridge-first"));
  // Two words are searched as one word too ("gift cards" is the
  // `GIFTCARD` of a tender table), in its one form; not short ones.
  EXPECT_THAT(ParseRecallQuery("What did the stores take on gift cards?").terms,
              ::testing::Contains("giftcard"));
  EXPECT_THAT(ParseRecallQuery("the web ui").terms, Not(::testing::Contains("webui")));
  std::string tenders = "TenderType Txns  Amount\n---------- ----- ---------\n";
  for (const char* row : {"CARD       13617 291457.97", "CASH        3528  44053.91",
                          "POINTS       838  10342.32", "GIFTCARD     174   4098.40",
                          "VOUCHER       69    766.44"}) {
    absl::StrAppend(&tenders, row, "\n");
  }
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "What does StoreLink have for the tenders?"),
      Stored(2, Role::kTool, ItemKind::kToolResult, tenders, "sqlcmd")};
  const RecallQuery gift = ParseRecallQuery("What did the stores take on gift cards?");
  HistoryHits hits = OutputAfterMessage(items, gift);
  const std::vector<RecalledPassage> got = Rank(gift, hits, 300, 2);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("GIFTCARD     174   4098.40"));
}

TEST_F(RecallTest, AnAbbreviationSpelledOutIsOneWordOfTheQuestion) {
  // "MQ" is "message queue": one word, its two forms; "message" and
  // "queue" written apart are two.
  const RecallQuery q = ParseRecallQuery("Which MQ bridge dropped it?");
  EXPECT_EQ(q.words, 3) << ::testing::PrintToString(q.terms);  // mq, bridge, drop
  std::vector<int> of_mq;
  for (size_t i = 0; i < q.terms.size(); ++i) {
    if (q.terms[i] == WordForm("message") || q.terms[i] == WordForm("queue")) {
      of_mq.push_back(q.word_of[i]);
    }
  }
  ASSERT_EQ(of_mq.size(), 2u);
  EXPECT_EQ(of_mq[0], of_mq[1]);
  EXPECT_EQ(ParseRecallQuery("Which message went to the queue?").words, 3);
}

TEST_F(RecallTest, TheWriteAheadLogSpelledOutFindsTheWalSetting) {
  // A settings diff names the WAL by its abbreviation, a question by its
  // words; neither names the other's.
  std::string diff = "--- a/postgresql.conf\n+++ b/postgresql.conf\n";
  for (const char* row : {"-shared_buffers = 8GB", "+shared_buffers = 32GB",
                          " autovacuum_max_workers = 6", "-max_wal_size = 16GB",
                          "+max_wal_size = 64GB", " checkpoint_timeout = 15min",
                          "+lock_timeout = 30s", " log_temp_files = 0"}) {
    absl::StrAppend(&diff, row, "\n");
  }
  const std::vector<Item> items =
      MessageThenOutput("What does Tobias change in the server settings?", diff, "git");
  const RecallQuery q =
      ParseRecallQuery("In Tobias's settings, how far may the write-ahead log grow now?");
  EXPECT_THAT(RenderRecalled(Rank(q, OutputAfterMessage(items, q), 150, 2)),
              HasSubstr("+max_wal_size = 64GB"));
}

TEST_F(RecallTest, AJsonRecordsNameCountsForItsFigures) {
  // A validation result lists one record per check: the column a check is
  // about is set in its "kwargs", the count asked for under its "result".
  std::string result = "{\n  \"success\": false,\n  \"results\": [\n";
  const std::pair<const char*, int> checks[] = {
      {"site_code", 0}, {"on_hand_qty", 2056}, {"reserved_qty", 0}, {"snapshot_ts", 0}};
  for (const auto& [column, failed] : checks) {
    absl::StrAppend(&result, "    {\n      \"success\": ", failed == 0 ? "true" : "false",
                    ",\n      \"expectation_config\": {\n        \"kwargs\": {\n",
                    "          \"column\": \"", column, "\"\n        }\n      },\n",
                    "      \"result\": {\n        \"element_count\": 394853,\n",
                    "        \"unexpected_count\": ", failed, ",\n",
                    "        \"missing_count\": 3\n      }\n    },\n");
  }
  absl::StrAppend(&result, "  ]\n}\n");
  const std::vector<Item> items = MessageThenOutput(
      "Open the stored result of the stock levels suite.", result, "read_file");
  const RecallQuery q =
      ParseRecallQuery("In the stock levels suite's result, how many unexpected on-hand rows?");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 120, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("\"unexpected_count\": 2056"));
}

TEST_F(RecallTest, AQuestionForAConstantFindsItsDefinition) {
  EXPECT_TRUE(ParseRecallQuery("Give me the constant as written.").asks_constant);
  EXPECT_FALSE(ParseRecallQuery("What does the tax service charge?").asks_constant);
  // The function naming the rule holds more of the question's words than
  // the constant's definition does; a question for the constant asks for
  // the definition.
  const std::string module =
      "    26\tlog = logging.getLogger(__name__)\n"
      "    27\t\n"
      "    28\tREVERSE_CHARGE_MIN_CENTS = 1_400_000\n"
      "    29\tPAGE_SIZE = 500\n"
      "    30\t\n"
      "    31\t\n"
      "    32\tdef reverse_charge_applies(net_cents: int, seller_country: str) -> bool:\n"
      "    33\t    \"\"\"Cross-border supplies above the minimum shift the tax.\"\"\"\n"
      "    34\t    if not seller_country:\n"
      "    35\t        return False\n"
      "    36\t    return net_cents >= REVERSE_CHARGE_MIN_CENTS\n";
  const std::vector<Item> items =
      MessageThenOutput("Open the tax service's thresholds module.", module, "read_file");
  const RecallQuery q = ParseRecallQuery(
      "From what net amount in cents does the tax service apply reverse charge? Give me the "
      "constant as written.");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 80, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("REVERSE_CHARGE_MIN_CENTS = 1_400_000"));
  // Definitions as other languages write them; not a comparison, nor a
  // name in lower case.
  for (const char* line :
       {"const MAX_BACKOFF_MS = 30000;", "static final int MAX_BACKOFF_MS = 30000;",
        "#define MAX_BACKOFF_MS 30000", "MAX_BACKOFF_MS: Final[int] = 30000",
        "export const MAX_BACKOFF_MS = 30_000"}) {
    const std::vector<Item> code = MessageThenOutput(
        "Open the retry helper.",
        absl::StrCat("def backoff_ms(attempt: int) -> int:\n    return min(2 ** attempt * 100, "
                     "MAX_BACKOFF_MS)\n\n", line, "\n"),
        "read_file");
    const RecallQuery ceiling =
        ParseRecallQuery("What is the retry helper's backoff ceiling? The millisecond constant.");
    const std::vector<RecalledPassage> found =
        Rank(ceiling, OutputAfterMessage(code, ceiling), 80, 1);
    ASSERT_EQ(found.size(), 1u) << line;
    EXPECT_THAT(found[0].text, HasSubstr(line));
  }
}

TEST_F(RecallTest, ADurationInWordsIsFoundWrittenShort) {
  auto terms_of = [](absl::string_view question) {
    return ParseRecallQuery(question).terms;
  };
  EXPECT_THAT(terms_of("the wait went from six hours to 2 hrs"),
              AllOf(Contains("6h"), Contains("2h")));
  EXPECT_THAT(terms_of("a TTL of 15 minutes and a 30 second grace"),
              AllOf(Contains("15m"), Contains("15min"), Contains("30s")));
  EXPECT_THAT(terms_of("it kept 7 days, polling every 250 milliseconds"),
              AllOf(Contains("7d"), Contains("250ms")));
  EXPECT_THAT(terms_of("two retries"), Not(Contains("2h")));
  // A log of commits: the one that cut the wait names it in figures.
  std::string log;
  for (const char* line : {"4165e3f publish: record row counts per table (#2794)",
                           "2c189a4 alerts: link the task log in the failure message",
                           "0c241a3 sensor: retries 3 -> 5 for the export wait",
                           "7709f1a sensor: poke timeout 6h -> 2h, fail fast when missing",
                           "fc0f6f8 sensor: log the wait before each poke"}) {
    absl::StrAppend(&log, line, "\n");
  }
  const std::vector<Item> items =
      MessageThenOutput("Show me the orders DAG's history.", log, "git");
  const RecallQuery q =
      ParseRecallQuery("Which commit cut the sensor's wait from six hours down to two hours?");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 100, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("7709f1a"));
}

TEST_F(RecallTest, ADigitOfACompoundIsAWordOfTheQuestion) {
  // "8-CPU": the digit says which of otherwise alike lines is meant (a Go
  // benchmark's "-8" suffix); a lone letter of a compound says nothing.
  const RecallQuery q = ParseRecallQuery("What did the parallel append benchmark take on the 8-CPU run?");
  EXPECT_THAT(q.terms, ::testing::Contains("8"));
  EXPECT_THAT(ParseRecallQuery("the x-ray report").terms, Not(::testing::Contains("x")));

  std::string output = "goos: linux\n";
  for (const char* cpus : {"", "-4", "-8"}) {
    absl::StrAppend(&output, "BenchmarkAppendParallel", cpus, "   \t  237348\t  ",
                    cpus[0] == 0 ? "3932.6" : cpus[1] == '4' ? "1101.2" : "643.5", " ns/op\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the batcher benchmarks, please."),
      Stored(2, Role::kTool, ItemKind::kToolResult, output, "bash")};
  RecallLimits limits;
  limits.max_tokens = 400;
  limits.max_passages = 1;
  const std::vector<RecalledPassage> passages =
      RankPassages(q, HitsFor(items, q), *tokenizer_, limits);
  ASSERT_EQ(passages.size(), 1u);
  EXPECT_THAT(passages[0].text, HasSubstr("643.5"));
}

TEST_F(RecallTest, BringsBackTheAskedServicesGuardAndChecksumFirst) {
  const std::vector<Item> items = History();
  const RecallQuery q = ParseRecallQuery(
      "For orders-api: what guard value did the config show, and what was the dry-run "
      "checksum?");
  RecallLimits limits;
  limits.max_tokens = 200;
  const std::vector<RecalledPassage> got = RankPassages(q, HitsFor(items, q), *tokenizer_, limits);
  ASSERT_GE(got.size(), 2u);
  // The two first picks answer the two parts, from orders-api's outputs.
  EXPECT_THAT((std::vector<std::string>{got[0].text, got[1].text}),
              UnorderedElementsAre("  guard_value: 1001",
                                   "dry-run summary for orders-api: verification checksum "
                                   "sha256:or77aa1002"));
  const std::string text = RenderRecalled(got);
  EXPECT_THAT(text, HasSubstr("[#6, turn 3, result of shell: \"# orders-api: migration settings\"]"
                              "\n    guard_value: 1001"));
  EXPECT_LE(tokenizer_->CountTokens(text) + 1, limits.max_tokens);
}

TEST_F(RecallTest, AnUnrelatedQuestionRecallsNothing) {
  const std::vector<Item> items = History();
  for (const char* question : {"Can you write me a haiku about autumn leaves?",
                               "What is the capital of Norway?", "thanks, that is all for today"}) {
    const RecallQuery q = ParseRecallQuery(question);
    RecallLimits limits;
    limits.max_tokens = 500;
    EXPECT_THAT(RankPassages(q, HitsFor(items, q), *tokenizer_, limits), IsEmpty()) << question;
  }
}

TEST_F(RecallTest, SkipsWhatTheViewShowsAndKeepsToItsBudget) {
  const std::vector<Item> items = History();
  const RecallQuery q = ParseRecallQuery("orders-api guard value and dry-run checksum");
  RecallLimits limits;
  limits.max_tokens = 500;
  limits.shown = {6};  // orders-api's config is in the view verbatim
  const std::vector<RecalledPassage> got = RankPassages(q, HitsFor(items, q), *tokenizer_, limits);
  ASSERT_FALSE(got.empty());
  for (const RecalledPassage& p : got) EXPECT_NE(p.sequence, 6);
  EXPECT_THAT(got[0].text, HasSubstr("sha256:or77aa1002"));

  limits.shown.clear();
  for (int64_t budget : {0, 20, 60, 120}) {
    limits.max_tokens = budget;
    const std::vector<RecalledPassage> some =
        RankPassages(q, HitsFor(items, q), *tokenizer_, limits);
    if (some.empty()) continue;
    EXPECT_LE(tokenizer_->CountTokens(RenderRecalled(some)) + 1, budget);
  }
  limits.max_tokens = 0;
  EXPECT_THAT(RankPassages(q, HitsFor(items, q), *tokenizer_, limits), IsEmpty());
}

// A summary that quotes the user's old question shows it already: the
// room goes to what the view does not show.
TEST_F(RecallTest, SkipsWhatTheViewsSummariesQuote) {
  std::vector<Item> items = History();
  items.push_back(Stored(100, Role::kUser, ItemKind::kMessage,
                         "What guard value does orders-api run with? Asking for the cutover."));
  const RecallQuery q = ParseRecallQuery("What guard value does orders-api run with?");
  RecallLimits limits;
  limits.max_tokens = 500;
  auto sequences = [&] {
    std::vector<int64_t> out;
    for (const RecalledPassage& p : RankPassages(q, HitsFor(items, q), *tokenizer_, limits)) {
      out.push_back(p.sequence);
    }
    return out;
  };
  EXPECT_THAT(sequences(), ::testing::Contains(100));
  limits.shown_text =
      "Summary of items #1-#99:\nUser: What guard value does orders-api run with? Asking for "
      "the cutover. Next is search-index.\n";
  EXPECT_THAT(sequences(), Not(::testing::Contains(100)));
  EXPECT_THAT(sequences(), ::testing::Contains(6));  // orders-api's config
  // A sentence of the passage the view does not hold: it is recalled.
  limits.shown_text = "User: What guard value does orders-api run with?\n";
  EXPECT_THAT(sequences(), ::testing::Contains(100));
}

TEST_F(RecallTest, LongLinesAreCutIntoPassagesOnCharacterBoundaries) {
  std::string line;
  for (int i = 0; i < 60; ++i) absl::StrAppend(&line, "f\xC3\xBCllwort", i, " ");
  line += "the zebra-7 marker sits here beside quokka text";
  std::vector<Item> items = {Stored(1, Role::kUser, ItemKind::kMessage, line)};
  const RecallQuery q = ParseRecallQuery("where is the zebra-7 quokka marker?");
  RecallLimits limits;
  limits.max_tokens = 400;
  const std::vector<RecalledPassage> got = RankPassages(q, HitsFor(items, q), *tokenizer_, limits);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(got[0].text.size(), 400u);
  EXPECT_THAT(got[0].text, HasSubstr("zebra-7 marker"));
  EXPECT_THAT(got[0].text, Not(HasSubstr("llwort0 ")));
  EXPECT_TRUE(IsValidUtf8(RenderRecalled(got)));
}

TEST_F(RecallTest, AQuantityQuestionIsAnsweredByTheSettingsFigure) {
  EXPECT_TRUE(ParseRecallQuery("How many seconds of skew do we allow?").asks_quantity);
  EXPECT_TRUE(ParseRecallQuery("how long is the TTL?").asks_quantity);
  EXPECT_FALSE(ParseRecallQuery("Which commit added the lookup?").asks_quantity);
  EXPECT_FALSE(ParseRecallQuery("How was the long run?").asks_quantity);
  // A unit said last, alone, asks for a figure in it.
  EXPECT_TRUE(ParseRecallQuery("What was the worst p99 the canary hit? seconds").asks_quantity);
  EXPECT_TRUE(ParseRecallQuery("What does the target group wait before it lets go? Secs.")
                  .asks_quantity);
  EXPECT_FALSE(ParseRecallQuery("Which seconds counter did the dashboard use?").asks_quantity);
  // A percentile is a figure, and its worst is the `max` a summary writes.
  const RecallQuery worst = ParseRecallQuery("What was the worst p99 in that six-hour window?");
  EXPECT_TRUE(worst.asks_quantity);
  EXPECT_THAT(worst.terms, Contains("max"));
  EXPECT_TRUE(ParseRecallQuery("What P99.9 did the canary settle at?").asks_quantity);
  EXPECT_FALSE(ParseRecallQuery("Which pod ran the p2p test?").asks_quantity);
  // A measure's noun asked for is a figure ("what chunk size is defined").
  EXPECT_TRUE(ParseRecallQuery("What chunk size is defined for bulk sends?").asks_quantity);
  EXPECT_TRUE(ParseRecallQuery("Which timeout does the client use?").asks_quantity);
  EXPECT_FALSE(ParseRecallQuery("Which commit changed the pool size?").asks_quantity);
  // A module read with line numbers: a comment and a test named after the
  // setting hold the question's words; the constant's line holds one of
  // them and the figure, which is what is asked for.
  std::string module;
  for (int i = 1; i <= 40; ++i) {
    absl::StrAppend(&module, "    ", i, "\t",
                    i == 4    ? "on the callbacks partners send us, with the same clock-skew tolerance."
                    : i == 33 ? "SIGNATURE_TOLERANCE_S = 510"
                    : i == 57 ? "    if abs(now - ts) > SIGNATURE_TOLERANCE_S + grace(7):"
                              : "    pass",
                    "\n");
  }
  std::string tests;
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&tests, "tests/test_signing.py::test_case_", i, " PASSED\n");
  }
  tests += "tests/test_endpoints.py::test_clock_skew_tolerated_in_tests PASSED\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Open the webhooks signing module."),
      Stored(2, Role::kTool, ItemKind::kToolResult, module, "read_file"),
      Stored(3, Role::kTool, ItemKind::kToolResult, tests, "bash")};
  const RecallQuery q =
      ParseRecallQuery("How many seconds of clock skew does the webhook signing code tolerate?");
  HistoryHits hits = HitsFor(items, q);
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  hits.calls[2] = R"({"path": "services/webhooks/app/signing.py"})";
  hits.calls[3] = R"({"cmd": "poetry run pytest -v"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 110);
  std::vector<std::string> texts;
  for (const RecalledPassage& p : got) texts.push_back(p.text);
  EXPECT_THAT(texts, ::testing::Contains(HasSubstr("SIGNATURE_TOLERANCE_S = 510"))) << RenderRecalled(got);
}

// A record's fields ("name | value", as psql's expanded display writes
// them) are settings of a figure; the field holding the question's words
// is shown with the fields around it, which may be the figure asked for
// by other names ("disagreed" for `mismatched_accounts`).
TEST_F(RecallTest, ARecordsFieldIsShownWithTheFieldsAroundIt) {
  std::string record = "-[ RECORD 1 ]-------+------------\n";
  record += "accounts_compared   | 448562\n";
  record += "mismatched_accounts | 333\n";
  record += "points_diff_total   | -22663\n";
  record += "max_abs_diff        | 3000\n";
  std::string rows = " store | member | points\n-------+--------+-------\n";
  for (int i = 0; i < 20; ++i) absl::StrAppend(&rows, " 0", 100 + i, "  | m", i, "     | ", i * 7, "\n");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Some members' points balances are off between the two systems. Compare them."),
      Stored(2, Role::kTool, ItemKind::kToolResult, record, "psql"),
      Stored(3, Role::kTool, ItemKind::kToolResult, rows, "psql")};
  const RecallQuery q =
      ParseRecallQuery("How many members had points totals that disagreed between the systems?");
  HistoryHits hits = HitsFor(items, q);
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  hits.calls[2] = R"({"query": "SELECT count(*) AS accounts_compared FROM points_compare"})";
  hits.calls[3] = R"({"query": "SELECT store, member, points FROM points"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 120);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("mismatched_accounts | 333"));
  // A table's row is no record's field: its neighbours are not shown.
  for (const RecalledPassage& p : got) {
    if (p.sequence == 3) EXPECT_EQ(p.text.find('\n'), std::string::npos) << p.text;
  }
}

// A question for a quantity names a record by one of its fields (the task's
// name): the record's figures beside that field are the answer, whatever
// they are called ("dropped" for `NumberOfMissedRuns`).
TEST_F(RecallTest, AQuantityQuestionIsAnsweredByTheFiguresOfTheRecordItNames) {
  std::string tasks;
  const char* const kTasks[] = {"Defrag", "EodUpload", "PriceImport", "LogRotate"};
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&tasks, "LastRunTime        : 02/05/2026 23:1", i, ":02\n",
                    "NumberOfMissedRuns : ", i == 1 ? 12 : 0, "\n",
                    "TaskName           : ", kTasks[i], "\n\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Ripon's end-of-day upload is overdue. Show me the scheduled tasks."),
      Stored(2, Role::kTool, ItemKind::kToolResult, tasks, "powershell")};
  const RecallQuery q =
      ParseRecallQuery("How many EOD uploads did Ripon's back office drop before the fix?");
  HistoryHits hits = OutputAfterMessage(items, q);
  const std::vector<RecalledPassage> got = Rank(q, hits, 200);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("NumberOfMissedRuns : 12")) << RenderRecalled(got);
}

// A log line's message sets a figure as a setting does, its time stamp and
// level aside ("2026-05-12 00:57:37,952 INFO  order lines written: 42838"),
// under a name of a few words.
TEST_F(RecallTest, ALogLinesMessageSetsAFigure) {
  std::string log = "2026-05-12 00:45:01,222 INFO  run start (attempt 1 of 2)\n";
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&log, "2026-05-12 00:5", i % 10, ":1", i % 10, ",120 INFO  ordering: ",
                    1200 + i * 37, " lines proposed for store 0", 700 + i, ", ", i,
                    " capped at max_order_value_gbp\n");
  }
  log += "2026-05-12 00:57:37,952 INFO  order lines written: 42838\n";
  log += "2026-05-12 00:57:38,517 INFO  EDI interchange ORD0512285 sent to wms-gw01\n";
  // The job's configuration sets a figure named by the question's words.
  std::string config = "job: replenishment\nordering:\n";
  for (int i = 0; i < 12; ++i) absl::StrAppend(&config, "  store_group_", i, ": north\n");
  config += "  min_order_lines_per_store: 25\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Read Doncaster's replenishment config."),
      Stored(2, Role::kTool, ItemKind::kToolResult, config, "read_file"),
      Stored(3, Role::kUser, ItemKind::kMessage, "And Doncaster's last replenishment run?"),
      Stored(4, Role::kTool, ItemKind::kToolResult, log, "bash")};
  const RecallQuery q =
      ParseRecallQuery("How big was the order Doncaster's replenishment sent, in lines?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.exchange_terms[4] = SearchTerms(items[2].data.content);
  EXPECT_THAT(First(q, hits, 300), HasSubstr("order lines written: 42838"));
}

// A question for a digest is answered by an output stating few, found
// through its exchange, though the digest's line holds none of the
// question's words (`checksum | c6e95c33...` for "the md5"); a git log,
// whose every line states one, is not.
TEST_F(RecallTest, AnOutputsFewDigestsAnswerAQuestionForOne) {
  std::string record =
      "-[ RECORD 1 ]---+---------------------------------\n"
      "month           | 2026-11\n"
      "row_total       | 59007\n"
      "checksum        | c6e95c332a52e77ca24de56da2cdc239\n"
      "net_cents_total | 37583307411\n"
      "taken_at        | 2026-12-02 09:41:07\n\n"
      "     ds     | row_total | net_cents\n"
      "------------+-----------+-----------\n";
  for (int d = 1; d <= 30; ++d) {
    absl::StrAppend(&record, " 2026-11-", d < 10 ? "0" : "", d, " |      ", 1300 + d * 17,
                    " | ", 500000000 + d * 7919, "\n");
  }
  const RecallQuery q = ParseRecallQuery(
      "I need the md5 from the November snapshot of the revenue table, before anything was "
      "rebuilt.");
  ASSERT_TRUE(q.asks_hash);
  const std::string asked =
      "Before we rebuild anything in revenue, snapshot a checksum of the revenue table for "
      "November.";
  std::vector<Item> items = MessageThenOutput(asked, record, "psql");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 300),
              HasSubstr("c6e95c332a52e77ca24de56da2cdc239"));
  // A log of many commits says nothing by its hashes alone.
  std::string log;
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&log, "a1b2c", 10 + i, "e tidy the loader, step ", i, "\n");
  }
  items = MessageThenOutput(asked, log, "git");
  EXPECT_THAT(RenderRecalled(Rank(q, OutputAfterMessage(items, q), 300)),
              Not(HasSubstr("tidy the loader")));
}

// "How often" is answered by a setting of an interval, in an output whose
// exchange names the subject, whatever other figures the file sets.
TEST_F(RecallTest, HowOftenIsAnsweredByAnInterval) {
  EXPECT_TRUE(ParseRecallQuery("How often does the sensor re-check the bucket?").asks_frequency);
  EXPECT_TRUE(ParseRecallQuery("how frequently do we poll?").asks_frequency);
  EXPECT_FALSE(ParseRecallQuery("How long does the sensor wait?").asks_frequency);
  std::string dag;
  for (int i = 1; i <= 60; ++i) {
    absl::StrAppend(&dag, "    ", i, "\t",
                    i == 40   ? "        wait = S3KeySensor("
                    : i == 41 ? "            bucket_name=RAW_BUCKET,"
                    : i == 42 ? "            mode=\"reschedule\","
                    : i == 43 ? "            poke_interval=840,"
                    : i == 44 ? "            timeout=60 * 240,"
                    : i == 45 ? "            retries=3,"
                              : "    pass",
                    "\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me the orders DAG and its manifest sensor."),
      Stored(2, Role::kTool, ItemKind::kToolResult, dag, "read_file")};
  const RecallQuery q =
      ParseRecallQuery("How often does the orders manifest sensor look at the bucket again?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"path": "dags/orders_nightly.py"})";
  EXPECT_THAT(First(q, hits, 300), HasSubstr("poke_interval=840"));
}

// "The 99th percentile" is written `p99` where it is measured; "how long
// had it been going" asks how long something took.
TEST_F(RecallTest, APercentileIsSearchedAsAMeasurementWritesIt) {
  EXPECT_THAT(ParseRecallQuery("Where did the 99th percentile of lifetime value come out?").terms,
              ::testing::Contains("p99"));
  EXPECT_THAT(ParseRecallQuery("the 95th-percentile latency").terms, ::testing::Contains("p95"));
  EXPECT_THAT(ParseRecallQuery("the percentile of the 99th run").terms,
              Not(::testing::Contains("p99")));
  EXPECT_TRUE(ParseRecallQuery("How long had the all-reduce been going before the watchdog "
                               "gave up?")
                  .asks_duration);
  std::string record = "-[ RECORD 1 ]+---------\n";
  for (const char* field : {"population  | 48211", "p50_value   | 412.08",
                            "p90_value   | 1273.97", "p99_value   | 3323.19",
                            "max_value   | 62351.48", "null_values | 300"}) {
    absl::StrAppend(&record, field, "\n");
  }
  std::string cohorts = " cohort_month | customers | p50 | p90 | mean_value\n";
  for (int i = 1; i <= 12; ++i) {
    absl::StrAppend(&cohorts, " 2026-", i, "      | ", 1000 + i, " | ", 300 + i, " | ", 900 + i,
                    " | ", 500 + i, "\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Sanity-check the LTV distribution: percentiles, and by cohort."),
      Stored(2, Role::kTool, ItemKind::kToolResult, record, "sql"),
      Stored(3, Role::kTool, ItemKind::kToolResult, cohorts, "sql")};
  const RecallQuery q = ParseRecallQuery(
      "Where did the 99th percentile of customer lifetime value come out in the LTV check?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.exchange_terms[3] = SearchTerms(items[0].data.content);
  EXPECT_THAT(First(q, hits, 300), HasSubstr("p99_value   | 3323.19"));
  // "The top 1%" is cut off at the 99th percentile.
  EXPECT_THAT(ParseRecallQuery("the top 5 percent of orders").terms, ::testing::Contains("p95"));
  EXPECT_THAT(ParseRecallQuery("the top shelf").terms, Not(::testing::Contains("p99")));
  const RecallQuery top = ParseRecallQuery("Where did the top-1% cutoff land in the LTV check?");
  HistoryHits top_hits = OutputAfterMessage(items, top);
  top_hits.exchange_terms[3] = SearchTerms(items[0].data.content);
  EXPECT_THAT(First(top, top_hits, 300), HasSubstr("p99_value   | 3323.19"));
}

// A setting is named by the keys it sits under too ("prod:" over
// "threads: 7"), and the nearest of them that holds the question's words
// is shown above it.
TEST_F(RecallTest, ASettingIsNamedByTheKeysItSitsUnder) {
  const std::string profiles =
      "books:\n"
      "  target: dev\n"
      "  outputs:\n"
      "    dev:\n"
      "      type: redshift\n"
      "      schema: dbt_dev\n"
      "      threads: 16\n"
      "      keepalives_idle: 0\n"
      "    production:\n"
      "      type: redshift\n"
      "      schema: books\n"
      "      threads: 7\n"
      "      keepalives_idle: 0\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me the finance dbt project's profiles."),
      Stored(2, Role::kTool, ItemKind::kToolResult, profiles, "read_file")};
  const RecallQuery q =
      ParseRecallQuery("How many threads does the prod target of the books profile get?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"path": "dbt_books/profiles.yml"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 300, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("threads: 7")) << RenderRecalled(got);
  EXPECT_THAT(got[0].text, HasSubstr("production:")) << RenderRecalled(got);
  EXPECT_THAT(got[0].text, Not(HasSubstr("threads: 16"))) << RenderRecalled(got);
}

// A figure set under a key that names what is asked answers, though its
// own line holds none of the question's words ("days = 400 -> 60" under
// "expiration {"); not the settings of a block whose own lines answer.
TEST_F(RecallTest, AFigureUnderANamingKeyAnswers) {
  const std::string plan =
      "  # aws_s3_bucket_lifecycle_configuration.raw will be updated in-place\n"
      "  ~ resource \"aws_s3_bucket_lifecycle_configuration\" \"raw\" {\n"
      "      ~ rule {\n"
      "            status = \"Enabled\"\n"
      "          ~ expiration {\n"
      "              ~ days = 400 -> 60\n"
      "            }\n"
      "          ~ noncurrent_version_transition {\n"
      "              ~ noncurrent_days = 30 -> 7\n"
      "            }\n"
      "        }\n"
      "    }\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the plan for the lake retention terraform."),
      Stored(2, Role::kTool, ItemKind::kToolResult, plan, "bash")};
  const RecallQuery q = ParseRecallQuery(
      "In the lake retention terraform plan, what was the expiry on raw partitions going from "
      "and to?");
  const std::string got = RenderRecalled(Rank(q, OutputAfterMessage(items, q), 300));
  EXPECT_THAT(got, HasSubstr("days = 400 -> 60")) << got;
  // A block whose own line answers keeps the place: its siblings are not
  // added ("batch_size" asked, "poll_interval_s" beside it).
  const std::string hcl =
      "service {\n"
      "  batch {\n"
      "    batch_size = 1750\n"
      "    poll_interval_s = 15\n"
      "    max_inflight = 16\n"
      "  }\n"
      "}\n";
  std::vector<Item> config = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Read the event bus service config."),
      Stored(2, Role::kTool, ItemKind::kToolResult, hcl, "read_file")};
  const RecallQuery size = ParseRecallQuery("How big are the event bus service's batches?");
  const std::string sized = RenderRecalled(Rank(size, OutputAfterMessage(config, size), 300));
  EXPECT_THAT(sized, HasSubstr("batch_size = 1750")) << sized;
  EXPECT_THAT(sized, Not(HasSubstr("max_inflight"))) << sized;
}

// A day the question names ("the 2 Dec file") is held by a line, or by a
// call, that writes it as a system does ("PRC_20261202_full.csv.gz",
// "dt=2026-12-01/"); not by a log line's time stamp.
TEST_F(RecallTest, ADayNamedIsHeldWhereASystemWritesIt) {
  const RecallQuery named = ParseRecallQuery("What did the run on 2 Dec and on March 8th write?");
  ASSERT_EQ(named.days.size(), 2u);
  EXPECT_EQ(named.days[0].month, 12);
  EXPECT_EQ(named.days[0].day, 2);
  EXPECT_EQ(named.days[1].month, 3);
  EXPECT_EQ(named.days[1].day, 8);
  std::string sums;
  for (int d = 30; d >= 17; --d) {  // Earlier days' files, each its digest.
    absl::StrAppend(&sums, std::string(60, 'c'), 1000 + d, "  PRC_202611", d, "_full.csv.gz\n");
  }
  absl::StrAppend(&sums, std::string(64, 'a'), "  PRC_20261202_full.csv.gz\n",
                  std::string(64, 'b'), "  PRC_20261201_full.csv.gz\n");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Compare the supplier's full price files' hashes with their manifests."),
      Stored(2, Role::kTool, ItemKind::kToolResult, sums, "bash")};
  const RecallQuery q =
      ParseRecallQuery("What SHA-256 did we compute for the 2 Dec full price file?");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 300),
              HasSubstr(std::string(64, 'a') + "  PRC_20261202"));
  // A log line's time stamp is no day named: every line of the day has one.
  items[1] = Stored(2, Role::kTool, ItemKind::kToolResult,
                    std::string(64, 'b') + "  PRC_20261201_full.csv.gz\n" +
                        "2026-12-02 05:24:18 INFO full set read\n",
                    "bash");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 300), Not(HasSubstr("05:24:18")));
  // The call writes the day: its output is of that day.
  std::vector<Item> listings = {
      Stored(1, Role::kUser, ItemKind::kMessage, "List the web sessions output."),
      Stored(2, Role::kTool, ItemKind::kToolResult, "Total Objects: 3406\n   Total Size: 123.4 GiB\n",
             "bash"),
      Stored(3, Role::kTool, ItemKind::kToolResult, "Total Objects: 42\n   Total Size: 1.1 GiB\n",
             "bash")};
  const RecallQuery objects =
      ParseRecallQuery("How many objects did S3 report under the Dec 1 web sessions output?");
  HistoryHits hits = HitsFor(listings, objects);
  hits.items = 1000;
  hits.exchange_terms[2] = SearchTerms(listings[0].data.content);
  hits.exchange_terms[3] = SearchTerms(listings[0].data.content);
  // Whichever listing comes first.
  for (int64_t dec1 : {2, 3}) {
    hits.calls[dec1] = R"({"cmd": "aws s3 ls s3://lake/web_sessions/dt=2026-12-01/ --summarize"})";
    hits.calls[5 - dec1] =
        R"({"cmd": "aws s3 ls s3://lake/web_sessions/dt=2026-12-02/ --summarize"})";
    EXPECT_THAT(First(objects, hits, 300), HasSubstr(dec1 == 2 ? "3406" : "42")) << dec1;
  }
}

// A month named alone ("February's cost") is any day of it: held by a
// line writing a date in it, or by the lines of a record whose first date
// is in it (a cost report's period over its amount). "May" is a month only
// as a name.
TEST_F(RecallTest, AMonthNamedAloneIsHeldByItsRecord) {
  const RecallQuery feb = ParseRecallQuery("What was February's cost for the bucket?");
  ASSERT_EQ(feb.days.size(), 1u);
  EXPECT_EQ(feb.days[0].month, 2);
  EXPECT_EQ(feb.days[0].day, 0);
  EXPECT_EQ(ParseRecallQuery("How many did the first run in early May leave?").days.size(), 1u);
  EXPECT_THAT(ParseRecallQuery("How long may each chunk take?").days, IsEmpty());
  EXPECT_THAT(ParseRecallQuery("May I see the cost again?").days, IsEmpty());
  EXPECT_THAT(ParseRecallQuery("Question: May I see it?").days, IsEmpty());
  EXPECT_THAT(ParseRecallQuery("What sep does the CSV export use?").days, IsEmpty());
  std::string report = "{\n    \"ResultsByTime\": [\n";
  for (int m = 10; m <= 15; ++m) {
    const int month = (m - 1) % 12 + 1, next = m % 12 + 1;
    const int year = m <= 12 ? 2025 : 2026, next_year = m < 12 ? 2025 : 2026;
    absl::StrAppend(&report, "        {\n            \"TimePeriod\": {\n",
                    "                \"Start\": \"", year, "-", month < 10 ? "0" : "", month,
                    "-01\",\n                \"End\": \"", next_year, "-", next < 10 ? "0" : "",
                    next, "-01\"\n            },\n            \"Total\": {\n",
                    "                \"UnblendedCost\": {\n                    \"Amount\": \"",
                    1000 * m + 7, ".5938\",\n                    \"Unit\": \"USD\"\n",
                    "                }\n            }\n        },\n");
  }
  report += "    ]\n}\n";
  const std::vector<Item> items = MessageThenOutput(
      "What does Cost Explorer say for the checkpoint bucket, month by month?", report, "bash");
  const RecallQuery q =
      ParseRecallQuery("What did Cost Explorer put the checkpoint bucket's cost at in February?");
  // February 2026 is the fifth period (m = 14), whose amount is 14007.
  const std::string got = RenderRecalled(Rank(q, OutputAfterMessage(items, q), 200));
  EXPECT_THAT(got, HasSubstr("14007.5938")) << got;
  // A line writing a year and month alone holds the month too.
  const std::vector<Item> record = MessageThenOutput(
      "Snapshot the revenue table's checksums.",
      "month | 2026-10 | checksum 1f2e3d4c5b6a\nmonth | 2026-11 | checksum 9a8b7c6d5e4f\n"
      "month | 2026-12 | checksum 0a1b2c3d4e5f\n",
      "psql");
  const RecallQuery nov = ParseRecallQuery("What was November's checksum of the revenue table?");
  EXPECT_THAT(First(nov, OutputAfterMessage(record, nov), 200), HasSubstr("9a8b7c6d5e4f"));
}

// A comment right above a setting names it, and is shown above it: the
// comment alone holds the question's words and no figure.
TEST_F(RecallTest, ASettingIsNamedByTheCommentAboveIt) {
  std::string ini;
  const char* const kLines[] = {"[source]",
                                "path = /srv/feeds/contracts",
                                "batch_rows = 5000",
                                "",
                                "[checks]",
                                "; abort when rejected/read goes above reject_guard",
                                "reject_guard = 0.0125",
                                "max_retries = 3",
                                "retry_wait_s = 30"};
  int n = 0;
  for (const char* line : kLines) absl::StrAppend(&ini, "    ", ++n, "\t", line, "\n");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Open the vendor contract feed's job config."),
      Stored(2, Role::kTool, ItemKind::kToolResult, ini, "read_file")};
  const RecallQuery q = ParseRecallQuery(
      "What's the vendor feed's bad-row tolerance, the reject ratio above which the load aborts?");
  const std::string best = First(q, OutputAfterMessage(items, q), 300);
  EXPECT_THAT(best, HasSubstr("reject_guard = 0.0125"));
  EXPECT_THAT(best, HasSubstr("; abort when"));
}

// A table's header holding the question's words comes with its first row:
// the columns name the row's figures.
TEST_F(RecallTest, ATablesHeaderComesWithItsFirstRow) {
  std::string listing =
      "RUN_ID      STARTED               STATUS     ROWS_WRITTEN  ONLINE_LAG\n";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&listing, "mat-", 1000 + i, "    2026-03-04T0", i % 10,
                    ":15:00Z  SUCCEEDED  ", i == 0 ? 15390255 : 14000000 + i * 1111, "      16s\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "List the user engagement view's recent materializations."),
      Stored(2, Role::kTool, ItemKind::kToolResult, listing, "bash")};
  const RecallQuery q = ParseRecallQuery(
      "How many rows had the newest user engagement materialization written?");
  HistoryHits hits = OutputAfterMessage(items, q);
  EXPECT_THAT(First(q, hits, 300), HasSubstr("15390255"));
}

// An item's passages are capped, but a line of the answer's shape (the
// run's time, asked for) has a place after its item's lines that hold
// more of the question's words.
TEST_F(RecallTest, ALineOfTheAnswersShapeIsNotCrowdedOutByItsItem) {
  std::string log;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&log, "2026-03-04T10:38:1", i, ".70Z tests/test_bootstrap.py::test_case_", i,
                    " flaky bootstrap seed test FAILED\n");
  }
  log += "2026-03-04T10:38:56.84Z ======== 1 failed, 653 passed in 242.43s (0:04:02) ========\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Is the eval harness fix green in CI? Show me the tail of the test job's log."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "bash")};
  const RecallQuery q = ParseRecallQuery(
      "How long did the eval harness CI run take, the one where the flaky bootstrap test failed?");
  HistoryHits hits = OutputAfterMessage(items, q);
  const std::vector<RecalledPassage> got = Rank(q, hits, 600);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("in 242.43s")) << RenderRecalled(got);
}

// A line of the answer's shape answers where the item names the subject
// itself (a DAG file that says "orders" and "manifest" on its lines), as
// well as where its exchange does.
TEST_F(RecallTest, AShapeAnswersWhereTheItemItselfNamesTheSubject) {
  std::string dag;
  for (int i = 1; i <= 40; ++i) {
    absl::StrAppend(&dag, "    ", i, "\t",
                    i == 20   ? "        wait_for_orders_manifest = S3KeySensor("
                    : i == 21 ? "            bucket_key=\"orders/_manifest.json\","
                    : i == 22 ? "            mode=\"reschedule\","
                    : i == 23 ? "            soft_fail=False,"
                    : i == 24 ? "            poke_interval=840,"
                    : i == 25 ? "            timeout=60 * 240,"
                              : "    pass",
                    "\n");
  }
  std::vector<Item> items = {Stored(1, Role::kUser, ItemKind::kMessage, "Next file, please."),
                             Stored(2, Role::kTool, ItemKind::kToolResult, dag, "read_file")};
  const RecallQuery q =
      ParseRecallQuery("How often does the orders manifest sensor look at the bucket again?");
  HistoryHits hits = OutputAfterMessage(items, q);
  const std::vector<RecalledPassage> got = Rank(q, hits, 300);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("poke_interval=840")) << RenderRecalled(got);
}

// A line naming its subject itself and holding a value the question does
// not ("dry-run summary for billing-ledger: verification checksum
// sha256:..."), in an output whose call names nothing more, ranks as a
// value line (and, asked for a checksum, as the answer's shape): above the
// talk around it, which names every word of the question and no value.
// (AJsonKeyStatesATotal: a line holding no value but the subject's own
// name, "webdocs-v9", is not one.)
TEST_F(RecallTest, ALineNamingItsSubjectAndHoldingAValueRanksAsAValueLine) {
  std::vector<Item> items;
  int64_t seq = 0;
  auto add = [&](Role role, ItemKind kind, std::string content, std::string tool = "") {
    items.push_back(Stored(++seq, role, kind, std::move(content), std::move(tool)));
  };
  add(Role::kUser, ItemKind::kMessage, "Read each service's migration config.");
  const char* services[] = {"billing-ledger", "session-store", "media-cdn", "orders-db",
                            "search-index", "audit-log"};
  for (int i = 0; i < 6; ++i) {
    add(Role::kTool, ItemKind::kToolResult,
        absl::StrCat("# ", services[i], ": migration settings\nservice: ", services[i],
                     "\n  # cutover guard\n  guard_value: ", 1318 + 1111 * i, "\n"),
        "shell");
  }
  add(Role::kUser, ItemKind::kMessage, "Dry runs next, one per service.");
  for (int i = 0; i < 6; ++i) {
    std::string log;
    for (int r = 0; r < 30; ++r) {
      absl::StrAppend(&log, "INFO copy ledger_", r, ": ", 1000 + r * 37, " rows in ", 200 + r,
                      " ms (batch ", r % 7, ")\n");
    }
    absl::StrAppend(&log, "dry-run summary for ", services[i],
                    ": verification checksum sha256:", i == 0 ? "aece3e47de6e169f" : "0b1c2d3e4f5a6978",
                    "\n");
    add(Role::kAssistant, ItemKind::kToolCall,
        absl::StrCat("{\"args\": [\"--dry-run\", \"", services[i], "\"]}"), "migrate");
    add(Role::kTool, ItemKind::kToolResult, log, "migrate");
    // The talk around each: every word of the question, no value.
    add(Role::kAssistant, ItemKind::kMessage,
        absl::StrCat("The dry run for ", services[i], " finished; its verification checksum "
                     "is in the output and the guard value in its config still holds."));
  }
  const RecallQuery q = ParseRecallQuery(
      "Going back to billing-ledger: what guard value did its config show, and what was the "
      "dry-run checksum?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  const std::vector<RecalledPassage> got = Rank(q, hits, 400);
  ASSERT_GE(got.size(), 2u);
  // The two first picks answer the two parts; the talk that names every
  // word of the question and no value comes after them. (The output's one
  // digest is of the answer's shape, FewDigests: its passage holds the
  // line before it too, as a value's does.)
  EXPECT_THAT((std::vector<std::string>{got[0].text, got[1].text}),
              UnorderedElementsAre("  guard_value: 1318",
                                   "INFO copy ledger_29: 2073 rows in 229 ms (batch 1)\n"
                                   "  dry-run summary for billing-ledger: verification "
                                   "checksum sha256:aece3e47de6e169f"))
      << RenderRecalled(got);
}

// "Which day", "what night", or a question opening with "when" asks for a
// day: a line naming a weekday or a day of a month ranks as the answer's
// shape, above the lines holding more of the question's words and no day.
TEST_F(RecallTest, AQuestionForADayIsAnsweredByALineNamingOne) {
  EXPECT_TRUE(ParseRecallQuery("On which day does ops want to roll out the collector?").asks_date);
  EXPECT_TRUE(ParseRecallQuery("What night did we pencil in for the pricing DB cutover?").asks_date);
  EXPECT_TRUE(ParseRecallQuery("When is the identity provider sync cutover planned for?").asks_date);
  EXPECT_FALSE(ParseRecallQuery("When does the export kick off?").asks_date);  // A time of day.
  EXPECT_FALSE(ParseRecallQuery("How many rows did the day's load write?").asks_date);
  std::string code;
  for (int i = 0; i < 6; ++i) {
    absl::StrAppend(&code, "// The new ingest collector's frame ", i,
                    ": ops run it per region (ingest/collector/frame.go)\n");
  }
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Ops wants to roll the new collector out on Tuesday 9 December. Anything you'd do "
             "differently?"),
      Stored(2, Role::kTool, ItemKind::kToolResult, code, "read_file")};
  const RecallQuery q =
      ParseRecallQuery("On which day does ops want to roll out the new ingest collector?");
  EXPECT_THAT(Best(q, items, 200), HasSubstr("Tuesday 9 December"));
}

// A reply's line of the answer's shape answers the question that led to
// it (HistorySearch::replies brings the reply with its turn's terms): it
// outranks that question, though the question holds more of the words.
TEST_F(RecallTest, AReplysLineOfTheAnswersShapeAnswersTheQuestionThatLedToIt) {
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "What would a cutover slot for the identity provider sync look like? Emeric would "
             "prefer a weeknight, after 20:00."),
      Stored(2, Role::kAssistant, ItemKind::kMessage,
             "Keeping the legacy side read-only for a while costs little.\n\nGiven the rule "
             "about Fridays, I would propose Monday 29 March, starting at 21:00 UTC, with a write "
             "freeze of half an hour. The dry-run result goes to #plat2-cutovers first.")};
  const RecallQuery q = ParseRecallQuery("When is the identity provider sync cutover planned for?");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 200), HasSubstr("Monday 29 March"));
}

// A question about the conversation's start is answered by its opening
// messages (HistorySearch::opening), whatever words they hold, in a long
// history where its words would otherwise make it a question about
// something else.
TEST_F(RecallTest, AQuestionAboutTheStartIsAnsweredByTheOpeningMessages) {
  for (const char* asks :
       {"What surname did I introduce myself with when we started this morning?",
        "What company name did I give at the start?", "Which ticket did I open at the outset?"}) {
    EXPECT_TRUE(ParseRecallQuery(asks).asks_start) << asks;
  }
  EXPECT_TRUE(ParseRecallQuery("Which ticket did I mention at the start of this chat?").asks_start);
  EXPECT_TRUE(ParseRecallQuery("What did I say my team was, at the beginning?").asks_start);
  EXPECT_FALSE(ParseRecallQuery("When does the export start?").asks_start);
  EXPECT_FALSE(ParseRecallQuery("What did the log say at the start of the dry run?").asks_start);
  EXPECT_FALSE(ParseRecallQuery("Which rows failed when we started the copy?").asks_start);
  EXPECT_FALSE(
      ParseRecallQuery("Which test failed when we ran the promotions suite first thing?").asks_start);
  EXPECT_TRUE(
      ParseRecallQuery("The company's full name, exactly as I wrote it first thing?").asks_start);
  EXPECT_FALSE(ParseRecallQuery("What surname is on the postmortem?").asks_start);
  // People introduce themselves; a commit introduces a check.
  EXPECT_TRUE(ParseRecallQuery("What name did I give when I introduced myself?").asks_start);
  EXPECT_FALSE(ParseRecallQuery("Which commit introduced the idempotency check?").asks_start);
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Morning! I'm Dara Kowalczyk, backend on the billing team. Big day today."),
      Stored(2, Role::kAssistant, ItemKind::kMessage, "Morning. Where do we start?")};
  for (int i = 0; i < 6; ++i) {
    items.push_back(Stored(3 + i, Role::kUser, ItemKind::kMessage,
                           absl::StrCat("Run the ledger tests again, round ", i, ".")));
  }
  const RecallQuery q = ParseRecallQuery(
      "Silly one: what surname did I introduce myself with when we started this morning?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  EXPECT_EQ(First(q, hits, 200), "");  // Words the history lacks: about something else.
  hits.opening = {1};
  EXPECT_THAT(First(q, hits, 200), HasSubstr("Dara Kowalczyk"));
  // "First thing" asks for the start, not for the first of alike lines:
  // the second opening message is no later one of the first.
  items[2] = Stored(3, Role::kUser, ItemKind::kMessage,
                    "For the forms: we're registered as Kestrel Freight Logistics GmbH.");
  const RecallQuery company =
      ParseRecallQuery("The company's full name, exactly as I wrote it first thing?");
  ASSERT_TRUE(company.asks_first);
  HistoryHits opened = HitsFor(items, company);
  opened.items = 1000;
  opened.opening = {1, 3};
  EXPECT_THAT(First(company, opened, 200), HasSubstr("Kestrel Freight Logistics GmbH"));
}

// Two passages of an item under the same key ("def with_key(...)" over
// two of its lines) show the key once.
TEST_F(RecallTest, TheSectionShowsALineTwoPassagesShareOnce) {
  RecalledPassage a;
  a.sequence = 7;
  a.turn_index = 3;
  a.role = Role::kTool;
  a.kind = ItemKind::kToolResult;
  a.tool_name = "read_file";
  a.text = "    def with_key(self, key):\n      idempotency_key=key,";
  a.offset = 10;
  RecalledPassage b = a;
  b.text = "    def with_key(self, key):\n      requested_at=self.requested_at,";
  b.offset = 40;
  const std::string text = RenderRecalled({b, a});
  EXPECT_THAT(text, HasSubstr("\n      def with_key(self, key):\n      idempotency_key=key,"
                              "\n      requested_at=self.requested_at,"))
      << text;
  size_t keys = 0;
  for (size_t at = text.find("def with_key"); at != std::string::npos;
       at = text.find("def with_key", at + 1)) {
    ++keys;
  }
  EXPECT_EQ(keys, 1u) << text;
}

// A clause naming an earlier change ("once Rupert's date fix was in")
// asks for the later of alike outputs; its words are the change's, said
// in another exchange than the answer's, and are not searched. "How long
// after", "after the first patch" and a clause running on to a sentence's
// end are read as they are.
TEST_F(RecallTest, AClauseNamingAnEarlierChangeAsksForTheLaterOne) {
  const RecallQuery once = ParseRecallQuery(
      "Once Rupert's date fix was in, how long did the settlement job take on staging?");
  EXPECT_TRUE(once.asks_later);
  EXPECT_FALSE(once.asks_first);
  EXPECT_THAT(absl::StrJoin(once.terms, " "),
              AllOf(Not(HasSubstr("rupert")), HasSubstr("settlement")));
  EXPECT_TRUE(
      ParseRecallQuery("After the stacking patch, how many promo tests passed?").asks_later);
  const RecallQuery ad = ParseRecallQuery(
      "How long after someone sees an ad can an order still give it credit?");
  EXPECT_FALSE(ad.asks_later);
  EXPECT_THAT(absl::StrJoin(ad.terms, " "), HasSubstr("credit"));
  const RecallQuery first =
      ParseRecallQuery("Which spec was still failing after the first refund patch?");
  EXPECT_FALSE(first.asks_later);
  EXPECT_THAT(absl::StrJoin(first.terms, " "), HasSubstr("refund"));
  const RecallQuery sentence = ParseRecallQuery(
      "After Anouk changed the batching on the search cluster we re-ran it. What checksum came "
      "out?");
  EXPECT_FALSE(sentence.asks_later);
  EXPECT_THAT(absl::StrJoin(sentence.terms, " "), HasSubstr("cluster"));
  EXPECT_FALSE(ParseRecallQuery("How long did the settlement job take on staging?").asks_later);

  // Two runs of the job, their logs alike but for their figures, with the
  // change in an exchange between them: the later run answers, not the
  // change's diff (whose exchange holds "Rupert", "date" and "fix").
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Kick it off."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "job started, value date 2026-04-22\nsettlement job finished: FAILED, wall time "
             "2h58m37s",
             "bash"),
      Stored(3, Role::kUser, ItemKind::kMessage,
             "Rupert merged his date fix for the settlement job. Show me the diff."),
      Stored(4, Role::kTool, ItemKind::kToolResult,
             "-  value_date: timestamp\n+  value_date: date", "git"),
      Stored(5, Role::kUser, ItemKind::kMessage, "Again, please."),
      Stored(6, Role::kTool, ItemKind::kToolResult,
             "job started, value date 2026-05-04\nsettlement job finished: OK, wall time 3h22m26s",
             "bash")};
  const std::vector<RecalledPassage> got = Rank(once, OutputsAfterMessages(items, once), 120, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("3h22m26s"));
}

// "The first dry run" asks for the earliest of alike outputs: its value
// line ranks above a later run's line that reads the same but for its
// figures (of equals, the newest would be picked).
TEST_F(RecallTest, AQuestionForTheFirstPrefersTheEarliestOfAlikeLines) {
  EXPECT_TRUE(ParseRecallQuery("What did the first dry run report?").asks_first);
  EXPECT_TRUE(ParseRecallQuery("What was the timeout originally?").asks_first);
  EXPECT_FALSE(ParseRecallQuery("What did the dry run report?").asks_first);
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Dry-run the invoice archive."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "copying 40 tables\ninvoice archive dry-run checksum 30a6359", "migctl"),
      Stored(3, Role::kUser, ItemKind::kMessage, "Again, with the tuned profile."),
      Stored(4, Role::kTool, ItemKind::kToolResult,
             "copying 40 tables\ninvoice archive dry-run checksum 9b1c2e4", "migctl")};
  const RecallQuery first =
      ParseRecallQuery("What checksum did the first invoice archive dry run give?");
  EXPECT_THAT(Best(first, items, 200), HasSubstr("30a6359"));
  // Without "first", of equals the newest.
  const RecallQuery any = ParseRecallQuery("What checksum did the invoice archive dry run give?");
  EXPECT_THAT(Best(any, items, 200), HasSubstr("9b1c2e4"));

  // An alike output of another thing, said before, is no earlier one of
  // the thing asked about: its exchange lacks the words naming it.
  const std::vector<Item> checks = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Check the route optimiser's health."),
      Stored(2, Role::kTool, ItemKind::kToolResult, "status: UP\nwork:\n  queueDepth: 407", "curl"),
      Stored(3, Role::kUser, ItemKind::kMessage, "Now the label printers' health."),
      Stored(4, Role::kTool, ItemKind::kToolResult, "status: UP\nwork:\n  queueDepth: 1951", "curl"),
      Stored(5, Role::kUser, ItemKind::kMessage, "The label printers' health once more."),
      Stored(6, Role::kTool, ItemKind::kToolResult, "status: UP\nwork:\n  queueDepth: 2210", "curl")};
  const RecallQuery printers =
      ParseRecallQuery("When we first checked the label printers' health, how deep was the queue?");
  EXPECT_TRUE(printers.asks_first);
  const HistoryHits hits = OutputsAfterMessages(checks, printers);
  std::string depth;  // The best passage showing a queue's depth.
  for (const RecalledPassage& p : Rank(printers, hits, 400)) {
    if (absl::StrContains(p.text, "queueDepth")) {
      depth = p.text;
      break;
    }
  }
  EXPECT_THAT(depth, HasSubstr("1951"));
}

// "By the final warning" asks for the last of an output's alike lines, as
// "the first dry run" asks for the earliest output. "The last step before
// it went NaN" and "the last wave's shops" ask for no output's last line.
TEST_F(RecallTest, AQuestionForTheLastPrefersTheLastOfAnOutputsAlikeLines) {
  auto last = [](absl::string_view question) { return ParseRecallQuery(question).asks_last; };
  EXPECT_TRUE(last("What had the counter reached by the final warning?"));
  EXPECT_TRUE(last("What did the last KV-cache warning say?"));
  EXPECT_TRUE(last("What was the figure at the bottom of that tail?"));
  EXPECT_FALSE(last("What was the grad norm on the last step before it went NaN?"));
  EXPECT_FALSE(last("What was the last line before the crash?"));
  EXPECT_FALSE(last("By what time must prices be in for the last wave's shops?"));
  EXPECT_FALSE(last("How many order lines did last night's run write?"));
  EXPECT_FALSE(last("What was the last warning line before the crash?"));
  EXPECT_FALSE(last("Which bottom bracket did the bike shop fit?"));
  // A log tail of six warnings, each with the cumulative count from `base`.
  auto tail = [](int base) {
    std::string log;
    for (int i = 1; i <= 6; ++i) {
      absl::StrAppend(&log, "INFO 09:0", i, ":10 metrics.py:351] Avg prompt throughput: ",
                      base + i * 211, ".4 tokens/s, Running: ", 60 + i, " reqs, Pending: ", i * 7,
                      " reqs, GPU KV cache usage: 9", i, ".1%\n", "INFO: 10.42.3.", i, ":4", i,
                      "8 POST /v1/chat/completions 200 OK\n", "WARNING 09:0", i,
                      ":30 scheduler.py:1089] Sequence group cmpl-", base + i,
                      " is preempted by PreemptionMode.RECOMPUTE mode because there is not enough "
                      "KV cache space. This can affect the end-to-end performance. Increase "
                      "gpu_memory_utilization to provide more KV cache memory. "
                      "total_num_cumulative_preemption=",
                      base + 50 * i, "\n");
    }
    return log;
  };
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Tail the summarizer canary pod's log."),
      Stored(2, Role::kTool, ItemKind::kToolResult, tail(1000), "kubectl")};
  const RecallQuery q = ParseRecallQuery(
      "In the canary pod log we tailed before the KV cache change, what had vLLM's running "
      "count of preempted sequences reached by the final warning?");
  // The last warning is recalled, and no earlier one.
  const std::string recalled = RenderRecalled(Rank(q, OutputAfterMessage(items, q), 200));
  EXPECT_THAT(recalled, HasSubstr("total_num_cumulative_preemption=1300")) << recalled;
  EXPECT_THAT(recalled, Not(HasSubstr("total_num_cumulative_preemption=1250"))) << recalled;
  // Asked for the last alone, of two tails the latest's last warning.
  items.push_back(
      Stored(3, Role::kUser, ItemKind::kMessage, "Tail the summarizer canary pod's log again."));
  items.push_back(Stored(4, Role::kTool, ItemKind::kToolResult, tail(2000), "kubectl"));
  const RecallQuery last_only = ParseRecallQuery(
      "In the canary pod log, what had vLLM's running count of preempted sequences reached by the "
      "final warning?");
  ASSERT_FALSE(last_only.asks_first);
  const std::string latest =
      RenderRecalled(Rank(last_only, OutputsAfterMessages(items, last_only), 300));
  EXPECT_THAT(latest, HasSubstr("total_num_cumulative_preemption=2300")) << latest;
  EXPECT_THAT(latest, Not(HasSubstr("total_num_cumulative_preemption=1300"))) << latest;
}

// A few phrases people say for a word systems write ("in one go" for a
// batch, "response time" for latency), positions in an output ("at the
// bottom of the dry run") that are not its subject, and a question opening
// with "when" that asks "how big" are read as they are meant.
TEST_F(RecallTest, IdiomsPositionsAndOtherQuestionWordsAreReadAsMeant) {
  auto terms_of = [](absl::string_view question) {
    return ParseRecallQuery(question).terms;
  };
  EXPECT_THAT(terms_of("How many records does the event bus pull in one go?"), Contains("batch"));
  EXPECT_THAT(terms_of("How many rows at a time?"), Contains("batch"));
  EXPECT_THAT(terms_of("What was the 95th percentile response time?"), Contains("latenc"));
  EXPECT_THAT(terms_of("Did it go well?"), Not(Contains("batch")));
  EXPECT_THAT(terms_of("The checksum at the bottom of the depot-scanners dry run?"),
              Not(Contains("bottom")));
  EXPECT_THAT(terms_of("Which bottom bracket did the bike shop fit?"), Contains("bottom"));
  EXPECT_FALSE(
      ParseRecallQuery("When we first hit the health check, how big was the backlog?").asks_date);
  EXPECT_TRUE(ParseRecallQuery("When is the cutover planned for?").asks_date);
  EXPECT_TRUE(ParseRecallQuery("What name did I give when we kicked off this morning?").asks_start);
  // Tests that came back green passed; "green" alone stands for passing
  // where the history says "passed" only.
  EXPECT_THAT(terms_of("How many tests came back green?"), Contains("pass"));
  EXPECT_THAT(terms_of("When the FX suite first went red, which test?"), Contains("fail"));
  EXPECT_THAT(StandInsOf("Is the build green?"), Contains("pass"));
  // What a tool "reckons" is its estimate (`est_drain_minutes 240`).
  EXPECT_THAT(StandInsOf("How long did lagctl reckon the backlog would take to clear?"),
              ::testing::IsSupersetOf({"estim", "est"}));
  // A clause setting something aside is not searched.
  EXPECT_THAT(terms_of("How many passed, leaving aside the flaky timeout one?"),
              Not(Contains("timeout")));
  EXPECT_THAT(terms_of("How many rows, not counting staging?"), Not(Contains("stage")));
  EXPECT_THAT(terms_of("What was the exception count?"), Contains("count"));
  // "How deep", "how wide" ask for the measure's noun an output writes.
  EXPECT_THAT(terms_of("How deep was the label printers' work queue?"), Contains("depth"));
  EXPECT_THAT(terms_of("How wide is the banner?"), Contains("width"));
  EXPECT_THAT(terms_of("Which deep link broke?"), Not(Contains("depth")));
  // A phrasal verb is the word a system writes ("back out" a move is its
  // rollback, "spin up" a box is provisioning it).
  EXPECT_THAT(terms_of("If we back out the parcel queues move, which marker?"),
              Contains("rollback"));
  EXPECT_THAT(terms_of("How long did the standby take to spin up?"),
              Contains(WordForm("provision")));
  EXPECT_THAT(terms_of("Which bucket did we back up?"), Not(Contains("rollback")));
  // So is "roll back": the history writes `rollback point`, and "roll",
  // a word it lacks, would count the question as about something else.
  EXPECT_THAT(terms_of("Which restore point do we roll back to?"),
              AllOf(Contains("rollback"), Not(Contains("roll"))));
  // "In flight" is counted as one word (`max_inflight`), "at once" or not.
  EXPECT_THAT(terms_of("What's the cap on messages in flight at once?"), Contains("inflight"));
  // What never came is missing (a reconciliation's "Missing in target").
  EXPECT_THAT(terms_of("How many txns never turned up on Tillwise?"), Contains("miss"));
  EXPECT_THAT(terms_of("Which files didn't arrive?"), Contains("miss"));
  EXPECT_THAT(terms_of("Which files arrived late?"), Not(Contains("miss")));
}

// A contrast naming the thing beside the one asked for ("not the lines
// table", "ignore the staging copy") is said aside: its words count as
// those of a sentence around the question, in the sentence or after it.
TEST_F(RecallTest, AContrastsWordsCountAsSaidAside) {
  auto asked = [](const RecallQuery& q, absl::string_view term) {
    const auto it = std::find(q.terms.begin(), q.terms.end(), term);
    EXPECT_NE(it, q.terms.end()) << term;
    return it != q.terms.end() && q.asked[q.word_of[it - q.terms.begin()]];
  };
  const RecallQuery q = ParseRecallQuery(
      "In the prod service.hcl (ignore the staging copy), how many records does it put in each "
      "batch?");
  EXPECT_TRUE(asked(q, "batch"));
  EXPECT_FALSE(asked(q, "stage"));
  EXPECT_FALSE(asked(q, "copi"));
  const RecallQuery rows =
      ParseRecallQuery("How many rows does the declarations header table have, not the lines table?");
  EXPECT_TRUE(asked(rows, "header"));
  EXPECT_FALSE(asked(rows, "line"));
  // Only a contrast holds "line"; "table" the asked part holds too.
  auto contrast = [](const RecallQuery& q, absl::string_view term) {
    const auto it = std::find(q.terms.begin(), q.terms.end(), term);
    EXPECT_NE(it, q.terms.end()) << term;
    return it != q.terms.end() && q.contrast[q.word_of[it - q.terms.begin()]];
  };
  EXPECT_TRUE(contrast(rows, "line"));
  EXPECT_FALSE(contrast(rows, "header"));
  EXPECT_FALSE(contrast(rows, WordForm("table")));
  // A contrast ends at a "but" turning to what is asked.
  const RecallQuery but =
      ParseRecallQuery("How many rows are there, not the lines table but the header table?");
  EXPECT_TRUE(contrast(but, "line"));
  EXPECT_FALSE(contrast(but, "header"));
  EXPECT_TRUE(asked(but, "header"));
  // "Not" alone negates what is asked, and stays.
  EXPECT_TRUE(asked(ParseRecallQuery("Which tests did not pass on the first run?"), "pass"));
}

// A search's match line ("app/batches.py:14:BATCH_SEND_SIZE = 640", as grep
// -n and rg -n print it) is read after its path and number: a setting's
// definition, the answer to "how many", beside the lines that use it.
TEST_F(RecallTest, ASearchsMatchIsReadAfterItsPathAndNumber) {
  const std::string rg =
      "app/quiet_hours.py:107:        return min(BATCH_SEND_SIZE, provider.max_bulk)\n"
      "app/quiet_hours.py:72:    for chunk in chunked(recipients, BATCH_SEND_SIZE):\n"
      "app/senders/email.py:178:BATCH_PAUSE_MS = 250\n"
      "app/senders/push.py:197:from app.batches import BATCH_SEND_SIZE, BATCH_PAUSE_MS\n"
      "app/batches.py:14:BATCH_SEND_SIZE = 640\n"
      "app/worker.py:158:    for chunk in chunked(recipients, BATCH_SEND_SIZE):\n"
      "app/worker.py:79:    for chunk in chunked(recipients, BATCH_SEND_SIZE):\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "In notifications, rg for the batch constants."),
      Stored(2, Role::kTool, ItemKind::kToolResult, rg, "bash")};
  const RecallQuery q = ParseRecallQuery(
      "How many recipients does notifications send per bulk chunk? The constant defined in "
      "app/batches.py.");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 400), HasSubstr("BATCH_SEND_SIZE = 640"));
  EXPECT_EQ(AfterLineNumber("app/batches.py:14:BATCH_SEND_SIZE = 640"), "BATCH_SEND_SIZE = 640");
  EXPECT_EQ(AfterLineNumber("  34\tMAX = 5"), "MAX = 5");
  // A log's time stamp or a clock is no path, nor a sentence before a colon.
  for (absl::string_view line : {"2026-05-12T00:57:37.952Z order lines written: 42838",
                                 "12:04:55: retry 3", "see the note: 3:4: it"}) {
    EXPECT_EQ(AfterLineNumber(line), line);
  }
}

// A search's match lines sit under the lines of their own file only: a
// match's indentation says nothing about another file's match above it.
TEST_F(RecallTest, ASearchsMatchSitsUnderItsOwnFilesLinesOnly) {
  const std::string rg =
      "app/limits.py:3:def export_limits():\n"
      "app/worker.py:20:    EXPORT_CHUNK = 640\n"
      "app/sender.py:7:def export_batches():\n"
      "app/sender.py:9:    EXPORT_PAUSE_MS = 250\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "rg for the export constants."),
      Stored(2, Role::kTool, ItemKind::kToolResult, rg, "bash")};
  auto passage_of = [&](absl::string_view question, absl::string_view value) {
    const RecallQuery q = ParseRecallQuery(question);
    for (const RecalledPassage& p : Rank(q, OutputAfterMessage(items, q), 400)) {
      if (absl::StrContains(p.text, value)) return p.text;
    }
    return std::string();
  };
  const std::string chunk = passage_of("How big is the export chunk, and its limits?", "= 640");
  EXPECT_THAT(chunk, HasSubstr("EXPORT_CHUNK = 640"));
  EXPECT_THAT(chunk, Not(HasSubstr("limits.py"))) << chunk;
  EXPECT_THAT(passage_of("How long is the pause between export batches?", "= 250"),
              HasSubstr("def export_batches():"));
}

// A passage holding the question's words only through its contrast ("not
// the lines table") answers nothing: it is not recalled for them.
TEST_F(RecallTest, AContrastsWordsAnswerNothing) {
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Count the declaration lines."),
      Stored(2, Role::kTool, ItemKind::kToolResult, "declaration_lines: 5120 rows\n", "psql")};
  auto recalled = [&](absl::string_view question) {
    const RecallQuery q = ParseRecallQuery(question);
    HistoryHits hits = HitsFor(items, q);
    hits.items = 1000;
    // Words many items hold: none alone answers.
    for (auto& [term, df] : hits.document_frequency) df = std::max<int64_t>(df, 150);
    return First(q, hits, 400);
  };
  EXPECT_THAT(recalled("How many rows do the declaration lines have?"), HasSubstr("5120"));
  EXPECT_EQ(recalled("How many rows does the header table have, not the declaration lines?"), "");
}

// A passage holding a word only the contrast says ("not the vLLM serving
// one") is of the thing beside the one asked for, and ranks below the
// asked one's.
TEST_F(RecallTest, APassageOfTheContrastedThingRanksBelowTheAskedOne) {
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Read the first Dockerfile."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.01-py3\n"
             "FROM ${BASE_IMAGE}\n"
             "ARG NCCL_VERSION=2.18.6-1\n"
             "# NCCL is pinned: the base image's build lags the fabric firmware.\n"
             "RUN apt-get install -y libnccl2=${NCCL_VERSION}+cuda12.2\n",
             "read_file"),
      Stored(3, Role::kUser, ItemKind::kMessage, "And the second one."),
      Stored(4, Role::kTool, ItemKind::kToolResult,
             "ARG BASE_IMAGE=vllm/vllm-openai:v0.6.3\n"
             "FROM ${BASE_IMAGE}\n"
             "ARG NCCL_VERSION=2.21.5-1\n"
             "# vLLM wheels bring their own NCCL; pin it to match the nodes.\n"
             "RUN pip install nvidia-nccl-cu12==${NCCL_VERSION}\n",
             "read_file")};
  const RecallQuery q = ParseRecallQuery(
      "Which libnccl release does the training container pin as a build arg? The trainer image, "
      "not the vLLM serving one.");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  hits.exchange_terms[2] = SearchTerms(items[0].data.content);
  hits.exchange_terms[4] = SearchTerms(items[2].data.content);
  hits.calls[2] = R"({"path": "images/a/Dockerfile"})";
  hits.calls[4] = R"({"path": "images/b/Dockerfile"})";
  // Alike lines of both (their base image's): the newer would win a tie.
  const std::vector<RecalledPassage> got = Rank(q, hits, 400, 1);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].sequence, 2) << RenderRecalled(got);
}

// An output whose call names the thing a contrast sets beside the asked
// one (the staging copy's path) ranks below the asked one's, though its
// lines read the same and it is newer.
TEST_F(RecallTest, AnOutputWhoseCallNamesTheContrastedThingRanksBelow) {
  auto config = [](int batch) {
    return absl::StrCat("service {\n  batch {\n    batch_size = ", batch,
                        "\n    poll_interval_s = 15\n  }\n}\n");
  };
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Event bus next. Read its service.hcl."),
      Stored(2, Role::kTool, ItemKind::kToolResult, config(1750), "read_file"),
      Stored(3, Role::kUser, ItemKind::kMessage, "Event bus again, the staging copy."),
      Stored(4, Role::kTool, ItemKind::kToolResult, config(100), "read_file")};
  const RecallQuery q = ParseRecallQuery(
      "In the event bus service.hcl (ignore the staging copy), how many records does it put in "
      "each batch?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  hits.exchange_terms[2] = SearchTerms(items[0].data.content);
  hits.exchange_terms[4] = SearchTerms(items[2].data.content);
  hits.calls[2] = R"({"path": "config/event-bus/service.hcl"})";
  hits.calls[4] = R"({"path": "config/event-bus/staging/service.hcl"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 400, 1);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].sequence, 2) << RenderRecalled(got);
  EXPECT_THAT(got[0].text, HasSubstr("1750"));
}

// A call's arguments, one a line, sit under it: the sensor's interval is
// the manifest sensor's through the call it is an argument of.
TEST_F(RecallTest, ACallsArgumentsAreNamedByTheCall) {
  const std::string dag =
      "    wait_upstream = ExternalTaskSensor(\n"
      "        task_id=\"wait_for_upstream_export\",\n"
      "        poke_interval=120,\n"
      "        timeout=60 * 120,\n"
      "    )\n"
      "    with TaskGroup(group_id=\"land\") as land:\n"
      "        for source in SOURCES:\n"
      "            manifest = S3KeySensor(\n"
      "                task_id=f\"wait_for_{source['name']}\",\n"
      "                mode=\"reschedule\",\n"
      "                poke_interval=840,\n"
      "                timeout=60 * 240,\n"
      "            )\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Read the orders DAG."),
      Stored(2, Role::kTool, ItemKind::kToolResult, dag, "read_file")};
  const RecallQuery q =
      ParseRecallQuery("How often does the orders DAG's manifest sensor poke the bucket?");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 400), HasSubstr("poke_interval=840"));
}

// A name said in the plural is written in the singular ("the job runs
// table" is `job_run`), and a name holds no word every question has
// ("rows does" is none).
TEST_F(RecallTest, ANamesWordsSaidInThePluralFindItsSingular) {
  const RecallQuery q =
      ParseRecallQuery("How many live tuples did the stats show for the job runs table?");
  EXPECT_THAT(q.terms, Contains("job_run"));
  EXPECT_THAT(q.terms, Contains("job_runs"));
  // Every term has its word and says whether it stands in, the singular
  // forms added last too.
  EXPECT_EQ(q.word_of.size(), q.terms.size());
  EXPECT_EQ(q.stand_in.size(), q.terms.size());
  EXPECT_THAT(ParseRecallQuery("How many rows does the declarations header have?").terms,
              AllOf(Contains("declaration_header"), Not(Contains("rows_does"))));
  EXPECT_THAT(ParseRecallQuery("What did the retry entries list hold?").terms,
              Contains("retry_entry"));
  EXPECT_THAT(ParseRecallQuery("Which mail boxes filled up?").terms, Contains("mail_box"));
  EXPECT_THAT(ParseRecallQuery("What did the status page say?").terms,
              Not(Contains("statu_page")));
  EXPECT_THAT(ParseRecallQuery("How full were the redis caches?").terms,
              AllOf(Contains("redis_cache"), Not(Contains("redis_cach"))));
  EXPECT_THAT(ParseRecallQuery("Which kubernetes nodes drained?").terms,
              AllOf(Contains("kubernetes_node"), Not(Contains("kubernete_node"))));
  EXPECT_THAT(ParseRecallQuery("Which git branches merged?").terms, Contains("git_branch"));
}

// A plan's changed lines are settings ("+ size = 3750"), and "how big"
// asks for a size: the field under the resource the question names.
TEST_F(RecallTest, APlansFieldAnswersHowBigUnderTheResourceItNames) {
  const std::string plan =
      "Terraform will perform the following actions:\n\n"
      "  # aws_msk_cluster.main will be updated in-place\n"
      "  ~ resource \"aws_msk_cluster\" \"main\" {\n"
      "      ~ enhanced_monitoring    = \"PER_TOPIC_PER_BROKER\"\n"
      "    }\n\n"
      "  # aws_ebs_volume.mirror_spool will be created\n"
      "  + resource \"aws_ebs_volume\" \"mirror_spool\" {\n"
      "      + arn               = (known after apply)\n"
      "      + availability_zone = \"eu-west-2a\"\n"
      "      + iops              = 3000\n"
      "      + size              = 3750\n"
      "      + throughput        = 500\n"
      "      + type              = \"gp3\"\n"
      "    }\n\n"
      "Plan: 1 to add, 1 to change, 0 to destroy.\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Plan the event-bus changes for the MSK mirror."),
      Stored(2, Role::kTool, ItemKind::kToolResult, plan, "bash")};
  const RecallQuery q =
      ParseRecallQuery("On the event bus plan, how big was the new gp3 disk for the mirror's spool?");
  EXPECT_THAT(q.terms, Contains("size"));
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 400);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("+ size              = 3750")) << RenderRecalled(got);
  // The figures of the fields beside it come with it, as a record's do.
  EXPECT_THAT(RenderRecalled(got), HasSubstr("+ iops              = 3000")) << RenderRecalled(got);
}

// A unified diff's changed lines are settings too, the mark right before
// the name ("+max_wal_size = 160GB"): the new value comes with the old.
TEST_F(RecallTest, AUnifiedDiffsChangedLineIsASetting) {
  const std::string diff =
      "diff --git a/postgresql.conf b/postgresql.conf\n"
      "--- a/postgresql.conf\n"
      "+++ b/postgresql.conf\n"
      "@@ -7,12 +7,12 @@\n"
      " wal_level = logical\n"
      " wal_compression = lz4\n"
      "-max_wal_size = 64GB\n"
      "+max_wal_size = 160GB\n"
      " min_wal_size = 8GB\n"
      "-checkpoint_timeout = 15min\n"
      "+checkpoint_timeout = 30min\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me Tobias's prod sizing change."),
      Stored(2, Role::kTool, ItemKind::kToolResult, diff, "git")};
  const RecallQuery q =
      ParseRecallQuery("Tobias's sizing change, what did it raise the max WAL size to?");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 300);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("+max_wal_size = 160GB"));
  // The old value's passage shows the new one beside it.
  bool old_shown = false;
  for (const RecalledPassage& p : got) {
    if (!absl::StrContains(p.text, "-max_wal_size = 64GB")) continue;
    old_shown = true;
    EXPECT_THAT(p.text, HasSubstr("+max_wal_size = 160GB"));
  }
  EXPECT_TRUE(old_shown) << RenderRecalled(got);
}

// A test runner's progress lines hold no value ("[ 41%]" is how far the
// run had got); a line ending in a percentage otherwise may.
TEST(ProgressLineTest, ATestRunnersProgressLineIsOne) {
  EXPECT_TRUE(IsProgressLine("tests/unit/test_vat.py ......s.....F.... [ 41%]"));
  EXPECT_TRUE(IsProgressLine("..s....s..............................     [100%]  "));
  EXPECT_FALSE(IsProgressLine("error rate 4.2% [p99 latency 310 ms, 12%]"));
  EXPECT_FALSE(IsProgressLine("FAILED tests/unit/test_vat.py::test_reverse_charge"));
}

// A test run's summary counts what the question asks for ("853 passed"):
// it is the answer, and the run's progress lines, which hold the words
// "unit" and "test" and dots, are no passage at all.
TEST_F(RecallTest, ARunsSummaryCountsWhatIsAskedAndItsProgressLinesAreNoAnswer) {
  std::string run = "============================= test session starts ==============================\n";
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&run, "tests/unit/test_module_", i,
                    ".py ................................................ [ ", i * 2, "%]\n");
  }
  run += "\n================= 853 passed, 69 skipped, 5 warnings in 25.20s =================\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Pricing is next. Run the pricing test suite."),
      Stored(2, Role::kTool, ItemKind::kToolResult, run, "bash")};
  const RecallQuery q = ParseRecallQuery("How many unit tests passed for pricing on that run?");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 160);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("853 passed")) << RenderRecalled(got);
  EXPECT_THAT(RenderRecalled(got), Not(HasSubstr("test_module_"))) << RenderRecalled(got);
}

// "How many passed" is answered by the line counting them ("853 passed"):
// the answer's shape, shown beside the lines of tests that passed one by
// one, which an item's cap on passages would otherwise keep it behind.
TEST_F(RecallTest, ALineCountingTheQuestionsWordAnswersHowMany) {
  // As a runner writes it, and as a sentence ends it (the word before a
  // full stop or in quotes counts too).
  for (absl::string_view summary :
       {"================= 853 passed, 69 skipped, 5 warnings in 25.20s =================",
        "Done in 25.20s: 853 passed.", "summary: 853 \"passed\""}) {
    std::string run = "collected 922 items\n";
    for (int i = 0; i < 30; ++i) {
      absl::StrAppend(&run, "tests/unit/test_vat.py::test_rate_", i, " PASSED\n");
    }
    absl::StrAppend(&run, summary, "\n");
    std::vector<Item> items = {
        Stored(1, Role::kUser, ItemKind::kMessage, "Run the pricing test suite, verbose."),
        Stored(2, Role::kTool, ItemKind::kToolResult, run, "bash")};
    const RecallQuery q = ParseRecallQuery("How many tests passed on the pricing suite's run?");
    const std::string got = RenderRecalled(Rank(q, OutputAfterMessage(items, q), 400));
    EXPECT_THAT(got, HasSubstr("853")) << got;
  }
}

// A clause naming a later change ("before we switched to the tuned
// profile") says the earlier of several is asked for; its words are the
// later one's and are not searched. A clause saying what is asked about
// ("before they expire") stays.
TEST_F(RecallTest, AClauseNamingALaterChangeAsksForTheEarlierOne) {
  auto terms_of = [](absl::string_view question) {
    return absl::StrJoin(ParseRecallQuery(question).terms, " ");
  };
  const RecallQuery before = ParseRecallQuery(
      "What checksum came out of the invoice archive dry run, before we switched to the tuned "
      "batch profile?");
  EXPECT_TRUE(before.asks_first);
  EXPECT_THAT(absl::StrJoin(before.terms, " "), Not(HasSubstr("tune")));
  EXPECT_THAT(absl::StrJoin(before.terms, " "), HasSubstr("invoic"));
  EXPECT_TRUE(ParseRecallQuery("The first backup vault dry run, before the batch profile change, "
                               "reported a checksum. What was it?")
                  .asks_first);
  EXPECT_THAT(terms_of("What checksum did the vault dry run give, before Thandiwe's batch changes?"),
              Not(HasSubstr("batch")));
  // Someone named doing something later: a name, then a verb in the past.
  const RecallQuery touched = ParseRecallQuery(
      "The relay's dry run, the one from before Ottilie reworked its batches: what checksum?");
  EXPECT_TRUE(touched.asks_first);
  EXPECT_THAT(absl::StrJoin(touched.terms, " "), Not(HasSubstr("ottili")));
  EXPECT_THAT(absl::StrJoin(touched.terms, " "), HasSubstr("relay"));
  // ... or a thing as it was changed.
  const RecallQuery tuned = ParseRecallQuery(
      "The first MQ bridge dry run's checksum, before the tuned batch profile?");
  EXPECT_TRUE(tuned.asks_first);
  EXPECT_THAT(absl::StrJoin(tuned.terms, " "), Not(HasSubstr("profil")));
  const RecallQuery expire =
      ParseRecallQuery("How long do engagement features live in the store before they expire?");
  EXPECT_FALSE(expire.asks_first);
  EXPECT_THAT(absl::StrJoin(expire.terms, " "), HasSubstr("expir"));
  EXPECT_FALSE(ParseRecallQuery("How many rows did it copy before it failed?").asks_first);
  // The clause ends at a dash between spaces: what follows is asked.
  for (absl::string_view dash : {" - ", " \u2013 ", " \u2014 ", " -- "}) {
    const std::string asked = absl::StrCat("before I write Perth up for tomorrow", dash,
                                           "how many CRC errors was the WAN port showing?");
    EXPECT_THAT(terms_of(asked), AllOf(HasSubstr("crc"), HasSubstr("wan"), Not(HasSubstr("perth"))))
        << asked;
  }
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Dry-run the invoice archive."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "copying 40 tables\ninvoice archive dry-run checksum 30a6359", "migctl"),
      Stored(3, Role::kUser, ItemKind::kMessage,
             "Dry-run the invoice archive again, now we switched to the tuned batch profile."),
      Stored(4, Role::kTool, ItemKind::kToolResult,
             "copying 40 tables\ninvoice archive dry-run checksum 9b1c2e4", "migctl")};
  EXPECT_THAT(Best(before, items, 200), HasSubstr("30a6359"));
}

// "How big is the whole thing" asks for a total; a JSON key states one too
// ("\"total_tokens\": 398452475663" among the shards' own counts).
TEST_F(RecallTest, AJsonKeyStatesATotal) {
  EXPECT_TRUE(ParseRecallQuery("How big is the whole snapshot, in tokens?").asks_total);
  std::string manifest = "{\n  \"snapshot\": \"webdocs-v9\",\n  \"shards\": [\n";
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&manifest, "    {\n      \"index\": ", i, ",\n      \"tokens\": ",
                    185000000 + i * 917, "\n    },\n");
  }
  manifest += "  ],\n  \"total_documents\": 104001759,\n  \"total_tokens\": 398452475663\n}\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Pull the webdocs-v9 snapshot's manifest."),
      Stored(2, Role::kTool, ItemKind::kToolResult, manifest, "bash")};
  const RecallQuery q =
      ParseRecallQuery("How big is the whole webdocs-v9 snapshot, counted in tokens?");
  HistoryHits hits = OutputAfterMessage(items, q);
  EXPECT_THAT(First(q, hits, 300), HasSubstr("398452475663"));
}

// What the user states in a long message ("I've opened PR #8127 for it")
// weighs its words against a message's usual length, as they weigh when
// lent to its turn's outputs: it is not outranked by the outputs' lines
// that hold its words only through it.
TEST_F(RecallTest, WhatTheUserStatesIsNotOutrankedByItsTurnsOutputs) {
  const std::string said =
      "Let's fix the root cause: clip_grad back to a safe default of 1.0 in the optimizer "
      "groups, with an explicit 0.0 still allowed per experiment, so that the five experiments "
      "without a clipping line of their own get clipping back. I've opened PR #8127 for it. Make "
      "the change and run the tests.";
  std::string config = "# AdamW with linear warmup and cosine decay\n";
  for (int i = 0; i < 12; ++i) absl::StrAppend(&config, "lr_group_", i, ": 3.0e-4\n");
  config += "clip_grad: ${oc.select:optim_override.clip_grad,1.0}\n";
  config += "eps: 1.0e-8\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, said),
      Stored(2, Role::kTool, ItemKind::kToolResult, config, "apply_patch")};
  const RecallQuery q =
      ParseRecallQuery("Which PR number is the grad clipping default fix going in under?");
  HistoryHits hits = HitsFor(items, q);
  // As a day's history holds them: the config's words on hundreds of
  // items, the pull request on the one.
  hits.items = 1000;
  for (const std::string& term : q.terms) {
    hits.document_frequency[term] = term == "pull" || term == "request" ? 2 : 300;
  }
  hits.exchange_terms[2] = SearchTerms(said);
  EXPECT_THAT(First(q, hits, 400), HasSubstr("PR #8127"));
}

// A question for a host's full name ranks a line holding one higher
// ("hallb-pg-14.corp.tarnow.net", not a file's "values.canary.yaml").
TEST_F(RecallTest, AHostsNameAnswersForItsFullName) {
  EXPECT_TRUE(ParseRecallQuery("What's the FQDN of the old box?").asks_host);
  EXPECT_TRUE(ParseRecallQuery("Full hostname, please.").asks_host);
  EXPECT_FALSE(ParseRecallQuery("How many hosts run it?").asks_host);
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Let's start on the invoice archive. It holds eleven years of scanned invoices; "
             "finance reads it all day. It belongs to Henrike Salo's team; the legacy box is "
             "hallb-pg-14.corp.tarnow.net and the change record is PLAT-3397."),
      Stored(2, Role::kAssistant, ItemKind::kMessage,
             "The old hosts in hall B share storage, so a heavy copy of the invoice archive on "
             "one service slows its neighbours; values.canary.yaml keeps the throttle."),
      Stored(3, Role::kUser, ItemKind::kMessage,
             "Next: the invoice archive's old hall B hosts and their storage.")};
  const RecallQuery q =
      ParseRecallQuery("What's the FQDN of the old hall-B server the invoice archive sits on?");
  EXPECT_THAT(Best(q, items, 400), HasSubstr("hallb-pg-14.corp.tarnow.net"));
}

// A word in -ise or -yse is searched in both spellings: the history may
// write the American one ("summarizer") where the question says the
// British ("summariser"), and the stemmer keeps them apart.
TEST_F(RecallTest, BritishAndAmericanSpellingsFindEachOther) {
  EXPECT_THAT(ParseRecallQuery("What did the summariser canary log?").terms,
              Contains(WordForm("summarizer")));
  EXPECT_THAT(ParseRecallQuery("Which optimizer build is live?").terms,
              Contains(WordForm("optimiser")));
  EXPECT_THAT(ParseRecallQuery("How was the data analysed?").terms,
              Contains(WordForm("analyzed")));
  // Short stems are no verbs in -ise, nor are a few longer words: "size"
  // and "promised" have no other spelling.
  EXPECT_THAT(ParseRecallQuery("What size is the disk?").terms, Not(Contains(WordForm("sise"))));
  EXPECT_THAT(ParseRecallQuery("What was promised?").terms, Not(Contains(WordForm("promized"))));
  // Split as stored text is, at any mark ("summariser’s").
  EXPECT_THAT(ParseRecallQuery("The summariser’s p99?").terms,
              Contains(WordForm("summarizer")));
  const std::vector<Item> items = {
      Stored(1, Role::kAssistant, ItemKind::kMessage,
             "The summarizer canary's p99 peaked at 4.068 s during the burst."),
      Stored(2, Role::kAssistant, ItemKind::kMessage,
             "The router canary's p99 peaked at 1.210 s during the burst.")};
  const RecallQuery q = ParseRecallQuery("What did the summariser canary's p99 peak at?");
  EXPECT_THAT(Best(q, items, 120), HasSubstr("4.068"));
}

// "Which host" or "what box" asks for a host as "hostname" does: of a
// runbook's lines naming the alias asked about, the one that also names
// the host it is pointed at answers.
TEST_F(RecallTest, WhichHostAsksForAHostsName) {
  EXPECT_TRUE(ParseRecallQuery("Which host runs it?").asks_host);
  EXPECT_TRUE(ParseRecallQuery("what box do we log on to?").asks_host);
  EXPECT_TRUE(ParseRecallQuery("Which servers took the traffic?").asks_host);
  // A thing of a host is not its name.
  EXPECT_FALSE(ParseRecallQuery("What server version is it on?").asks_host);
  EXPECT_FALSE(ParseRecallQuery("Which machine type did the plan pick?").asks_host);
  const std::string runbook =
      "### T+01:40  Move the API alias\n"
      "\n"
      "1. Check what the alias resolves to now:\n"
      "\n"
      "       dig +short billing-api.prod.corp.internal\n"
      "\n"
      "2. Repoint it:\n"
      "\n"
      "       nsupdate -k /etc/bind/keys/billing.key <<'EOF'\n"
      "       update delete billing-api.prod.corp.internal CNAME\n"
      "       update add billing-api.prod.corp.internal 300 CNAME bil-prd-lb2.fra1.corp.internal.\n"
      "       send\n"
      "       EOF\n"
      "\n"
      "3. Reload the proxies so new connections resolve the new name.\n";
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Mirela wrote the runbook section on moving the API alias. Read it for me."),
      Stored(2, Role::kTool, ItemKind::kToolResult, runbook, "bash"),
      Stored(3, Role::kAssistant, ItemKind::kMessage,
             "Clear and runnable: the check, the record change, the reload.")};
  const RecallQuery q = ParseRecallQuery(
      "In Mirela's runbook section, what host does the billing-api DNS name get repointed to?");
  EXPECT_THAT(RenderRecalled(Rank(q, OutputAfterMessage(items, q), 120)),
              HasSubstr("bil-prd-lb2.fra1.corp.internal"));
  // A host whose name holds a word of the question, or another word for
  // one, is still one ("which box": `db-host-3`, "host" standing in for
  // "box"); only the one the question names whole is not.
  const std::vector<Item> listing = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Where does the exporter run? Check the units."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "exporter runs every 60 s on the box, scraping 14 targets\n"
             "exporter on db-host-3.corp.internal since 3 May\n",
             "bash")};
  const RecallQuery which = ParseRecallQuery("Which box runs the exporter?");
  EXPECT_THAT(First(which, OutputAfterMessage(listing, which), 120),
              HasSubstr("db-host-3.corp.internal"));
}

// A question's word the history does not hold ("shops") is found by
// another word for it ("stores"); where the history holds the word
// itself, the other word counts less.
TEST_F(RecallTest, AWordTheHistoryLacksIsFoundByAnotherWordForIt) {
  const RecallQuery q = ParseRecallQuery("How many shops did the bundle build leave out?");
  EXPECT_THAT(StandInsOf("How many shops did the bundle build leave out?"),
              ::testing::IsSupersetOf({"store"}));
  // Each word of a group finds the others, whatever form it is said in.
  EXPECT_THAT(StandInsOf("What did the wave five rehearsal flag?"), Contains("dry-run"));
  EXPECT_THAT(StandInsOf("How long was the queue?"), Contains("backlog"));
  EXPECT_THAT(StandInsOf("Where do the totals disagree?"), Contains("mismatch"));
  EXPECT_THAT(StandInsOf("When is the slot for wiping and reinstalling the box?"),
              Contains(WordForm("reimage")));
  EXPECT_THAT(StandInsOf("How many calls before it throttles?"), Contains("limit"));
  // Billing is invoicing, a snapshot a backup, Amazon's cloud AWS, and a
  // gigabyte the GB (or GiB) a listing's column writes.
  EXPECT_THAT(StandInsOf("How long will the billing database keep things?"),
              Contains(WordForm("invoicing")));
  EXPECT_THAT(StandInsOf("How many days of automated snapshots?"), Contains(WordForm("backup")));
  EXPECT_THAT(StandInsOf("Which case number did Amazon give us?"), Contains(WordForm("aws")));
  // How stale a cached thing may get is its TTL.
  EXPECT_THAT(StandInsOf("How stale can a rate get?"), Contains("ttl"));
  // A name's alias in DNS is its CNAME record.
  EXPECT_THAT(StandInsOf("Where does the database alias point?"), Contains("cname"));
  EXPECT_THAT(StandInsOf("What did the segments add up to in gigabytes?"),
              ::testing::IsSupersetOf({"gb", "gib"}));
  std::string summary = "bundle build for group w6\n";
  for (int i = 0; i < 15; ++i) absl::StrAppend(&summary, " 0", 600 + i, "  Z4  ok\n");
  summary += "summary\n  stores: 27\n  skipped_stores: 2\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Build wave 6's bundle, dry run."),
      Stored(2, Role::kTool, ItemKind::kToolResult, summary, "bash"),
      Stored(3, Role::kUser, ItemKind::kMessage, "Which depots open late?")};
  HistoryHits hits = HitsFor(items, q);
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  hits.calls[2] = R"({"cmd": "pricecast bundle build --group w6 --dry-run"})";
  RecallLimits limits;
  limits.max_tokens = 120;
  auto skipped_score = [&](const HistoryHits& h, const RecallQuery& query) {
    for (const RecalledPassage& p : RankPassages(query, h, *tokenizer_, limits)) {
      if (absl::StrContains(p.text, "skipped_stores: 2")) return p.score;
    }
    return 0.0;
  };
  const double lacking = skipped_score(hits, q);
  EXPECT_GT(lacking, 0) << RenderRecalled(RankPassages(q, hits, *tokenizer_, limits));
  // The history holds "shops" itself: "stores" weighs less there.
  items[2] = Stored(3, Role::kUser, ItemKind::kMessage, "Which shops open late?");
  hits = HitsFor(items, q);
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  hits.calls[2] = R"({"cmd": "pricecast bundle build --group w6 --dry-run"})";
  const double held = skipped_score(hits, q);
  EXPECT_LT(held, lacking);
  // ... and still counts: the same question without the stand-in scores
  // the passage less (a held stand-in is searched and names the line).
  RecallQuery without = q;
  const size_t store = static_cast<size_t>(
      std::find(q.terms.begin(), q.terms.end(), "store") - q.terms.begin());
  ASSERT_LT(store, q.terms.size());
  without.terms.erase(without.terms.begin() + store);
  without.word_of.erase(without.word_of.begin() + store);
  without.stand_in.erase(without.stand_in.begin() + store);
  EXPECT_GT(held, skipped_score(hits, without));
}

// Other words for the things operators talk about: "replicas" for the
// pods an orchestrator lists, an "outage" for an incident, a "cost" for a
// spend, a "tolerance" for a threshold.
TEST_F(RecallTest, OperatorsWordsFindTheWordsTheirSystemsWrite) {
  EXPECT_THAT(StandInsOf("What did the outage cost us?"),
              ::testing::IsSupersetOf({WordForm("incident"), WordForm("spend")}));
  EXPECT_THAT(StandInsOf("How many records does it take in one chunk?"),
              Contains(WordForm("batch")));
  EXPECT_THAT(StandInsOf("The load that refused an incomplete day?"),
              Contains(WordForm("partial")));
  // The stemmer keeps "percentage" apart from "percent" (`unexpected_percent`).
  ASSERT_NE(WordForm("percentage"), WordForm("percent"));
  EXPECT_THAT(StandInsOf("What percentage of rows failed?"), Contains(WordForm("percent")));
  EXPECT_THAT(StandInsOf("How many unfinished uploads?"), Contains(WordForm("partial")));
  // ... and "fail" apart from "failure" ("Number of failures: 352").
  ASSERT_NE(WordForm("fail"), WordForm("failures"));
  EXPECT_THAT(StandInsOf("How many times had the probe failed?"), Contains(WordForm("failure")));
  // A broken test is a failing one (`FAILED tests/...`).
  EXPECT_THAT(StandInsOf("Which checkout test was broken?"), Contains(WordForm("fail")));
  // "Log" is a verb as often as a noun ("what did the test log"); a
  // ledger's journal lines are no log.
  EXPECT_THAT(StandInsOf("What did the failing test log, per the orchestrator's log?"),
              Not(Contains(WordForm("journal"))));
  EXPECT_THAT(StandInsOf("What's the drift tolerance on the feature store?"),
              ::testing::IsSupersetOf({WordForm("threshold")}));
  EXPECT_THAT(StandInsOf("How long is the cert's lifetime, and the disk's capacity?"),
              ::testing::IsSupersetOf(
                  {WordForm("certificate"), WordForm("ttl"), WordForm("volume"), WordForm("size")}));
  const RecallQuery q = ParseRecallQuery("How many replicas is the ledger worker running?");
  EXPECT_THAT(StandInsOf("How many replicas is the ledger worker running?"),
              ::testing::Contains(WordForm("pod")));
  std::string status = "NAME              READY   STATUS\n";
  for (int i = 0; i < 12; ++i) absl::StrAppend(&status, "job-", 4100 + i, "   1/1   Completed\n");
  status += "deployment ledger-worker\n  image: ledger-worker:2.4.1\n  pods: 7 desired, 7 ready\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Check the ledger worker deployment."),
      Stored(2, Role::kTool, ItemKind::kToolResult, status, "kubectl")};
  const HistoryHits hits = OutputAfterMessage(items, q);
  EXPECT_THAT(RenderRecalled(Rank(q, hits, 120)), HasSubstr("pods: 7 desired"));
}

// "The most" is a maximum, "the fewest" a minimum: a settings file names
// the bound (`maxReplicas: 9` beside `minReplicas: 4`), a question says
// how far it goes.
TEST_F(RecallTest, TheMostIsTheMaximumAndTheFewestTheMinimum) {
  EXPECT_THAT(StandInsOf("What's the most pods it may scale out to?"), Contains(WordForm("max")));
  EXPECT_THAT(StandInsOf("What's the fewest pods it keeps?"), Contains(WordForm("min")));
  const RecallQuery q = ParseRecallQuery("What's the most pods promotions may scale to in prod?");
  std::string values = "replicaCount: 4\nimage:\n  tag: \"3.40.3\"\npodAnnotations:\n"
                       "  prometheus.io/port: \"9100\"\n";
  values += "autoscaling:\n  enabled: true\n  minReplicas: 4\n  maxReplicas: 9\n"
            "  targetCPUUtilizationPercentage: 75\n";
  values += "podDisruptionBudget:\n  minAvailable: 1\nnetworkPolicy:\n  allowFrom:\n"
            "    - namespace: shop-prod\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Read the promotions prod values: I want to know how far it may scale."),
      Stored(2, Role::kTool, ItemKind::kToolResult, values, "read_file")};
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"path": "deploy/charts/promotions/values-prod.yaml"})";
  // A long history says "most" somewhere ("most of the errors").
  hits.document_frequency[WordForm("most")] = 40;
  const std::vector<RecalledPassage> got = Rank(q, hits, 120);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("maxReplicas: 9"));
}

// A line naming the subject (`name = "weasyprint"`) and the value beside
// it (`version = "63.3"`): the value's passage, which shows the name too,
// is shown rather than the name's line alone (which would keep the value
// out).
TEST_F(RecallTest, TheValueBesideTheSubjectsLineComesWithIt) {
  const RecallQuery q =
      ParseRecallQuery("Which weasyprint version does the invoicing service's lockfile pin?");
  std::string lock;
  for (const char* name : {"tinycss2", "tinyhtml5", "weasyprint", "webencodings", "zopfli"}) {
    absl::StrAppend(&lock, "[[package]]\nname = \"", name, "\"\nversion = \"",
                    std::string(name).size(), ".", std::string(name).size() % 7,
                    "\"\ndescription = \"A package\"\noptional = false\n\n");
  }
  absl::StrReplaceAll({{"version = \"10.3\"", "version = \"63.3\""}}, &lock);
  ASSERT_NE(lock.find("name = \"weasyprint\"\nversion = \"63.3\""), std::string::npos) << lock;
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Which weasyprint is invoicing locked to? Show me that part of its poetry.lock."),
      Stored(2, Role::kTool, ItemKind::kToolResult, lock, "read_file")};
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"path": "services/invoicing/poetry.lock"})";
  // Every package, manifest and changelog names a version: too common to
  // search by.
  hits.document_frequency[WordForm("version")] = 900;
  const std::vector<RecalledPassage> got = Rank(q, hits, 200);
  ASSERT_FALSE(got.empty());
  EXPECT_THAT(RenderRecalled(got), HasSubstr("version = \"63.3\"")) << RenderRecalled(got);
}

// A question for a ticket ("ticket #", "the change record", "the PR
// number") is answered by a line holding a tracker's key beside its words.
TEST_F(RecallTest, AQuestionForATicketFindsTheTrackersKey) {
  for (const char* asks : {"ticket # for the double charge again?",
                           "What's the change record number for the double charge?",
                           "Which PR number has the double charge fix?"}) {
    EXPECT_TRUE(ParseRecallQuery(asks).asks_ticket) << asks;
  }
  EXPECT_FALSE(ParseRecallQuery("What did the double charge cost?").asks_ticket);
  const RecallQuery q = ParseRecallQuery("ticket # for the double charge again?");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Morning! Big day: Halcyon Freight got charged twice for the same usage last week "
             "(MTR-4821), and there are smaller fixes I want in before the release."),
      Stored(2, Role::kAssistant, ItemKind::kMessage,
             "The charge job runs nightly at 02:00 and posts one charge per usage record."),
      Stored(3, Role::kUser, ItemKind::kMessage,
             "Charges for the storage tier go out on the first of the month.")};
  EXPECT_THAT(Best(q, items, 200), HasSubstr("MTR-4821"));
}

// A message stating a ticket or a version beside one of the question's
// words answers a question for one, though a message holding more of its
// words ("the double charge") outranks it on words alone.
TEST_F(RecallTest, AMessageStatingTheNameAskedForAnswersBesideOneWordOfTheQuestion) {
  for (const char* asks : {"Which version number is this release going out as?",
                           "which NCCL build is the training image pinned to?",
                           "What release are the canaries on?"}) {
    EXPECT_TRUE(ParseRecallQuery(asks).asks_version) << asks;
  }
  EXPECT_FALSE(ParseRecallQuery("Did the build pass before the release?").asks_version);
  EXPECT_TRUE(ParseRecallQuery("Which image tag are the consumers running?").asks_version);
  EXPECT_TRUE(ParseRecallQuery("What tag is the api pinned to?").asks_version);
  EXPECT_FALSE(ParseRecallQuery("Who put the cost tag on the bucket?").asks_version);
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Morning! Halcyon Freight got charged twice for the same usage last week "
             "(MTR-4821), and there are smaller fixes I want in before the cut."),
      Stored(2, Role::kUser, ItemKind::kMessage,
             "OK, the double charge. Support traced the duplicates to the ledger: two postings "
             "with the same reference, seconds apart, both right after a timeout."),
      Stored(3, Role::kUser, ItemKind::kMessage,
             "We're shipping v2.31.0; the branch is cut on Thursday at 14:00 UTC."),
      Stored(4, Role::kAssistant, ItemKind::kMessage,
             "The release notes go out with the release; the release manager owns the "
             "changelog and the release checklist."),
      Stored(5, Role::kAssistant, ItemKind::kMessage,
             "The schema's version number is kept in the migrations table; a ticket for a "
             "charge goes to the billing queue.")};
  // Words common enough that one alone does not answer.
  for (int i = 0; i < 4; ++i) {
    items.push_back(Stored(6 + i, Role::kAssistant, ItemKind::kMessage,
                           absl::StrCat("The charge job of region ", i,
                                        " runs nightly; shipping its fix waits for review.")));
  }
  auto recalled = [&](absl::string_view question) {
    const RecallQuery q = ParseRecallQuery(question);
    HistoryHits hits = HitsFor(items, q);
    hits.items = 1000;
    std::string text;
    for (const RecalledPassage& p : Rank(q, hits, 200)) absl::StrAppend(&text, p.text, "\n");
    return text;
  };
  EXPECT_THAT(recalled("ticket # for the double charge again?"), HasSubstr("MTR-4821"));
  EXPECT_THAT(recalled("Which version number are we shipping this release as?"),
              HasSubstr("v2.31.0"));
}

// A question for an image's tag is one for a version: the deployment's
// row showing `consumer:3.12.7` under the listing's IMAGES header ranks
// above the pods' rows, which name the consumers as often and say
// "Running", as every listing of the conversation does.
// Jest names a failed test in a "● Suite › test" title and marks it "✕"
// in its list: those are failing lines for a question about a failing
// spec, beside the ticked ones that name the same words.
TEST_F(RecallTest, AFailingSpecIsTheOneJestMarksFailed) {
  std::string run =
      " FAIL  src/features/refunds/RefundDialog.test.tsx (4.274 s)\n"
      "  \u25cf RefundDialog \u203a disables refund button when order is settled\n\n"
      "    expect(element).toBeDisabled()\n\n"
      "  RefundDialog\n";
  for (const char* spec : {"renders the refundable amount", "prefills the full refund",
                           "validates the refund amount", "shows partial refund option"}) {
    absl::StrAppend(&run, "    \u2713 ", spec, " (48 ms)\n");
  }
  run += "    \u2715 disables refund button when order is settled (220 ms)\n";
  run += "\nTests:       1 failed, 4 passed, 5 total\n";
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run only the admin refunds specs."),
      Stored(2, Role::kTool, ItemKind::kToolResult, run, "bash")};
  const RecallQuery q = ParseRecallQuery("Which refund spec was still failing in that run?");
  EXPECT_THAT(First(q, OutputAfterMessage(items, q), 120),
              HasSubstr("disables refund button when order is settled"));
}

TEST_F(RecallTest, AnImageTagIsAnsweredByTheRowShowingIt) {
  std::string listing =
      "NAME                      READY   STATUS    RESTARTS   AGE   IP\n";
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&listing, "pod/consumer-bf7faa51a5-6f7e", i, "   1/1     Running   ", i % 3,
                    "          2", i, "d   10.42.8.", 20 + i, "\n");
  }
  listing +=
      "\nNAME                       READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES\n"
      "deployment.apps/consumer   9/9     9            9           30d   consumer     "
      "ecr.example/hv/consumer:3.12.7\n";
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "kubectl for the parcel-queues namespace."),
      Stored(2, Role::kTool, ItemKind::kToolResult, listing, "bash")};
  const RecallQuery q =
      ParseRecallQuery("Which image tag are the parcel-queue consumers actually running?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.document_frequency["run"] = 300;  // Every listing says "Running".
  EXPECT_THAT(First(q, hits, 120), HasSubstr("consumer:3.12.7"));
}

// A line holding a version answers a question for one where its exchange
// names the subject, over the lines around it holding more of its words.
TEST_F(RecallTest, AQuestionForAVersionIsAnsweredByALineHoldingOne) {
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Kestrel's hang: I want to rule out an NCCL bump in the training image. Show me "
             "the trainer's Dockerfile, where the build is pinned."),
      Stored(2, Role::kTool, ItemKind::kToolResult,
             "1\t# syntax=docker/dockerfile:1.7\n"
             "2\tFROM nvcr.io/nvidia/pytorch:24.05-py3\n"
             "3\tARG NCCL_VERSION=2.18.6-1\n"
             "4\tARG CUDA_SHORT=cu121\n"
             "5\tENV NCCL_DEBUG=WARN \\\n"
             "6\t    TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"
             "7\t# NCCL is pinned explicitly: the base image's build lags the fabric firmware.\n"
             "8\tRUN apt-get install -y libnccl2=${NCCL_VERSION}+cuda${CUDA_SHORT}\n",
             "read_file")};
  const RecallQuery q = ParseRecallQuery("which NCCL build is the training image pinned to?");
  const std::vector<RecalledPassage> got = Rank(q, OutputAfterMessage(items, q), 300, 1);
  EXPECT_THAT(RenderRecalled(got), HasSubstr("NCCL_VERSION=2.18.6-1")) << RenderRecalled(got);
}

// In a long history, a question whose own words the history lacks (a
// recipe's) recalls nothing, whatever its everyday words match; in a short
// one, whose words are still few, its matches are ranked as any question's.
TEST_F(RecallTest, AQuestionAboutSomethingElseRecallsNothingFromALongHistory) {
  const RecallQuery q =
      ParseRecallQuery("So what's a good substitute for buttermilk when making pancakes?");
  ASSERT_FALSE(q.aside);
  std::string tests;
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&tests, "tests/test_ledger.py::test_case_", i, " PASSED\n");
  }
  tests += "    request = make_request(amount=Decimal(\"125.00\"), reference=\"ref-1\")\n";
  tests += "=== 8 passed, random order seed 4411, a good run ===\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the ledger tests."),
      Stored(2, Role::kTool, ItemKind::kToolResult, tests, "bash")};
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.items = 40;
  ASSERT_FALSE(Rank(q, hits, 400).empty()) << "the everyday words match in a short history";
  // A long history: the everyday words are in a few dozen of its items.
  hits.items = 1000;
  for (auto& [term, df] : hits.document_frequency) {
    if (df > 0) df = 20;
  }
  EXPECT_TRUE(Rank(q, hits, 400).empty()) << RenderRecalled(Rank(q, hits, 400));
  // A question in the history's words, asked of the same long history.
  const RecallQuery asked = ParseRecallQuery("Which seed did the random test order use?");
  HistoryHits real = OutputAfterMessage(items, asked);
  real.items = 1000;
  EXPECT_THAT(RenderRecalled(Rank(asked, real, 400)), HasSubstr("seed 4411"));
}

// A message that opens by saying it is about something else is, in a
// history of any length, where the history lacks a quarter of its words;
// the opening's own words ("unrelated", an earlier aside's) match nothing.
TEST_F(RecallTest, AMessageThatSaysItIsAnAsideRecallsNothing) {
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Completely unrelated: my kettle is furred up with limescale. How long in vinegar?"),
      Stored(2, Role::kUser, ItemKind::kMessage, "Resync the snapshot, then plan the next run."),
      Stored(3, Role::kTool, ItemKind::kToolResult,
             "INFO planning 80 shards to copy, 24 workers\nINFO first shard verified in 3 weeks "
             "of training data\nINFO random order seed 4411",
             "bash")};
  const std::string text =
      "I signed up for my first marathon in the spring. How many weeks of training should I "
      "plan for?";
  const RecallQuery aside = ParseRecallQuery("Unrelated: " + text);
  EXPECT_TRUE(aside.aside);
  EXPECT_THAT(aside.terms, Not(Contains("unrel")));
  EXPECT_TRUE(Rank(aside, HitsFor(items, aside), 400).empty())
      << RenderRecalled(Rank(aside, HitsFor(items, aside), 400));
  // The same words without the opening are ranked as any question's in a
  // short history (a long one gates them by their own share).
  const RecallQuery plain = ParseRecallQuery(text);
  EXPECT_FALSE(plain.aside);
  EXPECT_FALSE(Rank(plain, HitsFor(items, plain), 400).empty());
  // Other openings that say so; "random" said of something else is a word.
  EXPECT_TRUE(ParseRecallQuery("Totally off-topic: basil keeps wilting?").aside);
  EXPECT_TRUE(ParseRecallQuery("Off topic, any tips for basil?").aside);
  EXPECT_TRUE(ParseRecallQuery("Random one while things run: toddler sleep tips?").aside);
  const RecallQuery seed = ParseRecallQuery("Random seed, which one did the test order use?");
  EXPECT_FALSE(seed.aside);
  EXPECT_THAT(First(seed, HitsFor(items, seed), 400), HasSubstr("seed 4411"));
  // An opening that names a subject of its own past the limit is not one.
  EXPECT_FALSE(
      ParseRecallQuery("Not unrelated to the snapshot resync we ran this morning, the seed?").aside);
}

TEST_F(RecallTest, TheAskingSentenceAndItsFragmentsOutweighTheRest) {
  // Words of the sentence around the question count less; a short
  // fragment after it ("In minutes.") is part of the question.
  const RecallQuery q = ParseRecallQuery(
      "Teodor wants to line the alert up with it. What is the drain estimate? In minutes.");
  ASSERT_EQ(q.asked.size(), static_cast<size_t>(q.words));
  std::vector<std::string> asked, aside;
  for (size_t i = 0; i < q.terms.size(); ++i) {
    (q.asked[q.word_of[i]] ? asked : aside).push_back(q.terms[i]);
  }
  EXPECT_THAT(asked, UnorderedElementsAre("drain", "estim", "minut", "drain-estimate",
                                          "drain_estimate", "drainestim", "reckon", "est",
                                          "eta"));
  // ("reckon", "est" and "eta" stand in for "estimate"; "alarm" for
  // "alert", a word of the same sentence; the
  // name's singular is a verb's bare form here.)
  EXPECT_THAT(aside, UnorderedElementsAre("teodor", "want", "line", "alert", "teodor-wants",
                                          "teodor_wants", "teodorw", "alarm", "teodor-want",
                                          "teodor_want"));
  EXPECT_TRUE(q.asks_quantity);  // "in minutes"
  // A lead-in before a colon: a long one is talk around the question, a
  // short one names its subject.
  auto asked_terms = [](absl::string_view question) {
    const RecallQuery r = ParseRecallQuery(question);
    std::vector<std::string> out;
    for (size_t i = 0; i < r.terms.size(); ++i) {
      if (r.asked[r.word_of[i]]) out.push_back(r.terms[i]);
    }
    return out;
  };
  EXPECT_THAT(asked_terms("Ops review in ten minutes, so quickly: what is the drain estimate?"),
              AllOf(Contains("drain"), Not(Contains("review"))));
  EXPECT_THAT(asked_terms("Customs: what is the drain estimate?"), Contains("custom"));
  // Without a question mark, every sentence asks.
  const RecallQuery plain = ParseRecallQuery("the drain estimate. teodor asked");
  for (bool a : plain.asked) EXPECT_TRUE(a);
  // A word both around and in the question is asked.
  const RecallQuery both = ParseRecallQuery("The drain stalled. Why did the drain stall?");
  for (bool a : both.asked) EXPECT_TRUE(a);
  // Shortened units and verbs are spelled out: "exec timeout, in mins".
  EXPECT_THAT(ParseRecallQuery("the exec timeout in mins").terms,
              ::testing::IsSupersetOf({"execut", "minut"}));
}

TEST_F(RecallTest, WordsTheCallShowsCountLessOnALine) {
  // A patch's result repeats its path, which its provenance line shows
  // already; the line that answers holds the question's other words.
  const std::string patch = "--- a/emr/steps/web_sessionize/configurations.json\n";
  const std::string config =
      "{\"spark.sql.shuffle.partitions\": \"3000\", \"spark.io.compress\": \"lz4\", "
      "\"spark.io.buffer\": \"64k\", \"spark.task.cpus\": \"1\"}\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me the step."),
      Stored(2, Role::kTool, ItemKind::kToolResult, config, "read_file"),
      Stored(3, Role::kTool, ItemKind::kToolResult, patch, "apply_patch")};
  const RecallQuery q = ParseRecallQuery(
      "Which shuffle partitions did the web_sessionize configurations give?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  hits.calls[3] = R"({"path": "emr/steps/web_sessionize/configurations.json"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 400, 1);
  ASSERT_EQ(got.size(), 1u) << RenderRecalled(got);
  EXPECT_THAT(got[0].text, HasSubstr("spark.sql.shuffle.partitions")) << RenderRecalled(got);
}

TEST_F(RecallTest, NoLineIsShownTwice) {
  // Value lines found through their exchange are shown with their
  // neighbours; a neighbour that is itself a candidate is not shown again.
  std::string log;
  for (int i = 0; i < 6; ++i) absl::StrAppend(&log, "batch-", i, " checksum 7a", i, "f0\n");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the dry run for the etl rewrite."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "migrate")};
  // "checksum" is in other turns too: not rare enough to answer alone.
  for (int64_t s = 3; s <= 8; ++s) {
    items.push_back(Stored(s, Role::kAssistant, ItemKind::kMessage,
                           absl::StrCat("Noted checksum ", s, " elsewhere.")));
  }
  const RecallQuery q = ParseRecallQuery("What checksums did the etl rewrite's dry run give?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  const std::vector<RecalledPassage> got = Rank(q, hits, 1000);
  ASSERT_FALSE(got.empty());
  const std::string text = RenderRecalled(got);
  EXPECT_THAT(text, HasSubstr("batch-1 checksum 7a1f0\n  batch-2"));
  for (int i = 0; i < 6; ++i) {
    const std::string line = absl::StrCat("batch-", i, " checksum");
    size_t n = 0;
    for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
    EXPECT_LE(n, 1u) << text;
  }
}

TEST_F(RecallTest, AnOutputIsKnownByItsOwnCallAndItsTurnsTalk) {
  // Two outputs of one turn: the question's subject stands in the call of
  // the second only. The first, a long listing read beside it whose lines
  // hold a word of the question, gets nothing from its sibling's call.
  std::string listing;
  for (int i = 0; i < 30; ++i) absl::StrAppend(&listing, "entry ", i, " limit ", 100 + i, "\n");
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "The quokka relay is next."),
      Stored(4, Role::kUser, ItemKind::kMessage, "Look around, please."),
      Stored(5, Role::kTool, ItemKind::kToolResult, listing, "ls"),
      Stored(6, Role::kTool, ItemKind::kToolResult, "# settings\nlimit: 42\n", "read_file")};
  const RecallQuery q = ParseRecallQuery("What limit does the quokka relay set?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  // The turn of both outputs holds every word of the question (in the
  // config's call).
  for (int64_t s : {4, 5, 6}) hits.exchange_terms[s] = q.terms;
  hits.calls[6] = R"({"path": "deploy/quokka-relay/values.yaml"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 400);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].sequence, 6) << RenderRecalled(got);
  for (const RecalledPassage& p : got) EXPECT_NE(p.sequence, 5) << RenderRecalled(got);
}

TEST_F(RecallTest, TheFirstPickIsTheBestThatAnswersEnoughOfTheQuestion) {
  // A one-word line outranks a long line holding three of the question's
  // words (a short line's words weigh more), but answers too little of the
  // question to be recalled first: the long line is, and recall goes on.
  std::string long_line = "walrus otter heron";
  for (int i = 0; i < 60; ++i) {
    long_line += absl::StrCat(" q", std::string(1, static_cast<char>('a' + i % 26)),
                              std::string(1, static_cast<char>('a' + i / 26)), "x");
  }
  // Two turns' questions: neither lends the other its words.
  std::vector<Item> items = {Stored(1, Role::kUser, ItemKind::kMessage, "zebra"),
                             Stored(4, Role::kUser, ItemKind::kMessage, long_line)};
  const RecallQuery q = ParseRecallQuery("zebra walrus otter heron capybara pangolin?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  const std::vector<RecalledPassage> got = Rank(q, hits, 400);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].sequence, 4) << RenderRecalled(got);
}

TEST_F(RecallTest, ARunsTotalTimeAnswersHowLongItTook) {
  EXPECT_TRUE(ParseRecallQuery("how long did that full refresh take, end to end?").asks_duration);
  EXPECT_TRUE(ParseRecallQuery("How much time did the backfill run for?").asks_duration);
  // The thing that took it named at length.
  EXPECT_TRUE(ParseRecallQuery("how long did the full rebuild of the core nightly dbt selection "
                               "take after last week's column changes?")
                  .asks_duration);
  // A setting asked for is answered by its line, which names it.
  EXPECT_FALSE(
      ParseRecallQuery("How long does the DAG get before it pages? In mins.").asks_duration);
  // "long" of "how long" frames the question; it is not searched.
  EXPECT_THAT(ParseRecallQuery("how long did the refresh take?").terms,
              Not(::testing::Contains("long")));
  // A build log: every step states its time; the run's total is the line
  // the question asks for, and holds none of its words.
  std::string log = "13:42:17  Running with dbt=1.8.7\n";
  for (int i = 1; i <= 24; ++i) {
    absl::StrAppend(&log, "13:4", i % 10, ":18  ", i, " of 24 OK created sql view model staging.stg_",
                    i, " ....... [CREATE VIEW in ", i, ".57s]\n");
  }
  log += "14:07:39  Finished running 10 incremental models, 14 view models in 0 hours 34 minutes "
         "and 31.67 seconds.\n14:07:39  Completed successfully\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Sources look fresh. Start the full refresh."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "bash"),
      Stored(3, Role::kAssistant, ItemKind::kMessage, "The refresh went through without errors.")};
  const RecallQuery q =
      ParseRecallQuery("how long did that full refresh of nightly_core take, end to end?");
  HistoryHits hits = HitsFor(items, q);
  hits.items = 1000;
  for (const Item& item : items) hits.exchange_terms[item.sequence] = q.terms;
  hits.calls[2] = R"({"cmd": "dbt run --selector nightly_core --full-refresh --target prod"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 300);
  std::vector<std::string> texts;
  for (const RecalledPassage& p : got) texts.push_back(p.text);
  EXPECT_THAT(texts, ::testing::Contains(HasSubstr("0 hours 34 minutes"))) << RenderRecalled(got);
}

// A run's time written compactly ("17m42s") is a duration too: a dry run's
// per-table times in seconds come before its total, written so.
TEST_F(RecallTest, ACompactDurationIsARunsTime) {
  std::string log = "migctl 3.8.2 dry run: source hallb-prod -> target plat2-prod\n";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&log, "2027-02-09T20:2", i % 10, ":18Z [dry-run] table_p", i, "  copy  ",
                    1000 + i, " rows   ", 60 + i, ".3s  ok\n");
  }
  log += "summary\n  tables            20\n  mismatches        0\n  elapsed           17m42s\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the ingress gateway dry run."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "migctl")};
  const RecallQuery q = ParseRecallQuery("How long did the ingress gateway dry run take?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"cmd": "migctl dry-run --area ingress-gateway --throttle 40"})";
  const std::vector<RecalledPassage> got = BestBesideQuestion(q, hits);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("17m42s")) << RenderRecalled(got);
}

// A run's time written as a clock ("elapsed 01:45:27", "wall clock
// 05:58:28") is a duration where the words before it say so; the same
// figure after a start ("started 22:00:05") is a time of day.
TEST_F(RecallTest, AClockWrittenAfterElapsedIsARunsTime) {
  std::string log = "2026-04-14 01:00:49.062 [migration.run] run 7 start at 01:00:49\n";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&log, "2026-04-14 01:", 10 + i, ":02.846 [migration.copy] batch ", i * 60,
                    "/1199 rows=5000 ms=", 200 + i, " checksum=6f9120", 10 + i, "\n");
  }
  // Counted as a duration, "started 22:00:05" would be the longest.
  log += "2026-04-14 02:40:11.270 [migration.summary] started 22:00:05, step in 0:00:59\n"
         "2026-04-14 02:43:58.162 [migration.summary] elapsed 01:45:27\n"
         "2026-04-14 02:45:29.954 [migration.summary] dry-run checksum 3504cf8\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me the etl rewrite's dry run 7 log."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "psql")};
  const RecallQuery q =
      ParseRecallQuery("How long did the etl rewrite's dry run take, start to finish?");
  ASSERT_TRUE(q.asks_duration);
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"query": "select line from dry_run_log where area = 'etl rewrite'"})";
  const std::vector<RecalledPassage> got = BestBesideQuestion(q, hits);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("elapsed 01:45:27")) << RenderRecalled(got);

  // A dry run's estimate of a step is how long that step would take.
  std::string summary = "hvmig 3.8.2  dry-run  plan rev 18  started 2026-06-09 09:40:39\n";
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&summary, "TABLE_", i, "   25,761,", 100 + i, "   25,761,", 100 + i,
                    "   0   3027b917dc", 10 + i, "   ok\n");
  }
  summary += "phase timings: extract 29m49s  compare 6m17s  verify 6m24s\n\nsummary\n"
             "  objects compared ........ 12\n"
             "  estimated cutover ....... 01:30:33\n"
             "  rollback point .......... rp-20260609-1043-48c939\n";
  items = {Stored(1, Role::kUser, ItemKind::kMessage, "Run the route-optimiser dry run."),
           Stored(2, Role::kTool, ItemKind::kToolResult, summary, "hvmig")};
  const RecallQuery would =
      ParseRecallQuery("How long did the route optimiser's dry run reckon the cutover would take?");
  ASSERT_TRUE(would.asks_duration);
  hits = OutputAfterMessage(items, would);
  hits.calls[2] = R"({"cmd": "hvmig dry-run --workstream route-optimiser --plan latest"})";
  const std::vector<RecalledPassage> estimate = BestBesideQuestion(would, hits);
  ASSERT_EQ(estimate.size(), 1u);
  EXPECT_THAT(estimate[0].text, HasSubstr("01:30:33")) << RenderRecalled(estimate);
}

// The word of taking in "how long did it take" and a whole run's "start
// to finish" say how the question asks, not what about: a runbook's "Take
// the cold copy first" or a log's "step 3: start" lines do not answer it.
TEST_F(RecallTest, TakingAndStartToFinishFrameADurationQuestion) {
  const RecallQuery q =
      ParseRecallQuery("How long did the first rehearsal take overall, start to finish?");
  ASSERT_TRUE(q.asks_duration);
  for (const char* word : {"take", "start", "finish"}) {
    EXPECT_THAT(q.terms, Not(Contains(SearchTerms(word).front()))) << word;
  }
  // A run, often the thing's own name ("the dry run"), is still searched,
  // and the taking after it is not.
  const RecallQuery dry_run = ParseRecallQuery("How long did the dry run take?");
  EXPECT_THAT(dry_run.terms, Contains(SearchTerms("run").front()));
  EXPECT_THAT(dry_run.terms, Not(Contains(SearchTerms("take").front())));
  std::string runbook = "## 3. Copy the archive\n";
  for (int i = 0; i < 6; ++i) absl::StrAppend(&runbook, "3.", i + 3, " Check the tablespace ", i, "\n");
  runbook += "3.2 Take the cold copy first, then start the timer:\n";
  std::string log = "2026-05-16 22:01:12,800 INFO  orchestrator plan loaded: 13 steps\n";
  for (int i = 1; i <= 12; ++i) {
    absl::StrAppend(&log, "2026-05-16 23:", 10 + i, ":33,079 INFO  orchestrator step ", i,
                    "/13: start\n");
  }
  log += "2026-05-17 01:51:58,257 INFO  orchestrator all steps complete, wall clock 05:58:28\n";
  const std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "Rehearsal 1 ran overnight. Pull the orchestrator log from the job host."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "bash"),
      Stored(3, Role::kTool, ItemKind::kToolResult, runbook, "read_file")};
  HistoryHits hits = OutputAfterMessage(items, q);
  const std::vector<RecalledPassage> got = BestBesideQuestion(q, hits);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("wall clock 05:58:28")) << RenderRecalled(got);
}

TEST_F(RecallTest, AScheduleAnswersWhatTimeItStarts) {
  EXPECT_TRUE(ParseRecallQuery("What time does the snapshot DAG kick off?").asks_time_of_day);
  EXPECT_TRUE(ParseRecallQuery("When does the export run, per its config?").asks_time_of_day);
  EXPECT_FALSE(ParseRecallQuery("When did we last deploy?").asks_time_of_day);
  EXPECT_TRUE(ParseRecallQuery("What's the exact cron on the recon jobs?").asks_time_of_day);
  EXPECT_FALSE(ParseRecallQuery("Did the cron fire?").asks_time_of_day);
  // Every DAG's config has the same keys; the one asked about is named by
  // the call's path and its turn's question only.
  std::string config = "# Read by dags/lib/factory.py; the DAG id is this file's name.\n";
  for (const char* key : {"owner: data-eng", "retries: 2", "retry_delay_minutes: 10",
                          "max_active_runs: 1", "schedule: \"20 4 * * *\"", "sla_minutes: 225",
                          "pool_slots: 2"}) {
    absl::StrAppend(&config, key, "\n");
  }
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "The inventory snapshot DAG failed. Show me its config."),
      Stored(2, Role::kTool, ItemKind::kToolResult, config, "read_file")};
  // The question's phrasing ("kick off") stands in other turns.
  for (int64_t s = 3; s <= 9; ++s) {
    items.push_back(Stored(s, Role::kUser, ItemKind::kMessage,
                           absl::StrCat("Kick off backfill number ", s, " once the run is green.")));
  }
  const RecallQuery q = ParseRecallQuery(
      "What time does the inventory snapshot DAG kick off? The cron from its config.");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"path": "dags/config/inventory_snapshot.yaml"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 300);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].sequence, 2) << RenderRecalled(got);
  EXPECT_THAT(got[0].text, HasSubstr("20 4 * * *")) << RenderRecalled(got);
  // Asked for as a cron, with no time in the question.
  const RecallQuery cron = ParseRecallQuery("What's the exact cron on the inventory snapshot DAG?");
  EXPECT_THAT(First(cron, OutputAfterMessage(items, cron), 300), HasSubstr("20 4 * * *"));
}

TEST_F(RecallTest, ATotalAnswersHowManyAndWhatItCost) {
  EXPECT_TRUE(ParseRecallQuery("How many files were in the prefix?").asks_total);
  EXPECT_TRUE(ParseRecallQuery("What did kubecost say the namespace cost us?").asks_total);
  EXPECT_FALSE(ParseRecallQuery("Which files were in the prefix?").asks_total);
  // A listing whose every line holds the question's words but one: the
  // summary line at its end, which holds none of them.
  std::string listing;
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&listing, "2026-03-01 23:", 10 + i, ":57  227.7 MiB shard-0", 1900 + i,
                    ".tar\n");
  }
  listing += "\nTotal Objects: 1970\n   Total Size: 411.2 GiB\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Is the webdocs snapshot complete? List it."),
      Stored(2, Role::kTool, ItemKind::kToolResult, listing, "bash")};
  const RecallQuery q =
      ParseRecallQuery("How many shards were sitting in the webdocs snapshot prefix?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"cmd": "aws s3 ls s3://datasets/webdocs-v9/snap-20260301/ --summarize"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 120);
  std::vector<std::string> texts;
  for (const RecalledPassage& p : got) texts.push_back(p.text);
  EXPECT_THAT(texts, ::testing::Contains(HasSubstr("Total Objects: 1970"))) << RenderRecalled(got);
}

// SQL*Plus writes a report's total as a "sum" row under its column
// ("compute sum of gb on report"); "add up to" asks for a total.
TEST_F(RecallTest, ASumRowAnswersWhatItAddsUpTo) {
  EXPECT_TRUE(ParseRecallQuery("What did the schema add up to in GB?").asks_total);
  EXPECT_FALSE(ParseRecallQuery("Did the schema add a column?").asks_total);
  std::string report = "OWNER      SEGMENT_NAME                   SEGMENT_TYPE            GB\n";
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&report, "LEDGR      SEGMENT_", i, "                     TABLE              ",
                    900 - i * 20, ".27\n");
  }
  report += "                                                               ----------\n"
            "sum                                                               4109.40\n\n"
            "30 rows selected.\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage,
             "How big is LEDGR on the Oracle side, segment by segment?"),
      Stored(2, Role::kTool, ItemKind::kToolResult, report, "sqlplus")};
  const RecallQuery q = ParseRecallQuery("What did the whole LEDGR schema add up to in GB?");
  HistoryHits hits = OutputAfterMessage(items, q);
  hits.calls[2] = R"({"query": "select owner, segment_name, sum(bytes)/power(1024,3) gb"})";
  const std::vector<RecalledPassage> got = Rank(q, hits, 600);
  std::vector<std::string> texts;
  for (const RecalledPassage& p : got) texts.push_back(p.text);
  EXPECT_THAT(texts, ::testing::Contains(HasSubstr("4109.40"))) << RenderRecalled(got);
}

TEST_F(RecallTest, ADigestAnswersWhatChecksumARunCameBackWith) {
  EXPECT_TRUE(ParseRecallQuery("What checksums did its dry runs come back with?").asks_hash);
  EXPECT_TRUE(ParseRecallQuery("the image's sha256, please").asks_hash);
  EXPECT_TRUE(ParseRecallQuery("Paste me the md5 we took over November's revenue.").asks_hash);
  // "commit" is a word of code too (`session.commit()`).
  EXPECT_FALSE(ParseRecallQuery("Which commit added the lookup?").asks_hash);
  // A dry run's output names checksums on several shorter lines (one with
  // a pod's name), and states the digest on a longer one.
  std::string run = "migctl 3.8.2 dry run: source hallb-prod -> target plat2-prod\n";
  for (int i = 0; i < 20; ++i) absl::StrAppend(&run, "[copy] table_", i, " ok\n");
  run +=
      "dry-run checksum mode: per-batch\n"
      "dry-run checksum exporter-febdfb11f-68e1e\n"
      "dry-run checksum c496ae2 covers 22 tables and 26400267 rows of the source\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Run the invoice-archive dry run, please."),
      Stored(2, Role::kTool, ItemKind::kToolResult, run, "migctl")};
  const RecallQuery q = ParseRecallQuery(
      "Quick one on the invoice-archive: what checksum did its dry run come back with?");
  HistoryHits hits = OutputAfterMessage(items, q);
  // As in a migration's history: dry runs and checksums on every other
  // item, the service on a few.
  for (auto& [term, df] : hits.document_frequency) {
    if (!absl::StrContains(term, "invoice") && !absl::StrContains(term, "archive")) df = 600;
  }
  hits.calls[2] = R"({"cmd": "migctl dry-run --area invoice-archive --throttle 40"})";
  const std::vector<RecalledPassage> got = BestBesideQuestion(q, hits, 200);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].text, HasSubstr("c496ae2")) << RenderRecalled(got);
}

TEST_F(RecallTest, TheWorstIsFoundWhereALineWritesMax) {
  // "worst" asks for the most; a summary line writes it "max=".
  const RecallQuery q = ParseRecallQuery("What was the worst p99 of the canary, in secs?");
  EXPECT_THAT(q.terms, ::testing::Contains("max"));
  EXPECT_THAT(ParseRecallQuery("the lowest error rate, in percent").terms,
              ::testing::Contains("min"));
  // Not for anything but a quantity: "smallest" stays a word of its own.
  EXPECT_THAT(ParseRecallQuery("my bike skips on the smallest cog").terms,
              Not(::testing::Contains("min")));
  std::string series;
  for (int i = 0; i < 30; ++i) absl::StrAppend(&series, "2026-03-04T10:", 10 + i, ":00Z    1.0", i, "\n");
  series += "stats: min=0.784 max=4.068 mean=1.202 last=1.092\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Pull the canary's p99 latency for the last 6h."),
      Stored(2, Role::kTool, ItemKind::kToolResult, series, "bash")};
  HistoryHits hits = OutputAfterMessage(items, q);
  EXPECT_THAT(First(q, hits, 100), HasSubstr("max=4.068"));
}

TEST_F(RecallTest, ShapesAreNotTakenFromLogLinesListingsOrWindows) {
  // A log line's timestamp sets nothing; a clock and a schedule keep to
  // their ranges.
  std::string log;
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&log, "13:42:", 10 + i, "  step ", i, " done\n2026-03-04T10:", 10 + i,
                    ":00Z    1.0", i, "\n");
  }
  log += "  start_at: 04:20\n";
  std::vector<Item> items = {
      Stored(1, Role::kUser, ItemKind::kMessage, "Show me the export job's log and config."),
      Stored(2, Role::kTool, ItemKind::kToolResult, log, "bash")};
  const RecallQuery q = ParseRecallQuery("What time does the export job start?");
  HistoryHits hits = OutputAfterMessage(items, q);
  EXPECT_THAT(First(q, hits, 300), HasSubstr("start_at: 04:20"));

  // `ls -l`'s "total 48" counts disk blocks, not files: no total.
  std::string listing = "total 48\n";
  for (int i = 0; i < 12; ++i) absl::StrAppend(&listing, "-rw-r--r-- 1 ml ml 4096 shard-", i, "\n");
  items = {Stored(1, Role::kUser, ItemKind::kMessage, "List the webdocs shard folder."),
           Stored(2, Role::kTool, ItemKind::kToolResult, listing, "bash")};
  const RecallQuery many = ParseRecallQuery("How many webdocs shards were in the folder?");
  hits = OutputAfterMessage(items, many);
  for (const RecalledPassage& p : Rank(many, hits, 300, 8)) {
    EXPECT_THAT(p.text, Not(HasSubstr("total 48")));
  }

  // A query's window is not how long the query took.
  const std::string promq =
      "querying p99 over the last 6h, step 3m\nquery took 212 ms (12,500 ms queued)\n";
  items = {Stored(1, Role::kUser, ItemKind::kMessage, "Run the latency query for the canary."),
           Stored(2, Role::kTool, ItemKind::kToolResult, promq, "bash")};
  const RecallQuery took = ParseRecallQuery("How long did the canary's latency query take?");
  hits = OutputAfterMessage(items, took);
  const std::vector<RecalledPassage> first = Rank(took, hits, 300, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_THAT(first[0].text, HasSubstr("query took 212 ms")) << RenderRecalled(first);
}

// RankPassages splits only the pieces that hold a probe of a question's
// terms: that is exact only if every term the analysis finds in a text has
// a probe in it. Checked on every line of the replays' conversations (tool
// outputs, code, logs, configs, questions, and their JSON escapes) and on
// words whose stems change their endings.
TEST(SurfaceProbesTest, EveryTermOfATextHasAProbeInIt) {
  std::vector<std::string> texts = {
      "ability possibility visibility sensibly skies dying lying tying idly gently ugly early "
      "only singly generously happily relational organization organizer activity valency "
      "hesitancy probability agreed feed proceed exceed succeed news howe atlantic cosmos bias "
      "andes hoping conflated tied cried reasonably possibly tendency sensational information "
      "creation operator cruelly namely fully",
      "The DB's configs, k8s envs and MQ topics; prod vs stg repos; authN for the IdP",
      "maxReplicas CronJobs HTTPServer iPhone IdP pricing-db db-7.west etl_rewrite v1.2.3 "
      "user@example.org /var/lib/postgresql/16/main 0x7f3a 30a6359 --dry-run",
      "\u25cf RefundDialog \u203a disables refund\n  \u2715 disables (3 ms)\n  \u2713 renders\n"
      "\u2716 \u2717 \u2718 \u2714",
  };
  for (size_t i = 0; i < kAbbreviationCount; ++i) {
    texts.push_back(absl::StrCat(kAbbreviations[i].abbreviation, " ",
                                 absl::AsciiStrToUpper(kAbbreviations[i].abbreviation), " x-",
                                 kAbbreviations[i].abbreviation, " ", kAbbreviations[i].word));
  }
  const std::string dir = absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                                       "/tools/replay_data/");
  for (const char* name :
       {"platform.jsonl", "coding.jsonl", "migration.jsonl", "oncall.jsonl", "analytics.jsonl",
        "mlops.jsonl", "platform_probes.jsonl", "platform_heldout_probes.jsonl",
        "coding_probes.jsonl", "coding_heldout_probes.jsonl", "analytics_probes.jsonl",
        "analytics_heldout_probes.jsonl", "mlops_probes.jsonl", "mlops_heldout_probes.jsonl"}) {
    std::ifstream in(dir + name);
    ASSERT_TRUE(in.good()) << dir << name;
    for (std::string line; std::getline(in, line);) texts.push_back(line);
  }
  ASSERT_GT(texts.size(), 1000u);
  int64_t terms = 0;
  for (const std::string& text : texts) {
    const std::string lower = absl::AsciiStrToLower(text);
    for (const std::string& term : SearchTerms(text)) {
      ++terms;
      const std::vector<std::string> probes = SurfaceProbes(term);
      ASSERT_FALSE(probes.empty()) << term;
      EXPECT_TRUE(std::any_of(probes.begin(), probes.end(),
                              [&](const std::string& p) { return absl::StrContains(lower, p); }))
          << "no probe of \"" << term << "\" in: " << text.substr(0, 200);
    }
  }
  EXPECT_GT(terms, 100000);
}

// The probes narrow: a stem's probe is shorter than the term, an
// abbreviation's expansion is found by the abbreviation too.
TEST(SurfaceProbesTest, ProbesOfStemsValuesAndAbbreviations) {
  EXPECT_THAT(SurfaceProbes("possibl"), ElementsAre("possib"));
  EXPECT_THAT(SurfaceProbes("happi"), ElementsAre("happ"));
  EXPECT_THAT(SurfaceProbes("die"), ElementsAre("d"));
  EXPECT_THAT(SurfaceProbes("etl"), ElementsAre("etl"));
  EXPECT_THAT(SurfaceProbes("30a6359"), ElementsAre("30a6359"));
  EXPECT_THAT(SurfaceProbes("pricing-db"), ElementsAre("pricing-db"));
  EXPECT_THAT(SurfaceProbes("databas"), testing::Contains("db"));
  EXPECT_THAT(SurfaceProbes("fail"), testing::Contains("\u2715"));
  EXPECT_THAT(SurfaceProbes("pass"), testing::Contains("\u2713"));
  EXPECT_THAT(SurfaceProbes(""), IsEmpty());
}

}  // namespace
}  // namespace convstate
