#include "services/api/context_cache.h"

#include <utility>

#include "storage/context_delta.h"

namespace convstate {
namespace {

// What an element costs besides its text: the struct and allocator slack.
constexpr int64_t kItemOverhead = 256;
constexpr int64_t kFactOverhead = 96;

int64_t ItemBytes(const Item& item) {
  int64_t bytes = kItemOverhead + static_cast<int64_t>(item.data.content.size() +
                                                       item.data.tool_name.size() +
                                                       item.data.tool_call_id.size());
  for (const auto& [k, v] : item.data.metadata) bytes += static_cast<int64_t>(k.size() + v.size());
  return bytes;
}

int64_t FactsBytes(const std::vector<LedgerFact>& facts) {
  int64_t bytes = 0;
  for (const LedgerFact& f : facts) {
    bytes += kFactOverhead + static_cast<int64_t>(f.text.size() + 8 * f.token_hashes.size());
  }
  return bytes;
}

}  // namespace

int64_t SnapshotBytes(const ContextSnapshot& s) {
  const Conversation& c = s.conversation;
  int64_t bytes = static_cast<int64_t>(sizeof(ContextSnapshot) + c.system_prompt.size() +
                                       c.pinned_instructions.size() + c.model.size());
  for (const auto& [k, v] : c.metadata) bytes += static_cast<int64_t>(k.size() + v.size());
  for (const Item& item : s.pinned_items) bytes += ItemBytes(item);
  for (const Item& item : s.live_items) bytes += ItemBytes(item);
  for (const SummaryChunk& chunk : s.active_chunks) {
    bytes += kItemOverhead + static_cast<int64_t>(chunk.text.size());
    for (const SummaryLine& l : chunk.lines) {
      bytes += kFactOverhead + static_cast<int64_t>(l.speaker.size() + l.text.size());
    }
    bytes += FactsBytes(chunk.facts) + FactsBytes(chunk.constraints);
  }
  return bytes;
}

ContextCache::ContextCache(int64_t max_bytes, telemetry::Telemetry* telemetry)
    : max_bytes_(max_bytes), telemetry_(telemetry) {}

std::shared_ptr<const CachedContext> ContextCache::Get(const ConversationKey& key) {
  if (max_bytes_ <= 0) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = index_.find(KeyText(key));
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->entry;
}

void ContextCache::Put(const ConversationKey& key, std::shared_ptr<const CachedContext> entry) {
  if (max_bytes_ <= 0 || entry == nullptr) return;
  int64_t bytes = SnapshotBytes(*entry->snapshot);
  if (entry->plain_view != nullptr) bytes += static_cast<int64_t>(entry->plain_view->size());
  absl::MutexLock lock(&mu_);
  PutLocked(KeyText(key), std::move(entry), bytes);
}

void ContextCache::PutLocked(std::string k, std::shared_ptr<const CachedContext> entry,
                             int64_t bytes) {
  if (auto it = index_.find(k); it != index_.end()) Unlink(it->second);
  if (bytes > max_bytes_) {
    Report();
    return;
  }
  order_.push_front(Node{k, std::move(entry), bytes});
  index_[std::move(k)] = order_.begin();
  bytes_ += bytes;
  while (bytes_ > max_bytes_) {
    Unlink(std::prev(order_.end()));
    ++evictions_;
    if (telemetry_ != nullptr) telemetry_->instruments().cache_evictions->Add(1);
  }
  Report();
}

void ContextCache::Offer(const ConversationKey& key,
                         std::shared_ptr<const ContextSnapshot> snapshot) {
  if (max_bytes_ <= 0 || snapshot == nullptr) return;
  const int64_t bytes = SnapshotBytes(*snapshot);
  std::string k = KeyText(key);
  // Compared and replaced in one step: a later entry put meanwhile by
  // another call stays.
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(k); it != index_.end()) {
    const Conversation& h = it->second->entry->snapshot->conversation;
    const Conversation& n = snapshot->conversation;
    const bool later = n.compaction_version != h.compaction_version
                           ? n.compaction_version > h.compaction_version
                           : n.version > h.version;
    if (h.storage_key == n.storage_key && !later) return;
  }
  auto entry = std::make_shared<CachedContext>();
  entry->snapshot = std::move(snapshot);
  PutLocked(std::move(k), std::move(entry), bytes);
}

