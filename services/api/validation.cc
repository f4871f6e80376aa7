#include "services/api/validation.h"

#include "re2/re2.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"
#include "services/common/utf8.h"
#include "services/core/types.h"

namespace convstate {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

bool ModelChar(char c) { return IsIdChar(c) || c == '/' || c == '@' || c == '+'; }

constexpr int kMaxToolFieldBytes = 256;
constexpr int kMaxIdempotencyKeyBytes = 128;
constexpr int kMaxCompactInstructionsBytes = 4096;
constexpr int kMaxCarriedTurns = 100;
// RedactItems: items per call and the reason's size.
constexpr int kMaxRedactedPerCall = 1000;
constexpr int kMaxRedactionReasonBytes = 1024;

}  // namespace

absl::Status ValidateText(absl::string_view field, absl::string_view text, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return Invalid(field, absl::StrCat(text.size(), " bytes exceeds the limit of ", max_bytes));
  }
  if (!IsValidUtf8(text)) return Invalid(field, "not valid UTF-8");
  if (text.find('\0') != absl::string_view::npos) {
    return Invalid(field, "contains a NUL character");
  }
  return absl::OkStatus();
}

absl::Status ValidateModelName(absl::string_view field, absl::string_view model) {
  if (model.empty()) return Invalid(field, "required");
  if (model.size() > 256) return Invalid(field, "longer than 256 characters");
  for (char c : model) {
    if (!ModelChar(c)) {
      return Invalid(field, "only letters, digits and . _ : - / @ + are allowed");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMetadata(absl::string_view field,
                              const google::protobuf::Map<std::string, std::string>& metadata,
                              const Limits& limits) {
  if (static_cast<int>(metadata.size()) > limits.max_metadata_entries) {
    return Invalid(field, absl::StrCat(metadata.size(), " entries exceeds the limit of ",
                                       limits.max_metadata_entries));
  }
  for (const auto& [key, value] : metadata) {
    const std::string path = absl::StrCat(field, "[\"", key, "\"]");
    if (key.empty()) return Invalid(field, "keys must not be empty");
    if (absl::StartsWith(key, kReservedMetadataPrefix)) {
      return Invalid(path, absl::StrCat("keys under \"", kReservedMetadataPrefix,
                                        "\" are the service's own and may not be set"));
    }
    if (absl::Status s = ValidateText(absl::StrCat(field, " key"), key,
                                      limits.max_metadata_key_bytes);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ValidateText(path, value, limits.max_metadata_value_bytes); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNewItem(absl::string_view field, const v1::NewItem& item,
                             const Limits& limits) {
  const std::string f(field);
  if (item.role() == v1::ROLE_UNSPECIFIED) return Invalid(f + ".role", "required");
  if (!v1::Role_IsValid(item.role())) {
    return Invalid(f + ".role", absl::StrCat("unknown role ", item.role()));
  }
  if (item.kind() == v1::ITEM_KIND_UNSPECIFIED) return Invalid(f + ".kind", "required");
  if (!v1::ItemKind_IsValid(item.kind())) {
    return Invalid(f + ".kind", absl::StrCat("unknown kind ", item.kind()));
  }
  const bool is_tool_item =
      item.kind() == v1::ITEM_KIND_TOOL_CALL || item.kind() == v1::ITEM_KIND_TOOL_RESULT;
  switch (item.kind()) {
    case v1::ITEM_KIND_SUMMARY_MARKER:
      return Invalid(f + ".kind", "summary markers are written by the service, not by clients");
    case v1::ITEM_KIND_TOOL_CALL:
      if (item.role() != v1::ROLE_ASSISTANT) {
        return Invalid(f + ".role", "a tool call must come from the assistant");
      }
      if (item.tool_name().empty()) return Invalid(f + ".tool_name", "required for a tool call");
      break;
    case v1::ITEM_KIND_TOOL_RESULT:
      if (item.role() != v1::ROLE_TOOL) {
        return Invalid(f + ".role", "a tool result must have role ROLE_TOOL");
      }
      break;
    case v1::ITEM_KIND_REASONING:
      if (item.role() != v1::ROLE_ASSISTANT) {
        return Invalid(f + ".role", "reasoning must come from the assistant");
      }
      break;
    default:  // A message.
      if (item.role() == v1::ROLE_TOOL) {
        return Invalid(f + ".kind", "an item with role ROLE_TOOL must be a tool result");
      }
      break;
  }
  if (is_tool_item && item.tool_call_id().empty()) {
    return Invalid(f + ".tool_call_id", "required for tool calls and tool results");
  }
  if (!is_tool_item && (!item.tool_call_id().empty() || !item.tool_name().empty())) {
    return Invalid(f + (item.tool_name().empty() ? ".tool_call_id" : ".tool_name"),
                   "only tool calls and tool results carry tool fields");
  }
  if (absl::Status s = ValidateText(f + ".content", item.content(), limits.max_item_bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateText(f + ".tool_name", item.tool_name(), kMaxToolFieldBytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateText(f + ".tool_call_id", item.tool_call_id(), kMaxToolFieldBytes);
      !s.ok()) {
    return s;
  }
  return ValidateMetadata(f + ".metadata", item.metadata(), limits);
}

absl::Status ValidatePolicy(absl::string_view field, const v1::CompactionPolicy& policy) {
  constexpr int kMaxRules = 32;
  constexpr int kMaxPatternBytes = 1024;
  constexpr int kMaxToolNames = 16;
  RETURN_IF_ERROR(ValidateText(absl::StrCat(field, ".instructions"), policy.instructions(), 4096));
  if (policy.keep_size() > kMaxRules) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".keep: at most ", kMaxRules, " rules, got ", policy.keep_size()));
  }
  for (int i = 0; i < policy.keep_size(); ++i) {
    const v1::KeepRule& rule = policy.keep(i);
    const std::string at = absl::StrCat(field, ".keep[", i, "]");
    RETURN_IF_ERROR(ValidateText(absl::StrCat(at, ".pattern"), rule.pattern(), kMaxPatternBytes));
    if (!rule.pattern().empty()) {
      RE2::Options options;
      options.set_log_errors(false);
      options.set_max_mem(kMaxKeepPatternMemory);
      const RE2 re(rule.pattern(), options);
      if (!re.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".pattern: not an RE2 expression: ", re.error()));
      }
    }
    for (int role : rule.roles()) {
      if (role < v1::ROLE_SYSTEM || role > v1::ROLE_TOOL) {
        return absl::InvalidArgumentError(absl::StrCat(at, ".roles: unknown role ", role));
      }
    }
    if (rule.tool_names_size() > kMaxToolNames) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".tool_names: at most ", kMaxToolNames));
    }
    for (const std::string& tool : rule.tool_names()) {
      RETURN_IF_ERROR(ValidateText(absl::StrCat(at, ".tool_names"), tool, 128));
    }
  }
  if (policy.has_keep_budget_fraction() &&
      !(policy.keep_budget_fraction() > 0.0 && policy.keep_budget_fraction() < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".keep_budget_fraction: must be in (0, 1)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateItems(absl::string_view field,
                           const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                           int max_items, const Limits& limits) {
  if (input.size() > max_items) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", input.size(), " items exceeds the limit of ", max_items));
  }
  int64_t bytes = 0;
  for (int i = 0; i < input.size(); ++i) {
    RETURN_IF_ERROR(ValidateNewItem(absl::StrCat(field, "[", i, "]"), input[i], limits));
    bytes += static_cast<int64_t>(input[i].content().size());
  }
  if (bytes > limits.max_request_content_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", bytes,
                                                   " bytes of content exceeds the limit of ",
                                                   limits.max_request_content_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateRecallQuery(absl::string_view field, absl::string_view query) {
  if (query.size() > kMaxRecallQueryBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": at most ", kMaxRecallQueryBytes, " bytes, got ", query.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConversationKey> ValidateKey(const std::string& tenant_id,
                                            const std::string& conversation_id) {
  ConversationKey key;
  ASSIGN_OR_RETURN(key.tenant_id, NormalizeTenant(tenant_id));
  RETURN_IF_ERROR(ValidateId("conversation_id", conversation_id));
  key.conversation_id = conversation_id;
  return key;
}

// ---------------------------------------------------------------------------
// Each request's checks.

absl::StatusOr<ConversationKey> ValidateCreateConversation(
    const v1::CreateConversationRequest& req, const Limits& limits) {
  ConversationKey key;
  ASSIGN_OR_RETURN(key.tenant_id, NormalizeTenant(req.tenant_id()));
  if (!req.conversation_id().empty()) {
    RETURN_IF_ERROR(ValidateId("conversation_id", req.conversation_id()));
  }
  key.conversation_id = req.conversation_id();
  if (req.carry_recent_turns() < 0 || req.carry_recent_turns() > kMaxCarriedTurns ||
      (req.carry_recent_turns() > 0 && req.continue_from().empty())) {
    return absl::InvalidArgumentError(
        "carry_recent_turns: from 0 to 100, and only with continue_from");
  }
  if (!req.continue_from().empty()) {
    RETURN_IF_ERROR(ValidateId("continue_from", req.continue_from()));
  }
  // A continuation keeps its source's model unless it names one.
  if (!req.model().empty() || req.continue_from().empty()) {
    RETURN_IF_ERROR(ValidateModelName("model", req.model()));
  }
  RETURN_IF_ERROR(
      ValidateText("system_prompt", req.system_prompt(), limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateText("pinned_instructions", req.pinned_instructions(),
                               limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateMetadata("metadata", req.metadata(), limits));
  if (req.has_compaction_policy()) {
    RETURN_IF_ERROR(ValidatePolicy("compaction_policy", req.compaction_policy()));
  }
  return key;
}

absl::StatusOr<ConversationKey> ValidateGetConversation(const v1::GetConversationRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

absl::StatusOr<ConversationKey> ValidateUpdateConversation(
    const v1::UpdateConversationRequest& req, const Limits& limits) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.has_model()) RETURN_IF_ERROR(ValidateModelName("model", req.model()));
  if (req.has_system_prompt()) {
    RETURN_IF_ERROR(
        ValidateText("system_prompt", req.system_prompt(), limits.max_system_prompt_bytes));
  }
  if (req.has_pinned_instructions()) {
    RETURN_IF_ERROR(ValidateText("pinned_instructions", req.pinned_instructions(),
                                 limits.max_system_prompt_bytes));
  }
  if (req.has_compaction_policy()) {
    RETURN_IF_ERROR(ValidatePolicy("compaction_policy", req.compaction_policy()));
  }
  return key;
}

absl::StatusOr<ConversationKey> ValidateGetContextAt(const v1::GetContextAtRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.version() < 0) return absl::InvalidArgumentError("version: must not be negative");
  if (req.has_compaction_version() && req.compaction_version() < 0) {
    return absl::InvalidArgumentError("compaction_version: must not be negative");
  }
  return key;
}

absl::StatusOr<std::string> ValidateListConversations(const v1::ListConversationsRequest& req) {
  return NormalizeTenant(req.tenant_id());
}

absl::StatusOr<ConversationKey> ValidateForkConversation(const v1::ForkConversationRequest& req,
                                                         const Limits& limits) {
  ConversationKey key;
  ASSIGN_OR_RETURN(key.tenant_id, NormalizeTenant(req.tenant_id()));
  if (!req.conversation_id().empty()) {
    RETURN_IF_ERROR(ValidateId("conversation_id", req.conversation_id()));
  }
  key.conversation_id = req.conversation_id();
  RETURN_IF_ERROR(ValidateId("source_conversation_id", req.source_conversation_id()));
  if (req.at_sequence() < 0) {
    return absl::InvalidArgumentError("at_sequence: must not be negative (0: the last item)");
  }
  if (!req.model().empty()) RETURN_IF_ERROR(ValidateModelName("model", req.model()));
  RETURN_IF_ERROR(ValidateMetadata("metadata", req.metadata(), limits));
  return key;
}

absl::StatusOr<ConversationKey> ValidateRewindConversation(
    const v1::RewindConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.to_sequence() < 0) {
    return absl::InvalidArgumentError("to_sequence: must not be negative");
  }
  if (!req.abandoned_conversation_id().empty()) {
    RETURN_IF_ERROR(ValidateId("abandoned_conversation_id", req.abandoned_conversation_id()));
  }
  RETURN_IF_ERROR(
      ValidateText("idempotency_key", req.idempotency_key(), kMaxIdempotencyKeyBytes));
  return key;
}

absl::StatusOr<ConversationKey> ValidateListForks(const v1::ListForksRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

absl::StatusOr<ConversationKey> ValidateDeleteConversation(
    const v1::DeleteConversationRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

absl::StatusOr<ConversationKey> ValidateAppendTurn(const v1::AppendTurnRequest& req,
                                                   const Limits& limits) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.items().empty()) return absl::InvalidArgumentError("items: at least one is required");
  RETURN_IF_ERROR(ValidateItems("items", req.items(), limits.max_items_per_append, limits));
  RETURN_IF_ERROR(ValidateText("idempotency_key", req.idempotency_key(),
                               kMaxIdempotencyKeyBytes));
  if (req.has_expected_version() && req.expected_version() < 0) {
    return absl::InvalidArgumentError("expected_version: must not be negative");
  }
  const v1::ProviderUsage& usage = req.usage();
  if (usage.input_tokens() < 0 || usage.output_tokens() < 0 ||
      usage.cached_input_tokens() < 0 || usage.reasoning_tokens() < 0) {
    return absl::InvalidArgumentError("usage: token counts must not be negative");
  }
  return key;
}

absl::StatusOr<ConversationKey> ValidateListItems(const v1::ListItemsRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

absl::StatusOr<ConversationKey> ValidateBuildContext(const v1::BuildContextRequest& req,
                                                     const Limits& limits) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  RETURN_IF_ERROR(
      ValidateItems("pending_input", req.pending_input(), limits.max_pending_items, limits));
  if (req.provider_reported_tokens() < 0) {
    return absl::InvalidArgumentError("provider_reported_tokens: must not be negative");
  }
  if (req.provider_reported_tokens() > 0 && !req.provider_overflow()) {
    return absl::InvalidArgumentError(
        "provider_reported_tokens: only with provider_overflow set");
  }
  RETURN_IF_ERROR(ValidateRecallQuery("recall_query", req.recall_query()));
  return key;
}

absl::StatusOr<ConversationKey> ValidateInspectContext(const v1::InspectContextRequest& req,
                                                       const Limits& limits) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  RETURN_IF_ERROR(
      ValidateItems("pending_input", req.pending_input(), limits.max_pending_items, limits));
  RETURN_IF_ERROR(ValidateRecallQuery("recall_query", req.recall_query()));
  return key;
}

absl::StatusOr<ConversationKey> ValidateCompact(const v1::CompactRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  switch (req.mode()) {
    case v1::CompactRequest::MODE_UNSPECIFIED:
    case v1::CompactRequest::MODE_AUTO:
    case v1::CompactRequest::MODE_PRUNE_ONLY:
    case v1::CompactRequest::MODE_SUMMARIZE:
    case v1::CompactRequest::MODE_TRUNCATE:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("mode: unknown mode ", req.mode()));
  }
  RETURN_IF_ERROR(ValidateText("instructions", req.instructions(), kMaxCompactInstructionsBytes));
  if (req.through_sequence() < 0) {
    return absl::InvalidArgumentError("through_sequence: must not be negative");
  }
  if (req.through_sequence() > 0 && req.mode() != v1::CompactRequest::MODE_UNSPECIFIED &&
      req.mode() != v1::CompactRequest::MODE_SUMMARIZE) {
    return absl::InvalidArgumentError("through_sequence: only with MODE_SUMMARIZE");
  }
  if (req.dry_run() && req.mode() == v1::CompactRequest::MODE_TRUNCATE) {
    return absl::InvalidArgumentError(
        "dry_run: a truncation changes no stored state; InspectContext previews it");
  }
  return key;
}

absl::StatusOr<ProposalRef> ValidateApplyCompaction(const v1::ApplyCompactionRequest& req,
                                                    const Limits& limits) {
  ProposalRef ref;
  ASSIGN_OR_RETURN(ref.key, ValidateKey(req.tenant_id(), req.conversation_id()));
  const std::string& id = req.proposal_id();
  if (!absl::SimpleAtoi(id, &ref.proposal_id) || ref.proposal_id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("proposal_id: '", absl::CHexEscape(id.substr(0, 64)),
                     "' is not a proposal id (a Compact dry run's proposal.proposal_id)"));
  }
  if (req.has_summary_text()) {
    RETURN_IF_ERROR(ValidateText("summary_text", req.summary_text(), limits.max_item_bytes));
  }
  return ref;
}

absl::StatusOr<ConversationKey> ValidateRevertCompaction(const v1::RevertCompactionRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.chunk_id() <= 0) {
    return absl::InvalidArgumentError("chunk_id: must be a positive chunk id");
  }
  return key;
}

