#include "services/api/context_cache.h"

#include <memory>
#include <string>

#include "convstate/v1/convstate.pb.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

std::shared_ptr<const CachedContext> Entry(const std::string& text, int items = 1) {
  auto snapshot = std::make_shared<ContextSnapshot>();
  for (int i = 0; i < items; ++i) {
    Item item;
    item.sequence = i + 1;
    item.data.content = text;
    snapshot->live_items.push_back(item);
  }
  auto entry = std::make_shared<CachedContext>();
  entry->snapshot = std::move(snapshot);
  return entry;
}

ConversationKey Key(const std::string& id) { return ConversationKey{"t", id}; }

TEST(ContextCacheTest, KeepsWhatWasPutAndCountsItsBytes) {
  ContextCache cache(1 << 20, nullptr);
  EXPECT_EQ(cache.Get(Key("a")), nullptr);
  auto entry = Entry(std::string(1000, 'x'));
  cache.Put(Key("a"), entry);
  EXPECT_EQ(cache.Get(Key("a")), entry);
  // Another tenant's conversation of the same id is another entry.
  EXPECT_EQ(cache.Get(ConversationKey{"u", "a"}), nullptr);
  const ContextCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.bytes, SnapshotBytes(*entry->snapshot));
  EXPECT_GT(stats.bytes, 1000);

  // Replacing an entry counts only the new one; erasing frees it.
  auto with_view = std::make_shared<CachedContext>(*entry);
  with_view->plain_view = std::make_shared<const std::string>(500, 'v');
  cache.Put(Key("a"), with_view);
  EXPECT_EQ(cache.stats().bytes, SnapshotBytes(*entry->snapshot) + 500);
  cache.Erase(Key("a"));
  EXPECT_EQ(cache.Get(Key("a")), nullptr);
  EXPECT_EQ(cache.stats().bytes, 0);
  EXPECT_EQ(cache.stats().entries, 0);
}

// What a compaction read after its commit replaces an entry of an earlier
// state of the conversation, never a later one or the same one (which may
// carry a serialized view).
TEST(ContextCacheTest, AnOfferedContextReplacesOnlyAnEarlierState) {
  auto at = [](int64_t compaction_version, int64_t version, int64_t storage_key = 1) {
    auto s = std::make_shared<ContextSnapshot>();
    s->conversation.compaction_version = compaction_version;
    s->conversation.version = version;
    s->conversation.storage_key = storage_key;
    return std::shared_ptr<const ContextSnapshot>(std::move(s));
  };
  ContextCache cache(1 << 20, nullptr);
  cache.Offer(Key("a"), at(1, 10));  // Nothing held: kept.
  ASSERT_NE(cache.Get(Key("a")), nullptr);
  EXPECT_EQ(cache.Get(Key("a"))->snapshot->conversation.version, 10);

  auto held = std::make_shared<CachedContext>();
  held->snapshot = at(2, 12);
  held->plain_view = std::make_shared<const std::string>("view");
  cache.Put(Key("a"), held);
  cache.Offer(Key("a"), at(2, 12));  // The same state: the held one stays.
  cache.Offer(Key("a"), at(2, 11));  // Earlier.
  cache.Offer(Key("a"), at(1, 40));  // An earlier compaction, more appends.
  EXPECT_EQ(cache.Get(Key("a")), held);

  cache.Offer(Key("a"), at(2, 13));  // Appended to since.
  EXPECT_EQ(cache.Get(Key("a"))->snapshot->conversation.version, 13);
  EXPECT_EQ(cache.Get(Key("a"))->plain_view, nullptr);
  cache.Offer(Key("a"), at(3, 13));  // Compacted since.
  EXPECT_EQ(cache.Get(Key("a"))->snapshot->conversation.compaction_version, 3);
  cache.Offer(Key("a"), at(1, 1, 2));  // Deleted and created again.
  EXPECT_EQ(cache.Get(Key("a"))->snapshot->conversation.storage_key, 2);

  ContextCache off(0, nullptr);
  off.Offer(Key("a"), at(1, 1));
  EXPECT_EQ(off.Get(Key("a")), nullptr);
}

