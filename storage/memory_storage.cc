#include "storage/memory_storage.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "storage/history_index.h"
#include "storage/memory_storage_internal.h"
#include "storage/paging.h"
#include "storage/rules.h"

namespace convstate::in_memory {
namespace {

absl::Status NotFound(const ConversationKey& key) {
  return absl::NotFoundError(
      absl::StrCat("conversation '", key.conversation_id, "' not found"));
}

}  // namespace

MemoryStorage::MemoryStorage(const Clock* clock) : clock_(clock) {}

absl::StatusOr<Conversation> MemoryStorage::CreateConversation(const CallContext& ctx,
                                                               const NewConversation& nc) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  auto& tenant = tenants_[nc.key.tenant_id];
  if (tenant.contains(nc.key.conversation_id)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "conversation '", nc.key.conversation_id, "' already exists"));
  }
  if (nc.continued_from_key != 0) {
    absl::StatusOr<ConversationState*> source =
        Find(ConversationKey{nc.key.tenant_id, nc.continued_from});
    RETURN_IF_ERROR(CheckHandoffSource(
        nc, source.ok() && (*source)->conversation.storage_key == nc.continued_from_key
                ? std::optional((*source)->conversation.redactions)
                : std::nullopt));
  }
  const int64_t bytes =
      StoredBytes(nc.system_prompt, nc.pinned_instructions, nc.metadata, nc.overrides);
  RETURN_IF_ERROR(CheckTenantLimits(nc.key.tenant_id, UsageOf(nc.key.tenant_id), bytes, 1,
                                    nc.tenant_limits));
  ConversationState state;
  state.stored_bytes = bytes;
  Conversation& c = state.conversation;
  c.key = nc.key;
  c.model = nc.model;
  c.system_prompt = nc.system_prompt;
  c.pinned_instructions = nc.pinned_instructions;
  c.metadata = nc.metadata;
  c.overrides = nc.overrides;
  c.system_prompt_tokens = nc.system_prompt_tokens;
  c.pinned_instructions_tokens = nc.pinned_instructions_tokens;
  c.continued_from = nc.continued_from;
  state.continued_from_key = nc.continued_from_key;
  c.count_encoding = nc.count_encoding;
  c.create_time = c.update_time = Now();
  c.storage_key = ++last_storage_key_;
  if (!nc.continued_from.empty()) {
    int64_t facts = 0;
    for (SummaryChunk chunk : nc.carried_chunks) {
      chunk.chunk_id = static_cast<int64_t>(state.chunks.size()) + 1;
      chunk.create_time = c.create_time;
      facts += static_cast<int64_t>(chunk.facts.size());
      state.stored_bytes += ChunkBytes(chunk);
      state.chunks.push_back(std::move(chunk));
    }
    AddEvents(state, {ContinuedEvent(nc, facts)}, c.create_time);
  }
  RecordState(state);
  ConversationState& kept = tenant.emplace(nc.key.conversation_id, std::move(state)).first->second;
  if (!nc.carried_items.empty()) {
    // As one transaction: nothing is kept if the append is refused.
    if (absl::Status appended = AppendTo(kept, CarriedAppend(nc)).status(); !appended.ok()) {
      tenant.erase(nc.key.conversation_id);
      return appended;
    }
  }
  return kept.conversation;
}

absl::StatusOr<Conversation> MemoryStorage::GetConversation(const CallContext& ctx,
                                                            const ConversationKey& key) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  return state->conversation;
}

absl::StatusOr<TenantUsage> MemoryStorage::GetTenantUsage(const CallContext& ctx,
                                                          const std::string& tenant_id) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  return UsageOf(tenant_id);
}

absl::StatusOr<Page<Conversation>> MemoryStorage::ListConversations(const CallContext& ctx,
                                                                    const std::string& tenant_id,
                                                                    const std::string& after_id,
                                                                    const PageLimit& limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  std::vector<Conversation> out;
  auto tenant = tenants_.find(tenant_id);
  if (tenant == tenants_.end()) return Page<Conversation>();
  for (auto it = tenant->second.upper_bound(after_id);
       it != tenant->second.end() && static_cast<int>(out.size()) <= limit.rows; ++it) {
    out.push_back(it->second.conversation);
  }
  return TakePage(std::move(out), limit, [](const Conversation& c) { return PageBytes(c); });
}

