#include "services/api/conversation_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/api/wire.h"
#include "services/common/status_macros.h"
#include "services/telemetry/telemetry.h"

namespace convstate {
namespace {

constexpr int kDefaultConversationPage = 50;
constexpr int kDefaultItemPage = 100;
// Summaries and audit rows: one page held them all before pages existed.
constexpr int kDefaultTrailPage = 1000;

// A page of at most `rows` rows and the configured bytes.
PageLimit PageOf(int rows, const Limits& limits) {
  return PageLimit{rows, limits.max_page_bytes};
}

// A list call's page of rows numbered by `kind`'s positions: the rows
// after `after`, at most `limit`.
struct NumberedPage {
  PageLimit limit;
  int64_t after = 0;
};
absl::StatusOr<NumberedPage> PageAfter(int32_t page_size, const std::string& page_token,
                                       absl::string_view kind, int default_size,
                                       const Limits& limits) {
  NumberedPage page;
  ASSIGN_OR_RETURN(const int rows, PageSize(page_size, default_size));
  page.limit = PageOf(rows, limits);
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(page.after, DecodeNumberToken(kind, page_token, 0, INT64_MAX));
  }
  return page;
}

// The limits of a tenant: `configured`'s, or none.
std::function<TenantLimits(const std::string&)> LimitsOrNone(
    std::function<TenantLimits(const std::string&)> configured) {
  if (configured) return configured;
  return [](const std::string&) { return TenantLimits{}; };
}

absl::StatusOr<v1::Item> SetPinned(Storage& storage, const CallContext& ctx,
                                   absl::StatusOr<ConversationKey> key, int64_t sequence,
                                   bool pinned) {
  ASSIGN_OR_RETURN(const ConversationKey checked, Traced(std::move(key)));
  ASSIGN_OR_RETURN(Item item, storage.SetPinned(ctx, checked, sequence, pinned));
  v1::Item out;
  ToProto(item, &out);
  return out;
}

}  // namespace

absl::StatusOr<ConversationKey> Traced(absl::StatusOr<ConversationKey> key) {
  if (key.ok()) {
    telemetry::SetCurrentAttribute("gen_ai.conversation.id", key->conversation_id);
    telemetry::SetCurrentAttribute("convstate.tenant.id", key->tenant_id);
  }
  return key;
}

ConversationService::ConversationService(Options options, const ModelRegistry* models,
                                         Storage* storage, Summarizer* summarizer)
    : options_(std::move(options)),
      tenant_limits_(LimitsOrNone(options_.tenant_limits)),
      storage_(storage),
      profiles_(models, storage, options_.background_compaction),
      runner_(options_.compaction, storage, summarizer),
      cache_(options_.context_cache_bytes, options_.compaction.telemetry),
      history_(storage, options_.compaction.clock, options_.history_cache_bytes),
      items_(ItemWriter::Options{options_.limits.max_conversation_bytes, options_.redaction_key,
                                 tenant_limits_},
             storage, &profiles_, &cache_, &history_, options_.compaction.clock),
      recall_(storage, history_, profiles_),
      control_(CompactionController::Options{options_.proposal_ttl, tenant_limits_}, storage,
               &runner_, &profiles_),
      setup_(tenant_limits_, storage, &profiles_, &control_),
      background_(BackgroundCompactor::Options{options_.compaction, options_.background_threads,
                                               options_.idle_compaction, options_.idle_band,
                                               options_.idle_scan},
                  storage, &runner_, &cache_, &history_, &profiles_),
      views_(ViewBuilder::Options{options_.limits.max_view_bytes, options_.background_compaction,
                                  options_.compaction.telemetry},
             storage, &runner_, &cache_, &profiles_, &recall_, &background_) {}

ConversationService::~ConversationService() = default;

// ---------------------------------------------------------------------------
// Conversations.

absl::StatusOr<v1::Conversation> ConversationService::CreateConversation(
    const CallContext& ctx, const v1::CreateConversationRequest& req) {
  ASSIGN_OR_RETURN(const ConversationKey key, ValidateCreateConversation(req, options_.limits));
  return setup_.Create(ctx, key, req);
}

absl::StatusOr<v1::Conversation> ConversationService::GetConversation(
    const CallContext& ctx, const v1::GetConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateGetConversation(req)));
  ASSIGN_OR_RETURN(Conversation c, storage_->GetConversation(ctx, key));
  return ToProto(c);
}

