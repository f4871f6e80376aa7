#include "storage/postgres_sql.h"

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "storage/contract.h"
#include "storage/postgres_statements.h"

namespace convstate::pg {

const std::string& ConversationColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kConversationColumnList, ", "));
  return *kColumns;
}

const std::string& ItemColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kItemColumnList, ", "));
  return *kColumns;
}
// The items the conversation `reader` (an SQL expression of its conv_key)
// reads: its own rows and those of its sources that its item_segments name
// (migrations/0025), with the items' columns; a row's conv_key is its
// owner's. Each row has one column more, seen_version: the version at
// which the reader has the item (a fork inside an append has that append's
// items through the fork point at the version before it, the fork's
// first). `where` (over the row `x`), when given, is applied in both
// parts: a condition naming an outer query's columns must be given here
// (or the subquery be LATERAL with a WHERE of its own), as PostgreSQL does
// not push a join's condition into a union. A source's items are read by
// their key, segment by segment, in a LATERAL subquery its ORDER BY keeps
// from being merged into a join: a conversation without segments reads no
// other partition (or Citus shard), and one with them only its sources'.
// With `limit` (an expression), each part reads at most that many rows,
// the first by sequence of those `where` leaves: a page of a long history
// reads a page's rows, not the whole history sorted (a condition PostgreSQL
// cannot push below the limit must be in `where`).
std::string ItemsOf(ForkLayout layout, absl::string_view reader, absl::string_view where,
                    absl::string_view limit) {
  const std::string also = where.empty() ? "" : absl::StrCat(" AND (", where, ")");
  const std::string first =
      limit.empty() ? "" : absl::StrCat(" ORDER BY x.sequence LIMIT ", limit);
  const std::string own = absl::StrCat(
      "SELECT x.*, x.appended_version AS seen_version FROM items x WHERE x.conv_key = ", reader,
      also, first);
  if (layout == ForkLayout::kCopied) {
    // A fork holds copies: a conversation reads its own rows only.
    return absl::StrCat("(", own, ")");
  }
  return absl::StrCat(
      "((", own, ") UNION ALL SELECT y.* FROM item_segments g CROSS JOIN LATERAL (SELECT x.*, "
      "least(coalesce(x.appended_version, 0), g.version_cap) AS seen_version FROM items x "
      "WHERE x.conv_key = g.owner_key AND x.sequence BETWEEN g.from_sequence "
      "AND g.through_sequence", also, " ORDER BY x.sequence", limit.empty() ? "" : " LIMIT ",
      limit, ") y WHERE g.conv_key = ", reader, ")");
}

// A copy of the items `from` (a FROM clause and WHERE over the items'
// rows, aliased `i`) under the conversation `to` (an SQL expression of its
// conv_key), their words indexed under its key (a lexeme is
// "<conv_key>#<word>"): what a rewind's abandoned fork takes of the items
// that leave, and what a deleted owner's heir takes of the items it shares.
// Each copy's appended_version is `appended_version` (over `i`). The
// inserted rows are `i` to a RETURNING clause after it.
std::string CopyItemsSql(absl::string_view to, absl::string_view from,
                         absl::string_view appended_version) {
  return absl::StrCat(
      "INSERT INTO items AS i (conv_key, sequence, turn_index, role, kind, content, tool_name, "
      "tool_call_id, pinned, metadata, token_count, summary_chunk_id, created_at, "
      "appended_version, redacted_digest, search) "
      "SELECT ", to, ", i.sequence, i.turn_index, i.role, i.kind, i.content, i.tool_name, "
      "i.tool_call_id, i.pinned, i.metadata, i.token_count, i.summary_chunk_id, i.created_at, ",
      appended_version, ", i.redacted_digest, ", Rekeyed(to, "i.search"), " ", from);
}

// The lexemes of `search` (a tsvector expression) under the conversation
// `to` (an expression of its conv_key); NULL for NULL.
std::string Rekeyed(absl::string_view to, absl::string_view search) {
  return absl::StrCat("(SELECT array_to_tsvector(array_agg((", to,
                      ")::text || substr(u.lexeme, strpos(u.lexeme, '#')))) FROM unnest(", search,
                      ") u)");
}

