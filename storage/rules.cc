#include "storage/rules.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/common/sha256.h"
#include "services/common/status_macros.h"

namespace convstate {

absl::Status CheckCompaction(const Conversation& c, const std::vector<SummaryChunk>& active,
                             const CompactionCommit& commit) {
  if (commit.lease.has_value()) {
    if (c.storage_key != commit.lease->incarnation) {
      return absl::AbortedError(
          "the conversation was deleted and created again since its compaction lease was "
          "granted; this compaction is discarded");
    }
    if (c.lease_token != commit.lease->token || !c.lease_active) {
      return absl::AbortedError(
          "the compaction lease was lost (expired or taken over); this compaction is discarded");
    }
  }
  if (c.summarized_through != commit.expected_summarized_through ||
      c.prune_boundary != commit.expected_prune_boundary) {
    return absl::AbortedError(
        "the conversation was compacted concurrently; this compaction is discarded");
  }
  if (commit.expected_compaction_version >= 0 &&
      c.compaction_version != commit.expected_compaction_version) {
    return absl::AbortedError(absl::StrCat(
        "the conversation changed since this compaction was made (compaction_version ",
        commit.expected_compaction_version, ", now ", c.compaction_version, ")"));
  }
  if (commit.new_prune_boundary < commit.expected_prune_boundary ||
      commit.new_prune_boundary > c.last_sequence) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prune boundary ", commit.new_prune_boundary, " must be in ",
        commit.expected_prune_boundary, "..", c.last_sequence));
  }
  if (!commit.chunk.has_value()) {
    if (!commit.supersedes.empty()) {
      return absl::InvalidArgumentError("superseding chunks needs a new chunk");
    }
    return absl::OkStatus();
  }
  const SummaryChunk& chunk = *commit.chunk;
  if (chunk.text.empty()) return absl::InvalidArgumentError("summary text is empty");
  if (commit.supersedes.empty()) {
    if (chunk.from_sequence != c.summarized_through + 1 ||
        chunk.through_sequence < chunk.from_sequence ||
        chunk.through_sequence > c.last_sequence) {
      return absl::InvalidArgumentError(absl::StrCat(
          "summary range ", chunk.from_sequence, "..", chunk.through_sequence,
          " must start at ", c.summarized_through + 1, " and end by ", c.last_sequence));
    }
    return absl::OkStatus();
  }
  int64_t from = INT64_MAX, through = 0;
  for (int64_t id : commit.supersedes) {
    auto it = std::find_if(active.begin(), active.end(),
                           [id](const SummaryChunk& a) { return a.chunk_id == id; });
    if (it == active.end()) {
      return absl::AbortedError(absl::StrCat("chunk ", id, " is no longer active"));
    }
    from = std::min(from, it->from_sequence);
    through = std::max(through, it->through_sequence);
  }
  if (chunk.from_sequence != from || chunk.through_sequence != through) {
    return absl::InvalidArgumentError(absl::StrCat("a fold must cover ", from, "..", through));
  }
  return absl::OkStatus();
}

absl::Status CheckAppend(const Conversation& c, const AppendRequest& request) {
  if (request.expected_version.has_value() && *request.expected_version != c.version) {
    return absl::AbortedError(absl::StrCat("expected_version ", *request.expected_version,
                                           " but the conversation is at version ", c.version));
  }
  if (!request.expected_model.empty() && request.expected_model != c.model) {
    return absl::AbortedError(absl::StrCat("conversation '", c.key.conversation_id,
                                           "' is now bound to model '", c.model, "'"));
  }
  return absl::OkStatus();
}

std::optional<UsageReport> EstimatedUsage(const Conversation& c, const AppendRequest& request) {
  std::optional<UsageReport> usage = request.usage;
  if (usage.has_value()) usage->estimated_input_tokens = EstimatedPrompt(c, request.items);
  return usage;
}

double CorrectionAfter(const Conversation& c, const std::optional<UsageReport>& usage) {
  if (!usage.has_value() || !usage->correct) return c.token_correction;
  return UpdateCorrection(c.token_correction, usage->input_tokens, usage->estimated_input_tokens);
}

absl::Status CheckUpdate(const Conversation& c, const ConversationUpdate& u) {
  if (u.expected_compaction_version >= 0 && u.expected_compaction_version != c.compaction_version) {
    return absl::AbortedError(absl::StrCat(
        "conversation '", c.key.conversation_id, "' changed while it was being updated (at ",
        "compaction_version ", c.compaction_version, ", not ", u.expected_compaction_version,
        ")"));
  }
  return absl::OkStatus();
}

