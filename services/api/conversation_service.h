#ifndef CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
#define CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/background_compactor.h"
#include "services/api/compaction_control.h"
#include "services/api/context_cache.h"
#include "services/api/conversation_setup.h"
#include "services/api/history_cache.h"
#include "services/api/item_writer.h"
#include "services/api/profile_resolver.h"
#include "services/api/recall.h"
#include "services/api/validation.h"
#include "services/api/view_builder.h"
#include "services/compaction/engine/compaction_runner.h"
#include "services/compaction/summarizers/summarizer.h"
#include "services/profiles/model_registry.h"
#include "storage/storage.h"

namespace convstate {

class ConversationService;

// `key`, when it is one, set on the call's span (identifiers only, never
// content: they let a trace be found by conversation).
absl::StatusOr<ConversationKey> Traced(absl::StatusOr<ConversationKey> key);

// One unary RPC as a transport sees it: a fresh request message to parse
// into, and the call, which answers the response serialized.
struct UnaryRpc {
  using Wire = std::shared_ptr<const std::string>;
  std::function<std::unique_ptr<google::protobuf::Message>()> new_request;
  std::function<absl::StatusOr<Wire>(ConversationService&, const CallContext&,
                                     const google::protobuf::Message&)>
      call;
};

// The convstate.v1 API as plain calls: each RPC validates its request once
// (validation.h) and delegates: to Storage, or to the component of its
// concern (views: ViewBuilder; items: ItemWriter; a conversation's
// settings: ConversationSetup; compaction under the caller's control:
// CompactionController; recall: HistoryRecall; background and idle
// compaction: BackgroundCompactor; profiles: ProfileResolver). Knows
// protobuf messages but nothing of gRPC; the gRPC adapter calls it and maps
// the status. Thread-safe: the service holds no lock of its own; each
// component guards its state (see their headers).
class ConversationService {
 public:
  struct Options {
    Limits limits;
    // Lease holder name, lease length and polling for compactions.
    CompactionRunner::Options compaction;
    // Compact in the background when a BuildContext finds the conversation
    // in the soft band, so that the next call finds the work done; a call
    // whose view fits (below the emergency band) then waits for none.
    bool background_compaction = true;
    // Threads that run background compactions, each one conversation's at
    // a time (a summarizer call mostly waits on the network).
    int background_threads = 4;
    // Bytes of conversations' contexts (and their last plain views) kept
    // between calls, validated against storage on every call; 0 keeps none.
    int64_t context_cache_bytes = int64_t{256} << 20;
    // Bytes of conversations' histories kept to recall from
    // (history_cache.h); 0 keeps none.
    int64_t history_cache_bytes = int64_t{256} << 20;
    // Each tenant's limits on conversations and stored bytes, which storage
    // checks and counts at once with each create and append; unset: none.
    std::function<TenantLimits(const std::string& tenant)> tenant_limits;
    // The key of the digests redacted items keep (HMAC-SHA-256 of what they
    // held); empty: redacted items keep no digest.
    std::string redaction_key;
    // How long a Compact dry run's proposal can be applied.
    absl::Duration proposal_ttl = absl::Minutes(30);
    // Idle compaction (background_compactor.h): compact a conversation at
    // or above `idle_band` once its last BuildContext is older than its
    // profile's prompt_cache_ttl_s; each replica looks for due
    // conversations every `idle_scan` (0: never by itself; SweepIdle does
    // one look).
    bool idle_compaction = true;
    Band idle_band = Band::kSoft;
    absl::Duration idle_scan = absl::Seconds(5);
  };

  // `models`, `storage` and `summarizer` must outlive the service.
  ConversationService(Options options, const ModelRegistry* models, Storage* storage,
                      Summarizer* summarizer);
  // Waits for background compactions already running; drops queued ones.
  ~ConversationService();

  // Every unary RPC of convstate.v1.ConversationState by method name, the
  // one table a transport serves from: a new unary RPC is its proto, its
  // method here and its line in the table (conversation_service.cc).
  // StreamBuildContext, the one streaming RPC, is BuildContext with a
  // ProgressSink.
  static const absl::flat_hash_map<std::string, UnaryRpc>& UnaryRpcs();