// `encoding` names the parameter holding the conversation's count_encoding.
// Items are joined with item_token_counts only in the statements for
// conversations that were recounted (the "_recounted" variants); the
// others read the items' own counts and take the same parameter unused.
// The items are those `reader` reads (ItemsOf), its pins and counts its
// own.
std::string ItemsWithPins(ForkLayout layout, absl::string_view reader, const char* encoding,
                          bool recounted, absl::string_view where, absl::string_view limit) {
  if (!recounted) {
    return absl::StrCat(
        " FROM ", ItemsOf(layout, reader, where, limit), " i LEFT JOIN item_pins p ON p.conv_key = ", reader,
        " AND p.sequence = i.sequence "
        "CROSS JOIN (SELECT NULL::bigint AS token_count, ", encoding, "::text AS encoding) tc ");
  }
  return absl::StrCat(
      " FROM ", ItemsOf(layout, reader, where, limit), " i LEFT JOIN item_pins p ON p.conv_key = ",
      reader, " AND p.sequence = i.sequence "
      "LEFT JOIN item_token_counts tc ON tc.conv_key = ", reader,
      " AND tc.sequence = i.sequence AND tc.encoding = ", encoding, " ");
}

const std::string& ChunkColumns() {
  static const auto* const kColumns = new std::string(absl::StrJoin(kChunkColumnList, ", "));
  return *kColumns;
}

namespace {

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

}  // namespace

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

