#include "services/api/view_builder.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/api/wire.h"
#include "services/common/status_macros.h"
#include "services/compaction/engine/overflow.h"
#include "services/compaction/engine/planner.h"
#include "services/compaction/engine/summaries.h"
#include "services/compaction/view/context_view.h"
#include "services/tokenizer/tokens.h"

namespace convstate {

ViewBuilder::ViewBuilder(Options options, Storage* storage, CompactionRunner* runner,
                         ContextCache* cache, const ProfileResolver* profiles,
                         HistoryRecall* recall, BackgroundCompactor* background)
    : options_(options),
      storage_(storage),
      runner_(runner),
      cache_(cache),
      profiles_(profiles),
      recall_(recall),
      background_(background) {}

absl::StatusOr<ViewBuilder::Answer> ViewBuilder::Build(const CallContext& ctx,
                                                        const ConversationKey& key,
                                                        const v1::BuildContextRequest& req,
                                                        const ProgressSink& progress, bool wire) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedContext> current,
                   cache_->Current(ctx, *storage_, key));
  const bool plain =
      req.pending_input().empty() && !req.provider_overflow() && req.recall_query().empty();
  Answer answer;
  if (plain && wire && current->plain_view != nullptr) {
    // Nothing changed since this replica built the same view: send it again.
    RecordView(static_cast<v1::ContextStatus>(current->status), current->view_tokens,
               current->band);
    if (current->compact_in_background) background_->CompactInBackground(key);
    background_->NoteBuilt(key, current->band, current->prompt_cache_ttl_s);
    answer.wire = current->plain_view;
    return answer;
  }
  const ContextSnapshot& held = *current->snapshot;
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(held.conversation));
  // Without compaction nothing bounds the live window but this (with it,
  // the call compacts what it read).
  if (!resolved.profile.compaction_enabled) RETURN_IF_ERROR(CheckViewBytes(held));
  ContextSnapshot snapshot = held;
  RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, snapshot, resolved));
  const bool recounted = snapshot.conversation.count_encoding != held.conversation.count_encoding;
  const std::vector<ItemData> pending = PendingItems(req.pending_input(), resolved);
  // Searched for while the view is built; added to it after.
  const std::string recall_query = RecallQueryOf(req);
  const std::shared_ptr<HistoryRecall::PendingRecall> recall =
      plain || req.provider_overflow()
          ? nullptr
          : recall_->StartRecall(ctx, key, held.conversation, resolved, recall_query);
  if (req.provider_overflow()) {
    cache_->Erase(key);
    ASSIGN_OR_RETURN(answer.message,
                     RecoverFromOverflow(ctx, key, std::move(snapshot), resolved, pending,
                                         req.provider_reported_tokens(), progress));
  } else {
    const CompactionMode mode = profiles_->CallMode(resolved.profile);
    // Room for what recall may add, so that it never lifts the view into
    // the band the call would have compacted.
    CompactionControl control;
    if (recall != nullptr) control.headroom = HistoryRecall::RecallHeadroom(resolved.profile);
    ASSIGN_OR_RETURN(CompactionOutcome outcome,
                     runner_->Run(ctx, std::move(snapshot), resolved, pending, mode, "", progress,
                                  /*background=*/false, control));
    // From the soft band on, the background gets ahead of need (kAhead); a
    // call that compacted already leaves it nothing to do.
    // ... counting what recall takes after it, as the call's plan did.
    const Band band_with_recall =
        BandOf(outcome.view.tokens.total + control.headroom, resolved.profile);
    const bool compact_in_background = options_.background_compaction &&
                                       band_with_recall >= Band::kSoft &&
                                       outcome.plan.empty() &&
                                       resolved.profile.compaction_enabled;
    if (compact_in_background) background_->CompactInBackground(key);
    const int64_t idle_ttl_s =
        resolved.profile.compaction_enabled ? resolved.profile.prompt_cache_ttl_s : 0;
    background_->NoteBuilt(key, BandOf(outcome.view.tokens.total, resolved.profile), idle_ttl_s);
    if (!plain && recall == nullptr && !outcome.plan.empty() && outcome.stored != nullptr) {
      // Nothing was compacted when the call began (so recall had nothing
      // to search), and the call compacted: what it took out of the view
      // is searched now, up to where the view starts (a compacting call's
      // cost is the summarizer's, not this).
      recall_->AddRecall(recall_->StartRecall(ctx, key, outcome.stored->conversation, resolved,
                                              recall_query),
                         outcome.stored->conversation, resolved, outcome.view);
    } else {
      recall_->AddRecall(recall, held.conversation, resolved, outcome.view);
    }
    if (!outcome.plan.empty() && outcome.stored != nullptr) {
      recall_->NoteCompacted(outcome.stored->conversation);
    }
    answer.message = ResponseOf(key, outcome, resolved.profile, mode);
    BuiltView built;
    built.read = current;
    built.recounted = recounted;
    built.version = outcome.version;
    built.compaction_version = outcome.compaction_version;
    built.stored = std::move(outcome.stored);
    built.plain = plain;
    built.status = outcome.view.status;
    built.invalidated = outcome.invalidated_breakpoint;
    built.compacted_nothing = outcome.plan.empty() || !resolved.profile.compaction_enabled;
    built.band = outcome.plan.band;
    built.response_status = answer.message->context_status();
    built.view_tokens = answer.message->tokens().total();
    built.compact_in_background = compact_in_background;
    built.prompt_cache_ttl_s = idle_ttl_s;
    built.response = &*answer.message;
    std::shared_ptr<const std::string> kept = cache_->KeepView(key, built);
    if (wire) answer.wire = std::move(kept);
  }
  if (wire && answer.wire == nullptr) {
    answer.wire = std::make_shared<const std::string>(answer.message->SerializeAsString());
  }
  return answer;
}

