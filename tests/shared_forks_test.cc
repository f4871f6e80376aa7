// Forks on PostgreSQL share their source's items (migrations/0025): a
// fork reads them through segments, a rewind moves the items that leave to
// its abandoned fork, a deleted owner hands what its readers share to one
// of them. These tests drive a PostgreSQL storage and the in-memory one
// (whose forks are copies) through the same random forks, rewinds,
// appends, erasures and deletes, and hold every living conversation's
// items, and what a search of them finds, to be the same on both; and
// that a fork copies no item.

#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/memory_storage.h"
#include "storage/postgres_storage.h"
#include "tests/pg_harness.h"

namespace convstate {
namespace {

using testing::ScratchDatabase;

constexpr char kTenant[] = "acme";
constexpr char kTombstone[] = "[erased]";

ConversationKey Key(const std::string& id) { return ConversationKey{kTenant, id}; }

// A message whose words are its own ("w17x2" is the 17th step's second
// item) and one every item shares.
ItemData Message(const std::string& word) {
  return ItemData{Role::kUser, ItemKind::kMessage, absl::StrCat("note ", word, " shared"), "", "",
                  false, {}, 3};
}

// Both storages, the same call to each.
class Twin {
 public:
  Twin(Storage& pg, Storage& memory) : pg_(pg), memory_(memory) {}

  void Create(const std::string& id, const std::vector<std::string>& words) {
    NewConversation nc;
    nc.key = Key(id);
    nc.model = "m";
    for (Storage* s : {&pg_, &memory_}) ASSERT_TRUE(s->CreateConversation(ctx_, nc).ok());
    Append(id, words);
  }

  void Append(const std::string& id, const std::vector<std::string>& words) {
    AppendRequest req;
    req.key = Key(id);
    for (const std::string& w : words) req.items.push_back(Message(w));
    for (Storage* s : {&pg_, &memory_}) {
      auto r = s->AppendItems(ctx_, req);
      ASSERT_TRUE(r.ok()) << id << ": " << r.status();
    }
  }

  void Fork(const std::string& source, const std::string& fork, int64_t at) {
    ForkRequest req;
    req.source = Key(source);
    req.fork = Key(fork);
    req.at_sequence = at;
    for (Storage* s : {&pg_, &memory_}) {
      auto r = s->ForkConversation(ctx_, req);
      ASSERT_TRUE(r.ok()) << source << " at " << at << ": " << r.status();
    }
  }

  void Rewind(const std::string& id, int64_t to, const std::string& abandoned) {
    RewindRequest req;
    req.key = Key(id);
    req.to_sequence = to;
    req.abandoned = Key(abandoned);
    for (Storage* s : {&pg_, &memory_}) {
      auto r = s->RewindConversation(ctx_, req);
      ASSERT_TRUE(r.ok()) << id << " to " << to << ": " << r.status();
    }
  }

  void Delete(const std::string& id) {
    for (Storage* s : {&pg_, &memory_}) ASSERT_TRUE(s->DeleteConversation(ctx_, Key(id)).ok());
  }

  void Erase(const std::string& id, int64_t sequence) {
    RedactRequest req;
    req.key = Key(id);
    req.sequences = {sequence};
    req.tombstone = kTombstone;
    req.tombstone_tokens = 2;
    req.actor = "test";
    for (Storage* s : {&pg_, &memory_}) {
      auto r = s->RedactItems(ctx_, req);
      ASSERT_TRUE(r.ok()) << id << " item " << sequence << ": " << r.status();
    }
  }

  // Each item as "sequence:content", and the conversation's counts.
  std::string Items(Storage& s, const std::string& id) {
    auto items = s.ListItems(ctx_, Key(id), 0, PageLimit{10000});
    EXPECT_TRUE(items.ok()) << id << ": " << items.status();
    if (!items.ok()) return "";
    std::string out;
    for (const Item& item : items->rows) {
      absl::StrAppend(&out, item.sequence, ":", item.data.content, item.redacted ? "(r)" : "",
                      "|");
    }
    auto c = s.GetConversation(ctx_, Key(id));
    EXPECT_TRUE(c.ok()) << id << ": " << c.status();
    if (c.ok()) {
      absl::StrAppend(&out, "count=", c->item_count, " last=", c->last_sequence,
                      " tokens=", c->item_tokens);
    }
    return out;
  }

