#include "storage/postgres_storage_internal.h"

#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/context_delta.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_statements.h"
#include "storage/rules.h"

namespace convstate::pg {

absl::StatusOr<ContextSnapshot> PostgresStorage::LoadContext(const CallContext& ctx,
                                                             const ConversationKey& key) {
  ASSIGN_OR_RETURN(ContextDelta delta, LoadContextSince(ctx, key, nullptr));
  return std::move(delta.snapshot);
}

absl::StatusOr<ContextDelta> PostgresStorage::LoadContextSince(const CallContext& ctx,
                                                               const ConversationKey& key,
                                                               const Conversation* held) {
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

absl::StatusOr<ContextDelta> PostgresStorage::ParseAppended(const pqxx::result& r,
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

absl::StatusOr<ContextDelta> PostgresStorage::ParseContext(const pqxx::result& r,
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

absl::StatusOr<ContextSnapshot> PostgresStorage::LoadContextAt(const CallContext& ctx,
                                                               const ConversationKey& key,
                                                               int64_t version,
                                                               int64_t compaction_version) {
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

}  // namespace convstate::pg
