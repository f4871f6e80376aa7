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

absl::StatusOr<Conversation> MemoryStorage::ForkConversation(const CallContext& ctx,
                                                             const ForkRequest& request) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * source, Find(request.source));
  if (tenants_[request.fork.tenant_id].contains(request.fork.conversation_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("conversation '", request.fork.conversation_id, "' already exists"));
  }
  const Conversation& from = source->conversation;
  ASSIGN_OR_RETURN(const int64_t at, ForkPoint(from, request.at_sequence));
  // The state the fork starts from: the last one recorded at the version
  // its last item was appended at (or before, see ForkStateVersion).
  int64_t version = 0;
  if (at > 0) {
    const Item& last = source->items[at - 1];
    std::vector<Item> turn;
    bool went_on = false;
    for (const Item& item : source->items) {
      if (item.turn_index == last.turn_index) turn.push_back(item);
      went_on |= item.sequence > at && item.appended_version == last.appended_version &&
                 item.data.kind != ItemKind::kSummaryMarker;
    }
    RETURN_IF_ERROR(CheckForkSplit(request.source, at, turn));
    version = ForkStateVersion(last.appended_version, went_on);
  }
  const ViewState* state = nullptr;
  for (const ViewState& s : source->states) {
    if (s.version <= version && (state == nullptr || s.compaction_version > state->compaction_version)) {
      state = &s;
    }
  }
  if (state == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "conversation '", request.source.conversation_id, "' has no view state recorded at version ",
        version, " to fork from"));
  }
  ConversationState fork;
  Conversation& c = fork.conversation;
  c = from;
  c.key = request.fork;
  c.storage_key = ++last_storage_key_;
  if (request.metadata.has_value()) c.metadata = *request.metadata;
  c.model = state->model;
  c.system_prompt = state->system_prompt;
  c.pinned_instructions = state->pinned_instructions;
  // The profile's overrides as they were; the compaction policy as it is.
  c.overrides = state->overrides;
  c.overrides.policy = from.overrides.policy;
  c.summarized_through = state->summarized_through;
  c.prune_boundary = state->prune_boundary;
  c.token_correction = state->token_correction;
  c.overflow_correction = state->overflow_correction;
  c.prompt_limit = state->prompt_limit;
  c.version = version;
  c.compaction_version = state->compaction_version;
  c.forked_from = request.source.conversation_id;
  c.forked_from_key = from.storage_key;
  c.forked_at = at;
  c.lease_token = 0;
  c.lease_active = false;
  c.create_time = c.update_time = Now();
  fork.continued_from_key = source->continued_from_key;
  fork.items.assign(source->items.begin(), source->items.begin() + at);
  for (const auto& [sequence, pinned] : state->pins) {
    if (sequence >= 1 && sequence <= at) fork.items[sequence - 1].data.pinned = pinned;
  }
  c.item_count = at;
  c.last_sequence = at;
  c.last_turn_index = at > 0 ? fork.items.back().turn_index : 0;
  c.item_tokens = 0;
  std::vector<ItemData> copied;
  for (const Item& item : fork.items) {
    c.item_tokens += item.data.token_count;
    copied.push_back(item.data);
  }
  // Chunks ids only grow: those the states kept name are the ones the
  // fork's history can show.
  int64_t last_chunk = 0;
  for (const ViewState& s : source->states) {
    if (s.version > version || s.compaction_version > state->compaction_version) continue;
    for (int64_t id : s.chunk_ids) last_chunk = std::max(last_chunk, id);
    fork.states.push_back(s);
  }
  fork.stored_bytes =
      StoredBytes(c.system_prompt, c.pinned_instructions, c.metadata, c.overrides) +
      StoredBytes(copied);
  for (const SummaryChunk& chunk : source->chunks) {
    if (chunk.chunk_id > last_chunk) continue;
    SummaryChunk kept = chunk;
    kept.superseded_by = ForkedSupersededBy(chunk, state->chunk_ids, last_chunk);
    fork.stored_bytes += ChunkBytes(kept);
    fork.chunks.push_back(std::move(kept));
  }
  RETURN_IF_ERROR(CheckTenantLimits(request.fork.tenant_id, UsageOf(request.fork.tenant_id),
                                    fork.stored_bytes, 1, request.tenant_limits));
  AddEvents(fork, {ForkedEvent(request, at)}, c.create_time);
  return tenants_[request.fork.tenant_id]
      .emplace(request.fork.conversation_id, std::move(fork))
      .first->second.conversation;
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
