#include "storage/memory_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/paging.h"
#include "storage/rules.h"

namespace convstate::in_memory {

absl::StatusOr<CompactionResult> MemoryStorage::CommitCompaction(const CallContext& ctx,
                                                                 const CompactionCommit& commit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(commit.key));
  Conversation& c = state->conversation;
  RETURN_IF_ERROR(CheckCompaction(c, Active(*state), commit));
  const absl::Time now = Now();
  if (commit.proposal_id != 0) {
    auto p = state->proposals.find(commit.proposal_id);
    if (p == state->proposals.end() || p->second.expire_time <= now ||
        p->second.applied_chunk_id != 0) {
      return absl::AbortedError(absl::StrCat("proposal ", commit.proposal_id,
                                             " was applied already or has expired"));
    }
  }
  CompactionResult result;
  if (commit.chunk.has_value()) {
    SummaryChunk chunk = *commit.chunk;
    chunk.chunk_id = static_cast<int64_t>(state->chunks.size()) + 1;
    chunk.prune_boundary_before = c.prune_boundary;
    chunk.superseded_by = 0;
    chunk.create_time = now;
    for (SummaryChunk& old : state->chunks) {
      if (std::find(commit.supersedes.begin(), commit.supersedes.end(), old.chunk_id) !=
          commit.supersedes.end()) {
        old.superseded_by = chunk.chunk_id;
      }
    }
    if (commit.supersedes.empty()) c.summarized_through = chunk.through_sequence;
    Item marker;
    marker.data = MarkerFor(chunk);
    marker.sequence = c.last_sequence + 1;
    marker.turn_index = c.last_turn_index;
    marker.summary_chunk_id = chunk.chunk_id;
    marker.create_time = now;
    marker.appended_version = c.version;
    state->stored_bytes += StoredBytes({marker.data}) + ChunkBytes(chunk);
    state->items.push_back(marker);
    c.last_sequence = marker.sequence;
    c.item_count += 1;
    state->chunks.push_back(chunk);
    result.chunk_id = chunk.chunk_id;
    result.marker_sequence = marker.sequence;
  }
  for (int64_t s : commit.pins) {
    if (s >= 1 && s <= static_cast<int64_t>(state->items.size())) {
      state->items[s - 1].data.pinned = true;
    }
  }
  c.prune_boundary = commit.new_prune_boundary;
  c.compaction_version += 1;
  c.update_time = now;
  RecordState(*state);
  AddEvents(*state, commit.events, now);
  result.version = c.version;
  result.compaction_version = c.compaction_version;
  if (commit.proposal_id != 0) {
    ProposalRecord& p = state->proposals[commit.proposal_id];
    p.applied_chunk_id = result.chunk_id;
    p.applied_compaction_version = result.compaction_version;
    p.applied_answer = commit.proposal_answer;
    state->stored_bytes += static_cast<int64_t>(commit.proposal_answer.size());
  }
  return result;
}

absl::StatusOr<ProposalRecord> MemoryStorage::SaveProposal(
    const CallContext& ctx, const ConversationKey& key, const std::string& body, absl::Duration ttl,
    const TenantLimits& limits, int64_t compaction_version) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  const int64_t bytes = static_cast<int64_t>(body.size()) + kProposalRowBytes;
  RETURN_IF_ERROR(CheckTenantLimits(key.tenant_id, UsageOf(key.tenant_id), bytes, 0, limits));
  if (state->conversation.compaction_version != compaction_version) {
    return StaleProposal(key, compaction_version, state->conversation.compaction_version);
  }
  const absl::Time now = Now();
  for (auto it = state->proposals.begin(); it != state->proposals.end();) {
    if (it->second.expire_time <= now) {
      state->stored_bytes -= static_cast<int64_t>(it->second.body.size() +
                                                  it->second.applied_answer.size()) +
                             kProposalRowBytes;
      it = state->proposals.erase(it);
    } else {
      ++it;
    }
  }
  ProposalRecord record;
  record.proposal_id = ++state->last_proposal_id;
  record.expire_time = now + ttl;
  record.body = body;
  state->proposals[record.proposal_id] = record;
  state->stored_bytes += bytes;
  return record;
}

