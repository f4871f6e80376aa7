#include "storage/memory_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "services/common/status_macros.h"
#include "storage/rules.h"

namespace convstate::in_memory {

absl::StatusOr<RedactResult> MemoryStorage::RedactItems(const CallContext& ctx,
                                                        const RedactRequest& request) {
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
  auto& tenant = tenants_[request.key.tenant_id];
  // Before anything is erased: the lineage's size is checked.
  ASSIGN_OR_RETURN(const Lineage levels, ContinuedFrom(tenant, request.key.conversation_id,
                                                       state->conversation.storage_key));
  // The forks and sources that share the items (each holds its copy).
  std::vector<ForkLink> family;
  for (const auto& [id, member] : tenant) {
    const Conversation& m = member.conversation;
    family.push_back(ForkLink{id, m.storage_key, m.forked_from_key, m.forked_at});
  }
  const Conversation& erased_in = state->conversation;
  ASSIGN_OR_RETURN(const auto sharing,
                   ForkFamilyErasure(family,
                                     ForkLink{request.key.conversation_id, erased_in.storage_key,
                                              erased_in.forked_from_key, erased_in.forked_at},
                                     request.sequences));
  RedactResult result;
  // Chunks retired here, by conversation: what copies elsewhere came from.
  std::map<std::string, std::set<int64_t>> retired;
  const std::vector<int64_t> emptied =
      EraseItems(*state, request.sequences, request.digest_key, request, &result.items);
  result.chunks_removed = static_cast<int64_t>(emptied.size());
  retired[request.key.conversation_id].insert(emptied.begin(), emptied.end());
  Erased(*state, RedactedEvent(request, result.chunks_removed));
  result.compaction_version = state->conversation.compaction_version;
  EraseLineage(tenant, levels, request, retired, result);
  for (const auto& [link, seqs] : sharing) {
    ConversationState& copy = tenant.at(link.id);
    RedactRequest here = request;
    here.key = copy.conversation.key;
    here.sequences = seqs;
    const std::vector<int64_t> emptied =
        EraseItems(copy, seqs, request.digest_key, here, nullptr);
    Erased(copy, RedactedEvent(here, static_cast<int64_t>(emptied.size())));
    // And what was continued from the copy.
    ASSIGN_OR_RETURN(const Lineage continued,
                     ContinuedFrom(tenant, link.id, copy.conversation.storage_key));
    std::map<std::string, std::set<int64_t>> retired_there;
    retired_there[link.id].insert(emptied.begin(), emptied.end());
    EraseLineage(tenant, continued, here, std::move(retired_there), result);
  }
  return result;
}

absl::StatusOr<MemoryStorage::Lineage> MemoryStorage::ContinuedFrom(
    const std::map<std::string, ConversationState>& tenant, const std::string& root_id,
    int64_t root_key) {
  // The conversations continued from the root, and from those, level by
  // level: by incarnation (storage_key), each once, at most kMaxLineage.
  Lineage levels;
  std::vector<std::pair<std::string, int64_t>> frontier = {{root_id, root_key}};
  absl::flat_hash_set<int64_t> visited = {root_key};
  while (!frontier.empty()) {
    std::vector<std::pair<std::string, int64_t>> next;
    for (const auto& [id, continued] : tenant) {
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
  return levels;
}

void MemoryStorage::EraseLineage(std::map<std::string, ConversationState>& tenant,
                                 const Lineage& levels, const RedactRequest& request,
                                 std::map<std::string, std::set<int64_t>> retired,
                                 RedactResult& result) {
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
}

std::vector<int64_t> MemoryStorage::EraseItems(ConversationState& state,
                                               const std::vector<int64_t>& seqs,
                                               const std::string& digest_key,
                                               const RedactRequest& request,
                                               std::vector<Item>* items) {
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

void MemoryStorage::Retire(ConversationState& state, const std::vector<int64_t>& retire,
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

void MemoryStorage::Erased(ConversationState& state, const CompactionEvent& event) {
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

}  // namespace convstate::in_memory
