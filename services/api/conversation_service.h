#ifndef CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
#define CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include <optional>
#include <string>

#include "services/compaction/engine/compaction_runner.h"
#include "services/compaction/recall/recall.h"
#include "services/api/context_cache.h"
#include "services/api/history_cache.h"
#include "services/api/tenant_usage.h"
#include "services/api/validation.h"
#include "services/common/thread_pool.h"
#include "services/compaction/summarizers/summarizer.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "services/profiles/model_registry.h"
#include "storage/storage.h"

namespace convstate {

class ConversationService;

// The key a request names, validated (INVALID_ARGUMENT naming the field),
// and set on the call's span.
absl::StatusOr<ConversationKey> ToKey(const std::string& tenant_id,
                                      const std::string& conversation_id);

// INVALID_ARGUMENT if a recall query (the request's `field`) is too long.
absl::Status ValidateRecallQuery(absl::string_view field, absl::string_view query);

// What BuildContext recalls for: `recall_query`, or else the text of the
// user messages in the pending input.
std::string RecallQueryOf(const v1::BuildContextRequest& req);
// The same from a call's recall_query and pending input.
std::string RecallQueryOf(const std::string& recall_query,
                          const google::protobuf::RepeatedPtrField<v1::NewItem>& pending_input);

// One unary RPC as a transport sees it: a fresh request message to parse
// into, and the call, which answers the response serialized.
struct UnaryRpc {
  using Wire = std::shared_ptr<const std::string>;
  std::function<std::unique_ptr<google::protobuf::Message>()> new_request;
  std::function<absl::StatusOr<Wire>(ConversationService&, const CallContext&,
                                     const google::protobuf::Message&)>
      call;
};

// The convstate.v1 API as plain calls: validates requests, talks to Storage
// and the compaction core, and builds responses. Knows protobuf messages but
// nothing of gRPC; the gRPC adapter calls it and maps the status. Thread-safe.
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
    // Idle compaction (idle.cc): compact a conversation at or above
    // `idle_band` once its last BuildContext is older than its profile's
    // prompt_cache_ttl_s; each replica looks for due conversations every
    // `idle_scan` (0: never by itself; SweepIdle does one look).
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
  absl::StatusOr<v1::DeleteConversationResponse> DeleteConversation(
      const CallContext& ctx, const v1::DeleteConversationRequest& req);
  absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const CallContext& ctx,
                                                    const v1::AppendTurnRequest& req);
  absl::StatusOr<v1::ListItemsResponse> ListItems(const CallContext& ctx,
                                                  const v1::ListItemsRequest& req);
  absl::StatusOr<v1::BuildContextResponse> BuildContext(const CallContext& ctx,
                                                        const v1::BuildContextRequest& req);
  // BuildContext that reports each compaction step to `progress` as it
  // happens (StreamBuildContext).
  absl::StatusOr<v1::BuildContextResponse> BuildContext(const CallContext& ctx,
                                                        const v1::BuildContextRequest& req,
                                                        const ProgressSink& progress);
  // BuildContext's response serialized, as a gRPC adapter sends it. Calls
  // without pending input that find the conversation as this replica last
  // saw it share the bytes built the first time.
  absl::StatusOr<std::shared_ptr<const std::string>> BuildContextWire(
      const CallContext& ctx, const v1::BuildContextRequest& req);
  // What the context cache holds and how its lookups went.
  ContextCache::Stats context_cache_stats() const { return cache_.stats(); }
  absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const CallContext& ctx, const v1::InspectContextRequest& req);
  // Compaction under the caller's control (compaction_control.cc): a
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
  int SweepIdle();

  // Erases items' content and every summary derived from it (see the API).
  absl::StatusOr<v1::RedactItemsResponse> RedactItems(const CallContext& ctx,
                                                      const v1::RedactItemsRequest& req);

 private:
  // The limits of `tenant`; none when no limits are configured.
  TenantLimits LimitsOf(const std::string& tenant) const {
    return options_.tenant_limits ? options_.tenant_limits(tenant) : TenantLimits{};
  }

  // storage's LoadContext, held to limits.max_view_bytes (CheckViewBytes).
  absl::StatusOr<ContextSnapshot> LoadView(const CallContext& ctx, const ConversationKey& key);
  // RESOURCE_EXHAUSTED, naming the bound, when `snapshot`'s live and pinned
  // items hold more than limits.max_view_bytes.
  absl::Status CheckViewBytes(const ContextSnapshot& snapshot) const;

  // A page of at most `rows` rows and the configured bytes.
  PageLimit PageOf(int rows) const { return PageLimit{rows, options_.limits.max_page_bytes}; }

  // The conversation's profile (its model's, with its overrides) and
  // tokenizer. FAILED_PRECONDITION if the model no longer has a profile.
  absl::StatusOr<ResolvedProfile> ProfileOf(const Conversation& conversation) const;

  // What a compaction off the call path starts from: the conversation's
  // context as stored (the one this replica keeps, brought up to date),
  // its profile, and its counts from that profile's tokenizer
  // (EnsureCounts).
  struct Counted {
    ContextSnapshot snapshot;
    ResolvedProfile resolved;
  };
  absl::StatusOr<Counted> LoadCounted(const CallContext& ctx, const ConversationKey& key);

  // The response for `outcome`'s view (built by a call in `mode` against
  // `profile`): entries, tokens, hash, breakpoints, band and why it is at
  // or above the hard band. The view's texts move into it.
  v1::BuildContextResponse ResponseOf(const ConversationKey& key, CompactionOutcome& outcome,
                                      const ModelProfile& profile, CompactionMode mode) const;
  // The mode a BuildContext compacts in for `profile`: blocking at the hard
  // band, or serving while the background compacts (the profile's
  // hard_band_policy, with background compaction on).
  CompactionMode CallMode(const ModelProfile& profile) const;

  // BuildContext after the provider refused the last view as too long:
  // corrects the conversation's estimate, writes the audit row, compacts to
  // a stricter target, and never returns the refused view.
  absl::StatusOr<v1::BuildContextResponse> RecoverFromOverflow(
      const CallContext& ctx, const ConversationKey& key, ContextSnapshot snapshot,
      const ResolvedProfile& resolved, const std::vector<ItemData>& pending,
      int64_t reported_tokens, const ProgressSink& progress);

  // A continuation's source, summarized first through the item before
  // its newest `recent_turns` turns when it holds items no summary covers
  // (compaction_control.cc).
  absl::StatusOr<ContextSnapshot> PrepareHandoff(const CallContext& ctx,
                                                 const ConversationKey& key, int recent_turns);
  // What a continuation of `source` carries over as its first items: the
  // source's pinned items and newest `recent_turns` turns, counted with
  // `resolved`'s tokenizer under `profile` (storage appends them in the
  // create's transaction).
  static std::vector<ItemData> CarriedTurns(const ContextSnapshot& source, int recent_turns,
                                            const ResolvedProfile& resolved,
                                            const ModelProfile& profile);
  // CreateConversation, once: ABORTED when a continuation's source was
  // erased from or deleted while it was handed off.
  absl::StatusOr<v1::Conversation> CreateOnce(const CallContext& ctx,
                                              const v1::CreateConversationRequest& req);

  // Keeps a dry run's proposal (`outcome.proposal`) and fills in `answer`.
  absl::Status Propose(const CallContext& ctx, const ConversationKey& key,
                       const std::string& model, CompactionOutcome& outcome,
                       v1::CompactionProposal& answer);

  // The storage update `req` asks of `current`, with its prompts counted
  // for the model and profile it will have.
  absl::StatusOr<ConversationUpdate> UpdateFor(const Conversation& current,
                                               const v1::UpdateConversationRequest& req) const;

  // CreateConversation's checks of what the request says by itself (its
  // model if named, prompts, metadata, compaction policy): made before a
  // continuation's hand-off does any work.
  absl::Status ValidateOwnFields(const v1::CreateConversationRequest& req) const;

  // Counts the view's items and chunks again when they were counted with
  // another tokenizer than `resolved`'s (the model changed), and stores the
  // new counts when `keep` (a reader's call stores nothing).
  absl::Status EnsureCounts(const CallContext& ctx, ContextSnapshot& snapshot,
                            const ResolvedProfile& resolved, bool keep = true);

  // The view's status, band and size on the call's span and metrics.
  void RecordView(v1::ContextStatus status, int64_t tokens, Band band) const;

  // The conversation's context as it is now: what this replica holds,
  // brought up to date by one storage read (and kept again by View).
  absl::StatusOr<std::shared_ptr<const CachedContext>> CurrentContext(const CallContext& ctx,
                                                                     const ConversationKey& key);

  // BuildContext as a message (wire false) or as serialized bytes.
  struct ViewAnswer {
    std::optional<v1::BuildContextResponse> message;
    std::shared_ptr<const std::string> wire;
  };
  absl::StatusOr<ViewAnswer> View(const CallContext& ctx, const v1::BuildContextRequest& req,
                                  const ProgressSink& progress, bool wire);

  // Pending input as items, counted with `profile`'s tokenizer.
  std::vector<ItemData> PendingItems(const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                                     const ResolvedProfile& profile) const;
  // INVALID_ARGUMENT naming the field if `input` (the request's `field`) has
  // more than `max_items` items, a malformed item, or too many bytes.
  absl::Status ValidateItems(absl::string_view field,
                             const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                             int max_items) const;

  absl::StatusOr<v1::Item> SetPinned(const CallContext& ctx, const std::string& tenant_id,
                                     const std::string& conversation_id, int64_t sequence,
                                     bool pinned);

  // The model `key` is bound to, remembered per replica; `refresh` asks
  // storage again.
  absl::StatusOr<std::string> ModelOf(const CallContext& ctx, const ConversationKey& key,
                                      bool refresh);

  // Recall for one BuildContext (recall.cc): StartRecall asks storage for
  // the candidates of `query` on another thread, while the view is built;
  // AddRecall adds the RECALLED section to the view: passages that match
  // and that the view does not show verbatim, within the profile's recall
  // budget and the room left in the window. Recall is an addition: when
  // storage fails, the view goes without it.
  struct PendingRecall;
  std::shared_ptr<PendingRecall> StartRecall(const CallContext& ctx, const ConversationKey& key,
                                             const Conversation& conversation,
                                             const ResolvedProfile& resolved,
                                             const std::string& query);
  // Returns the passages it added.
  std::vector<RecalledPassage> AddRecall(const std::shared_ptr<PendingRecall>& pending,
                                         const Conversation& conversation,
                                         const ResolvedProfile& resolved, ContextView& view);
  // The most the RECALLED section may take under `profile`, in tokens.
  static int64_t RecallBudget(const ModelProfile& profile);

  // Idle compaction (idle.cc). NoteBuilt: a view of `key` in `band` was
  // built; moves its idle due time a prompt cache lifetime on when it is
  // at or above the idle band (written off the call path, at most every
  // quarter lifetime). CompactIdle: compacts a claimed conversation if it
  // is still above the band, with an `idle` audit row; true if it did.
  void NoteBuilt(const ConversationKey& key, Band band, int64_t prompt_cache_ttl_s);
  bool CompactIdle(const ConversationKey& key);
  void SweepIdleUntilStopped();

  // Starts a background compaction of `key` unless one is already queued or
  // running in this process (the lease keeps it to one across replicas).
  void CompactInBackground(const ConversationKey& key);

  const Options options_;
  const ModelRegistry* const models_;
  Storage* const storage_;
  CompactionRunner runner_;
  ContextCache cache_;
  HistoryCache history_;
  TenantBytes tenant_bytes_;
  absl::Mutex models_mu_;
  absl::flat_hash_map<std::string, std::string> models_by_key_ ABSL_GUARDED_BY(models_mu_);
  // Words found too common to search for, per conversation (its storage
  // key), with the item count they were counted at: counting how many items
  // hold a word costs as much as the word is common, so each is counted
  // once until the conversation has doubled. Bounded: cleared when full.
  struct CommonTerms {
    int64_t items = 0;
    absl::flat_hash_set<std::string> terms;
    // Whether the verdicts still stand for a conversation of `now` items.
    bool Holds(int64_t now) const { return now < 2 * items; }
  };
  absl::Mutex common_terms_mu_;
  absl::flat_hash_map<int64_t, CommonTerms> common_terms_ ABSL_GUARDED_BY(common_terms_mu_);
  absl::Mutex background_mu_;
  absl::flat_hash_set<std::string> background_keys_ ABSL_GUARDED_BY(background_mu_);
  bool stopping_ ABSL_GUARDED_BY(background_mu_) = false;
  absl::Mutex idle_mu_;
  // Due times this replica wrote, by conversation.
  absl::flat_hash_map<std::string, absl::Time> idle_noted_ ABSL_GUARDED_BY(idle_mu_);
  // Last members: destroyed first, while everything their tasks use still is.
  std::unique_ptr<ThreadPool> background_;
  std::unique_ptr<ThreadPool> idle_writes_;
  std::unique_ptr<std::thread> idle_sweeper_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_CONVERSATION_SERVICE_H_
