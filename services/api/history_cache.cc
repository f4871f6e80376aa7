#include "services/api/history_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/common/status_macros.h"

namespace convstate {
namespace {

// How long making one copy may take, and how much of the history one read
// brings.
constexpr absl::Duration kMakeDeadline = absl::Seconds(30);
constexpr PageLimit kReadPage{500, int64_t{4} << 20};
// Copies waiting to be made; beyond it, a conversation is searched in
// storage until a later call finds room.
constexpr size_t kMaxQueuedCopies = 64;

}  // namespace

HistoryCache::HistoryCache(Storage* storage, const Clock* clock, int64_t max_bytes,
                           absl::Duration idle)
    : storage_(storage), clock_(clock), max_bytes_(max_bytes), idle_(idle) {
  if (max_bytes_ > 0) {
    // Niced: a copy can wait; the calls that search meanwhile go to
    // storage.
    maker_ = std::make_unique<ThreadPool>(1, kMaxQueuedCopies, "history copy", 10);
  }
}

HistoryCache::~HistoryCache() { maker_.reset(); }

absl::StatusOr<std::vector<Item>> HistoryCache::ReadAfter(const CallContext& ctx,
                                                           const ConversationKey& key,
                                                           int64_t after, int64_t upto) const {
  std::vector<Item> items;
  const int64_t cap = Share();
  int64_t bytes = 0;
  while (after < upto) {
    ASSIGN_OR_RETURN(Page<Item> page, storage_->ListItems(ctx, key, after, kReadPage));
    for (Item& item : page.rows) {
      if (item.sequence != after + 1) return absl::AbortedError("the history changed while it was read");
      after = item.sequence;
      bytes += static_cast<int64_t>(item.data.content.size());
      items.push_back(std::move(item));
    }
    if (bytes > cap) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the history holds more than ", cap, " bytes, a quarter of the cache"));
    }
    if (!page.more) break;
  }
  return items;
}

bool HistoryCache::Add(Copy& copy, const std::vector<Item>& items, Pieces pieces) const {
  if (copy.index == nullptr) return false;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (item.sequence <= copy.index->through()) continue;  // Another call added it.
    if (item.sequence != copy.index->through() + 1) return false;
    copy.index->Add(item, i < pieces.size() ? std::move(pieces[i]) : nullptr);
  }
  if (static_cast<int64_t>(copy.index->bytes()) > Share()) {
    Lose(copy);
    return false;
  }
  copy.through = copy.index->through();
  return true;
}

void HistoryCache::Lose(Copy& copy) {
  // Grown past its share: never copied again while it is known.
  copy.index = nullptr;
  copy.ready = false;
}

bool HistoryCache::CatchUp(const CallContext& ctx, Copy& copy, int64_t upto, bool split,
                           absl::FunctionRef<void(HistoryIndex&)> then) {
  std::vector<Item> items;
  Pieces pieces;
  const int64_t through = copy.through;
  if (through < upto) {
    absl::StatusOr<std::vector<Item>> read = ReadAfter(ctx, copy.key, through, upto);
    if (absl::IsResourceExhausted(read.status())) {
      absl::MutexLock lock(&copy.mu);
      Lose(copy);
      return false;
    }
    // A failed read (the call's deadline, the database) leaves the copy as
    // it was, for the next call to go on from.
    if (!read.ok()) return false;
    items = *std::move(read);
    // Split before the lock, which a call's search waits for.
    if (split) {
      for (const Item& item : items) pieces.push_back(HistoryIndex::PiecesOf(item));
    }
  }
  absl::MutexLock lock(&copy.mu);
  if (!Add(copy, items, std::move(pieces)) || copy.index->through() < upto) return false;
  then(*copy.index);
  return true;
}

void HistoryCache::Make(std::shared_ptr<Copy> copy, int64_t upto) {
  const CallContext ctx{clock_->Now() + kMakeDeadline};
  absl::StatusOr<std::vector<Item>> read = ReadAfter(ctx, copy->key, 0, upto);
  auto index = std::make_unique<HistoryIndex>();
  if (read.ok()) {
    // Off the request path: split now, so that no call's search does.
    for (const Item& item : *read) index->Add(item, HistoryIndex::PiecesOf(item));
    if (static_cast<int64_t>(index->bytes()) > Share()) {
      read = absl::ResourceExhaustedError("the history holds more than a quarter of the cache");
    }
  }
  if (!read.ok()) {
    // Too large stays known (searched in storage, never read again until
    // it is dropped); anything else is tried again by a later call.
    if (!absl::IsResourceExhausted(read.status())) Account(copy, -1);
    return;
  }
  const int64_t bytes = static_cast<int64_t>(index->bytes());
  {
    absl::MutexLock lock(&copy->mu);
    copy->through = index->through();
    copy->index = std::move(index);
    copy->ready = true;
  }
  Account(copy, bytes);
}

