#include "storage/postgres_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "services/common/status_macros.h"
#include "storage/postgres_rows.h"
#include "storage/rules.h"

namespace convstate::pg {

absl::StatusOr<PostgresStorage::ForkPlan> PostgresStorage::PlanFork(
    pqxx::transaction_base& tx, const ConversationRow& source, int64_t at) {
  const int64_t conv_key = source.conv_key;
  const ConversationKey& key = source.conversation.key;
  ForkPlan plan;
  plan.at = at;
  plan.version = source.conversation.version;
  if (at > 0) {
    std::vector<Item> turn;
    for (const auto& r : Exec(tx, "fork_turn", conv_key, at)) {
      Item item;
      item.sequence = r[0].as<int64_t>();
      item.data.kind = ItemKindFromName(r[1].as<std::string>()).value_or(ItemKind::kMessage);
      item.data.tool_call_id = r[2].as<std::string>();
      turn.push_back(std::move(item));
    }
    RETURN_IF_ERROR(CheckForkSplit(key, at, turn));
    const pqxx::row v = Exec1(tx, "fork_version", conv_key, at);
    plan.version =
        ForkStateVersion(v[0].as<int64_t>(), v[1].as<int64_t>(), source.conversation.version);
  }
  const pqxx::result state_row = Exec(tx, "view_state_at", conv_key, plan.version, int64_t{-1});
  if (state_row.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("conversation '", key.conversation_id,
                     "' has no view state recorded at version ", plan.version, " to fork from"));
  }
  plan.state = ViewStateFromJson(state_row[0][2].as<std::string>());
  plan.state.compaction_version = state_row[0][0].as<int64_t>();
  // The profile's overrides as they were; the compaction policy as it is.
  plan.state.overrides.policy = source.conversation.overrides.policy;
  plan.last_chunk = Exec1(tx, "fork_last_chunk", conv_key, plan.version,
                          plan.state.compaction_version)[0]
                        .as<int64_t>();
  return plan;
}

// A fork is made inside the database, statement by statement, in the
// caller's transaction: it shares the items through the fork point (no
// item is copied: migrations/0025), and gets copies of the chunks and view
// states of the state it starts from, that state's pins and recounts. Its
// word index is built after the call, by the background indexer.
absl::StatusOr<ConversationRow> PostgresStorage::ForkIn(pqxx::transaction_base& tx,
                                                       const ConversationRow& source,
                                                       const ForkRequest& request,
                                                       const ForkPlan& plan,
                                                       const std::optional<TenantUsage>& usage) {
  const int64_t from = source.conv_key;
  const ViewState& state = plan.state;
  const Metadata metadata = request.metadata.value_or(source.conversation.metadata);
  const int64_t own_bytes =
      StoredBytes(state.system_prompt, state.pinned_instructions, metadata, state.overrides);
  const ForkChunks chunks =
      PlanForkChunks(ChunkLinks(Exec(tx, "fork_chunk_links", from, plan.last_chunk)), state,
                     plan.last_chunk, plan.at);
  const pqxx::result inserted = ExecNamed(
      tx, "fork_conversation", request.fork, from, plan.at, state.model, state.system_prompt,
      state.pinned_instructions, MetadataToJson(metadata), OverridesToJson(state.overrides),
      plan.version, chunks.summarized_through, state.token_correction, state.prune_boundary,
      state.compaction_version, state.overflow_correction, state.prompt_limit, own_bytes,
      request.metadata.has_value());
  const int64_t to = ParseConversation(inserted[0]).conv_key;
  // The shared items count to the source, not to the tenant again
  // (fork_share records them as shared): a fork past the tenant's limits
  // by what it adds is not committed.
  Exec1(tx, options_.shared_forks ? "fork_share" : "fork_items", from, to, plan.at,
        plan.version);
  const int64_t bytes = own_bytes;
  if (usage.has_value()) {
    RETURN_IF_ERROR(CheckTenantLimits(request.fork.tenant_id, *usage, bytes, 1,
                                      request.tenant_limits));
    Exec(tx, "add_to_tenant", request.fork.tenant_id, bytes, int64_t{1});
  }
  if (!chunks.ids.empty()) {
    Exec(tx, "fork_chunks", from, to, IdArray(chunks.ids), IdArray(chunks.superseded_by));
  }
  Exec(tx, "fork_view_states", from, to, plan.version, state.compaction_version);
  InsertPins(tx, to, state, plan.at);
  Exec(tx, "fork_token_counts", from, to, plan.at);
  InsertEvents(tx, to, {ForkedEvent(request, plan.at)});
  return ParseConversation(ExecNamed(tx, "get_conversation", request.fork)[0]);
}

