#include "services/api/conversation_service.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "services/api/wire.h"
#include "services/compaction/engine/continuation.h"
#include "services/compaction/engine/overflow.h"
#include "services/common/fingerprint.h"
#include "services/common/log.h"
#include "services/common/status_macros.h"
#include "services/compaction/view/context_view.h"
#include "services/compaction/ledger/ledger.h"
#include "services/compaction/engine/planner.h"
#include "services/compaction/engine/summaries.h"
#include "storage/context_delta.h"
#include "storage/rules.h"

namespace convstate {
namespace {

constexpr int kDefaultConversationPage = 50;
constexpr int kDefaultItemPage = 100;
// Summaries and audit rows: one page held them all before pages existed.
constexpr int kDefaultTrailPage = 1000;
constexpr int kMaxIdempotencyKeyBytes = 128;
// The nice value of background compaction threads (of 19): they get a
// small share of a CPU the calls want, and all of an idle one.
constexpr int kBackgroundNiceness = 10;
// RedactItems: items per call, the reason's size, and what an erased item
// holds instead of its content.
constexpr int kMaxRedactedPerCall = 1000;
constexpr int kMaxRedactionReasonBytes = 1024;
constexpr char kTombstone[] = "[redacted]";
// Conversations whose model this replica remembers (a model never changes
// for a conversation; storage checks it on every append).
constexpr size_t kMaxCachedModels = 100000;

// ---------------------------------------------------------------------------
// Requests.

std::string NewConversationId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("conv_%016x%016x", rng(), rng());
}

std::string Fingerprint(const std::vector<ItemData>& items) {
  Fingerprinter fp;
  fp.Add(static_cast<int64_t>(items.size()));
  for (const ItemData& item : items) {
    fp.Add(static_cast<int64_t>(item.role)).Add(static_cast<int64_t>(item.kind));
    fp.Add(item.content).Add(item.tool_name).Add(item.tool_call_id);
    fp.Add(static_cast<int64_t>(item.pinned));
    fp.Add(static_cast<int64_t>(item.metadata.size()));
    for (const auto& [k, v] : item.metadata) fp.Add(k).Add(v);
  }
  return fp.Hex();
}


}  // namespace

absl::StatusOr<ConversationKey> ToKey(const std::string& tenant_id,
                                      const std::string& conversation_id) {
  ConversationKey key;
  ASSIGN_OR_RETURN(key.tenant_id, NormalizeTenant(tenant_id));
  RETURN_IF_ERROR(ValidateId("conversation_id", conversation_id));
  key.conversation_id = conversation_id;
  // Identifiers only, never content: they let a trace be found by
  // conversation.
  telemetry::SetCurrentAttribute("gen_ai.conversation.id", key.conversation_id);
  telemetry::SetCurrentAttribute("convstate.tenant.id", key.tenant_id);
  return key;
}

ConversationService::ConversationService(Options options, const ModelRegistry* models,
                                         Storage* storage, Summarizer* summarizer)
    : options_(std::move(options)),
      models_(models),
      storage_(storage),
      runner_(options_.compaction, storage, summarizer),
      cache_(options_.context_cache_bytes, options_.compaction.telemetry),
      history_(storage, options_.compaction.clock, options_.history_cache_bytes),
      tenant_bytes_(storage, options_.compaction.clock),
      // Below the calls' threads in priority: a call never waits for the
      // CPU a background compaction uses.
      background_(std::make_unique<ThreadPool>(std::max(1, options_.background_threads), 1024,
                                               "background compaction", kBackgroundNiceness)),
      idle_writes_(std::make_unique<ThreadPool>(1, 1024, "idle due times")) {
  if (options_.idle_compaction && options_.idle_scan > absl::ZeroDuration()) {
    idle_sweeper_ = std::make_unique<std::thread>([this] { SweepIdleUntilStopped(); });
  }
}

ConversationService::~ConversationService() {
  {
    absl::MutexLock lock(&background_mu_);
    stopping_ = true;
  }
  if (idle_sweeper_ != nullptr) idle_sweeper_->join();
  idle_writes_.reset();
  background_.reset();
}

void ConversationService::CompactInBackground(const ConversationKey& key) {
  const std::string id = KeyText(key);
  {
    absl::MutexLock lock(&background_mu_);
    if (stopping_ || !background_keys_.insert(id).second) return;
  }
  // The background compaction's span joins the trace of the call that
  // asked for it.
  telemetry::Span* caller = telemetry::CurrentSpan();
  std::optional<telemetry::SpanContext> parent;
  telemetry::Tracer* tracer = nullptr;
  if (caller != nullptr && caller->recording()) {
    parent = caller->context();
    tracer = caller->tracer();
  }
  const bool queued = background_->Schedule([this, key, id, parent, tracer] {
    telemetry::Span span;
    if (tracer != nullptr) {
      span = tracer->StartChild(*parent, "background compaction", telemetry::SpanKind::kInternal);
    }
    telemetry::ScopedSpan scope(&span);
    bool stop;
    {
      absl::MutexLock lock(&background_mu_);
      stop = stopping_;
    }
    if (!stop) {
      // Off the request path, with a deadline of its own.
      const CallContext ctx{options_.compaction.clock->Now() + options_.compaction.lease};
      absl::StatusOr<Counted> loaded = LoadCounted(ctx, key);
      absl::Status status = loaded.status();
      if (status.ok()) {
        absl::StatusOr<CompactionOutcome> outcome =
            runner_.Run(ctx, std::move(loaded->snapshot), loaded->resolved, {},
                        CompactionMode::kAhead, "", nullptr, /*background=*/true);
        status = outcome.status();
        // The next call reads what was appended since, not the whole context,
        // and its recall nothing.
        if (outcome.ok() && outcome->stored != nullptr) {
          history_.Refresh(ctx, outcome->stored->conversation);
          cache_.Offer(key, std::move(outcome->stored));
        }
      }
      if (!status.ok() && !absl::IsNotFound(status)) {
        LogWarning("background compaction of ", key.conversation_id, " failed: ",
                   status.ToString());
      }
    }
    absl::MutexLock lock(&background_mu_);
    background_keys_.erase(id);
  });
  if (!queued) {
    absl::MutexLock lock(&background_mu_);
    background_keys_.erase(id);
  }
}