  // The sequences a search for `word` finds.
  std::set<int64_t> Found(Storage& s, const std::string& id, const std::string& word) {
    HistorySearch search;
    search.key = Key(id);
    search.terms = {word};
    search.max_items = 1000;
    search.max_document_frequency = 100000;
    auto hits = s.SearchHistory(ctx_, search);
    EXPECT_TRUE(hits.ok()) << id << ": " << hits.status();
    std::set<int64_t> found;
    if (hits.ok()) {
      for (const Item& item : hits->found) found.insert(item.sequence);
    }
    return found;
  }

  // The sequences of a conversation's items read in pages of three.
  std::vector<int64_t> Paged(Storage& s, const std::string& id) {
    std::vector<int64_t> out;
    int64_t after = 0;
    for (int pages = 0; pages < 1000; ++pages) {
      auto page = s.ListItems(ctx_, Key(id), after, PageLimit{3});
      EXPECT_TRUE(page.ok()) << id << ": " << page.status();
      if (!page.ok()) break;
      for (const Item& item : page->rows) out.push_back(item.sequence);
      if (!page->more || page->rows.empty()) break;
      after = page->rows.back().sequence;
    }
    return out;
  }

  void ExpectSame(const std::vector<std::string>& living, const std::string& when) {
    for (const std::string& id : living) {
      EXPECT_EQ(Items(pg_, id), Items(memory_, id)) << id << " after " << when;
      EXPECT_EQ(Paged(pg_, id), Paged(memory_, id)) << id << " in pages, after " << when;
    }
  }

  void ExpectSameSearch(const std::string& id, const std::string& word, const std::string& when) {
    EXPECT_EQ(Found(pg_, id, word), Found(memory_, id, word))
        << "search of " << id << " for " << word << " after " << when;
  }

  int64_t Last(const std::string& id) {
    auto c = memory_.GetConversation(ctx_, Key(id));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->last_sequence : 0;
  }