absl::StatusOr<v1::Conversation> ConversationService::UpdateConversation(
    const CallContext& ctx, const v1::UpdateConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key,
                   Traced(ValidateUpdateConversation(req, options_.limits)));
  return setup_.Update(ctx, key, req);
}

absl::StatusOr<v1::ListConversationsResponse> ConversationService::ListConversations(
    const CallContext& ctx, const v1::ListConversationsRequest& req) {
  ASSIGN_OR_RETURN(const std::string tenant, ValidateListConversations(req));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultConversationPage));
  std::string after;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeIdToken("c", req.page_token()));
  }
  ASSIGN_OR_RETURN(Page<Conversation> found,
                   storage_->ListConversations(ctx, tenant, after,
                                               PageOf(page_size, options_.limits)));
  v1::ListConversationsResponse out;
  for (const Conversation& c : found.rows) *out.add_conversations() = ToProto(c);
  if (found.more && !found.rows.empty()) {
    out.set_next_page_token(EncodePageToken("c", found.rows.back().key.conversation_id));
  }
  return out;
}

absl::StatusOr<v1::Conversation> ConversationService::ForkConversation(
    const CallContext& ctx, const v1::ForkConversationRequest& req) {
  ASSIGN_OR_RETURN(const ConversationKey key, ValidateForkConversation(req, options_.limits));
  return setup_.Fork(ctx, key, req);
}

absl::StatusOr<v1::RewindConversationResponse> ConversationService::RewindConversation(
    const CallContext& ctx, const v1::RewindConversationRequest& req) {
  ASSIGN_OR_RETURN(const ConversationKey key, Traced(ValidateRewindConversation(req)));
  return setup_.Rewind(ctx, key, req);
}

absl::StatusOr<v1::ListForksResponse> ConversationService::ListForks(
    const CallContext& ctx, const v1::ListForksRequest& req) {
  ASSIGN_OR_RETURN(const ConversationKey key, Traced(ValidateListForks(req)));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultConversationPage));
  std::string after;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeIdToken("f", req.page_token()));
  }
  ASSIGN_OR_RETURN(Page<Conversation> found,
                   storage_->ListForks(ctx, key, after, PageOf(page_size, options_.limits)));
  v1::ListForksResponse out;
  for (const Conversation& c : found.rows) *out.add_forks() = ToProto(c);
  if (found.more && !found.rows.empty()) {
    out.set_next_page_token(EncodePageToken("f", found.rows.back().key.conversation_id));
  }
  return out;
}

absl::StatusOr<v1::DeleteConversationResponse> ConversationService::DeleteConversation(
    const CallContext& ctx, const v1::DeleteConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateDeleteConversation(req)));
  ASSIGN_OR_RETURN(int64_t items, storage_->DeleteConversation(ctx, key));
  history_.Forget(key);
  v1::DeleteConversationResponse out;
  out.set_items_deleted(items);
  return out;
}

// ---------------------------------------------------------------------------
// Items.

absl::StatusOr<v1::AppendTurnResponse> ConversationService::AppendTurn(
    const CallContext& ctx, const v1::AppendTurnRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateAppendTurn(req, options_.limits)));
  return items_.Append(ctx, key, req);
}

absl::StatusOr<v1::ListItemsResponse> ConversationService::ListItems(
    const CallContext& ctx, const v1::ListItemsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateListItems(req)));
  ASSIGN_OR_RETURN(const NumberedPage page, PageAfter(req.page_size(), req.page_token(), "i",
                                                      kDefaultItemPage, options_.limits));
  ASSIGN_OR_RETURN(Page<Item> items, storage_->ListItems(ctx, key, page.after, page.limit));
  v1::ListItemsResponse out;
  for (const Item& item : items.rows) ToProto(item, out.add_items());
  if (items.more && !items.rows.empty()) {
    out.set_next_page_token(EncodePageToken("i", absl::StrCat(items.rows.back().sequence)));
  }
  return out;
}

absl::StatusOr<v1::Item> ConversationService::PinItem(const CallContext& ctx,
                                                      const v1::PinItemRequest& req) {
  return SetPinned(*storage_, ctx, ValidatePinItem(req), req.sequence(), true);
}

absl::StatusOr<v1::Item> ConversationService::UnpinItem(const CallContext& ctx,
                                                        const v1::UnpinItemRequest& req) {
  return SetPinned(*storage_, ctx, ValidateUnpinItem(req), req.sequence(), false);
}

