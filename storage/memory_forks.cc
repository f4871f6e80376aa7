#include "storage/memory_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "services/common/status_macros.h"
#include "storage/paging.h"
#include "storage/rules.h"

namespace convstate::in_memory {

absl::StatusOr<MemoryStorage::ForkPlan> MemoryStorage::PlanFork(const ConversationState& source,
                                                                 const ConversationKey& key,
                                                                 int64_t at) {
  ForkPlan point;
  point.at = at;
  point.version = source.conversation.version;
  if (at > 0) {
    const Item& last = source.items[at - 1];
    std::vector<Item> turn;
    int64_t next_version = -1;
    for (const Item& item : source.items) {
      if (item.turn_index == last.turn_index) turn.push_back(item);
      if (next_version < 0 && item.sequence > at && item.data.kind != ItemKind::kSummaryMarker) {
        next_version = item.appended_version;
      }
    }
    RETURN_IF_ERROR(CheckForkSplit(key, at, turn));
    point.version =
        ForkStateVersion(last.appended_version, next_version, source.conversation.version);
  }
  for (const ViewState& s : source.states) {
    if (s.version <= point.version &&
        (point.state == nullptr || s.compaction_version > point.state->compaction_version)) {
      point.state = &s;
    }
  }
  if (point.state == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "conversation '", key.conversation_id, "' has no view state recorded at version ",
        point.version, " to fork from"));
  }
  // Chunk ids only grow: those the states kept name are the ones the
  // history through the fork point can show.
  for (const ViewState& s : source.states) {
    if (s.version > point.version || s.compaction_version > point.state->compaction_version) {
      continue;
    }
    for (int64_t id : s.chunk_ids) point.last_chunk = std::max(point.last_chunk, id);
  }
  return point;
}

void MemoryStorage::ApplyForkState(ConversationState& state, const ForkPlan& point) {
  const ViewState s = *point.state;  // A copy: it may be one of state.states.
  Conversation& c = state.conversation;
  c.model = s.model;
  c.system_prompt = s.system_prompt;
  c.pinned_instructions = s.pinned_instructions;
  // The profile's overrides as they were; the compaction policy as it is.
  const std::optional<CompactionPolicy> policy = c.overrides.policy;
  c.overrides = s.overrides;
  c.overrides.policy = policy;
  c.summarized_through = s.summarized_through;
  c.prune_boundary = s.prune_boundary;
  c.token_correction = s.token_correction;
  c.overflow_correction = s.overflow_correction;
  c.prompt_limit = s.prompt_limit;
  state.items.resize(point.at);
  for (Item& item : state.items) {
    item.appended_version = std::min(item.appended_version, point.version);
  }
  for (const auto& [sequence, pinned] : s.pins) {
    if (sequence >= 1 && sequence <= point.at) state.items[sequence - 1].data.pinned = pinned;
  }
  c.item_count = point.at;
  c.last_sequence = point.at;
  c.last_turn_index = point.at > 0 ? state.items.back().turn_index : 0;
  c.item_tokens = 0;
  for (const Item& item : state.items) c.item_tokens += item.data.token_count;
  const ForkChunks chunks = PlanForkChunks(state.chunks, s, point.last_chunk, point.at);
  for (size_t i = 0; i < state.chunks.size(); ++i) {
    state.chunks[i].superseded_by = chunks.superseded_by[i];
  }
  c.summarized_through = chunks.summarized_through;
  if (!chunks.emptied.empty()) Retire(state, chunks.emptied, {});
  std::erase_if(state.states, [&](const ViewState& v) {
    return v.version > point.version || v.compaction_version > s.compaction_version;
  });
  state.index = nullptr;
}

