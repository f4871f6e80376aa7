#include "storage/postgres_storage_internal.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/distribution_key.h"
#include "storage/pg_util.h"
#include "storage/postgres_rows.h"
#include "storage/rules.h"

namespace convstate::pg {

absl::StatusOr<AppendResult> PostgresStorage::AppendItems(const CallContext& ctx,
                                                          const AppendRequest& request) {
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

absl::StatusOr<AppendResult> PostgresStorage::AppendIn(pqxx::transaction_base& tx,
                                                       const AppendRequest& request) {
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

absl::StatusOr<std::optional<AppendResult>> PostgresStorage::AppendInOneStatement(
    const CallContext& ctx, const AppendRequest& request) {
  // Numbered from 0: the statement adds the conversation's last sequence
  // and turn index as it finds them under the lock.
  std::vector<Item> numbered = NumberAppended(request.items, 0, 0, 0);
  std::vector<absl::string_view> roles, kinds, contents, tool_names, call_ids;
  std::vector<std::string> metadata_json, lexemes;
  lexemes.reserve(numbered.size());
  const int64_t conv_key = DistributionKey(request.key);
  std::vector<bool> pinned;
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
    pinned.push_back(data.pinned);
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
            pg::TextArray(call_ids), BoolArray(pinned), pg::TextArray(metadata_json), array(tokens),
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

absl::StatusOr<Page<Item>> PostgresStorage::ListItems(const CallContext& ctx,
                                                      const ConversationKey& key,
                                                      int64_t after_sequence,
                                                      const PageLimit& limit) {
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

absl::StatusOr<Item> PostgresStorage::SetPinned(const CallContext& ctx, const ConversationKey& key,
                                                int64_t sequence, bool pinned) {
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

}  // namespace convstate::pg
