#include "services/api/profile_resolver.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "services/api/wire.h"
#include "services/common/status_macros.h"
#include "services/compaction/ledger/ledger.h"
#include "services/tokenizer/tokens.h"

namespace convstate {
namespace {

// Conversations whose model this replica remembers.
constexpr size_t kMaxCachedModels = 100000;

}  // namespace

ProfileResolver::ProfileResolver(const ModelRegistry* models, Storage* storage,
                                 bool background_compaction)
    : models_(models), storage_(storage), background_compaction_(background_compaction) {}

absl::StatusOr<ResolvedProfile> ProfileResolver::ProfileOf(const Conversation& c) const {
  ASSIGN_OR_RETURN(const ResolvedProfile* resolved, ForStored(c.model, c.key.conversation_id));
  ResolvedProfile out = *resolved;
  out.profile = ApplyOverrides(out.profile, WithPromptLimit(out.profile, c.overrides, c.prompt_limit));
  return out;
}

absl::StatusOr<const ResolvedProfile*> ProfileResolver::ForRequest(
    const std::string& model) const {
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(model);
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", resolved.status().message()));
  }
  return resolved;
}

absl::StatusOr<const ResolvedProfile*> ProfileResolver::ForStored(
    const std::string& model, absl::string_view conversation_id) const {
  absl::StatusOr<const ResolvedProfile*> resolved = models_->Resolve(model);
  if (!resolved.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", model, "'",
        conversation_id.empty() ? "" : absl::StrCat(" of conversation '", conversation_id, "'"),
        " has no profile in the current configuration"));
  }
  return resolved;
}

absl::StatusOr<std::string> ProfileResolver::ModelOf(const CallContext& ctx,
                                                     const ConversationKey& key, bool refresh) {
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

absl::Status ProfileResolver::EnsureCounts(const CallContext& ctx, ContextSnapshot& snapshot,
                                           const ResolvedProfile& resolved, bool keep) const {
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

CompactionMode ProfileResolver::CallMode(const ModelProfile& profile) const {
  // Blocking at the hard band unless the profile prefers latency over the
  // band and the background is there to do the work.
  return background_compaction_ &&
                 profile.hard_band_policy == HardBandPolicy::kServeWhileBackground
             ? CompactionMode::kByBandBehindBackground
             : CompactionMode::kByBand;
}

std::vector<ItemData> PendingItems(const google::protobuf::RepeatedPtrField<v1::NewItem>& input,
                                   const ResolvedProfile& resolved) {
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

}  // namespace convstate
