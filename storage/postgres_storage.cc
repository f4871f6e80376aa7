#include "storage/postgres_storage.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/log.h"
#include "services/core/chunk_json.h"
#include "services/common/status_macros.h"
#include "services/common/thread_pool.h"
#include "services/common/trace.h"
#include "storage/cancel_watchdog.h"
#include "storage/rules.h"
#include "storage/structure_cache.h"
#include "storage/distribution_key.h"
#include "storage/pg_util.h"

namespace convstate {
namespace {

// What a transaction does, for its span: db.operation.name and a
// low-cardinality db.query.summary ("{operation} {table}").
struct DbOperation {
  const char* name;
  const char* summary;
};

const DbOperation& DbOperationOf(absl::string_view operation) {
  static const auto* const kOperations = new absl::flat_hash_map<std::string, DbOperation>{
      {"ping", {"SELECT", "SELECT"}},
      {"create conversation", {"INSERT", "INSERT conversations"}},
      {"get conversation", {"SELECT", "SELECT conversations"}},
      {"list conversations", {"SELECT", "SELECT conversations"}},
      {"delete conversation", {"DELETE", "DELETE conversations"}},
      {"append items", {"INSERT", "INSERT items"}},
      {"list items", {"SELECT", "SELECT items"}},
      {"load context", {"SELECT", "SELECT conversations items summary_chunks"}},
      {"commit compaction", {"INSERT", "INSERT summary_chunks"}},
      {"index words", {"INSERT", "INSERT item_words"}},
      {"acquire compaction lease", {"UPDATE", "UPDATE conversations"}},
      {"release compaction lease", {"UPDATE", "UPDATE conversations"}},
      {"record compaction events", {"INSERT", "INSERT compaction_events"}},
      {"list summaries", {"SELECT", "SELECT summary_chunks"}},
      {"pin item", {"INSERT", "INSERT item_pins"}},
      {"unpin item", {"DELETE", "DELETE item_pins"}},
      {"list compaction events", {"SELECT", "SELECT compaction_events"}},
      {"record provider overflow", {"UPDATE", "UPDATE conversations"}},
      {"update conversation", {"UPDATE", "UPDATE conversations"}},
      {"save token counts", {"UPDATE", "UPDATE items summary_chunks"}},
      {"load context at a version", {"SELECT", "SELECT view_states items summary_chunks"}},
  };
  static const DbOperation kOther{"TRANSACTION", "TRANSACTION"};
  auto it = kOperations->find(operation);
  return it == kOperations->end() ? kOther : it->second;
}

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// Statements. Every one is prepared once per connection and parameterized.

// The columns of a conversation row, each an expression over
// `conversations`, in ParseConversation's order.
constexpr const char* kConversationColumnList[] = {
    "conv_key", "tenant_id", "conversation_id", "model", "system_prompt",
    "pinned_instructions", "metadata::text", "profile_overrides::text", "version",
    "item_count", "last_sequence", "last_turn_index", "summarized_through",
    "floor(extract(epoch FROM created_at) * 1000000)::bigint",
    "floor(extract(epoch FROM updated_at) * 1000000)::bigint",
    "system_prompt_tokens", "pinned_instructions_tokens", "item_tokens", "token_correction",
    "prune_boundary", "lease_token", "coalesce(lease_expires_at > now(), false)",
    "compaction_version", "overflow_correction", "prompt_limit", "continued_from",
    "count_encoding", "recounted", "incarnation", "redactions", "stored_bytes"};
// The id the next summary chunk of a conversation row gets.
constexpr char kNextChunkId[] =
    "(SELECT coalesce(max(s.chunk_id), 0) + 1 FROM summary_chunks s "
    "WHERE s.conv_key = conversations.conv_key)";
const std::string& ConversationColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kConversationColumnList, ", "));
  return *kColumns;
}

// Items with their pins: a pin set after the append overrides the flag;
// and with their count in the conversation's current tokenizer when it was
// made again after a model change.
constexpr const char* kItemColumnList[] = {
    "i.sequence", "i.turn_index", "i.role", "i.kind", "i.content", "i.tool_name",
    "i.tool_call_id", "coalesce(p.pinned, i.pinned)", "i.metadata::text",
    "coalesce(tc.token_count, i.token_count)", "coalesce(i.summary_chunk_id, 0)",
    "floor(extract(epoch FROM i.created_at) * 1000000)::bigint",
    "coalesce(i.appended_version, 0)", "i.redacted_digest IS NOT NULL",
    "coalesce(i.redacted_digest, '')"};
const std::string& ItemColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kItemColumnList, ", "));
  return *kColumns;
}
// `encoding` names the parameter holding the conversation's count_encoding.
// Items are joined with item_token_counts only in the statements for
// conversations that were recounted (the "_recounted" variants); the
// others read the items' own counts and take the same parameter unused.
std::string ItemsWithPins(const char* encoding, bool recounted) {
  if (!recounted) {
    return absl::StrCat(
        " FROM items i LEFT JOIN item_pins p ON p.conv_key = i.conv_key "
        "AND p.sequence = i.sequence "
        "CROSS JOIN (SELECT NULL::bigint AS token_count, ", encoding, "::text AS encoding) tc ");
  }
  return absl::StrCat(
      " FROM items i LEFT JOIN item_pins p ON p.conv_key = i.conv_key AND p.sequence = i.sequence "
      "LEFT JOIN item_token_counts tc ON tc.conv_key = i.conv_key AND tc.sequence = i.sequence "
      "AND tc.encoding = ",
      encoding, " ");
}

constexpr const char* kChunkColumnList[] = {
    "chunk_id", "from_sequence", "through_sequence", "text", "token_count",
    "summarizer_model", "prompt_version", "tokens_in", "tokens_out", "latency_ms",
    "coalesce(superseded_by, 0)",
    "floor(extract(epoch FROM created_at) * 1000000)::bigint", "structure::text",
    "coalesce(recall, -1)"};
const std::string& ChunkColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kChunkColumnList, ", "));
  return *kColumns;
}

// The statements that read a context in one round trip (LoadContextSince).
// Their rows share one shape: the part (0 the conversation, 1 an active
// chunk, 2 an item), an ordering key, then the part's own columns as text
// (libpq hands every value over as text anyway), padded with NULLs.
std::string ContextRow(int part, const char* order, const std::vector<std::string>& columns) {
  constexpr size_t kWidth = std::size(kConversationColumnList);
  std::vector<std::string> out = {absl::StrCat(part), absl::StrCat(order, "::bigint")};
  for (const std::string& c : columns) out.push_back(absl::StrCat("(", c, ")::text"));
  while (out.size() < kWidth + 2) out.push_back("NULL::text");
  return absl::StrJoin(out, ", ");
}

// The one conversation a statement is about: $1 its tenant, $2 its id and
// $`key` its distribution key (DistributionKey), which routes the statement
// to the one partition, or Citus shard, that holds it.
std::string Named(int key) {
  return absl::StrCat("conv_key = $", key, " AND tenant_id = $1 AND conversation_id = $2");
}

std::vector<std::string> Columns(absl::Span<const char* const> list) {
  return std::vector<std::string>(list.begin(), list.end());
}

// A page of `columns` (SELECT expressions) `from` (FROM, joins, WHERE) in
// `order`: at most $`rows_param` rows (one more than the page shows, to
// tell whether more follow) and, after the first, rows only while the
// `bytes` of those before them stay under $`bytes_param`, so that no more
// than that is read into memory. Each row ends with `seen`: how many rows
// the row limit let through before the byte budget cut (more than the rows
// returned when the budget cut the page). The window's running sum streams
// over the ordered index scan and stops at the limit.
std::string PagedSelect(const std::vector<std::string>& columns, const std::string& from,
                        const std::string& order, const std::string& bytes, int rows_param,
                        int bytes_param) {
  std::vector<std::string> inner, outer;
  for (size_t k = 0; k < columns.size(); ++k) {
    inner.push_back(absl::StrCat(columns[k], " AS c", k));
    outer.push_back(absl::StrCat("q.c", k));
  }
  return absl::StrCat(
      "SELECT ", absl::StrJoin(outer, ", "), ", q.seen FROM (SELECT p.*, count(*) OVER () AS seen ",
      "FROM (SELECT ", absl::StrJoin(inner, ", "), ", ", order, " AS ord, (", bytes, ") AS b, ",
      "sum(", bytes, ") OVER (ORDER BY ", order, " ROWS UNBOUNDED PRECEDING) AS upto ", from,
      " ORDER BY ", order, " LIMIT $", rows_param, ") p) q WHERE q.upto - q.b < $", bytes_param,
      " ORDER BY q.ord");
}

// What an item, a conversation, a chunk and an audit row weigh against a
// page's budget (as PageBytes counts them).
constexpr char kItemBytes[] =
    "octet_length(i.content) + octet_length(i.tool_name) + octet_length(i.tool_call_id) + "
    "octet_length(i.metadata::text) - 2";
constexpr char kConversationBytes[] =
    "octet_length(system_prompt) + octet_length(pinned_instructions) + "
    "octet_length(metadata::text) - 2 + octet_length(profile_overrides::text) - 2";
constexpr char kChunkBytes[] = "octet_length(text) + octet_length(structure::text)";
constexpr char kEventBytes[] = "octet_length(detail::text)";

// Everything a view needs ($1 tenant, $2 conversation id, $3 its
// distribution key): the row, the
// active chunks, the pinned items behind the marker and the items after it.
std::string LoadContextSql() {
  const std::string items_from = absl::StrCat(
      " FROM items i LEFT JOIN item_pins p ON p.conv_key = i.conv_key AND p.sequence = i.sequence "
      "LEFT JOIN item_token_counts tc ON tc.conv_key = i.conv_key AND tc.sequence = i.sequence "
      "AND tc.encoding = (SELECT count_encoding FROM c WHERE recounted) "
      "WHERE i.conv_key = (SELECT conv_key FROM c) ");
  const std::string item = ContextRow(2, "i.sequence", Columns(kItemColumnList));
  return absl::StrCat(
      "WITH c AS (SELECT * FROM conversations WHERE ", Named(3), ") "
      "SELECT ", ContextRow(0, "0", Columns(kConversationColumnList)), " FROM c "
      "UNION ALL SELECT ", ContextRow(1, "chunk_id", Columns(kChunkColumnList)),
      " FROM summary_chunks WHERE conv_key = (SELECT conv_key FROM c) AND superseded_by IS NULL "
      "UNION ALL SELECT ", item, items_from,
      "AND i.sequence > (SELECT summarized_through FROM c) "
      "UNION ALL SELECT ", item, items_from,
      "AND i.sequence <= (SELECT summarized_through FROM c) "
      "AND coalesce(p.pinned, i.pinned) AND i.sequence IN ("
      "SELECT sequence FROM items WHERE conv_key = (SELECT conv_key FROM c) AND pinned "
      "UNION ALL SELECT sequence FROM item_pins WHERE conv_key = (SELECT conv_key FROM c)) "
      "ORDER BY 1, 2");
}

// What a held snapshot ($3 its last sequence, $4 its incarnation, $5 its
// compaction_version; $6 the distribution key) needs when only appends happened, with a plan of
// three nodes (an index lookup each side of a nested loop): the row's
// versions and the fields an append changes (bump_conversation's), and one
// row per item appended since, while the row is still the held conversation
// at the held compaction_version. Nothing else in the row changes without
// moving compaction_version; appended items carry no later pin or recount
// (either would move compaction_version or count_encoding, and the caller
// reloads), so no join is needed for them.
constexpr const char* kAppendedColumnList[] = {
    "incarnation", "version", "compaction_version", "count_encoding", "recounted", "item_count",
    "last_sequence", "last_turn_index", "item_tokens", "token_correction",
    "floor(extract(epoch FROM updated_at) * 1000000)::bigint"};

std::string LoadAppendedSql() {
  // The items' columns are computed inside the lateral subquery under names
  // of their own (x.i0, ...), so that the conversation's columns, which
  // name the table's columns unqualified, resolve against it alone.
  std::vector<std::string> item_columns;
  std::vector<std::string> columns = Columns(kAppendedColumnList);
  for (size_t k = 0; k < std::size(kItemColumnList); ++k) {
    std::string column = kItemColumnList[k];
    if (column == "coalesce(p.pinned, i.pinned)") column = "i.pinned";
    if (column == "coalesce(tc.token_count, i.token_count)") column = "i.token_count";
    item_columns.push_back(absl::StrCat("(", column, ")::text AS i", k));
    columns.push_back(absl::StrCat("x.i", k));
  }
  return absl::StrCat(
      "SELECT ", absl::StrJoin(columns, ", "),
      " FROM conversations LEFT JOIN LATERAL (SELECT ", absl::StrJoin(item_columns, ", "),
      " FROM items i WHERE i.conv_key = conversations.conv_key AND conversations.incarnation = $4 "
      "AND conversations.compaction_version = $5 "
      "AND i.sequence > $3 AND i.sequence <= conversations.last_sequence "
      "ORDER BY i.sequence) x ON true WHERE ", Named(6));
}

// Audit rows into compaction_events under the conversation `conv_key` (an
// expression), from `from` (a FROM list to join, or ""), their columns the
// five arrays from parameter $`first` on (EventArrays), in order.
std::string InsertEventsSql(absl::string_view conv_key, absl::string_view from, int first) {
  return absl::StrCat(
      "INSERT INTO compaction_events (conv_key, event, tier, tokens_before, tokens_after, "
      "detail) SELECT ", conv_key, ", e.event, e.tier, e.before, e.after, e.detail::jsonb FROM ",
      from, from.empty() ? "" : ", ", "unnest($", first, "::text[], $", first + 1, "::text[], $",
      first + 2, "::bigint[], $", first + 3, "::bigint[], $", first + 4,
      "::text[]) WITH ORDINALITY AS e(event, tier, before, after, detail, n) ORDER BY e.n");
}

// A view state row (view_states, for LoadContextAt): the conversation `c`
// (from `from`, with its row's columns) at its versions, its active
// chunks' ids (`chunk_ids`, a subquery of rows `id`) and its pins
// (`pins`, a subquery of rows `seq`, `pinned`). The same row again for
// the same compaction_version takes the later version.
std::string RecordViewStateSql(absl::string_view from, absl::string_view chunk_ids,
                               absl::string_view pins) {
  return absl::StrCat(
      "INSERT INTO view_states (conv_key, compaction_version, version, state) "
      "SELECT c.conv_key, c.compaction_version, c.version, jsonb_build_object("
      "'model', c.model, 'sp', c.system_prompt, 'pi', c.pinned_instructions, "
      "'ov', c.profile_overrides, 'st', c.summarized_through, 'pb', c.prune_boundary, "
      "'tc', c.token_correction, 'oc', c.overflow_correction, 'pl', c.prompt_limit, "
      "'chunks', coalesce((SELECT jsonb_agg(x.id ORDER BY x.id) FROM (", chunk_ids,
      ") x), '[]'::jsonb), "
      "'pins', coalesce((SELECT jsonb_agg(jsonb_build_array(y.seq, y.pinned) ORDER BY y.seq) "
      "FROM (", pins, ") y), '[]'::jsonb)) FROM ", from,
      " ON CONFLICT (conv_key, compaction_version) DO UPDATE "
      "SET version = excluded.version, state = excluded.state");
}

// TermWeight (storage/contract.h) in SQL, of `df` items of `conv.item_count`.
constexpr char kTermWeight[] = "ln(1 + (conv.item_count - df + 0.5) / (df + 0.5))";
// The word of an indexed lexeme `u.lexeme` (its conversation's key and a
// '#' before it).
constexpr char kLexemeWord[] = "substr(u.lexeme, strpos(u.lexeme, '#') + 1)";

