#include "storage/postgres_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/log.h"
#include "storage/pg_util.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_statements.h"

namespace convstate::pg {
namespace {

using Json = nlohmann::json;

}  // namespace

absl::StatusOr<HistoryHits> PostgresStorage::SearchHistory(const CallContext& ctx,
                                                           const HistorySearch& search) {
  return Run<HistoryHits, pqxx::nontransaction>(
      ctx, "search history", [&](pqxx::transaction_base& tx) -> absl::StatusOr<HistoryHits> {
    const std::vector<int64_t> words(search.word_of.begin(), search.word_of.end());
    const pqxx::result r = ExecNamed(tx, "search_history", search.key, pg::TextArray(search.terms),
                                     search.max_document_frequency,
                                     static_cast<int64_t>(search.max_items),
                                     search.compacted_only, pg::TextArray(search.known_common),
                                     IdArray(words), BoolArray(search.stand_in));
    if (r.empty() || r[0][0].is_null()) return NotFound(search.key);
    // Count, frequencies, own score, the turn's terms, the call.
    constexpr int kTerms = 3, kCall = 4, kItem = 5;
    HistoryHits hits;
    hits.items = r[0][0].as<int64_t>();
    const Json df = Json::parse(r[0][1].as<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (df.is_object()) {
      for (const auto& [term, n] : df.items()) {
        if (n.is_number_integer()) hits.document_frequency[term] = n.get<int64_t>();
      }
    }
    for (const pqxx::row& row : r) {
      if (row[kItem].is_null()) continue;
      hits.found.push_back(ParseItem(row.slice(kItem, kItem + std::size(kItemColumnList))));
      const int64_t sequence = hits.found.back().sequence;
      const Json terms =
          Json::parse(row[kTerms].as<std::string>("[]"), nullptr, /*allow_exceptions=*/false);
      if (terms.is_array()) {
        std::vector<std::string>& exchange = hits.exchange_terms[sequence];
        for (const Json& t : terms) {
          if (t.is_string()) exchange.push_back(t.get<std::string>());
        }
      }
      if (!row[kCall].is_null()) hits.calls[sequence] = row[kCall].as<std::string>();
    }
    if (search.replies) AddReplies(tx, search, hits);
    if (search.opening) AddOpening(tx, search, hits);
    return hits;
  });
}

void PostgresStorage::AddReplies(pqxx::transaction_base& tx, const HistorySearch& search,
                                 HistoryHits& hits) {
  std::vector<int64_t> asked;
  absl::flat_hash_set<int64_t> found;
  for (const Item& item : hits.found) {
    found.insert(item.sequence);
    if (item.data.kind == ItemKind::kMessage && item.data.role == Role::kUser) {
      asked.push_back(item.sequence);
    }
  }
  if (asked.empty()) return;
  const pqxx::result r = ExecNamed(tx, "search_replies", search.key, IdArray(asked),
                                   search.compacted_only);
  int added = 0;
  for (const pqxx::row& row : r) {
    if (added >= kMaxReplies) break;
    Item reply = ParseItem(row.slice(1, 1 + std::size(kItemColumnList)));
    if (!found.insert(reply.sequence).second) continue;
    const std::vector<std::string> terms = hits.exchange_terms[row[0].as<int64_t>()];
    hits.exchange_terms[reply.sequence] = terms;
    hits.found.push_back(std::move(reply));
    ++added;
  }
}

void PostgresStorage::AddOpening(pqxx::transaction_base& tx, const HistorySearch& search,
                                 HistoryHits& hits) {
  absl::flat_hash_set<int64_t> found;
  for (const Item& item : hits.found) found.insert(item.sequence);
  for (const pqxx::row& row : ExecNamed(tx, "search_opening", search.key, search.compacted_only)) {
    Item opening = ParseItem(row.slice(0, std::size(kItemColumnList)));
    hits.opening.push_back(opening.sequence);
    if (found.insert(opening.sequence).second) hits.found.push_back(std::move(opening));
  }
}

void PostgresStorage::QueueWordIndexing(int64_t conv_key, int64_t through) {
  if (through <= 0) return;
  absl::MutexLock lock(&words_mu_);
  if (words_stopping_) return;
  auto [it, added] = words_due_.try_emplace(conv_key, through);
  if (!added) {
    it->second = std::max(it->second, through);
    return;
  }
  const bool queued = word_indexer_.Schedule([this, conv_key] {
    int64_t due = 0;
    {
      absl::MutexLock lock(&words_mu_);
      auto it = words_due_.find(conv_key);
      if (it == words_due_.end()) return;
      due = it->second;
      words_due_.erase(it);
      if (words_stopping_) return;
    }
    IndexWords(CallContext{absl::Now() + kWordIndexTimeout}, conv_key, due);
  });
  if (!queued) words_due_.erase(conv_key);
}

void PostgresStorage::IndexWords(const CallContext& ctx, int64_t conv_key, int64_t through) {
  bool busy = false;
  absl::Status s = Run<bool>(ctx, "index words",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
    const pqxx::result indexed = Exec(tx, "words_indexed", conv_key);
    if (indexed.empty() || indexed[0][0].as<int64_t>() >= through) return false;
    Exec(tx, "index_words", conv_key, indexed[0][0].as<int64_t>(), through);
    // The conversation's row last, and without waiting: a call holding it
    // may be waiting for the words just written (a rewind moving the items
    // that leave), and a wait here would be a deadlock that fails the call.
    // Held: this indexing is given up and queued again.
    try {
      Exec(tx, "lock_words_row", conv_key);
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != "55P03") throw;
      busy = true;
      return false;
    }
    Exec(tx, "mark_words_indexed", conv_key, through);
    tx.commit();
    return true;
  }).status();
  if (busy) {
    absl::SleepFor(kWordIndexRetry);
    QueueWordIndexing(conv_key, through);
    return;
  }
  if (!s.ok()) {
    LogThrottled(LogLevel::kWarning, "index words",
                 absl::StrCat("indexing the words of compacted items failed (searches read "
                              "them from the items meanwhile): ", s.message()));
  }
}

}  // namespace convstate::pg
