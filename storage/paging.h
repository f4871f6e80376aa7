#ifndef CONVSTATE_STORAGE_PAGING_H_
#define CONVSTATE_STORAGE_PAGING_H_

// How every backend cuts a list into pages (internal to storage/).

#include <cstdint>
#include <utility>
#include <vector>

#include "storage/storage.h"

namespace convstate {

// The page `limit` allows of `candidates` (in order, at most limit.rows + 1
// of them: one more than a page tells that more follow): rows while those
// before them hold fewer than limit.bytes bytes by `bytes_of`, at most
// limit.rows. `more` when any candidate is left out.
template <typename T, typename BytesOf>
Page<T> TakePage(std::vector<T> candidates, const PageLimit& limit, BytesOf bytes_of) {
  Page<T> page;
  int64_t before = 0;
  for (T& row : candidates) {
    if (static_cast<int>(page.rows.size()) >= limit.rows ||
        (!page.rows.empty() && before >= limit.bytes)) {
      page.more = true;
      break;
    }
    before += bytes_of(row);
    page.rows.push_back(std::move(row));
  }
  return page;
}

// What a row weighs against a page's byte budget: its text. (PostgreSQL
// counts the same columns with octet_length; JSON columns as their text.)
inline int64_t PageBytes(const Item& i) {
  int64_t n = static_cast<int64_t>(i.data.content.size() + i.data.tool_name.size() +
                                   i.data.tool_call_id.size());
  for (const auto& [k, v] : i.data.metadata) n += static_cast<int64_t>(k.size() + v.size());
  return n;
}
inline int64_t PageBytes(const Conversation& c) {
  int64_t n = static_cast<int64_t>(c.system_prompt.size() + c.pinned_instructions.size()) +
              OverridesBytes(c.overrides);
  for (const auto& [k, v] : c.metadata) n += static_cast<int64_t>(k.size() + v.size());
  return n;
}
inline int64_t PageBytes(const SummaryChunk& c) {
  int64_t n = static_cast<int64_t>(c.text.size());
  for (const SummaryLine& l : c.lines) n += static_cast<int64_t>(l.text.size());
  for (const auto* facts : {&c.facts, &c.constraints}) {
    for (const LedgerFact& f : *facts) n += static_cast<int64_t>(f.text.size());
  }
  return n;
}
inline int64_t PageBytes(const CompactionEvent& e) { return static_cast<int64_t>(e.detail.size()); }

}  // namespace convstate

#endif  // CONVSTATE_STORAGE_PAGING_H_
