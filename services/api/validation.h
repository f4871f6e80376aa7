#ifndef CONVSTATE_SERVICES_API_VALIDATION_H_
#define CONVSTATE_SERVICES_API_VALIDATION_H_

// Checks on what clients send. Every error is INVALID_ARGUMENT and starts
// with the offending field's path, e.g. "items[2].content: ...".

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/core/ids.h"
#include "services/core/types.h"
#include "convstate/v1/convstate.pb.h"

namespace convstate {

// Limits on what one request may carry. Defaults suit models with windows
// of up to a few million tokens.
struct Limits {
  // Bytes of one item's content.
  int64_t max_item_bytes = 1 << 20;
  // Items in one AppendTurn.
  int max_items_per_append = 256;
  // Bytes of content across one AppendTurn or one pending input.
  int64_t max_request_content_bytes = 8 << 20;
  // Bytes of a system prompt, and of pinned instructions.
  int64_t max_system_prompt_bytes = 1 << 20;
  // Metadata entries on one conversation or item, and their sizes.
  int max_metadata_entries = 64;
  int max_metadata_key_bytes = 128;
  int max_metadata_value_bytes = 4096;
  // Items in BuildContext's pending input.
  int max_pending_items = 64;
  // Bytes of text one page of a list holds at most (after its first row).
  int64_t max_page_bytes = int64_t{4} << 20;
  // Bytes one conversation stores at most (its items, prompts, summaries):
  // what bounds every read of its items, with compaction disabled too.
  int64_t max_conversation_bytes = int64_t{256} << 20;
  // Bytes of the live items (and pins) one read of a conversation's view
  // takes at most: past it, calls that read the view are RESOURCE_EXHAUSTED
  // until it is compacted (with compaction disabled, a live window grows
  // with every append).
  int64_t max_view_bytes = int64_t{64} << 20;
};

// Checks text that will be stored: valid UTF-8, no NUL character (which
// PostgreSQL text cannot hold), at most `max_bytes`.
absl::Status ValidateText(absl::string_view field, absl::string_view text, int64_t max_bytes);


// Model names: 1 to 256 characters of [A-Za-z0-9._:/@+-].
absl::Status ValidateModelName(absl::string_view field, absl::string_view model);
// A compaction policy: its instructions' size, at most 32 keep rules, each
// pattern a valid RE2 expression, known roles, a budget in (0, 1).
absl::Status ValidatePolicy(absl::string_view field, const v1::CompactionPolicy& policy);

absl::Status ValidateMetadata(absl::string_view field,
                              const google::protobuf::Map<std::string, std::string>& metadata,
                              const Limits& limits);

// One item a client writes: known role and kind (never a summary marker), a
// kind that fits the role, tool fields where the kind needs them and not
// elsewhere, text and metadata within limits. `field` is its path, e.g.
// "items[3]".
absl::Status ValidateNewItem(absl::string_view field, const v1::NewItem& item,
                             const Limits& limits);

// INVALID_ARGUMENT naming the field if `input` (the request's `field`) has
// more than `max_items` items, a malformed item, or too many bytes of
// content.
absl::Status ValidateItems(absl::string_view field,
                           const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                           int max_items, const Limits& limits);

// The longest recall query (BuildContext's recall_query, SearchHistory's
// query), in bytes.
inline constexpr size_t kMaxRecallQueryBytes = 8192;
// INVALID_ARGUMENT if a recall query (the request's `field`) is too long.
absl::Status ValidateRecallQuery(absl::string_view field, absl::string_view query);

// A request's conversation: the tenant (empty: "default") and the
// conversation's id, INVALID_ARGUMENT naming the field.
absl::StatusOr<ConversationKey> ValidateKey(const std::string& tenant_id,
                                            const std::string& conversation_id);

// Each request's checks, made once, at the top of its call, in the order
// its fields are read: INVALID_ARGUMENT naming the first field that is
// wrong, else the conversation the request names. What only storage or the
// model registry can tell (a model with no profile, a sequence past the
// last item) is the call's to check.
//
// CreateConversation: the key's conversation_id is empty when the service
// is to pick one; a model is required unless the request continues another
// conversation (continue_from), whose model it then keeps.
absl::StatusOr<ConversationKey> ValidateCreateConversation(
    const v1::CreateConversationRequest& req, const Limits& limits);
absl::StatusOr<ConversationKey> ValidateGetConversation(const v1::GetConversationRequest& req);
absl::StatusOr<ConversationKey> ValidateUpdateConversation(
    const v1::UpdateConversationRequest& req, const Limits& limits);
absl::StatusOr<ConversationKey> ValidateGetContextAt(const v1::GetContextAtRequest& req);
// ListConversations names a tenant, not a conversation: returns the tenant.
absl::StatusOr<std::string> ValidateListConversations(const v1::ListConversationsRequest& req);
// The fork's key (its conversation_id may be empty: the server names it).
absl::StatusOr<ConversationKey> ValidateForkConversation(const v1::ForkConversationRequest& req,
                                                         const Limits& limits);
absl::StatusOr<ConversationKey> ValidateListForks(const v1::ListForksRequest& req);
absl::StatusOr<ConversationKey> ValidateRewindConversation(
    const v1::RewindConversationRequest& req);
absl::StatusOr<ConversationKey> ValidateDeleteConversation(
    const v1::DeleteConversationRequest& req);
absl::StatusOr<ConversationKey> ValidateAppendTurn(const v1::AppendTurnRequest& req,
                                                   const Limits& limits);
absl::StatusOr<ConversationKey> ValidateListItems(const v1::ListItemsRequest& req);
absl::StatusOr<ConversationKey> ValidateBuildContext(const v1::BuildContextRequest& req,
                                                     const Limits& limits);
absl::StatusOr<ConversationKey> ValidateInspectContext(const v1::InspectContextRequest& req,
                                                       const Limits& limits);
absl::StatusOr<ConversationKey> ValidateCompact(const v1::CompactRequest& req);
// ApplyCompaction's conversation and the proposal it names (a positive
// number, a Compact dry run's proposal.proposal_id).
struct ProposalRef {
  ConversationKey key;
  int64_t proposal_id = 0;
};
absl::StatusOr<ProposalRef> ValidateApplyCompaction(const v1::ApplyCompactionRequest& req,
                                                    const Limits& limits);
absl::StatusOr<ConversationKey> ValidateRevertCompaction(const v1::RevertCompactionRequest& req);
absl::StatusOr<ConversationKey> ValidateListSummaries(const v1::ListSummariesRequest& req);
absl::StatusOr<ConversationKey> ValidateExpandSummary(const v1::ExpandSummaryRequest& req);
absl::StatusOr<ConversationKey> ValidateListCompactionEvents(
    const v1::ListCompactionEventsRequest& req);
absl::StatusOr<ConversationKey> ValidatePinItem(const v1::PinItemRequest& req);
absl::StatusOr<ConversationKey> ValidateUnpinItem(const v1::UnpinItemRequest& req);
// SearchHistory's bounds on what it answers.
inline constexpr int kMaxSearchResults = 50;
inline constexpr int64_t kMaxSearchResultTokens = 20000;
absl::StatusOr<ConversationKey> ValidateSearchHistory(const v1::SearchHistoryRequest& req);
absl::StatusOr<ConversationKey> ValidateRedactItems(const v1::RedactItemsRequest& req);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_VALIDATION_H_
