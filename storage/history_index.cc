#include "storage/history_index.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "services/common/utf8.h"

namespace convstate {
namespace {

// Rounded as PostgreSQL rounds it (numeric, six places), so that every
// backend ranks alike.
double Rounded(double score) { return std::round(score * 1e6) / 1e6; }

// What a search may find: not a summary marker, not erased.
bool Searchable(const Item& item) {
  return item.data.kind != ItemKind::kSummaryMarker && !item.redacted;
}

}  // namespace

struct HistoryIndex::Turn {
  struct Hit {
    const Entry* entry;
    double score;
  };
  std::vector<Hit> hits;
  std::set<std::string> terms;  // Byte order, as the answer gives them.
  double score = 0;
  std::vector<const Entry*> items;
};

std::shared_ptr<const ItemPieces> HistoryIndex::PiecesOf(const Item& item) {
  if (!Searchable(item)) return nullptr;
  // A message's whole-text terms are its talk's (RankPassages).
  return std::make_shared<const ItemPieces>(
      SplitIntoPieces(item.data.content, item.data.kind == ItemKind::kMessage));
}

void HistoryIndex::Add(const Item& item, std::shared_ptr<const ItemPieces> pieces) {
  Entry entry;
  entry.searchable = Searchable(item);
  if (entry.searchable && pieces != nullptr) {
    bytes_ += pieces->bytes;
    entry.pieces = std::move(pieces);
  }
  entry.item.sequence = item.sequence;
  entry.item.turn_index = item.turn_index;
  entry.item.data.kind = item.data.kind;
  if (entry.searchable) {
    entry.item = item;
    for (const std::string& term : SearchTerms(item.data.content)) {
      auto [it, added] = term_ids_.try_emplace(term, static_cast<uint32_t>(postings_.size()));
      if (added) {
        postings_.emplace_back();
        bytes_ += term.size() + 48;
      }
      entry.words.push_back(it->second);
    }
    std::sort(entry.words.begin(), entry.words.end());
    entry.words.erase(std::unique(entry.words.begin(), entry.words.end()), entry.words.end());
    for (uint32_t id : entry.words) postings_[id].push_back(item.sequence);
    bytes_ += item.data.content.size() + item.data.tool_name.size() +
              item.data.tool_call_id.size() + entry.words.size() * (sizeof(uint32_t) + 8);
    for (const auto& [k, v] : item.data.metadata) bytes_ += k.size() + v.size();
  }
  bytes_ += sizeof(Entry);
  entries_.push_back(std::move(entry));
}

const HistoryIndex::Entry* HistoryIndex::At(int64_t sequence) const {
  if (sequence < 1 || sequence > through()) return nullptr;
  return &entries_[static_cast<size_t>(sequence - 1)];
}

bool HistoryIndex::Holds(const Entry& entry, uint32_t term) const {
  return std::binary_search(entry.words.begin(), entry.words.end(), term);
}

int64_t HistoryIndex::Count(uint32_t term, int64_t upto, int64_t stop) const {
  const std::vector<int64_t>& postings = postings_[term];
  const auto end = std::upper_bound(postings.begin(), postings.end(), upto);
  return std::min<int64_t>(stop, end - postings.begin());
}

const HistoryIndex::Entry* HistoryIndex::CallOf(const Item& result) const {
  for (int64_t s = result.sequence - 1; s >= 1 && s >= result.sequence - kExchangeReach; --s) {
    const Entry* e = At(s);
    if (e == nullptr || !e->searchable || e->item.data.kind != ItemKind::kToolCall ||
        e->item.data.tool_call_id != result.data.tool_call_id) {
      continue;
    }
    return e;
  }
  return nullptr;
}

void HistoryIndex::AddToolResults(Turn& turn, int64_t turn_index, int64_t upto) const {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  absl::flat_hash_set<int64_t> hit;
  for (const Turn::Hit& h : turn.hits) {
    turn.items.push_back(h.entry);
    hit.insert(h.entry->item.sequence);
    lo = std::min(lo, h.entry->item.sequence);
    hi = std::max(hi, h.entry->item.sequence);
  }
  // Newest first.
  for (int64_t s = std::min(hi + kExchangeReach, upto); s >= lo - kExchangeReach && s >= 1; --s) {
    const Entry* e = At(s);
    if (e == nullptr || !e->searchable || e->item.turn_index != turn_index ||
        e->item.data.kind != ItemKind::kToolResult || hit.contains(s)) {
      continue;
    }
    turn.items.push_back(e);
  }
}

HistoryHits HistoryIndex::Search(const HistorySearch& search, int64_t item_count,
                                 int64_t upto) {
  HistoryHits hits;
  hits.items = item_count;
  upto = std::min(upto, through());
  const int64_t max_df = MaxDocumentFrequency(search, item_count);
  const absl::flat_hash_set<std::string> known_common(search.known_common.begin(),
                                                      search.known_common.end());
  // Term, its id and weight; searched by the rare ones, the common ones
  // only adding to the best turns' scores.
  struct Term {
    std::string term;
    uint32_t id;
    double weight;
  };
  std::vector<Term> searched, common;
  for (const std::string& term : std::set<std::string>(search.terms.begin(), search.terms.end())) {
    const auto id = term_ids_.find(term);
    int64_t df = 0;
    if (known_common.contains(term)) {
      df = max_df + 1;
    } else if (id != term_ids_.end()) {
      df = Count(id->second, upto, max_df + 1);
    }
    hits.document_frequency[term] = df;
    if (df < 1 || id == term_ids_.end()) continue;
    (df <= max_df ? searched : common).push_back({term, id->second, TermWeight(item_count, df)});
  }
  // Each matching item's score, its terms' weights added in the terms'
  // order (as every backend adds them).
  std::map<int64_t, double> item_scores;
  std::map<int64_t, Turn> turns;
  for (const Term& t : searched) {
    for (int64_t s : postings_[t.id]) {
      if (s > upto) break;
      item_scores[s] += t.weight;
      turns[At(s)->item.turn_index].terms.insert(t.term);
    }
  }
  for (const auto& [s, score] : item_scores) {
    const Entry* e = At(s);
    turns[e->item.turn_index].hits.push_back({e, Rounded(score)});
  }
  absl::flat_hash_map<std::string, double> weight_of;
  for (const Term& t : searched) weight_of[t.term] = t.weight;
  // Each term's question word (HistorySearch::word_of; a term without one
  // is a word of its own) and whether it stands in for it.
  absl::flat_hash_map<std::string, std::pair<int64_t, bool>> reading_of;
  for (size_t i = 0; i < search.terms.size(); ++i) {
    const bool given = i < search.word_of.size();
    reading_of.try_emplace(search.terms[i],
                           given ? search.word_of[i] : -1 - static_cast<int64_t>(i),
                           given && i < search.stand_in.size() && search.stand_in[i]);
  }
  std::vector<std::pair<double, int64_t>> order;  // Turn score, turn index.
  for (auto& [index, turn] : turns) {
    // Per word: its own terms' weights added, its best stand-in's.
    std::map<int64_t, std::pair<double, double>> readings;
    for (const std::string& term : turn.terms) {
      const auto& [word, stand_in] = reading_of.at(term);
      auto& [own, best_stand_in] = readings[word];
      if (stand_in) {
        best_stand_in = std::max(best_stand_in, weight_of.at(term));
      } else {
        own += weight_of.at(term);
      }
    }
    for (const auto& [word, reading] : readings) {
      const auto& [own, best_stand_in] = reading;
      turn.score += std::max(own, best_stand_in) + kLesserReading * std::min(own, best_stand_in);
    }
    turn.score = Rounded(turn.score);
    order.emplace_back(turn.score, index);
  }
  // Best score first; of equals, the newest turn.
  auto by_turn_score = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  };
  std::sort(order.begin(), order.end(), by_turn_score);
  const size_t max_items = static_cast<size_t>(std::max(0, search.max_items));
  if (order.size() > max_items) order.resize(max_items);
  auto by_score = [](const Turn::Hit& a, const Turn::Hit& b) {
    return a.score != b.score ? a.score > b.score : a.entry->item.sequence > b.entry->item.sequence;
  };
  // The best turns: their items, and the common terms those hold added to
  // their scores.
  for (auto& [score, index] : order) {
    Turn& turn = turns.at(index);
    std::sort(turn.hits.begin(), turn.hits.end(), by_score);
    AddToolResults(turn, index, upto);
    double common_score = 0;
    for (const Term& t : common) {
      for (const Entry* e : turn.items) {
        if (!Holds(*e, t.id)) continue;
        turn.terms.insert(t.term);
        common_score += t.weight;
        break;
      }
    }
    score = Rounded(turn.score + Rounded(common_score));
  }
  std::sort(order.begin(), order.end(), by_turn_score);
  for (const auto& [score, index] : order) {
    const Turn& turn = turns.at(index);
    const std::vector<std::string> terms(turn.terms.begin(), turn.terms.end());
    for (const Entry* e : turn.items) {
      if (hits.found.size() >= max_items) break;
      AddFound(e->item.sequence, hits);
      hits.exchange_terms[e->item.sequence] = terms;
      if (e->item.data.kind != ItemKind::kToolResult) continue;
      if (const Entry* call = CallOf(e->item)) {
        hits.calls[e->item.sequence] =
            std::string(Utf8PrefixChars(call->item.data.content, kMaxCallChars));
      }
    }
    if (hits.found.size() >= max_items) break;
  }
  if (search.replies) AddReplies(hits, upto);
  if (search.opening) AddOpening(hits, upto);
  return hits;
}