absl::StatusOr<ConversationState> MemoryStorage::ForkOf(const ConversationState& source,
                                                        const ForkRequest& request) {
  ASSIGN_OR_RETURN(const int64_t at, ForkPoint(source.conversation,
                                                            request.at_sequence));
  ASSIGN_OR_RETURN(const ForkPlan point, PlanFork(source, request.source, at));
  ConversationState fork;
  fork.conversation = source.conversation;
  fork.items = source.items;
  fork.chunks = source.chunks;
  fork.states = source.states;
  fork.continued_from_key = source.continued_from_key;
  // Chunks written after the state are not the fork's.
  std::erase_if(fork.chunks,
                [&](const SummaryChunk& c) { return c.chunk_id > point.last_chunk; });
  ApplyForkState(fork, point);
  Conversation& c = fork.conversation;
  c.key = request.fork;
  c.storage_key = ++last_storage_key_;
  if (request.metadata.has_value()) c.metadata = *request.metadata;
  c.version = point.version;
  c.compaction_version = point.state->compaction_version;
  c.forked_from = request.source.conversation_id;
  c.forked_from_key = source.conversation.storage_key;
  c.forked_at = at;
  c.lease_token = 0;
  c.lease_active = false;
  c.create_time = c.update_time = Now();
  int64_t copied_bytes = 0;
  for (const Item& item : fork.items) copied_bytes += StoredBytes(item.data);
  fork.stored_bytes =
      StoredBytes(c.system_prompt, c.pinned_instructions, c.metadata, c.overrides) + copied_bytes;
  for (const SummaryChunk& chunk : fork.chunks) fork.stored_bytes += ChunkBytes(chunk);
  // The copies count to the source, not to the tenant again.
  RETURN_IF_ERROR(CheckTenantLimits(request.fork.tenant_id, UsageOf(request.fork.tenant_id),
                                    fork.stored_bytes - copied_bytes, 1,
                                    request.tenant_limits));
  AddEvents(fork, {ForkedEvent(request, at)}, c.create_time);
  return fork;
}

absl::StatusOr<Conversation> MemoryStorage::ForkConversation(const CallContext& ctx,
                                                             const ForkRequest& request) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * source, Find(request.source));
  auto& tenant = tenants_[request.fork.tenant_id];
  if (tenant.contains(request.fork.conversation_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("conversation '", request.fork.conversation_id, "' already exists"));
  }
  ASSIGN_OR_RETURN(ConversationState fork, ForkOf(*source, request));
  return tenant.emplace(request.fork.conversation_id, std::move(fork)).first->second.conversation;
}

void MemoryStorage::MoveContinuations(std::map<std::string, ConversationState>& tenant,
                                      const std::string& from_id, int64_t from_key,
                                      const std::string& to_id, int64_t to_key) {
  for (auto& [id, other] : tenant) {
    if (other.conversation.continued_from == from_id &&
        (other.continued_from_key == 0 || other.continued_from_key == from_key)) {
      other.conversation.continued_from = to_id;
      other.continued_from_key = to_key;
    }
  }
}

