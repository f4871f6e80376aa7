#include "services/compaction/summarizers/transcript.h"
#include "services/compaction/engine/compaction_runner.h"

#include <algorithm>
#include <map>


#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/common/log.h"
#include "services/compaction/engine/summaries.h"
#include "services/common/status_macros.h"
#include "storage/context_delta.h"

namespace convstate {
namespace {

// How long giving a lease back may take.
constexpr absl::Duration kReleaseTimeout = absl::Seconds(2);

}  // namespace

absl::StatusOr<std::optional<CompactionLease>> CompactionRunner::AcquireLease(
    const CallContext& ctx, const ConversationKey& key, bool background,
    const std::function<absl::StatusOr<bool>()>& settled) {
  const std::string id = KeyText(key);
  // A lease this process holds is not asked of the database again: asking
  // is an UPDATE of the conversation's row, which waits behind every append
  // and commit holding it, only to be refused.
  bool held_here;
  {
    absl::MutexLock lock(&wait_mu_);
    held_here = held_.contains(id);
    if (held_here && background) return std::optional<CompactionLease>();
  }
  if (!held_here) {
    ASSIGN_OR_RETURN(std::optional<CompactionLease> lease, TakeFromStorage(ctx, key));
    if (lease.has_value() || background) return lease;
  }
  return WaitForLease(ctx, key, settled);
}

absl::StatusOr<std::optional<CompactionLease>> CompactionRunner::TakeFromStorage(
    const CallContext& ctx, const ConversationKey& key) {
  ASSIGN_OR_RETURN(std::optional<CompactionLease> lease,
                   storage_->TryAcquireCompactionLease(ctx, key, options_.holder, options_.lease));
  if (lease.has_value()) {
    absl::MutexLock lock(&wait_mu_);
    held_.insert(KeyText(key));
  }
  return lease;
}

absl::StatusOr<std::optional<CompactionLease>> CompactionRunner::WaitForLease(
    const CallContext& ctx, const ConversationKey& key,
    const std::function<absl::StatusOr<bool>()>& settled) {
  const std::string id = KeyText(key);
  // The first call to wait waits for the lease itself; up to
  // waiting_calls - 1 more wait behind it; the rest do not wait.
  bool lead = false;
  {
    absl::MutexLock lock(&wait_mu_);
    if (waiting_.insert(id).second) {
      lead = true;
    } else {
      const auto behind = following_.find(id);
      const int followers = behind == following_.end() ? 0 : behind->second;
      if (followers + 1 >= options_.waiting_calls) return std::optional<CompactionLease>();
      ++following_[id];
    }
  }
  // Gives up its place, and lets the calls behind it look again.
  struct Leave {
    CompactionRunner* runner;
    const std::string& id;
    const bool followed;
    bool lead;
    ~Leave() {
      absl::MutexLock lock(&runner->wait_mu_);
      if (lead) runner->waiting_.erase(id);
      if (followed && --runner->following_[id] <= 0) runner->following_.erase(id);
      runner->released_.SignalAll();
    }
  } leave{this, id, !lead, lead};
  // Set once this process was seen compacting the conversation: when it is
  // done, what it stored may be all this call needed, so it plans again
  // before asking for the lease.
  bool plan_again = false;
  while (true) {
    if (IsCancelled(ctx)) return absl::CancelledError("the caller cancelled while waiting");
    if (options_.clock->Now() + options_.poll >= ctx.deadline) {
      return absl::DeadlineExceededError(
          "another compaction of this conversation was still running at the deadline");
    }
    {
      absl::MutexLock lock(&wait_mu_);
      if (leave.lead) {
        options_.clock->WaitWithTimeout(released_, wait_mu_, options_.poll);
        // Still held here: the database would refuse.
        if (held_.contains(id)) {
          plan_again = true;
          continue;
        }
      } else if (held_.contains(id) || waiting_.contains(id)) {
        plan_again = plan_again || held_.contains(id);
        options_.clock->WaitWithTimeout(released_, wait_mu_, options_.poll);
        continue;
      } else {
        // The calls ahead are done: this one waits for the lease from here.
        waiting_.insert(id);
        leave.lead = true;
        plan_again = true;
      }
    }
    if (plan_again) {
      plan_again = false;
      ASSIGN_OR_RETURN(const bool done, settled());
      if (done) return std::optional<CompactionLease>();
    }
    ASSIGN_OR_RETURN(std::optional<CompactionLease> lease, TakeFromStorage(ctx, key));
    if (lease.has_value()) return lease;
  }
}

ContextView ViewAsBuilt(const ContextSnapshot& snapshot, const ResolvedProfile& resolved) {
  const ModelProfile& profile = resolved.profile;
  ViewOptions options;
  options.tokenizer = resolved.tokenizer;
  ContextView view =
      AssembleView(snapshot, profile, resolved.tokenizer->approximate(), {}, options);
  if (BandOf(view.tokens.total, profile) == Band::kEmergency ||
      view.tokens.total > profile.context_window) {
    PlanInput in;
    in.snapshot = &snapshot;
    in.profile = profile;
    in.approximate = resolved.tokenizer->approximate();
    in.tokenizer = resolved.tokenizer;
    const Truncation t = PlanTruncation(in, snapshot.conversation.prune_boundary,
                                        Threshold(profile, profile.hard_threshold));
    if (t.any()) {
      options.truncate_before = t.before_sequence;
      options.truncate_chunks = t.chunks;
      options.ledger_budget = t.ledger_budget;
      view = AssembleView(snapshot, profile, resolved.tokenizer->approximate(), {}, options);
    }
  }
  return view;
}

absl::StatusOr<SummaryResult> CompactionRunner::SummarizeInPieces(
    const SummaryRequest& req, const ModelProfile& profile, const Tokenizer& tokenizer,
    StepRecorder& steps, std::vector<CompactionEvent>& events) {
  // What one request may carry of the transcript: the summarizer's window
  // less the summary and the prompt's own instructions.
  constexpr int64_t kPromptOverhead = 512;
  const int64_t limit = profile.summarizer.input_limit;
  const int64_t budget = limit - req.max_tokens - kPromptOverhead;
  if (limit <= 0 || req.items.size() < 2 || tokenizer.CountTokens(req.transcript) <= budget) {
    absl::StatusOr<SummaryResult> r = summarizer_->Summarize(req);
    steps.SummarizerCall(r.status());
    return r;
  }
  // Consecutive pieces whose transcripts fit (an item larger than the
  // budget alone is a piece; the transcript clips long items).
  std::vector<std::vector<Item>> pieces(1);
  int64_t used = 0;
  for (const Item& item : req.items) {
    const int64_t tokens = tokenizer.CountTokens(RenderTranscript({item}, req.tool_names));
    if (!pieces.back().empty() && used + tokens > std::max<int64_t>(budget, 1)) {
      pieces.emplace_back();
      used = 0;
    }
    pieces.back().push_back(item);
    used += tokens;
  }
  events.push_back(AuditRow("summarized_in_pieces", Tier::kSummarize, 0, 0,
                            DetailOf({{"pieces", pieces.size()},
                                      {"input_limit", limit},
                                      {"model", req.model}})));
  SummaryResult combined;
  std::vector<std::string> texts;
  for (const std::vector<Item>& piece : pieces) {
    SummaryRequest part = req;
    part.items = piece;
    part.transcript = RenderTranscript(piece, req.tool_names);
    part.max_tokens = std::max<int64_t>(16, req.max_tokens / static_cast<int64_t>(pieces.size()));
    absl::StatusOr<SummaryResult> r = summarizer_->Summarize(part);
    steps.SummarizerCall(r.status());
    if (!r.ok()) return r.status();
    if (combined.model.empty()) {
      combined.model = r->model;
      combined.prompt_version = r->prompt_version;
    }
    combined.tokens_in += r->tokens_in;
    combined.tokens_out += r->tokens_out;
    combined.latency_ms += r->latency_ms;
    if (combined.fallback_reason.empty()) combined.fallback_reason = r->fallback_reason;
    combined.lines.insert(combined.lines.end(), r->lines.begin(), r->lines.end());
    texts.push_back(std::move(r->text));
  }
  combined.text = combined.lines.empty()
                      ? absl::StrJoin(texts, "\n")
                      : RenderSummaryLines(combined.lines, req.items.front().sequence,
                                           req.items.back().sequence);
  return combined;
}

void CompactionRunner::Released(const ConversationKey& key) {
  const std::string id = KeyText(key);
  absl::MutexLock lock(&wait_mu_);
  held_.erase(id);
  if (waiting_.contains(id) || following_.contains(id)) released_.SignalAll();
}

CompactionRunner::CompactionRunner(Options options, Storage* storage, Summarizer* summarizer)
    : options_(std::move(options)), storage_(storage), summarizer_(summarizer) {}

absl::StatusOr<bool> CompactionRunner::TakeLease(CompactionJob& job, bool background,
                                                 int64_t& waited_ms) {
  const ConversationKey& key = job.snapshot.conversation.key;
  const absl::Time asked = options_.clock->Now();
  // Whether the compaction this call waited for left nothing to store.
  auto settled = [&]() -> absl::StatusOr<bool> {
    RETURN_IF_ERROR(Refresh(job));
    return !job.plan.Stores();
  };
  ASSIGN_OR_RETURN(job.lease, AcquireLease(job.ctx, key, background, settled));
  const absl::Duration waited = options_.clock->Now() - asked;
  if (!background) job.steps.LeaseWait(waited);
  waited_ms = absl::ToInt64Milliseconds(waited);
  job.steps.span().SetAttribute("convstate.compaction.lease_wait_ms", waited_ms);
  if (!job.lease.has_value()) {
    if (background) return false;  // Someone else is at it.
    // The compaction this call waited for stored what it needed.
    if (!job.plan.Stores()) return true;
    // Another compaction runs and enough requests of this process already
    // wait for it: this one takes the view as it stands (truncated if it
    // does not fit) instead of holding a worker.
    job.steps.Note(job.plan.Step(Tier::kSummarize) != nullptr ? Tier::kSummarize : Tier::kPrune,
                   "another compaction of this conversation is under way and enough calls "
                   "wait for it: the view is served as it stands");
    std::erase_if(job.plan.steps, [](const TierStep& s) { return s.stores; });
    return true;
  }
  // Summarizer calls end before the lease would: work done after it
  // expired could not be committed.
  job.lease_until = options_.clock->Now() + options_.lease - LeaseMargin(options_.lease);
  // Whoever held it may have compacted meanwhile, and turns may have been
  // appended: plan again from now.
  RETURN_IF_ERROR(Refresh(job));
  return true;
}

absl::Status CompactionRunner::Refresh(CompactionJob& job) {
  // When only appends happened (the usual case), reading them is enough.
  ASSIGN_OR_RETURN(ContextDelta delta,
                   storage_->LoadContextSince(job.ctx, job.snapshot.conversation.key,
                                              &job.snapshot.conversation));
  if (delta.kind == ContextDelta::Kind::kUnchanged) return absl::OkStatus();
  job.Adopt(ApplyDelta(job.snapshot, std::move(delta)));
  job.refreshed = true;
  job.plan = PlanCompaction(job.InputFor(job.snapshot), job.mode);
  return absl::OkStatus();
}

bool CompactionRunner::Store(CompactionJob& job, CompactionOutcome& out, const CompactionCommit& c,
                             Tier tier) {
  const ConversationKey& key = job.snapshot.conversation.key;
  absl::StatusOr<CompactionResult> result = storage_->CommitCompaction(job.ctx, c);
  if (absl::IsAborted(result.status())) {
    // A concurrent compaction won; its result is as good as ours.
    LogInfo("compaction of ", key.conversation_id, " discarded: ", result.status().message());
  } else if (!result.ok()) {
    LogWarning("could not store the ", TierName(tier), " of ", key.conversation_id, ": ",
               result.status().ToString());
    job.failed = true;
    job.failure = absl::StrCat(TierName(tier), " could not be stored");
    job.events.push_back(
        AuditRow("failed", tier, 0, 0,
                 DetailOf({{"reason", absl::StrCat("commit: ", result.status().message())},
                           {"code", absl::StatusCodeToString(result.status().code())}})));
    job.steps.Failed(tier, 0, "the compaction could not be stored");
    return false;
  } else {
    out.version = result->version;
    out.compaction_version = result->compaction_version;
    if (result->chunk_id != 0) out.chunk_id = result->chunk_id;
  }
  absl::StatusOr<ContextSnapshot> fresh = storage_->LoadContext(job.ctx, key);
  if (!fresh.ok()) {
    // Stored all the same: the view is built from the state before it.
    LogWarning("could not reload ", key.conversation_id, " after compacting: ",
               fresh.status().ToString());
    return true;
  }
  job.Adopt(std::move(*fresh));
  job.reloaded = true;
  job.view_current = false;
  return true;
}

void CompactionRunner::CommitPending(CompactionJob& job) {
  CompactionCommit& commit = job.commit;
  const bool changes =
      commit.chunk.has_value() || commit.new_prune_boundary != commit.expected_prune_boundary;
  KeepPins(job);
  if (!changes) {
    // Audit rows of steps that stored nothing go on their own.
    job.events.insert(job.events.end(), commit.events.begin(), commit.events.end());
  } else if (!job.store(commit, commit.chunk.has_value() ? Tier::kSummarize : Tier::kPrune)) {
    // Its audit rows were not stored with it: keep them with the failure.
    job.events.insert(job.events.begin(), commit.events.begin(), commit.events.end());
  }
  job.changed = job.changed || changes;
  commit.events.clear();
  commit.chunk.reset();
  commit.new_prune_boundary = commit.expected_prune_boundary;
}

absl::StatusOr<CompactionOutcome> CompactionRunner::Run(
    const CallContext& ctx, ContextSnapshot snapshot, const ResolvedProfile& resolved,
    const std::vector<ItemData>& pending, CompactionMode mode, const std::string& instructions,
    const ProgressSink& progress, bool background, const CompactionControl& control) {
  StepRecorder steps(progress, options_.telemetry);
  CompactionJob job{ctx, resolved.profile, *resolved.tokenizer, pending, mode, instructions, steps};
  job.through_sequence = control.through_sequence;
  job.headroom = control.headroom;
  job.Adopt(std::move(snapshot));
  job.plan = PlanCompaction(job.InputFor(job.snapshot), mode);
  CompactionOutcome out;
  const ConversationKey key = job.snapshot.conversation.key;
  const ModelProfile& profile = resolved.profile;
  if (!profile.compaction_enabled) return Uncompacted(std::move(job), mode);
  if (!job.plan.empty()) {
    steps.OpenSpan(key, BandName(job.plan.band), background, job.plan.tokens_before);
  }
  // One compaction per conversation at a time, across replicas. (A plan
  // that cannot fit has no steps, so it takes no lease; see below.)
  int64_t lock_wait_ms = 0;
  if (job.plan.Stores() && !control.dry_run) {
    ASSIGN_OR_RETURN(const bool go, TakeLease(job, background, lock_wait_ms));
    if (!go) {
      out.tokens_before = job.plan.tokens_before;
      out.version = job.snapshot.conversation.version;
      out.compaction_version = job.snapshot.conversation.compaction_version;
      out.view = std::move(job.plan.view_before);
      return out;
    }
  }
  // The lease is given back with a deadline of its own: the caller's has
  // often passed by then (a summarizer that hung), and a refused release
  // would keep the conversation locked until the lease expires.
  struct Release {
    CompactionRunner* runner;
    const ConversationKey& key;
    const std::optional<CompactionLease>& lease;
    ~Release() {
      if (!lease.has_value()) return;
      const CallContext own{runner->options_.clock->Now() + kReleaseTimeout};
      if (absl::Status s = runner->storage_->ReleaseCompactionLease(own, key, *lease); !s.ok()) {
        LogWarning("could not release the compaction lease of ", key.conversation_id, ": ",
                   s.ToString(), " (it expires by itself)");
      }
      runner->Released(key);
    }
  } release{this, key, job.lease};
  out.tokens_before = job.plan.tokens_before;
  out.version = job.snapshot.conversation.version;
  if (job.plan.cannot_fit.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the context cannot fit the model's window: ", *job.plan.cannot_fit));
  }
  if (job.plan.refused.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("through_sequence: ", *job.plan.refused));
  }
  // The cache breakpoints as they were, to tell which one the steps below
  // invalidate.
  const std::vector<CacheBreakpoint> breakpoints_before =
      job.plan.empty()
          ? std::vector<CacheBreakpoint>()
          : DigestView(job.plan.view_before, job.snapshot.conversation.prune_boundary).breakpoints;
  job.step_tokens = job.plan.view_before.tokens;
  StartCommit(job, lock_wait_ms);
  job.summarize = [&](const SummaryRequest& req, std::vector<CompactionEvent>& events) {
    return SummarizeInPieces(req, profile, job.tokenizer, steps, events);
  };
  job.store = [&](const CompactionCommit& c, Tier tier) { return Store(job, out, c, tier); };