absl::StatusOr<int64_t> MemoryStorage::DeleteConversation(const CallContext& ctx,
                                                          const ConversationKey& key) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  const Conversation& c = state->conversation;
  // Its forks keep reaching the copies they share (RelinkForks).
  auto& tenant = tenants_[key.tenant_id];
  std::vector<ForkLink> children;
  for (const auto& [id, other] : tenant) {
    const Conversation& o = other.conversation;
    if (o.forked_from == key.conversation_id && o.forked_from_key == c.storage_key) {
      children.push_back(ForkLink{id, o.storage_key, o.forked_from_key, o.forked_at, key.conversation_id});
    }
  }
  // Conversations continued from it go to its heir, or its source: an
  // erasure of what they carried reaches them there.
  const ForkLink* heir = ForkHeir(children);
  if (heir != nullptr || !c.forked_from.empty()) {
    MoveContinuations(tenant, key.conversation_id, c.storage_key,
                      heir != nullptr ? heir->id : c.forked_from,
                      heir != nullptr ? heir->key : c.forked_from_key);
  }
  for (const ForkLink& link : RelinkForks(
           ForkLink{key.conversation_id, c.storage_key, c.forked_from_key, c.forked_at,
                    c.forked_from},
           children)) {
    Conversation& o = tenant.at(link.id).conversation;
    o.forked_from = link.parent_id;
    o.forked_from_key = link.parent_key;
    o.forked_at = link.at;
  }
  int64_t items = c.item_count;
  tenant.erase(key.conversation_id);
  return items;
}

absl::StatusOr<AppendResult> MemoryStorage::AppendItems(const CallContext& ctx,
                                                        const AppendRequest& request) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  if (request.items.empty()) {
    return absl::InvalidArgumentError("items: at least one item is required");
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(request.key));
  return AppendTo(*state, request);
}

absl::StatusOr<AppendResult> MemoryStorage::AppendTo(ConversationState& state,
                                                     const AppendRequest& request) {
  Conversation& c = state.conversation;
  if (!request.idempotency_key.empty()) {
    auto seen = state.idempotency.find(request.idempotency_key);
    if (seen != state.idempotency.end()) {
      const IdempotencyRecord& rec = seen->second;
      if (rec.fingerprint != request.request_fingerprint) {
        return absl::AlreadyExistsError(
            "idempotency_key: already used for a different request");
      }
      AppendResult replay;
      replay.items.assign(state.items.begin() + (rec.first_sequence - 1),
                          state.items.begin() + rec.last_sequence);
      replay.version = rec.version;
      replay.replayed = true;
      return replay;
    }
  }
  RETURN_IF_ERROR(CheckAppend(c, request));
  RETURN_IF_ERROR(CheckConversationBytes(request, state.stored_bytes, StoredBytes(request)));
  RETURN_IF_ERROR(CheckTenantLimits(request.key.tenant_id, UsageOf(request.key.tenant_id),
                                    StoredBytes(request), 0, request.tenant_limits));
  const std::vector<ItemData>& items = request.items;
  const std::optional<UsageReport> usage = EstimatedUsage(c, request);
  AppendResult result;
  const absl::Time now = Now();
  result.items = NumberAppended(items, c.last_sequence, c.last_turn_index, c.version + 1);
  for (Item& item : result.items) {
    c.item_tokens += item.data.token_count;
    item.create_time = now;
  }
  state.items.insert(state.items.end(), result.items.begin(), result.items.end());
  c.last_sequence = state.items.back().sequence;
  c.last_turn_index = state.items.back().turn_index;
  c.item_count += static_cast<int64_t>(result.items.size());
  state.stored_bytes += StoredBytes(request);
  c.version += 1;
  c.update_time = now;
  c.token_correction = CorrectionAfter(c, usage);
  result.version = c.version;
  if (!request.idempotency_key.empty()) {
    state.idempotency[request.idempotency_key] = IdempotencyRecord{
        request.request_fingerprint, result.items.front().sequence,
        result.items.back().sequence, c.version};
  }
  return result;
}

