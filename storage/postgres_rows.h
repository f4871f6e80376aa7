#ifndef CONVSTATE_STORAGE_POSTGRES_ROWS_H_
#define CONVSTATE_STORAGE_POSTGRES_ROWS_H_

// The PostgreSQL backend's row mapping, internal to its target: rows into
// the contract's structs, and values into the parameters statements take.
// What each one does says its definition (postgres_rows.cc).

#include <cstdint>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/contract.h"
#include "storage/storage.h"

namespace convstate::pg {

std::string MetadataToJson(const Metadata& metadata);
Metadata MetadataFromJson(const std::string& text);
std::string OverridesToJson(const ProfileOverrides& o);
ProfileOverrides OverridesFromJson(const std::string& text);

struct ConversationRow {
  int64_t conv_key = 0;
  Conversation conversation;
  // What the conversation stores, as its byte bound counts it.
  int64_t stored_bytes = 0;
};

ConversationRow ParseConversation(const pqxx::row& r);
Item ParseItem(const pqxx::row& r);
std::vector<Item> ParseItems(const pqxx::result& result);
std::string StructureToJson(const SummaryChunk& chunk);
ViewState ViewStateFromJson(const std::string& text);
SummaryChunk ParseChunk(const pqxx::row& r);

// The page a PagedSelect statement returned: its rows (at most the
// limit's), and whether more follow (the row limit or the byte budget left
// rows out; every row carries `seen` last).
template <typename T, typename Parse>
Page<T> PageOf(const pqxx::result& r, const PageLimit& limit, Parse parse) {
  Page<T> page;
  const int64_t seen = r.empty() ? 0 : r[0][r.columns() - 1].as<int64_t>();
  for (const pqxx::row& row : r) {
    if (static_cast<int>(page.rows.size()) == limit.rows) break;
    page.rows.push_back(parse(row));
  }
  page.more = seen > static_cast<int64_t>(page.rows.size());
  return page;
}

std::string SearchLexemes(int64_t conv_key, absl::string_view content);
std::string IdArray(const std::vector<int64_t>& ids);
// A boolean[] literal of `flags` ("{t,f}").
std::string BoolArray(const std::vector<bool>& flags);
// The ids of a bigint[]'s text ("{1,2,3}").
std::vector<int64_t> ParseIdArray(absl::string_view text);

// Audit rows as the array parameters of insert_events (and commit_at_once):
// their events, tiers, tokens before and after, and details, in order.
struct EventArrays {
  explicit EventArrays(const std::vector<CompactionEvent>& events);
  std::string names, tiers, before, after, details;
};

absl::Status NotFound(const ConversationKey& key);

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_POSTGRES_ROWS_H_