  for (const std::unique_ptr<CompactionTier>& tier : Tiers()) {
    if (tier->NeedsStoredState()) {
      if (control.dry_run) return Proposed(job, std::move(out));
      CommitPending(job);
    }
    tier->Run(job);
  }
  if (control.dry_run) return Proposed(job, std::move(out));
  CommitPending(job);
  return Finished(job, std::move(out), breakpoints_before);
}

void CompactionRunner::StartCommit(CompactionJob& job, int64_t lock_wait_ms) {
  CompactionCommit& commit = job.commit;
  commit.key = job.snapshot.conversation.key;
  commit.lease = job.lease;
  commit.expected_summarized_through = job.snapshot.conversation.summarized_through;
  commit.expected_prune_boundary = job.snapshot.conversation.prune_boundary;
  // The prune tier moves it forward when it prunes.
  commit.new_prune_boundary = commit.expected_prune_boundary;
  if (!job.plan.empty() && ForCall(job.mode)) {
    commit.events.push_back(AuditRow("threshold_hit", std::nullopt, job.plan.tokens_before,
                                     job.plan.tokens_before,
                                     DetailOf({{"band", BandName(job.plan.band)},
                                               {"lock_wait_ms", lock_wait_ms}})));
  }
}

CompactionOutcome CompactionRunner::Finished(
    CompactionJob& job, CompactionOutcome out,
    const std::vector<CacheBreakpoint>& breakpoints_before) {
  const ConversationKey key = job.snapshot.conversation.key;
  out.view = std::move(job.CurrentView());
  if (!job.events.empty()) {
    // Audit rows of steps that changed nothing stored; losing them must not
    // fail the call. They are written even if the caller's deadline passed.
    const CallContext own{options_.clock->Now() + kReleaseTimeout};
    if (absl::Status s = storage_->RecordCompactionEvents(own, key, job.events); !s.ok()) {
      LogWarning("could not record compaction events for ", key.conversation_id, ": ", s.ToString());
    }
  }
  out.version = job.snapshot.conversation.version;
  out.compaction_version = job.snapshot.conversation.compaction_version;
  out.prune_boundary = job.snapshot.conversation.prune_boundary;
  if (!breakpoints_before.empty() && (job.reloaded || job.truncated)) {
    out.invalidated_breakpoint = FirstInvalidated(breakpoints_before, out.view);
  }
  if (job.reloaded || job.refreshed) {
    out.stored = std::make_shared<const ContextSnapshot>(std::move(job.snapshot));
  }
  out.plan = std::move(job.plan);
  out.not_done = job.steps.failures();
  return out;
}