// SearchHistory in one statement. $3 the terms, $4 the most items a term
// may be held by (0: MaxDocumentFrequency's default), $5 the most
// candidates, $6 whether only what a compaction took out of the view is
// searched, $7 the terms known to be too common (not counted), $8 the
// conversation's key. The words of the items at or before
// the conversation's words_indexed_through are read from the word index
// (item_words, migrations/0019); those of the items after it from the
// items themselves by primary key (with $6, only up to the summarized or
// pruned sequence: what is after it is in the view). A word is looked up
// in the index as the conversation's lexeme for it, "<conv_key>#<word>"
// (migrations/0016), so the index reads this conversation's postings only;
// the index lookups name no condition on conv_key, so that the primary key
// can never serve them (the planner's estimate of one conversation's rows
// is an average: for a conversation of thousands of items a primary-key
// range filtered by words costs a hundred times the index). On Citus the
// index lookups go to every shard.
//
// By exchange (HistorySearch): the items that hold a term are grouped by
// turn; a turn scores the weights of the distinct terms its items hold; of
// the best turns (as many as candidates are asked for), the items are
// their matching items and their tool results that hold none (found by
// primary key within kExchangeReach of the turn's matching items), and the
// terms too common to search by that those items hold add their weights to
// their turn's (a dry run's turn is told from a config read's of the same
// service by "checksum"). The turns, so ranked, give their items: the
// matching ones first, then the tool results. Rows: the candidates in that order, each with the conversation's
// item count, as a JSON object how many items hold each term (counted up
// to the cap plus one), the item's own score, the terms its turn holds (a
// JSON array, in byte order) and, for a tool result, the first kMaxCallChars characters
// of its call; one row of NULL item columns when there is no candidate,
// and a NULL count when there is no conversation. A lexeme is matched
// quoted (terms come from SearchTerms: no quote, no backslash). Scores are
// rounded as MemoryStorage rounds them, so both rank alike.
std::string SearchHistorySql() {
  constexpr absl::string_view kMax = "9223372036854775807";
  // The items of the tail that hold the lexeme `q`.
  auto tail = [&](absl::string_view q) {
    return absl::StrCat(
        "FROM items i WHERE i.conv_key = $8 AND i.sequence > (SELECT indexed FROM conv) "
        "AND i.sequence <= (SELECT coalesce(upto, ", kMax, ") FROM conv) "
        "AND i.kind <> 'summary_marker' AND i.redacted_digest IS NULL AND i.search @@ ", q);
  };
  auto indexed = [&](absl::string_view q) {
    return absl::StrCat("FROM item_words w WHERE w.search @@ ", q,
                        " AND w.sequence <= (SELECT least(indexed, coalesce(upto, ", kMax,
                        ")) FROM conv)");
  };
  return absl::StrCat(
      "WITH conv AS (SELECT item_count, words_indexed_through AS indexed, "
      "CASE WHEN $6 THEN greatest(summarized_through, prune_boundary) END AS upto, "
      "CASE WHEN $4 > 0 THEN $4::bigint ELSE greatest(20, least(item_count / 5, 400)) END AS cap "
      "FROM conversations WHERE ", Named(8), "), ",
      "lexemes AS (SELECT t.term, quote_literal($8::text || '#' || t.term)::tsquery AS q "
      "FROM unnest($3::text[]) t(term) WHERE EXISTS (SELECT 1 FROM conv)), ",
      // The indexed items' counts are kept (word_counts); the tail's, when
      // it is searched, counted.
      "terms AS (SELECT l.term, l.q, CASE WHEN l.term = ANY($7::text[]) "
      "THEN (SELECT cap FROM conv) + 1 ELSE least((SELECT cap FROM conv) + 1, "
      "coalesce((SELECT k.items FROM word_counts k WHERE k.conv_key = $8 AND k.word = l.term), 0)"
      " + CASE WHEN (SELECT indexed FROM conv) >= (SELECT coalesce(upto, ", kMax,
      ") FROM conv) THEN 0 ELSE (SELECT count(*) FROM (SELECT 1 ", tail("l.q"),
      " LIMIT (SELECT cap FROM conv) + 1) x) END) END AS df "
      "FROM lexemes l), ",
      "searched AS (SELECT terms.term, terms.q, ",
      kTermWeight, " AS weight "
      "FROM terms, conv WHERE df BETWEEN 1 AND conv.cap), ",
      "hits AS (SELECT m.sequence, round(sum(m.weight)::numeric, 6) AS score, "
      "array_agg(m.term) AS terms FROM ("
      "SELECT w.sequence, s.term, s.weight FROM searched s, LATERAL (SELECT w.sequence ",
      indexed("s.q"), ") w UNION ALL SELECT i.sequence, s.term, s.weight FROM searched s, "
      "LATERAL (SELECT i.sequence ", tail("s.q"), ") i) m GROUP BY m.sequence), ",
      "hit_items AS (SELECT h.sequence, h.score, h.terms, i.turn_index FROM hits h "
      "JOIN items i ON i.conv_key = $8 AND i.sequence = h.sequence), ",
      "turn_terms AS (SELECT DISTINCT turn_index, unnest(terms) AS term FROM hit_items), ",
      "turns AS (SELECT t.turn_index, round(sum(s.weight)::numeric, 6) AS score, "
      "array_agg(t.term) AS terms, "
      "(SELECT min(x.sequence) FROM hit_items x WHERE x.turn_index = t.turn_index) AS lo, "
      "(SELECT max(x.sequence) FROM hit_items x WHERE x.turn_index = t.turn_index) AS hi "
      "FROM turn_terms t JOIN searched s ON s.term = t.term GROUP BY t.turn_index "
      "ORDER BY score DESC, t.turn_index DESC LIMIT $5), ",
      "turn_items AS (SELECT h.sequence, h.score AS own, t.turn_index, 0 AS extra "
      "FROM turns t JOIN hit_items h ON h.turn_index = t.turn_index "
      "UNION ALL SELECT r.sequence, 0, t.turn_index, 1 FROM turns t, "
      "LATERAL (SELECT r.sequence FROM items r WHERE r.conv_key = $8 "
      "AND r.sequence BETWEEN t.lo - ", kExchangeReach, " AND t.hi + ", kExchangeReach,
      " AND r.sequence <= (SELECT coalesce(upto, ", kMax, ") FROM conv) "
      "AND r.turn_index = t.turn_index AND r.kind = 'tool_result' "
      "AND r.redacted_digest IS NULL "
      "AND NOT EXISTS (SELECT 1 FROM hit_items x WHERE x.sequence = r.sequence)) r), ",
      // The terms too common to search by that these turns' items hold
      // (each item's words read by its key).
      "common AS (SELECT terms.term, terms.q, ",
      kTermWeight, " AS weight "
      "FROM terms, conv WHERE df > conv.cap), ",
      // Each item's words are read once (not once per term).
      "turn_common AS (SELECT d.turn_index, round(sum(d.weight)::numeric, 6) AS score, "
      "array_agg(d.term) AS terms FROM (SELECT DISTINCT ti.turn_index, c.term, c.weight "
      "FROM turn_items ti CROSS JOIN LATERAL (SELECT w.search FROM item_words w "
      "WHERE w.conv_key = $8 AND w.sequence = ti.sequence "
      "AND w.sequence <= (SELECT indexed FROM conv) "
      "UNION ALL SELECT x.search FROM items x WHERE x.conv_key = $8 AND x.sequence = ti.sequence "
      "AND x.sequence > (SELECT indexed FROM conv) AND x.search IS NOT NULL) v "
      "CROSS JOIN LATERAL unnest(v.search) u "
      "JOIN common c ON u.lexeme = $8::text || '#' || c.term "
      "WHERE EXISTS (SELECT 1 FROM common)) d "
      "GROUP BY d.turn_index), ",
      "ranked AS (SELECT t.turn_index, t.score + coalesce(tc.score, 0) AS score, "
      "ARRAY(SELECT x FROM unnest(t.terms || coalesce(tc.terms, '{}'::text[])) x "
      "ORDER BY x COLLATE \"C\") AS terms "
      "FROM turns t LEFT JOIN turn_common tc ON tc.turn_index = t.turn_index), ",
      "candidates AS (SELECT ti.sequence, ti.own, r.terms, row_number() OVER (ORDER BY "
      "r.score DESC, r.turn_index DESC, ti.extra, ti.own DESC, ti.sequence DESC) AS ord "
      "FROM turn_items ti JOIN ranked r ON r.turn_index = ti.turn_index "
      "ORDER BY ord LIMIT $5) ",
      // At least one row (no conversation: a NULL count); each candidate
      // read by its key.
      "SELECT (SELECT item_count FROM conv), "
      "(SELECT coalesce(json_object_agg(term, df), '{}')::text FROM terms), c.own, "
      "to_json(c.terms)::text, "
      "(SELECT left(k.content, ", kMaxCallChars, ") FROM items k WHERE i.kind = 'tool_result' "
      "AND k.conv_key = $8 AND k.sequence BETWEEN i.sequence - ", kExchangeReach,
      " AND i.sequence - 1 AND k.kind = 'tool_call' AND k.tool_call_id = i.tool_call_id "
      "AND k.redacted_digest IS NULL ORDER BY k.sequence DESC LIMIT 1), ",
      ItemColumns(),
      " FROM (SELECT 1) one LEFT JOIN (candidates c JOIN items i ON i.conv_key = $8 "
      "AND i.sequence = c.sequence "
      "LEFT JOIN item_pins p ON p.conv_key = i.conv_key AND p.sequence = i.sequence "
      "CROSS JOIN (SELECT NULL::bigint AS token_count) tc) ON true "
      "ORDER BY c.ord");
}

struct Statement {
  const char* name;
  std::string sql;
};