ItemData MarkerFor(const SummaryChunk& chunk) {
  ItemData marker;
  marker.role = Role::kSystem;
  marker.kind = ItemKind::kSummaryMarker;
  marker.content = absl::StrCat("summary chunk ", chunk.chunk_id, " covers items ",
                                chunk.from_sequence, "-", chunk.through_sequence);
  return marker;
}

int64_t StoredBytes(const ItemData& item) {
  int64_t n =
      static_cast<int64_t>(item.content.size() + item.tool_name.size() + item.tool_call_id.size()) +
      kItemRowBytes;
  for (const auto& [k, v] : item.metadata) n += static_cast<int64_t>(k.size() + v.size());
  return n;
}

int64_t StoredBytes(const std::vector<ItemData>& items) {
  int64_t n = 0;
  for (const ItemData& item : items) n += StoredBytes(item);
  return n;
}

int64_t StoredBytes(const std::string& system_prompt, const std::string& pinned_instructions,
                    const Metadata& metadata, const ProfileOverrides& overrides) {
  int64_t n = static_cast<int64_t>(system_prompt.size() + pinned_instructions.size()) +
              kConversationRowBytes + OverridesBytes(overrides);
  for (const auto& [k, v] : metadata) n += static_cast<int64_t>(k.size() + v.size());
  return n;
}

int64_t StoredBytes(const AppendRequest& request) {
  int64_t n = StoredBytes(request.items);
  if (!request.idempotency_key.empty()) {
    n += static_cast<int64_t>(request.idempotency_key.size() + request.request_fingerprint.size()) +
         kIdempotencyRowBytes;
  }
  if (request.usage.has_value()) n += kUsageRowBytes;
  return n;
}

absl::Status CheckTenantLimits(const std::string& tenant_id, const TenantUsage& usage,
                               int64_t adding, int64_t conversations,
                               const TenantLimits& limits) {
  if (conversations > 0 && limits.max_conversations > 0 &&
      usage.conversations + conversations > limits.max_conversations) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", tenant_id, "' holds ", usage.conversations,
        " conversations, its limit (max_conversations ", limits.max_conversations,
        "); delete conversations or raise the limit"));
  }
  if (adding > 0 && limits.max_stored_bytes > 0 &&
      usage.stored_bytes + adding > limits.max_stored_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", tenant_id, "' stores ", usage.stored_bytes, " bytes; ", adding,
        " more would pass its limit (max_stored_bytes ", limits.max_stored_bytes,
        "); delete conversations or raise the limit"));
  }
  return absl::OkStatus();
}

std::vector<Item> NumberAppended(const std::vector<ItemData>& items, int64_t last_sequence,
                                 int64_t last_turn_index, int64_t version) {
  std::vector<Item> out;
  out.reserve(items.size());
  int64_t turn = last_turn_index;
  for (const ItemData& data : items) {
    if (StartsTurn(data)) ++turn;
    Item item;
    item.data = data;
    item.sequence = last_sequence + 1 + static_cast<int64_t>(out.size());
    item.turn_index = turn;
    item.appended_version = version;
    out.push_back(std::move(item));
  }
  return out;
}

absl::Status CheckConversationBytes(const AppendRequest& request, int64_t stored,
                                    int64_t adding) {
  const int64_t max = request.max_conversation_bytes;
  if (max <= 0 || stored + adding <= max) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "conversation '", request.key.conversation_id, "' holds ", stored, " bytes; ", adding,
      " more would pass the bound of ", max,
      " bytes per conversation (--max_conversation_mb): continue in a new conversation "
      "(CreateConversation continue_from), or compact and erase what is no longer needed"));
}

absl::Status CheckHandoffSource(const NewConversation& nc, std::optional<int64_t> redactions) {
  if (!redactions.has_value()) {
    return absl::AbortedError(absl::StrCat("continue_from: conversation '", nc.continued_from,
                                           "' was deleted while it was handed off"));
  }
  if (*redactions != nc.continued_from_redactions) {
    return absl::AbortedError(absl::StrCat("continue_from: conversation '", nc.continued_from,
                                           "' was erased from while it was handed off; try again"));
  }
  return absl::OkStatus();
}

