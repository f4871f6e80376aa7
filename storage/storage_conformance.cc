#include "storage/storage_conformance.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/storage_conformance_internal.h"
#include "gmock/gmock.h"

namespace convstate {

absl::StatusOr<std::vector<Item>> ItemRows(Storage& storage, const CallContext& ctx,
                                           const ConversationKey& key, int64_t after, int rows) {
  absl::StatusOr<Page<Item>> page = storage.ListItems(ctx, key, after, PageLimit{rows});
  if (!page.ok()) return page.status();
  return std::move(page->rows);
}

void StorageConformanceTest::SetUp() {
  storage_ = GetParam().make();
  ASSERT_NE(storage_, nullptr);
  std::random_device rd;
  tenant_ = absl::StrCat("tenant-", rd(), "-", rd());
}

ConversationKey StorageConformanceTest::Key(const std::string& id) const {
  return ConversationKey{tenant_, id};
}

Conversation StorageConformanceTest::Create(const std::string& id) {
  NewConversation nc;
  nc.key = Key(id);
  nc.model = "test-model";
  auto c = storage_->CreateConversation(ctx_, nc);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Conversation{};
}

AppendResult StorageConformanceTest::AppendText(const ConversationKey& key,
                                                const std::string& text) {
  AppendRequest req;
  req.key = key;
  req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, text, "", "", false, {}, 3});
  auto r = storage_->AppendItems(ctx_, req);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : AppendResult{};
}

SummaryChunk Chunk(int64_t from, int64_t through, const std::string& text) {
  SummaryChunk c;
  c.from_sequence = from;
  c.through_sequence = through;
  c.text = text;
  c.token_count = 10;
  c.summarizer_model = "extractive";
  c.prompt_version = "v1";
  c.tokens_in = 40;
  c.tokens_out = 10;
  c.latency_ms = 3;
  return c;
}

ItemData Message(Role role, const std::string& text) {
  ItemData d;
  d.role = role;
  d.kind = ItemKind::kMessage;
  d.content = text;
  d.token_count = static_cast<int64_t>(text.size() / 4 + 1);
  return d;
}

std::vector<int64_t> Sequences(const std::vector<Item>& items) {
  std::vector<int64_t> out;
  for (const Item& i : items) out.push_back(i.sequence);
  return out;
}

RedactRequest Erasure(const ConversationKey& key, std::vector<int64_t> sequences,
                      const std::string& tombstone, int64_t tokens) {
  RedactRequest erase;
  erase.key = key;
  erase.sequences = std::move(sequences);
  erase.tombstone = tombstone;
  erase.tombstone_tokens = tokens;
  erase.reason = "erasure";
  return erase;
}

// Six items; item 2 pinned.
void AppendSix(Storage& storage, const CallContext& ctx, const ConversationKey& key) {
  AppendRequest req;
  req.key = key;
  for (int i = 1; i <= 6; ++i) {
    ItemData d = Message(i % 2 ? Role::kUser : Role::kAssistant, absl::StrCat("m", i));
    d.pinned = i == 2;
    req.items.push_back(d);
  }
  ASSERT_TRUE(storage.AppendItems(ctx, req).ok());
}


CompactionEvent Event(const std::string& name) {
  CompactionEvent e;
  e.event = name;
  e.tier = "summarize";
  e.tokens_before = 100;
  e.tokens_after = 40;
  e.detail = R"({"reason":"test"})";
  return e;
}

}  // namespace convstate