absl::StatusOr<v1::RedactItemsResponse> ConversationService::RedactItems(
    const CallContext& ctx, const v1::RedactItemsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateRedactItems(req)));
  return items_.Redact(ctx, key, req);
}

// ---------------------------------------------------------------------------
// Views.

absl::StatusOr<v1::BuildContextResponse> ConversationService::BuildContext(
    const CallContext& ctx, const v1::BuildContextRequest& req, const ProgressSink& progress) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateBuildContext(req, options_.limits)));
  ASSIGN_OR_RETURN(ViewBuilder::Answer answer,
                   views_.Build(ctx, key, req, progress, /*wire=*/false));
  return std::move(*answer.message);
}

absl::StatusOr<std::shared_ptr<const std::string>> ConversationService::BuildContextWire(
    const CallContext& ctx, const v1::BuildContextRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateBuildContext(req, options_.limits)));
  ASSIGN_OR_RETURN(ViewBuilder::Answer answer,
                   views_.Build(ctx, key, req, nullptr, /*wire=*/true));
  return std::move(answer.wire);
}

absl::StatusOr<v1::BuildContextResponse> ConversationService::GetContextAt(
    const CallContext& ctx, const v1::GetContextAtRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateGetContextAt(req)));
  return views_.At(ctx, key, req);
}

absl::StatusOr<v1::InspectContextResponse> ConversationService::InspectContext(
    const CallContext& ctx, const v1::InspectContextRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateInspectContext(req, options_.limits)));
  return views_.Inspect(ctx, key, req);
}

// ---------------------------------------------------------------------------
// Compaction under the caller's control, and its trail.

absl::StatusOr<v1::CompactResponse> ConversationService::Compact(const CallContext& ctx,
                                                                 const v1::CompactRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateCompact(req)));
  return control_.Compact(ctx, key, req);
}

absl::StatusOr<v1::ApplyCompactionResponse> ConversationService::ApplyCompaction(
    const CallContext& ctx, const v1::ApplyCompactionRequest& req) {
  ASSIGN_OR_RETURN(ProposalRef proposal, ValidateApplyCompaction(req, options_.limits));
  RETURN_IF_ERROR(Traced(proposal.key).status());
  return control_.ApplyCompaction(ctx, proposal, req);
}

absl::StatusOr<v1::RevertCompactionResponse> ConversationService::RevertCompaction(
    const CallContext& ctx, const v1::RevertCompactionRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateRevertCompaction(req)));
  return control_.RevertCompaction(ctx, key, req);
}

// ---------------------------------------------------------------------------
// Recall.

absl::StatusOr<v1::SearchHistoryResponse> ConversationService::SearchHistory(
    const CallContext& ctx, const v1::SearchHistoryRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateSearchHistory(req)));
  return recall_.SearchHistory(ctx, key, req);
}

// ---------------------------------------------------------------------------
// The trail: summaries and audit rows.

absl::StatusOr<v1::ListSummariesResponse> ConversationService::ListSummaries(
    const CallContext& ctx, const v1::ListSummariesRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateListSummaries(req)));
  ASSIGN_OR_RETURN(const NumberedPage page, PageAfter(req.page_size(), req.page_token(), "s",
                                                      kDefaultTrailPage, options_.limits));
  ASSIGN_OR_RETURN(Page<SummaryChunk> chunks,
                   storage_->ListSummaries(ctx, key, req.include_superseded(), page.after,
                                           page.limit));
  v1::ListSummariesResponse out;
  for (const SummaryChunk& c : chunks.rows) ToProto(c, out.add_chunks());
  if (chunks.more && !chunks.rows.empty()) {
    out.set_next_page_token(EncodePageToken("s", absl::StrCat(chunks.rows.back().chunk_id)));
  }
  return out;
}