void ContextCache::Erase(const ConversationKey& key) {
  if (max_bytes_ <= 0) return;
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(KeyText(key)); it != index_.end()) {
    Unlink(it->second);
    Report();
  }
}

absl::StatusOr<std::shared_ptr<const CachedContext>> ContextCache::Current(
    const CallContext& ctx, Storage& storage, const ConversationKey& key) {
  std::shared_ptr<const CachedContext> held = Get(key);
  absl::StatusOr<ContextDelta> delta = storage.LoadContextSince(
      ctx, key, held == nullptr ? nullptr : &held->snapshot->conversation);
  if (absl::IsNotFound(delta.status())) Erase(key);
  if (!delta.ok()) return delta.status();
  CountLookup(delta->kind);
  if (delta->kind == ContextDelta::Kind::kUnchanged) return held;
  auto current = std::make_shared<CachedContext>();
  current->snapshot = std::make_shared<const ContextSnapshot>(
      held == nullptr ? std::move(delta->snapshot)
                      : ApplyDelta(*held->snapshot, *std::move(delta)));
  return current;
}

std::shared_ptr<const std::string> ContextCache::KeepView(const ConversationKey& key,
                                                          const BuiltView& built) {
  const Conversation& read = built.read->snapshot->conversation;
  // The context read stays good until the conversation changes; a view
  // that compacted or truncated nothing is the same for the next call
  // without pending input, so it is kept serialized.
  const bool unchanged = !built.recounted && built.version == read.version &&
                         built.compaction_version == read.compaction_version;
  if (!unchanged) {
    if (built.stored != nullptr) {
      Offer(key, built.stored);
    } else {
      Erase(key);
    }
    return nullptr;
  }
  auto kept = std::make_shared<CachedContext>(*built.read);
  std::shared_ptr<const std::string> view;
  if (built.plain && built.status != ContextStatus::kTruncated &&
      built.invalidated == CacheBreakpointKind::kUnspecified && built.compacted_nothing) {
    kept->plain_view = std::make_shared<const std::string>(built.response->SerializeAsString());
    kept->band = built.band;
    kept->status = built.response_status;
    kept->view_tokens = built.view_tokens;
    kept->compact_in_background = built.compact_in_background;
    kept->prompt_cache_ttl_s = built.prompt_cache_ttl_s;
    view = kept->plain_view;
  }
  Put(key, std::move(kept));
  return view;
}

void ContextCache::Unlink(std::list<Node>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  order_.erase(it);
}

void ContextCache::Report() const {
  if (telemetry_ == nullptr) return;
  telemetry_->instruments().cache_bytes->Set(static_cast<double>(bytes_));
  telemetry_->instruments().cache_entries->Set(static_cast<double>(index_.size()));
}

void ContextCache::CountLookup(ContextDelta::Kind kind) const {
  std::atomic<int64_t>* count = &misses_;
  const char* result = "miss";
  if (kind == ContextDelta::Kind::kUnchanged) {
    count = &hits_;
    result = "hit";
  } else if (kind == ContextDelta::Kind::kAppended) {
    count = &appended_;
    result = "appended";
  }
  count->fetch_add(1, std::memory_order_relaxed);
  if (telemetry_ != nullptr) {
    telemetry_->instruments().cache_lookups->Add(1, {{"convstate.cache.result", result}});
  }
}

ContextCache::Stats ContextCache::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{bytes_,
               static_cast<int64_t>(index_.size()),
               evictions_,
               hits_.load(std::memory_order_relaxed),
               appended_.load(std::memory_order_relaxed),
               misses_.load(std::memory_order_relaxed)};
}

}  // namespace convstate