// Data table. Every prepared statement, by name.
const std::vector<Statement>& Statements() {
  static const auto* const kStatements = new std::vector<Statement>{
      {"create_conversation",
       absl::StrCat("INSERT INTO conversations (tenant_id, conversation_id, model, "
                    "system_prompt, pinned_instructions, metadata, profile_overrides, "
                    "system_prompt_tokens, pinned_instructions_tokens, continued_from, "
                    "count_encoding, stored_bytes, continued_from_incarnation, conv_key) "
                    "VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, $12, "
                    "nullif($13, 0), $14) "
                    "RETURNING ",
                    ConversationColumns())},
      {"get_conversation",
       absl::StrCat("SELECT ", ConversationColumns(),
                    " FROM conversations WHERE ", Named(3))},
      {"conv_key",
       absl::StrCat("SELECT conv_key FROM conversations WHERE ", Named(3))},
      // A continuation's source, by incarnation ($3), held while the new
      // conversation is created from what was read of it: an erasure of it
      // waits, then reaches the copy.
      {"lock_source",
       absl::StrCat("SELECT redactions FROM conversations WHERE ", Named(4),
                    " AND incarnation = $3 FOR SHARE")},
      {"lock_conversation",
       absl::StrCat("SELECT ", ConversationColumns(),
                    " FROM conversations WHERE ", Named(3), " FOR UPDATE")},
      // What a compaction's commit reads first: the conversation, then the
      // id its summary chunk would get (unlocked; or the row locked).
      {"read_for_commit",
       absl::StrCat("SELECT ", ConversationColumns(), ", ", kNextChunkId,
                    " FROM conversations WHERE ", Named(3))},
      {"lock_for_commit",
       absl::StrCat("SELECT ", ConversationColumns(), ", ", kNextChunkId,
                    " FROM conversations WHERE ", Named(3), " FOR UPDATE")},
      {"tenant_usage",
       "SELECT count(*), coalesce(sum(stored_bytes), 0)::bigint FROM conversations "
       "WHERE tenant_id = $1"},
      // $3 rows, $4 bytes.
      // A tenant's usage row, locked (created first if absent), with whether
      // it is due a recount.
      {"lock_tenant",
       "INSERT INTO tenant_usage (tenant_id, stored_bytes, conversations, counted_at) "
       "VALUES ($1, 0, 0, '-infinity') ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = "
       "excluded.tenant_id RETURNING stored_bytes, conversations, "
       "counted_at < now() - interval '1 minute'"},
      {"recount_tenant",
       "UPDATE tenant_usage SET stored_bytes = (SELECT coalesce(sum(stored_bytes), 0) "
       "FROM conversations WHERE tenant_id = $1), conversations = (SELECT count(*) "
       "FROM conversations WHERE tenant_id = $1), counted_at = now() WHERE tenant_id = $1 "
       "RETURNING stored_bytes, conversations"},
      {"add_to_tenant",
       "UPDATE tenant_usage SET stored_bytes = stored_bytes + $2, "
       "conversations = conversations + $3 WHERE tenant_id = $1"},
      {"list_conversations",
       PagedSelect(Columns(kConversationColumnList),
                   "FROM conversations WHERE tenant_id = $1 AND conversation_id > $2",
                   "conversation_id", kConversationBytes, 3, 4)},
      {"delete_conversation",
       absl::StrCat("DELETE FROM conversations WHERE ", Named(3),
                    " RETURNING item_count, stored_bytes")},
      // A limited tenant's row, locked (nothing for the others), before
      // anything of its conversations: the order every call takes.
      {"lock_tenant_if_limited",
       "SELECT 1 FROM tenant_usage WHERE tenant_id = $1 FOR UPDATE"},
      {"find_idempotency_key",
       "SELECT request_fingerprint, first_sequence, last_sequence, version "
       "FROM idempotency_keys WHERE conv_key = $1 AND idempotency_key = $2"},
      {"insert_idempotency_key",
       "INSERT INTO idempotency_keys (conv_key, idempotency_key, request_fingerprint, "
       "first_sequence, last_sequence, version) VALUES ($1, $2, $3, $4, $5, $6)"},
      {"insert_item",
       "INSERT INTO items (conv_key, sequence, turn_index, role, kind, content, "
       "tool_name, tool_call_id, pinned, metadata, token_count, appended_version, search) "
       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, "
       "array_to_tsvector(string_to_array($13, ' ')))"},
      {"bump_conversation",
       "UPDATE conversations SET version = version + 1, item_count = item_count + $2, "
       "last_sequence = $3, last_turn_index = $4, item_tokens = item_tokens + $5, "
       "token_correction = $6, stored_bytes = stored_bytes + $7, updated_at = now() "
       "WHERE conv_key = $1 "
       "RETURNING version, floor(extract(epoch FROM now()) * 1000000)::bigint"},
      // An append in one statement, when nothing needs the locked row in
      // C++ first (no usage report): the conversation row is updated, and
      // so locked, only if it is at the expected version ($3, -1 for any),
      // bound to the expected model ($4, '' for any) and has not seen the
      // idempotency key ($5, '' for none); then the items ($6..$14, arrays
      // in order: role, kind, content, tool name, tool call id, pinned,
      // metadata, tokens, turns started up to and including each item)
      // and the key ($15 the fingerprint) are inserted after it. $16 is
      // the number of items, $17 the turns they start, $18 their tokens,
      // $19 the bytes of their content, $20 each item's search lexemes
      // (space-separated), $21 the conversation's byte bound (0: none), $22
      // the distribution key.
      // No row: one of the conditions failed (or there is no such
      // conversation); the caller takes the transaction below instead.
      {"append_items",
       absl::StrCat("WITH c AS (UPDATE conversations SET version = version + 1, "
       "item_count = item_count + $16, last_sequence = last_sequence + $16, "
       "last_turn_index = last_turn_index + $17, item_tokens = item_tokens + $18, "
       "stored_bytes = stored_bytes + $19, updated_at = now() "
       "WHERE ", Named(22), " AND ($3 < 0 OR version = $3) "
       "AND ($21 <= 0 OR stored_bytes + $19 <= $21) "
       "AND ($4 = '' OR model = $4) AND ($5 = '' OR NOT EXISTS (SELECT 1 FROM idempotency_keys k "
       "WHERE k.conv_key = conversations.conv_key AND k.idempotency_key = $5)) "
       "RETURNING conv_key, version, last_sequence - $16 AS first, last_turn_index - $17 AS turn, "
       "floor(extract(epoch FROM now()) * 1000000)::bigint AS now_us), "
       "ins AS (INSERT INTO items (conv_key, sequence, turn_index, role, kind, content, tool_name, "
       "tool_call_id, pinned, metadata, token_count, appended_version, search) "
       "SELECT c.conv_key, c.first + u.n, c.turn + u.turns, u.role, u.kind, u.content, "
       "u.tool_name, u.tool_call_id, u.pinned, u.metadata::jsonb, u.tokens, c.version, "
       "array_to_tsvector(string_to_array(u.words, ' ')) FROM c, "
       "unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::boolean[], "
       "$12::text[], $13::bigint[], $14::bigint[], $20::text[]) WITH ORDINALITY "
       "AS u(role, kind, content, tool_name, tool_call_id, pinned, metadata, tokens, turns, words, "
       "n)), "
       "k AS (INSERT INTO idempotency_keys (conv_key, idempotency_key, request_fingerprint, "
       "first_sequence, last_sequence, version) "
       "SELECT c.conv_key, $5, $15, c.first + 1, c.first + $16, c.version FROM c WHERE $5 <> '') "
       "SELECT version, first, turn, now_us FROM c")},
      {"insert_usage",
       "INSERT INTO provider_usage (conv_key, sequence, input_tokens, output_tokens, "
       "cached_input_tokens, reasoning_tokens, estimated_input, correction_after) "
       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"},
      {"acquire_lease",
       absl::StrCat("UPDATE conversations SET lease_holder = $3, lease_token = lease_token + 1, "
       "lease_expires_at = now() + make_interval(secs => $4) "
       "WHERE ", Named(5), " "
       "AND (lease_expires_at IS NULL OR lease_expires_at <= now()) "
       "RETURNING lease_token, floor(extract(epoch FROM lease_expires_at) * 1000000)::bigint, "
       "incarnation")},
      {"release_lease",
       absl::StrCat("UPDATE conversations SET lease_holder = NULL, lease_expires_at = NULL "
       "WHERE ", Named(5), " AND lease_token = $3 AND incarnation = $4")},
      {"insert_chunk",
       "INSERT INTO summary_chunks (conv_key, chunk_id, from_sequence, through_sequence, text, "
       "token_count, summarizer_model, prompt_version, tokens_in, tokens_out, latency_ms, "
       "structure, recall) "
       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, "
       "NULLIF($13::float8, -1)) "
       "RETURNING floor(extract(epoch FROM created_at) * 1000000)::bigint"},
      // A compaction's commit in one statement, when nothing but appends
      // changed the conversation since it was read ($2 summarized through,
      // $3 pruned through, $4 compaction_version, $5 the lease's token or
      // -1 for none, $6 the incarnation): the new boundaries ($7, $8), the
      // chunk numbered $10 when $9 is 1 ($11 to $21 as in insert_chunk) with
      // its marker ($22) after the last item, the items a keep rule holds
      // pinned ($23), the chunks superseded ($24), the audit rows ($25 to
      // $29 as in insert_events) and the view state after it. The
      // conversation's row is locked from here to the end of the
      // transaction (if it was not before). No row: something else changed
      // it (nothing was written).
      {"commit_at_once",
       absl::StrCat("WITH c AS (UPDATE conversations SET summarized_through = $7, prune_boundary = $8, "
       "compaction_version = compaction_version + 1, item_count = item_count + $9, "
       "last_sequence = last_sequence + $9, updated_at = now() "
       "WHERE conv_key = $1 AND incarnation = $6 AND summarized_through = $2 "
       "AND prune_boundary = $3 AND compaction_version = $4 "
       "AND ($5 < 0 OR (lease_token = $5 AND lease_expires_at > now())) RETURNING *), "
       "chunk AS (INSERT INTO summary_chunks (conv_key, chunk_id, from_sequence, "
       "through_sequence, text, token_count, summarizer_model, prompt_version, tokens_in, "
       "tokens_out, latency_ms, structure, recall) SELECT $1, $10, $11, $12, $13, $14, $15, $16, "
       "$17, $18, $19, $20::jsonb, NULLIF($21::float8, -1) FROM c WHERE $9 > 0), "
       "marker AS (INSERT INTO items (conv_key, sequence, turn_index, role, kind, content, "
       "token_count, summary_chunk_id, appended_version) SELECT $1, c.last_sequence, "
       "c.last_turn_index, 'system', 'summary_marker', $22, 0, $10, c.version FROM c "
       "WHERE $9 > 0), "
       "pins AS (INSERT INTO item_pins (conv_key, sequence, pinned) SELECT $1, s, true "
       "FROM c, unnest($23::bigint[]) s ON CONFLICT (conv_key, sequence) "
       "DO UPDATE SET pinned = true, updated_at = now()), "
       "superseded AS (UPDATE summary_chunks SET superseded_by = $10 WHERE conv_key = $1 "
       "AND chunk_id = ANY($24::bigint[]) AND EXISTS (SELECT 1 FROM c)), "
       "events AS (", InsertEventsSql("$1", "c", 25), "), "
       // The view state after it: the statement's parts all read the
       // tables as they were before it.
       "view_state AS (", RecordViewStateSql(
           "c",
           "SELECT s.chunk_id AS id FROM summary_chunks s WHERE s.conv_key = $1 "
           "AND s.superseded_by IS NULL AND s.chunk_id <> ALL($24::bigint[]) "
           "UNION ALL SELECT $10::bigint WHERE $9 > 0",
           "SELECT p.sequence AS seq, p.pinned OR p.sequence = ANY($23::bigint[]) AS pinned "
           "FROM item_pins p WHERE p.conv_key = $1 UNION ALL SELECT DISTINCT s, true "
           "FROM unnest($23::bigint[]) s WHERE NOT EXISTS (SELECT 1 FROM item_pins p "
           "WHERE p.conv_key = $1 AND p.sequence = s)"), ") "
       "SELECT version, compaction_version, last_sequence FROM c")},
      // IndexWords: the conversation's indexed sequence, held against a
      // redaction (which locks the row FOR UPDATE) but not an append.
      {"words_indexed",
       "SELECT words_indexed_through FROM conversations WHERE conv_key = $1 FOR KEY SHARE"},
      // The words of the searchable items after $2 through $3, indexed.
      // The counts of their words go up with them (migrations/0020).
      {"index_words",
       absl::StrCat("WITH ins AS (INSERT INTO item_words (conv_key, sequence, search) "
       "SELECT i.conv_key, i.sequence, i.search FROM items i WHERE i.conv_key = $1 "
       "AND i.sequence > $2 AND i.sequence <= $3 AND i.search IS NOT NULL "
       "AND i.kind <> 'summary_marker' AND i.redacted_digest IS NULL "
       "ON CONFLICT (conv_key, sequence) DO NOTHING RETURNING search), "
       "counted AS (INSERT INTO word_counts (conv_key, word, items) "
       "SELECT $1, ", kLexemeWord, ", count(*) "
       "FROM ins, unnest(ins.search) u GROUP BY 2 "
       "ON CONFLICT (conv_key, word) DO UPDATE SET items = word_counts.items + excluded.items) "
       "UPDATE conversations SET words_indexed_through = greatest(words_indexed_through, $3) "
       "WHERE conv_key = $1")},
      // Audit rows, in order: arrays of their events, tiers, tokens before
      // and after, and details.
      {"insert_events", InsertEventsSql("$1", "", 2)},
      // The same under the conversation named by $1, $2 and $8: no row
      // when there is no such conversation.
      {"record_events",
       absl::StrCat(InsertEventsSql("c.conv_key",
                                    absl::StrCat("(SELECT conv_key FROM conversations WHERE ",
                                                 Named(8), ") c"),
                                    3),
                    " RETURNING 1")},
      {"all_chunks",
       absl::StrCat("SELECT ", ChunkColumns(),
                    " FROM summary_chunks WHERE conv_key = $1 ORDER BY chunk_id")},
      // Pages ($2 after this chunk id, $3 rows, $4 bytes).
      {"list_chunks",
       PagedSelect(Columns(kChunkColumnList),
                   "FROM summary_chunks WHERE conv_key = $1 AND chunk_id > $2", "chunk_id",
                   kChunkBytes, 3, 4)},
      {"list_active_chunks",
       PagedSelect(Columns(kChunkColumnList),
                   "FROM summary_chunks WHERE conv_key = $1 AND chunk_id > $2 "
                   "AND superseded_by IS NULL",
                   "chunk_id", kChunkBytes, 3, 4)},
      {"list_events",
       PagedSelect({"event_id", "event", "tier", "tokens_before", "tokens_after", "detail::text",
                    "floor(extract(epoch FROM created_at) * 1000000)::bigint"},
                   "FROM compaction_events WHERE conv_key = $1 AND event_id > $2", "event_id",
                   kEventBytes, 3, 4)},
      {"items_range",
       absl::StrCat("SELECT ", ItemColumns(), ItemsWithPins("$4", false),
                    "WHERE i.conv_key = $1 AND i.sequence BETWEEN $2 AND $3 "
                    "ORDER BY i.sequence")},
      {"items_range_recounted",
       absl::StrCat("SELECT ", ItemColumns(), ItemsWithPins("$4", true),
                    "WHERE i.conv_key = $1 AND i.sequence BETWEEN $2 AND $3 "
                    "ORDER BY i.sequence")},
      // $2 after this sequence, $3 rows, $4 the count encoding, $5 bytes.
      {"list_items",
       PagedSelect(Columns(kItemColumnList),
                   absl::StrCat(ItemsWithPins("$4", false), "WHERE i.conv_key = $1 AND i.sequence > $2"),
                   "i.sequence", kItemBytes, 3, 5)},
      {"list_items_recounted",
       PagedSelect(Columns(kItemColumnList),
                   absl::StrCat(ItemsWithPins("$4", true), "WHERE i.conv_key = $1 AND i.sequence > $2"),
                   "i.sequence", kItemBytes, 3, 5)},
      {"pin_item",
       "INSERT INTO item_pins (conv_key, sequence, pinned) "
       "SELECT conv_key, sequence, $3 FROM items "
       "WHERE conv_key = $1 AND sequence = $2 AND kind <> 'summary_marker' "
       "ON CONFLICT (conv_key, sequence) DO UPDATE SET pinned = $3, updated_at = now() "
       "RETURNING sequence"},
      // RedactItems. $2 is the array of sequences throughout.
      {"redact_check",
       "SELECT s, i.kind FROM unnest($2::bigint[]) s "
       "LEFT JOIN items i ON i.conv_key = $1 AND i.sequence = s ORDER BY s"},
      // What the items to erase hold, for their digests.
      {"redact_read",
       "SELECT sequence, content FROM items WHERE conv_key = $1 "
       "AND sequence = ANY($2::bigint[]) AND redacted_digest IS NULL"},
      // Tombstones ($3 the content, $4 its tokens) with the digest of what
      // they replace ($5, in the order of $2; '' for none); the bytes and
      // tokens removed, for the totals.
      {"redact_items",
       absl::StrCat("WITH d AS (SELECT * FROM unnest($2::bigint[], $5::text[]) AS d(seq, digest)), "
       "old AS (SELECT i.sequence, octet_length(i.content) + coalesce((SELECT "
       "sum(octet_length(key) + octet_length(value)) FROM jsonb_each_text(i.metadata)), 0) "
       "AS bytes, i.token_count, d.digest "
       "FROM items i JOIN d ON d.seq = i.sequence "
       "WHERE i.conv_key = $1 AND i.redacted_digest IS NULL), "
       "done AS (UPDATE items i SET redacted_digest = old.digest, content = $3, metadata = '{}', "
       "search = NULL, "
       "token_count = $4 FROM old WHERE i.conv_key = $1 AND i.sequence = old.sequence "
       "RETURNING i.sequence), "
       // Their words leave the index too (migrations/0019), and its counts
       // (0020).
       "unindexed AS (DELETE FROM item_words w USING old WHERE w.conv_key = $1 "
       "AND w.sequence = old.sequence RETURNING w.search), "
       "gone_words AS (SELECT ", kLexemeWord, " AS word, "
       "count(*) AS n FROM unindexed, unnest(unindexed.search) u GROUP BY 1), "
       // A word no other item holds goes with them (its row would keep the
       // erased word); the others' counts go down.
       "unlisted AS (DELETE FROM word_counts c USING gone_words g WHERE c.conv_key = $1 "
       "AND c.word = g.word AND c.items <= g.n), "
       "uncounted AS (UPDATE word_counts c SET items = c.items - g.n FROM gone_words g "
       "WHERE c.conv_key = $1 AND c.word = g.word AND c.items > g.n) "
       "SELECT coalesce(sum(bytes), 0)::bigint, coalesce(sum(token_count), 0)::bigint, "
       "count(*) FROM old")},
      // An erasure's: every proposal of the conversation ($1), and their
      // bytes.
      {"redact_proposals",
       "WITH gone AS (DELETE FROM compaction_proposals p WHERE p.conv_key = $1 "
       "RETURNING pg_column_size(p.*) AS n) "
       "UPDATE conversations SET stored_bytes = greatest(0, stored_bytes - "
       "(SELECT sum(n) FROM gone)) WHERE conv_key = $1 AND EXISTS (SELECT 1 FROM gone)"},
      // An erasure's: in the audit rows of the conversation ($1), the text
      // of each fact (in `dropped` and `lost_facts`) that came from an
      // erased item ($2) becomes the tombstone ($3).
      {"redact_event_facts",
       "UPDATE compaction_events e SET detail = (SELECT jsonb_object_agg(kv.key, "
       "CASE WHEN kv.key IN ('dropped', 'lost_facts') AND jsonb_typeof(kv.value) = 'array' "
       "THEN coalesce((SELECT jsonb_agg(CASE WHEN jsonb_typeof(x) = 'object' "
       "AND (x->>'sequence') ~ '^[0-9]+$' AND (x->>'sequence')::bigint = ANY($2::bigint[]) "
       "THEN jsonb_set(x, '{text}', to_jsonb($3::text)) ELSE x END ORDER BY o) "
       "FROM jsonb_array_elements(kv.value) WITH ORDINALITY a(x, o)), '[]'::jsonb) "
       "ELSE kv.value END) FROM jsonb_each(e.detail) kv) "
       "WHERE e.conv_key = $1 AND (e.detail ? 'dropped' OR e.detail ? 'lost_facts')"},
      {"redact_token_counts",
       "DELETE FROM item_token_counts WHERE conv_key = $1 AND sequence = ANY($2::bigint[])"},
      // Where the summaries are cut (RedactionCut): the start of the
      // innermost chunk holding the earliest redacted item any chunk holds.
      {"redact_cut",
       "WITH first AS (SELECT min(s) AS s FROM unnest($2::bigint[]) s WHERE EXISTS (SELECT 1 "
       "FROM summary_chunks c WHERE c.conv_key = $1 AND c.summarizer_model <> 'redacted' "
       "AND s BETWEEN c.from_sequence AND c.through_sequence)) "
       "SELECT max(c.from_sequence) FROM summary_chunks c, first WHERE c.conv_key = $1 "
       "AND c.summarizer_model <> 'redacted' "
       "AND first.s BETWEEN c.from_sequence AND c.through_sequence"},
      // Every chunk ending at or after the cut ($2 here), emptied and
      // retired; then the chunks only a retired fold superseded, active
      // again.
      {"redact_chunks",
       "UPDATE summary_chunks SET text = '', structure = '{}', token_count = 0, recall = NULL, "
       "tokens_in = 0, tokens_out = 0, summarizer_model = 'redacted', superseded_by = chunk_id "
       "WHERE conv_key = $1 AND through_sequence >= $2 AND summarizer_model <> 'redacted' "
       "RETURNING chunk_id"},
      {"redact_reactivate",
       "UPDATE summary_chunks c SET superseded_by = NULL WHERE c.conv_key = $1 "
       "AND c.summarizer_model <> 'redacted' AND c.superseded_by IN (SELECT r.chunk_id "
       "FROM summary_chunks r WHERE r.conv_key = $1 AND r.summarizer_model = 'redacted')"},
      // Totals less what was removed ($2 bytes, $3 tokens, $4 tombstone
      // tokens in all); the boundary back to the last active chunk ($5:
      // chunks went).
      {"redact_conversation",
       "UPDATE conversations SET stored_bytes = greatest(0, stored_bytes - $2 + $6), "
       "item_tokens = item_tokens - $3 + $4, summarized_through = CASE WHEN $5 THEN "
       "coalesce((SELECT max(through_sequence) FROM summary_chunks k WHERE k.conv_key = $1 "
       "AND k.superseded_by IS NULL), 0) ELSE summarized_through END, "
       "compaction_version = compaction_version + 1, redactions = redactions + 1, "
       "updated_at = now(), "
       // A compaction running meanwhile read the items before: its lease
       // goes, so it cannot commit what it made of them.
       "lease_token = lease_token + 1, lease_holder = NULL, lease_expires_at = NULL "
       "WHERE conv_key = $1 RETURNING compaction_version"},
      // Conversations continued from any of $2 ($1 the tenant), locked.
      // The conversations continued from those named by $2 (ids) and $3
      // (their incarnations): by incarnation, or by id for those continued
      // before it was kept (migrations/0021).
      {"continued_from",
       "SELECT c.conv_key, c.conversation_id, c.continued_from, c.incarnation "
       "FROM conversations c JOIN unnest($2::text[], $3::bigint[]) p(id, incarnation) "
       "ON c.continued_from = p.id AND (c.continued_from_incarnation IS NULL "
       "OR c.continued_from_incarnation = p.incarnation) "
       "WHERE c.tenant_id = $1 AND c.continued_from <> '' ORDER BY c.conv_key FOR UPDATE OF c"},
      // The items of a continued conversation ($1) carried over from the
      // items of its source named by $2 (their sequences, as text).
      {"carried_items",
       "SELECT sequence FROM items WHERE conv_key = $1 AND redacted_digest IS NULL "
       "AND metadata->>'convstate.continued_from_sequence' = ANY($2::text[]) ORDER BY sequence"},
      // A proposal ($2 its body, $3 seconds to live) with the next id of
      // the conversation ($1, locked), after its expired ones (the newest
      // stays, so that ids are never given twice) and their bytes.
      {"save_proposal",
       "WITH newest AS (SELECT coalesce(max(proposal_id), 0) AS id FROM compaction_proposals "
       "WHERE conv_key = $1), "
       "gone AS (DELETE FROM compaction_proposals p WHERE p.conv_key = $1 "
       "AND p.expires_at <= now() AND p.proposal_id < (SELECT id FROM newest) "
       "RETURNING pg_column_size(p.*) AS n), "
       "freed AS (UPDATE conversations SET stored_bytes = greatest(0, stored_bytes - "
       "(SELECT sum(n) FROM gone)) WHERE conv_key = $1 AND EXISTS (SELECT 1 FROM gone)) "
       "INSERT INTO compaction_proposals (conv_key, proposal_id, expires_at, body) "
       "SELECT $1, id + 1, now() + make_interval(secs => $3::float8), $2 FROM newest "
       "RETURNING proposal_id, floor(extract(epoch FROM expires_at) * 1000000)::bigint"},
      {"get_proposal",
       "SELECT proposal_id, floor(extract(epoch FROM expires_at) * 1000000)::bigint, body, "
       "coalesce(applied_chunk_id, 0), coalesce(applied_compaction_version, 0), "
       "coalesce(applied_answer, '') FROM compaction_proposals "
       "WHERE conv_key = $1 AND proposal_id = $2 AND expires_at > now()"},
      // ApplyCompaction's commit: the proposal ($2) marked applied with the
      // chunk ($3), the compaction_version ($4) and the answer ($5); no row
      // if it was applied already or expired.
      {"apply_proposal",
       "UPDATE compaction_proposals SET applied_chunk_id = $3, applied_compaction_version = $4, "
       "applied_answer = $5 WHERE conv_key = $1 AND proposal_id = $2 "
       "AND applied_chunk_id IS NULL AND expires_at > now() RETURNING 1"},
      // Idle compaction: when ($3, unix microseconds; NULL for never) a
      // conversation is due.
      {"set_idle_due",
       absl::StrCat("UPDATE conversations SET idle_due_at = to_timestamp($3::float8 / 1e6) "
                    "WHERE ", Named(4), " RETURNING 1")},
      // Due conversations ($1 now, unix microseconds; $2 at most), claimed
      // once: rows another replica is claiming are skipped.
      {"claim_idle",
       "UPDATE conversations c SET idle_due_at = NULL FROM (SELECT conv_key FROM conversations "
       "WHERE idle_due_at <= to_timestamp($1::float8 / 1e6) ORDER BY idle_due_at LIMIT $2 "
       "FOR UPDATE SKIP LOCKED) due WHERE c.conv_key = due.conv_key "
       "RETURNING c.tenant_id, c.conversation_id"},
      // RevertCompaction: the chunk ($2) out of every view, kept with who
      // reverted it ($3).
      {"revert_chunk",
       "UPDATE summary_chunks SET superseded_by = chunk_id, structure = structure || "
       "jsonb_build_object('rv', jsonb_build_object('by', $3::text, 'at', now())) "
       "WHERE conv_key = $1 AND chunk_id = $2"},
      // The boundaries where the revert puts them ($2, $3); a compaction
      // running meanwhile loses its lease.
      {"revert_conversation",
       "UPDATE conversations SET summarized_through = $2, prune_boundary = $3, "
       "compaction_version = compaction_version + 1, updated_at = now(), "
       "lease_token = lease_token + 1, lease_holder = NULL, lease_expires_at = NULL "
       "WHERE conv_key = $1 RETURNING compaction_version"},
      {"retire_chunks",
       "UPDATE summary_chunks SET text = '', structure = '{}', token_count = 0, recall = NULL, "
       "tokens_in = 0, tokens_out = 0, summarizer_model = 'redacted', superseded_by = chunk_id "
       "WHERE conv_key = $1 AND chunk_id = ANY($2::bigint[])"},
      {"reactivate_chunks",
       "UPDATE summary_chunks SET superseded_by = NULL WHERE conv_key = $1 "
       "AND chunk_id = ANY($2::bigint[])"},
      // A continued conversation whose copies a redaction retired.
      {"continued_erased",
       "UPDATE conversations SET summarized_through = "
       "coalesce((SELECT max(through_sequence) FROM summary_chunks k WHERE k.conv_key = $1 "
       "AND k.superseded_by IS NULL), 0), compaction_version = compaction_version + 1, "
       "updated_at = now(), lease_token = lease_token + 1, lease_holder = NULL, "
       "lease_expires_at = NULL WHERE conv_key = $1"},
      {"redact_idempotency",
       "UPDATE idempotency_keys k SET request_fingerprint = 'redacted' WHERE conv_key = $1 "
       "AND EXISTS (SELECT 1 FROM unnest($2::bigint[]) s "
       "WHERE s BETWEEN k.first_sequence AND k.last_sequence)"},
      {"record_view_state",
       RecordViewStateSql("conversations c WHERE c.conv_key = $1",
                          "SELECT s.chunk_id AS id FROM summary_chunks s "
                          "WHERE s.conv_key = $1 AND s.superseded_by IS NULL",
                          "SELECT p.sequence AS seq, p.pinned FROM item_pins p "
                          "WHERE p.conv_key = $1")},
      {"view_state_at",
       "SELECT compaction_version, version, state::text FROM view_states "
       "WHERE conv_key = $1 AND ((compaction_version = $3 AND version <= $2) OR "
       "($3 < 0 AND version <= $2)) ORDER BY compaction_version DESC LIMIT 1"},
      {"chunks_by_id",
       absl::StrCat("SELECT ", ChunkColumns(),
                    " FROM summary_chunks WHERE conv_key = $1 AND chunk_id = ANY($2::bigint[]) "
                    "ORDER BY chunk_id")},
      {"items_at",
       "SELECT i.sequence, i.turn_index, i.role, i.kind, i.content, i.tool_name, "
       "i.tool_call_id, i.pinned, i.metadata::text, i.token_count, "
       "coalesce(i.summary_chunk_id, 0), floor(extract(epoch FROM i.created_at) * 1000000)::bigint, "
       "coalesce(i.appended_version, 0), i.redacted_digest IS NOT NULL, "
       "coalesce(i.redacted_digest, '') FROM items i "
       // Only what the view at version $2 shows: the items after the
       // summarized part ($3), the pinned ones ($4: pinned later), and the
       // last one (the log's end then).
       "WHERE i.conv_key = $1 AND coalesce(i.appended_version, 0) <= $2 "
       "AND (i.sequence > $3 OR i.pinned OR i.sequence = ANY($4::bigint[]) OR i.sequence = "
       "(SELECT max(l.sequence) FROM items l WHERE l.conv_key = $1 "
       "AND coalesce(l.appended_version, 0) <= $2)) ORDER BY i.sequence"},
      {"update_conversation",
       "UPDATE conversations SET model = $2, system_prompt = $3, pinned_instructions = $4, "
       "profile_overrides = $5::jsonb, system_prompt_tokens = $6, "
       "pinned_instructions_tokens = $7, count_encoding = $8, stored_bytes = stored_bytes + $10, "
       "overflow_correction = CASE WHEN $9 THEN 1.0 ELSE overflow_correction END, "
       "prompt_limit = CASE WHEN $9 THEN 0 ELSE prompt_limit END, "
       "compaction_version = compaction_version + 1, updated_at = now() WHERE conv_key = $1"},
      {"set_item_tokens",
       "INSERT INTO item_token_counts (conv_key, sequence, encoding, token_count) "
       "VALUES ($1, $2, $4, $3) ON CONFLICT (conv_key, sequence, encoding) "
       "DO UPDATE SET token_count = excluded.token_count"},
      {"set_chunk_tokens",
       "UPDATE summary_chunks SET token_count = $3, structure = $4::jsonb "
       "WHERE conv_key = $1 AND chunk_id = $2"},
      {"set_count_encoding",
       "UPDATE conversations SET count_encoding = $2, recounted = true WHERE conv_key = $1"},
      {"record_overflow",
       "UPDATE conversations SET overflow_correction = greatest(overflow_correction, $2), "
       "prompt_limit = CASE WHEN prompt_limit = 0 THEN $3 ELSE least(prompt_limit, $3) END, "
       "compaction_version = compaction_version + 1, updated_at = now() WHERE conv_key = $1"},
      {"bump_compaction_version",
       "UPDATE conversations SET compaction_version = compaction_version + 1, updated_at = now() "
       "WHERE conv_key = $1"},
      {"load_context", LoadContextSql()},
      {"search_history", SearchHistorySql()},
      {"load_appended", LoadAppendedSql()},
      {"active_chunks",
       absl::StrCat("SELECT ", ChunkColumns(),
                    " FROM summary_chunks WHERE conv_key = $1 AND superseded_by IS NULL "
                    "ORDER BY chunk_id")},
  };
  return *kStatements;
}

// ---------------------------------------------------------------------------
// Row mapping.

std::string MetadataToJson(const Metadata& metadata) { return Json(metadata).dump(); }

Metadata MetadataFromJson(const std::string& text) {
  if (text == "{}") return Metadata();  // Most items have none.
  return Json::parse(text).get<Metadata>();
}

std::string OverridesToJson(const ProfileOverrides& o) {
  Json j = Json::object();
  if (o.context_window) j["context_window"] = *o.context_window;
  if (o.output_reserve) j["output_reserve"] = *o.output_reserve;
  if (o.soft_threshold) j["soft_threshold"] = *o.soft_threshold;
  if (o.hard_threshold) j["hard_threshold"] = *o.hard_threshold;
  if (o.emergency_threshold) j["emergency_threshold"] = *o.emergency_threshold;
  if (o.token_floor) j["token_floor"] = *o.token_floor;
  if (o.recent_turns) j["recent_turns"] = *o.recent_turns;
  if (o.recent_tokens) j["recent_tokens"] = *o.recent_tokens;
  if (o.compaction_enabled) j["compaction_enabled"] = *o.compaction_enabled;
  if (o.recall_budget_fraction) j["recall_budget_fraction"] = *o.recall_budget_fraction;
  if (o.prompt_cache_ttl_s) j["prompt_cache_ttl_s"] = *o.prompt_cache_ttl_s;
  if (o.hard_band_policy) j["hard_band_policy"] = static_cast<int>(*o.hard_band_policy);
  if (o.policy) j["policy"] = PolicyJson(*o.policy);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <typename T>
void ReadOptional(const Json& j, const char* name, std::optional<T>& out) {
  if (j.contains(name)) out = j.at(name).get<T>();
}

ProfileOverrides OverridesFromJson(const std::string& text) {
  const Json j = Json::parse(text);
  ProfileOverrides o;
  ReadOptional(j, "context_window", o.context_window);
  ReadOptional(j, "output_reserve", o.output_reserve);
  ReadOptional(j, "soft_threshold", o.soft_threshold);
  ReadOptional(j, "hard_threshold", o.hard_threshold);
  ReadOptional(j, "emergency_threshold", o.emergency_threshold);
  ReadOptional(j, "token_floor", o.token_floor);
  ReadOptional(j, "recent_turns", o.recent_turns);
  ReadOptional(j, "recent_tokens", o.recent_tokens);
  ReadOptional(j, "compaction_enabled", o.compaction_enabled);
  ReadOptional(j, "recall_budget_fraction", o.recall_budget_fraction);
  ReadOptional(j, "prompt_cache_ttl_s", o.prompt_cache_ttl_s);
  if (auto it = j.find("hard_band_policy"); it != j.end()) {
    o.hard_band_policy = static_cast<HardBandPolicy>(it->get<int>());
  }
  if (auto it = j.find("policy"); it != j.end()) o.policy = PolicyFromJson(*it);
  return o;
}

struct ConversationRow {
  int64_t conv_key = 0;
  Conversation conversation;
  // What the conversation stores, as its byte bound counts it.
  int64_t stored_bytes = 0;
};

ConversationRow ParseConversation(const pqxx::row& r) {
  ConversationRow out;
  out.conv_key = r[0].as<int64_t>();
  Conversation& c = out.conversation;
  c.key.tenant_id = r[1].as<std::string>();
  c.key.conversation_id = r[2].as<std::string>();
  c.model = r[3].as<std::string>();
  c.system_prompt = r[4].as<std::string>();
  c.pinned_instructions = r[5].as<std::string>();
  c.metadata = MetadataFromJson(r[6].as<std::string>());
  c.overrides = OverridesFromJson(r[7].as<std::string>());
  c.version = r[8].as<int64_t>();
  c.item_count = r[9].as<int64_t>();
  c.last_sequence = r[10].as<int64_t>();
  c.last_turn_index = r[11].as<int64_t>();
  c.summarized_through = r[12].as<int64_t>();
  c.create_time = absl::FromUnixMicros(r[13].as<int64_t>());
  c.update_time = absl::FromUnixMicros(r[14].as<int64_t>());
  c.system_prompt_tokens = r[15].as<int64_t>();
  c.pinned_instructions_tokens = r[16].as<int64_t>();
  c.item_tokens = r[17].as<int64_t>();
  c.token_correction = r[18].as<double>();
  c.prune_boundary = r[19].as<int64_t>();
  c.lease_token = r[20].as<int64_t>();
  c.lease_active = r[21].as<bool>();
  c.compaction_version = r[22].as<int64_t>();
  c.overflow_correction = r[23].as<double>();
  c.prompt_limit = r[24].as<int64_t>();
  c.continued_from = r[25].as<std::string>();
  c.count_encoding = r[26].as<std::string>();
  c.recounted = r[27].as<bool>();
  c.storage_key = r[28].as<int64_t>();
  c.redactions = r[29].as<int64_t>();
  out.stored_bytes = r[30].as<int64_t>();
  return out;
}

Item ParseItem(const pqxx::row& r) {
  Item item;
  item.sequence = r[0].as<int64_t>();
  item.turn_index = r[1].as<int64_t>();
  // The schema's CHECK constraints admit only known names.
  item.data.role = RoleFromName(r[2].as<std::string>()).value_or(Role::kUser);
  item.data.kind = ItemKindFromName(r[3].as<std::string>()).value_or(ItemKind::kMessage);
  item.data.content = r[4].as<std::string>();
  item.data.tool_name = r[5].as<std::string>();
  item.data.tool_call_id = r[6].as<std::string>();
  item.data.pinned = r[7].as<bool>();
  item.data.metadata = MetadataFromJson(r[8].as<std::string>());
  item.data.token_count = r[9].as<int64_t>();
  item.summary_chunk_id = r[10].as<int64_t>();
  item.create_time = absl::FromUnixMicros(r[11].as<int64_t>());
  item.appended_version = r[12].as<int64_t>();
  item.redacted = r[13].as<bool>();
  item.redacted_digest = r[14].as<std::string>();
  return item;
}

std::vector<Item> ParseItems(const pqxx::result& result) {
  std::vector<Item> items;
  items.reserve(result.size());
  for (const auto& row : result) items.push_back(ParseItem(row));
  return items;
}

// A chunk's structured content as stored: short keys, since every
// BuildContext reads it.
std::string StructureToJson(const SummaryChunk& chunk) { return ChunkStructureJson(chunk).dump(); }

// Parsed once per distinct text, for the whole process: the cache maps a
// text to what it parses into, whichever storage read it.
void StructureFromJson(const std::string& text, SummaryChunk& chunk) {
  constexpr size_t kStructureCacheBytes = size_t{32} << 20;
  static StructureCache* const structures = new StructureCache(kStructureCacheBytes);
  structures->Read(text, chunk);
}

ViewState ViewStateFromJson(const std::string& text) {
  const Json j = Json::parse(text);
  ViewState s;
  s.model = j.value("model", std::string());
  s.system_prompt = j.value("sp", std::string());
  s.pinned_instructions = j.value("pi", std::string());
  if (j.contains("ov")) s.overrides = OverridesFromJson(j["ov"].dump());
  s.summarized_through = j.value("st", int64_t{0});
  s.prune_boundary = j.value("pb", int64_t{0});
  s.token_correction = j.value("tc", 1.0);
  s.overflow_correction = j.value("oc", 1.0);
  s.prompt_limit = j.value("pl", int64_t{0});
  for (const Json& id : j.value("chunks", Json::array())) s.chunk_ids.push_back(id.get<int64_t>());
  for (const Json& p : j.value("pins", Json::array())) {
    s.pins.emplace_back(p.at(0).get<int64_t>(), p.at(1).get<bool>());
  }
  return s;
}

SummaryChunk ParseChunk(const pqxx::row& r) {
  SummaryChunk c;
  c.chunk_id = r[0].as<int64_t>();
  c.from_sequence = r[1].as<int64_t>();
  c.through_sequence = r[2].as<int64_t>();
  c.text = r[3].as<std::string>();
  c.token_count = r[4].as<int64_t>();
  c.summarizer_model = r[5].as<std::string>();
  c.prompt_version = r[6].as<std::string>();
  c.tokens_in = r[7].as<int64_t>();
  c.tokens_out = r[8].as<int64_t>();
  c.latency_ms = r[9].as<int64_t>();
  c.superseded_by = r[10].as<int64_t>();
  c.create_time = absl::FromUnixMicros(r[11].as<int64_t>());
  StructureFromJson(r[12].as<std::string>(), c);
  const double recall = r[13].as<double>();
  if (recall >= 0) c.recall = recall;
  return c;
}

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

// What items.search holds for `content` of the conversation `conv_key`:
// its words (SearchTerms, the split migration 0016 made in SQL), each as
// the lexeme "<conv_key>#<word>", separated by spaces (words hold none).
std::string SearchLexemes(int64_t conv_key, absl::string_view content) {
  const std::string prefix = absl::StrCat(conv_key, "#");
  std::string out;
  for (const std::string& w : SearchTerms(content)) {
    if (!out.empty()) out.push_back(' ');
    absl::StrAppend(&out, prefix, w);
  }
  return out;
}

// A bigint[] literal of `ids`.
std::string IdArray(const std::vector<int64_t>& ids) {
  return absl::StrCat("{", absl::StrJoin(ids, ","), "}");
}

// Audit rows as the array parameters of insert_events (and commit_at_once):
// their events, tiers, tokens before and after, and details, in order.
struct EventArrays {
  explicit EventArrays(const std::vector<CompactionEvent>& events) {
    std::vector<std::string> n, t, d;
    std::vector<int64_t> b, a;
    for (const CompactionEvent& e : events) {
      n.push_back(e.event);
      t.push_back(e.tier);
      b.push_back(e.tokens_before);
      a.push_back(e.tokens_after);
      d.push_back(e.detail.empty() ? std::string("{}") : e.detail);
    }
    names = pg::TextArray(n);
    tiers = pg::TextArray(t);
    before = IdArray(b);
    after = IdArray(a);
    details = pg::TextArray(d);
  }
  std::string names, tiers, before, after, details;
};

absl::Status NotFound(const ConversationKey& key) {
  return absl::NotFoundError(
      absl::StrCat("conversation '", key.conversation_id, "' not found"));
}


// The text of the statement `name`, for running it unprepared.
const std::string& SqlOf(const char* name) {
  static const auto* const kByName = [] {
    auto* by_name = new absl::flat_hash_map<std::string, const std::string*>();
    for (const Statement& s : Statements()) by_name->emplace(s.name, &s.sql);
    return by_name;
  }();
  return *kByName->at(name);
}

// ---------------------------------------------------------------------------
// Connection pool.

class ConnectionPool {
 public:
  // Behind a pooler (options.pooler) connections carry no session state:
  // no statement timeout set at connect, no prepared statements.
  explicit ConnectionPool(const PostgresOptions& options)
      : url_(pg::WithUserTimeout(
            options.pooler ? options.database_url
                           : pg::WithStatementTimeout(options.database_url, options.default_timeout),
            options.connect_timeout)),
        connect_timeout_(options.connect_timeout),
        prepare_(!options.pooler),
        max_size_(options.pool_size < 1 ? 1 : options.pool_size) {}

  // Takes an idle connection, or opens one if fewer than the maximum are
  // open, or waits for one until `deadline`.
  absl::StatusOr<std::unique_ptr<pqxx::connection>> Acquire(absl::Time deadline) {
    {
      absl::MutexLock lock(&mu_);
      auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !idle_.empty() || open_ < max_size_;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&available), deadline)) {
        return absl::DeadlineExceededError(
            "deadline passed while waiting for a database connection");
      }
      while (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        // One the server closed meanwhile would fail whatever is sent on
        // it; a write sent alone could not tell whether it was committed.
        if (!pg::ClosedWhileIdle(conn->sock())) return conn;
        --open_;
      }
      ++open_;  // Reserve the slot; the connection opens outside the lock.
    }
    try {
      // Connecting is bounded by the call's deadline too (libpq counts
      // whole seconds, at least 2).
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        Release(nullptr);
        return absl::DeadlineExceededError("deadline passed before a database connection opened");
      }
      auto conn = std::make_unique<pqxx::connection>(
          pg::WithConnectTimeout(url_, std::min(connect_timeout_, absl::Ceil(left, absl::Seconds(1)))));
      // Registered only: libpqxx prepares each statement on the connection
      // the first time it runs, inside the call's transaction (and under
      // its deadline).
      if (prepare_) {
        for (const Statement& s : Statements()) conn->prepare(s.name, s.sql);
      }
      return conn;
    } catch (const std::exception& e) {
      Release(nullptr);
      return pg::ExceptionToStatus(e, "connect");
    }
  }

  // Returns `conn` to the pool; a null or closed connection frees its slot.
  void Release(std::unique_ptr<pqxx::connection> conn) {
    absl::MutexLock lock(&mu_);
    if (conn != nullptr && conn->is_open()) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }

 private:
  const std::string url_;
  const absl::Duration connect_timeout_;
  const bool prepare_;
  const int max_size_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------------------

