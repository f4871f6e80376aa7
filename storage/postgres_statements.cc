#include "storage/postgres_statements.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "storage/postgres_sql.h"

namespace convstate::pg {
namespace {

// The id the next summary chunk of a conversation row gets.
constexpr char kNextChunkId[] =
    "(SELECT coalesce(max(s.chunk_id), 0) + 1 FROM summary_chunks s "
    "WHERE s.conv_key = conversations.conv_key)";

// What an item, a conversation, a chunk and an audit row weigh against a
// page's budget (as PageBytes counts them).
constexpr char kItemBytes[] =
    "octet_length(i.content) + octet_length(i.tool_name) + octet_length(i.tool_call_id) + "
    "octet_length(i.metadata::text) - 2";
constexpr char kConversationBytes[] =
    "octet_length(system_prompt) + octet_length(pinned_instructions) + "
    "octet_length(metadata::text) - 2 + octet_length(profile_overrides::text) - 2";
constexpr char kChunkBytes[] = "octet_length(text) + octet_length(structure::text)";

// What an item `i` adds to its conversation's stored_bytes (as StoredBytes
// counts it), and what a conversation counts against its tenant's quota
// (its copies of its source's items counted to the source: 0024).
constexpr char kItemStoredBytes[] =
    "octet_length(i.content) + octet_length(i.tool_name) + octet_length(i.tool_call_id) + 64 + "
    "CASE WHEN i.metadata = '{}' THEN 0 ELSE (SELECT coalesce(sum(octet_length(m.key) + "
    "octet_length(m.value)), 0) FROM jsonb_each_text(i.metadata) m) END";
constexpr char kChargedBytes[] = "greatest(0, stored_bytes - shared_bytes)";
constexpr char kEventBytes[] = "octet_length(detail::text)";

}  // namespace

namespace {

// Every prepared statement, by name, for forks laid out as `layout`.
// Data table.
std::vector<Statement> BuildStatements(ForkLayout layout) {
  return {
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
       absl::StrCat("SELECT count(*), coalesce(sum(", kChargedBytes,
                    "), 0)::bigint FROM conversations WHERE tenant_id = $1")},
      // $3 rows, $4 bytes.
      // A tenant's usage row, locked (created first if absent), with whether
      // it is due a recount.
      {"lock_tenant",
       "INSERT INTO tenant_usage (tenant_id, stored_bytes, conversations, counted_at) "
       "VALUES ($1, 0, 0, '-infinity') ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = "
       "excluded.tenant_id RETURNING stored_bytes, conversations, "
       "counted_at < now() - interval '1 minute'"},
      {"recount_tenant",
       absl::StrCat("UPDATE tenant_usage SET stored_bytes = (SELECT coalesce(sum(",
                    kChargedBytes, "), 0) "
       "FROM conversations WHERE tenant_id = $1), conversations = (SELECT count(*) "
       "FROM conversations WHERE tenant_id = $1), counted_at = now() WHERE tenant_id = $1 "
       "RETURNING stored_bytes, conversations")},
      {"add_to_tenant",
       "UPDATE tenant_usage SET stored_bytes = stored_bytes + $2, "
       "conversations = conversations + $3 WHERE tenant_id = $1"},
      {"list_conversations",
       PagedSelect(Columns(kConversationColumnList),
                   "FROM conversations WHERE tenant_id = $1 AND conversation_id > $2",
                   "conversation_id", kConversationBytes, 3, 4)},
      // Forks (postgres_forks.cc). The source is $1 (its conv_key) and the
      // fork $2 in the copies; the last shared sequence $3.
      // The source's row, held while the fork is copied from it (an erasure
      // of it waits, then reaches the fork).
      {"lock_fork_source",
       absl::StrCat("SELECT ", ConversationColumns(), " FROM conversations WHERE ", Named(3),
                    " FOR SHARE")},
      // The tool calls and results of the turn of item $2.
      {"fork_turn",
       absl::StrCat("SELECT i.sequence, i.kind, i.tool_call_id FROM ", ItemsOf(layout, "$1"), " i "
                    "WHERE i.turn_index = (SELECT t.turn_index FROM ",
                    ItemsOf(layout, "$1", "x.sequence = $2"), " t) "
                    "AND i.kind IN ('tool_call', 'tool_result')")},
      // The version of the append that wrote item $2, and that of the next
      // item that is not a summary marker (-1 if none; an append's items
      // are contiguous).
      {"fork_version",
       absl::StrCat("SELECT coalesce(a.seen_version, 0), coalesce((SELECT "
                    "coalesce(n.seen_version, 0) FROM ",
                    ItemsOf(layout, "$1", "x.sequence > $2 AND x.kind <> 'summary_marker'", "1"),
                    " n ORDER BY n.sequence LIMIT 1), -1) FROM ",
                    ItemsOf(layout, "$1", "x.sequence = $2"), " a")},
      // The last chunk id the view states the fork keeps name (at versions
      // up to $2 and compaction versions up to $3).
      {"fork_last_chunk",
       "SELECT coalesce(max(x::bigint), 0) FROM view_states v, "
       "jsonb_array_elements_text(v.state -> 'chunks') x "
       "WHERE v.conv_key = $1 AND v.version <= $2 AND v.compaction_version <= $3"},
      {"fork_chunk_links",
       "SELECT chunk_id, coalesce(superseded_by, 0), summarizer_model, through_sequence "
       "FROM summary_chunks WHERE conv_key = $1 AND chunk_id <= $2 ORDER BY chunk_id"},
      // The fork's row ($1 tenant, $2 id, $19 its key) from the source's
      // ($3), shared through $4: model $5, prompts $6 and $7, metadata $8
      // (when $18, else the source's), overrides $9, version $10, then the
      // state's summarized_through, token correction, prune boundary,
      // compaction version, overflow correction and prompt limit ($11 to
      // $16), and the bytes its prompts and metadata store ($17; its
      // items' bytes and tokens are added by fork_share). Its word index is
      // built after the fork, by the background indexer (as a compaction's
      // is).
      {"fork_conversation",
       absl::StrCat(
           "INSERT INTO conversations (tenant_id, conversation_id, conv_key, model, "
           "system_prompt, pinned_instructions, metadata, profile_overrides, version, "
           "item_count, last_sequence, last_turn_index, summarized_through, "
           "system_prompt_tokens, pinned_instructions_tokens, item_tokens, token_correction, "
           "prune_boundary, compaction_version, overflow_correction, prompt_limit, "
           "continued_from, count_encoding, recounted, stored_bytes, words_indexed_through, "
           "continued_from_incarnation, forked_from, forked_from_incarnation, forked_at) "
           "SELECT $1, $2, $19, $5, $6, $7, CASE WHEN $18 THEN $8::jsonb ELSE s.metadata END, "
           "$9::jsonb, $10, $4, $4, coalesce((SELECT t.turn_index FROM ",
           ItemsOf(layout, "$3::bigint", "x.sequence = $4"), " t), 0), $11, s.system_prompt_tokens, "
           "s.pinned_instructions_tokens, 0, $12, $13, $14, $15, $16, "
           "s.continued_from, s.count_encoding, s.recounted, $17, "
           "0, "
           "s.continued_from_incarnation, s.conversation_id, s.incarnation, $4 "
           "FROM conversations s WHERE s.conv_key = $3 RETURNING ",
           ConversationColumns())},
      // The items the fork ($2) shares with its source ($1) through $3, at
      // the fork's version at the latest ($4): the source's segments
      // clipped to the point, then the source's own items (which follow
      // its last segment: migrations/0025). What they store (StoredBytes
      // of their data) is added to the fork's row as shared (0024) and
      // answered, and their tokens are its items' tokens. Nothing of the
      // items is copied.
      {"fork_share",
       absl::StrCat(
           "WITH own AS (SELECT coalesce(max(through_sequence), 0) + 1 AS first "
           "FROM item_segments WHERE conv_key = $1), "
           "segments AS (INSERT INTO item_segments (conv_key, from_sequence, through_sequence, "
           "owner_key, version_cap) SELECT $2::bigint, g.from_sequence, "
           "least(g.through_sequence, $3::bigint), g.owner_key, least(g.version_cap, $4::bigint) "
           "FROM item_segments g WHERE g.conv_key = $1 AND g.from_sequence <= $3 "
           "UNION ALL SELECT $2::bigint, own.first, $3::bigint, $1::bigint, $4::bigint FROM own "
           "WHERE own.first <= $3), "
           "total AS (SELECT coalesce(sum(", kItemStoredBytes, "), 0)::bigint AS n, "
           "coalesce(sum(i.token_count), 0)::bigint AS tokens FROM ",
           ItemsOf(layout, "$1::bigint", "x.sequence <= $3"), " i), "
           "counted AS (UPDATE conversations SET stored_bytes = stored_bytes + (SELECT n FROM total), "
           "shared_bytes = (SELECT n FROM total), item_tokens = (SELECT tokens FROM total) "
           "WHERE conv_key = $2) "
           "SELECT n FROM total")},
      // In the copied layout: the items through $3, and what they store
      // (StoredBytes of their data) and their tokens added to the fork's
      // row and answered; none appended after the fork's version ($4: a
      // fork inside an append is at the version before it).
      {"fork_items",
       absl::StrCat("WITH ins AS (", CopyItemsSql("$2::bigint", "FROM items i WHERE i.conv_key = $1 "
                                                              "AND i.sequence <= $3",
                                                 "least(i.appended_version, $4::bigint)"),
                    " RETURNING ", kItemStoredBytes, " AS b, i.token_count AS t), "
                    "total AS (SELECT coalesce(sum(b), 0)::bigint AS n, "
                    "coalesce(sum(t), 0)::bigint AS tokens FROM ins), "
                    // Every copy is at or before the fork point of a living
                    // source: shared (0024).
                    "counted AS (UPDATE conversations SET stored_bytes = stored_bytes + "
                    "(SELECT n FROM total), shared_bytes = (SELECT n FROM total), "
                    "item_tokens = (SELECT tokens FROM total) WHERE conv_key = $2) "
                    "SELECT n FROM total")},
      // The chunks $3 with how each stands in the fork ($4: superseded by,
      // 0 for active).
      {"fork_chunks",
       "INSERT INTO summary_chunks (conv_key, chunk_id, from_sequence, through_sequence, text, "
       "token_count, summarizer_model, prompt_version, tokens_in, tokens_out, latency_ms, "
       "superseded_by, created_at, structure, recall) "
       "SELECT $2, s.chunk_id, s.from_sequence, s.through_sequence, s.text, s.token_count, "
       "s.summarizer_model, s.prompt_version, s.tokens_in, s.tokens_out, s.latency_ms, "
       "nullif(l.sup, 0), s.created_at, s.structure, s.recall FROM summary_chunks s "
       "JOIN unnest($3::bigint[], $4::bigint[]) l(id, sup) ON s.chunk_id = l.id "
       "WHERE s.conv_key = $1"},
      {"fork_view_states",
       "INSERT INTO view_states (conv_key, compaction_version, version, state) "
       "SELECT $2, compaction_version, version, state FROM view_states "
       "WHERE conv_key = $1 AND version <= $3 AND compaction_version <= $4"},
      // The state's pins ($2 sequences, $3 flags) on the fork ($1) through $4.
      {"fork_pins",
       "INSERT INTO item_pins (conv_key, sequence, pinned) "
       "SELECT $1, p.seq, p.pinned FROM unnest($2::bigint[], $3::boolean[]) p(seq, pinned) "
       "WHERE p.seq <= $4"},
      {"fork_token_counts",
       "INSERT INTO item_token_counts (conv_key, sequence, encoding, token_count) "
       "SELECT $2, sequence, encoding, token_count FROM item_token_counts "
       "WHERE conv_key = $1 AND sequence <= $3"},
      {"list_forks",
       PagedSelect(Columns(kConversationColumnList),
                   "FROM conversations WHERE tenant_id = $1 AND forked_from = $2 "
                   "AND forked_from_incarnation = $5 AND conversation_id > $6",
                   "conversation_id", kConversationBytes, 3, 4)},
      // Rewinds (postgres_forks.cc): the conversation is $1 (its conv_key),
      // the sequence it goes back to $2.
      {"rewind_record_of",
       "SELECT request_fingerprint FROM idempotency_keys WHERE conv_key = $1 "
       "AND idempotency_key = $2"},
      {"rewind_record",
       "INSERT INTO idempotency_keys (conv_key, idempotency_key, request_fingerprint, "
       "first_sequence, last_sequence, version) VALUES ($1, $3, $4, $2, $2, $5)"},
      // Forks of the conversation ($3 its id, $4 its incarnation) made past
      // $2 become forks of the abandoned branch ($5 id, $6 incarnation),
      // which is left out ($7 its key); the abandoned branch shares 1..$2.
      {"rewind_reparent",
       "WITH moved AS (UPDATE conversations SET forked_from = $5, forked_from_incarnation = $6 "
       "WHERE tenant_id = $1 AND forked_from = $3 AND forked_from_incarnation = $4 "
       "AND forked_at > $2 AND conv_key <> $7) "
       "UPDATE conversations SET forked_at = $2 WHERE conv_key = $7"},
      // The conversations continued from one ($1 tenant, $2 its id, $3 its
      // incarnation; by id for those continued before incarnations were
      // kept) continued from another ($4 id, $5 incarnation) that holds
      // every item they carried: a rewound conversation's abandoned fork
      // (its next items take the sequences of those that left), a deleted
      // one's heir or source. An erasure there reaches their copies.
      {"move_continuations",
       "UPDATE conversations SET continued_from = $4, continued_from_incarnation = $5 "
       "WHERE tenant_id = $1 AND continued_from = $2 AND continued_from <> '' "
       "AND (continued_from_incarnation IS NULL OR continued_from_incarnation = $3)"},
      // The word counts of the items after $2 go down with them.
      {"rewind_words",
       absl::StrCat("WITH gone AS (SELECT ", kLexemeWord, " AS word, count(*) AS n "
                    "FROM item_words w, unnest(w.search) u WHERE w.conv_key = $1 "
                    "AND w.sequence > $2 GROUP BY 1), "
                    "dropped AS (DELETE FROM word_counts c USING gone g WHERE c.conv_key = $1 "
                    "AND c.word = g.word AND c.items <= g.n) "
                    "UPDATE word_counts c SET items = c.items - g.n FROM gone g "
                    "WHERE c.conv_key = $1 AND c.word = g.word AND c.items > g.n")},
      // What the items the conversation reads after $2 store (its own and
      // those it shares).
      {"rewind_bytes",
       absl::StrCat("SELECT coalesce(sum(", kItemStoredBytes, "), 0)::bigint FROM ",
                    ItemsOf(layout, "$1::bigint", "x.sequence > $2"), " i")},
      // Its own items after $2 go to the abandoned fork ($3), which shares
      // those before; the readers of them read them there
      // (migrations/0025): a segment of them is split at $2 (the abandoned
      // fork's own ends there), and one past $2 names the abandoned fork;
      // the conversation's own segments past $2 go.
      {"rewind_hand_over",
       absl::StrCat(
           "WITH moved AS (", CopyItemsSql("$3::bigint", "FROM items i WHERE i.conv_key = $1 "
                                                        "AND i.sequence > $2"), "), "
           "tails AS (INSERT INTO item_segments (conv_key, from_sequence, through_sequence, "
           "owner_key, version_cap) SELECT g.conv_key, $2 + 1, g.through_sequence, $3, "
           "g.version_cap FROM item_segments g WHERE g.owner_key = $1 AND g.from_sequence <= $2 "
           "AND g.through_sequence > $2 AND g.conv_key <> $3), "
           "clipped AS (UPDATE item_segments g SET through_sequence = $2 WHERE g.owner_key = $1 "
           "AND g.from_sequence <= $2 AND g.through_sequence > $2), "
           "renamed AS (UPDATE item_segments g SET owner_key = $3 WHERE g.owner_key = $1 "
           "AND g.from_sequence > $2 AND g.conv_key <> $3), "
           "taken AS (DELETE FROM item_segments g WHERE g.conv_key = $3 AND g.owner_key = $1 "
           "AND g.from_sequence > $2), "
           "left_out AS (DELETE FROM item_segments g WHERE g.conv_key = $1 "
           "AND g.from_sequence > $2) "
           "UPDATE item_segments g SET through_sequence = $2 WHERE g.conv_key = $1 "
           "AND g.from_sequence <= $2 AND g.through_sequence > $2")},
      // Its own items after $2, and its pins, recounts and words of any
      // item after $2.
      {"rewind_items",
       "WITH d AS (DELETE FROM items i WHERE i.conv_key = $1 AND i.sequence > $2), "
       "w AS (DELETE FROM item_words w WHERE w.conv_key = $1 AND w.sequence > $2) "
       "DELETE FROM item_token_counts t WHERE t.conv_key = $1 AND t.sequence > $2"},
      {"rewind_usage", "DELETE FROM provider_usage WHERE conv_key = $1 AND sequence > $2"},
      {"rewind_idempotency",
       "DELETE FROM idempotency_keys WHERE conv_key = $1 AND last_sequence > $2"},
      {"rewind_proposals", "DELETE FROM compaction_proposals WHERE conv_key = $1"},
      // View states of versions after $2 (the state the rewind goes back to
      // is recorded again, at the new versions).
      {"rewind_view_states", "DELETE FROM view_states WHERE conv_key = $1 AND version > $2"},
      {"rewind_pins", "DELETE FROM item_pins WHERE conv_key = $1"},
      {"all_chunk_links",
       "SELECT chunk_id, coalesce(superseded_by, 0), summarizer_model, through_sequence "
       "FROM summary_chunks WHERE conv_key = $1 ORDER BY chunk_id"},
      // A rewound conversation's link to its source when the rewind went
      // below its fork point, and its abandoned fork's in its place.
      {"set_fork_link",
       "UPDATE conversations SET forked_from = $2, forked_from_incarnation = nullif($3, 0), "
       "forked_at = $4 WHERE conv_key = $1"},
      // $2 chunk ids, $3 what supersedes each (0: active).
      {"rewind_chunks",
       "UPDATE summary_chunks s SET superseded_by = nullif(l.sup, 0) "
       "FROM unnest($2::bigint[], $3::bigint[]) l(id, sup) WHERE s.conv_key = $1 "
       "AND s.chunk_id = l.id AND s.superseded_by IS DISTINCT FROM nullif(l.sup, 0)"},
      // The row at the state $3..$11 (model, prompts, overrides, summarized
      // through, prune boundary, corrections, prompt limit) with items
      // through $2, $12 bytes fewer, its versions moved on, any lease ended,
      // and its history's copies on replicas read again (redactions).
      {"rewind_conversation",
       absl::StrCat("UPDATE conversations SET model = $3, system_prompt = $4, pinned_instructions = $5, "
       "profile_overrides = $6::jsonb, summarized_through = $7, prune_boundary = $8, "
       "token_correction = $9, overflow_correction = $10, prompt_limit = $11, "
       "(item_count, item_tokens) = (SELECT count(*), coalesce(sum(n.token_count), 0) FROM ",
       ItemsOf(layout, "$1"), " n), last_sequence = $2, "
       "last_turn_index = coalesce((SELECT t.turn_index FROM ", ItemsOf(layout, "$1", "x.sequence = $2"),
       " t), 0), version = version + 1, compaction_version = compaction_version + 1, "
       "redactions = redactions + 1, words_indexed_through = least(words_indexed_through, $2), "
       "stored_bytes = greatest(0, stored_bytes - $12), lease_token = lease_token + 1, "
       "lease_holder = NULL, lease_expires_at = NULL, updated_at = now() "
       "WHERE conv_key = $1 RETURNING version")},
      // The tenant's forks and the conversations they were forked from:
      // id, incarnation, the incarnation forked from, the fork point, key.
      {"fork_family",
       "SELECT conversation_id, incarnation, coalesce(forked_from_incarnation, 0), forked_at, "
       "conv_key FROM conversations WHERE tenant_id = $1 AND (forked_from <> '' OR "
       "incarnation IN (SELECT forked_from_incarnation FROM conversations "
       "WHERE tenant_id = $1 AND forked_from <> ''))"},
      // Conversations held against forks and erasures, in key order.
      {"lock_members",
       "SELECT conv_key FROM conversations WHERE conv_key = ANY($1::bigint[]) "
       "ORDER BY conv_key FOR UPDATE"},
      // The forks of a conversation ($2 its id, $3 its incarnation).
      {"fork_children",
       "SELECT conversation_id, incarnation, forked_at, conv_key FROM conversations "
       "WHERE tenant_id = $1 AND forked_from = $2 AND forked_from_incarnation = $3 "
       "ORDER BY conv_key FOR UPDATE"},
      // Before a conversation ($1) that other conversations read items of
      // is deleted (migrations/0025): its heir ($2, ForkHeir: the fork
      // sharing the most with it) gets the items it reads of it as its
      // own, at the versions it had them, and the others read them from
      // the heir. (Should the heir read none, a fork made before 0025 and
      // holding copies, the reader reading the most does.) The number of
      // the heir's ranges it took.
      {"hand_over_items",
       absl::StrCat(
           "WITH heir AS (SELECT coalesce((SELECT $2::bigint WHERE EXISTS (SELECT 1 "
           "FROM item_segments WHERE conv_key = $2 AND owner_key = $1)), (SELECT g.conv_key "
           "FROM item_segments g WHERE g.owner_key = $1 ORDER BY g.through_sequence DESC, "
           "g.conv_key LIMIT 1)) AS k), "
           "ranges AS (SELECT g.from_sequence AS lo, g.through_sequence AS hi, "
           "g.version_cap AS cap FROM item_segments g, heir WHERE g.conv_key = heir.k "
           "AND g.owner_key = $1), "
           "copied AS (", CopyItemsSql("(SELECT k FROM heir)",
                                      "FROM items i JOIN ranges r ON i.sequence BETWEEN r.lo "
                                      "AND r.hi WHERE i.conv_key = $1",
                                      "least(i.appended_version, r.cap)"),
           "), "
           "renamed AS (UPDATE item_segments g SET owner_key = heir.k FROM heir "
           "WHERE g.owner_key = $1 AND g.conv_key <> heir.k), "
           "taken AS (DELETE FROM item_segments g USING heir WHERE g.conv_key = heir.k "
           "AND g.owner_key = $1) "
           "SELECT count(*) FROM ranges")},
      // The conversations reading items of $1 (migrations/0025), held
      // before their segments change (a rewind or a delete of $1). A fork
      // being made of one of them holds it (lock_fork_source): this waits
      // for the fork, and the statements after it see its segments.
      {"lock_readers",
       "SELECT conv_key FROM conversations WHERE conv_key IN (SELECT g.conv_key "
       "FROM item_segments g WHERE g.owner_key = $1) ORDER BY conv_key FOR UPDATE"},
      {"delete_conversation",
       absl::StrCat("DELETE FROM conversations WHERE ", Named(3),
                    " RETURNING item_count, ", kChargedBytes)},
      // What the conversations $1 share with their living sources, counted
      // again (migrations/0024): the items at or before the fork point of a
      // fork whose source is there; the change of their total.
      {"recount_shared",
       absl::StrCat(
           "WITH old AS (SELECT conv_key, shared_bytes FROM conversations "
           "WHERE conv_key = ANY($1::bigint[])), "
           "now_shared AS (SELECT c.conv_key, CASE WHEN c.forked_from <> '' AND EXISTS ("
           "SELECT 1 FROM conversations p WHERE p.tenant_id = c.tenant_id "
           "AND p.conversation_id = c.forked_from "
           "AND p.incarnation = c.forked_from_incarnation) THEN (SELECT coalesce(sum(",
           kItemStoredBytes, "), 0) FROM ", ItemsOf(layout, "c.conv_key", "x.sequence <= c.forked_at"),
           " i) ELSE 0 END AS b "
           "FROM conversations c WHERE c.conv_key = ANY($1::bigint[])), "
           "set AS (UPDATE conversations c SET shared_bytes = n.b FROM now_shared n "
           "WHERE c.conv_key = n.conv_key AND c.shared_bytes <> n.b) "
           "SELECT coalesce(sum(n.b - o.shared_bytes), 0)::bigint "
           "FROM now_shared n JOIN old o USING (conv_key)")},
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
      // The counts of their words go up with them (migrations/0020). The
      // conversation's row is not written here: mark_words_indexed does
      // that last, so that the row is locked (against appends, leases and
      // commits) only from then to the commit, not while words are written.
      {"index_words",
       absl::StrCat("WITH ins AS (INSERT INTO item_words (conv_key, sequence, search) "
       // A source's item (migrations/0025) with its words under this
       // conversation's key.
       "SELECT $1, i.sequence, CASE WHEN i.conv_key = $1 THEN i.search ELSE coalesce(",
       Rekeyed("$1::bigint", "i.search"), ", ''::tsvector) END FROM ",
       ItemsOf(layout, "$1", "x.sequence > $2 AND x.sequence <= $3"),
       " i WHERE i.search IS NOT NULL AND i.kind <> 'summary_marker' "
       "AND i.redacted_digest IS NULL "
       "ON CONFLICT (conv_key, sequence) DO NOTHING RETURNING search), "
       "counted AS (INSERT INTO word_counts (conv_key, word, items) "
       "SELECT $1, ", kLexemeWord, ", count(*) "
       "FROM ins, unnest(ins.search) u GROUP BY 2 "
       "ON CONFLICT (conv_key, word) DO UPDATE SET items = word_counts.items + excluded.items "
       "RETURNING 1) SELECT count(*) FROM counted")},
      // Never past the last item (a rewind takes items away; a job queued
      // before it must not mark the sequences appended after it indexed).
      // The row mark_words_indexed writes, taken without waiting (55P03
      // when a call holds it).
      {"lock_words_row",
       "SELECT 1 FROM conversations WHERE conv_key = $1 FOR NO KEY UPDATE NOWAIT"},
      {"mark_words_indexed",
       "UPDATE conversations SET words_indexed_through = "
       "greatest(words_indexed_through, least($2, last_sequence)) WHERE conv_key = $1"},
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
       absl::StrCat("SELECT ", ItemColumns(), ItemsWithPins(layout, "$1", "$4", false),
                    "WHERE i.sequence BETWEEN $2 AND $3 "
                    "ORDER BY i.sequence")},
      {"items_range_recounted",
       absl::StrCat("SELECT ", ItemColumns(), ItemsWithPins(layout, "$1", "$4", true),
                    "WHERE i.sequence BETWEEN $2 AND $3 "
                    "ORDER BY i.sequence")},
      // $2 after this sequence, $3 rows, $4 the count encoding, $5 bytes.
      {"list_items",
       PagedSelect(Columns(kItemColumnList),
                   absl::StrCat(ItemsWithPins(layout, "$1", "$4", false, "x.sequence > $2", "$3"),
                                "WHERE i.sequence > $2"),
                   "i.sequence", kItemBytes, 3, 5)},
      {"list_items_recounted",
       PagedSelect(Columns(kItemColumnList),
                   absl::StrCat(ItemsWithPins(layout, "$1", "$4", true, "x.sequence > $2", "$3"),
                                "WHERE i.sequence > $2"),
                   "i.sequence", kItemBytes, 3, 5)},
      {"pin_item",
       absl::StrCat("INSERT INTO item_pins (conv_key, sequence, pinned) "
       "SELECT $1, i.sequence, $3 FROM ", ItemsOf(layout, "$1", "x.sequence = $2"), " i "
       "WHERE i.kind <> 'summary_marker' "
       "ON CONFLICT (conv_key, sequence) DO UPDATE SET pinned = $3, updated_at = now() "
       "RETURNING sequence")},
      // RedactItems. $2 is the array of sequences throughout.
      {"redact_check",
       absl::StrCat("SELECT s, (SELECT i.kind FROM ", ItemsOf(layout, "$1", "x.sequence = s"),
                    " i) FROM unnest($2::bigint[]) s ORDER BY s")},
      // What the items to erase hold, for their digests.
      {"redact_read",
       absl::StrCat("SELECT i.sequence, i.content FROM ",
                    ItemsOf(layout, "$1", "x.sequence = ANY($2::bigint[])"),
                    " i WHERE i.redacted_digest IS NULL")},
      // Tombstones ($3 the content, $4 its tokens) with the digest of what
      // they replace ($5, in the order of $2; '' for none), on the items
      // the conversation reads (its own, or its sources' it shares:
      // migrations/0025). What its totals lose: the bytes and tokens
      // removed and how many items, counting those it reads that this
      // erasure tombstoned before, for another conversation sharing them
      // ($6 owners, $7 sequences, $8 bytes, $9 tokens: only those it has
      // not counted yet); and those it tombstones here, in the same four
      // arrays.
      {"redact_items",
       absl::StrCat("WITH d AS (SELECT * FROM unnest($2::bigint[], $5::text[]) AS d(seq, digest)), "
       "fresh AS (SELECT i.conv_key AS owner, i.sequence, octet_length(i.content) + coalesce((SELECT "
       "sum(octet_length(key) + octet_length(value)) FROM jsonb_each_text(i.metadata)), 0) "
       "AS bytes, i.token_count, d.digest FROM ", ItemsOf(layout, "$1", "x.sequence = ANY($2::bigint[])"),
       " i JOIN d ON d.seq = i.sequence WHERE i.redacted_digest IS NULL), "
       "earlier AS (SELECT e.owner, e.seq AS sequence, e.bytes, e.tokens AS token_count "
       "FROM unnest($6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]) "
       "AS e(owner, seq, bytes, tokens) WHERE e.seq = ANY($2::bigint[]) AND (e.owner = $1 "
       "OR EXISTS (SELECT 1 FROM item_segments g WHERE g.conv_key = $1 "
       "AND g.owner_key = e.owner AND e.seq BETWEEN g.from_sequence AND g.through_sequence))), "
       "old AS (SELECT sequence, bytes, token_count FROM fresh "
       "UNION ALL SELECT sequence, bytes, token_count FROM earlier), "
       "done AS (UPDATE items i SET redacted_digest = fresh.digest, content = $3, metadata = '{}', "
       "search = NULL, "
       "token_count = $4 FROM fresh WHERE i.conv_key = ",
       // Copied forks (Citus): the conversation's own rows, named by its
       // key so that the statement stays on its shard.
       layout == ForkLayout::kShared ? "fresh.owner" : "$1",
       " AND i.sequence = fresh.sequence RETURNING i.sequence), "
       // Their words leave the index too (migrations/0019), and its counts
       // (0020).
       // (All of them: an item tombstoned before, by a conversation this
       // one was no longer linked to, leaves no word behind.)
       "unindexed AS (DELETE FROM item_words w WHERE w.conv_key = $1 "
       "AND w.sequence = ANY($2::bigint[]) RETURNING w.search), "
       "gone_words AS (SELECT ", kLexemeWord, " AS word, "
       "count(*) AS n FROM unindexed, unnest(unindexed.search) u GROUP BY 1), "
       // A word no other item holds goes with them (its row would keep the
       // erased word); the others' counts go down.
       "unlisted AS (DELETE FROM word_counts c USING gone_words g WHERE c.conv_key = $1 "
       "AND c.word = g.word AND c.items <= g.n), "
       "uncounted AS (UPDATE word_counts c SET items = c.items - g.n FROM gone_words g "
       "WHERE c.conv_key = $1 AND c.word = g.word AND c.items > g.n) "
       "SELECT coalesce(sum(bytes), 0)::bigint, coalesce(sum(token_count), 0)::bigint, "
       "count(*), (SELECT coalesce(array_agg(owner), '{}') FROM fresh)::text, "
       "(SELECT coalesce(array_agg(sequence), '{}') FROM fresh)::text, "
       "(SELECT coalesce(array_agg(bytes), '{}') FROM fresh)::text, "
       "(SELECT coalesce(array_agg(token_count), '{}') FROM fresh)::text FROM old")},
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
       absl::StrCat("SELECT i.sequence FROM ", ItemsOf(layout, "$1"), " i WHERE i.redacted_digest IS NULL "
       "AND i.metadata->>'convstate.continued_from_sequence' = ANY($2::text[]) "
       "ORDER BY i.sequence")},
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
       absl::StrCat(
       "SELECT i.sequence, i.turn_index, i.role, i.kind, i.content, i.tool_name, "
       "i.tool_call_id, i.pinned, i.metadata::text, i.token_count, "
       "coalesce(i.summary_chunk_id, 0), floor(extract(epoch FROM i.created_at) * 1000000)::bigint, "
       "coalesce(i.seen_version, 0), i.redacted_digest IS NOT NULL, "
       "coalesce(i.redacted_digest, '') FROM ", ItemsOf(layout, "$1"), " i "
       // Only what the view at version $2 shows: the items after the
       // summarized part ($3), the pinned ones ($4: pinned later), and the
       // last one (the log's end then).
       "WHERE coalesce(i.seen_version, 0) <= $2 "
       "AND (i.sequence > $3 OR i.pinned OR i.sequence = ANY($4::bigint[]) OR i.sequence = "
       "(SELECT max(l.sequence) FROM ", ItemsOf(layout, "$1"), " l "
       "WHERE coalesce(l.seen_version, 0) <= $2)) ORDER BY i.sequence")},
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
      {"load_context", LoadContextSql(layout)},
      {"search_history", SearchHistorySql(layout)},
      {"search_replies", SearchRepliesSql(layout)},
      {"search_opening", SearchOpeningSql(layout)},
      {"load_appended", LoadAppendedSql()},
      {"active_chunks",
       absl::StrCat("SELECT ", ChunkColumns(),
                    " FROM summary_chunks WHERE conv_key = $1 AND superseded_by IS NULL "
                    "ORDER BY chunk_id")},
  };
}

}  // namespace

const std::vector<Statement>& Statements(ForkLayout layout) {
  static const auto* const kShared = new std::vector<Statement>(BuildStatements(ForkLayout::kShared));
  static const auto* const kCopied = new std::vector<Statement>(BuildStatements(ForkLayout::kCopied));
  return layout == ForkLayout::kShared ? *kShared : *kCopied;
}

// The text of the statement `name`, for running it unprepared.
const std::string& SqlOf(ForkLayout layout, const char* name) {
  using ByName = absl::flat_hash_map<std::string, const std::string*>;
  auto index = [](ForkLayout l) {
    auto* by_name = new ByName();
    for (const Statement& s : Statements(l)) by_name->emplace(s.name, &s.sql);
    return by_name;
  };
  static const ByName* const kShared = index(ForkLayout::kShared);
  static const ByName* const kCopied = index(ForkLayout::kCopied);
  return *(layout == ForkLayout::kShared ? kShared : kCopied)->at(name);
}

}  // namespace convstate::pg