TEST(ContextCacheTest, LetsTheLeastRecentlyUsedGoFirst) {
  const int64_t one = SnapshotBytes(*Entry(std::string(10000, 'x'))->snapshot);
  ContextCache cache(3 * one, nullptr);
  cache.Put(Key("a"), Entry(std::string(10000, 'a')));
  cache.Put(Key("b"), Entry(std::string(10000, 'b')));
  cache.Put(Key("c"), Entry(std::string(10000, 'c')));
  ASSERT_NE(cache.Get(Key("a")), nullptr);  // Now b is the least recent.
  cache.Put(Key("d"), Entry(std::string(10000, 'd')));
  EXPECT_EQ(cache.Get(Key("b")), nullptr);
  EXPECT_NE(cache.Get(Key("a")), nullptr);
  EXPECT_NE(cache.Get(Key("c")), nullptr);
  EXPECT_NE(cache.Get(Key("d")), nullptr);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_LE(cache.stats().bytes, 3 * one);

  // One entry larger than the whole bound is not kept, and pushes nothing
  // out.
  cache.Put(Key("huge"), Entry(std::string(10000, 'h'), 10));
  EXPECT_EQ(cache.Get(Key("huge")), nullptr);
  EXPECT_EQ(cache.stats().entries, 3);
}

TEST(ContextCacheTest, ZeroBytesKeepsNothing) {
  ContextCache cache(0, nullptr);
  cache.Put(Key("a"), Entry("x"));
  EXPECT_EQ(cache.Get(Key("a")), nullptr);
  EXPECT_EQ(cache.stats().entries, 0);
}

// After a view is built: the context read is kept while the conversation is
// as read (with the view serialized only when the next plain call can use
// it as it is); else a compaction's read is offered; else the entry goes.
TEST(ContextCacheTest, KeepViewChoosesWhatTheNextCallCanUse) {
  ContextCache cache(1 << 20, nullptr);
  auto read = std::make_shared<CachedContext>(*Entry("x"));
  auto snapshot = std::make_shared<ContextSnapshot>(*read->snapshot);
  snapshot->conversation.version = 3;
  read->snapshot = snapshot;
  const ConversationKey key = Key("a");

  // A plain call that compacted nothing: kept with its serialized view.
  v1::Conversation response;
  response.set_conversation_id("a");
  BuiltView built;
  built.read = read;
  built.version = 3;
  built.plain = true;
  built.compacted_nothing = true;
  built.response = &response;
  std::shared_ptr<const std::string> view = cache.KeepView(key, built);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(*view, response.SerializeAsString());
  EXPECT_EQ(cache.Get(key)->plain_view, view);

  // Pending input: the context is kept, without a view.
  built.plain = false;
  EXPECT_EQ(cache.KeepView(key, built), nullptr);
  ASSERT_NE(cache.Get(key), nullptr);
  EXPECT_EQ(cache.Get(key)->plain_view, nullptr);

  // Truncated: the same.
  built.plain = true;
  built.status = ContextStatus::kTruncated;
  EXPECT_EQ(cache.KeepView(key, built), nullptr);
  EXPECT_EQ(cache.Get(key)->plain_view, nullptr);

  // The conversation moved on and a compaction read it after committing.
  auto stored = std::make_shared<ContextSnapshot>(*snapshot);
  stored->conversation.version = 4;
  built.version = 4;
  built.stored = stored;
  EXPECT_EQ(cache.KeepView(key, built), nullptr);
  EXPECT_EQ(cache.Get(key)->snapshot->conversation.version, 4);

  // Moved on with nothing read after: let go.
  built.stored = nullptr;
  built.version = 5;
  cache.KeepView(key, built);
  EXPECT_EQ(cache.Get(key), nullptr);
}

}  // namespace
}  // namespace convstate
