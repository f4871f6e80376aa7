#ifndef CONVSTATE_SERVICES_CORE_TYPES_H_
#define CONVSTATE_SERVICES_CORE_TYPES_H_

// The conversation model shared by storage, the compaction core and the API
// layer. Plain values: no gRPC, no SQL, no protobuf.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace convstate {

// Numbering matches convstate.v1.Role.
enum class Role { kSystem = 1, kUser = 2, kAssistant = 3, kTool = 4 };

// Numbering matches convstate.v1.ItemKind.
enum class ItemKind {
  kMessage = 1,
  kToolCall = 2,
  kToolResult = 3,
  kReasoning = 4,
  kSummaryMarker = 5,
};

// Stable lowercase names, used in storage and messages ("user", "tool_call").
absl::string_view RoleName(Role role);
absl::string_view ItemKindName(ItemKind kind);
std::optional<Role> RoleFromName(absl::string_view name);
std::optional<ItemKind> ItemKindFromName(absl::string_view name);

using Metadata = std::map<std::string, std::string>;

// Identifies a conversation within its tenant.
struct ConversationKey {
  std::string tenant_id;
  std::string conversation_id;
};

// "tenant/conversation": one string per key (ids hold no '/'), for the
// sets and maps of conversations a process keeps in memory.
std::string KeyText(const ConversationKey& key);

// What a tenant holds, against its limits.
struct TenantUsage {
  int64_t conversations = 0;
  // Bytes its conversations store: prompts, items, summaries, view states,
  // audit rows, idempotency records (see storage's StoredBytes).
  int64_t stored_bytes = 0;
};

// A tenant's limits; 0 is no limit.
struct TenantLimits {
  int64_t max_conversations = 0;
  int64_t max_stored_bytes = 0;
  // Calls per second on each replica, and the calls allowed at once above
  // it (0: one second's worth).
  double max_requests_per_second = 0;
  int64_t burst = 0;
};

// Per-conversation changes to the model profile; unset means "the
// profile's value".
// What a keep rule's pattern may take to compile (RE2's max_mem): a
// pattern past it is refused when a policy is set, and matches nothing if
// one was stored before the bound.
inline constexpr int64_t kMaxKeepPatternMemory = 1 << 20;
// What one compaction matches keep rules against, in bytes of content:
// items past it are not held by the rules (the newest are matched first).
inline constexpr int64_t kMaxKeepRuleBytes = 8 << 20;

// Matches an item when every condition that is set holds (see
// convstate.v1.KeepRule).
struct KeepRule {
  // RE2, found anywhere in the content; empty: any.
  std::string pattern;
  std::vector<Role> roles;
  std::vector<std::string> tool_names;

  friend bool operator==(const KeepRule&, const KeepRule&) = default;
};

// What every compaction of a conversation keeps and is told, besides its
// profile's (see convstate.v1.CompactionPolicy).
struct CompactionPolicy {
  std::string instructions;
  std::vector<KeepRule> keep;
  std::optional<double> keep_budget_fraction;

  friend bool operator==(const CompactionPolicy&, const CompactionPolicy&) = default;
};

// What a call does when its view is at or above the hard band. Numbering
// matches convstate.v1.HardBandPolicy.
enum class HardBandPolicy {
  // Compact before answering (the default).
  kBlock = 1,
  // Serve the view as it stands below the emergency band while the
  // background compacts: latency over the band.
  kServeWhileBackground = 2,
};

struct ProfileOverrides {
  std::optional<int64_t> context_window;
  std::optional<int64_t> output_reserve;
  std::optional<double> soft_threshold;
  std::optional<double> hard_threshold;
  std::optional<double> emergency_threshold;
  std::optional<int64_t> token_floor;
  std::optional<int32_t> recent_turns;
  std::optional<int64_t> recent_tokens;
  std::optional<bool> compaction_enabled;
  std::optional<double> recall_budget_fraction;
  std::optional<int64_t> prompt_cache_ttl_s;
  std::optional<HardBandPolicy> hard_band_policy;
  // The conversation's own compaction policy (the API's
  // Conversation.compaction_policy), kept with the overrides.
  std::optional<CompactionPolicy> policy;

