#ifndef CONVSTATE_STORAGE_HISTORY_INDEX_H_
#define CONVSTATE_STORAGE_HISTORY_INDEX_H_

// A conversation's history held in memory with each item's words
// (SearchTerms), searched as Storage::SearchHistory describes: the memory
// backend's search, and each replica's copy of what it recalls from
// (services/api/history_cache.h), which then reads nothing from PostgreSQL
// but what was compacted since. No SQL, no I/O.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "storage/contract.h"

namespace convstate {

class HistoryIndex {
 public:
  // Adds the item after through() (its sequence must be through() + 1).
  // Summary markers and redacted items are kept as placeholders only:
  // never searched, never answered. `pieces` (PiecesOf the item, split
  // ahead, off the request path), when given, are kept: a search that
  // finds the item does not split it then.
  void Add(const Item& item, std::shared_ptr<const ItemPieces> pieces = nullptr);

  // The item split into its pieces as a search that finds it would split
  // it; null for what is never searched.
  static std::shared_ptr<const ItemPieces> PiecesOf(const Item& item);

  // The last sequence added; 0 when empty.
  int64_t through() const { return static_cast<int64_t>(entries_.size()); }
  // What the index holds, roughly, in bytes (contents and words).
  size_t bytes() const { return bytes_; }

  // `search` over the items at or before `upto` (and through()): the
  // candidates and counts Storage::SearchHistory answers, ranked the same
  // way, and each candidate's pieces (HistoryHits::pieces: split when added
  // with them, or else the first time an item is a candidate, and kept).
  // `item_count` is the conversation's (term weights count every item).
  // Not at the same time as another call (it keeps what it splits).
  HistoryHits Search(const HistorySearch& search, int64_t item_count, int64_t upto);

 private:
  struct Entry {
    Item item;  // Content empty when not searchable.
    bool searchable = false;
    std::vector<uint32_t> words;  // Term ids, sorted.
    // Split when added (PiecesOf), or the first time it is a candidate.
    std::shared_ptr<const ItemPieces> pieces;
  };
  struct Turn;

  const Entry* At(int64_t sequence) const;
  bool Holds(const Entry& entry, uint32_t term) const;
  // How many searchable items at or before `upto` hold `term`, counting no
  // further than `stop`.
  int64_t Count(uint32_t term, int64_t upto, int64_t stop) const;
  // The turn's tool results near its matching items that hold no term.
  void AddToolResults(Turn& turn, int64_t turn_index, int64_t upto) const;
  // Adds the item at `sequence` to `hits.found`, with its pieces (split the
  // first time, and kept).
  void AddFound(int64_t sequence, HistoryHits& hits);
  // HistorySearch::replies: the replies to the user messages of `hits`.
  void AddReplies(HistoryHits& hits, int64_t upto);
  // HistorySearch::opening: the conversation's first user messages.
  void AddOpening(HistoryHits& hits, int64_t upto);
  // The content of `result`'s call (kMaxCallChars characters): the newest
  // searchable call of the same id within kExchangeReach before it.
  const Entry* CallOf(const Item& result) const;

  std::vector<Entry> entries_;  // entries_[s - 1] is sequence s.
  absl::flat_hash_map<std::string, uint32_t> term_ids_;
  std::vector<std::vector<int64_t>> postings_;  // By term id: sequences, ascending.
  size_t bytes_ = 0;
};

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_HISTORY_INDEX_H_