absl::StatusOr<ResolvedProfile> ConversationService::ProfileOf(const Conversation& c) const {
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(c.model);
  if (!resolved.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", c.model, "' of conversation '", c.key.conversation_id,
        "' has no profile in the current configuration"));
  }
  ResolvedProfile out = **resolved;
  out.profile = ApplyOverrides(out.profile, WithPromptLimit(out.profile, c.overrides, c.prompt_limit));
  return out;
}

absl::StatusOr<ConversationService::Counted> ConversationService::LoadCounted(
    const CallContext& ctx, const ConversationKey& key) {
  // The context this replica keeps, brought up to date (a read of what was
  // appended since, when it keeps one).
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedContext> current, CurrentContext(ctx, key));
  cache_.Offer(key, current->snapshot);
  ContextSnapshot snapshot = *current->snapshot;
  ASSIGN_OR_RETURN(ResolvedProfile resolved, ProfileOf(snapshot.conversation));
  RETURN_IF_ERROR(EnsureCounts(ctx, snapshot, resolved));
  return Counted{std::move(snapshot), std::move(resolved)};
}

absl::StatusOr<v1::Conversation> ConversationService::CreateConversation(
    const CallContext& ctx, const v1::CreateConversationRequest& req) {
  absl::StatusOr<v1::Conversation> created = CreateOnce(ctx, req);
  // A continuation whose source was erased from while it was read: read
  // again (the erasure has committed), once.
  if (absl::IsAborted(created.status()) && !req.continue_from().empty()) {
    created = CreateOnce(ctx, req);
  }
  return created;
}

absl::StatusOr<v1::Conversation> ConversationService::CreateOnce(
    const CallContext& ctx, const v1::CreateConversationRequest& req) {
  NewConversation nc;
  ASSIGN_OR_RETURN(nc.key.tenant_id, NormalizeTenant(req.tenant_id()));
  nc.key.conversation_id = req.conversation_id().empty() ? NewConversationId()
                                                         : req.conversation_id();
  RETURN_IF_ERROR(ValidateId("conversation_id", nc.key.conversation_id));
  // Continuing another conversation: what the request leaves empty comes
  // from it, and its active chunks come along.
  v1::CreateConversationRequest effective = req;
  std::optional<ContextSnapshot> source;
  if (req.carry_recent_turns() < 0 || req.carry_recent_turns() > 100 ||
      (req.carry_recent_turns() > 0 && req.continue_from().empty())) {
    return absl::InvalidArgumentError(
        "carry_recent_turns: from 0 to 100, and only with continue_from");
  }
  if (!req.continue_from().empty()) {
    RETURN_IF_ERROR(ValidateId("continue_from", req.continue_from()));
    // Everything the request says by itself is checked before the hand-off
    // summarizes the source, and the new conversation must not exist yet.
    RETURN_IF_ERROR(ValidateOwnFields(req));
    if (storage_->GetConversation(ctx, nc.key).ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("conversation '", nc.key.conversation_id, "' already exists"));
    }
    absl::StatusOr<ContextSnapshot> loaded = PrepareHandoff(
        ctx, ConversationKey{nc.key.tenant_id, req.continue_from()}, req.carry_recent_turns());
    if (absl::IsNotFound(loaded.status())) {
      return absl::NotFoundError(
          absl::StrCat("continue_from: conversation '", req.continue_from(), "' not found"));
    }
    if (!loaded.ok()) return loaded.status();
    source = std::move(*loaded);
    const Conversation& from = source->conversation;
    if (effective.model().empty()) effective.set_model(from.model);
    if (effective.system_prompt().empty()) effective.set_system_prompt(from.system_prompt);
    if (effective.pinned_instructions().empty()) {
      effective.set_pinned_instructions(from.pinned_instructions);
    }
    if (!effective.has_profile_overrides()) {
      FromOverrides(from.overrides, effective.mutable_profile_overrides());
    }
  }
  RETURN_IF_ERROR(ValidateModelName("model", effective.model()));
  const Limits& limits = options_.limits;
  RETURN_IF_ERROR(
      ValidateText("system_prompt", effective.system_prompt(), limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateText("pinned_instructions", effective.pinned_instructions(),
                               limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateMetadata("metadata", effective.metadata(), limits));
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(effective.model());
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", resolved.status().message()));
  }
  nc.overrides = ToOverrides(effective.profile_overrides());
  if (req.has_compaction_policy()) {
    RETURN_IF_ERROR(ValidatePolicy("compaction_policy", req.compaction_policy()));
    nc.overrides.policy = ToPolicy(req.compaction_policy());
  } else if (source.has_value()) {
    nc.overrides.policy = source->conversation.overrides.policy;
  }
  const ModelProfile profile = ApplyOverrides((*resolved)->profile, nc.overrides);
  RETURN_IF_ERROR(ValidateProfile(profile, "profile_overrides."));
  nc.model = effective.model();
  nc.system_prompt = effective.system_prompt();
  nc.pinned_instructions = effective.pinned_instructions();
  nc.metadata = ToMetadata(effective.metadata());
  // Counted once, here; every BuildContext reuses these counts.
  const Tokenizer& tokenizer = *(*resolved)->tokenizer;
  nc.system_prompt_tokens =
      CountSystemTokens(tokenizer, nc.system_prompt, profile.per_message_tokens);
  nc.pinned_instructions_tokens =
      CountSystemTokens(tokenizer, nc.pinned_instructions, profile.per_message_tokens);
  nc.count_encoding = TokenizerKey(profile);
  if (source.has_value()) {
    nc.continued_from = req.continue_from();
    nc.continued_from_key = source->conversation.storage_key;
    nc.carried_chunks = CarriedChunks(source->active_chunks, req.continue_from(), tokenizer,
                                      profile.per_message_tokens);
    nc.carried_items = CarriedTurns(*source, req.carry_recent_turns(), **resolved, profile);
    nc.continued_from_redactions = source->conversation.redactions;
  }
  nc.tenant_limits = LimitsOf(nc.key.tenant_id);
  ASSIGN_OR_RETURN(Conversation created, storage_->CreateConversation(ctx, nc));
  return ToProto(created);
}

