#include "storage/postgres_storage_internal.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/postgres_rows.h"
#include "storage/rules.h"

namespace convstate::pg {

absl::StatusOr<Conversation> PostgresStorage::CreateConversation(const CallContext& ctx,
                                                                 const NewConversation& nc) {
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

absl::StatusOr<Conversation> PostgresStorage::GetConversation(const CallContext& ctx,
                                                              const ConversationKey& key) {
  return Run<Conversation>(ctx, "get conversation",
                           [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
    pqxx::result r = ExecNamed(tx, "get_conversation", key);
    if (r.empty()) return NotFound(key);
    return ParseConversation(r[0]).conversation;
  });
}

absl::StatusOr<TenantUsage> PostgresStorage::GetTenantUsage(const CallContext& ctx,
                                                            const std::string& tenant_id) {
  return Run<TenantUsage, pqxx::nontransaction>(
      ctx, "read tenant usage",
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<TenantUsage> {
        const pqxx::result r = Exec(tx, "tenant_usage", tenant_id);
        return TenantUsage{r[0][0].as<int64_t>(), r[0][1].as<int64_t>()};
      });
}

absl::StatusOr<Page<Conversation>> PostgresStorage::ListConversations(const CallContext& ctx,
                                                                      const std::string& tenant_id,
                                                                      const std::string& after_id,
                                                                      const PageLimit& limit) {
  return Run<Page<Conversation>>(
      ctx, "list conversations",
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<Conversation>> {
        return PageOf<Conversation>(
            Exec(tx, "list_conversations", tenant_id, after_id, limit.rows + 1, limit.bytes),
            limit, [](const pqxx::row& r) { return ParseConversation(r).conversation; });
      });
}

absl::StatusOr<int64_t> PostgresStorage::DeleteConversation(const CallContext& ctx,
                                                            const ConversationKey& key) {
  return Run<int64_t>(ctx, "delete conversation",
                      [&](pqxx::transaction_base& tx) -> absl::StatusOr<int64_t> {
    // A limited tenant's total gives back what the conversation held.
    const bool limited = !Exec(tx, "lock_tenant_if_limited", key.tenant_id).empty();
    const pqxx::result locked = ExecNamed(tx, "lock_conversation", key);
    if (locked.empty()) return NotFound(key);
    // Its forks keep reaching the copies they share (RelinkForks).
    const ConversationRow deleted = ParseConversation(locked[0]);
    const Conversation& c = deleted.conversation;
    std::vector<ForkLink> children;
    std::vector<int64_t> child_keys;
    for (const auto& f : Exec(tx, "fork_children", key.tenant_id, key.conversation_id,
                              c.storage_key)) {
      children.push_back(ForkLink{f[0].as<std::string>(), f[1].as<int64_t>(), c.storage_key,
                                  f[2].as<int64_t>(), key.conversation_id});
      child_keys.push_back(f[3].as<int64_t>());
    }
    const ForkLink* heir = ForkHeir(children);
    const int64_t heir_key =
        heir == nullptr ? 0 : child_keys[static_cast<size_t>(heir - children.data())];
    // Conversations continued from it go to its heir, or its source: an
    // erasure of what they carried reaches them there.
    if (heir != nullptr || !c.forked_from.empty()) {
      Exec(tx, "move_continuations", key.tenant_id, key.conversation_id, c.storage_key,
           heir != nullptr ? heir->id : c.forked_from,
           heir != nullptr ? heir->key : c.forked_from_key);
    }
    // The items its forks share go to the heir first (copy on delete).
    if (options_.shared_forks) {
      Exec(tx, "lock_readers", deleted.conv_key);
      Exec(tx, "hand_over_items", deleted.conv_key, heir_key);
    }
    const std::vector<ForkLink> relinked = RelinkForks(
        ForkLink{key.conversation_id, c.storage_key, c.forked_from_key, c.forked_at,
                 c.forked_from},
        children);
    for (size_t i = 0; i < relinked.size(); ++i) {
      Exec(tx, "set_fork_link", child_keys[i], relinked[i].parent_id, relinked[i].parent_key,
           relinked[i].at);
    }
    pqxx::result r = ExecNamed(tx, "delete_conversation", key);
    if (r.empty()) return NotFound(key);
    // What its forks shared with it counts to them now (or to the source
    // they were relinked to).
    const int64_t shared =
        child_keys.empty() ? 0 : Exec1(tx, "recount_shared", IdArray(child_keys))[0].as<int64_t>();
    if (limited) {
      Exec(tx, "add_to_tenant", key.tenant_id, -r[0][1].as<int64_t>() - shared, int64_t{-1});
    }
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

absl::Status PostgresStorage::SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                                         std::optional<absl::Time> due) {
  return Run<bool>(ctx, "set idle due", [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
    const std::optional<double> micros =
        due.has_value() ? std::optional<double>(static_cast<double>(absl::ToUnixMicros(*due)))
                        : std::nullopt;
    if (ExecNamed(tx, "set_idle_due", key, micros).empty()) return NotFound(key);
    tx.commit();
    return true;
  }).status();
}

absl::StatusOr<std::vector<ConversationKey>> PostgresStorage::ClaimIdle(const CallContext& ctx,
                                                                        absl::Time now, int limit) {
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

absl::StatusOr<Conversation> PostgresStorage::UpdateConversation(const CallContext& ctx,
                                                                 const ConversationKey& key,
                                                                 const ConversationUpdate& u) {
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

absl::Status PostgresStorage::SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                                              const TokenRecount& recount) {
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

absl::StatusOr<Conversation> PostgresStorage::RecordProviderOverflow(const CallContext& ctx,
                                                                     const ConversationKey& key,
                                                                     double correction,
                                                                     int64_t prompt_limit,
                                                                     const CompactionEvent& event) {
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

}  // namespace convstate::pg