void CompactionRunner::KeepPins(CompactionJob& job) {
  CompactionCommit& commit = job.commit;
  const int64_t passed = std::max(commit.chunk.has_value() ? commit.chunk->through_sequence : 0,
                                  commit.new_prune_boundary);
  commit.pins.clear();
  for (int64_t s : job.kept.sequences) {
    if (s <= passed) commit.pins.push_back(s);
  }
  std::sort(commit.pins.begin(), commit.pins.end());
  if (job.kept.over_budget > 0 && commit.chunk.has_value()) {
    const std::string why = absl::StrCat(
        job.kept.over_budget, " items the keep rules match (", job.kept.over_budget_tokens,
        " tokens) are past the rules' budget of ", job.kept.budget,
        " tokens (compaction_policy.keep_budget_fraction): the oldest were summarized");
    commit.events.push_back(AuditRow("keep_over_budget", Tier::kSummarize, 0, 0,
                                     DetailOf({{"items", job.kept.over_budget},
                                               {"tokens", job.kept.over_budget_tokens},
                                               {"budget", job.kept.budget}})));
    job.steps.Note(Tier::kSummarize, why);
  }
  if (job.kept.unmatched > 0 && commit.chunk.has_value()) {
    job.steps.Note(Tier::kSummarize,
                   absl::StrCat(job.kept.unmatched, " older items were not matched against the "
                                "keep rules: past ", kMaxKeepRuleBytes,
                                " bytes of content a compaction matches"));
  }
}

