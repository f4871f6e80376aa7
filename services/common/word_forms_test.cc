#include "services/common/word_forms.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(WordFormTest, InflectionsMeetAtOneForm) {
  EXPECT_EQ(WordForm("guards"), WordForm("guard"));
  EXPECT_EQ(WordForm("checksums"), WordForm("checksum"));
  EXPECT_EQ(WordForm("planning"), WordForm("plan"));
  EXPECT_EQ(WordForm("migrations"), WordForm("migration"));
  EXPECT_EQ(WordForm("rolled"), WordForm("roll"));
  EXPECT_NE(WordForm("guard"), WordForm("guide"));
}

TEST(WordFormTest, AbbreviationsAreSpelledOut) {
  EXPECT_EQ(WordForm("db"), WordForm("database"));
  EXPECT_EQ(WordForm("dbs"), WordForm("databases"));
  EXPECT_EQ(WordForm("k8s"), WordForm("kubernetes"));
  EXPECT_EQ(WordForm("config"), WordForm("configuration"));
  EXPECT_EQ(WordForm("env"), WordForm("environments"));
  for (size_t i = 0; i < kAbbreviationCount; ++i) {
    const std::string phrase = kAbbreviations[i].word;
    if (phrase.find(' ') != std::string::npos) continue;
    EXPECT_EQ(WordForm(kAbbreviations[i].abbreviation), WordForm(phrase))
        << kAbbreviations[i].abbreviation;
  }
  // One that stands for several words is each of them.
  EXPECT_EQ(WordForms("mq"), (std::vector<std::string>{WordForm("message"), WordForm("queue")}));
  EXPECT_EQ(WordForms("idp"),
            (std::vector<std::string>{WordForm("identity"), WordForm("provider")}));
  EXPECT_EQ(WordForms("hpa"), (std::vector<std::string>{WordForm("horizontal"), WordForm("pod"),
                                                        WordForm("autoscaler")}));
  EXPECT_EQ(WordForms("em"), (std::vector<std::string>{WordForm("exact"), WordForm("match")}));
  // A ping's "(RTT)" is the round trip asked about.
  EXPECT_EQ(WordForms("rtt"),
            (std::vector<std::string>{WordForm("round"), WordForm("trip"), WordForm("time")}));
  // A settings file's "max_wal_size" is the write-ahead log asked about.
  EXPECT_EQ(WordForms("wal"),
            (std::vector<std::string>{WordForm("write"), WordForm("ahead"), WordForm("log")}));
  EXPECT_EQ(WordForms("guards"), std::vector<std::string>{WordForm("guard")});
  // A word the stemmer leaves apart from its family.
  EXPECT_EQ(WordForm("expiry"), WordForm("expiration"));
  EXPECT_EQ(WordForm("expiries"), WordForm("expired"));
}

TEST(WordFormTest, NamesAreNotSpelledOut) {
  EXPECT_EQ(WordForm("db", /*spell_out=*/false), "db");
  EXPECT_EQ(WordForm("guards", /*spell_out=*/false), "guard");
}

TEST(WordFormTest, ValuesAndShortWordsStayAsWritten) {
  EXPECT_EQ(WordForm("30a6359"), "30a6359");
  EXPECT_EQ(WordForm("v14"), "v14");
  EXPECT_EQ(WordForm("4111"), "4111");
  EXPECT_EQ(WordForm("is"), "is");
}

TEST(WordFormTest, EveryThreadStemsAlike) {
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&got, t] {
      for (int i = 0; i < 1000; ++i) got[t] = WordForm("rollbacks");
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, WordForm("rollback"));
}

}  // namespace
}  // namespace convstate