absl::Status ConversationService::ValidateOwnFields(
    const v1::CreateConversationRequest& req) const {
  const Limits& limits = options_.limits;
  if (!req.model().empty()) {
    RETURN_IF_ERROR(ValidateModelName("model", req.model()));
    if (absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(req.model());
        !resolved.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model: ", resolved.status().message()));
    }
  }
  RETURN_IF_ERROR(
      ValidateText("system_prompt", req.system_prompt(), limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateText("pinned_instructions", req.pinned_instructions(),
                               limits.max_system_prompt_bytes));
  RETURN_IF_ERROR(ValidateMetadata("metadata", req.metadata(), limits));
  if (req.has_compaction_policy()) {
    RETURN_IF_ERROR(ValidatePolicy("compaction_policy", req.compaction_policy()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Conversation> ConversationService::GetConversation(
    const CallContext& ctx, const v1::GetConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  ASSIGN_OR_RETURN(Conversation c, storage_->GetConversation(ctx, key));
  return ToProto(c);
}

absl::StatusOr<v1::Conversation> ConversationService::UpdateConversation(
    const CallContext& ctx, const v1::UpdateConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  const Limits& limits = options_.limits;
  if (req.has_model()) RETURN_IF_ERROR(ValidateModelName("model", req.model()));
  if (req.has_system_prompt()) {
    RETURN_IF_ERROR(
        ValidateText("system_prompt", req.system_prompt(), limits.max_system_prompt_bytes));
  }
  if (req.has_pinned_instructions()) {
    RETURN_IF_ERROR(ValidateText("pinned_instructions", req.pinned_instructions(),
                                 limits.max_system_prompt_bytes));
  }
  // The counts are made for the conversation as read; storage applies the
  // update only if nothing changed it since, else it is read again.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    ASSIGN_OR_RETURN(const Conversation current, storage_->GetConversation(ctx, key));
    ASSIGN_OR_RETURN(ConversationUpdate update, UpdateFor(current, req));
    absl::StatusOr<Conversation> updated = storage_->UpdateConversation(ctx, key, update);
    if (absl::IsAborted(updated.status()) && attempt < kAttempts) continue;
    if (!updated.ok()) return updated.status();
    return ToProto(*updated);
  }
}

absl::StatusOr<ConversationUpdate> ConversationService::UpdateFor(
    const Conversation& current, const v1::UpdateConversationRequest& req) const {
  Conversation next = current;
  ConversationUpdate update;
  update.expected_compaction_version = current.compaction_version;
  if (req.has_model()) update.model = next.model = req.model();
  if (req.has_system_prompt()) update.system_prompt = next.system_prompt = req.system_prompt();
  if (req.has_pinned_instructions()) {
    update.pinned_instructions = next.pinned_instructions = req.pinned_instructions();
  }
  if (req.has_profile_overrides()) {
    update.overrides = next.overrides = ToOverrides(req.profile_overrides());
    next.overrides.policy = current.overrides.policy;  // Its own field says.
  }
  if (req.has_compaction_policy()) {
    RETURN_IF_ERROR(ValidatePolicy("compaction_policy", req.compaction_policy()));
    const CompactionPolicy policy = ToPolicy(req.compaction_policy());
    next.overrides.policy = policy == CompactionPolicy{} ? std::nullopt
                                                         : std::optional<CompactionPolicy>(policy);
  }
  if (req.has_profile_overrides() || req.has_compaction_policy()) update.overrides = next.overrides;
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(next.model);
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", resolved.status().message()));
  }
  const ModelProfile profile = ApplyOverrides((*resolved)->profile, next.overrides);
  RETURN_IF_ERROR(ValidateProfile(profile, "profile_overrides."));
  const Tokenizer& tokenizer = *(*resolved)->tokenizer;
  update.system_prompt_tokens =
      CountSystemTokens(tokenizer, next.system_prompt, profile.per_message_tokens);
  update.pinned_instructions_tokens =
      CountSystemTokens(tokenizer, next.pinned_instructions, profile.per_message_tokens);
  // Item and chunk counts stay in the tokenizer they were made with until
  // a view needs them (EnsureCounts).
  std::string counted_with = current.count_encoding;
  if (counted_with.empty()) {
    absl::StatusOr<const ResolvedProfile*> before = models_->Resolve(current.model);
    counted_with = before.ok() ? TokenizerKey((*before)->profile) : TokenizerKey(profile);
  }
  update.count_encoding = counted_with;
  update.reset_overflow = next.model != current.model;
  update.event.event = "conversation_updated";
  update.event.detail = DetailOf({{"model_before", current.model},
                                     {"model_after", next.model},
                                     {"system_prompt", req.has_system_prompt()},
                                     {"pinned_instructions", req.has_pinned_instructions()},
                                     {"profile_overrides", req.has_profile_overrides()},
                                     {"recount", counted_with != TokenizerKey(profile)}});
  return update;
}

absl::StatusOr<v1::BuildContextResponse> ConversationService::GetContextAt(
    const CallContext& ctx, const v1::GetContextAtRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  if (req.version() < 0) return absl::InvalidArgumentError("version: must not be negative");
  if (req.has_compaction_version() && req.compaction_version() < 0) {
    return absl::InvalidArgumentError("compaction_version: must not be negative");
  }
  ASSIGN_OR_RETURN(
      ContextSnapshot snapshot,
      storage_->LoadContextAt(ctx, key, req.version(),
                              req.has_compaction_version() ? req.compaction_version() : -1));
  RETURN_IF_ERROR(CheckViewBytes(snapshot));
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, ProfileOf(snapshot.conversation));
  // The prompts as they were then, counted now (counts are not part of
  // what the hash covers).
  Conversation& c = snapshot.conversation;
  c.system_prompt_tokens =
      CountSystemTokens(*resolved.tokenizer, c.system_prompt, resolved.profile.per_message_tokens);
  c.pinned_instructions_tokens = CountSystemTokens(*resolved.tokenizer, c.pinned_instructions,
                                                   resolved.profile.per_message_tokens);
  CompactionOutcome outcome;
  outcome.view = ViewAsBuilt(snapshot, resolved);
  outcome.prune_boundary = c.prune_boundary;
  outcome.plan.band = BandOf(outcome.view.tokens.total, resolved.profile);
  // As it was served then; compaction is not asked for here.
  return ResponseOf(key, outcome, resolved.profile, CallMode(resolved.profile));
}

absl::Status ConversationService::EnsureCounts(const CallContext& ctx, ContextSnapshot& snapshot,
                                               const ResolvedProfile& resolved, bool keep) {
  const std::string wanted = TokenizerKey(resolved.profile);
  Conversation& c = snapshot.conversation;
  if (c.count_encoding.empty() || c.count_encoding == wanted) return absl::OkStatus();
  // Counted with the model before the last UpdateConversation: count what
  // the view shows again, with this one, and keep the counts.
  const Tokenizer& tokenizer = *resolved.tokenizer;
  const int64_t per_message = resolved.profile.per_message_tokens;
  TokenRecount recount;
  recount.count_encoding = wanted;
  for (std::vector<Item>* items : {&snapshot.pinned_items, &snapshot.live_items}) {
    for (Item& item : *items) {
      if (item.data.kind == ItemKind::kSummaryMarker) continue;
      item.data.token_count = CountItemTokens(tokenizer, item.data, per_message);
      recount.items.emplace_back(item.sequence, item.data.token_count);
    }
  }
  for (SummaryChunk& chunk : snapshot.active_chunks) {
    CountChunk(chunk, tokenizer, per_message);
    recount.chunks.push_back(chunk);
  }
  if (keep) RETURN_IF_ERROR(storage_->SaveTokenCounts(ctx, c.key, recount));
  c.count_encoding = wanted;
  return absl::OkStatus();
}

absl::StatusOr<v1::ListConversationsResponse> ConversationService::ListConversations(
    const CallContext& ctx, const v1::ListConversationsRequest& req) {
  ASSIGN_OR_RETURN(std::string tenant, NormalizeTenant(req.tenant_id()));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultConversationPage));
  std::string after;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeIdToken("c", req.page_token()));
  }
  ASSIGN_OR_RETURN(Page<Conversation> found,
                   storage_->ListConversations(ctx, tenant, after, PageOf(page_size)));
  v1::ListConversationsResponse out;
  for (const Conversation& c : found.rows) *out.add_conversations() = ToProto(c);
  if (found.more && !found.rows.empty()) {
    out.set_next_page_token(EncodePageToken("c", found.rows.back().key.conversation_id));
  }
  return out;
}