  friend bool operator==(const ProfileOverrides&, const ProfileOverrides&) = default;
};


struct Conversation {
  ConversationKey key;
  // The store's own key for this conversation: a conversation deleted and
  // created again under the same id gets another one. 0 when unknown.
  int64_t storage_key = 0;
  std::string model;
  std::string system_prompt;
  std::string pinned_instructions;
  Metadata metadata;
  ProfileOverrides overrides;
  // Increases by one with every append, and only then: what a gateway's
  // expected_version compares.
  int64_t version = 0;
  // Increases by one with every other change to the view: a compaction, a
  // pin or unpin.
  int64_t compaction_version = 0;
  int64_t item_count = 0;
  int64_t last_sequence = 0;
  int64_t last_turn_index = 0;
  // The last sequence that summary chunks cover; the view's live items
  // start after it. 0 when nothing has been summarized.
  int64_t summarized_through = 0;
  // Tool results at or before this sequence show as placeholders. Only
  // moves forward.
  int64_t prune_boundary = 0;
  // Counted once at creation with the conversation's tokenizer.
  int64_t system_prompt_tokens = 0;
  int64_t pinned_instructions_tokens = 0;
  // Sum of the stored items' token counts.
  int64_t item_tokens = 0;
  // Provider tokens per estimated token; 1 until usage reports say otherwise.
  double token_correction = 1.0;
  // At least 1: how much more than estimated a provider counted when it
  // refused a view as too long (BuildContext provider_overflow). Scales
  // every count, whatever the tokenizer.
  double overflow_correction = 1.0;
  // When positive, the prompt (the view less the output reserve) must stay
  // under it: nine tenths of what a provider refused. 0: no limit.
  int64_t prompt_limit = 0;
  // The conversation this one continues; empty if none.
  std::string continued_from;
  // The conversation this one was forked from (ForkConversation), its
  // incarnation (storage_key) then, and the sequence of its last item the
  // fork shares; empty and 0 if none.
  std::string forked_from;
  int64_t forked_from_key = 0;
  int64_t forked_at = 0;
  // The tokenizer the stored counts were made with ("o200k_base",
  // "approximate:4"); empty for conversations older than the field (their
  // counts are taken as the current tokenizer's).
  std::string count_encoding;
  // True once some count was made again with another tokenizer.
  bool recounted = false;
  // The latest compaction lease's fencing token, and whether it is still
  // unexpired (as of the read).
  int64_t lease_token = 0;
  bool lease_active = false;
  // Increases by one with every erasure (RedactItems) of its items: what a
  // replica's copy of the history compares before it answers from it.
  int64_t redactions = 0;
  absl::Time create_time;
  absl::Time update_time;
};

// Metadata keys under this prefix are the service's own (the two below):
// a client may not set them.
inline constexpr char kReservedMetadataPrefix[] = "convstate.";

// The metadata key (value "true") that AppendTurn's task_boundary puts on
// the last item of a task: the planner prefers to end a summary there.
inline constexpr char kTaskBoundaryKey[] = "convstate.task_boundary";

// The metadata key under which an item carried into a continued
// conversation (CreateConversation continue_from) keeps the sequence it had
// in its source: a redaction there reaches the copy.
inline constexpr char kContinuedFromSequenceKey[] = "convstate.continued_from_sequence";

// An item as written by a client, with its token count computed at append.
struct ItemData {
  Role role = Role::kUser;
  ItemKind kind = ItemKind::kMessage;
  std::string content;
  std::string tool_name;
  std::string tool_call_id;
  bool pinned = false;
  Metadata metadata;
  int64_t token_count = 0;

  friend bool operator==(const ItemData&, const ItemData&) = default;
};

