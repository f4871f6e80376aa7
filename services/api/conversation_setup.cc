#include "services/api/conversation_setup.h"

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/api/wire.h"
#include "services/common/log.h"
#include "services/common/sha256.h"
#include "services/common/status_macros.h"
#include "services/compaction/engine/continuation.h"
#include "services/compaction/engine/summaries.h"
#include "services/tokenizer/tokens.h"

namespace convstate {
namespace {

std::string NewConversationId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("conv_%016x%016x", rng(), rng());
}

// What a continuation of `source` carries over as its first items: the
// source's pinned items and newest `recent_turns` turns, counted with
// `resolved`'s tokenizer under `profile` (storage appends them in the
// create's transaction).
std::vector<ItemData> CarriedTurns(const ContextSnapshot& source, int recent_turns,
                                   const ResolvedProfile& resolved, const ModelProfile& profile) {
  std::vector<ItemData> items = CarriedItems(source, recent_turns);
  for (ItemData& item : items) {
    item.token_count = CountItemTokens(*resolved.tokenizer, item, profile.per_message_tokens);
  }
  return items;
}

}  // namespace

ConversationSetup::ConversationSetup(
    std::function<TenantLimits(const std::string& tenant)> tenant_limits, Storage* storage,
    const ProfileResolver* profiles, CompactionController* control)
    : tenant_limits_(std::move(tenant_limits)),
      storage_(storage),
      profiles_(profiles),
      control_(control) {}

absl::StatusOr<v1::Conversation> ConversationSetup::Create(
    const CallContext& ctx, const ConversationKey& key, const v1::CreateConversationRequest& req) {
  absl::StatusOr<v1::Conversation> created = CreateOnce(ctx, key, req);
  // A continuation whose source was erased from while it was read: read
  // again (the erasure has committed), once.
  if (absl::IsAborted(created.status()) && !req.continue_from().empty()) {
    created = CreateOnce(ctx, key, req);
  }
  return created;
}

absl::StatusOr<v1::Conversation> ConversationSetup::CreateOnce(
    const CallContext& ctx, const ConversationKey& key, const v1::CreateConversationRequest& req) {
  NewConversation nc;
  nc.key = key;
  if (nc.key.conversation_id.empty()) nc.key.conversation_id = NewConversationId();
  // Continuing another conversation: what the request leaves empty comes
  // from it, and its active chunks come along.
  v1::CreateConversationRequest effective = req;
  std::optional<ContextSnapshot> source;
  if (!req.continue_from().empty()) {
    // The model the request names is known before the hand-off summarizes
    // the source, and the new conversation must not exist yet.
    if (!req.model().empty()) RETURN_IF_ERROR(profiles_->ForRequest(req.model()).status());
    if (storage_->GetConversation(ctx, nc.key).ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("conversation '", nc.key.conversation_id, "' already exists"));
    }
    absl::StatusOr<ContextSnapshot> loaded = control_->PrepareHandoff(
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
  ASSIGN_OR_RETURN(const ResolvedProfile* resolved, profiles_->ForRequest(effective.model()));
  nc.overrides = ToOverrides(effective.profile_overrides());
  if (req.has_compaction_policy()) {
    nc.overrides.policy = ToPolicy(req.compaction_policy());
  } else if (source.has_value()) {
    nc.overrides.policy = source->conversation.overrides.policy;
  }
  const ModelProfile profile = ApplyOverrides(resolved->profile, nc.overrides);
  RETURN_IF_ERROR(ValidateProfile(profile, "profile_overrides."));
  nc.model = effective.model();
  nc.system_prompt = effective.system_prompt();
  nc.pinned_instructions = effective.pinned_instructions();
  nc.metadata = ToMetadata(effective.metadata());
  // Counted once, here; every BuildContext reuses these counts.
  const Tokenizer& tokenizer = *resolved->tokenizer;
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
    nc.carried_items = CarriedTurns(*source, req.carry_recent_turns(), *resolved, profile);
    nc.continued_from_redactions = source->conversation.redactions;
  }
  nc.tenant_limits = tenant_limits_(nc.key.tenant_id);
  ASSIGN_OR_RETURN(Conversation created, storage_->CreateConversation(ctx, nc));
  return ToProto(created);
}

absl::StatusOr<v1::Conversation> ConversationSetup::Fork(const CallContext& ctx,
                                                        const ConversationKey& key,
                                                        const v1::ForkConversationRequest& req) {
  if (!req.model().empty()) RETURN_IF_ERROR(profiles_->ForRequest(req.model()).status());
  ForkRequest fork;
  fork.source = ConversationKey{key.tenant_id, req.source_conversation_id()};
  fork.fork = key;
  if (fork.fork.conversation_id.empty()) fork.fork.conversation_id = NewConversationId();
  fork.at_sequence = req.at_sequence();
  if (!req.metadata().empty()) fork.metadata = ToMetadata(req.metadata());
  fork.tenant_limits = tenant_limits_(key.tenant_id);
  absl::StatusOr<Conversation> source = storage_->GetConversation(ctx, fork.source);
  if (absl::IsNotFound(source.status())) {
    return absl::NotFoundError(absl::StrCat("source_conversation_id: conversation '",
                                            req.source_conversation_id(), "' not found"));
  }
  RETURN_IF_ERROR(source.status());
  ASSIGN_OR_RETURN(const Conversation forked, storage_->ForkConversation(ctx, fork));
  return Recounted(ctx, forked, *source, req.model());
}