 private:
  Storage& pg_;
  Storage& memory_;
  CallContext ctx_;
};

// Hash partitions (0: plain tables), and whether forks share their
// source's items (PostgresOptions::shared_forks; copies, as on Citus).
struct Layout {
  int partitions;
  bool shared_forks;
};

// A random history of forks of forks, rewinds above and below fork points,
// deletes of sources and erasures of shared items (seeded by `seed`):
// after every step each living conversation lists the same items on both
// storages, and searches find the same ones.
void RandomHistory(const Layout& layout, uint32_t seed) {
  auto db = ScratchDatabase::Create(/*migrate=*/true, layout.partitions);
  ASSERT_TRUE(db.ok()) << db.status();
  PostgresOptions options;
  options.database_url = (*db)->url();
  options.pool_size = 2;
  options.shared_forks = layout.shared_forks;
  auto pg = NewPostgresStorage(options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  std::unique_ptr<Storage> memory = NewMemoryStorage();
  Twin twin(**pg, *memory);

  std::mt19937 random(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(random);
  };
  std::vector<std::string> living = {"root"};
  std::vector<std::string> words;
  {
    std::vector<std::string> first;
    for (int k = 0; k < 6; ++k) first.push_back(absl::StrCat("w0x", k));
    twin.Create("root", first);
    words.insert(words.end(), first.begin(), first.end());
  }
  std::map<std::string, int> done;
  for (int step = 1; step <= 60 && !::testing::Test::HasFatalFailure(); ++step) {
    const std::string id = living[pick(0, static_cast<int64_t>(living.size()) - 1)];
    const int64_t last = twin.Last(id);
    const int64_t choice = pick(0, 9);
    std::string what;
    if (choice < 3 || last < 2) {
      std::vector<std::string> add;
      for (int k = 0; k < pick(1, 3); ++k) add.push_back(absl::StrCat("w", step, "x", k));
      twin.Append(id, add);
      words.insert(words.end(), add.begin(), add.end());
      what = absl::StrCat("append to ", id);
    } else if (choice < 6) {
      const std::string fork = absl::StrCat("f", step);
      const int64_t at = pick(1, last);
      twin.Fork(id, fork, at);
      living.push_back(fork);
      what = absl::StrCat("fork of ", id, " at ", at);
    } else if (choice < 8) {
      const std::string abandoned = absl::StrCat("r", step);
      const int64_t to = pick(1, last - 1);
      twin.Rewind(id, to, abandoned);
      living.push_back(abandoned);
      what = absl::StrCat("rewind of ", id, " to ", to);
    } else if (choice < 9) {
      const int64_t sequence = pick(1, last);
      twin.Erase(id, sequence);
      what = absl::StrCat("erasure of ", id, " item ", sequence);
    } else if (living.size() > 2) {
      twin.Delete(id);
      living.erase(std::find(living.begin(), living.end(), id));
      what = absl::StrCat("delete of ", id);
    } else {
      continue;
    }
    ++done[what.substr(0, what.find(' '))];
    twin.ExpectSame(living, what);
    for (int k = 0; k < 2; ++k) {
      twin.ExpectSameSearch(living[pick(0, static_cast<int64_t>(living.size()) - 1)],
                            words[pick(0, static_cast<int64_t>(words.size()) - 1)], what);
    }
  }
  // The history did each kind of step.
  for (const char* kind : {"append", "fork", "rewind", "erasure", "delete"}) {
    EXPECT_GT(done[kind], 0) << kind;
  }
}

class SharedForksTest : public ::testing::TestWithParam<Layout> {};

// Three random histories.
TEST_P(SharedForksTest, ForksReadWhatCopiesWouldHold) {
  for (const uint32_t seed : {20261128u, 7u, 1999u}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomHistory(GetParam(), seed);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SharedForksTest,
                         ::testing::Values(Layout{0, true}, Layout{4, true}, Layout{0, false}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return absl::StrCat(
                               info.param.partitions == 0
                                   ? std::string("plain")
                                   : absl::StrCat("partitioned", info.param.partitions),
                               info.param.shared_forks ? "_shared" : "_copied");
                         });

// A fork, and a fork of it, add no row to the items' table; deleting the
// source hands its items to the fork, which still lists them all.
TEST(SharedForksStorageTest, AForkCopiesNoItem) {
  auto db = ScratchDatabase::Create(/*migrate=*/true, 0);
  ASSERT_TRUE(db.ok()) << db.status();
  PostgresOptions options;
  options.database_url = (*db)->url();
  options.pool_size = 2;
  auto pg = NewPostgresStorage(options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  std::unique_ptr<Storage> memory = NewMemoryStorage();
  Twin twin(**pg, *memory);
  std::vector<std::string> words;
  for (int k = 0; k < 50; ++k) words.push_back(absl::StrCat("w0x", k));
  twin.Create("source", words);
  auto rows = [&] { return *(*db)->QueryValue("SELECT count(*) FROM items"); };
  EXPECT_EQ(rows(), "50");
  twin.Fork("source", "fork", 40);
  twin.Fork("fork", "grandchild", 30);
  EXPECT_EQ(rows(), "50");
  twin.Append("fork", {"w1x0"});
  EXPECT_EQ(rows(), "51");
  twin.ExpectSame({"source", "fork", "grandchild"}, "forks");
  twin.Delete("source");
  // The fork took the 40 items it shared as its own (the grandchild's
  // first 30 among them); the source's other ten went with it.
  EXPECT_EQ(rows(), "41");
  twin.ExpectSame({"fork", "grandchild"}, "the source's delete");
  twin.ExpectSameSearch("grandchild", "w0x7", "the source's delete");
}

}  // namespace
}  // namespace convstate