absl::StatusOr<v1::BuildContextResponse> ViewBuilder::RecoverFromOverflow(
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
  ASSIGN_OR_RETURN(const ResolvedProfile limited, profiles_->ProfileOf(snapshot.conversation));
  const bool enabled = limited.profile.compaction_enabled;
  std::vector<CompactionMode> modes = {CompactionMode::kByBand};
  if (enabled) modes = {CompactionMode::kAuto, CompactionMode::kTruncate};
  CompactionOutcome outcome;
  for (size_t i = 0; i < modes.size(); ++i) {
    if (i > 0) {
      ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));
    }
    ASSIGN_OR_RETURN(outcome,
                     runner_->Run(ctx, std::move(snapshot), limited, pending, modes[i], "", progress));
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

absl::StatusOr<v1::BuildContextResponse> ViewBuilder::At(const CallContext& ctx,
                                                          const ConversationKey& key,
                                                          const v1::GetContextAtRequest& req) {
  ASSIGN_OR_RETURN(
      ContextSnapshot snapshot,
      storage_->LoadContextAt(ctx, key, req.version(),
                              req.has_compaction_version() ? req.compaction_version() : -1));
  RETURN_IF_ERROR(CheckViewBytes(snapshot));
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(snapshot.conversation));
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
  return ResponseOf(key, outcome, resolved.profile, profiles_->CallMode(resolved.profile));
}

absl::StatusOr<v1::InspectContextResponse> ViewBuilder::Inspect(
    const CallContext& ctx, const ConversationKey& key, const v1::InspectContextRequest& req) {
  ASSIGN_OR_RETURN(ContextSnapshot snapshot, storage_->LoadContext(ctx, key));
  RETURN_IF_ERROR(CheckViewBytes(snapshot));
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(snapshot.conversation));
  // A reader's call writes nothing: the counts are made for this answer only.
  RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, snapshot, resolved, /*keep=*/false));
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
       recall_->AddRecall(recall_->StartRecall(ctx, key, snapshot.conversation, resolved, query),
                          snapshot.conversation, resolved, view)) {
    ToProto(std::move(p), out.add_recalled());
  }
  out.set_recalled_tokens(view.tokens.recalled);
  return out;
}

v1::BuildContextResponse ViewBuilder::ResponseOf(const ConversationKey& key,
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

void ViewBuilder::RecordView(v1::ContextStatus status, int64_t tokens, Band band) const {
  telemetry::Span* span = telemetry::CurrentSpan();
  if (span != nullptr && span->recording()) {
    span->SetAttribute("convstate.context.status", v1::ContextStatus_Name(status));
    span->SetAttribute("convstate.context.band", v1::Band_Name(static_cast<v1::Band>(band)));
    span->SetAttribute("convstate.view.tokens", tokens);
    span->SetAttribute("gen_ai.conversation.compacted", status != v1::CONTEXT_STATUS_FULL);
  }
  if (options_.telemetry != nullptr) {
    options_.telemetry->instruments().view_tokens->Record(static_cast<double>(tokens));
  }
}

absl::Status ViewBuilder::CheckViewBytes(const ContextSnapshot& snapshot) const {
  const int64_t max = options_.max_view_bytes;
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

}  // namespace convstate
