// A replica's copy of the history keeps each candidate's pieces
// (HistoryHits::pieces) so that ranking it again splits no text. Ranking
// from the kept pieces must choose what ranking from the text chooses:
// checked here on the replays' conversations, every recall question of
// their question sets asked where the replay asks it, at a room of a few
// passages and of many.

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/compaction/recall/recall.h"
#include "services/tokenizer/tokens.h"
#include "storage/history_index.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

std::string DataDir() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                      "/tools/replay_data/");
}

TEST(RecallPiecesTest, RankingFromKeptPiecesChoosesWhatRankingTheTextChooses) {
  const std::unique_ptr<Tokenizer> tokenizer = NewApproximateTokenizer();
  int questions = 0, passages = 0, kept_items = 0;
  for (const char* name : {"platform", "coding", "analytics", "mlops", "migration", "oncall"}) {
    std::vector<std::string> probe_files = {absl::StrCat(name, "_probes.jsonl")};
    if (std::string(name) != "migration" && std::string(name) != "oncall") {
      probe_files.push_back(absl::StrCat(name, "_heldout_probes.jsonl"));
    }
    for (const std::string& probes : probe_files) {
      auto loaded = replay::Load(DataDir() + name + ".jsonl",
                                 DataDir() + name + "_facts.jsonl", DataDir() + probes);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      HistoryIndex index;
      std::vector<Item> items;
      for (const replay::ReplayItem& r : loaded->items) {
        items.push_back(replay::StoredItem(r, static_cast<int64_t>(items.size()) + 1));
      }
      for (const replay::Probe& probe : loaded->probes) {
        if (probe.kind != "recall") continue;
        // The question, and the history before its turn.
        std::string question;
        int64_t before = 0;
        for (const Item& item : items) {
          if (item.turn_index < probe.turn) before = item.sequence;
          if (item.turn_index == probe.turn && item.data.role == Role::kUser && question.empty()) {
            question = item.data.content;
          }
        }
        ASSERT_FALSE(question.empty()) << name << " turn " << probe.turn;
        while (index.through() < before) index.Add(items[static_cast<size_t>(index.through())]);
        const RecallQuery query = ParseRecallQuery(question);
        HistorySearch search = SearchFor(query);
        search.max_items = kRecallCandidates;
        const HistoryHits kept = index.Search(search, before, before);
        HistoryHits split = kept;
        split.pieces.clear();
        kept_items += static_cast<int>(kept.pieces.size());
        for (int64_t room : {120, 2000}) {
          RecallLimits limits;
          limits.max_tokens = room;
          const std::vector<RecalledPassage> a = RankPassages(query, kept, *tokenizer, limits);
          const std::vector<RecalledPassage> b = RankPassages(query, split, *tokenizer, limits);
          ASSERT_EQ(a.size(), b.size()) << name << " turn " << probe.turn << ": " << question;
          for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].sequence, b[i].sequence) << question;
            EXPECT_EQ(a[i].offset, b[i].offset) << question;
            EXPECT_EQ(a[i].text, b[i].text) << question;
            EXPECT_DOUBLE_EQ(a[i].score, b[i].score) << question;
          }
          passages += static_cast<int>(a.size());
        }
        ++questions;
      }
    }
  }
  // The comparison compared something.
  EXPECT_GT(questions, 100);
  EXPECT_GT(passages, 500);
  EXPECT_GT(kept_items, 1000);
}

}  // namespace
}  // namespace convstate