absl::StatusOr<ConversationKey> ValidateListSummaries(const v1::ListSummariesRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

absl::StatusOr<ConversationKey> ValidateExpandSummary(const v1::ExpandSummaryRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.chunk_id() <= 0) return absl::InvalidArgumentError("chunk_id: must be positive");
  return key;
}

absl::StatusOr<ConversationKey> ValidateListCompactionEvents(
    const v1::ListCompactionEventsRequest& req) {
  return ValidateKey(req.tenant_id(), req.conversation_id());
}

namespace {

absl::StatusOr<ConversationKey> ValidatePinning(const std::string& tenant_id,
                                                const std::string& conversation_id,
                                                int64_t sequence) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(tenant_id, conversation_id));
  if (sequence <= 0) return absl::InvalidArgumentError("sequence: must be positive");
  return key;
}

}  // namespace

absl::StatusOr<ConversationKey> ValidatePinItem(const v1::PinItemRequest& req) {
  return ValidatePinning(req.tenant_id(), req.conversation_id(), req.sequence());
}

absl::StatusOr<ConversationKey> ValidateUnpinItem(const v1::UnpinItemRequest& req) {
  return ValidatePinning(req.tenant_id(), req.conversation_id(), req.sequence());
}

absl::StatusOr<ConversationKey> ValidateSearchHistory(const v1::SearchHistoryRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.query().empty()) return absl::InvalidArgumentError("query: required");
  RETURN_IF_ERROR(ValidateRecallQuery("query", req.query()));
  if (req.max_results() < 0 || req.max_results() > kMaxSearchResults) {
    return absl::InvalidArgumentError(absl::StrCat("max_results: must be in [0, ",
                                                   kMaxSearchResults, "], got ",
                                                   req.max_results()));
  }
  if (req.max_tokens() < 0 || req.max_tokens() > kMaxSearchResultTokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens: must be in [0, ",
                                                   kMaxSearchResultTokens, "], got ",
                                                   req.max_tokens()));
  }
  return key;
}

absl::StatusOr<ConversationKey> ValidateRedactItems(const v1::RedactItemsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ValidateKey(req.tenant_id(), req.conversation_id()));
  if (req.sequences().empty()) {
    return absl::InvalidArgumentError("sequences: at least one is required");
  }
  if (req.sequences_size() > kMaxRedactedPerCall) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequences: at most ", kMaxRedactedPerCall, " per call"));
  }
  for (int64_t s : req.sequences()) {
    if (s <= 0) return absl::InvalidArgumentError("sequences: must be positive");
  }
  if (req.reason().empty()) return absl::InvalidArgumentError("reason: required");
  RETURN_IF_ERROR(ValidateText("reason", req.reason(), kMaxRedactionReasonBytes));
  return key;
}

}  // namespace convstate