absl::StatusOr<HistoryHits> MemoryStorage::SearchHistory(const CallContext& ctx,
                                                         const HistorySearch& search) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(search.key));
  const Conversation& c = state->conversation;
  // As PostgreSQL's word index: each item's words, kept from one search
  // to the next (a redaction starts it again).
  if (state->index == nullptr) state->index = std::make_unique<HistoryIndex>();
  for (int64_t s = state->index->through() + 1; s <= c.last_sequence; ++s) {
    state->index->Add(state->items[s - 1]);
  }
  return state->index->Search(search, c.item_count, SearchedThrough(search, c));
}

absl::StatusOr<Page<Item>> MemoryStorage::ListItems(const CallContext& ctx,
                                                    const ConversationKey& key,
                                                    int64_t after_sequence,
                                                    const PageLimit& limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  std::vector<Item> out;
  const int64_t size = static_cast<int64_t>(state->items.size());
  for (int64_t i = std::max<int64_t>(after_sequence, 0);
       i < size && static_cast<int>(out.size()) <= limit.rows; ++i) {
    out.push_back(state->items[i]);
  }
  return TakePage(std::move(out), limit, [](const Item& i) { return PageBytes(i); });
}

absl::StatusOr<ContextSnapshot> MemoryStorage::LoadContext(const CallContext& ctx,
                                                           const ConversationKey& key) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  ContextSnapshot snap;
  snap.conversation = state->conversation;
  snap.active_chunks = Active(*state);
  const int64_t marker = state->conversation.summarized_through;
  for (const Item& item : state->items) {
    if (item.sequence > marker) {
      snap.live_items.push_back(item);
    } else if (item.data.pinned) {
      snap.pinned_items.push_back(item);
    }
  }
  return snap;
}

absl::StatusOr<ContextDelta> MemoryStorage::LoadContextSince(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             const Conversation* held) {
  {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    ContextDelta delta;
    delta.kind = DeltaKind(state->conversation, held);
    if (delta.kind == ContextDelta::Kind::kUnchanged) return delta;
    if (delta.kind == ContextDelta::Kind::kAppended) {
      delta.snapshot.conversation = state->conversation;
      for (int64_t s = held->last_sequence; s < state->conversation.last_sequence; ++s) {
        delta.snapshot.live_items.push_back(state->items[s]);
      }
      return delta;
    }
  }
  ContextDelta delta;
  ASSIGN_OR_RETURN(delta.snapshot, LoadContext(ctx, key));
  return delta;
}

absl::Status MemoryStorage::Ping(const CallContext& ctx) {
  return CheckDeadline(ctx, clock_->Now());
}

absl::StatusOr<Item> MemoryStorage::SetPinned(const CallContext& ctx, const ConversationKey& key,
                                              int64_t sequence, bool pinned) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  if (sequence < 1 || sequence > static_cast<int64_t>(state->items.size()) ||
      state->items[sequence - 1].data.kind == ItemKind::kSummaryMarker) {
    return absl::NotFoundError(absl::StrCat("conversation '", key.conversation_id,
                                            "' has no item ", sequence,
                                            " that can be pinned"));
  }
  Item& item = state->items[sequence - 1];
  item.data.pinned = pinned;
  state->conversation.compaction_version += 1;
  state->conversation.update_time = Now();
  RecordState(*state);
  return item;
}

absl::Status MemoryStorage::SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                                       std::optional<absl::Time> due) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  state->idle_due = due.value_or(absl::InfiniteFuture());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConversationKey>> MemoryStorage::ClaimIdle(const CallContext& ctx,
                                                                      absl::Time now, int limit) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<absl::Time, ConversationState*>> due;
  for (auto& [tenant, conversations] : tenants_) {
    for (auto& [id, state] : conversations) {
      if (state.idle_due <= now) due.emplace_back(state.idle_due, &state);
    }
  }
  std::sort(due.begin(), due.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ConversationKey> keys;
  for (auto& [at, state] : due) {
    if (static_cast<int>(keys.size()) == limit) break;
    state->idle_due = absl::InfiniteFuture();
    keys.push_back(state->conversation.key);
  }
  return keys;
}