absl::StatusOr<v1::ExpandSummaryResponse> ConversationService::ExpandSummary(
    const CallContext& ctx, const v1::ExpandSummaryRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateExpandSummary(req)));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultItemPage));
  // The one chunk: the first after the id before it.
  ASSIGN_OR_RETURN(Page<SummaryChunk> chunks,
                   storage_->ListSummaries(ctx, key, /*include_superseded=*/true,
                                           req.chunk_id() - 1, PageLimit{1, 1}));
  auto chunk = chunks.rows.begin();
  if (chunk == chunks.rows.end() || chunk->chunk_id != req.chunk_id()) {
    return absl::NotFoundError(absl::StrCat("summary chunk ", req.chunk_id(), " not found in '",
                                            key.conversation_id, "'"));
  }
  int64_t after = chunk->from_sequence - 1;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeNumberToken("x", req.page_token(), chunk->from_sequence - 1,
                                              chunk->through_sequence));
  }
  ASSIGN_OR_RETURN(Page<Item> items, storage_->ListItems(ctx, key, after,
                                                         PageOf(page_size, options_.limits)));
  v1::ExpandSummaryResponse out;
  ToProto(*chunk, out.mutable_chunk());
  int64_t last = 0;
  for (const Item& item : items.rows) {
    if (item.sequence > chunk->through_sequence) break;
    ToProto(item, out.add_items());
    last = item.sequence;
  }
  if (items.more && last != 0 && last < chunk->through_sequence) {
    out.set_next_page_token(EncodePageToken("x", absl::StrCat(last)));
  }
  return out;
}

absl::StatusOr<v1::ListCompactionEventsResponse> ConversationService::ListCompactionEvents(
    const CallContext& ctx, const v1::ListCompactionEventsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, Traced(ValidateListCompactionEvents(req)));
  ASSIGN_OR_RETURN(const NumberedPage page, PageAfter(req.page_size(), req.page_token(), "e",
                                                      kDefaultTrailPage, options_.limits));
  ASSIGN_OR_RETURN(Page<CompactionEvent> events,
                   storage_->ListCompactionEvents(ctx, key, page.after, page.limit));
  v1::ListCompactionEventsResponse out;
  if (events.more && !events.rows.empty()) {
    out.set_next_page_token(EncodePageToken("e", absl::StrCat(events.rows.back().event_id)));
  }
  for (const CompactionEvent& e : events.rows) ToProto(e, out.add_events());
  return out;
}

namespace {

std::shared_ptr<const std::string> WireOf(const google::protobuf::Message& message) {
  return std::make_shared<const std::string>(message.SerializeAsString());
}
std::shared_ptr<const std::string> WireOf(std::shared_ptr<const std::string> wire) {
  return wire;
}

// `method` as a UnaryRpc.
template <typename Req, typename Resp>
UnaryRpc Bind(absl::StatusOr<Resp> (ConversationService::*method)(const CallContext&,
                                                                   const Req&)) {
  return UnaryRpc{
      [] { return std::unique_ptr<google::protobuf::Message>(std::make_unique<Req>()); },
      [method](ConversationService& service, const CallContext& ctx,
               const google::protobuf::Message& request) -> absl::StatusOr<UnaryRpc::Wire> {
        absl::StatusOr<Resp> response =
            (service.*method)(ctx, static_cast<const Req&>(request));
        if (!response.ok()) return response.status();
        return WireOf(*std::move(response));
      }};
}

}  // namespace

const absl::flat_hash_map<std::string, UnaryRpc>& ConversationService::UnaryRpcs() {
  using S = ConversationService;
  static const auto* const rpcs = new absl::flat_hash_map<std::string, UnaryRpc>{
      {"CreateConversation", Bind(&S::CreateConversation)},
      {"ForkConversation", Bind(&S::ForkConversation)},
      {"ListForks", Bind(&S::ListForks)},
      {"RewindConversation", Bind(&S::RewindConversation)},
      {"GetConversation", Bind(&S::GetConversation)},
      {"ListConversations", Bind(&S::ListConversations)},
      {"DeleteConversation", Bind(&S::DeleteConversation)},
      {"AppendTurn", Bind(&S::AppendTurn)},
      {"ListItems", Bind(&S::ListItems)},
      {"BuildContext", Bind(&S::BuildContextWire)},
      {"InspectContext", Bind(&S::InspectContext)},
      {"Compact", Bind(&S::Compact)},
      {"ApplyCompaction", Bind(&S::ApplyCompaction)},
      {"RevertCompaction", Bind(&S::RevertCompaction)},
      {"ListSummaries", Bind(&S::ListSummaries)},
      {"ExpandSummary", Bind(&S::ExpandSummary)},
      {"ListCompactionEvents", Bind(&S::ListCompactionEvents)},
      {"PinItem", Bind(&S::PinItem)},
      {"UnpinItem", Bind(&S::UnpinItem)},
      {"UpdateConversation", Bind(&S::UpdateConversation)},
      {"GetContextAt", Bind(&S::GetContextAt)},
      {"RedactItems", Bind(&S::RedactItems)},
      {"SearchHistory", Bind(&S::SearchHistory)},
  };
  return *rpcs;
}

}  // namespace convstate