absl::StatusOr<v1::DeleteConversationResponse> ConversationService::DeleteConversation(
    const CallContext& ctx, const v1::DeleteConversationRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  ASSIGN_OR_RETURN(int64_t items, storage_->DeleteConversation(ctx, key));
  history_.Forget(key);
  v1::DeleteConversationResponse out;
  out.set_items_deleted(items);
  return out;
}

absl::StatusOr<v1::AppendTurnResponse> ConversationService::AppendTurn(
    const CallContext& ctx, const v1::AppendTurnRequest& req) {
  AppendRequest append;
  ASSIGN_OR_RETURN(append.key, ToKey(req.tenant_id(), req.conversation_id()));
  if (req.items().empty()) return absl::InvalidArgumentError("items: at least one is required");
  RETURN_IF_ERROR(ValidateItems("items", req.items(), options_.limits.max_items_per_append));
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
  for (const v1::NewItem& item : req.items()) append.items.push_back(ToItemData(item));
  if (req.task_boundary()) append.items.back().metadata[kTaskBoundaryKey] = "true";
  append.idempotency_key = req.idempotency_key();
  append.request_fingerprint = Fingerprint(append.items);
  if (req.has_expected_version()) append.expected_version = req.expected_version();
  // Counted here, once, with the conversation's own tokenizer, before the
  // append takes the conversation's lock; storage checks that the model is
  // still the one counted with.
  const bool has_usage = usage.input_tokens() > 0 || usage.output_tokens() > 0;
  auto count = [&](const std::string& model) -> absl::Status {
    absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(model);
    if (!resolved.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", model, "' of conversation '", append.key.conversation_id,
          "' has no profile in the current configuration"));
    }
    for (ItemData& item : append.items) {
      item.token_count = CountItemTokens(*(*resolved)->tokenizer, item,
                                         (*resolved)->profile.per_message_tokens);
    }
    append.expected_model = model;
    if (has_usage) {
      append.usage = UsageReport{usage.input_tokens(),        usage.output_tokens(),
                                 usage.cached_input_tokens(), usage.reasoning_tokens(),
                                 0,  // Filled in by storage from the locked row.
                                 (*resolved)->tokenizer->approximate()};
    }
    return absl::OkStatus();
  };
  // A limited tenant's bytes are checked here, against a recent total
  // (tenant_usage.h), not by storage under the tenant's row: its appends run
  // in parallel like anyone's.
  const TenantLimits limits = LimitsOf(append.key.tenant_id);
  append.max_conversation_bytes = options_.limits.max_conversation_bytes;
  ASSIGN_OR_RETURN(std::string model, ModelOf(ctx, append.key, /*refresh=*/false));
  RETURN_IF_ERROR(count(model));
  const int64_t adding = StoredBytes(append);
  if (absl::Status within = tenant_bytes_.Check(ctx, append.key.tenant_id, limits, adding);
      !within.ok()) {
    if (append.idempotency_key.empty() || !absl::IsResourceExhausted(within)) return within;
    // Perhaps a retry of an append that was stored: storage looks its key
    // up before it checks the limit (exactly, under the tenant's row).
    append.tenant_limits = limits;
  }
  absl::StatusOr<AppendResult> appended = storage_->AppendItems(ctx, append);
  if (absl::IsAborted(appended.status()) &&
      absl::StrContains(appended.status().message(), "is now bound to model")) {
    // Deleted and created again with another model: count again, once.
    ASSIGN_OR_RETURN(model, ModelOf(ctx, append.key, /*refresh=*/true));
    RETURN_IF_ERROR(count(model));
    appended = storage_->AppendItems(ctx, append);
  }
  ASSIGN_OR_RETURN(AppendResult result, std::move(appended));
  if (!result.replayed) tenant_bytes_.Added(append.key.tenant_id, adding);
  v1::AppendTurnResponse out;
  for (const Item& item : result.items) ToProto(item, out.add_items());
  out.set_version(result.version);
  out.set_replayed(result.replayed);
  return out;
}

