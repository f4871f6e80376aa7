#include "storage/structure_cache.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "services/core/chunk_json.h"

namespace convstate {

void StructureCache::Read(const std::string& json, SummaryChunk& chunk) {
  if (json == "{}") return;  // Chunks written before the ledger.
  std::shared_ptr<const SummaryChunk> parsed;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(json); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      parsed = it->second->parsed;
      ++hits_;
    } else {
      ++misses_;
    }
  }
  if (parsed == nullptr) {
    // Parsed outside the lock: two readers of the same new text may both
    // parse it; the second keeps the first's entry.
    auto fresh = std::make_shared<SummaryChunk>();
    ReadChunkStructure(nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false), *fresh);
    parsed = fresh;
    // What the parsed form holds is about as large as its text again.
    const size_t bytes = 2 * json.size();
    if (bytes <= max_bytes_) {
      absl::MutexLock lock(&mu_);
      if (!index_.contains(json)) {
        lru_.push_front(Entry{json, parsed, bytes});
        index_.emplace(lru_.front().json, lru_.begin());
        bytes_ += bytes;
        while (bytes_ > max_bytes_) {
          const Entry& last = lru_.back();
          bytes_ -= last.bytes;
          index_.erase(last.json);
          lru_.pop_back();
        }
      }
    }
  }
  CopyChunkStructure(*parsed, chunk);
}

size_t StructureCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

size_t StructureCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

size_t StructureCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace convstate