// Everything a view needs ($1 tenant, $2 conversation id, $3 its
// distribution key): the row, the
// active chunks, the pinned items behind the marker and the items after it.
std::string LoadContextSql(ForkLayout layout) {
  constexpr absl::string_view kReader = "(SELECT conv_key FROM c)";
  const std::string items_from = absl::StrCat(
      " FROM ", ItemsOf(layout, kReader), " i LEFT JOIN item_pins p ON p.conv_key = ", kReader,
      " AND p.sequence = i.sequence "
      "LEFT JOIN item_token_counts tc ON tc.conv_key = ", kReader, " AND tc.sequence = i.sequence "
      "AND tc.encoding = (SELECT count_encoding FROM c WHERE recounted) WHERE true ");
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
      "SELECT sequence FROM ", ItemsOf(layout, kReader, "x.pinned"), " pinned_items "
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
    if (column == "coalesce(i.seen_version, 0)") column = "coalesce(i.appended_version, 0)";
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

namespace {

// TermWeight (storage/contract.h) in SQL, of `df` items of `conv.item_count`.
constexpr char kTermWeight[] = "ln(1 + (conv.item_count - df + 0.5) / (df + 0.5))";

// The largest sequence: no bound.
constexpr absl::string_view kNoBound = "9223372036854775807";

// A search's `conv` row, of the conversation whose key is $`key`: `upto`,
// the last sequence searched when $`compacted_only` (what a compaction
// took out of the view), else NULL.
std::string SearchedUptoSql(int compacted_only, int key) {
  return absl::StrCat("conv AS (SELECT CASE WHEN $", compacted_only,
                      " THEN greatest(summarized_through, prune_boundary) END AS upto "
                      "FROM conversations WHERE ", Named(key), ")");
}

// What ItemColumns reads beside an item `i` of the conversation whose key
// is $`key`: its pin, and no token count of a view's.
std::string ItemRowJoinsSql(int key) {
  return absl::StrCat("LEFT JOIN item_pins p ON p.conv_key = $", key,
                      " AND p.sequence = i.sequence "
                      "CROSS JOIN (SELECT NULL::bigint AS token_count) tc");
}

}  // namespace

// SearchHistory in one statement. $3 the terms, $4 the most items a term
// may be held by (0: MaxDocumentFrequency's default), $5 the most
// candidates, $6 whether only what a compaction took out of the view is
// searched, $7 the terms known to be too common (not counted), $8 and $9
// each term's question word and whether it stands in for it
// (HistorySearch::word_of, stand_in), $10 the conversation's key. The words of the items at or before
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
// turn; a turn scores the weights of the distinct terms its items hold,
// each word counted once (HistorySearch::word_of); of
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
std::string SearchHistorySql(ForkLayout layout) {
  // The items of the tail that hold the lexeme `q` of `term` (a source's
  // item, shared: its lexeme under its owner's key).
  auto tail = [&](absl::string_view q, absl::string_view term) {
    return absl::StrCat(
        "FROM ", ItemsOf(layout, "$10", absl::StrCat(
        "x.sequence > (SELECT indexed FROM conv) "
        "AND x.sequence <= (SELECT coalesce(upto, ", kNoBound, ") FROM conv) "
        "AND x.kind <> 'summary_marker' AND x.redacted_digest IS NULL AND x.search @@ "
        "CASE WHEN x.conv_key = $10 THEN ", q, " ELSE quote_literal(x.conv_key::text || '#' || ",
        term, ")::tsquery END")), " i");
  };
  auto indexed = [&](absl::string_view q) {
    return absl::StrCat("FROM item_words w WHERE w.search @@ ", q,
                        " AND w.sequence <= (SELECT least(indexed, coalesce(upto, ", kNoBound,
                        ")) FROM conv)");
  };
  return absl::StrCat(
      "WITH conv AS (SELECT item_count, words_indexed_through AS indexed, "
      "CASE WHEN $6 THEN greatest(summarized_through, prune_boundary) END AS upto, "
      "CASE WHEN $4 > 0 THEN $4::bigint ELSE greatest(20, least(item_count / 5, 400)) END AS cap "
      "FROM conversations WHERE ", Named(10), "), ",
      // A term without a word of its own is one (numbered as MemoryStorage
      // numbers it); of a term given twice, its first place counts.
      "lexemes AS (SELECT DISTINCT ON (t.term) t.term, coalesce(t.word, -t.n) AS word, "
      "t.word IS NOT NULL AND coalesce(t.stand_in, false) AS stand_in, "
      "quote_literal($10::text || '#' || t.term)::tsquery AS q "
      "FROM unnest($3::text[], $8::bigint[], $9::boolean[]) WITH ORDINALITY "
      "t(term, word, stand_in, n) WHERE t.term IS NOT NULL AND EXISTS (SELECT 1 FROM conv) "
      "ORDER BY t.term, t.n), ",
      // The indexed items' counts are kept (word_counts); the tail's, when
      // it is searched, counted.
      "terms AS (SELECT l.term, l.q, l.word, l.stand_in, CASE WHEN l.term = ANY($7::text[]) "
      "THEN (SELECT cap FROM conv) + 1 ELSE least((SELECT cap FROM conv) + 1, "
      "coalesce((SELECT k.items FROM word_counts k WHERE k.conv_key = $10 AND k.word = l.term), 0)"
      " + CASE WHEN (SELECT indexed FROM conv) >= (SELECT coalesce(upto, ", kNoBound,
      ") FROM conv) THEN 0 ELSE (SELECT count(*) FROM (SELECT 1 ", tail("l.q", "l.term"),
      " LIMIT (SELECT cap FROM conv) + 1) x) END) END AS df "
      "FROM lexemes l), ",
      "searched AS (SELECT terms.term, terms.q, terms.word, terms.stand_in, ",
      kTermWeight, " AS weight "
      "FROM terms, conv WHERE df BETWEEN 1 AND conv.cap), ",
      "hits AS (SELECT m.sequence, round(sum(m.weight)::numeric, 6) AS score, "
      "array_agg(m.term) AS terms FROM ("
      "SELECT w.sequence, s.term, s.weight FROM searched s, LATERAL (SELECT w.sequence ",
      indexed("s.q"), ") w UNION ALL SELECT i.sequence, s.term, s.weight FROM searched s, "
      "LATERAL (SELECT i.sequence ", tail("s.q", "s.term"), ") i) m GROUP BY m.sequence), ",
      "hit_items AS (SELECT h.sequence, h.score, h.terms, i.turn_index FROM hits h "
      "CROSS JOIN LATERAL (SELECT i.turn_index FROM ", ItemsOf(layout, "$10"),
      " i WHERE i.sequence = h.sequence) i), ",
      "turn_terms AS (SELECT DISTINCT turn_index, unnest(terms) AS term FROM hit_items), ",
      // Per turn and word: its own terms' weights added, its best
      // stand-in's; the word adds the larger and a share of the smaller.
      "turn_words AS (SELECT t.turn_index, s.word, "
      "coalesce(sum(s.weight) FILTER (WHERE NOT s.stand_in), 0) AS own, "
      "coalesce(max(s.weight) FILTER (WHERE s.stand_in), 0) AS stand_in "
      "FROM turn_terms t JOIN searched s ON s.term = t.term GROUP BY t.turn_index, s.word), ",
      "turns AS (SELECT w.turn_index, round(sum(greatest(w.own, w.stand_in) + ",
      kLesserReading, " * least(w.own, w.stand_in))::numeric, 6) AS score, "
      "(SELECT array_agg(x.term) FROM turn_terms x WHERE x.turn_index = w.turn_index) AS terms, "
      "(SELECT min(x.sequence) FROM hit_items x WHERE x.turn_index = w.turn_index) AS lo, "
      "(SELECT max(x.sequence) FROM hit_items x WHERE x.turn_index = w.turn_index) AS hi "
      "FROM turn_words w GROUP BY w.turn_index "
      "ORDER BY score DESC, w.turn_index DESC LIMIT $5), ",
      "turn_items AS (SELECT h.sequence, h.score AS own, t.turn_index, 0 AS extra "
      "FROM turns t JOIN hit_items h ON h.turn_index = t.turn_index "
      "UNION ALL SELECT r.sequence, 0, t.turn_index, 1 FROM turns t, "
      "LATERAL (SELECT r.sequence FROM ", ItemsOf(layout, "$10"), " r "
      "WHERE r.sequence BETWEEN t.lo - ", kExchangeReach, " AND t.hi + ", kExchangeReach,
      " AND r.sequence <= (SELECT coalesce(upto, ", kNoBound, ") FROM conv) "
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
      "FROM turn_items ti CROSS JOIN LATERAL (SELECT w.search, $10::bigint AS k FROM item_words w "
      "WHERE w.conv_key = $10 AND w.sequence = ti.sequence "
      "AND w.sequence <= (SELECT indexed FROM conv) "
      "UNION ALL SELECT y.search, y.conv_key FROM ", ItemsOf(layout, "$10"), " y "
      "WHERE y.sequence = ti.sequence "
      "AND y.sequence > (SELECT indexed FROM conv) AND y.search IS NOT NULL) v "
      "CROSS JOIN LATERAL unnest(v.search) u "
      "JOIN common c ON u.lexeme = v.k::text || '#' || c.term "
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
      "(SELECT left(k.content, ", kMaxCallChars, ") FROM ", ItemsOf(layout, "$10"),
      " k WHERE i.kind = 'tool_result' AND k.sequence BETWEEN i.sequence - ", kExchangeReach,
      " AND i.sequence - 1 AND k.kind = 'tool_call' AND k.tool_call_id = i.tool_call_id "
      "AND k.redacted_digest IS NULL ORDER BY k.sequence DESC LIMIT 1), ",
      ItemColumns(),
      " FROM (SELECT 1) one LEFT JOIN (candidates c CROSS JOIN LATERAL (SELECT * FROM ",
      ItemsOf(layout, "$10"), " y WHERE y.sequence = c.sequence) i "
      "LEFT JOIN item_pins p ON p.conv_key = $10 AND p.sequence = i.sequence "
      "CROSS JOIN (SELECT NULL::bigint AS token_count) tc) ON true "
      "ORDER BY c.ord");
}

// HistorySearch::replies: $3 the user messages found (sequences, best
// first), $4 whether only what a compaction took out of the view is
// searched, $5 the conversation's key. Rows: for each of them that has
// one, in their order, the message's sequence and its reply's item: the
// first assistant message after it in its turn, within kExchangeReach,
// not erased.
std::string SearchRepliesSql(ForkLayout layout) {
  return absl::StrCat(
      "WITH ", SearchedUptoSql(4, 5), ", ",
      "asked AS (SELECT a.seq, a.n, q.turn_index FROM unnest($3::bigint[]) WITH ORDINALITY "
      "a(seq, n) CROSS JOIN LATERAL (SELECT y.turn_index FROM ", ItemsOf(layout, "$5"),
      " y WHERE y.sequence = a.seq) q WHERE EXISTS (SELECT 1 FROM conv)) ",
      "SELECT a.seq, ", ItemColumns(), " FROM asked a CROSS JOIN LATERAL (SELECT * FROM ",
      ItemsOf(layout, "$5"), " r WHERE r.sequence > a.seq AND r.sequence <= a.seq + ",
      kExchangeReach, " AND r.sequence <= (SELECT coalesce(upto, ", kNoBound, ") FROM conv) "
      "AND r.turn_index = a.turn_index AND r.kind = 'message' AND r.role = 'assistant' "
      "AND r.redacted_digest IS NULL ORDER BY r.sequence LIMIT 1) i ", ItemRowJoinsSql(5),
      " ORDER BY a.n");
}

// HistorySearch::opening: $3 whether only what a compaction took out of
// the view is searched, $4 the conversation's key. Rows: the first
// kOpeningMessages user messages among its first kExchangeReach items,
// not erased, in order.
std::string SearchOpeningSql(ForkLayout layout) {
  return absl::StrCat(
      "WITH ", SearchedUptoSql(3, 4), " ",
      "SELECT ", ItemColumns(), " FROM (SELECT * FROM ", ItemsOf(layout, "$4"),
      " o WHERE EXISTS (SELECT 1 FROM conv) AND o.sequence <= ", kExchangeReach,
      " AND o.sequence <= (SELECT coalesce(upto, ", kNoBound, ") FROM conv) "
      "AND o.kind = 'message' AND o.role = 'user' AND o.redacted_digest IS NULL "
      "ORDER BY o.sequence LIMIT ", kOpeningMessages, ") i ", ItemRowJoinsSql(4),
      " ORDER BY i.sequence");
}

}  // namespace convstate::pg