absl::StatusOr<std::string> ConversationService::ModelOf(const CallContext& ctx,
                                                         const ConversationKey& key,
                                                         bool refresh) {
  const std::string id = KeyText(key);
  if (!refresh) {
    absl::MutexLock lock(&models_mu_);
    if (auto it = models_by_key_.find(id); it != models_by_key_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(Conversation c, storage_->GetConversation(ctx, key));
  absl::MutexLock lock(&models_mu_);
  if (models_by_key_.size() >= kMaxCachedModels) models_by_key_.clear();
  models_by_key_[id] = c.model;
  return c.model;
}


absl::StatusOr<v1::ListItemsResponse> ConversationService::ListItems(
    const CallContext& ctx, const v1::ListItemsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultItemPage));
  int64_t after = 0;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeNumberToken("i", req.page_token(), 0, INT64_MAX));
  }
  ASSIGN_OR_RETURN(Page<Item> items, storage_->ListItems(ctx, key, after, PageOf(page_size)));
  v1::ListItemsResponse out;
  for (const Item& item : items.rows) ToProto(item, out.add_items());
  if (items.more && !items.rows.empty()) {
    out.set_next_page_token(EncodePageToken("i", absl::StrCat(items.rows.back().sequence)));
  }
  return out;
}

absl::Status ConversationService::ValidateItems(
    absl::string_view field, const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
    int max_items) const {
  const Limits& limits = options_.limits;
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

std::vector<ItemData> ConversationService::PendingItems(
    const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
    const ResolvedProfile& resolved) const {
  // Pending input is not stored yet, so it is the only text counted here.
  std::vector<ItemData> pending;
  for (const v1::NewItem& item : input) {
    ItemData data = ToItemData(item);
    data.token_count =
        CountItemTokens(*resolved.tokenizer, data, resolved.profile.per_message_tokens);
    pending.push_back(std::move(data));
  }
  return pending;
}

absl::StatusOr<v1::BuildContextResponse> ConversationService::BuildContext(
    const CallContext& ctx, const v1::BuildContextRequest& req) {
  return BuildContext(ctx, req, nullptr);
}

absl::StatusOr<v1::BuildContextResponse> ConversationService::BuildContext(
    const CallContext& ctx, const v1::BuildContextRequest& req, const ProgressSink& progress) {
  ASSIGN_OR_RETURN(ViewAnswer answer, View(ctx, req, progress, /*wire=*/false));
  return std::move(*answer.message);
}

absl::StatusOr<std::shared_ptr<const std::string>> ConversationService::BuildContextWire(
    const CallContext& ctx, const v1::BuildContextRequest& req) {
  ASSIGN_OR_RETURN(ViewAnswer answer, View(ctx, req, nullptr, /*wire=*/true));
  return std::move(answer.wire);
}

absl::Status ConversationService::CheckViewBytes(const ContextSnapshot& snapshot) const {
  const int64_t max = options_.limits.max_view_bytes;
  int64_t bytes = 0;
  for (const auto* items : {&snapshot.live_items, &snapshot.pinned_items}) {
    for (const Item& item : *items) bytes += static_cast<int64_t>(item.data.content.size());
  }
  if (max <= 0 || bytes <= max) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "conversation '", snapshot.conversation.key.conversation_id, "': its view holds ", bytes,
      " bytes of items, past the bound of ", max,
      " (--max_view_mb); turn compaction on for it (profile_overrides.compaction_enabled), "
      "compact it (Compact), or continue in a new conversation"));
}

absl::StatusOr<ContextSnapshot> ConversationService::LoadView(const CallContext& ctx,
                                                              const ConversationKey& key) {
  ASSIGN_OR_RETURN(ContextSnapshot snapshot, storage_->LoadContext(ctx, key));
  RETURN_IF_ERROR(CheckViewBytes(snapshot));
  return snapshot;
}

absl::StatusOr<std::shared_ptr<const CachedContext>> ConversationService::CurrentContext(
    const CallContext& ctx, const ConversationKey& key) {
  std::shared_ptr<const CachedContext> held = cache_.Get(key);
  absl::StatusOr<ContextDelta> delta = storage_->LoadContextSince(
      ctx, key, held == nullptr ? nullptr : &held->snapshot->conversation);
  if (absl::IsNotFound(delta.status())) cache_.Erase(key);
  if (!delta.ok()) return delta.status();
  cache_.CountLookup(delta->kind);
  if (delta->kind == ContextDelta::Kind::kUnchanged) return held;
  auto current = std::make_shared<CachedContext>();
  current->snapshot = std::make_shared<const ContextSnapshot>(
      held == nullptr ? std::move(delta->snapshot)
                      : ApplyDelta(*held->snapshot, *std::move(delta)));
  return current;
}