CompactionOutcome CompactionRunner::Proposed(CompactionJob& job, CompactionOutcome out) {
  KeepPins(job);
  const Conversation& c = job.snapshot.conversation;
  out.version = c.version;
  out.compaction_version = c.compaction_version;
  out.prune_boundary = c.prune_boundary;
  out.not_done = job.steps.failures();
  if (job.commit.chunk.has_value()) {
    out.proposal_tokens =
        ViewWithChunk(job, job.snapshot, *job.commit.chunk, job.commit.new_prune_boundary).tokens;
    out.proposal = std::move(job.commit);
    out.span_facts = std::move(job.span_facts);
    out.summary_text_budget = job.summary_text_budget;
  }
  out.view = std::move(job.plan.view_before);
  out.plan = std::move(job.plan);
  return out;
}

TokenBreakdown Reword(const ContextSnapshot& snapshot, const ResolvedProfile& resolved,
                      std::string text, int64_t prune_boundary,
                      const std::vector<LedgerFact>& span_facts, SummaryChunk& chunk,
                      std::vector<CompactionEvent>& events) {
  const ModelProfile& profile = resolved.profile;
  const Tokenizer& tokenizer = *resolved.tokenizer;
  StepRecorder steps(nullptr, nullptr);
  const CallContext ctx;
  const std::vector<ItemData> pending;
  const std::string instructions;
  CompactionJob job{ctx, profile, tokenizer, pending, CompactionMode::kSummarize, instructions,
                    steps};
  chunk.text = std::move(text);
  chunk.token_count = CountSystemTokens(tokenizer, chunk.text, profile.per_message_tokens);
  chunk.lines.clear();
  chunk.lost.clear();
  GateRecall(snapshot.active_chunks, span_facts, /*complete=*/false, profile, tokenizer, chunk,
             events);
  const ContextView view = ViewWithChunk(job, snapshot, chunk, prune_boundary);
  chunk.lost = LostFacts(span_facts, view);
  return view.tokens;
}