std::vector<SummaryChunk> PostgresStorage::ChunkLinks(const pqxx::result& rows) {
  std::vector<SummaryChunk> chunks;
  for (const auto& r : rows) {
    SummaryChunk chunk;
    chunk.chunk_id = r[0].as<int64_t>();
    chunk.superseded_by = r[1].as<int64_t>();
    chunk.summarizer_model = r[2].as<std::string>();
    chunk.through_sequence = r[3].as<int64_t>();
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

void PostgresStorage::InsertPins(pqxx::transaction_base& tx, int64_t conv_key,
                                 const ViewState& state, int64_t through) {
  std::vector<int64_t> sequences;
  std::vector<bool> flags;
  for (const auto& [sequence, pinned] : state.pins) {
    sequences.push_back(sequence);
    flags.push_back(pinned);
  }
  if (sequences.empty()) return;
  Exec(tx, "fork_pins", conv_key, IdArray(sequences), BoolArray(flags), through);
}

absl::StatusOr<Conversation> PostgresStorage::ForkConversation(const CallContext& ctx,
                                                               const ForkRequest& request) {
  auto result = Run<Conversation>(ctx, "fork conversation",
                                  [&](pqxx::transaction_base& tx) -> absl::StatusOr<Conversation> {
    std::optional<TenantUsage> usage;
    if (Limited(request.tenant_limits)) {
      ASSIGN_OR_RETURN(usage, LockTenant(tx, request.fork.tenant_id));
    }
    // The source is held while the fork is copied from it (an erasure of
    // it waits, then reaches the fork).
    const pqxx::result found = ExecNamed(tx, "lock_fork_source", request.source);
    if (found.empty()) return NotFound(request.source);
    const ConversationRow source = ParseConversation(found[0]);
    ASSIGN_OR_RETURN(const int64_t at, ForkPoint(source.conversation, request.at_sequence));
    ASSIGN_OR_RETURN(const ForkPlan plan, PlanFork(tx, source, at));
    ASSIGN_OR_RETURN(const ConversationRow fork, ForkIn(tx, source, request, plan, usage));
    tx.commit();
    QueueWordIndexing(fork.conv_key, std::max(fork.conversation.summarized_through,
                                              fork.conversation.prune_boundary));
    return fork.conversation;
  });
  if (absl::IsAlreadyExists(result.status())) {
    return absl::AlreadyExistsError(absl::StrCat(
        "conversation '", request.fork.conversation_id, "' already exists"));
  }
  return result;
}

absl::StatusOr<RewindResult> PostgresStorage::RewindConversation(const CallContext& ctx,
                                                                 const RewindRequest& request) {
  auto result = Run<RewindResult>(ctx, "rewind conversation",
                                  [&](pqxx::transaction_base& tx) -> absl::StatusOr<RewindResult> {
    std::optional<TenantUsage> usage;
    if (Limited(request.tenant_limits)) {
      ASSIGN_OR_RETURN(usage, LockTenant(tx, request.key.tenant_id));
    }
    const pqxx::result locked = ExecNamed(tx, "lock_conversation", request.key);
    if (locked.empty()) return NotFound(request.key);
    const ConversationRow row = ParseConversation(locked[0]);
    const int64_t conv_key = row.conv_key;
    RewindResult out;
    if (!request.idempotency_key.empty()) {
      const pqxx::result seen = Exec(tx, "rewind_record_of", conv_key, request.idempotency_key);
      if (!seen.empty()) {
        if (seen[0][0].as<std::string>() != RewindFingerprint(request)) {
          return absl::AlreadyExistsError(
              "idempotency_key: already used for a different request");
        }
        const pqxx::result abandoned = ExecNamed(tx, "get_conversation", request.abandoned);
        if (abandoned.empty()) {
          return absl::NotFoundError(absl::StrCat(
              "the rewind was made; its abandoned conversation '",
              request.abandoned.conversation_id, "' is gone since"));
        }
        out.conversation = row.conversation;
        out.abandoned = ParseConversation(abandoned[0]).conversation;
        out.replayed = true;
        return out;
      }
    }
    RETURN_IF_ERROR(CheckRewindPoint(row.conversation, request.to_sequence));
    const int64_t to = request.to_sequence;
    ASSIGN_OR_RETURN(const ForkPlan back, PlanFork(tx, row, to));
    ASSIGN_OR_RETURN(const ForkPlan whole, PlanFork(tx, row, row.conversation.last_sequence));
    ForkRequest rest;
    rest.source = request.key;
    rest.fork = request.abandoned;
    rest.tenant_limits = request.tenant_limits;
    ASSIGN_OR_RETURN(const ConversationRow abandoned, ForkIn(tx, row, rest, whole, usage));
    Exec(tx, "rewind_reparent", request.key.tenant_id, to, request.key.conversation_id,
         row.conversation.storage_key, request.abandoned.conversation_id,
         abandoned.conversation.storage_key, abandoned.conv_key);
    Exec(tx, "move_continuations", request.key.tenant_id, request.key.conversation_id,
         row.conversation.storage_key, request.abandoned.conversation_id,
         abandoned.conversation.storage_key);
    const Conversation& c = row.conversation;
    if (!c.forked_from.empty() && to < c.forked_at) {
      // Below its own fork point: the abandoned fork holds what it shared
      // with its source, and takes its place as that source's fork; it
      // shares only what is left with it now.
      Exec(tx, "set_fork_link", abandoned.conv_key, c.forked_from, c.forked_from_key,
           c.forked_at);
      Exec(tx, "set_fork_link", conv_key, c.forked_from, c.forked_from_key, to);
    }
    const int64_t version = RewindIn(tx, row, request, back, abandoned.conv_key, usage.has_value());
    // The abandoned branch now shares 1..to with this conversation (and
    // this one maybe less with its source): counted again.
    const int64_t shared = Exec1(tx, "recount_shared",
                                 IdArray({abandoned.conv_key, conv_key}))[0].as<int64_t>();
    if (usage.has_value()) Exec(tx, "add_to_tenant", request.key.tenant_id, -shared, int64_t{0});
    if (!request.idempotency_key.empty()) {
      Exec(tx, "rewind_record", conv_key, to, request.idempotency_key,
           RewindFingerprint(request), version);
    }
    out.conversation = ParseConversation(ExecNamed(tx, "get_conversation", request.key)[0])
                           .conversation;
    out.abandoned = ParseConversation(
                        ExecNamed(tx, "get_conversation", request.abandoned)[0])
                        .conversation;
    tx.commit();
    QueueWordIndexing(abandoned.conv_key, std::max(out.abandoned.summarized_through,
                                                   out.abandoned.prune_boundary));
    return out;
  });
  if (absl::IsAlreadyExists(result.status()) &&
      !absl::StrContains(result.status().message(), "idempotency_key")) {
    return absl::AlreadyExistsError(absl::StrCat(
        "conversation '", request.abandoned.conversation_id, "' already exists"));
  }
  return result;
}

int64_t PostgresStorage::RewindIn(pqxx::transaction_base& tx, const ConversationRow& row,
                                  const RewindRequest& request, const ForkPlan& back,
                                  int64_t abandoned, bool limited) {
  const int64_t conv_key = row.conv_key;
  const int64_t to = request.to_sequence;
  // What it stops reading (its own items after the point, which move to
  // the abandoned fork, and those it shared past it).
  const int64_t removed_bytes = Exec1(tx, "rewind_bytes", conv_key, to)[0].as<int64_t>();
  if (options_.shared_forks) {
    Exec(tx, "lock_readers", conv_key);
    Exec(tx, "rewind_hand_over", conv_key, to, abandoned);
  }
  Exec(tx, "rewind_words", conv_key, to);
  Exec(tx, "rewind_items", conv_key, to);
  Exec(tx, "rewind_usage", conv_key, to);
  Exec(tx, "rewind_idempotency", conv_key, to);
  Exec(tx, "rewind_proposals", conv_key);
  Exec(tx, "rewind_view_states", conv_key, back.version);
  Exec(tx, "rewind_pins", conv_key);
  InsertPins(tx, conv_key, back.state, to);
  const ForkChunks chunks = PlanForkChunks(ChunkLinks(Exec(tx, "all_chunk_links", conv_key)),
                                           back.state, back.last_chunk, to);
  if (!chunks.ids.empty()) {
    Exec(tx, "rewind_chunks", conv_key, IdArray(chunks.ids), IdArray(chunks.superseded_by));
  }
  // What was derived from the items that left (their copies live on in the
  // abandoned fork): retired summaries of them are emptied, and the audit
  // rows' texts of them give way to a note.
  if (!chunks.emptied.empty()) Exec(tx, "retire_chunks", conv_key, IdArray(chunks.emptied));
  std::vector<int64_t> gone;
  for (int64_t s = to + 1; s <= row.conversation.last_sequence; ++s) gone.push_back(s);
  Exec(tx, "redact_event_facts", conv_key, IdArray(gone),
       std::string(kRewoundText));
  const ViewState& s = back.state;
  const int64_t version =
      Exec1(tx, "rewind_conversation", conv_key, to, s.model, s.system_prompt,
            s.pinned_instructions, OverridesToJson(s.overrides), chunks.summarized_through,
            s.prune_boundary, s.token_correction, s.overflow_correction, s.prompt_limit,
            removed_bytes)[0]
          .as<int64_t>();
  if (limited) Exec(tx, "add_to_tenant", request.key.tenant_id, -removed_bytes, int64_t{0});
  Exec(tx, "record_view_state", conv_key);
  InsertEvents(tx, conv_key, {RewoundEvent(request, row.conversation.last_sequence - to)});
  return version;
}

absl::StatusOr<Page<Conversation>> PostgresStorage::ListForks(const CallContext& ctx,
                                                              const ConversationKey& key,
                                                              const std::string& after_id,
                                                              const PageLimit& limit) {
  return Run<Page<Conversation>>(
      ctx, "list forks", [&](pqxx::transaction_base& tx) -> absl::StatusOr<Page<Conversation>> {
        const pqxx::result found = ExecNamed(tx, "get_conversation", key);
        if (found.empty()) return NotFound(key);
        const int64_t incarnation = ParseConversation(found[0]).conversation.storage_key;
        return PageOf<Conversation>(
            Exec(tx, "list_forks", key.tenant_id, key.conversation_id, limit.rows + 1,
                 limit.bytes, incarnation, after_id),
            limit, [](const pqxx::row& r) { return ParseConversation(r).conversation; });
      });
}

}  // namespace convstate::pg