absl::StatusOr<ConversationService::ViewAnswer> ConversationService::View(
    const CallContext& ctx, const v1::BuildContextRequest& req, const ProgressSink& progress,
    bool wire) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  RETURN_IF_ERROR(
      ValidateItems("pending_input", req.pending_input(), options_.limits.max_pending_items));
  if (req.provider_reported_tokens() < 0) {
    return absl::InvalidArgumentError("provider_reported_tokens: must not be negative");
  }
  if (req.provider_reported_tokens() > 0 && !req.provider_overflow()) {
    return absl::InvalidArgumentError(
        "provider_reported_tokens: only with provider_overflow set");
  }
  RETURN_IF_ERROR(ValidateRecallQuery("recall_query", req.recall_query()));
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedContext> current, CurrentContext(ctx, key));
  const bool plain =
      req.pending_input().empty() && !req.provider_overflow() && req.recall_query().empty();
  ViewAnswer answer;
  if (plain && wire && current->plain_view != nullptr) {
    // Nothing changed since this replica built the same view: send it again.
    RecordView(static_cast<v1::ContextStatus>(current->status), current->view_tokens,
               current->band);
    if (current->compact_in_background) CompactInBackground(key);
    NoteBuilt(key, current->band, current->prompt_cache_ttl_s);
    answer.wire = current->plain_view;
    return answer;
  }
  const ContextSnapshot& held = *current->snapshot;
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, ProfileOf(held.conversation));
  // Without compaction nothing bounds the live window but this (with it,
  // the call compacts what it read).
  if (!resolved.profile.compaction_enabled) RETURN_IF_ERROR(CheckViewBytes(held));
  ContextSnapshot snapshot = held;
  RETURN_IF_ERROR(EnsureCounts(ctx, snapshot, resolved));
  const bool recounted = snapshot.conversation.count_encoding != held.conversation.count_encoding;
  const std::vector<ItemData> pending = PendingItems(req.pending_input(), resolved);
  // Searched for while the view is built; added to it after.
  const std::shared_ptr<PendingRecall> recall =
      plain || req.provider_overflow()
          ? nullptr
          : StartRecall(ctx, key, held.conversation, resolved, RecallQueryOf(req));
  if (req.provider_overflow()) {
    cache_.Erase(key);
    ASSIGN_OR_RETURN(answer.message,
                     RecoverFromOverflow(ctx, key, std::move(snapshot), resolved, pending,
                                         req.provider_reported_tokens(), progress));
  } else {
    const CompactionMode mode = CallMode(resolved.profile);
    // Room for what recall may add, so that it never lifts the view into
    // the band the call would have compacted.
    CompactionControl control;
    if (recall != nullptr) control.headroom = RecallBudget(resolved.profile);
    ASSIGN_OR_RETURN(CompactionOutcome outcome,
                     runner_.Run(ctx, std::move(snapshot), resolved, pending, mode, "", progress,
                                 /*background=*/false, control));
    // From the soft band on, the background gets ahead of need (kAhead); a
    // call that compacted already leaves it nothing to do.
    const bool compact_in_background = options_.background_compaction &&
                                       outcome.plan.band >= Band::kSoft &&
                                       outcome.plan.empty() &&
                                       resolved.profile.compaction_enabled;
    if (compact_in_background) CompactInBackground(key);
    const int64_t idle_ttl_s =
        resolved.profile.compaction_enabled ? resolved.profile.prompt_cache_ttl_s : 0;
    NoteBuilt(key, BandOf(outcome.view.tokens.total, resolved.profile), idle_ttl_s);
    AddRecall(recall, held.conversation, resolved, outcome.view);
    answer.message = ResponseOf(key, outcome, resolved.profile, mode);
    // The context read stays good until the conversation changes; a view
    // that compacted or truncated nothing is the same for the next call
    // without pending input, so it is kept serialized.
    const bool unchanged = !recounted && outcome.version == held.conversation.version &&
                           outcome.compaction_version == held.conversation.compaction_version;
    if (unchanged) {
      auto kept = std::make_shared<CachedContext>(*current);
      if (plain && outcome.view.status != ContextStatus::kTruncated &&
          outcome.invalidated_breakpoint == CacheBreakpointKind::kUnspecified &&
          (outcome.plan.empty() || !resolved.profile.compaction_enabled)) {
        kept->plain_view = std::make_shared<const std::string>(answer.message->SerializeAsString());
        kept->band = outcome.plan.band;
        kept->status = answer.message->context_status();
        kept->view_tokens = answer.message->tokens().total();
        kept->compact_in_background = compact_in_background;
        kept->prompt_cache_ttl_s = idle_ttl_s;
        if (wire) answer.wire = kept->plain_view;
      }
      cache_.Put(key, std::move(kept));
    } else if (outcome.stored != nullptr) {
      cache_.Offer(key, std::move(outcome.stored));
    } else {
      cache_.Erase(key);
    }
  }
  if (wire && answer.wire == nullptr) {
    answer.wire = std::make_shared<const std::string>(answer.message->SerializeAsString());
  }
  return answer;
}

CompactionMode ConversationService::CallMode(const ModelProfile& profile) const {
  // Blocking at the hard band unless the profile prefers latency over the
  // band and the background is there to do the work.
  return options_.background_compaction &&
                 profile.hard_band_policy == HardBandPolicy::kServeWhileBackground
             ? CompactionMode::kByBandBehindBackground
             : CompactionMode::kByBand;
}