  absl::StatusOr<v1::Conversation> CreateConversation(const CallContext& ctx,
                                                      const v1::CreateConversationRequest& req);
  absl::StatusOr<v1::Conversation> GetConversation(const CallContext& ctx,
                                                   const v1::GetConversationRequest& req);
  absl::StatusOr<v1::Conversation> UpdateConversation(const CallContext& ctx,
                                                      const v1::UpdateConversationRequest& req);
  absl::StatusOr<v1::BuildContextResponse> GetContextAt(const CallContext& ctx,
                                                        const v1::GetContextAtRequest& req);
  absl::StatusOr<v1::ListConversationsResponse> ListConversations(
      const CallContext& ctx, const v1::ListConversationsRequest& req);
  absl::StatusOr<v1::Conversation> ForkConversation(const CallContext& ctx,
                                                    const v1::ForkConversationRequest& req);
  absl::StatusOr<v1::RewindConversationResponse> RewindConversation(
      const CallContext& ctx, const v1::RewindConversationRequest& req);
  absl::StatusOr<v1::ListForksResponse> ListForks(const CallContext& ctx,
                                                  const v1::ListForksRequest& req);
  absl::StatusOr<v1::DeleteConversationResponse> DeleteConversation(
      const CallContext& ctx, const v1::DeleteConversationRequest& req);
  absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const CallContext& ctx,
                                                    const v1::AppendTurnRequest& req);
  absl::StatusOr<v1::ListItemsResponse> ListItems(const CallContext& ctx,
                                                  const v1::ListItemsRequest& req);
  // BuildContext, reporting each compaction step to `progress` (when not
  // null) as it happens (StreamBuildContext).
  absl::StatusOr<v1::BuildContextResponse> BuildContext(const CallContext& ctx,
                                                        const v1::BuildContextRequest& req,
                                                        const ProgressSink& progress = nullptr);
  // BuildContext's response serialized, as a gRPC adapter sends it. Calls
  // without pending input that find the conversation as this replica last
  // saw it share the bytes built the first time.
  absl::StatusOr<std::shared_ptr<const std::string>> BuildContextWire(
      const CallContext& ctx, const v1::BuildContextRequest& req);
  // What the context cache holds and how its lookups went.
  ContextCache::Stats context_cache_stats() const { return cache_.stats(); }
  absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const CallContext& ctx, const v1::InspectContextRequest& req);
  // Compaction under the caller's control (CompactionController): a
  // compaction now, a dry run's proposal applied as made or edited, the
  // newest summary undone.
  absl::StatusOr<v1::CompactResponse> Compact(const CallContext& ctx,
                                              const v1::CompactRequest& req);
  absl::StatusOr<v1::ApplyCompactionResponse> ApplyCompaction(
      const CallContext& ctx, const v1::ApplyCompactionRequest& req);
  absl::StatusOr<v1::RevertCompactionResponse> RevertCompaction(
      const CallContext& ctx, const v1::RevertCompactionRequest& req);
  absl::StatusOr<v1::ListSummariesResponse> ListSummaries(const CallContext& ctx,
                                                          const v1::ListSummariesRequest& req);
  absl::StatusOr<v1::ExpandSummaryResponse> ExpandSummary(const CallContext& ctx,
                                                          const v1::ExpandSummaryRequest& req);
  absl::StatusOr<v1::ListCompactionEventsResponse> ListCompactionEvents(
      const CallContext& ctx, const v1::ListCompactionEventsRequest& req);
  absl::StatusOr<v1::Item> PinItem(const CallContext& ctx, const v1::PinItemRequest& req);
  absl::StatusOr<v1::Item> UnpinItem(const CallContext& ctx, const v1::UnpinItemRequest& req);
  // Passages of the whole history that answer a query (see the API).
  absl::StatusOr<v1::SearchHistoryResponse> SearchHistory(const CallContext& ctx,
                                                          const v1::SearchHistoryRequest& req);
  // Idle compaction: claims the conversations whose idle due time has come
  // and compacts them (those still above the idle band); returns how many
  // were compacted. The sweeper calls it every idle_scan.
  int SweepIdle() { return background_.SweepIdle(); }

  // Erases items' content and every summary derived from it (see the API).
  absl::StatusOr<v1::RedactItemsResponse> RedactItems(const CallContext& ctx,
                                                      const v1::RedactItemsRequest& req);

 private:
  const Options options_;
  // options_.tenant_limits, or no limits when none are configured.
  const std::function<TenantLimits(const std::string& tenant)> tenant_limits_;
  Storage* const storage_;
  ProfileResolver profiles_;
  CompactionRunner runner_;
  ContextCache cache_;
  HistoryCache history_;
  ItemWriter items_;
  HistoryRecall recall_;
  CompactionController control_;
  ConversationSetup setup_;
  // Destroyed before everything its threads use (its destructor waits for
  // the compactions running).
  BackgroundCompactor background_;
  ViewBuilder views_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