void HistoryIndex::AddFound(int64_t sequence, HistoryHits& hits) {
  Entry& entry = entries_[static_cast<size_t>(sequence - 1)];
  if (entry.pieces == nullptr) {
    entry.pieces = PiecesOf(entry.item);
    bytes_ += entry.pieces->bytes;
  }
  hits.pieces[sequence] = entry.pieces;
  hits.found.push_back(entry.item);
}

void HistoryIndex::AddOpening(HistoryHits& hits, int64_t upto) {
  const int64_t last = std::min(upto, kExchangeReach);
  for (int64_t s = 1; s <= last && hits.opening.size() < size_t{kOpeningMessages}; ++s) {
    const Entry* e = At(s);
    if (e == nullptr) break;
    if (!e->searchable || e->item.data.kind != ItemKind::kMessage ||
        e->item.data.role != Role::kUser) {
      continue;
    }
    hits.opening.push_back(s);
    if (std::none_of(hits.found.begin(), hits.found.end(),
                     [s](const Item& item) { return item.sequence == s; })) {
      AddFound(s, hits);
    }
  }
}

void HistoryIndex::AddReplies(HistoryHits& hits, int64_t upto) {
  absl::flat_hash_set<int64_t> found;
  for (const Item& item : hits.found) found.insert(item.sequence);
  const size_t candidates = hits.found.size();
  int added = 0;
  for (size_t i = 0; i < candidates && added < kMaxReplies; ++i) {
    const ItemData& data = hits.found[i].data;
    if (data.kind != ItemKind::kMessage || data.role != Role::kUser) continue;
    // By value: adding a reply to hits.found may move its items.
    const int64_t asked = hits.found[i].sequence, turn = hits.found[i].turn_index;
    for (int64_t s = asked + 1; s <= std::min(upto, asked + kExchangeReach); ++s) {
      const Entry* e = At(s);
      if (e == nullptr || e->item.turn_index != turn) break;
      if (!e->searchable || e->item.data.kind != ItemKind::kMessage ||
          e->item.data.role != Role::kAssistant) {
        continue;
      }
      if (found.insert(s).second) {
        hits.exchange_terms[s] = hits.exchange_terms[asked];
        AddFound(s, hits);
        ++added;
      }
      break;
    }
  }
}

}  // namespace convstate