v1::BuildContextResponse ConversationService::ResponseOf(const ConversationKey& key,
                                                         CompactionOutcome& outcome,
                                                         const ModelProfile& profile,
                                                         CompactionMode mode) const {
  v1::BuildContextResponse out;
  out.set_conversation_id(key.conversation_id);
  out.set_band(static_cast<v1::Band>(BandOf(outcome.view.tokens.total, profile)));
  out.set_band_reason(WhyOverHardBand(outcome, profile, mode));
  // Hashed before the texts move into the response.
  const ViewDigest digest = DigestView(outcome.view, outcome.prune_boundary);
  ToProto(std::move(outcome.view), &out);
  out.set_view_hash(digest.view_hash);
  for (const CacheBreakpoint& b : digest.breakpoints) {
    v1::CacheBreakpoint* pb = out.add_cache_breakpoints();
    pb->set_kind(static_cast<v1::CacheBreakpointKind>(b.kind));
    pb->set_last_entry(b.last_entry);
    pb->set_prefix_hash(b.prefix_hash);
    pb->set_prefix_tokens(b.prefix_tokens);
  }
  out.set_invalidated_breakpoint(
      static_cast<v1::CacheBreakpointKind>(outcome.invalidated_breakpoint));
  RecordView(out.context_status(), out.tokens().total(), outcome.plan.band);
  return out;
}

absl::StatusOr<v1::BuildContextResponse> ConversationService::RecoverFromOverflow(
    const CallContext& ctx, const ConversationKey& key, ContextSnapshot snapshot,
    const ResolvedProfile& resolved, const std::vector<ItemData>& pending,
    int64_t reported_tokens, const ProgressSink& progress) {
  const OverflowCorrection correction = CorrectForOverflow(snapshot, resolved, pending, reported_tokens);
  const std::string& refused_hash = correction.refused_view_hash;
  const double after = correction.correction;
  const int64_t limit = correction.prompt_limit;
  const CompactionEvent& event = correction.event;
  RETURN_IF_ERROR(storage_->RecordProviderOverflow(ctx, key, after, limit, event).status());
  ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));

  // Compact to the conversation's new limits, cheapest tiers first, then
  // truncate the view to them if it is still the refused one: it never
  // comes back, in this call or a later one.
  ASSIGN_OR_RETURN(const ResolvedProfile limited, ProfileOf(snapshot.conversation));
  const bool enabled = limited.profile.compaction_enabled;
  std::vector<CompactionMode> modes = {CompactionMode::kByBand};
  if (enabled) modes = {CompactionMode::kAuto, CompactionMode::kTruncate};
  CompactionOutcome outcome;
  for (size_t i = 0; i < modes.size(); ++i) {
    if (i > 0) {
      ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));
    }
    ASSIGN_OR_RETURN(outcome,
                     runner_.Run(ctx, std::move(snapshot), limited, pending, modes[i], "", progress));
    if (DigestView(outcome.view, outcome.prune_boundary).view_hash != refused_hash) break;
  }
  if (DigestView(outcome.view, outcome.prune_boundary).view_hash == refused_hash) {
    const TokenBreakdown& t = outcome.view.tokens;
    return absl::ResourceExhaustedError(absl::StrCat(
        "the provider refused this view as too long and it cannot be made smaller",
        enabled ? "" : " (compaction is switched off for this conversation)", ": system ",
        t.system, ", pinned ", t.pinned, ", summaries ", t.summaries, ", ledger ", t.ledger,
        ", live ", t.live, ", pending ", t.pending, " tokens (corrected by ", after, ")"));
  }
  return ResponseOf(key, outcome, limited.profile, CompactionMode::kByBand);
}

void ConversationService::RecordView(v1::ContextStatus status, int64_t tokens, Band band) const {
  telemetry::Span* span = telemetry::CurrentSpan();
  if (span != nullptr && span->recording()) {
    span->SetAttribute("convstate.context.status", v1::ContextStatus_Name(status));
    span->SetAttribute("convstate.context.band", v1::Band_Name(static_cast<v1::Band>(band)));
    span->SetAttribute("convstate.view.tokens", tokens);
    span->SetAttribute("gen_ai.conversation.compacted", status != v1::CONTEXT_STATUS_FULL);
  }
  if (options_.compaction.telemetry != nullptr) {
    options_.compaction.telemetry->instruments().view_tokens->Record(static_cast<double>(tokens));
  }
}

absl::StatusOr<v1::InspectContextResponse> ConversationService::InspectContext(
    const CallContext& ctx, const v1::InspectContextRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  RETURN_IF_ERROR(
      ValidateItems("pending_input", req.pending_input(), options_.limits.max_pending_items));
  RETURN_IF_ERROR(ValidateRecallQuery("recall_query", req.recall_query()));
  ASSIGN_OR_RETURN(ContextSnapshot snapshot, LoadView(ctx, key));
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, ProfileOf(snapshot.conversation));
  // A reader's call writes nothing: the counts are made for this answer only.
  RETURN_IF_ERROR(EnsureCounts(ctx, snapshot, resolved, /*keep=*/false));
  const std::vector<ItemData> pending = PendingItems(req.pending_input(), resolved);
  PlanInput in;
  in.snapshot = &snapshot;
  in.profile = resolved.profile;
  in.approximate = resolved.tokenizer->approximate();
  in.pending = pending;
  in.tokenizer = resolved.tokenizer;
  const CompactionPlan plan = PlanCompaction(in, CompactionMode::kAuto);
  v1::InspectContextResponse out;
  ToProto(plan.view_before.tokens, out.mutable_tokens());
  out.set_context_status(static_cast<v1::ContextStatus>(plan.view_before.status));
  out.set_band(static_cast<v1::Band>(plan.band));
  for (const std::string& action : plan.actions) out.add_planned_actions(action);
  if (plan.cannot_fit.has_value()) out.add_planned_actions("cannot fit: " + *plan.cannot_fit);
  out.set_projected_total(plan.projected_tokens);
  const ModelProfile& p = resolved.profile;
  out.mutable_thresholds()->set_soft(Threshold(p, p.soft_threshold));
  out.mutable_thresholds()->set_hard(Threshold(p, p.hard_threshold));
  out.mutable_thresholds()->set_emergency(Threshold(p, p.emergency_threshold));
  out.mutable_thresholds()->set_token_floor(p.token_floor);
  // What recall would add for the question, as BuildContext would add it
  // (reads only: the search writes nothing).
  ContextView view = plan.view_before;
  const std::string query = RecallQueryOf(req.recall_query(), req.pending_input());
  for (RecalledPassage& p :
       AddRecall(StartRecall(ctx, key, snapshot.conversation, resolved, query),
                 snapshot.conversation, resolved, view)) {
    ToProto(std::move(p), out.add_recalled());
  }
  out.set_recalled_tokens(view.tokens.recalled);
  return out;
}