absl::StatusOr<RewindResult> MemoryStorage::RewindConversation(const CallContext& ctx,
                                                               const RewindRequest& request) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(request.key));
  auto& tenant = tenants_[request.key.tenant_id];
  if (!request.idempotency_key.empty()) {
    auto seen = state->idempotency.find(request.idempotency_key);
    if (seen != state->idempotency.end()) {
      if (seen->second.fingerprint != RewindFingerprint(request)) {
        return absl::AlreadyExistsError("idempotency_key: already used for a different request");
      }
      RewindResult replay;
      replay.conversation = state->conversation;
      ASSIGN_OR_RETURN(ConversationState * abandoned, Find(request.abandoned));
      replay.abandoned = abandoned->conversation;
      replay.replayed = true;
      return replay;
    }
  }
  RETURN_IF_ERROR(CheckRewindPoint(state->conversation, request.to_sequence));
  if (tenant.contains(request.abandoned.conversation_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("conversation '", request.abandoned.conversation_id, "' already exists"));
  }
  ASSIGN_OR_RETURN(const ForkPlan point, PlanFork(*state, request.key, request.to_sequence));
  ForkRequest whole;
  whole.source = request.key;
  whole.fork = request.abandoned;
  whole.tenant_limits = request.tenant_limits;
  ASSIGN_OR_RETURN(ConversationState abandoned, ForkOf(*state, whole));
  abandoned.conversation.forked_at = request.to_sequence;
  // Forks past the point share those items with the abandoned branch now,
  // and the conversations continued from this one carried items the
  // abandoned branch holds.
  Conversation& c = state->conversation;
  for (auto& [id, other] : tenant) {
    Conversation& o = other.conversation;
    if (o.forked_from == request.key.conversation_id && o.forked_from_key == c.storage_key &&
        o.forked_at > request.to_sequence) {
      o.forked_from = request.abandoned.conversation_id;
      o.forked_from_key = abandoned.conversation.storage_key;
    }
  }
  MoveContinuations(tenant, request.key.conversation_id, c.storage_key,
                    request.abandoned.conversation_id, abandoned.conversation.storage_key);
  if (!c.forked_from.empty() && request.to_sequence < c.forked_at) {
    // Below its own fork point: the abandoned fork holds what it shared
    // with its source, and takes its place as that source's fork.
    abandoned.conversation.forked_from = c.forked_from;
    abandoned.conversation.forked_from_key = c.forked_from_key;
    abandoned.conversation.forked_at = c.forked_at;
    c.forked_at = request.to_sequence;
  }
  const int64_t moved = c.last_sequence - request.to_sequence;
  std::vector<int64_t> gone;
  for (size_t i = request.to_sequence; i < state->items.size(); ++i) {
    state->stored_bytes -= StoredBytes(state->items[i].data);
    gone.push_back(state->items[i].sequence);
  }
  ApplyForkState(*state, point);
  for (CompactionEvent& e : state->events) e.detail = EraseEventFacts(e.detail, gone, kRewoundText);
  std::erase_if(state->idempotency, [&](const auto& record) {
    return record.second.last_sequence > request.to_sequence;
  });
  for (const auto& [id, proposal] : state->proposals) {
    state->stored_bytes -=
        static_cast<int64_t>(proposal.body.size() + proposal.applied_answer.size()) +
        kProposalRowBytes;
  }
  state->proposals.clear();
  c.version += 1;
  c.compaction_version += 1;
  // Replicas' copies of the history are read again (items left it).
  c.redactions += 1;
  c.lease_token += 1;
  c.lease_active = false;
  state->lease_expires = absl::InfinitePast();
  state->lease_holder.clear();
  c.update_time = Now();
  RecordState(*state);
  AddEvents(*state, {RewoundEvent(request, moved)}, c.update_time);
  if (!request.idempotency_key.empty()) {
    state->idempotency[request.idempotency_key] = IdempotencyRecord{
        RewindFingerprint(request), request.to_sequence, request.to_sequence, c.version};
  }
  RewindResult result;
  result.conversation = c;
  result.abandoned =
      tenant.emplace(request.abandoned.conversation_id, std::move(abandoned)).first->second
          .conversation;
  return result;
}

absl::StatusOr<Page<Conversation>> MemoryStorage::ListForks(const CallContext& ctx,
                                                            const ConversationKey& key,
                                                            const std::string& after_id,
                                                            const PageLimit& limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * source, Find(key));
  const int64_t incarnation = source->conversation.storage_key;
  std::vector<Conversation> out;
  const auto& tenant = tenants_[key.tenant_id];
  for (auto it = tenant.upper_bound(after_id);
       it != tenant.end() && static_cast<int>(out.size()) <= limit.rows; ++it) {
    const Conversation& c = it->second.conversation;
    if (c.forked_from == key.conversation_id && c.forked_from_key == incarnation) out.push_back(c);
  }
  return TakePage(std::move(out), limit, [](const Conversation& c) { return PageBytes(c); });
}

}  // namespace convstate::in_memory