// A stored item.
struct Item {
  ItemData data;
  int64_t sequence = 0;
  int64_t turn_index = 0;
  // For summary markers: the chunk the marker stands for.
  int64_t summary_chunk_id = 0;
  absl::Time create_time;
  // The conversation's version once the item was stored (for a marker: the
  // version when its chunk was written); 0 if unknown (older items).
  int64_t appended_version = 0;
  // Set once the content was erased (RedactItems).
  bool redacted = false;
  // For a redacted item, when the server keeps one: "hmac-sha256:<hex>" of
  // what was removed, under the server's redaction key; else empty.
  std::string redacted_digest;
};

// True if `item` opens a new turn: a user message.
inline bool StartsTurn(const ItemData& item) {
  return item.role == Role::kUser && item.kind == ItemKind::kMessage;
}

// A hard fact (an identifier, a number with its unit, a command, a path, a
// name, a decision) or a standing instruction of the user's, kept verbatim
// from the item it came from.
struct LedgerFact {
  int64_t sequence = 0;
  int64_t turn_index = 0;
  Role role = Role::kUser;
  std::string text;
  // Tokens of the fact's line as the view renders it.
  int64_t token_count = 0;
  // Hashes of the ids, figures and names in `text`, computed once when the
  // fact is extracted, so that views rank facts without reading them again.
  std::vector<uint64_t> token_hashes;

  friend bool operator==(const LedgerFact&, const LedgerFact&) = default;
};

// One attributed line of an extractive summary: the structured content that
// a fold merges (never the rendered text of a summary).
struct SummaryLine {
  int64_t sequence = 0;
  // "User", "Assistant", or "Tool <name>".
  std::string speaker;
  std::string text;
  // How much the line matters; folds keep the highest first.
  int score = 0;

  friend bool operator==(const SummaryLine&, const SummaryLine&) = default;
};

// A stored summary of the items [from_sequence, through_sequence].
struct SummaryChunk {
  int64_t chunk_id = 0;
  int64_t from_sequence = 0;
  int64_t through_sequence = 0;
  std::string text;
  int64_t token_count = 0;
  std::string summarizer_model;
  std::string prompt_version;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t latency_ms = 0;
  // 0 unless a fold merged this chunk into another.
  int64_t superseded_by = 0;
  absl::Time create_time;
  // The structured content: the summary's attributed lines (extractive
  // summaries only), and the facts and standing instructions of the span,
  // which the view shows verbatim in the ledger and the pinned section.
  std::vector<SummaryLine> lines;
  std::vector<LedgerFact> facts;
  std::vector<LedgerFact> constraints;
  // The span's facts (ledger candidates) that the view no longer showed
  // verbatim once this chunk replaced the span: what this compaction lost.
  // They stay in the history (ExpandSummary, SearchHistory, recall).
  std::vector<LedgerFact> lost;
  // Share of the span's facts present in the chunk or the ledger when it
  // was committed; unset for chunks written before recall was measured.
  std::optional<double> recall;
  // Carried over from another conversation (continue_from): where from.
  std::string source_conversation_id;
  int64_t source_chunk_id = 0;
  // The conversation's prune boundary before the compaction that wrote
  // this chunk (what RevertCompaction puts back); -1 for chunks written
  // before it was recorded.
  int64_t prune_boundary_before = -1;
  // Set by RevertCompaction: the chunk is kept for the audit and for past
  // views, and no view shows it any more (superseded_by is its own id).
  bool reverted = false;
  std::string reverted_by;
};

// One audit row of the compaction trail.
struct CompactionEvent {
  // "threshold_hit", "started", "completed", "failed", "pruned", "folded",
  // "truncated", "no_progress", "summary_oversize".
  std::string event;
  // "prune", "summarize", "fold", "truncate", or empty.
  std::string tier;
  int64_t tokens_before = 0;
  int64_t tokens_after = 0;
  // Free-form JSON object with details (reason, ranges, summarizer).
  std::string detail = "{}";
  int64_t event_id = 0;
  absl::Time create_time;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_CORE_TYPES_H_