std::string WhyOverHardBand(const CompactionOutcome& out, const ModelProfile& profile,
                            CompactionMode mode) {
  const TokenBreakdown& t = out.view.tokens;
  const Band band = BandOf(t.total, profile);
  if (band < Band::kHard) return "";
  const int64_t hard = Threshold(profile, profile.hard_threshold);
  if (!profile.compaction_enabled) {
    return absl::StrCat("compaction is switched off for this conversation; the view needs ",
                        t.total, " tokens against a hard threshold of ", hard);
  }
  if (mode == CompactionMode::kByBandBehindBackground && band < Band::kEmergency) {
    return absl::StrCat("hard_band_policy SERVE_WHILE_BACKGROUND: served as it stands (", t.total,
                        " tokens, hard threshold ", hard, ") while the background compacts");
  }
  if (!out.not_done.empty()) {
    return absl::StrCat("compaction did not finish: ", absl::StrJoin(out.not_done, "; "), " (",
                        t.total, " tokens against a hard threshold of ", hard, ")");
  }
  return absl::StrCat(
      "compaction cannot bring the view under the hard threshold of ", hard,
      " tokens: what it keeps (the system prompt, pinned content, summaries, the fact ledger, "
      "the recent turns and the pending input; only truncation at the emergency band goes "
      "further) needs ", t.total, " (system ", t.system, ", pinned ", t.pinned, ", summaries ",
      t.summaries, ", ledger ", t.ledger, ", live ", t.live, ", pending ", t.pending,
      ", output reserve ", t.output_reserve, ")");
}

absl::StatusOr<CompactionOutcome> CompactionRunner::Uncompacted(CompactionJob job,
                                                                CompactionMode mode) {
  // Switched off: the view as it is, or a refusal naming the totals.
  if (!ForCall(mode)) {
    return absl::FailedPreconditionError(
        "compaction is switched off for this conversation (profile_overrides."
        "compaction_enabled or its model profile)");
  }
  const TokenBreakdown& t = job.plan.view_before.tokens;
  if (t.total > job.profile.context_window) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the view needs ", t.total, " tokens (system ", t.system, ", pinned ", t.pinned,
        ", live ", t.live, ", pending ", t.pending, ", output reserve ", t.output_reserve,
        ") but the model's window is ", job.profile.context_window,
        ", and compaction is switched off for this conversation"));
  }
  CompactionOutcome out;
  out.tokens_before = t.total;
  out.version = job.snapshot.conversation.version;
  out.compaction_version = job.snapshot.conversation.compaction_version;
  out.prune_boundary = job.snapshot.conversation.prune_boundary;
  out.view = std::move(job.plan.view_before);
  out.plan = std::move(job.plan);
  return out;
}

}  // namespace convstate
