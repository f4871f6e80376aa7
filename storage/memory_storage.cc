#include "storage/memory_storage.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/sha256.h"
#include "services/common/status_macros.h"
#include "storage/history_index.h"
#include "storage/rules.h"
#include "storage/paging.h"

namespace convstate {
namespace {

struct IdempotencyRecord {
  std::string fingerprint;
  int64_t first_sequence = 0;
  int64_t last_sequence = 0;
  int64_t version = 0;
};

struct ConversationState {
  Conversation conversation;
  std::string lease_holder;
  absl::Time lease_expires = absl::InfinitePast();
  std::vector<Item> items;  // items[i].sequence == i + 1
  // What it stores, as its tenant's byte limit counts it (TenantUsage).
  int64_t stored_bytes = 0;
  std::vector<SummaryChunk> chunks;
  std::vector<CompactionEvent> events;
  std::map<std::string, IdempotencyRecord> idempotency;
  // GetContextAt: what each compaction_version's views were built from.
  std::vector<ViewState> states;
  // When idle compaction is due; InfiniteFuture: not.
  absl::Time idle_due = absl::InfiniteFuture();
  // Compaction proposals by id, and the last id given.
  std::map<int64_t, ProposalRecord> proposals;
  int64_t last_proposal_id = 0;
  // The incarnation (storage_key) of the conversation this one continues;
  // 0 if none.
  int64_t continued_from_key = 0;
  // SearchHistory's index of `items`, brought up to date by each search;
  // null after a redaction.
  std::shared_ptr<HistoryIndex> index;
};

absl::Status NotFound(const ConversationKey& key) {
  return absl::NotFoundError(
      absl::StrCat("conversation '", key.conversation_id, "' not found"));
}

class MemoryStorage final : public Storage {
 public:
  explicit MemoryStorage(const Clock* clock) : clock_(clock) {}

  absl::StatusOr<Conversation> CreateConversation(
      const CallContext& ctx, const NewConversation& nc) override {
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

  absl::StatusOr<Conversation> GetConversation(
      const CallContext& ctx, const ConversationKey& key) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    return state->conversation;
  }

  absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& ctx,
                                             const std::string& tenant_id) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    return UsageOf(tenant_id);
  }

  absl::StatusOr<Page<Conversation>> ListConversations(const CallContext& ctx,
                                                       const std::string& tenant_id,
                                                       const std::string& after_id,
                                                       const PageLimit& limit) override {
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

  absl::StatusOr<int64_t> DeleteConversation(const CallContext& ctx,
                                             const ConversationKey& key) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    int64_t items = state->conversation.item_count;
    tenants_[key.tenant_id].erase(key.conversation_id);
    return items;
  }

