#include "storage/history_index.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Item MakeItem(int64_t sequence, int64_t turn, Role role, ItemKind kind, std::string content,
              std::string call_id = "") {
  Item item;
  item.sequence = sequence;
  item.turn_index = turn;
  item.data.role = role;
  item.data.kind = kind;
  item.data.content = std::move(content);
  item.data.tool_call_id = std::move(call_id);
  return item;
}

std::vector<int64_t> Sequences(const HistoryHits& hits) {
  std::vector<int64_t> out;
  for (const Item& i : hits.found) out.push_back(i.sequence);
  return out;
}

// A turn whose tool output's lines do not name their subject: the user's
// question and the call's arguments do.
class HistoryIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add(Role::kUser, ItemKind::kMessage, "What did the dry run show for the billing export?");
    Add(Role::kAssistant, ItemKind::kToolCall, "migctl dry-run --area billing-export", "c1");
    Add(Role::kTool, ItemKind::kToolResult, "rows 1200\ndry-run checksum 30a6359\nok", "c1");
    Add(Role::kAssistant, ItemKind::kMessage, "The checksum matched the plan.");
    NextTurn();
    Add(Role::kUser, ItemKind::kMessage, "Now the ledger rebuild, same thing please.");
    Add(Role::kAssistant, ItemKind::kToolCall, "migctl dry-run --area ledger-rebuild", "c2");
    Add(Role::kTool, ItemKind::kToolResult, "rows 800\ndry-run checksum 77b01c2\nok", "c2");
    Add(Role::kAssistant, ItemKind::kMessage, "Also clean.");
  }

  void Add(Role role, ItemKind kind, std::string content, std::string call_id = "") {
    const Item item = MakeItem(index_.through() + 1, turn_, role, kind, std::move(content),
                               std::move(call_id));
    items_.push_back(item);
    index_.Add(item);
  }
  void NextTurn() { ++turn_; }

  HistorySearch Searching(std::vector<std::string> words) {
    HistorySearch search;
    for (const std::string& w : words) {
      for (std::string& t : SearchTerms(w)) search.terms.push_back(std::move(t));
    }
    search.max_items = 10;
    return search;
  }

  HistoryIndex index_;
  std::vector<Item> items_;
  int64_t turn_ = 1;
};

TEST_F(HistoryIndexTest, FindsAToolResultThroughItsCallAndItsTurnsQuestion) {
  const HistoryHits hits = index_.Search(Searching({"billing"}), 8, 8);
  // The turn's items that hold the word, then its tool result that does
  // not; nothing of the other turn.
  EXPECT_THAT(Sequences(hits), ElementsAre(2, 1, 3));
  EXPECT_EQ(hits.calls.at(3), "migctl dry-run --area billing-export");
  EXPECT_EQ(hits.document_frequency.at("bill"), 2);
  EXPECT_THAT(hits.exchange_terms.at(3), ElementsAre("bill"));
}

TEST_F(HistoryIndexTest, SearchesOnlyWhatLiesAtOrBeforeUpto) {
  EXPECT_THAT(Sequences(index_.Search(Searching({"ledger"}), 8, 4)), IsEmpty());
  EXPECT_EQ(index_.Search(Searching({"ledger"}), 8, 4).document_frequency.at("ledger"), 0);
  EXPECT_THAT(Sequences(index_.Search(Searching({"ledger"}), 8, 8)), ElementsAre(6, 5, 7));
}

TEST_F(HistoryIndexTest, TermsAboveTheCapOnlyAddToTheBestTurns) {
  HistorySearch search = Searching({"ledger", "checksum"});
  search.max_document_frequency = 2;  // "checksum" is in three items.
  const HistoryHits hits = index_.Search(search, 8, 8);
  EXPECT_EQ(hits.document_frequency.at("checksum"), 3);
  EXPECT_THAT(Sequences(hits), ElementsAre(6, 5, 7));
  EXPECT_THAT(hits.exchange_terms.at(7), ElementsAre("checksum", "ledger"));
  // Known to be common: not counted, the same answer.
  search.known_common = {"checksum"};
  EXPECT_THAT(Sequences(index_.Search(search, 8, 8)), ElementsAre(6, 5, 7));
}

TEST_F(HistoryIndexTest, NeverAnswersRedactedItemsOrMarkers) {
  HistoryIndex index;
  for (Item item : items_) {
    if (item.sequence == 6) item.redacted = true;
    index.Add(item);
  }
  Item marker = MakeItem(9, 2, Role::kSystem, ItemKind::kSummaryMarker, "ledger summary");
  index.Add(marker);
  const HistoryHits hits = index.Search(Searching({"ledger"}), 9, 9);
  // The question still leads to the turn; the erased call is not answered,
  // nor is its content given as the result's call.
  EXPECT_THAT(Sequences(hits), ElementsAre(5, 7));
  EXPECT_FALSE(hits.calls.contains(7));
  EXPECT_EQ(hits.document_frequency.at("ledger"), 1);
}

TEST_F(HistoryIndexTest, ANewWordFindsNothing) {
  const HistoryHits hits = index_.Search(Searching({"kubernetes"}), 8, 8);
  EXPECT_THAT(Sequences(hits), IsEmpty());
  EXPECT_GT(index_.bytes(), 0u);
  EXPECT_EQ(index_.through(), 8);
}

}  // namespace
}  // namespace convstate