class PostgresStorage final : public Storage {
 public:
  explicit PostgresStorage(const PostgresOptions& options)
      : options_(options), pool_(options) {}

  ~PostgresStorage() override {
    // What is still queued is left to the next compaction of each
    // conversation; the one running ends within its deadline.
    absl::MutexLock lock(&words_mu_);
    words_stopping_ = true;
  }

  absl::Status Ping() { return Ping(CallContext{absl::Now() + options_.connect_timeout}); }

  absl::Status Ping(const CallContext& ctx) override {
    return Run<bool>(ctx, "ping", [](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
                       tx.exec("SELECT 1");
                       return true;
                     })
        .status();
  }

  absl::StatusOr<Conversation> CreateConversation(const CallContext& ctx,
                                                  const NewConversation& nc) override {
    auto result = Run<Conversation>(ctx, "create conversation",
                                    [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
      const int64_t bytes =
          StoredBytes(nc.system_prompt, nc.pinned_instructions, nc.metadata, nc.overrides);
      // The tenant's row first, then a conversation's: the order every
      // call takes.
      const bool limited = Limited(nc.tenant_limits);
      if (limited) {
        ASSIGN_OR_RETURN(const TenantUsage usage, LockTenant(tx, nc.key.tenant_id));
        RETURN_IF_ERROR(CheckTenantLimits(nc.key.tenant_id, usage, bytes, 1, nc.tenant_limits));
      }
      // The source, held while its copies are written (an erasure of it
      // waits, then reaches them).
      if (nc.continued_from_key != 0) {
        const pqxx::result source =
            ExecNamed(tx, "lock_source", ConversationKey{nc.key.tenant_id, nc.continued_from},
                      nc.continued_from_key);
        RETURN_IF_ERROR(CheckHandoffSource(
            nc, source.empty() ? std::nullopt : std::optional(source[0][0].as<int64_t>())));
      }
      pqxx::result r = ExecNamed(
          tx, "create_conversation", nc.key, nc.model, nc.system_prompt, nc.pinned_instructions,
          MetadataToJson(nc.metadata), OverridesToJson(nc.overrides), nc.system_prompt_tokens,
          nc.pinned_instructions_tokens, nc.continued_from, nc.count_encoding, bytes,
          nc.continued_from_key);
      if (limited) Exec(tx, "add_to_tenant", nc.key.tenant_id, bytes, int64_t{1});
      ConversationRow row = ParseConversation(r[0]);
      if (!nc.continued_from.empty()) {
        int64_t chunk_id = 0;
        int64_t facts = 0;
        for (const SummaryChunk& chunk : nc.carried_chunks) {
          Exec(tx, "insert_chunk", row.conv_key, ++chunk_id, chunk.from_sequence,
               chunk.through_sequence, chunk.text, chunk.token_count,
               chunk.summarizer_model, chunk.prompt_version, chunk.tokens_in,
               chunk.tokens_out, chunk.latency_ms, StructureToJson(chunk),
               chunk.recall.value_or(-1.0));
          facts += static_cast<int64_t>(chunk.facts.size());
        }
        InsertEvents(tx, row.conv_key, {ContinuedEvent(nc, facts)});
      }
      Exec(tx, "record_view_state", row.conv_key);
      if (!nc.carried_items.empty()) {
        RETURN_IF_ERROR(AppendIn(tx, CarriedAppend(nc)).status());
        row = ParseConversation(ExecNamed(tx, "get_conversation", nc.key)[0]);
      }
      tx.commit();
      return row.conversation;
    });
    if (absl::IsAlreadyExists(result.status())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "conversation '", nc.key.conversation_id, "' already exists"));
    }
    return result;
  }

  absl::StatusOr<Conversation> GetConversation(const CallContext& ctx,
                                               const ConversationKey& key) override {
    return Run<Conversation>(ctx, "get conversation",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
      pqxx::result r = ExecNamed(tx, "get_conversation", key);
      if (r.empty()) return NotFound(key);
      return ParseConversation(r[0]).conversation;
    });
  }

  absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& ctx,
                                             const std::string& tenant_id) override {
    return Run<TenantUsage, pqxx::nontransaction>(
        ctx, "read tenant usage",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<TenantUsage> {
          const pqxx::result r = Exec(tx, "tenant_usage", tenant_id);
          return TenantUsage{r[0][0].as<int64_t>(), r[0][1].as<int64_t>()};
        });
  }

  absl::StatusOr<Page<Conversation>> ListConversations(const CallContext& ctx,
                                                       const std::string& tenant_id,
                                                       const std::string& after_id,
                                                       const PageLimit& limit) override {
    return Run<Page<Conversation>>(
        ctx, "list conversations",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<Conversation>> {
          return PageOf<Conversation>(
              Exec(tx, "list_conversations", tenant_id, after_id, limit.rows + 1, limit.bytes),
              limit, [](const pqxx::row& r) { return ParseConversation(r).conversation; });
        });
  }

  absl::StatusOr<int64_t> DeleteConversation(const CallContext& ctx,
                                             const ConversationKey& key) override {
    return Run<int64_t>(ctx, "delete conversation",
                        [&](pqxx::transaction_base& tx) -> absl::StatusOr<int64_t> {
      // A limited tenant's total gives back what the conversation held.
      const bool limited = !Exec(tx, "lock_tenant_if_limited", key.tenant_id).empty();
      pqxx::result r = ExecNamed(tx, "delete_conversation", key);
      if (r.empty()) return NotFound(key);
      if (limited) Exec(tx, "add_to_tenant", key.tenant_id, -r[0][1].as<int64_t>(), int64_t{-1});
      tx.commit();
      return r[0][0].as<int64_t>();
    });
  }

  absl::StatusOr<AppendResult> AppendItems(const CallContext& ctx,
                                           const AppendRequest& request) override {
    if (request.items.empty()) {
      return absl::InvalidArgumentError("items: at least one item is required");
    }
    // The one-statement append, unless the conversation's row is needed in
    // C++ first (a usage report) or the tenant's total is checked with it.
    if (!request.usage.has_value() && !Limited(request.tenant_limits)) {
      absl::StatusOr<std::optional<AppendResult>> fast = AppendInOneStatement(ctx, request);
      // Refused (a replay, a stale version, another model, no such
      // conversation) or raced by the same idempotency key: the
      // transaction below tells which, and answers.
      if (!fast.ok() && !absl::IsAlreadyExists(fast.status())) return fast.status();
      if (fast.ok() && fast->has_value()) return std::move(**fast);
    }
    return Run<AppendResult>(ctx, "append items",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<AppendResult> {
      ASSIGN_OR_RETURN(AppendResult result, AppendIn(tx, request));
      tx.commit();
      return result;
    });
  }

  // AppendItems in `tx`, uncommitted.
  absl::StatusOr<AppendResult> AppendIn(pqxx::transaction_base& tx, const AppendRequest& request) {
    // A limited tenant's row lock first (always in this order: tenant,
    // then conversation), so that the check and the count are one step.
    const bool limited = Limited(request.tenant_limits);
    std::optional<TenantUsage> usage_before;
    if (limited) {
      ASSIGN_OR_RETURN(usage_before, LockTenant(tx, request.key.tenant_id));
    }
    // The row lock serializes appends to one conversation: sequence numbers
    // come from the locked row, so they stay gap-free and ordered.
    pqxx::result locked = ExecNamed(tx, "lock_conversation", request.key);
    if (locked.empty()) return NotFound(request.key);
    const ConversationRow row = ParseConversation(locked[0]);
    const Conversation& c = row.conversation;

    if (!request.idempotency_key.empty()) {
      pqxx::result seen = Exec(tx, "find_idempotency_key", row.conv_key,
                               request.idempotency_key);
      if (!seen.empty()) {
        if (seen[0][0].as<std::string>() != request.request_fingerprint) {
          return absl::AlreadyExistsError(
              "idempotency_key: already used for a different request");
        }
        AppendResult replay;
        replay.items = ParseItems(Exec(
            tx, row.conversation.recounted ? "items_range_recounted" : "items_range",
            row.conv_key, seen[0][1].as<int64_t>(), seen[0][2].as<int64_t>(),
            row.conversation.count_encoding));
        replay.version = seen[0][3].as<int64_t>();
        replay.replayed = true;
        return replay;
      }
    }
    RETURN_IF_ERROR(CheckAppend(c, request));
    const int64_t stored = StoredBytes(request);
    RETURN_IF_ERROR(CheckConversationBytes(request, row.stored_bytes, stored));
    if (limited) {
      RETURN_IF_ERROR(CheckTenantLimits(request.key.tenant_id, *usage_before, stored, 0,
                                        request.tenant_limits));
      Exec(tx, "add_to_tenant", request.key.tenant_id, stored, int64_t{0});
    }
    const std::vector<ItemData>& items = request.items;
    const std::optional<UsageReport> usage = EstimatedUsage(c, request);
    AppendResult result;
    result.items = NumberAppended(items, c.last_sequence, c.last_turn_index, c.version + 1);
    int64_t tokens = 0;
    for (const Item& item : result.items) {
      const ItemData& data = item.data;
      tokens += data.token_count;
      Exec(tx, "insert_item", row.conv_key, item.sequence, item.turn_index,
           std::string(RoleName(data.role)),
           std::string(ItemKindName(data.kind)), data.content,
           data.tool_name, data.tool_call_id, data.pinned,
           MetadataToJson(data.metadata), data.token_count,
           item.appended_version, SearchLexemes(row.conv_key, data.content));
    }
    const int64_t sequence = result.items.back().sequence;
    const int64_t turn = result.items.back().turn_index;
    const double correction = CorrectionAfter(c, usage);
    pqxx::result bumped = Exec(
        tx, "bump_conversation", row.conv_key, static_cast<int64_t>(items.size()),
        sequence, turn, tokens, correction, stored);
    if (usage.has_value()) {
      const UsageReport& u = *usage;
      Exec(tx, "insert_usage", row.conv_key, sequence, u.input_tokens,
           u.output_tokens, u.cached_input_tokens, u.reasoning_tokens,
           u.estimated_input_tokens, correction);
    }
    result.version = bumped[0][0].as<int64_t>();
    // Items take the transaction's now(), like updated_at.
    const absl::Time now = absl::FromUnixMicros(bumped[0][1].as<int64_t>());
    for (Item& item : result.items) item.create_time = now;
    if (!request.idempotency_key.empty()) {
      Exec(tx, "insert_idempotency_key", row.conv_key, request.idempotency_key,
           request.request_fingerprint, result.items.front().sequence,
           sequence, result.version);
    }
    return result;
  }

  // AppendItems in one round trip (the append_items statement); nullopt
  // when the statement wrote nothing.
  absl::StatusOr<std::optional<AppendResult>> AppendInOneStatement(const CallContext& ctx,
                                                                  const AppendRequest& request) {
    // Numbered from 0: the statement adds the conversation's last sequence
    // and turn index as it finds them under the lock.
    std::vector<Item> numbered = NumberAppended(request.items, 0, 0, 0);
    std::vector<absl::string_view> roles, kinds, contents, tool_names, call_ids;
    std::vector<std::string> metadata_json, lexemes;
    lexemes.reserve(numbered.size());
    const int64_t conv_key = DistributionKey(request.key);
    std::vector<const char*> pinned;
    std::vector<int64_t> tokens, turns;
    metadata_json.reserve(numbered.size());
    int64_t total_tokens = 0;
    for (const Item& item : numbered) {
      const ItemData& data = item.data;
      roles.push_back(RoleName(data.role));
      kinds.push_back(ItemKindName(data.kind));
      contents.push_back(data.content);
      tool_names.push_back(data.tool_name);
      call_ids.push_back(data.tool_call_id);
      metadata_json.push_back(MetadataToJson(data.metadata));
      lexemes.push_back(SearchLexemes(conv_key, data.content));
      pinned.push_back(data.pinned ? "t" : "f");
      tokens.push_back(data.token_count);
      turns.push_back(item.turn_index);
      total_tokens += data.token_count;
    }
    auto array = [](const auto& values) { return absl::StrCat("{", absl::StrJoin(values, ","), "}"); };
    // One statement on its own, committed as it runs: one round trip, where
    // BEGIN and COMMIT around it made three (the append is all in the one
    // statement, so it is as atomic and as durable either way). It runs
    // under the call's deadline. A connection that breaks under it leaves
    // its outcome unknown: with an idempotency key it is sent again (the
    // key answers if it was stored), without one the caller is told so.
    return Run<std::optional<AppendResult>, pqxx::nontransaction>(
        ctx, "append items",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::optional<AppendResult>> {
          const pqxx::result r = ExecNamed(
              tx, "append_items", request.key, request.expected_version.value_or(-1),
              request.expected_model, request.idempotency_key, pg::TextArray(roles),
              pg::TextArray(kinds), pg::TextArray(contents), pg::TextArray(tool_names),
              pg::TextArray(call_ids), array(pinned), pg::TextArray(metadata_json), array(tokens),
              array(turns), request.request_fingerprint, static_cast<int64_t>(numbered.size()),
              turns.back(), total_tokens, StoredBytes(request), pg::TextArray(lexemes),
              request.max_conversation_bytes);
          if (r.empty()) return std::nullopt;
          AppendResult result;
          result.version = r[0][0].as<int64_t>();
          const int64_t last_sequence = r[0][1].as<int64_t>();
          const int64_t last_turn_index = r[0][2].as<int64_t>();
          const absl::Time now = absl::FromUnixMicros(r[0][3].as<int64_t>());
          result.items = numbered;
          for (Item& item : result.items) {
            item.sequence += last_sequence;
            item.turn_index += last_turn_index;
            item.appended_version = result.version;
            item.create_time = now;
          }
          return std::optional<AppendResult>(std::move(result));
        },
        /*sent_alone=*/request.idempotency_key.empty());
  }

  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& ctx,
                                            const HistorySearch& search) override {
    return Run<HistoryHits, pqxx::nontransaction>(
        ctx, "search history", [&](pqxx::transaction_base& tx) -> absl::StatusOr<HistoryHits> {
      const pqxx::result r = ExecNamed(tx, "search_history", search.key, pg::TextArray(search.terms),
                                       search.max_document_frequency,
                                       static_cast<int64_t>(search.max_items),
                                       search.compacted_only, pg::TextArray(search.known_common));
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
      return hits;
    });
  }

  absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                       int64_t after_sequence, const PageLimit& limit) override {
    return Run<Page<Item>>(ctx, "list items",
                           [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<Item>> {
      pqxx::result found = ExecNamed(tx, "get_conversation", key);
      if (found.empty()) return NotFound(key);
      const ConversationRow row = ParseConversation(found[0]);
      return PageOf<Item>(
          Exec(tx, row.conversation.recounted ? "list_items_recounted" : "list_items", row.conv_key,
               after_sequence, limit.rows + 1, row.conversation.count_encoding, limit.bytes),
          limit, [](const pqxx::row& r) { return ParseItem(r); });
    });
  }

  absl::StatusOr<ContextSnapshot> LoadContext(const CallContext& ctx,
                                              const ConversationKey& key) override {
    ASSIGN_OR_RETURN(ContextDelta delta, LoadContextSince(ctx, key, nullptr));
    return std::move(delta.snapshot);
  }

  // One statement, so one round trip and one consistent snapshot: the
  // conversation row and the items appended since `held` when there is a
  // held snapshot (what a warm call needs), everything otherwise; and a
  // second one with everything when the row says more than appends
  // happened. No transaction is opened around them; the call's deadline
  // bounds them as it bounds everything Run does.
  absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& ctx,
                                                const ConversationKey& key,
                                                const Conversation* held) override {
    return Run<ContextDelta, pqxx::nontransaction>(
        ctx, "load context", [&](pqxx::transaction_base& tx) -> absl::StatusOr<ContextDelta> {
      if (held != nullptr) {
        ASSIGN_OR_RETURN(ContextDelta delta,
                         ParseAppended(ExecNamed(tx, "load_appended", key, held->last_sequence,
                                                 held->storage_key, held->compaction_version),
                                       key, *held));
        if (delta.kind != ContextDelta::Kind::kReloaded) return delta;
      }
      return ParseContext(ExecNamed(tx, "load_context", key),
                          key);
    });
  }

  // The rows of load_appended as a delta from `held`; kReloaded with nothing
  // read when more than appends happened.
  static absl::StatusOr<ContextDelta> ParseAppended(const pqxx::result& r,
                                                    const ConversationKey& key,
                                                    const Conversation& held) {
    if (r.empty()) return NotFound(key);
    const pqxx::row first = r[0];
    Conversation now;
    now.storage_key = first[0].as<int64_t>();
    now.version = first[1].as<int64_t>();
    now.compaction_version = first[2].as<int64_t>();
    now.count_encoding = first[3].as<std::string>();
    now.recounted = first[4].as<bool>();
    ContextDelta delta;
    delta.kind = DeltaKind(now, &held);
    if (delta.kind != ContextDelta::Kind::kAppended) return delta;
    // The held row with what the appends changed.
    Conversation& c = delta.snapshot.conversation;
    c = held;
    c.version = now.version;
    c.item_count = first[5].as<int64_t>();
    c.last_sequence = first[6].as<int64_t>();
    c.last_turn_index = first[7].as<int64_t>();
    c.item_tokens = first[8].as<int64_t>();
    c.token_correction = first[9].as<double>();
    c.update_time = absl::FromUnixMicros(first[10].as<int64_t>());
    constexpr int kItem = std::size(kAppendedColumnList);
    for (const pqxx::row& row : r) {
      if (row[kItem].is_null()) continue;
      delta.snapshot.live_items.push_back(
          ParseItem(row.slice(kItem, kItem + std::size(kItemColumnList))));
    }
    return delta;
  }

  // The rows of load_context: the whole context.
  static absl::StatusOr<ContextDelta> ParseContext(const pqxx::result& r,
                                                   const ConversationKey& key) {
    if (r.empty()) return NotFound(key);
    constexpr int kData = 2;  // The part and the ordering key come first.
    ContextDelta delta;
    ContextSnapshot& snap = delta.snapshot;
    snap.conversation =
        ParseConversation(r[0].slice(kData, kData + std::size(kConversationColumnList)))
            .conversation;
    const int64_t marker = snap.conversation.summarized_through;
    for (pqxx::result::size_type i = 1; i < r.size(); ++i) {
      const pqxx::row row = r[i];
      if (row[0].as<int>() == 1) {
        snap.active_chunks.push_back(
            ParseChunk(row.slice(kData, kData + std::size(kChunkColumnList))));
        continue;
      }
      Item item = ParseItem(row.slice(kData, kData + std::size(kItemColumnList)));
      (item.sequence <= marker ? snap.pinned_items : snap.live_items).push_back(std::move(item));
    }
    return delta;
  }

  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                    const CompactionCommit& commit) override {
    // What the view no longer holds verbatim ends at `out_of_view`.
    int64_t conv_key = 0;
    int64_t out_of_view = 0;
    if (commit.proposal_id == 0) {
      // The read and the one statement each on its own: two round trips.
      // Sent again after a broken connection, the statement finds its own
      // commit and writes nothing; the locked attempt below then reports a
      // concurrent compaction.
      absl::StatusOr<std::optional<CompactionResult>> alone =
          Run<std::optional<CompactionResult>, pqxx::nontransaction>(
              ctx, "commit compaction",
              [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::optional<CompactionResult>> {
        return CommitAsRead(tx, commit, /*locked=*/false, conv_key, out_of_view);
      });
      if (!alone.ok()) return alone.status();
      if (alone->has_value()) {
        QueueWordIndexing(conv_key, out_of_view);
        return **std::move(alone);
      }
    }
    absl::StatusOr<CompactionResult> committed = Run<CompactionResult>(
        ctx, "commit compaction",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<CompactionResult> {
      // A proposal is marked applied in the commit's transaction.
      if (commit.proposal_id != 0) {
        ASSIGN_OR_RETURN(std::optional<CompactionResult> unlocked,
                         CommitAsRead(tx, commit, /*locked=*/false, conv_key, out_of_view));
        if (unlocked.has_value()) return *std::move(unlocked);
      }
      ASSIGN_OR_RETURN(std::optional<CompactionResult> locked,
                       CommitAsRead(tx, commit, /*locked=*/true, conv_key, out_of_view));
      if (!locked.has_value()) {
        return absl::InternalError("a compaction commit found its locked conversation changed");
      }
      return *std::move(locked);
    });
    if (committed.ok()) QueueWordIndexing(conv_key, out_of_view);
    return committed;
  }

  // CommitCompaction with the conversation's row locked for as short a
  // time as it can be. Unless `locked`, the conversation and the next chunk
  // id (and for a fold the active chunks) are read without a lock, and one
  // statement (commit_at_once) applies everything, the view state with it,
  // only if nothing but appends changed the conversation meanwhile; a
  // proposal is marked applied after it. In `tx`, a transaction or, with
  // no proposal, each statement on its own. Appends, and the calls asking
  // for a compaction lease, wait for that row. nullopt, with nothing
  // written: something else changed it (or the checks failed on what was
  // read), and the commit is made again with the row locked from the read
  // on, where the checks say what changed and the statement cannot miss.
  absl::StatusOr<std::optional<CompactionResult>> CommitAsRead(pqxx::transaction_base& tx,
                                                               const CompactionCommit& commit,
                                                               bool locked, int64_t& conv_key,
                                                               int64_t& out_of_view) {
    const pqxx::result read =
        ExecNamed(tx, locked ? "lock_for_commit" : "read_for_commit", commit.key);
    if (read.empty()) {
      if (locked) return NotFound(commit.key);
      return std::nullopt;
    }
    const ConversationRow row = ParseConversation(read[0]);
    const Conversation& c = row.conversation;
    // Only a fold is checked against the active chunks (those it
    // supersedes must be among them).
    std::vector<SummaryChunk> active;
    if (!commit.supersedes.empty()) {
      for (const auto& r : Exec(tx, "active_chunks", row.conv_key)) active.push_back(ParseChunk(r));
    }
    if (absl::Status checked = CheckCompaction(c, active, commit); !checked.ok()) {
      if (locked) return checked;
      return std::nullopt;
    }
    SummaryChunk chunk = commit.chunk.value_or(SummaryChunk{});
    int64_t summarized_through = c.summarized_through;
    if (commit.chunk.has_value()) {
      chunk.chunk_id = read[0][static_cast<int>(std::size(kConversationColumnList))].as<int64_t>();
      chunk.prune_boundary_before = c.prune_boundary;
      if (commit.supersedes.empty()) summarized_through = chunk.through_sequence;
    }
    const EventArrays events(commit.events);
    const pqxx::result applied = Exec(
        tx, "commit_at_once", row.conv_key, c.summarized_through, c.prune_boundary,
        c.compaction_version, commit.lease.has_value() ? commit.lease->token : int64_t{-1},
        c.storage_key, summarized_through, commit.new_prune_boundary,
        commit.chunk.has_value() ? 1 : 0, chunk.chunk_id, chunk.from_sequence,
        chunk.through_sequence, chunk.text, chunk.token_count, chunk.summarizer_model,
        chunk.prompt_version, chunk.tokens_in, chunk.tokens_out, chunk.latency_ms,
        StructureToJson(chunk), chunk.recall.value_or(-1.0), MarkerFor(chunk).content,
        IdArray(commit.pins), IdArray(commit.supersedes), events.names, events.tiers,
        events.before, events.after, events.details);
    if (applied.empty()) return std::nullopt;
    CompactionResult result;
    result.version = applied[0][0].as<int64_t>();
    result.compaction_version = applied[0][1].as<int64_t>();
    if (commit.chunk.has_value()) {
      result.chunk_id = chunk.chunk_id;
      result.marker_sequence = applied[0][2].as<int64_t>();
    }
    if (commit.proposal_id != 0 &&
        Exec(tx, "apply_proposal", row.conv_key, commit.proposal_id, result.chunk_id,
             result.compaction_version, commit.proposal_answer)
            .empty()) {
      return absl::AbortedError(absl::StrCat("proposal ", commit.proposal_id,
                                             " was applied already or has expired"));
    }
    tx.commit();
    conv_key = row.conv_key;
    out_of_view = std::max(summarized_through, commit.new_prune_boundary);
    return result;
  }

  // Indexes the words of the conversation's items through `through` after
  // the call, on the word indexer's thread: no call waits for it, nor does
  // the compaction's lease. A conversation is queued once however many
  // compactions come meanwhile; when the queue is full it is left to its
  // next compaction.
  void QueueWordIndexing(int64_t conv_key, int64_t through) {
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

  // Indexes the words of the items through `through` not indexed yet
  // (migrations/0019), in a transaction of its own: the compaction is
  // committed whether or not this succeeds, and SearchHistory reads what is
  // not indexed from the items, so a failure costs searches time, not
  // results; the next compaction indexes what this one did not. The
  // conversation's row is held against a redaction from the read of the
  // indexed sequence on, so that the items are read after any redaction
  // that came first, and one that comes after finds their words to remove.
  void IndexWords(const CallContext& ctx, int64_t conv_key, int64_t through) {
    absl::Status s = Run<bool>(ctx, "index words",
                               [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
      const pqxx::result indexed = Exec(tx, "words_indexed", conv_key);
      if (indexed.empty() || indexed[0][0].as<int64_t>() >= through) return false;
      Exec(tx, "index_words", conv_key, indexed[0][0].as<int64_t>(), through);
      tx.commit();
      return true;
    }).status();
    if (!s.ok()) {
      LogThrottled(LogLevel::kWarning, "index words",
                   absl::StrCat("indexing the words of compacted items failed (searches read "
                                "them from the items meanwhile): ", s.message()));
    }
  }

  absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& ctx, const ConversationKey& key, const std::string& holder,
      absl::Duration duration) override {
    using Result = std::optional<CompactionLease>;
    // One statement on its own (one round trip): a grant it leaves in
    // doubt is not asked for again; it expires by itself.
    return Run<Result, pqxx::nontransaction>(
        ctx, "acquire compaction lease", [&](pqxx::transaction_base& tx) -> absl::StatusOr<Result> {
      pqxx::result r = ExecNamed(tx, "acquire_lease", key, holder, absl::ToDoubleSeconds(duration));
      if (r.empty()) {
        RETURN_IF_ERROR(ConvKeyOf(tx, key).status());
        return Result();  // Someone else holds it.
      }
      return Result(CompactionLease{holder, r[0][0].as<int64_t>(), r[0][2].as<int64_t>(),
                                    absl::FromUnixMicros(r[0][1].as<int64_t>())});
    }, /*sent_alone=*/true);
  }

  absl::Status ReleaseCompactionLease(const CallContext& ctx, const ConversationKey& key,
                                      const CompactionLease& lease) override {
    // One statement on its own (one round trip); sending it again is
    // harmless: it frees only this grant.
    return Run<bool, pqxx::nontransaction>(ctx, "release compaction lease",
                                           [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
      ExecNamed(tx, "release_lease", key, lease.token, lease.incarnation);
      return true;
    }).status();
  }

  absl::Status RecordCompactionEvents(const CallContext& ctx, const ConversationKey& key,
                                      const std::vector<CompactionEvent>& events) override {
    // Looked up and written in one statement on its own (one round trip):
    // this runs on the call path of compactions that stored nothing. Rows
    // left in doubt are not written again.
    return Run<bool, pqxx::nontransaction>(ctx, "record compaction events",
                                           [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
      if (events.empty()) {
        RETURN_IF_ERROR(ConvKeyOf(tx, key).status());
        return true;
      }
      const EventArrays a(events);
      if (ExecNamed(tx, "record_events", key, a.names, a.tiers, a.before, a.after, a.details)
              .empty()) {
        return NotFound(key);
      }
      return true;
    }, /*sent_alone=*/true).status();
  }

  absl::StatusOr<Page<SummaryChunk>> ListSummaries(const CallContext& ctx,
                                                   const ConversationKey& key,
                                                   bool include_superseded, int64_t after_chunk_id,
                                                   const PageLimit& limit) override {
    return Run<Page<SummaryChunk>>(
        ctx, "list summaries",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<SummaryChunk>> {
          ASSIGN_OR_RETURN(const int64_t conv_key, ConvKeyOf(tx, key));
          return PageOf<SummaryChunk>(
              Exec(tx, include_superseded ? "list_chunks" : "list_active_chunks", conv_key,
                   after_chunk_id, limit.rows + 1, limit.bytes),
              limit, [](const pqxx::row& r) { return ParseChunk(r); });
        });
  }

  absl::StatusOr<Item> SetPinned(const CallContext& ctx, const ConversationKey& key,
                                 int64_t sequence, bool pinned) override {
    return Run<Item>(ctx, pinned ? "pin item" : "unpin item",
                     [&](pqxx::transaction_base& tx) -> absl::StatusOr<Item> {
      pqxx::result locked =
          ExecNamed(tx, "lock_conversation", key);
      if (locked.empty()) return NotFound(key);
      const ConversationRow pinned_row = ParseConversation(locked[0]);
      const int64_t conv_key = pinned_row.conv_key;
      if (Exec(tx, "pin_item", conv_key, sequence, pinned).empty()) {
        return absl::NotFoundError(absl::StrCat("conversation '", key.conversation_id,
                                                "' has no item ", sequence,
                                                " that can be pinned"));
      }
      Exec(tx, "bump_compaction_version", conv_key);
      Exec(tx, "record_view_state", conv_key);
      std::vector<Item> items =
          ParseItems(Exec(
              tx, pinned_row.conversation.recounted ? "items_range_recounted" : "items_range",
              conv_key, sequence, sequence, pinned_row.conversation.count_encoding));
      tx.commit();
      return items.at(0);
    });
  }

  absl::StatusOr<RedactResult> RedactItems(const CallContext& ctx,
                                           const RedactRequest& request) override {
    const std::string sequences = IdArray(request.sequences);
    return Run<RedactResult>(ctx, "redact items",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<RedactResult> {
      pqxx::result locked = ExecNamed(tx, "lock_conversation", request.key);
      if (locked.empty()) return NotFound(request.key);
      const ConversationRow row = ParseConversation(locked[0]);
      const int64_t conv_key = row.conv_key;
      for (const auto& r : Exec(tx, "redact_check", conv_key, sequences)) {
        if (r[1].is_null()) {
          return absl::NotFoundError(absl::StrCat("conversation '", request.key.conversation_id,
                                                  "' has no item ", r[0].as<int64_t>()));
        }
        if (r[1].as<std::string>() == "summary_marker") {
          return absl::InvalidArgumentError(absl::StrCat(
              "sequences: item ", r[0].as<int64_t>(), " is a summary marker, not content"));
        }
      }
      // The digests, computed here: the key never goes to the database.
      absl::flat_hash_map<int64_t, std::string> digests;
      if (!request.digest_key.empty()) {
        for (const auto& r : Exec(tx, "redact_read", conv_key, sequences)) {
          digests[r[0].as<int64_t>()] = RedactedDigest(request.digest_key, r[1].as<std::string>());
        }
      }
      std::vector<std::string> digest_list;
      for (int64_t s : request.sequences) digest_list.push_back(digests[s]);
      RedactResult result;
      const Erasure erased = Erase(tx, conv_key, request.sequences, digest_list, request);
      result.chunks_removed = static_cast<int64_t>(erased.retired.size());
      result.compaction_version = erased.compaction_version;
      InsertEvents(tx, conv_key, {RedactedEvent(request, result.chunks_removed)});
      const std::vector<Item> range = ParseItems(Exec(
          tx, row.conversation.recounted ? "items_range_recounted" : "items_range", conv_key,
          request.sequences.front(), request.sequences.back(), row.conversation.count_encoding));
      for (const Item& item : range) {
        if (std::binary_search(request.sequences.begin(), request.sequences.end(),
                               item.sequence)) {
          result.items.push_back(item);
        }
      }
      RETURN_IF_ERROR(
          EraseContinuations(tx, request, row.conversation.storage_key, erased.retired, result));
      tx.commit();
      return result;
    });
  }

  // What Erase did to one conversation.
  struct Erasure {
    std::vector<int64_t> retired;
    int64_t compaction_version = 0;
  };

  // Erases `seqs` of the conversation `conv_key` (locked) with `digests`
  // (in their order): tombstones, their counts, every chunk derived from
  // them emptied and retired, the totals, the idempotency records, the
  // view state. Items already erased are left alone.
  Erasure Erase(pqxx::transaction_base& tx, int64_t conv_key, const std::vector<int64_t>& seqs,
                const std::vector<std::string>& digests, const RedactRequest& request) {
    const std::string sequences = IdArray(seqs);
    const pqxx::row removed = Exec1(tx, "redact_items", conv_key, sequences, request.tombstone,
                                    request.tombstone_tokens, pg::TextArray(digests));
    Exec(tx, "redact_token_counts", conv_key, sequences);
    Erasure erasure;
    const pqxx::row cut = Exec1(tx, "redact_cut", conv_key, sequences);
    if (!cut[0].is_null()) {
      for (const auto& r : Exec(tx, "redact_chunks", conv_key, cut[0].as<int64_t>())) {
        erasure.retired.push_back(r[0].as<int64_t>());
      }
      Exec(tx, "redact_reactivate", conv_key);
    }
    const int64_t redacted = removed[2].as<int64_t>();
    erasure.compaction_version =
        Exec1(tx, "redact_conversation", conv_key, removed[0].as<int64_t>(),
              removed[1].as<int64_t>(), redacted * request.tombstone_tokens,
              !erasure.retired.empty(),
              redacted * static_cast<int64_t>(request.tombstone.size()))[0]
            .as<int64_t>();
    Exec(tx, "redact_idempotency", conv_key, sequences);
    // What was derived from the erased items: the conversation's compaction
    // proposals go, and the audit trail's fact texts of them give way to the
    // tombstone.
    Exec(tx, "redact_proposals", conv_key);
    Exec(tx, "redact_event_facts", conv_key, sequences, request.tombstone);
    Exec(tx, "record_view_state", conv_key);
    return erasure;
  }

  // Conversations continued from the one `request` erased items of (and
  // from those, down the chain): their copies of the retired chunks (and
  // chunks derived from those), and the items carried over from an erased
  // item (pinned items, recent turns), go in the same transaction.
  absl::Status EraseContinuations(pqxx::transaction_base& tx, const RedactRequest& request,
                                  int64_t root_incarnation,
                                  const std::vector<int64_t>& retired_here, RedactResult& result) {
    std::map<std::string, std::set<int64_t>> retired;
    if (!retired_here.empty()) {
      retired[request.key.conversation_id].insert(retired_here.begin(), retired_here.end());
    }
    // Erased items by conversation, as their sequences' text.
    std::map<std::string, std::vector<std::string>> erased;
    for (int64_t s : request.sequences) {
      erased[request.key.conversation_id].push_back(absl::StrCat(s));
    }
    // The lineage, by incarnation; each conversation once, and at most
    // kMaxLineage of them.
    std::vector<std::string> frontier = {request.key.conversation_id};
    std::vector<int64_t> incarnations = {root_incarnation};
    absl::flat_hash_set<int64_t> visited = {root_incarnation};
    while (!frontier.empty()) {
      std::vector<std::string> next;
      std::vector<int64_t> next_incarnations;
      for (const auto& r : Exec(tx, "continued_from", request.key.tenant_id,
                                pg::TextArray(frontier), IdArray(incarnations))) {
        const int64_t continued = r[0].as<int64_t>();
        const std::string id = r[1].as<std::string>();
        const std::string parent = r[2].as<std::string>();
        const int64_t incarnation = r[3].as<int64_t>();
        if (!visited.insert(incarnation).second) continue;
        if (visited.size() > kMaxLineage) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "the erasure would reach more than ", kMaxLineage,
              " conversations continued from this one; nothing was erased"));
        }
        next.push_back(id);
        next_incarnations.push_back(incarnation);
        std::vector<SummaryChunk> chunks;
        for (const auto& c : Exec(tx, "all_chunks", continued)) chunks.push_back(ParseChunk(c));
        const ContinuedErasure erasure = EraseContinued(chunks, retired);
        int64_t removed = static_cast<int64_t>(erasure.retire.size());
        if (!erasure.retire.empty()) {
          Exec(tx, "retire_chunks", continued, IdArray(erasure.retire));
          Exec(tx, "reactivate_chunks", continued, IdArray(erasure.reactivate));
          Exec(tx, "continued_erased", continued);
          Exec(tx, "record_view_state", continued);
          retired[id].insert(erasure.retire.begin(), erasure.retire.end());
        }
        std::vector<int64_t> carried;
        for (const auto& c : Exec(tx, "carried_items", continued, pg::TextArray(erased[parent]))) {
          carried.push_back(c[0].as<int64_t>());
        }
        if (!carried.empty()) {
          const Erasure copies =
              Erase(tx, continued, carried, std::vector<std::string>(carried.size()), request);
          retired[id].insert(copies.retired.begin(), copies.retired.end());
          removed += static_cast<int64_t>(copies.retired.size());
          for (int64_t s : carried) erased[id].push_back(absl::StrCat(s));
        }
        if (erasure.retire.empty() && carried.empty()) continue;
        result.continued_chunks_removed += removed;
        InsertEvents(tx, continued, {ContinuedErasedEvent(request, removed)});
      }
      frontier = std::move(next);
      incarnations = std::move(next_incarnations);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& ctx, const ConversationKey& key,
                                              const std::string& body, absl::Duration ttl,
                                              const TenantLimits& limits,
                                              int64_t compaction_version) override {
    return Run<ProposalRecord>(ctx, "save proposal",
                               [&](pqxx::transaction_base& tx) -> absl::StatusOr<ProposalRecord> {
      const int64_t bytes = static_cast<int64_t>(body.size()) + kProposalRowBytes;
      const bool limited = Limited(limits);
      if (limited) {
        ASSIGN_OR_RETURN(const TenantUsage usage, LockTenant(tx, key.tenant_id));
        RETURN_IF_ERROR(CheckTenantLimits(key.tenant_id, usage, bytes, 0, limits));
      }
      pqxx::result locked = ExecNamed(tx, "lock_conversation", key);
      if (locked.empty()) return NotFound(key);
      const ConversationRow row = ParseConversation(locked[0]);
      if (row.conversation.compaction_version != compaction_version) {
        return StaleProposal(key, compaction_version, row.conversation.compaction_version);
      }
      const int64_t conv_key = row.conv_key;
      const pqxx::row saved =
          Exec1(tx, "save_proposal", conv_key, body, absl::ToDoubleSeconds(ttl));
      if (limited) Exec(tx, "add_to_tenant", key.tenant_id, bytes, int64_t{0});
      tx.commit();
      ProposalRecord record;
      record.proposal_id = saved[0].as<int64_t>();
      record.expire_time = absl::FromUnixMicros(saved[1].as<int64_t>());
      record.body = body;
      return record;
    });
  }

  absl::StatusOr<ProposalRecord> GetProposal(const CallContext& ctx, const ConversationKey& key,
                                             int64_t proposal_id) override {
    return Run<ProposalRecord>(ctx, "get proposal",
                               [&](pqxx::transaction_base& tx) -> absl::StatusOr<ProposalRecord> {
      ASSIGN_OR_RETURN(const int64_t conv_key, ConvKeyOf(tx, key));
      pqxx::result r = Exec(tx, "get_proposal", conv_key, proposal_id);
      if (r.empty()) return ProposalNotFound(key, proposal_id);
      ProposalRecord record;
      record.proposal_id = r[0][0].as<int64_t>();
      record.expire_time = absl::FromUnixMicros(r[0][1].as<int64_t>());
      record.body = r[0][2].as<std::string>();
      record.applied_chunk_id = r[0][3].as<int64_t>();
      record.applied_compaction_version = r[0][4].as<int64_t>();
      record.applied_answer = r[0][5].as<std::string>();
      return record;
    });
  }

  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override {
    return Run<bool>(ctx, "set idle due", [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
      const std::optional<double> micros =
          due.has_value() ? std::optional<double>(static_cast<double>(absl::ToUnixMicros(*due)))
                          : std::nullopt;
      if (ExecNamed(tx, "set_idle_due", key, micros).empty()) return NotFound(key);
      tx.commit();
      return true;
    }).status();
  }

  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& ctx, absl::Time now,
                                                         int limit) override {
    using Keys = std::vector<ConversationKey>;
    return Run<Keys>(ctx, "claim idle", [&](pqxx::transaction_base& tx) -> absl::StatusOr<Keys> {
      Keys keys;
      for (const auto& r : Exec(tx, "claim_idle", static_cast<double>(absl::ToUnixMicros(now)),
                                limit)) {
        keys.push_back(ConversationKey{r[0].as<std::string>(), r[1].as<std::string>()});
      }
      tx.commit();
      return keys;
    });
  }

  absl::StatusOr<RevertResult> RevertCompaction(const CallContext& ctx,
                                                const RevertRequest& request) override {
    return Run<RevertResult>(ctx, "revert compaction",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<RevertResult> {
      pqxx::result locked = ExecNamed(tx, "lock_conversation", request.key);
      if (locked.empty()) return NotFound(request.key);
      const ConversationRow row = ParseConversation(locked[0]);
      std::vector<SummaryChunk> chunks;
      for (const auto& r : Exec(tx, "all_chunks", row.conv_key)) chunks.push_back(ParseChunk(r));
      ASSIGN_OR_RETURN(const RevertPlan plan,
                       PlanRevert(row.conversation, chunks, request.chunk_id));
      Exec(tx, "revert_chunk", row.conv_key, request.chunk_id, request.actor);
      Exec(tx, "reactivate_chunks", row.conv_key, IdArray(plan.reactivate));
      RevertResult result;
      result.compaction_version =
          Exec1(tx, "revert_conversation", row.conv_key, plan.summarized_through,
                plan.prune_boundary)[0]
              .as<int64_t>();
      Exec(tx, "record_view_state", row.conv_key);
      for (const SummaryChunk& chunk : chunks) {
        if (chunk.chunk_id != request.chunk_id) continue;
        result.chunk = chunk;
        result.chunk.superseded_by = chunk.chunk_id;
        result.chunk.reverted = true;
        result.chunk.reverted_by = request.actor;
      }
      InsertEvents(tx, row.conv_key, {RevertedEvent(request, result.chunk, plan)});
      tx.commit();
      result.reactivated = plan.reactivate;
      result.summarized_through = plan.summarized_through;
      result.prune_boundary = plan.prune_boundary;
      return result;
    });
  }

  absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& ctx, const ConversationKey& key,
                                                int64_t version,
                                                int64_t compaction_version) override {
    return Run<ContextSnapshot>(ctx, "load context at a version",
                                [&](pqxx::transaction_base& tx) -> absl::StatusOr<ContextSnapshot> {
      pqxx::result found = ExecNamed(tx, "get_conversation", key);
      if (found.empty()) return NotFound(key);
      const ConversationRow row = ParseConversation(found[0]);
      if (version < 0 || version > row.conversation.version) {
        return absl::OutOfRangeError(absl::StrCat("version: conversation '", key.conversation_id,
                                                  "' is at version ", row.conversation.version));
      }
      pqxx::result state_row =
          Exec(tx, "view_state_at", row.conv_key, version, compaction_version);
      if (state_row.empty()) {
        return absl::OutOfRangeError(absl::StrCat(
            "no view state recorded for conversation '", key.conversation_id, "' at version ",
            version, compaction_version >= 0 ? absl::StrCat(", compaction_version ",
                                                            compaction_version)
                                             : ""));
      }
      ViewState state = ViewStateFromJson(state_row[0][2].as<std::string>());
      state.compaction_version = state_row[0][0].as<int64_t>();
      state.version = state_row[0][1].as<int64_t>();
      std::vector<SummaryChunk> chunks;
      for (const auto& r : Exec(tx, "chunks_by_id", row.conv_key, IdArray(state.chunk_ids))) {
        chunks.push_back(ParseChunk(r));
      }
      std::vector<int64_t> pinned_later;
      for (const auto& [sequence, pinned] : state.pins) {
        if (pinned) pinned_later.push_back(sequence);
      }
      std::vector<Item> items = ParseItems(Exec(tx, "items_at", row.conv_key, version,
                                                state.summarized_through, IdArray(pinned_later)));
      return SnapshotAt(row.conversation, state, version, std::move(chunks), std::move(items));
    });
  }

  absl::StatusOr<Conversation> UpdateConversation(const CallContext& ctx,
                                                 const ConversationKey& key,
                                                 const ConversationUpdate& u) override {
    return Run<Conversation>(ctx, "update conversation",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
      pqxx::result locked =
          ExecNamed(tx, "lock_conversation", key);
      if (locked.empty()) return NotFound(key);
      const ConversationRow row = ParseConversation(locked[0]);
      const Conversation& c = row.conversation;
      RETURN_IF_ERROR(CheckUpdate(c, u));
      const std::string& prompt = u.system_prompt.value_or(c.system_prompt);
      const std::string& pinned = u.pinned_instructions.value_or(c.pinned_instructions);
      Exec(tx, "update_conversation", row.conv_key, u.model.value_or(c.model), prompt, pinned,
           OverridesToJson(u.overrides.value_or(c.overrides)), u.system_prompt_tokens,
           u.pinned_instructions_tokens, u.count_encoding, u.reset_overflow,
           StoredBytes(prompt, pinned, c.metadata, u.overrides.value_or(c.overrides)) -
               StoredBytes(c.system_prompt, c.pinned_instructions, c.metadata, c.overrides));
      Exec(tx, "record_view_state", row.conv_key);
      InsertEvents(tx, row.conv_key, {u.event});
      ConversationRow updated = ParseConversation(
          ExecNamed(tx, "get_conversation", key)[0]);
      tx.commit();
      return updated.conversation;
    });
  }

  absl::Status SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                               const TokenRecount& recount) override {
    return Run<bool>(ctx, "save token counts",
                     [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
      ASSIGN_OR_RETURN(const int64_t conv_key, ConvKeyOf(tx, key));
      for (const auto& [sequence, count] : recount.items) {
        Exec(tx, "set_item_tokens", conv_key, sequence, count, recount.count_encoding);
      }
      for (const SummaryChunk& chunk : recount.chunks) {
        Exec(tx, "set_chunk_tokens", conv_key, chunk.chunk_id, chunk.token_count,
             StructureToJson(chunk));
      }
      Exec(tx, "set_count_encoding", conv_key, recount.count_encoding);
      tx.commit();
      return true;
    }).status();
  }

  absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     double correction, int64_t prompt_limit,
                                                     const CompactionEvent& event) override {
    return Run<Conversation>(ctx, "record provider overflow",
                             [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
      pqxx::result locked =
          ExecNamed(tx, "lock_conversation", key);
      if (locked.empty()) return NotFound(key);
      const int64_t conv_key = ParseConversation(locked[0]).conv_key;
      Exec(tx, "record_overflow", conv_key, correction, prompt_limit);
      Exec(tx, "record_view_state", conv_key);
      InsertEvents(tx, conv_key, {event});
      ConversationRow row = ParseConversation(
          ExecNamed(tx, "get_conversation", key)[0]);
      tx.commit();
      return row.conversation;
    });
  }

  absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             int64_t after_event_id,
                                                             const PageLimit& limit) override {
    return Run<Page<CompactionEvent>>(
        ctx, "list compaction events",
        [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<CompactionEvent>> {
          ASSIGN_OR_RETURN(const int64_t conv_key, ConvKeyOf(tx, key));
          return PageOf<CompactionEvent>(
              Exec(tx, "list_events", conv_key, after_event_id, limit.rows + 1, limit.bytes),
              limit, [](const pqxx::row& r) {
                CompactionEvent e;
                e.event_id = r[0].as<int64_t>();
                e.event = r[1].as<std::string>();
                e.tier = r[2].as<std::string>();
                e.tokens_before = r[3].as<int64_t>();
                e.tokens_after = r[4].as<int64_t>();
                e.detail = r[5].as<std::string>();
                e.create_time = absl::FromUnixMicros(r[6].as<int64_t>());
                return e;
              });
        });
  }

 private:
  // Runs the statement `name`: prepared on the connection, or, behind a
  // pooler, sent with its text as an unnamed statement (a pooler in
  // transaction mode hands each transaction any server connection, where a
  // statement prepared on another does not exist).
  template <typename... Args>
  pqxx::result Exec(pqxx::transaction_base& tx, const char* name, Args&&... args) {
    if (!options_.pooler) return tx.exec_prepared(name, std::forward<Args>(args)...);
    return tx.exec_params(SqlOf(name), std::forward<Args>(args)...);
  }

  // Exec of a statement about one conversation (Named): $1 its tenant, $2
  // its id, then `args`, and last its distribution key.
  template <typename... Args>
  pqxx::result ExecNamed(pqxx::transaction_base& tx, const char* name, const ConversationKey& key,
                         Args&&... args) {
    return Exec(tx, name, key.tenant_id, key.conversation_id, std::forward<Args>(args)...,
                DistributionKey(key));
  }

  // Exec of a statement that yields exactly one row.
  template <typename... Args>
  pqxx::row Exec1(pqxx::transaction_base& tx, const char* name, Args&&... args) {
    pqxx::result r = Exec(tx, name, std::forward<Args>(args)...);
    if (r.size() != 1) {
      throw pqxx::unexpected_rows(
          absl::StrCat("expected 1 row from ", name, ", got ", r.size()));
    }
    return r[0];
  }

  static bool Limited(const TenantLimits& limits) {
    return limits.max_stored_bytes > 0 || limits.max_conversations > 0;
  }

  // Locks the tenant's usage row until the transaction ends and returns
  // what it holds, counted again from the conversations when the row is new
  // or a minute old (which takes in what compactions added meanwhile).
  absl::StatusOr<TenantUsage> LockTenant(pqxx::transaction_base& tx,
                                         const std::string& tenant_id) {
    const pqxx::row row = Exec1(tx, "lock_tenant", tenant_id);
    if (!row[2].as<bool>()) return TenantUsage{row[1].as<int64_t>(), row[0].as<int64_t>()};
    const pqxx::row counted = Exec1(tx, "recount_tenant", tenant_id);
    return TenantUsage{counted[1].as<int64_t>(), counted[0].as<int64_t>()};
  }

  // The conversation's internal key; NOT_FOUND if the tenant has no such
  // conversation.
  absl::StatusOr<int64_t> ConvKeyOf(pqxx::transaction_base& tx, const ConversationKey& key) {
    pqxx::result r = ExecNamed(tx, "conv_key", key);
    if (r.empty()) return NotFound(key);
    return r[0][0].as<int64_t>();
  }

  void InsertEvents(pqxx::transaction_base& tx, int64_t conv_key,
                           const std::vector<CompactionEvent>& events) {
    if (events.empty()) return;
    const EventArrays a(events);
    Exec(tx, "insert_events", conv_key, a.names, a.tiers, a.before, a.after, a.details);
  }

  // Runs `fn` in a transaction of type `Tx` (pqxx::nontransaction for a
  // statement on its own) on a pooled connection, bounded by the call's
  // deadline inside the database (CancelWatchdog), and maps exceptions to
  // statuses. A connection found broken before anything was committed is
  // replaced and the call tried once more: that is what lets the storage
  // ride through a database restart. A write sent as a statement on its
  // own (`sent_alone`) commits as it runs, so a connection that breaks
  // under it leaves it in doubt: it is not sent again, and the caller is
  // told to send it again with its idempotency key. (Connections the
  // server closed while they were idle are not used: ConnectionPool.)
  //
  // Each transaction is a client span (child of the calling thread's span)
  // named by its query summary; no statement text or value goes in it.
  template <typename T, typename Tx = pqxx::work, typename Fn>
  absl::StatusOr<T> Run(const CallContext& ctx, absl::string_view operation, Fn fn,
                        bool sent_alone = false) {
    const DbOperation& op = DbOperationOf(operation);
    telemetry::Span span = telemetry::StartSpan(op.summary, telemetry::SpanKind::kClient);
    if (span.recording()) {
      span.SetAttribute("db.system.name", "postgresql");
      span.SetAttribute("db.operation.name", op.name);
      span.SetAttribute("db.query.summary", op.summary);
    }
    for (int attempt = 0;; ++attempt) {
      RETURN_IF_ERROR(CheckDeadline(ctx));
      ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                       pool_.Acquire(ctx.deadline));
      // Inside the database the call's deadline bounds it, however many
      // statements it runs; a call without one gets the default timeout.
      const int64_t watch = watchdog_.Watch(
          conn.get(), ctx.deadline == absl::InfiniteFuture() ? absl::Now() + options_.default_timeout
                                                             : ctx.deadline);
      absl::StatusOr<T> result = absl::InternalError("unreachable");
      bool retry = false;
      try {
        Tx tx(*conn);
        result = fn(tx);
      } catch (const pqxx::in_doubt_error& e) {
        result = pg::ExceptionToStatus(e, operation);
      } catch (const pqxx::broken_connection& e) {
        retry = attempt == 0 && !sent_alone;
        result = sent_alone ? pg::InDoubt(operation, e.what()) : pg::ExceptionToStatus(e, operation);
      } catch (const pqxx::sql_error& e) {
        span.SetAttribute("db.response.status_code", e.sqlstate());
        result = pg::ExceptionToStatus(e, operation);
      } catch (const std::exception& e) {
        result = pg::ExceptionToStatus(e, operation);
      }
      // A connection a cancel was sent on is closed, not reused: a cancel
      // that arrived late must not reach the next call's statement.
      if (watchdog_.Unwatch(watch)) conn.reset();
      pool_.Release(std::move(conn));
      if (retry) {
        span.AddEvent("retry on a new connection");
        continue;
      }
      if (!result.ok()) {
        span.SetAttribute("error.type", absl::StatusCodeToString(result.status().code()));
        // A conversation that is not there is an answer, not a failure.
        if (!absl::IsNotFound(result.status()) && !absl::IsAlreadyExists(result.status()) &&
            !absl::IsFailedPrecondition(result.status())) {
          span.SetError(result.status().message());
        }
      }
      return result;
    }
  }

  // How long one conversation's indexing may take.
  static constexpr absl::Duration kWordIndexTimeout = absl::Seconds(10);

  const PostgresOptions options_;
  // Before the pool: destroyed after it, once no connection is in use.
  pg::CancelWatchdog watchdog_;
  ConnectionPool pool_;
  // The conversations whose words are due to be indexed, and through
  // which sequence (QueueWordIndexing).
  absl::Mutex words_mu_;
  absl::flat_hash_map<int64_t, int64_t> words_due_ ABSL_GUARDED_BY(words_mu_);
  bool words_stopping_ ABSL_GUARDED_BY(words_mu_) = false;
  // After the pool: destroyed first, so its thread ends while the pool is
  // still there. One thread at low priority: work nothing waits for.
  ThreadPool word_indexer_{1, 4096, "word index", /*niceness=*/10};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Storage>> NewPostgresStorage(const PostgresOptions& options) {
  if (options.database_url.empty()) {
    return absl::InvalidArgumentError("database_url: required for PostgreSQL storage");
  }
  auto storage = std::make_unique<PostgresStorage>(options);
  RETURN_IF_ERROR(Annotate(storage->Ping(), "connecting to PostgreSQL"));
  return storage;
}

}  // namespace convstate
