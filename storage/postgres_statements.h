#ifndef CONVSTATE_STORAGE_POSTGRES_STATEMENTS_H_
#define CONVSTATE_STORAGE_POSTGRES_STATEMENTS_H_

// The PostgreSQL backend's statements, internal to its target. Every one is
// prepared once per connection and parameterized. The column lists give the
// order in which the row mapping (postgres_rows.h) reads a row.

#include <string>
#include <vector>

namespace convstate::pg {

// The columns of a conversation row, each an expression over
// `conversations`, in ParseConversation's order.
inline constexpr const char* kConversationColumnList[] = {
    "conv_key", "tenant_id", "conversation_id", "model", "system_prompt",
    "pinned_instructions", "metadata::text", "profile_overrides::text", "version",
    "item_count", "last_sequence", "last_turn_index", "summarized_through",
    "floor(extract(epoch FROM created_at) * 1000000)::bigint",
    "floor(extract(epoch FROM updated_at) * 1000000)::bigint",
    "system_prompt_tokens", "pinned_instructions_tokens", "item_tokens", "token_correction",
    "prune_boundary", "lease_token", "coalesce(lease_expires_at > now(), false)",
    "compaction_version", "overflow_correction", "prompt_limit", "continued_from",
    "count_encoding", "recounted", "incarnation", "redactions", "stored_bytes", "forked_from",
    "coalesce(forked_from_incarnation, 0)", "forked_at"};

// Items with their pins: a pin set after the append overrides the flag;
// and with their count in the conversation's current tokenizer when it was
// made again after a model change.
inline constexpr const char* kItemColumnList[] = {
    "i.sequence", "i.turn_index", "i.role", "i.kind", "i.content", "i.tool_name",
    "i.tool_call_id", "coalesce(p.pinned, i.pinned)", "i.metadata::text",
    "coalesce(tc.token_count, i.token_count)", "coalesce(i.summary_chunk_id, 0)",
    "floor(extract(epoch FROM i.created_at) * 1000000)::bigint",
    "coalesce(i.seen_version, 0)", "i.redacted_digest IS NOT NULL",
    "coalesce(i.redacted_digest, '')"};

inline constexpr const char* kChunkColumnList[] = {
    "chunk_id", "from_sequence", "through_sequence", "text", "token_count",
    "summarizer_model", "prompt_version", "tokens_in", "tokens_out", "latency_ms",
    "coalesce(superseded_by, 0)",
    "floor(extract(epoch FROM created_at) * 1000000)::bigint", "structure::text",
    "coalesce(recall, -1)"};

// The columns of the conversation row load_appended (LoadAppendedSql)
// returns before the items'.
inline constexpr const char* kAppendedColumnList[] = {
    "incarnation", "version", "compaction_version", "count_encoding", "recounted", "item_count",
    "last_sequence", "last_turn_index", "item_tokens", "token_correction",
    "floor(extract(epoch FROM updated_at) * 1000000)::bigint"};

struct Statement {
  const char* name;
  std::string sql;
};

// How forks hold their source's items (PostgresOptions::shared_forks):
// shared through item_segments (migrations/0025), or copied (a layout where
// a statement must stay on its conversation's shard, Citus).
enum class ForkLayout { kShared, kCopied };

const std::vector<Statement>& Statements(ForkLayout layout);

const std::string& SqlOf(ForkLayout layout, const char* name);

}  // namespace convstate::pg

#endif  // CONVSTATE_STORAGE_POSTGRES_STATEMENTS_H_