  absl::StatusOr<AppendResult> AppendItems(const CallContext& ctx,
                                           const AppendRequest& request) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    if (request.items.empty()) {
      return absl::InvalidArgumentError("items: at least one item is required");
    }
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(request.key));
    return AppendTo(*state, request);
  }

  // AppendItems to `state`, under the lock.
  absl::StatusOr<AppendResult> AppendTo(ConversationState& state, const AppendRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  absl::StatusOr<HistoryHits> SearchHistory(const CallContext& ctx,
                                            const HistorySearch& search) override {
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

  absl::StatusOr<Page<Item>> ListItems(const CallContext& ctx, const ConversationKey& key,
                                       int64_t after_sequence, const PageLimit& limit) override {
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

  absl::StatusOr<ContextSnapshot> LoadContext(const CallContext& ctx,
                                              const ConversationKey& key) override {
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

  absl::StatusOr<ContextDelta> LoadContextSince(const CallContext& ctx,
                                                const ConversationKey& key,
                                                const Conversation* held) override {
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

  absl::StatusOr<CompactionResult> CommitCompaction(const CallContext& ctx,
                                                    const CompactionCommit& commit) override {
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

  absl::Status Ping(const CallContext& ctx) override {
    return CheckDeadline(ctx, clock_->Now());
  }

  absl::StatusOr<Item> SetPinned(const CallContext& ctx, const ConversationKey& key,
                                 int64_t sequence, bool pinned) override {
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

  absl::StatusOr<RedactResult> RedactItems(const CallContext& ctx,
                                           const RedactRequest& request) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(request.key));
    for (int64_t s : request.sequences) {
      if (s < 1 || s > static_cast<int64_t>(state->items.size())) {
        return absl::NotFoundError(absl::StrCat("conversation '", request.key.conversation_id,
                                                "' has no item ", s));
      }
      if (state->items[s - 1].data.kind == ItemKind::kSummaryMarker) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequences: item ", s, " is a summary marker, not content"));
      }
    }
    // The conversations continued from this one, and from those, level by
    // level, before anything is erased: by incarnation (storage_key), each
    // once, at most kMaxLineage.
    auto& tenant = tenants_[request.key.tenant_id];
    std::vector<std::vector<std::string>> levels;
    {
      std::vector<std::pair<std::string, int64_t>> frontier = {
          {request.key.conversation_id, state->conversation.storage_key}};
      absl::flat_hash_set<int64_t> visited = {state->conversation.storage_key};
      while (!frontier.empty()) {
        std::vector<std::pair<std::string, int64_t>> next;
        for (auto& [id, continued] : tenant) {
          const std::string& parent = continued.conversation.continued_from;
          const int64_t from_key = continued.continued_from_key;
          const bool child = std::any_of(frontier.begin(), frontier.end(), [&](const auto& p) {
            return p.first == parent && (from_key == 0 || from_key == p.second);
          });
          if (parent.empty() || !child) continue;
          if (!visited.insert(continued.conversation.storage_key).second) continue;
          if (visited.size() > kMaxLineage) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "the erasure would reach more than ", kMaxLineage,
                " conversations continued from this one; nothing was erased"));
          }
          next.emplace_back(id, continued.conversation.storage_key);
        }
        if (!next.empty()) {
          levels.emplace_back();
          for (const auto& [id, key] : next) levels.back().push_back(id);
        }
        frontier = std::move(next);
      }
    }
    RedactResult result;
    // Chunks retired here, by conversation: what copies elsewhere came from.
    std::map<std::string, std::set<int64_t>> retired;
    const std::vector<int64_t> emptied =
        EraseItems(*state, request.sequences, request.digest_key, request, &result.items);
    result.chunks_removed = static_cast<int64_t>(emptied.size());
    retired[request.key.conversation_id].insert(emptied.begin(), emptied.end());
    Erased(*state, RedactedEvent(request, result.chunks_removed));
    result.compaction_version = state->conversation.compaction_version;
    // Down the lineage: their copies of what was retired go too, and the
    // items carried over from an erased one.
    std::map<std::string, std::set<std::string>> erased;
    for (int64_t s : request.sequences) erased[request.key.conversation_id].insert(absl::StrCat(s));
    for (const std::vector<std::string>& level : levels) {
      for (const std::string& id : level) {
        ConversationState& continued = tenant.at(id);
        const std::string& parent = continued.conversation.continued_from;
        const ContinuedErasure erasure = EraseContinued(continued.chunks, retired);
        int64_t removed = static_cast<int64_t>(erasure.retire.size());
        if (!erasure.retire.empty()) {
          Retire(continued, erasure.retire, erasure.reactivate);
          retired[id].insert(erasure.retire.begin(), erasure.retire.end());
        }
        std::vector<int64_t> carried;
        for (const Item& item : continued.items) {
          auto from = item.data.metadata.find(kContinuedFromSequenceKey);
          if (from != item.data.metadata.end() && !item.redacted &&
              erased[parent].contains(from->second)) {
            carried.push_back(item.sequence);
          }
        }
        if (!carried.empty()) {
          const std::vector<int64_t> copies = EraseItems(continued, carried, "", request, nullptr);
          retired[id].insert(copies.begin(), copies.end());
          removed += static_cast<int64_t>(copies.size());
          for (int64_t s : carried) erased[id].insert(absl::StrCat(s));
        }
        if (erasure.retire.empty() && carried.empty()) continue;
        result.continued_chunks_removed += removed;
        Erased(continued, ContinuedErasedEvent(request, removed));
      }
    }
    return result;
  }

  // Erases `seqs` of `state` (tombstones, with digests under `digest_key`),
  // retires every chunk derived from them, and makes their idempotency
  // records forget; returns the chunks retired. The items as they now are
  // go to `items` when given.
  static std::vector<int64_t> EraseItems(ConversationState& state,
                                         const std::vector<int64_t>& seqs,
                                         const std::string& digest_key,
                                         const RedactRequest& request, std::vector<Item>* items) {
    Conversation& c = state.conversation;
    for (int64_t s : seqs) {
      Item& item = state.items[s - 1];
      if (!item.redacted) {
        item.redacted = true;
        item.redacted_digest = RedactedDigest(digest_key, item.data.content);
        state.stored_bytes += StoredBytes({ItemData{item.data.role, item.data.kind,
                                                    request.tombstone, item.data.tool_name,
                                                    item.data.tool_call_id}}) -
                              StoredBytes({item.data});
        c.item_tokens += request.tombstone_tokens - item.data.token_count;
        item.data.content = request.tombstone;
        item.data.metadata.clear();
        item.data.token_count = request.tombstone_tokens;
      }
      if (items != nullptr) items->push_back(item);
    }
    // Every erasure, even of items already erased (PostgresStorage counts
    // them alike): what replicas hold of the history is read again.
    c.redactions += 1;
    state.index = nullptr;
    // What was derived from the erased items: the conversation's
    // compaction proposals go, and the audit trail's fact texts of them
    // give way to the tombstone.
    for (const auto& [id, proposal] : state.proposals) {
      state.stored_bytes -=
          static_cast<int64_t>(proposal.body.size() + proposal.applied_answer.size()) +
          kProposalRowBytes;
    }
    state.proposals.clear();
    for (CompactionEvent& e : state.events) {
      e.detail = EraseEventFacts(e.detail, seqs, request.tombstone);
    }
    std::vector<int64_t> emptied;
    if (std::optional<int64_t> cut = RedactionCut(state.chunks, seqs)) {
      for (const SummaryChunk& chunk : state.chunks) {
        if (chunk.through_sequence >= *cut && chunk.summarizer_model != kRedactedChunkModel) {
          emptied.push_back(chunk.chunk_id);
        }
      }
      // Chunks that only a retired fold superseded are active again.
      std::vector<int64_t> reactivate;
      for (const SummaryChunk& chunk : state.chunks) {
        if (chunk.summarizer_model != kRedactedChunkModel && chunk.through_sequence < *cut &&
            std::find(emptied.begin(), emptied.end(), chunk.superseded_by) != emptied.end()) {
          reactivate.push_back(chunk.chunk_id);
        }
      }
      Retire(state, emptied, reactivate);
    }
    for (auto& [key, record] : state.idempotency) {
      for (int64_t s : seqs) {
        if (s >= record.first_sequence && s <= record.last_sequence) record.fingerprint = "redacted";
      }
    }
    return emptied;
  }

  absl::StatusOr<ProposalRecord> SaveProposal(const CallContext& ctx, const ConversationKey& key,
                                              const std::string& body, absl::Duration ttl,
                                              const TenantLimits& limits,
                                              int64_t compaction_version) override {
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

  absl::StatusOr<ProposalRecord> GetProposal(const CallContext& ctx, const ConversationKey& key,
                                             int64_t proposal_id) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    auto it = state->proposals.find(proposal_id);
    if (it == state->proposals.end() || it->second.expire_time <= Now()) {
      return ProposalNotFound(key, proposal_id);
    }
    return it->second;
  }

  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    state->idle_due = due.value_or(absl::InfiniteFuture());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext& ctx, absl::Time now,
                                                         int limit) override {
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

  absl::StatusOr<RevertResult> RevertCompaction(const CallContext& ctx,
                                                const RevertRequest& request) override {
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

  absl::StatusOr<std::optional<CompactionLease>> TryAcquireCompactionLease(
      const CallContext& ctx, const ConversationKey& key, const std::string& holder,
      absl::Duration duration) override {
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

  absl::Status ReleaseCompactionLease(const CallContext& ctx, const ConversationKey& key,
                                      const CompactionLease& lease) override {
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

  absl::StatusOr<ContextSnapshot> LoadContextAt(const CallContext& ctx, const ConversationKey& key,
                                                int64_t version,
                                                int64_t compaction_version) override {
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

  absl::StatusOr<Conversation> UpdateConversation(const CallContext& ctx,
                                                 const ConversationKey& key,
                                                 const ConversationUpdate& u) override {
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

  absl::Status SaveTokenCounts(const CallContext& ctx, const ConversationKey& key,
                               const TokenRecount& recount) override {
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

  absl::StatusOr<Conversation> RecordProviderOverflow(const CallContext& ctx,
                                                     const ConversationKey& key,
                                                     double correction, int64_t prompt_limit,
                                                     const CompactionEvent& event) override {
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

  absl::Status RecordCompactionEvents(const CallContext& ctx, const ConversationKey& key,
                                      const std::vector<CompactionEvent>& events) override {
    RETURN_IF_ERROR(CheckDeadline(ctx, clock_->Now()));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(ConversationState * state, Find(key));
    AddEvents(*state, events, Now());
    return absl::OkStatus();
  }

  absl::StatusOr<Page<SummaryChunk>> ListSummaries(const CallContext& ctx,
                                                   const ConversationKey& key,
                                                   bool include_superseded, int64_t after_chunk_id,
                                                   const PageLimit& limit) override {
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

  absl::StatusOr<Page<CompactionEvent>> ListCompactionEvents(const CallContext& ctx,
                                                             const ConversationKey& key,
                                                             int64_t after_event_id,
                                                             const PageLimit& limit) override {
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

 private:
  static std::vector<SummaryChunk> Active(const ConversationState& state) {
    std::vector<SummaryChunk> out;
    for (const SummaryChunk& chunk : state.chunks) {
      if (chunk.superseded_by == 0) out.push_back(chunk);
    }
    return out;
  }

  // Records what views are built from now (at every compaction_version).
  static void RecordState(ConversationState& state) {
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

  TenantUsage UsageOf(const std::string& tenant_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TenantUsage usage;
    auto tenant = tenants_.find(tenant_id);
    if (tenant == tenants_.end()) return usage;
    for (const auto& [id, state] : tenant->second) {
      usage.conversations += 1;
      usage.stored_bytes += state.stored_bytes;
    }
    return usage;
  }

  // What a chunk, a view state and an audit row store here (PostgreSQL
  // counts the rows it writes).
  static constexpr int64_t kChunkRowBytes = 64;
  static constexpr int64_t kViewStateRowBytes = 64;
  static constexpr int64_t kEventRowBytes = 64;
  static int64_t ChunkBytes(const SummaryChunk& c) { return PageBytes(c) + kChunkRowBytes; }

  // Empties and retires the chunks `retire` (superseded by themselves,
  // model kRedactedChunkModel), makes `reactivate` active again, and moves
  // summarized_through back to the last active chunk.
  static void Retire(ConversationState& state, const std::vector<int64_t>& retire,
                     const std::vector<int64_t>& reactivate) {
    auto in = [](const std::vector<int64_t>& ids, int64_t id) {
      return std::find(ids.begin(), ids.end(), id) != ids.end();
    };
    int64_t summarized_through = 0;
    for (SummaryChunk& chunk : state.chunks) {
      if (in(retire, chunk.chunk_id)) {
        state.stored_bytes -= ChunkBytes(chunk) - ChunkBytes(SummaryChunk());
        SummaryChunk emptied;
        emptied.chunk_id = chunk.chunk_id;
        emptied.from_sequence = chunk.from_sequence;
        emptied.through_sequence = chunk.through_sequence;
        emptied.create_time = chunk.create_time;
        emptied.summarizer_model = kRedactedChunkModel;
        emptied.superseded_by = chunk.chunk_id;
        chunk = std::move(emptied);
        continue;
      }
      if (in(reactivate, chunk.chunk_id)) chunk.superseded_by = 0;
      if (chunk.superseded_by == 0) {
        summarized_through = std::max(summarized_through, chunk.through_sequence);
      }
    }
    if (!retire.empty()) state.conversation.summarized_through = summarized_through;
  }

  // A redaction or a revert changed `state`: its views are built anew
  // (compaction version), any compaction running on it loses its lease and
  // cannot commit what it read before, and `event` is written.
  void Erased(ConversationState& state, const CompactionEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Conversation& c = state.conversation;
    c.lease_token += 1;
    c.lease_active = false;
    state.lease_expires = absl::InfinitePast();
    state.lease_holder.clear();
    c.compaction_version += 1;
    c.update_time = Now();
    RecordState(state);
    AddEvents(state, {event}, c.update_time);
  }

  static void AddEvents(ConversationState& state, const std::vector<CompactionEvent>& events,
                        absl::Time now) {
    for (CompactionEvent e : events) {
      state.stored_bytes += static_cast<int64_t>(e.detail.size()) + kEventRowBytes;
      e.event_id = static_cast<int64_t>(state.events.size()) + 1;
      e.create_time = now;
      state.events.push_back(std::move(e));
    }
  }

  // Stored times are truncated to microseconds, as PostgreSQL keeps them.
  absl::Time Now() const {
    return absl::FromUnixMicros(absl::ToUnixMicros(clock_->Now()));
  }

  absl::StatusOr<ConversationState*> Find(const ConversationKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto tenant = tenants_.find(key.tenant_id);
    if (tenant == tenants_.end()) return NotFound(key);
    auto it = tenant->second.find(key.conversation_id);
    if (it == tenant->second.end()) return NotFound(key);
    // Whether the lease is still unexpired, as of now.
    it->second.conversation.lease_active = it->second.lease_expires > Now();
    return &it->second;
  }

  const Clock* const clock_;
  absl::Mutex mu_;
  // tenant id -> conversation id -> state.
  std::map<std::string, std::map<std::string, ConversationState>> tenants_
      ABSL_GUARDED_BY(mu_);
  int64_t last_storage_key_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<Storage> NewMemoryStorage(const Clock* clock) {
  return std::make_unique<MemoryStorage>(clock);
}

}  // namespace convstate
