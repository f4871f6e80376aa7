#include "services/api/compaction_runner.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/common/log.h"
#include "services/common/status_macros.h"

namespace convstate {
namespace {

using Json = nlohmann::json;

// How long giving a lease back may take.
constexpr absl::Duration kReleaseTimeout = absl::Seconds(2);

CompactionEvent Event(const std::string& event, const std::string& tier, int64_t before,
                      int64_t after, Json detail = Json::object()) {
  CompactionEvent e;
  e.event = event;
  e.tier = tier;
  e.tokens_before = before;
  e.tokens_after = after;
  e.detail = detail.dump();
  return e;
}

const char* BandName(Band band) {
  switch (band) {
    case Band::kNormal: return "normal";
    case Band::kSoft: return "soft";
    case Band::kHard: return "hard";
    case Band::kEmergency: return "emergency";
  }
  return "?";
}

// Tokens a summary's text may have so that the chunk, with the per-message
// overhead, stays within the profile's cap; `wanted` is the size that would
// make the compaction worthwhile.
int64_t TextBudget(const ModelProfile& p, int64_t wanted) {
  const int64_t cap = p.summarizer.max_chunk_tokens - p.per_message_tokens;
  return std::max<int64_t>(16, std::min(cap, std::max<int64_t>(32, wanted)));
}

// A chunk of [from, through] holding `text` (`tokens` tokens) as written by
// the summarizer that produced `result`.
SummaryChunk ChunkOf(int64_t from, int64_t through, std::string text, int64_t tokens,
                     const SummaryResult& result) {
  SummaryChunk chunk;
  chunk.from_sequence = from;
  chunk.through_sequence = through;
  chunk.text = std::move(text);
  chunk.token_count = tokens;
  chunk.summarizer_model = result.model;
  chunk.prompt_version = result.prompt_version;
  chunk.tokens_in = result.tokens_in;
  chunk.tokens_out = result.tokens_out;
  chunk.latency_ms = result.latency_ms;
  return chunk;
}

bool NeedsCommit(const CompactionPlan& plan) {
  return plan.pruned_results > 0 || plan.summarize || !plan.fold.empty();
}

}  // namespace

absl::StatusOr<std::optional<CompactionLease>> CompactionRunner::AcquireLease(
    const CallContext& ctx, const ConversationKey& key, bool background) {
  while (true) {
    ASSIGN_OR_RETURN(std::optional<CompactionLease> lease,
                     storage_->TryAcquireCompactionLease(ctx, key, options_.holder,
                                                         options_.lease));
    if (lease.has_value() || background) return lease;
    if (IsCancelled(ctx)) return absl::CancelledError("the caller cancelled while waiting");
    if (options_.clock->Now() + options_.poll >= ctx.deadline) {
      return absl::DeadlineExceededError(
          "another compaction of this conversation was still running at the deadline");
    }
    options_.clock->SleepFor(options_.poll);
  }
}

absl::StatusOr<CompactionOutcome> CompactionRunner::Run(
    const CallContext& ctx, ContextSnapshot snapshot, const ResolvedProfile& resolved,
    const std::vector<ItemData>& pending, CompactionMode mode, const std::string& instructions,
    const ProgressSink& progress, bool background) {
  const ModelProfile& profile = resolved.profile;
  const Tokenizer& tokenizer = *resolved.tokenizer;
  auto input_for = [&](const ContextSnapshot& s) {
    PlanInput in;
    in.snapshot = &s;
    in.profile = profile;
    in.approximate = tokenizer.approximate();
    in.pending = pending;
    in.tokenizer = &tokenizer;
    return in;
  };
  auto view_of = [&](const ContextSnapshot& s, int64_t truncate_before) {
    ViewOptions options;
    options.tokenizer = &tokenizer;
    options.truncate_before = truncate_before;
    return AssembleView(s, profile, tokenizer.approximate(), pending, options);
  };
  auto report = [&](CompactionProgress::Kind kind, const std::string& tier, int64_t before,
                    int64_t after, const std::string& reason) {
    if (progress) progress(CompactionProgress{kind, tier, before, after, reason});
  };
  const ConversationKey key = snapshot.conversation.key;

  CompactionOutcome out;
  out.plan = PlanCompaction(input_for(snapshot), mode);
  // One compaction per conversation at a time, across replicas. (A plan
  // that cannot fit has no steps, so it takes no lease; see below.)
  std::optional<CompactionLease> lease;
  int64_t lock_wait_ms = 0;
  if (NeedsCommit(out.plan)) {
    const absl::Time asked = options_.clock->Now();
    ASSIGN_OR_RETURN(lease, AcquireLease(ctx, key, background));
    lock_wait_ms = absl::ToInt64Milliseconds(options_.clock->Now() - asked);
    if (!lease.has_value()) {  // Background, and someone else is at it.
      out.tokens_before = out.plan.tokens_before;
      out.version = snapshot.conversation.version;
      out.view = std::move(out.plan.view_before);
      return out;
    }
    // Whoever held it may have compacted meanwhile: plan again from now.
    ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));
    out.plan = PlanCompaction(input_for(snapshot), mode);
  }
  // The lease is given back with a deadline of its own: the caller's has
  // often passed by then (a summarizer that hung), and a refused release
  // would keep the conversation locked until the lease expires.
  struct Release {
    Storage* storage;
    const Clock* clock;
    const ConversationKey& key;
    const std::optional<CompactionLease>& lease;
    ~Release() {
      if (!lease.has_value()) return;
      const CallContext own{clock->Now() + kReleaseTimeout};
      if (absl::Status s = storage->ReleaseCompactionLease(own, key, *lease); !s.ok()) {
        LogWarning("could not release the compaction lease of ", key.conversation_id, ": ",
                   s.ToString(), " (it expires by itself)");
      }
    }
  } release{storage_, options_.clock, key, lease};
  out.tokens_before = out.plan.tokens_before;
  out.version = snapshot.conversation.version;
  if (out.plan.cannot_fit.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the context cannot fit the model's window: ", *out.plan.cannot_fit));
  }
  const CompactionPlan& plan = out.plan;
  std::vector<CompactionEvent> events;
  if (!plan.empty() && mode == CompactionMode::kByBand) {
    events.push_back(Event("threshold_hit", "", plan.tokens_before, plan.tokens_before,
                           {{"band", BandName(plan.band)}, {"lock_wait_ms", lock_wait_ms}}));
  }

  // Tiers 1 and 2, committed together.
  bool summarizer_failed = false;
  CompactionCommit commit;
  commit.key = key;
  if (lease.has_value()) commit.fencing_token = lease->token;
  commit.expected_summarized_through = snapshot.conversation.summarized_through;
  commit.expected_prune_boundary = snapshot.conversation.prune_boundary;
  commit.new_prune_boundary = plan.prune_boundary;
  if (plan.pruned_results > 0) {
    report(CompactionProgress::Kind::kStarted, "prune", plan.tokens_before, 0, "");
    events.push_back(Event("pruned", "prune", plan.tokens_before,
                           plan.tokens_before - plan.prune_savings,
                           {{"results", plan.pruned_results}, {"boundary", plan.prune_boundary}}));
    report(CompactionProgress::Kind::kCompleted, "prune", plan.tokens_before,
           plan.tokens_before - plan.prune_savings, "");
  }
  if (plan.summarize) {
    const int64_t before = plan.tokens_before - plan.prune_savings;
    report(CompactionProgress::Kind::kStarted, "summarize", before, 0, "");
    events.push_back(Event("started", "summarize", before, before,
                           {{"from", commit.expected_summarized_through + 1},
                            {"through", plan.summarize_through}}));
    std::vector<Item> zone;
    for (const Item& item : snapshot.live_items) {
      if (item.sequence <= plan.summarize_through && !item.data.pinned &&
          item.data.kind != ItemKind::kSummaryMarker) {
        zone.push_back(item);
      }
    }
    SummaryRequest req;
    req.transcript = RenderTranscript(zone, ToolNamesByCallId(snapshot.live_items));
    // A summary must be clearly smaller than what it replaces, and within
    // the chunk cap once the chat format's overhead is added.
    req.max_tokens = TextBudget(profile, plan.summarize_tokens / 3);
    req.instructions = instructions;
    req.tokenizer = &tokenizer;
    req.deadline = ctx.deadline;
    absl::StatusOr<SummaryResult> summary = summarizer_->Summarize(req);
    if (!summary.ok()) {
      summarizer_failed = true;
      LogWarning("summarizer failed for ", key.conversation_id, ": ", summary.status().ToString());
      events.push_back(Event("failed", "summarize", before, before,
                             {{"reason", std::string(summary.status().message())},
                              {"code", absl::StatusCodeToString(summary.status().code())}}));
      report(CompactionProgress::Kind::kFailed, "summarize", before, before,
             std::string(summary.status().message()));
    } else {
      std::string text = summary->text;
      int64_t tokens = CountSystemTokens(tokenizer, text, profile.per_message_tokens);
      if (tokens > req.max_tokens + profile.per_message_tokens) {
        events.push_back(Event("summary_oversize", "summarize", tokens, req.max_tokens,
                               {{"model", summary->model}}));
        text = CutToTokens(text, req.max_tokens, tokenizer);
        tokens = CountSystemTokens(tokenizer, text, profile.per_message_tokens);
      }
      if (text.empty() || tokens >= plan.summarize_tokens) {
        events.push_back(Event("no_progress", "summarize", plan.summarize_tokens, tokens,
                               {{"model", summary->model}}));
        report(CompactionProgress::Kind::kFailed, "summarize", before, before,
               "the summary was no smaller than what it replaces");
      } else {
        SummaryChunk chunk = ChunkOf(commit.expected_summarized_through + 1,
                                     plan.summarize_through, std::move(text), tokens, *summary);
        const int64_t after = before - plan.summarize_tokens + tokens;
        events.push_back(Event("completed", "summarize", before, after,
                               {{"model", chunk.summarizer_model},
                                {"summarized_tokens", plan.summarize_tokens},
                                {"summary_tokens", tokens},
                                {"latency_ms", chunk.latency_ms}}));
        commit.chunk = std::move(chunk);
        report(CompactionProgress::Kind::kCompleted, "summarize", before, after, "");
      }
    }
  }
  commit.events = std::move(events);
  events.clear();

  bool reloaded = false;
  auto apply = [&](const CompactionCommit& c) -> absl::Status {
    absl::StatusOr<CompactionResult> result = storage_->CommitCompaction(ctx, c);
    if (absl::IsAborted(result.status())) {
      // A concurrent compaction won; its result is as good as ours.
      LogInfo("compaction of ", key.conversation_id, " discarded: ", result.status().message());
    } else if (!result.ok()) {
      return result.status();
    } else {
      out.version = result->version;
      if (result->chunk_id != 0) out.chunk_id = result->chunk_id;
    }
    ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));
    reloaded = true;
    return absl::OkStatus();
  };
  const bool changes = commit.chunk.has_value() ||
                       commit.new_prune_boundary != commit.expected_prune_boundary;
  if (changes) {
    RETURN_IF_ERROR(apply(commit));
  } else {
    events = std::move(commit.events);
  }

  // Tier 3: fold chunks that outgrew their budget.
  const bool fold_wanted = changes || mode == CompactionMode::kAuto ||
                           mode == CompactionMode::kSummarize;
  if (!summarizer_failed && fold_wanted && lease.has_value()) {
    const CompactionPlan again = PlanCompaction(input_for(snapshot), CompactionMode::kSummarize);
    if (!again.fold.empty()) {
      std::vector<SummaryChunk> folding;
      for (const SummaryChunk& chunk : snapshot.active_chunks) {
        if (std::find(again.fold.begin(), again.fold.end(), chunk.chunk_id) != again.fold.end()) {
          folding.push_back(chunk);
        }
      }
      std::sort(folding.begin(), folding.end(), [](const SummaryChunk& a, const SummaryChunk& b) {
        return a.from_sequence < b.from_sequence;
      });
      int64_t folded_tokens = 0;
      for (const SummaryChunk& chunk : folding) folded_tokens += chunk.token_count;
      const int64_t before = view_of(snapshot, 0).tokens.total;
      report(CompactionProgress::Kind::kStarted, "fold", before, 0, "");
      SummaryRequest req;
      req.transcript = RenderChunks(folding);
      req.max_tokens = TextBudget(profile, folded_tokens / 2);
      req.instructions = instructions;
      req.tokenizer = &tokenizer;
      req.deadline = ctx.deadline;
      absl::StatusOr<SummaryResult> merged = summarizer_->Summarize(req);
      if (!merged.ok()) {
        summarizer_failed = true;
        events.push_back(Event("failed", "fold", before, before,
                               {{"reason", std::string(merged.status().message())}}));
        report(CompactionProgress::Kind::kFailed, "fold", before, before,
               std::string(merged.status().message()));
      } else {
        std::string text = CutToTokens(merged->text, req.max_tokens, tokenizer);
        const int64_t tokens = CountSystemTokens(tokenizer, text, profile.per_message_tokens);
        if (tokens >= folded_tokens) {
          events.push_back(Event("no_progress", "fold", folded_tokens, tokens));
        } else {
          CompactionCommit fold;
          fold.key = key;
          if (lease.has_value()) fold.fencing_token = lease->token;
          fold.expected_summarized_through = snapshot.conversation.summarized_through;
          fold.expected_prune_boundary = snapshot.conversation.prune_boundary;
          fold.new_prune_boundary = snapshot.conversation.prune_boundary;
          int64_t from = folding.front().from_sequence;
          int64_t through = folding.back().through_sequence;
          for (const SummaryChunk& c : folding) {
            from = std::min(from, c.from_sequence);
            through = std::max(through, c.through_sequence);
            fold.supersedes.push_back(c.chunk_id);
          }
          fold.chunk = ChunkOf(from, through, std::move(text), tokens, *merged);
          const int64_t after = before - folded_tokens + tokens;
          fold.events.push_back(Event("folded", "fold", before, after,
                                      {{"chunks", fold.supersedes.size()},
                                       {"folded_tokens", folded_tokens},
                                       {"summary_tokens", tokens}}));
          RETURN_IF_ERROR(apply(fold));
          report(CompactionProgress::Kind::kCompleted, "fold", before, after, "");
        }
      }
    }
  }

  // Tier 4: truncate the view (never storage) when nothing else was enough.
  // Unless something was committed, the planner's view is still current.
  out.view = reloaded ? view_of(snapshot, 0) : std::move(out.plan.view_before);
  const Band band = BandOf(out.view.tokens.total, profile);
  // Prune-only and summarize do what they say; the other modes end with a
  // view that fits, truncating as the last resort.
  const bool may_truncate = mode == CompactionMode::kByBand || mode == CompactionMode::kAuto ||
                            mode == CompactionMode::kTruncate;
  const bool truncate =
      may_truncate && (mode == CompactionMode::kTruncate || band == Band::kEmergency ||
                       (summarizer_failed && band >= Band::kHard) ||
                       out.view.tokens.total > profile.context_window);
  if (truncate) {
    const int64_t before = out.view.tokens.total;
    const int64_t point = TruncationPoint(input_for(snapshot), snapshot.conversation.prune_boundary,
                                          Threshold(profile, profile.hard_threshold));
    if (point != 0) {
      report(CompactionProgress::Kind::kStarted, "truncate", before, 0, "");
      out.view = view_of(snapshot, point);
      const std::string reason = mode == CompactionMode::kTruncate ? "requested"
                                 : summarizer_failed             ? "summarizer unavailable"
                                                                 : "still over the emergency threshold";
      events.push_back(Event("truncated", "truncate", before, out.view.tokens.total,
                             {{"before_sequence", point}, {"reason", reason}}));
      report(CompactionProgress::Kind::kCompleted, "truncate", before, out.view.tokens.total, reason);
    }
  }
  if (!events.empty()) {
    // Audit rows of steps that changed nothing stored; losing them must not
    // fail the call.
    if (absl::Status s = storage_->RecordCompactionEvents(ctx, key, events); !s.ok()) {
      LogWarning("could not record compaction events for ", key.conversation_id, ": ", s.ToString());
    }
  }
  out.version = snapshot.conversation.version;
  return out;
}

}  // namespace convstate