absl::StatusOr<ContextSnapshot> MemoryStorage::LoadContextAt(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             int64_t version,
                                                             int64_t compaction_version) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  const Conversation& c = state->conversation;
  if (version < 0 || version > c.version) {
    return absl::OutOfRangeError(absl::StrCat("version: conversation '", key.conversation_id,
                                              "' is at version ", c.version));
  }
  const ViewState* found = nullptr;
  for (const ViewState& s : state->states) {
    if (s.version > version) continue;
    if (compaction_version >= 0 ? s.compaction_version == compaction_version
                                : (found == nullptr ||
                                   s.compaction_version > found->compaction_version)) {
      found = &s;
    }
  }
  if (found == nullptr) {
    return absl::OutOfRangeError(absl::StrCat("no view state recorded for conversation '",
                                              key.conversation_id, "' at version ", version));
  }
  std::vector<SummaryChunk> chunks;
  for (const SummaryChunk& chunk : state->chunks) {
    if (std::find(found->chunk_ids.begin(), found->chunk_ids.end(), chunk.chunk_id) !=
        found->chunk_ids.end()) {
      chunks.push_back(chunk);
    }
  }
  std::vector<Item> items;
  for (const Item& item : state->items) {
    if (item.appended_version <= version) items.push_back(item);
  }
  return SnapshotAt(c, *found, version, std::move(chunks), std::move(items));
}

absl::StatusOr<Conversation> MemoryStorage::UpdateConversation(const CallContext& ctx,
                                                               const ConversationKey& key,
                                                               const ConversationUpdate& u) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  Conversation& c = state->conversation;
  RETURN_IF_ERROR(CheckUpdate(c, u));
  state->stored_bytes -=
      StoredBytes(c.system_prompt, c.pinned_instructions, c.metadata, c.overrides);
  if (u.model) c.model = *u.model;
  if (u.system_prompt) c.system_prompt = *u.system_prompt;
  if (u.pinned_instructions) c.pinned_instructions = *u.pinned_instructions;
  if (u.overrides) c.overrides = *u.overrides;
  state->stored_bytes +=
      StoredBytes(c.system_prompt, c.pinned_instructions, c.metadata, c.overrides);
  c.system_prompt_tokens = u.system_prompt_tokens;
  c.pinned_instructions_tokens = u.pinned_instructions_tokens;
  c.count_encoding = u.count_encoding;
  if (u.reset_overflow) {
    c.overflow_correction = 1.0;
    c.prompt_limit = 0;
  }
  c.compaction_version += 1;
  c.update_time = Now();
  RecordState(*state);
  AddEvents(*state, {u.event}, c.update_time);
  return c;
}

absl::Status MemoryStorage::SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                                            const TokenRecount& recount) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  for (const auto& [sequence, count] : recount.items) {
    if (sequence >= 1 && sequence <= static_cast<int64_t>(state->items.size())) {
      state->items[sequence - 1].data.token_count = count;
    }
  }
  for (const SummaryChunk& chunk : recount.chunks) {
    for (SummaryChunk& stored : state->chunks) {
      if (stored.chunk_id != chunk.chunk_id) continue;
      stored.token_count = chunk.token_count;
      stored.facts = chunk.facts;
      stored.constraints = chunk.constraints;
    }
  }
  state->conversation.count_encoding = recount.count_encoding;
  state->conversation.recounted = true;
  return absl::OkStatus();
}

absl::StatusOr<Conversation> MemoryStorage::RecordProviderOverflow(const CallContext& ctx,
                                                                   const ConversationKey& key,
                                                                   double correction,
                                                                   int64_t prompt_limit,
                                                                   const CompactionEvent& event) {
  RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConversationState * state, Find(key));
  Conversation& c = state->conversation;
  c.overflow_correction = std::max(c.overflow_correction, correction);
  c.prompt_limit = c.prompt_limit == 0 ? prompt_limit : std::min(c.prompt_limit, prompt_limit);
  c.compaction_version += 1;
  c.update_time = Now();
  RecordState(*state);
  AddEvents(*state, {event}, Now());
  return c;
}