absl::StatusOr<v1::Conversation> ConversationSetup::Recounted(const CallContext& ctx,
                                                              const Conversation& forked,
                                                              const Conversation& counted_for,
                                                              const std::string& model) {
  const bool new_model = !model.empty() && model != forked.model;
  if (!new_model && forked.system_prompt == counted_for.system_prompt &&
      forked.pinned_instructions == counted_for.pinned_instructions &&
      forked.model == counted_for.model) {
    return ToProto(forked);
  }
  v1::UpdateConversationRequest update;
  update.set_tenant_id(forked.key.tenant_id);
  update.set_conversation_id(forked.key.conversation_id);
  if (new_model) update.set_model(model);
  update.set_system_prompt(forked.system_prompt);
  update.set_pinned_instructions(forked.pinned_instructions);
  absl::StatusOr<v1::Conversation> updated = Update(ctx, forked.key, update);
  if (updated.ok() || new_model) return updated;
  // The fork or rewind is committed: a recount that fails (the model's
  // profile gone, the conversation changed meanwhile) leaves the counts of
  // the source's prompts, which the next UpdateConversation makes again.
  LogThrottled(LogLevel::kWarning, "recount after fork",
               absl::StrCat("counting the prompts of conversation '",
                            forked.key.conversation_id, "' again failed: ",
                            updated.status().message()));
  return ToProto(forked);
}

absl::StatusOr<v1::RewindConversationResponse> ConversationSetup::Rewind(
    const CallContext& ctx, const ConversationKey& key, const v1::RewindConversationRequest& req) {
  RewindRequest rewind;
  rewind.key = key;
  rewind.to_sequence = req.to_sequence();
  rewind.abandoned = ConversationKey{key.tenant_id, req.abandoned_conversation_id()};
  if (rewind.abandoned.conversation_id.empty()) {
    // Named by the idempotency key when there is one: the same request sent
    // again names the same fork.
    rewind.abandoned.conversation_id =
        req.idempotency_key().empty()
            ? NewConversationId()
            : absl::StrCat("conv_", Sha256::Hex(absl::StrCat(key.conversation_id,
                                                               std::string(1, '\0'),
                                                               req.idempotency_key()))
                                        .substr(0, 32));
  }
  rewind.idempotency_key = req.idempotency_key();
  rewind.tenant_limits = tenant_limits_(key.tenant_id);
  ASSIGN_OR_RETURN(const Conversation before, storage_->GetConversation(ctx, key));
  ASSIGN_OR_RETURN(RewindResult rewound, storage_->RewindConversation(ctx, rewind));
  v1::RewindConversationResponse out;
  out.set_replayed(rewound.replayed);
  if (rewound.replayed) {
    *out.mutable_conversation() = ToProto(rewound.conversation);
  } else {
    ASSIGN_OR_RETURN(*out.mutable_conversation(),
                     Recounted(ctx, rewound.conversation, before, ""));
  }
  *out.mutable_abandoned() = ToProto(rewound.abandoned);
  return out;
}

absl::StatusOr<v1::Conversation> ConversationSetup::Update(
    const CallContext& ctx, const ConversationKey& key, const v1::UpdateConversationRequest& req) {
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

absl::StatusOr<ConversationUpdate> ConversationSetup::UpdateFor(
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
    const CompactionPolicy policy = ToPolicy(req.compaction_policy());
    next.overrides.policy = policy == CompactionPolicy{} ? std::nullopt
                                                         : std::optional<CompactionPolicy>(policy);
  }
  if (req.has_profile_overrides() || req.has_compaction_policy()) update.overrides = next.overrides;
  ASSIGN_OR_RETURN(const ResolvedProfile* resolved, profiles_->ForRequest(next.model));
  const ModelProfile profile = ApplyOverrides(resolved->profile, next.overrides);
  RETURN_IF_ERROR(ValidateProfile(profile, "profile_overrides."));
  const Tokenizer& tokenizer = *resolved->tokenizer;
  update.system_prompt_tokens =
      CountSystemTokens(tokenizer, next.system_prompt, profile.per_message_tokens);
  update.pinned_instructions_tokens =
      CountSystemTokens(tokenizer, next.pinned_instructions, profile.per_message_tokens);
  // Item and chunk counts stay in the tokenizer they were made with until
  // a view needs them (EnsureCounts).
  std::string counted_with = current.count_encoding;
  if (counted_with.empty()) {
    absl::StatusOr<const ResolvedProfile*> before = profiles_->ForRequest(current.model);
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

}  // namespace convstate
