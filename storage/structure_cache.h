#ifndef CONVSTATE_STORAGE_STRUCTURE_CACHE_H_
#define CONVSTATE_STORAGE_STRUCTURE_CACHE_H_

#include <cstddef>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "services/core/types.h"

namespace convstate {

// Summary chunks' structured parts (summary_chunks.structure: lines,
// facts, standing instructions, lost facts; tens of kB of JSON each),
// parsed once per distinct text. A stored chunk is read many times (every
// context read that misses the replica's cache, every compaction, every
// delta that brings it), and parsing it was the largest single cost of
// reading one. Keyed by the exact text, so that an entry can never stand
// for another structure (a redaction that rewrites one is a new key).
// The least recently used entries go first once `max_bytes` (the texts
// and an estimate of what they parse into) is passed. Thread-safe.
class StructureCache {
 public:
  explicit StructureCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  StructureCache(const StructureCache&) = delete;
  StructureCache& operator=(const StructureCache&) = delete;

  // Sets the structured fields of `chunk` (CopyChunkStructure's) from
  // `json`, as ReadChunkStructure would from the parsed text.
  void Read(const std::string& json, SummaryChunk& chunk);

  // Counters, for tests and benchmarks.
  size_t hits() const;
  size_t misses() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string json;
    std::shared_ptr<const SummaryChunk> parsed;
    size_t bytes = 0;
  };

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  // Most recently used first; `index_` keys view the entries' texts.
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<absl::string_view, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  size_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_STRUCTURE_CACHE_H_