absl::StatusOr<HistoryHits> HistoryCache::Search(const CallContext& ctx,
                                                 const Conversation& conversation,
                                                 const HistorySearch& search) {
  if (max_bytes_ <= 0 || conversation.storage_key == 0) return storage_->SearchHistory(ctx, search);
  const int64_t upto = SearchedThrough(search, conversation);
  const auto [copy, made] = Admit(conversation, upto);
  if (made) return storage_->SearchHistory(ctx, search);
  // Not made yet (or too large to copy): the database's search. A copy
  // being brought up to date by another call holds its lock only while it
  // adds what it read, and this call waits for that.
  if (!copy->ready) return storage_->SearchHistory(ctx, search);
  HistoryHits hits;
  int64_t bytes = 0;
  // On the call's path: what it adds is split when a search finds it.
  const bool answered = CatchUp(ctx, *copy, upto, /*split=*/false, [&](HistoryIndex& index) {
    hits = index.Search(search, conversation.item_count, upto);
    bytes = static_cast<int64_t>(index.bytes());
  });
  if (!answered) {
    Account(copy, Bytes(*copy));  // None, if it lost its index.
    return storage_->SearchHistory(ctx, search);
  }
  Account(copy, bytes);
  return hits;
}

std::pair<std::shared_ptr<HistoryCache::Copy>, bool> HistoryCache::Admit(
    const Conversation& conversation, int64_t upto) {
  std::shared_ptr<Copy> copy;
  bool make = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = copies_.find(conversation.storage_key);
    // Made before an erasure: read again.
    if (it != copies_.end() && (*it->second)->redactions != conversation.redactions) {
      Drop(it->second);
      it = copies_.end();
    }
    if (it == copies_.end()) {
      copy = std::make_shared<Copy>();
      copy->key = conversation.key;
      copy->storage_key = conversation.storage_key;
      copy->redactions = conversation.redactions;
      order_.push_front(copy);
      copies_[copy->storage_key] = order_.begin();
      make = true;
    } else {
      order_.splice(order_.begin(), order_, it->second);
      copy = order_.front();
    }
    copy->used = clock_->Now();
  }
  if (make && !maker_->Schedule([this, copy, upto] { Make(copy, upto); })) Account(copy, -1);
  return {copy, make};
}

void HistoryCache::Refresh(const CallContext& ctx, const Conversation& conversation) {
  if (max_bytes_ <= 0 || conversation.storage_key == 0) return;
  // Everything stored: whatever the next recall's boundary is, the copy
  // holds it (items change only by an erasure, which the count tells).
  const int64_t upto = conversation.last_sequence;
  // A conversation this replica compacts is one it will likely recall
  // from: its copy is made now, off the request path, if it has none.
  const auto [copy, made] = Admit(conversation, upto);
  // A copy still being made reads the history itself: catching it up now
  // would read the whole history a second time, to add none of it.
  if (made || !copy->ready) return;
  CatchUp(ctx, *copy, upto, /*split=*/true, [](HistoryIndex&) {});
  Account(copy, Bytes(*copy));
}

int64_t HistoryCache::Bytes(Copy& copy) {
  absl::MutexLock lock(&copy.mu);
  return copy.index != nullptr ? static_cast<int64_t>(copy.index->bytes()) : 0;
}

bool HistoryCache::RefreshLater(const Conversation& conversation) {
  if (max_bytes_ <= 0 || conversation.storage_key == 0) return false;
  {
    // Only a copy this replica keeps: making one is the first recall's
    // decision.
    absl::MutexLock lock(&mu_);
    if (!copies_.contains(conversation.storage_key)) return false;
  }
  return maker_->Schedule([this, conversation] {
    Refresh(CallContext{clock_->Now() + kMakeDeadline}, conversation);
  });
}

void HistoryCache::Flush() {
  if (maker_ == nullptr) return;
  absl::Notification done;
  // A full queue: wait for room (it drains); a pool shutting down takes
  // nothing more, and has nothing left to wait for once it has stopped.
  for (int tries = 0; !maker_->Schedule([&done] { done.Notify(); }); ++tries) {
    if (tries == 10000) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
  done.WaitForNotification();
}

void HistoryCache::Account(const std::shared_ptr<Copy>& copy, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = copies_.find(copy->storage_key);
  if (it == copies_.end() || *it->second != copy) return;  // Dropped meanwhile.
  if (bytes < 0) {
    Drop(it->second);
    return;
  }
  bytes_ += bytes - copy->counted;
  copy->counted = bytes;
  const absl::Time now = clock_->Now();
  while (!order_.empty() && order_.back() != copy &&
         (bytes_ > max_bytes_ || now - order_.back()->used > idle_)) {
    Drop(std::prev(order_.end()));
  }
}

void HistoryCache::Drop(Order::iterator it) {
  bytes_ -= (*it)->counted;
  copies_.erase((*it)->storage_key);
  order_.erase(it);
}

void HistoryCache::Forget(const ConversationKey& key) {
  absl::MutexLock lock(&mu_);
  for (auto it = order_.begin(); it != order_.end();) {
    auto next = std::next(it);
    if ((*it)->key.tenant_id == key.tenant_id && (*it)->key.conversation_id == key.conversation_id) {
      Drop(it);
    }
    it = next;
  }
}

int64_t HistoryCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t HistoryCache::size() const {
  absl::MutexLock lock(&mu_);
  return copies_.size();
}

bool HistoryCache::Holds(int64_t storage_key) const {
  std::shared_ptr<Copy> copy;
  {
    absl::MutexLock lock(&mu_);
    auto it = copies_.find(storage_key);
    if (it == copies_.end()) return false;
    copy = *it->second;
  }
  return copy->ready;
}

bool HistoryCache::Ready(const Conversation& conversation) const {
  if (max_bytes_ <= 0) return false;
  {
    absl::MutexLock lock(&mu_);
    auto it = copies_.find(conversation.storage_key);
    if (it == copies_.end() || (*it->second)->redactions != conversation.redactions) return false;
  }
  return Holds(conversation.storage_key);
}

}  // namespace convstate