absl::StatusOr<v1::ListSummariesResponse> ConversationService::ListSummaries(
    const CallContext& ctx, const v1::ListSummariesRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultTrailPage));
  int64_t after = 0;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeNumberToken("s", req.page_token(), 0, INT64_MAX));
  }
  ASSIGN_OR_RETURN(Page<SummaryChunk> chunks,
                   storage_->ListSummaries(ctx, key, req.include_superseded(), after,
                                           PageOf(page_size)));
  v1::ListSummariesResponse out;
  for (const SummaryChunk& c : chunks.rows) ToProto(c, out.add_chunks());
  if (chunks.more && !chunks.rows.empty()) {
    out.set_next_page_token(EncodePageToken("s", absl::StrCat(chunks.rows.back().chunk_id)));
  }
  return out;
}

absl::StatusOr<v1::Item> ConversationService::PinItem(const CallContext& ctx,
                                                      const v1::PinItemRequest& req) {
  return SetPinned(ctx, req.tenant_id(), req.conversation_id(), req.sequence(), true);
}

absl::StatusOr<v1::Item> ConversationService::UnpinItem(const CallContext& ctx,
                                                        const v1::UnpinItemRequest& req) {
  return SetPinned(ctx, req.tenant_id(), req.conversation_id(), req.sequence(), false);
}

absl::StatusOr<v1::Item> ConversationService::SetPinned(const CallContext& ctx,
                                                        const std::string& tenant_id,
                                                        const std::string& conversation_id,
                                                        int64_t sequence, bool pinned) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(tenant_id, conversation_id));
  if (sequence <= 0) return absl::InvalidArgumentError("sequence: must be positive");
  ASSIGN_OR_RETURN(Item item, storage_->SetPinned(ctx, key, sequence, pinned));
  v1::Item out;
  ToProto(item, &out);
  return out;
}

absl::StatusOr<v1::RedactItemsResponse> ConversationService::RedactItems(
    const CallContext& ctx, const v1::RedactItemsRequest& req) {
  RedactRequest redact;
  ASSIGN_OR_RETURN(redact.key, ToKey(req.tenant_id(), req.conversation_id()));
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
  redact.sequences.assign(req.sequences().begin(), req.sequences().end());
  std::sort(redact.sequences.begin(), redact.sequences.end());
  redact.sequences.erase(std::unique(redact.sequences.begin(), redact.sequences.end()),
                         redact.sequences.end());
  // The tombstone is counted with the conversation's own tokenizer.
  ASSIGN_OR_RETURN(std::string model, ModelOf(ctx, redact.key, /*refresh=*/true));
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(model);
  if (!resolved.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", model, "' has no profile in the current configuration"));
  }
  ItemData tombstone;
  tombstone.content = kTombstone;
  redact.tombstone = kTombstone;
  redact.tombstone_tokens = CountItemTokens(*(*resolved)->tokenizer, tombstone,
                                            (*resolved)->profile.per_message_tokens);
  redact.actor = ctx.principal;
  redact.reason = req.reason();
  redact.digest_key = options_.redaction_key;
  ASSIGN_OR_RETURN(RedactResult result, storage_->RedactItems(ctx, redact));
  // This replica's copy goes now; others see the new compaction_version.
  cache_.Erase(redact.key);
  history_.Forget(redact.key);
  v1::RedactItemsResponse out;
  for (const Item& item : result.items) ToProto(item, out.add_items());
  out.set_chunks_removed(result.chunks_removed);
  out.set_compaction_version(result.compaction_version);
  out.set_continued_chunks_removed(result.continued_chunks_removed);
  return out;
}

absl::StatusOr<v1::ListCompactionEventsResponse> ConversationService::ListCompactionEvents(
    const CallContext& ctx, const v1::ListCompactionEventsRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  ASSIGN_OR_RETURN(int page_size, PageSize(req.page_size(), kDefaultTrailPage));
  int64_t after = 0;
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(after, DecodeNumberToken("e", req.page_token(), 0, INT64_MAX));
  }
  ASSIGN_OR_RETURN(Page<CompactionEvent> events,
                   storage_->ListCompactionEvents(ctx, key, after, PageOf(page_size)));
  v1::ListCompactionEventsResponse out;
  if (events.more && !events.rows.empty()) {
    out.set_next_page_token(EncodePageToken("e", absl::StrCat(events.rows.back().event_id)));
  }
  for (const CompactionEvent& e : events.rows) ToProto(e, out.add_events());
  return out;
}

absl::StatusOr<v1::ExpandSummaryResponse> ConversationService::ExpandSummary(
    const CallContext& ctx, const v1::ExpandSummaryRequest& req) {
  ASSIGN_OR_RETURN(ConversationKey key, ToKey(req.tenant_id(), req.conversation_id()));
  if (req.chunk_id() <= 0) return absl::InvalidArgumentError("chunk_id: must be positive");
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
  ASSIGN_OR_RETURN(Page<Item> items, storage_->ListItems(ctx, key, after, PageOf(page_size)));
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
