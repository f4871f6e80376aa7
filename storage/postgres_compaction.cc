#include "storage/postgres_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_statements.h"
#include "storage/rules.h"

namespace convstate::pg {

absl::StatusOr<CompactionResult> PostgresStorage::CommitCompaction(const CallContext& ctx,
                                                                   const CompactionCommit& commit) {
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

absl::StatusOr<std::optional<CompactionResult>> PostgresStorage::CommitAsRead(
    pqxx::transaction_base& tx, const CompactionCommit& commit, bool locked, int64_t& conv_key,
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

absl::StatusOr<std::optional<CompactionLease>> PostgresStorage::TryAcquireCompactionLease(
    const CallContext& ctx, const ConversationKey& key, const std::string& holder,
    absl::Duration duration) {
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

absl::Status PostgresStorage::ReleaseCompactionLease(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     const CompactionLease& lease) {
  // One statement on its own (one round trip); sending it again is
  // harmless: it frees only this grant.
  return Run<bool, pqxx::nontransaction>(ctx, "release compaction lease",
                                         [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
    ExecNamed(tx, "release_lease", key, lease.token, lease.incarnation);
    return true;
  }).status();
}

absl::Status PostgresStorage::RecordCompactionEvents(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     const std::vector<CompactionEvent>& events) {
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

absl::StatusOr<Page<SummaryChunk>> PostgresStorage::ListSummaries(const CallContext& ctx,
                                                                  const ConversationKey& key,
                                                                  bool include_superseded,
                                                                  int64_t after_chunk_id,
                                                                  const PageLimit& limit) {
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

absl::StatusOr<ProposalRecord> PostgresStorage::SaveProposal(
    const CallContext& ctx, const ConversationKey& key, const std::string& body, absl::Duration ttl,
    const TenantLimits& limits, int64_t compaction_version) {
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

absl::StatusOr<ProposalRecord> PostgresStorage::GetProposal(const CallContext& ctx,
                                                            const ConversationKey& key,
                                                            int64_t proposal_id) {
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

absl::StatusOr<RevertResult> PostgresStorage::RevertCompaction(const CallContext& ctx,
                                                               const RevertRequest& request) {
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

absl::StatusOr<Page<CompactionEvent>> PostgresStorage::ListCompactionEvents(
    const CallContext& ctx, const ConversationKey& key, int64_t after_event_id,
    const PageLimit& limit) {
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

}  // namespace convstate::pg