std::vector<SummaryChunk> MemoryStorage::Active(const ConversationState& state) {
  std::vector<SummaryChunk> out;
  for (const SummaryChunk& chunk : state.chunks) {
    if (chunk.superseded_by == 0) out.push_back(chunk);
  }
  return out;
}

void MemoryStorage::RecordState(ConversationState& state) {
  const Conversation& c = state.conversation;
  ViewState s;
  s.compaction_version = c.compaction_version;
  s.version = c.version;
  s.model = c.model;
  s.system_prompt = c.system_prompt;
  s.pinned_instructions = c.pinned_instructions;
  s.overrides = c.overrides;
  s.summarized_through = c.summarized_through;
  s.prune_boundary = c.prune_boundary;
  s.token_correction = c.token_correction;
  s.overflow_correction = c.overflow_correction;
  s.prompt_limit = c.prompt_limit;
  for (const SummaryChunk& chunk : Active(state)) s.chunk_ids.push_back(chunk.chunk_id);
  // Pins change items in place here: keep every item's flag.
  for (const Item& item : state.items) s.pins.emplace_back(item.sequence, item.data.pinned);
  state.stored_bytes += static_cast<int64_t>(s.system_prompt.size() + s.pinned_instructions.size() +
                                             8 * (s.chunk_ids.size() + s.pins.size())) +
                        kViewStateRowBytes;
  if (!state.states.empty() && state.states.back().compaction_version == s.compaction_version) {
    state.states.back() = std::move(s);
  } else {
    state.states.push_back(std::move(s));
  }
}

TenantUsage MemoryStorage::UsageOf(const std::string& tenant_id) const {
  TenantUsage usage;
  auto tenant = tenants_.find(tenant_id);
  if (tenant == tenants_.end()) return usage;
  for (const auto& [id, state] : tenant->second) {
    usage.conversations += 1;
    // A fork's copies of its living source's items count to the source
    // (as migrations/0024 counts them).
    int64_t shared = 0;
    const Conversation& c = state.conversation;
    auto source = tenant->second.find(c.forked_from);
    if (!c.forked_from.empty() && source != tenant->second.end() &&
        source->second.conversation.storage_key == c.forked_from_key) {
      for (const Item& item : state.items) {
        if (item.sequence > c.forked_at) break;
        shared += StoredBytes(item.data);
      }
    }
    usage.stored_bytes += std::max<int64_t>(0, state.stored_bytes - shared);
  }
  return usage;
}

int64_t MemoryStorage::ChunkBytes(const SummaryChunk& c) { return PageBytes(c) + kChunkRowBytes; }

void MemoryStorage::AddEvents(ConversationState& state, const std::vector<CompactionEvent>& events,
                              absl::Time now) {
  for (CompactionEvent e : events) {
    state.stored_bytes += static_cast<int64_t>(e.detail.size()) + kEventRowBytes;
    e.event_id = static_cast<int64_t>(state.events.size()) + 1;
    e.create_time = now;
    state.events.push_back(std::move(e));
  }
}

absl::Time MemoryStorage::Now() const {
  return absl::FromUnixMicros(absl::ToUnixMicros(clock_->Now()));
}

absl::StatusOr<ConversationState*> MemoryStorage::Find(const ConversationKey& key) {
  auto tenant = tenants_.find(key.tenant_id);
  if (tenant == tenants_.end()) return NotFound(key);
  auto it = tenant->second.find(key.conversation_id);
  if (it == tenant->second.end()) return NotFound(key);
  // Whether the lease is still unexpired, as of now.
  it->second.conversation.lease_active = it->second.lease_expires > Now();
  return &it->second;
}

}  // namespace convstate::in_memory

namespace convstate {

std::unique_ptr<Storage> NewMemoryStorage(const Clock* clock) {
  return std::make_unique<in_memory::MemoryStorage>(clock);
}

}  // namespace convstate