AppendRequest CarriedAppend(const NewConversation& nc) {
  AppendRequest append;
  append.key = nc.key;
  append.items = nc.carried_items;
  append.idempotency_key = "convstate.continue_from";
  append.request_fingerprint = nc.continued_from;
  append.expected_model = nc.model;
  append.tenant_limits = nc.tenant_limits;
  return append;
}

CompactionEvent ContinuedEvent(const NewConversation& nc, int64_t facts) {
  int64_t tokens = 0;
  int64_t constraints = 0;
  for (const SummaryChunk& c : nc.carried_chunks) {
    tokens += c.token_count;
    constraints += static_cast<int64_t>(c.constraints.size());
  }
  CompactionEvent e;
  e.event = "continued";
  e.tokens_before = 0;
  e.tokens_after = tokens;
  e.detail = nlohmann::json{{"from", nc.continued_from},
                            {"chunks", nc.carried_chunks.size()},
                            {"facts", facts},
                            {"constraints", constraints}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

absl::StatusOr<int64_t> ForkPoint(const Conversation& source, int64_t at_sequence) {
  if (at_sequence < 0 || at_sequence > source.last_sequence) {
    return absl::OutOfRangeError(absl::StrCat(
        "at_sequence: conversation '", source.key.conversation_id, "' has items 1 to ",
        source.last_sequence, ", not ", at_sequence));
  }
  return at_sequence == 0 ? source.last_sequence : at_sequence;
}

absl::Status CheckForkSplit(const ConversationKey& source, int64_t at,
                            const std::vector<Item>& turn) {
  for (const Item& result : turn) {
    if (result.sequence <= at || result.data.kind != ItemKind::kToolResult) continue;
    for (const Item& call : turn) {
      if (call.sequence <= at && call.data.kind == ItemKind::kToolCall &&
          call.data.tool_call_id == result.data.tool_call_id) {
        return absl::FailedPreconditionError(absl::StrCat(
            "at_sequence: item ", at, " of conversation '", source.conversation_id,
            "' separates tool call ", call.sequence, " ('", call.data.tool_call_id,
            "') from its result ", result.sequence, "; fork before the call or after the result"));
      }
    }
  }
  return absl::OkStatus();
}

int64_t ForkStateVersion(int64_t appended_version, int64_t next_version,
                         int64_t current_version) {
  if (next_version < 0) return current_version;
  if (next_version <= appended_version) return std::max<int64_t>(appended_version - 1, 0);
  return next_version - 1;
}

ForkChunks PlanForkChunks(const std::vector<SummaryChunk>& chunks, const ViewState& state,
                          int64_t last_chunk, int64_t at) {
  ForkChunks out;
  out.summarized_through = state.summarized_through;
  bool erased = false;
  int64_t through = 0;
  for (const SummaryChunk& c : chunks) {
    const bool redacted = c.summarizer_model == kRedactedChunkModel;
    const bool in_state = std::find(state.chunk_ids.begin(), state.chunk_ids.end(), c.chunk_id) !=
                          state.chunk_ids.end();
    int64_t by = c.chunk_id;  // Retired.
    if (c.chunk_id <= last_chunk && !redacted) {
      if (in_state) {
        by = 0;
      } else if (c.superseded_by != 0 && c.superseded_by <= last_chunk) {
        by = c.superseded_by;
      }
    }
    erased |= in_state && redacted;
    if (by == 0) through = std::max(through, c.through_sequence);
    if (by == c.chunk_id && !redacted && c.through_sequence > at) out.emptied.push_back(c.chunk_id);
    out.ids.push_back(c.chunk_id);
    out.superseded_by.push_back(by);
  }
  if (erased) out.summarized_through = through;
  return out;
}

CompactionEvent ForkedEvent(const ForkRequest& request, int64_t at) {
  CompactionEvent e;
  e.event = "forked";
  e.detail = nlohmann::json{{"from", request.source.conversation_id}, {"at_sequence", at}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

std::string RewindFingerprint(const RewindRequest& request) {
  return absl::StrCat("rewind:", request.to_sequence, ":", request.abandoned.conversation_id);
}

absl::Status CheckRewindPoint(const Conversation& c, int64_t to) {
  if (to < 0 || to >= c.last_sequence) {
    return absl::OutOfRangeError(absl::StrCat(
        "to_sequence: conversation '", c.key.conversation_id, "' has items 1 to ",
        c.last_sequence, "; a rewind goes back to one before the last (0: before the first)"));
  }
  return absl::OkStatus();
}

CompactionEvent RewoundEvent(const RewindRequest& request, int64_t items_after) {
  CompactionEvent e;
  e.event = "rewound";
  e.detail = nlohmann::json{{"to_sequence", request.to_sequence},
                            {"abandoned", request.abandoned.conversation_id},
                            {"items_moved", items_after}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

const ForkLink* ForkHeir(const std::vector<ForkLink>& children) {
  if (children.empty()) return nullptr;
  return &*std::max_element(children.begin(), children.end(),
                            [](const ForkLink& a, const ForkLink& b) {
                              return a.at != b.at ? a.at < b.at : a.id > b.id;
                            });
}

std::vector<ForkLink> RelinkForks(const ForkLink& deleted, std::vector<ForkLink> children) {
  const ForkLink* found = ForkHeir(children);
  if (found == nullptr) return children;
  const ForkLink heir = *found;
  for (ForkLink& c : children) {
    if (c.key == heir.key) {
      // The heir holds what the deleted conversation held through its
      // fork point: a fork of its source there, or of none.
      c.parent_key = deleted.parent_key;
      c.parent_id = deleted.parent_key == 0 ? "" : deleted.parent_id;
      c.at = deleted.parent_key == 0 ? 0 : std::min(c.at, deleted.at);
      continue;
    }
    if (deleted.parent_key != 0 && c.at <= deleted.at) {
      // It shares only what the deleted one had from its source.
      c.parent_key = deleted.parent_key;
      c.parent_id = deleted.parent_id;
      continue;
    }
    // It shares the deleted one's own items with the heir (which holds
    // them through a later point): a fork of the heir.
    c.parent_key = heir.key;
    c.parent_id = heir.id;
    c.at = std::min(c.at, heir.at);
  }
  return children;
}

absl::StatusOr<std::vector<std::pair<ForkLink, std::vector<int64_t>>>> ForkFamilyErasure(
    const std::vector<ForkLink>& family, const ForkLink& start,
    const std::vector<int64_t>& sequences) {
  std::map<int64_t, const ForkLink*> by_key;
  for (const ForkLink& link : family) by_key[link.key] = &link;
  by_key[start.key] = &start;
  // What each member has had erased so far; only what is new spreads.
  // (Every sequence comes from `sequences`, which `start` holds already.)
  std::map<int64_t, std::set<int64_t>> done;
  done[start.key].insert(sequences.begin(), sequences.end());
  std::vector<std::pair<int64_t, std::vector<int64_t>>> queue = {{start.key, sequences}};
  std::vector<const ForkLink*> reached;  // In the order first reached.
  size_t reaches = 0;
  auto reach = [&](const ForkLink& to, int64_t shared_through,
                   const std::vector<int64_t>& from) -> absl::Status {
    std::vector<int64_t> fresh;
    std::set<int64_t>& erased = done[to.key];
    const bool first = erased.empty();
    for (int64_t s : from) {
      if (s <= shared_through && erased.insert(s).second) fresh.push_back(s);
    }
    if (fresh.empty()) return absl::OkStatus();
    if (first) reached.push_back(&to);
    queue.emplace_back(to.key, std::move(fresh));
    if (++reaches > kMaxLineage) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the erasure would reach more than ", kMaxLineage,
          " conversations that share the items; nothing was erased"));
    }
    return absl::OkStatus();
  };
  for (size_t next = 0; next < queue.size(); ++next) {
    const auto [key, seqs] = queue[next];
    const ForkLink& here = *by_key[key];
    auto parent = by_key.find(here.parent_key);
    if (here.parent_key != 0 && parent != by_key.end()) {
      RETURN_IF_ERROR(reach(*parent->second, here.at, seqs));
    }
    for (const ForkLink& child : family) {
      if (child.parent_key == key && child.key != key) {
        RETURN_IF_ERROR(reach(child, child.at, seqs));
      }
    }
  }
  std::vector<std::pair<ForkLink, std::vector<int64_t>>> out;
  for (const ForkLink* link : reached) {
    const std::set<int64_t>& erased = done[link->key];
    out.emplace_back(*link, std::vector<int64_t>(erased.begin(), erased.end()));
  }
  return out;
}

CompactionEvent RedactedEvent(const RedactRequest& request, int64_t chunks_removed) {
  CompactionEvent e;
  e.event = "items_redacted";
  e.detail = nlohmann::json{{"by", request.actor},
                            {"sequences", request.sequences},
                            {"reason", request.reason},
                            {"chunks_removed", chunks_removed}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

CompactionEvent ContinuedErasedEvent(const RedactRequest& request, int64_t chunks_removed) {
  CompactionEvent e;
  e.event = "items_redacted";
  e.detail = nlohmann::json{{"by", request.actor},
                            {"reason", request.reason},
                            {"continued_from", request.key.conversation_id},
                            {"source_sequences", request.sequences},
                            {"chunks_removed", chunks_removed}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

absl::StatusOr<RevertPlan> PlanRevert(const Conversation& c,
                                      const std::vector<SummaryChunk>& chunks, int64_t chunk_id) {
  const SummaryChunk* target = nullptr;
  for (const SummaryChunk& chunk : chunks) {
    if (chunk.chunk_id == chunk_id) target = &chunk;
  }
  if (target == nullptr) {
    return absl::NotFoundError(absl::StrCat("conversation '", c.key.conversation_id,
                                            "' has no summary chunk ", chunk_id));
  }
  const std::string which = absl::StrCat("chunk_id: chunk ", chunk_id);
  if (target->summarizer_model == kRedactedChunkModel) {
    return absl::FailedPreconditionError(
        absl::StrCat(which, " was emptied by a redaction, which is never reverted"));
  }
  if (target->reverted) {
    return absl::FailedPreconditionError(absl::StrCat(which, " is already reverted"));
  }
  if (target->superseded_by != 0) {
    return absl::FailedPreconditionError(absl::StrCat(which, " was folded into chunk ",
                                                      target->superseded_by, ": revert chunk ",
                                                      target->superseded_by, " first"));
  }
  if (!target->source_conversation_id.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(which, " was carried over from conversation '",
                     target->source_conversation_id, "' and covers no item of this one"));
  }
  RevertPlan plan;
  for (const SummaryChunk& chunk : chunks) {
    if (chunk.superseded_by == 0 && chunk.chunk_id > chunk_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          which, " is not the newest summary: revert chunk ", chunk.chunk_id, " first"));
    }
    const bool stays = chunk.superseded_by == 0 && chunk.chunk_id != chunk_id;
    const bool folded_here = chunk.superseded_by == chunk_id && !chunk.reverted &&
                             chunk.summarizer_model != kRedactedChunkModel;
    if (folded_here) plan.reactivate.push_back(chunk.chunk_id);
    if (stays || folded_here) {
      plan.summarized_through = std::max(plan.summarized_through, chunk.through_sequence);
    }
  }
  plan.prune_boundary =
      target->prune_boundary_before >= 0 ? target->prune_boundary_before : c.prune_boundary;
  return plan;
}

absl::Status ProposalNotFound(const ConversationKey& key, int64_t proposal_id) {
  return absl::NotFoundError(absl::StrCat("proposal_id: conversation '", key.conversation_id,
                                          "' has no proposal ", proposal_id,
                                          " (unknown, or expired)"));
}

CompactionEvent RevertedEvent(const RevertRequest& request, const SummaryChunk& chunk,
                              const RevertPlan& plan) {
  CompactionEvent e;
  e.event = "reverted";
  e.tier = plan.reactivate.empty() ? "summarize" : "fold";
  e.detail = nlohmann::json{{"by", request.actor},
                            {"chunk_id", chunk.chunk_id},
                            {"from", chunk.from_sequence},
                            {"through", chunk.through_sequence},
                            {"reactivated", plan.reactivate},
                            {"summarized_through", plan.summarized_through},
                            {"prune_boundary", plan.prune_boundary}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return e;
}

std::string RedactedDigest(const std::string& key, const std::string& content) {
  if (key.empty()) return "";
  return absl::StrCat("hmac-sha256:", HmacSha256Hex(key, content));
}

std::optional<int64_t> RedactionCut(const std::vector<SummaryChunk>& chunks,
                                    const std::vector<int64_t>& sequences) {
  auto holds = [](const SummaryChunk& c, int64_t s) {
    return c.summarizer_model != kRedactedChunkModel && s >= c.from_sequence &&
           s <= c.through_sequence;
  };
  // `sequences` is sorted: the first one held is the earliest.
  for (int64_t s : sequences) {
    std::optional<int64_t> cut;
    for (const SummaryChunk& c : chunks) {
      if (holds(c, s) && (!cut.has_value() || c.from_sequence > *cut)) cut = c.from_sequence;
    }
    if (cut.has_value()) return cut;
  }
  return std::nullopt;
}

ContextSnapshot SnapshotAt(const Conversation& now, const ViewState& state, int64_t version,
                           std::vector<SummaryChunk> chunks, std::vector<Item> items) {
  ContextSnapshot snap;
  Conversation& c = snap.conversation;
  c = now;
  c.model = state.model;
  c.system_prompt = state.system_prompt;
  c.pinned_instructions = state.pinned_instructions;
  c.overrides = state.overrides;
  c.summarized_through = state.summarized_through;
  c.prune_boundary = state.prune_boundary;
  c.token_correction = state.token_correction;
  c.overflow_correction = state.overflow_correction;
  c.prompt_limit = state.prompt_limit;
  c.version = version;
  c.compaction_version = state.compaction_version;
  c.last_sequence = items.empty() ? 0 : items.back().sequence;
  for (SummaryChunk& chunk : chunks) chunk.superseded_by = 0;  // Active then.
  snap.active_chunks = std::move(chunks);
  // Markers of chunks written after the state (at the same version) were
  // not there yet; chunk ids only grow.
  int64_t last_chunk = 0;
  for (int64_t id : state.chunk_ids) last_chunk = std::max(last_chunk, id);
  for (Item& item : items) {
    if (item.data.kind == ItemKind::kSummaryMarker && item.summary_chunk_id > last_chunk) continue;
    for (const auto& [sequence, pinned] : state.pins) {
      if (sequence == item.sequence) item.data.pinned = pinned;
    }
    if (item.sequence > state.summarized_through) {
      snap.live_items.push_back(std::move(item));
    } else if (item.data.pinned && item.data.kind != ItemKind::kSummaryMarker) {
      snap.pinned_items.push_back(std::move(item));
    }
  }
  return snap;
}

ContinuedErasure EraseContinued(const std::vector<SummaryChunk>& chunks,
                                const std::map<std::string, std::set<int64_t>>& retired) {
  std::set<int64_t> out;
  for (const SummaryChunk& c : chunks) {
    if (c.summarizer_model == kRedactedChunkModel || c.source_conversation_id.empty()) continue;
    auto from = retired.find(c.source_conversation_id);
    if (from != retired.end() && from->second.contains(c.source_chunk_id)) out.insert(c.chunk_id);
  }
  // A fold of a retired chunk holds what it held: retired too, up the chain.
  for (bool grew = true; grew;) {
    grew = false;
    for (const SummaryChunk& c : chunks) {
      if (c.superseded_by != 0 && c.superseded_by != c.chunk_id && out.contains(c.chunk_id) &&
          out.insert(c.superseded_by).second) {
        grew = true;
      }
    }
  }
  ContinuedErasure erasure;
  erasure.retire.assign(out.begin(), out.end());
  for (const SummaryChunk& c : chunks) {
    if (c.summarizer_model != kRedactedChunkModel && !out.contains(c.chunk_id) &&
        out.contains(c.superseded_by)) {
      erasure.reactivate.push_back(c.chunk_id);
    }
  }
  return erasure;
}

absl::Status StaleProposal(const ConversationKey& key, int64_t made_at, int64_t now) {
  return absl::AbortedError(absl::StrCat(
      "conversation '", key.conversation_id, "' changed while the proposal was made (compaction ",
      "version ", made_at, ", now ", now, "): make it again"));
}

std::string EraseEventFacts(const std::string& detail, const std::vector<int64_t>& erased,
                            const std::string& tombstone) {
  nlohmann::json j = nlohmann::json::parse(detail, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return detail;
  bool changed = false;
  for (const char* field : {"dropped", "lost_facts"}) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_array()) continue;
    for (nlohmann::json& fact : *it) {
      if (!fact.is_object() || !fact.contains("sequence") || !fact["sequence"].is_number_integer()) {
        continue;
      }
      const int64_t s = fact["sequence"].get<int64_t>();
      if (std::find(erased.begin(), erased.end(), s) == erased.end()) continue;
      fact["text"] = tombstone;
      changed = true;
    }
  }
  return changed ? j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : detail;
}

}  // namespace convstate