absl::StatusOr<ProposalRecord> MemoryStorage::GetProposal(const CallContext& ctx,
                                                          const ConversationKey& key,
                                                          int64_t proposal_id) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  auto it = state->proposals.find(proposal_id);
  if (it == state->proposals.end() || it->second.expire_time <= Now()) {
    return ProposalNotFound(key, proposal_id);
  }
  return it->second;
}

absl::StatusOr<RevertResult> MemoryStorage::RevertCompaction(const CallContext& ctx,
                                                             const RevertRequest& request) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(request.key));
  Conversation& c = state->conversation;
  ASSIGN_OR_RETURN(const RevertPlan plan, PlanRevert(c, state->chunks, request.chunk_id));
  RevertResult result;
  for (SummaryChunk& chunk : state->chunks) {
    if (chunk.chunk_id == request.chunk_id) {
      chunk.superseded_by = chunk.chunk_id;
      chunk.reverted = true;
      chunk.reverted_by = request.actor;
      result.chunk = chunk;
    }
    if (std::find(plan.reactivate.begin(), plan.reactivate.end(), chunk.chunk_id) !=
        plan.reactivate.end()) {
      chunk.superseded_by = 0;
    }
  }
  c.summarized_through = plan.summarized_through;
  c.prune_boundary = plan.prune_boundary;
  Erased(*state, RevertedEvent(request, result.chunk, plan));
  result.reactivated = plan.reactivate;
  result.compaction_version = c.compaction_version;
  result.summarized_through = c.summarized_through;
  result.prune_boundary = c.prune_boundary;
  return result;
}

absl::StatusOr<std::optional<CompactionLease>> MemoryStorage::TryAcquireCompactionLease(
    const CallContext& ctx, const ConversationKey& key, const std::string& holder,
    absl::Duration duration) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  if (state->conversation.lease_active) return std::optional<CompactionLease>();
  const absl::Time now = Now();
  state->lease_holder = holder;
  state->lease_expires = now + duration;
  state->conversation.lease_token += 1;
  state->conversation.lease_active = true;
  return std::optional<CompactionLease>(
      CompactionLease{holder, state->conversation.lease_token, state->conversation.storage_key,
                      state->lease_expires});
}

absl::Status MemoryStorage::ReleaseCompactionLease(const CallContext& ctx,
                                                   const ConversationKey& key,
                                                   const CompactionLease& lease) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  if (state->conversation.lease_token == lease.token &&
      state->conversation.storage_key == lease.incarnation) {
    state->lease_holder.clear();
    state->lease_expires = absl::InfinitePast();
    state->conversation.lease_active = false;
  }
  return absl::OkStatus();
}

absl::Status MemoryStorage::RecordCompactionEvents(const CallContext& ctx,
                                                   const ConversationKey& key,
                                                   const std::vector<CompactionEvent>& events) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  AddEvents(*state, events, Now());
  return absl::OkStatus();
}

absl::StatusOr<Page<SummaryChunk>> MemoryStorage::ListSummaries(const CallContext& ctx,
                                                                const ConversationKey& key,
                                                                bool include_superseded,
                                                                int64_t after_chunk_id,
                                                                const PageLimit& limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  std::vector<SummaryChunk> out;
  for (const SummaryChunk& c : state->chunks) {
    if (c.chunk_id <= after_chunk_id || (!include_superseded && c.superseded_by != 0)) continue;
    if (static_cast<int>(out.size()) > limit.rows) break;
    out.push_back(c);
  }
  return TakePage(std::move(out), limit, [](const SummaryChunk& c) { return PageBytes(c); });
}

absl::StatusOr<Page<CompactionEvent>> MemoryStorage::ListCompactionEvents(
    const CallContext& ctx, const ConversationKey& key, int64_t after_event_id,
    const PageLimit& limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  std::vector<CompactionEvent> out;
  for (const CompactionEvent& e : state->events) {
    if (e.event_id <= after_event_id) continue;
    if (static_cast<int>(out.size()) > limit.rows) break;
    out.push_back(e);
  }
  return TakePage(std::move(out), limit, [](const CompactionEvent& e) { return PageBytes(e); });
}

}  // namespace convstate::in_memory
