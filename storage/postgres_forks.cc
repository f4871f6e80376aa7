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
#include "services/common/status_macros.h"
#include "storage/postgres_rows.h"
#include "storage/rules.h"

namespace convstate::pg {

// A fork is copied inside the database, statement by statement, in one
// transaction: the items through the fork point, the chunks and view
// states of the state it starts from, that state's pins, recounts and the
// word index. Nothing of the items' content passes through the server.
absl::StatusOr<Conversation> PostgresStorage::ForkConversation(const CallContext& ctx,
                                                               const ForkRequest& request) {
  auto result = Run<Conversation>(ctx, "fork conversation",
                                  [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
    const bool limited = Limited(request.tenant_limits);
    std::optional<TenantUsage> usage;
    if (limited) {
      ASSIGN_OR_RETURN(usage, LockTenant(tx, request.fork.tenant_id));
    }
    const pqxx::result found = ExecNamed(tx, "lock_fork_source", request.source);
    if (found.empty()) {
      return absl::NotFoundError(
          absl::StrCat("conversation '", request.source.conversation_id, "' not found"));
    }
    const ConversationRow source = ParseConversation(found[0]);
    const int64_t from = source.conv_key;
    ASSIGN_OR_RETURN(const int64_t at, ForkPoint(source.conversation, request.at_sequence));
    int64_t version = 0;
    if (at > 0) {
      std::vector<Item> turn;
      for (const auto& r : Exec(tx, "fork_turn", from, at)) {
        Item item;
        item.sequence = r[0].as<int64_t>();
        item.data.kind = ItemKindFromName(r[1].as<std::string>()).value_or(ItemKind::kMessage);
        item.data.tool_call_id = r[2].as<std::string>();
        turn.push_back(std::move(item));
      }
      RETURN_IF_ERROR(CheckForkSplit(request.source, at, turn));
      const pqxx::row v = Exec1(tx, "fork_version", from, at);
      version = ForkStateVersion(v[0].as<int64_t>(), v[1].as<bool>());
    }
    const pqxx::result state_row = Exec(tx, "view_state_at", from, version, int64_t{-1});
    if (state_row.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("conversation '", request.source.conversation_id,
                       "' has no view state recorded at version ", version, " to fork from"));
    }
    ViewState state = ViewStateFromJson(state_row[0][2].as<std::string>());
    state.compaction_version = state_row[0][0].as<int64_t>();
    // The profile's overrides as they were; the compaction policy as it is.
    state.overrides.policy = source.conversation.overrides.policy;
    const Metadata& metadata = request.metadata.value_or(source.conversation.metadata);
    const int64_t bytes =
        StoredBytes(state.system_prompt, state.pinned_instructions, metadata, state.overrides) +
        Exec1(tx, "fork_item_bytes", from, at)[0].as<int64_t>();
    if (limited) {
      RETURN_IF_ERROR(CheckTenantLimits(request.fork.tenant_id, *usage, bytes, 1,
                                        request.tenant_limits));
    }
    const pqxx::result inserted = ExecNamed(
        tx, "fork_conversation", request.fork, from, at, state.model, state.system_prompt,
        state.pinned_instructions, MetadataToJson(metadata), OverridesToJson(state.overrides),
        version, state.summarized_through, state.token_correction, state.prune_boundary,
        state.compaction_version, state.overflow_correction, state.prompt_limit, bytes,
        request.metadata.has_value());
    ConversationRow row = ParseConversation(inserted[0]);
    const int64_t to = row.conv_key;
    if (limited) Exec(tx, "add_to_tenant", request.fork.tenant_id, bytes, int64_t{1});
    Exec(tx, "fork_items", from, to, at);
    const int64_t last_chunk =
        Exec1(tx, "fork_last_chunk", from, version, state.compaction_version)[0].as<int64_t>();
    std::vector<int64_t> ids, superseded_by;
    for (const auto& r : Exec(tx, "fork_chunk_links", from, last_chunk)) {
      SummaryChunk chunk;
      chunk.chunk_id = r[0].as<int64_t>();
      chunk.superseded_by = r[1].as<int64_t>();
      ids.push_back(chunk.chunk_id);
      superseded_by.push_back(ForkedSupersededBy(chunk, state.chunk_ids, last_chunk));
    }
    if (!ids.empty()) Exec(tx, "fork_chunks", from, to, IdArray(ids), IdArray(superseded_by));
    Exec(tx, "fork_view_states", from, to, version, state.compaction_version);
    std::vector<int64_t> pinned_at;
    std::vector<std::string> flags;
    for (const auto& [sequence, pinned] : state.pins) {
      pinned_at.push_back(sequence);
      flags.push_back(pinned ? "t" : "f");
    }
    if (!pinned_at.empty()) {
      Exec(tx, "fork_pins", to, IdArray(pinned_at),
           absl::StrCat("{", absl::StrJoin(flags, ","), "}"), at);
    }
    Exec(tx, "fork_token_counts", from, to, at);
    if (row.conversation.item_count > 0 && source.conversation.item_count > 0 &&
        Exec1(tx, "words_indexed", to)[0].as<int64_t>() > 0) {
      Exec(tx, "fork_words", from, to, at);
    }
    InsertEvents(tx, to, {ForkedEvent(request, at)});
    row = ParseConversation(ExecNamed(tx, "get_conversation", request.fork)[0]);
    tx.commit();
    return row.conversation;
  });
  if (absl::IsAlreadyExists(result.status())) {
    return absl::AlreadyExistsError(absl::StrCat(
        "conversation '", request.fork.conversation_id, "' already exists"));
  }
  return result;
}

absl::StatusOr<Page<Conversation>> PostgresStorage::ListForks(const CallContext& ctx,
                                                              const ConversationKey& key,
                                                              const std::string& after_id,
                                                              const PageLimit& limit) {
  return Run<Page<Conversation>>(
      ctx, "list forks", [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<Conversation>> {
        const pqxx::result found = ExecNamed(tx, "get_conversation", key);
        if (found.empty()) {
          return absl::NotFoundError(
              absl::StrCat("conversation '", key.conversation_id, "' not found"));
        }
        const int64_t incarnation = ParseConversation(found[0]).conversation.storage_key;
        return PageOf<Conversation>(
            Exec(tx, "list_forks", key.tenant_id, key.conversation_id, limit.rows + 1,
                 limit.bytes, incarnation, after_id),
            limit, [](const pqxx::row& r) { return ParseConversation(r).conversation; });
      });
}

}  // namespace convstate::pg
