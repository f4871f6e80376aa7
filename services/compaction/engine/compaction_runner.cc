#include "services/compaction/engine/compaction_runner.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/common/log.h"
#include "services/compaction/ledger/ledger.h"
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

Json BreakdownJson(const TokenBreakdown& t) {
  return Json{{"system", t.system},   {"pinned", t.pinned},
              {"summaries", t.summaries}, {"ledger", t.ledger},
              {"live", t.live},       {"tool_results", t.tool_results},
              {"pending", t.pending}, {"total", t.total}};
}

// `e` with the view's tokens by section before and after its step.
CompactionEvent WithBreakdown(CompactionEvent e, const TokenBreakdown& before,
                              const TokenBreakdown& after) {
  Json detail = Json::parse(e.detail);
  detail["before"] = BreakdownJson(before);
  detail["after"] = BreakdownJson(after);
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

// Measures `chunk`'s recall of `span_facts` (its span's facts) against the
// ledger the view will show once it is active beside `others`. Below the
// profile's minimum, and if `complete`, the chunk is completed with the
// missing facts within its cap; a chunk that still falls short is committed
// with a "low_recall" audit row, never silently. Returns the recall, also
// stored with the chunk.
double GateRecall(const std::vector<SummaryChunk>& others, const std::vector<LedgerFact>& span_facts,
                  bool complete, const ModelProfile& profile, const Tokenizer& tokenizer,
                  SummaryChunk& chunk, std::vector<CompactionEvent>& events) {
  std::vector<const SummaryChunk*> rest;
  for (const SummaryChunk& c : others) rest.push_back(&c);
  const int64_t budget = FractionOfWindow(profile, profile.ledger.budget_fraction);
  std::vector<LedgerFact> missing;
  double recall = MeasureRecall(span_facts, chunk, rest, budget, &missing);
  if (complete && recall < profile.ledger.min_recall && !missing.empty()) {
    const int64_t cap = profile.summarizer.max_chunk_tokens;
    std::string text = chunk.text + "\nFacts:";
    int64_t tokens = CountSystemTokens(tokenizer, text, profile.per_message_tokens);
    int added = 0;
    for (const LedgerFact& f : missing) {
      const std::string line = absl::StrCat("\n", FactLine(f));
      const int64_t cost = tokenizer.CountTokens(line);
      if (tokens + cost > cap) continue;
      text += line;
      tokens += cost;
      ++added;
    }
    if (added > 0) {
      chunk.text = std::move(text);
      chunk.token_count = CountSystemTokens(tokenizer, chunk.text, profile.per_message_tokens);
      const double before = recall;
      recall = MeasureRecall(span_facts, chunk, rest, budget, nullptr);
      events.push_back(Event("recall_completed", "", 0, 0,
                             {{"recall_before", before}, {"recall", recall}, {"facts_added", added}}));
    }
  }
  if (recall < profile.ledger.min_recall) {
    events.push_back(Event("low_recall", "", 0, 0,
                           {{"recall", recall}, {"min_recall", profile.ledger.min_recall},
                            {"facts", chunk.facts.size()}}));
  }
  chunk.recall = recall;
  return recall;
}

// The attributed lines of chunks being folded, in order. A chunk without
// lines (written by an LLM, or before lines were kept) contributes the
// lines of its text, its header left out.
std::vector<SummaryLine> MergeLines(const std::vector<SummaryChunk>& chunks) {
  std::vector<SummaryLine> out;
  for (const SummaryChunk& c : chunks) {
    if (!c.lines.empty()) {
      out.insert(out.end(), c.lines.begin(), c.lines.end());
      continue;
    }
    for (absl::string_view line : absl::StrSplit(c.text, '\n', absl::SkipWhitespace())) {
      if (absl::StartsWith(line, "Summary of ") || absl::StartsWith(line, "Facts:")) continue;
      out.push_back(SummaryLine{c.from_sequence, "Summary", std::string(line), 1});
    }
  }
  return out;
}

bool NeedsCommit(const CompactionPlan& plan) {
  return plan.pruned_results > 0 || plan.summarize || !plan.fold.empty();
}

}  // namespace

std::string WaitKey(const ConversationKey& key) {
  return absl::StrCat(key.tenant_id, "/", key.conversation_id);
}

absl::StatusOr<std::optional<CompactionLease>> CompactionRunner::AcquireLease(
    const CallContext& ctx, const ConversationKey& key, bool background) {
  ASSIGN_OR_RETURN(std::optional<CompactionLease> lease,
                   storage_->TryAcquireCompactionLease(ctx, key, options_.holder, options_.lease));
  if (lease.has_value() || background) return lease;
  // One waiter per conversation in this process; the rest do not wait.
  const std::string id = WaitKey(key);
  {
    absl::MutexLock lock(&wait_mu_);
    if (!waiting_.insert(id).second) return std::optional<CompactionLease>();
  }
  struct Leave {
    CompactionRunner* runner;
    const std::string& id;
    ~Leave() {
      absl::MutexLock lock(&runner->wait_mu_);
      runner->waiting_.erase(id);
    }
  } leave{this, id};
  while (true) {
    if (IsCancelled(ctx)) return absl::CancelledError("the caller cancelled while waiting");
    if (options_.clock->Now() + options_.poll >= ctx.deadline) {
      return absl::DeadlineExceededError(
          "another compaction of this conversation was still running at the deadline");
    }
    {
      absl::MutexLock lock(&wait_mu_);
      options_.clock->WaitWithTimeout(released_, wait_mu_, options_.poll);
    }
    ASSIGN_OR_RETURN(lease, storage_->TryAcquireCompactionLease(ctx, key, options_.holder,
                                                                options_.lease));
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
    const std::function<void(const absl::Status&)>& count_call,
    std::vector<CompactionEvent>& events) {
  // What one request may carry of the transcript: the summarizer's window
  // less the summary and the prompt's own instructions.
  constexpr int64_t kPromptOverhead = 512;
  const int64_t limit = profile.summarizer.input_limit;
  const int64_t budget = limit - req.max_tokens - kPromptOverhead;
  if (limit <= 0 || req.items.size() < 2 || tokenizer.CountTokens(req.transcript) <= budget) {
    absl::StatusOr<SummaryResult> r = summarizer_->Summarize(req);
    count_call(r.status());
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
  events.push_back(Event("summarized_in_pieces", "summarize", 0, 0,
                         {{"pieces", pieces.size()},
                          {"input_limit", limit},
                          {"model", req.model}}));
  SummaryResult combined;
  std::vector<std::string> texts;
  for (const std::vector<Item>& piece : pieces) {
    SummaryRequest part = req;
    part.items = piece;
    part.transcript = RenderTranscript(piece, req.tool_names);
    part.max_tokens = std::max<int64_t>(16, req.max_tokens / static_cast<int64_t>(pieces.size()));
    absl::StatusOr<SummaryResult> r = summarizer_->Summarize(part);
    count_call(r.status());
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
  absl::MutexLock lock(&wait_mu_);
  if (waiting_.contains(WaitKey(key))) released_.SignalAll();
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
  auto view_of = [&](const ContextSnapshot& s, const Truncation& t) {
    ViewOptions options;
    options.tokenizer = &tokenizer;
    options.truncate_before = t.before_sequence;
    options.truncate_chunks = t.chunks;
    options.ledger_budget = t.ledger_budget;
    return AssembleView(s, profile, tokenizer.approximate(), pending, options);
  };
  // The view's total once `chunk` replaces the items it covers.
  auto view_with = [&](const ContextSnapshot& s, const SummaryChunk& chunk,
                       int64_t prune_boundary) {
    ContextSnapshot next;
    next.conversation = s.conversation;
    next.conversation.prune_boundary = prune_boundary;
    next.active_chunks = s.active_chunks;
    next.active_chunks.push_back(chunk);
    next.pinned_items = s.pinned_items;
    for (const Item& item : s.live_items) {
      if (item.sequence > chunk.through_sequence) {
        next.live_items.push_back(item);
      } else if (item.data.pinned) {
        next.pinned_items.push_back(item);
      }
    }
    return view_of(next, {});
  };
  auto view_of_with = [&](const ContextSnapshot& s, const SummaryChunk& chunk,
                          int64_t prune_boundary) {
    return view_with(s, chunk, prune_boundary).tokens.total;
  };
  // The view with tool results up to `boundary` pruned.
  auto view_pruned_to = [&](const ContextSnapshot& s, int64_t boundary) {
    ViewOptions options;
    options.tokenizer = &tokenizer;
    options.prune_boundary = boundary;
    return AssembleView(s, profile, tokenizer.approximate(), pending, options);
  };
  // Reasoning blocks a summary took in or dropped, and where it ended.
  struct ReasoningCounts {
    int summarized = 0;
    int dropped = 0;
  } reasoning_step;
  int64_t plan_through = 0;
  // The compaction's span (a child of the call's, when there is work) and
  // one span event and a set of metric points per step.
  telemetry::Telemetry* const t = options_.telemetry;
  telemetry::Span span;
  std::optional<telemetry::ScopedSpan> scope;
  absl::flat_hash_map<std::string, absl::Time> step_started;
  auto report = [&](CompactionProgress::Kind kind, const std::string& tier, int64_t before,
                    int64_t after, const std::string& reason, double recall = 0,
                    const TokenBreakdown* before_tokens = nullptr,
                    const TokenBreakdown* after_tokens = nullptr) {
    if (progress) {
      CompactionProgress p{kind, tier, before, after, reason, recall};
      if (before_tokens != nullptr) p.before_tokens = *before_tokens;
      if (after_tokens != nullptr) p.after_tokens = *after_tokens;
      if (kind == CompactionProgress::Kind::kCompleted && tier == "summarize") {
        p.reasoning_summarized = reasoning_step.summarized;
        p.reasoning_dropped = reasoning_step.dropped;
        for (const Item& item : snapshot.live_items) {
          if (item.data.kind == ItemKind::kReasoning && item.sequence > plan_through) ++p.reasoning_kept;
        }
      }
      progress(p);
    }
    const absl::Time now = absl::Now();
    if (kind == CompactionProgress::Kind::kStarted) {
      step_started[tier] = now;
      return;
    }
    const std::string outcome =
        kind == CompactionProgress::Kind::kCompleted ? "completed" : "failed";
    std::vector<telemetry::Attribute> attributes = {
        {"convstate.compaction.tier", tier},
        {"convstate.compaction.outcome", outcome},
        {"convstate.compaction.tokens_before", before},
        {"convstate.compaction.tokens_after", after}};
    if (recall > 0) attributes.push_back({"convstate.compaction.recall", recall});
    if (!reason.empty()) attributes.push_back({"convstate.compaction.reason", reason});
    span.AddEvent(absl::StrCat("compaction.", tier), std::move(attributes));
    if (t == nullptr) return;
    const telemetry::Instruments& m = t->instruments();
    m.compactions->Add(1, {{"convstate.compaction.tier", tier},
                           {"convstate.compaction.outcome", outcome}});
    if (auto it = step_started.find(tier); it != step_started.end()) {
      m.compaction_duration->Record(absl::ToDoubleSeconds(now - it->second),
                                    {{"convstate.compaction.tier", tier}});
    }
    if (outcome == "completed" && tier != "truncate" && after > 0 && before > after) {
      m.compression_ratio->Record(static_cast<double>(before) / static_cast<double>(after),
                                  {{"convstate.compaction.tier", tier}});
    }
    if (outcome == "completed" && recall > 0) {
      m.fact_recall->Record(recall, {{"convstate.compaction.tier", tier}});
    }
  };
  auto count_call = [t](const absl::Status& status) {
    if (t != nullptr) {
      t->instruments().summarizer_calls->Add(1, {{"outcome", status.ok() ? "ok" : "error"}});
    }
  };
  const ConversationKey key = snapshot.conversation.key;

  CompactionOutcome out;
  out.plan = PlanCompaction(input_for(snapshot), mode);
  if (!profile.compaction_enabled) {
    // Switched off: the view as it is, or a refusal naming the totals.
    if (mode != CompactionMode::kByBand) {
      return absl::FailedPreconditionError(
          "compaction is switched off for this conversation (profile_overrides."
          "compaction_enabled or its model profile)");
    }
    const TokenBreakdown& t = out.plan.view_before.tokens;
    if (t.total > profile.context_window) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the view needs ", t.total, " tokens (system ", t.system, ", pinned ", t.pinned,
          ", live ", t.live, ", pending ", t.pending, ", output reserve ", t.output_reserve,
          ") but the model's window is ", profile.context_window,
          ", and compaction is switched off for this conversation"));
    }
    out.tokens_before = t.total;
    out.version = snapshot.conversation.version;
    out.compaction_version = snapshot.conversation.compaction_version;
    out.prune_boundary = snapshot.conversation.prune_boundary;
    out.view = std::move(out.plan.view_before);
    return out;
  }
  if (!out.plan.empty()) {
    span = telemetry::StartSpan("compaction");
    span.SetAttribute("gen_ai.conversation.id", key.conversation_id);
    span.SetAttribute("convstate.tenant.id", key.tenant_id);
    span.SetAttribute("convstate.context.band", BandName(out.plan.band));
    span.SetAttribute("convstate.compaction.background", background);
    span.SetAttribute("convstate.compaction.tokens_before", out.plan.tokens_before);
    scope.emplace(&span);
  }
  // One compaction per conversation at a time, across replicas. (A plan
  // that cannot fit has no steps, so it takes no lease; see below.)
  std::optional<CompactionLease> lease;
  int64_t lock_wait_ms = 0;
  // Summarizer calls end before the lease would: work done after it expired
  // could not be committed.
  absl::Time lease_until = absl::InfiniteFuture();
  if (NeedsCommit(out.plan)) {
    const absl::Time asked = options_.clock->Now();
    ASSIGN_OR_RETURN(lease, AcquireLease(ctx, key, background));
    lock_wait_ms = absl::ToInt64Milliseconds(options_.clock->Now() - asked);
    if (t != nullptr && !background) {
      t->instruments().lease_wait->Record(absl::ToDoubleSeconds(options_.clock->Now() - asked));
    }
    span.SetAttribute("convstate.compaction.lease_wait_ms", lock_wait_ms);
    if (lease.has_value()) {
      lease_until = options_.clock->Now() + options_.lease - LeaseMargin(options_.lease);
    }
    if (!lease.has_value() && background) {  // Someone else is at it.
      out.tokens_before = out.plan.tokens_before;
      out.version = snapshot.conversation.version;
      out.compaction_version = snapshot.conversation.compaction_version;
      out.view = std::move(out.plan.view_before);
      return out;
    }
    if (lease.has_value()) {
      // Whoever held it may have compacted meanwhile: plan again from now.
      ASSIGN_OR_RETURN(snapshot, storage_->LoadContext(ctx, key));
      out.plan = PlanCompaction(input_for(snapshot), mode);
    } else {
      // Another compaction runs and a request of this process already waits
      // for it: this one takes the view as it stands (truncated below if it
      // does not fit) instead of holding a worker.
      out.plan.pruned_results = 0;
      out.plan.prune_boundary = snapshot.conversation.prune_boundary;
      out.plan.summarize = false;
      out.plan.fold.clear();
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
  } release{this, key, lease};
  out.tokens_before = out.plan.tokens_before;
  out.version = snapshot.conversation.version;
  if (out.plan.cannot_fit.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the context cannot fit the model's window: ", *out.plan.cannot_fit));
  }
  const CompactionPlan& plan = out.plan;
  // The cache breakpoints as they were, to tell which one the steps below
  // invalidate.
  const std::vector<CacheBreakpoint> breakpoints_before =
      plan.empty() ? std::vector<CacheBreakpoint>()
                   : DigestView(plan.view_before, snapshot.conversation.prune_boundary).breakpoints;
  // The view's tokens by section as of the last step.
  TokenBreakdown step_tokens = plan.view_before.tokens;
  std::vector<CompactionEvent> events;
  if (!plan.empty() && mode == CompactionMode::kByBand) {
    events.push_back(Event("threshold_hit", "", plan.tokens_before, plan.tokens_before,
                           {{"band", BandName(plan.band)}, {"lock_wait_ms", lock_wait_ms}}));
  }

  // Tiers 1 and 2, committed together.
  bool failed = false;  // A step failed: the view may be truncated instead.
  std::string failure;
  CompactionCommit commit;
  commit.key = key;
  commit.lease = lease;
  commit.expected_summarized_through = snapshot.conversation.summarized_through;
  commit.expected_prune_boundary = snapshot.conversation.prune_boundary;
  commit.new_prune_boundary = plan.prune_boundary;
  if (plan.pruned_results > 0) {
    report(CompactionProgress::Kind::kStarted, "prune", plan.tokens_before, 0, "");
    const TokenBreakdown pruned = view_pruned_to(snapshot, plan.prune_boundary).tokens;
    events.push_back(WithBreakdown(
        Event("pruned", "prune", plan.tokens_before, plan.tokens_before - plan.prune_savings,
              {{"results", plan.pruned_results}, {"boundary", plan.prune_boundary}}),
        plan.view_before.tokens, pruned));
    report(CompactionProgress::Kind::kCompleted, "prune", plan.tokens_before,
           plan.tokens_before - plan.prune_savings, "", 0, &plan.view_before.tokens, &pruned);
    step_tokens = pruned;
  }
  double summary_recall = 1.0;
  int reasoning_summarized = 0;
  int reasoning_dropped = 0;
  plan_through = plan.summarize_through;
  if (plan.summarize) {
    const TokenBreakdown summarize_before = step_tokens;
    const int64_t before = plan.tokens_before - plan.prune_savings;
    report(CompactionProgress::Kind::kStarted, "summarize", before, 0, "");
    events.push_back(Event("started", "summarize", before, before,
                           {{"from", commit.expected_summarized_through + 1},
                            {"through", plan.summarize_through}}));
    std::vector<Item> zone;
    for (const Item& item : snapshot.live_items) {
      if (item.sequence <= plan.summarize_through && !item.data.pinned &&
          item.data.kind != ItemKind::kSummaryMarker) {
        // Reasoning goes into the summary as the assistant's attributed
        // text, or nowhere, as the profile says; never back as reasoning.
        if (item.data.kind == ItemKind::kReasoning) {
          if (profile.reasoning == ModelProfile::ReasoningPolicy::kDrop) {
            ++reasoning_dropped;
            continue;
          }
          ++reasoning_summarized;
        }
        zone.push_back(item);
      }
    }
    // What the view will keep verbatim whatever the summary says.
    const std::map<std::string, std::string> tool_names = ToolNamesByCallId(snapshot.live_items);
    Extraction ledger = ExtractLedger(zone, tool_names, tokenizer);
    SummaryRequest req;
    req.transcript = RenderTranscript(zone, tool_names);
    req.items = std::move(zone);
    req.tool_names = tool_names;
    for (const LedgerFact& f : ledger.facts) req.preserved.push_back(f.text);
    for (const LedgerFact& f : ledger.constraints) req.preserved.push_back(f.text);
    // A summary must be clearly smaller than what it replaces, and within
    // the chunk cap once the chat format's overhead is added.
    req.max_tokens = TextBudget(profile, plan.summarize_tokens / 5);
    req.instructions = instructions;
    req.tokenizer = &tokenizer;
    req.deadline = std::min(ctx.deadline, lease_until);
    req.cancelled = ctx.cancelled;
    req.model = profile.summarizer.model;
    req.api = profile.summarizer.api;
    req.max_completion_tokens = profile.summarizer.max_completion_tokens;
    absl::StatusOr<SummaryResult> summary =
        IsCancelled(ctx) ? absl::CancelledError("the caller cancelled")
                         : SummarizeInPieces(req, profile, tokenizer, count_call, events);
    if (!summary.ok()) {
      failed = true;
      failure = "summarizer unavailable";
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
        chunk.lines = std::move(summary->lines);
        chunk.facts = ledger.facts;
        chunk.constraints = std::move(ledger.constraints);
        const size_t gated_at = events.size();
        summary_recall = GateRecall(snapshot.active_chunks, ledger.facts, /*complete=*/true,
                                    profile, tokenizer, chunk, events);
        int64_t after = view_of_with(snapshot, chunk, plan.prune_boundary);
        // Facts stay verbatim, so a span made of little but facts does not
        // shrink: its oldest facts give way until the view does, and the
        // recall stored with the chunk says what that cost.
        if (after >= before && !chunk.facts.empty()) {
          int64_t excess = after - before + 1;
          size_t drop = 0;
          while (drop < chunk.facts.size() && excess > 0) excess -= chunk.facts[drop++].token_count;
          chunk.facts.erase(chunk.facts.begin(), chunk.facts.begin() + static_cast<long>(drop));
          // The recall gated above no longer holds: one low_recall row, for
          // the recall the chunk is committed with.
          events.erase(std::remove_if(events.begin() + static_cast<long>(gated_at), events.end(),
                                      [](const CompactionEvent& e) { return e.event == "low_recall"; }),
                       events.end());
          events.push_back(Event("facts_dropped", "summarize", before, after,
                                 {{"facts", drop}, {"reason", "the view would not shrink"}}));
          summary_recall = GateRecall(snapshot.active_chunks, ledger.facts, /*complete=*/false,
                                      profile, tokenizer, chunk, events);
          after = view_of_with(snapshot, chunk, plan.prune_boundary);
        }
        if (after >= before) {
          events.push_back(Event("no_progress", "summarize", before, after,
                                 {{"model", chunk.summarizer_model}}));
          report(CompactionProgress::Kind::kFailed, "summarize", before, before,
                 "the summary and its facts were no smaller than what they replace");
        } else {
          const TokenBreakdown summarized =
              view_with(snapshot, chunk, plan.prune_boundary).tokens;
          Json detail = {{"model", chunk.summarizer_model},
                         {"summarized_tokens", plan.summarize_tokens},
                         {"summary_tokens", chunk.token_count},
                         {"facts", chunk.facts.size()},
                         {"constraints", chunk.constraints.size()},
                         {"recall", summary_recall},
                         {"latency_ms", chunk.latency_ms}};
          if (!summary->fallback_reason.empty()) {
            detail["fallback_reason"] = summary->fallback_reason;
          }
          events.push_back(WithBreakdown(Event("completed", "summarize", before, after, detail),
                                         summarize_before, summarized));
          if (reasoning_summarized + reasoning_dropped > 0) {
            events.push_back(Event(
                "reasoning_downgraded", "summarize", before, after,
                {{"summarized", reasoning_summarized},
                 {"dropped", reasoning_dropped},
                 {"policy", profile.reasoning == ModelProfile::ReasoningPolicy::kDrop
                                ? "drop"
                                : "summarize"},
                 {"through", plan.summarize_through}}));
          }
          commit.chunk = std::move(chunk);
          reasoning_step = ReasoningCounts{reasoning_summarized, reasoning_dropped};
          report(CompactionProgress::Kind::kCompleted, "summarize", before, after, "",
                 summary_recall, &summarize_before, &summarized);
        }
      }
    }
  }
  commit.events = std::move(events);
  events.clear();

  // Any failure to store a compaction falls back to the view as it is
  // (truncated if it must be), with an audit row saying why: the caller
  // gets a context, never the compaction's error. True if the commit was
  // stored (or lost a race to an equivalent one).
  bool reloaded = false;
  auto apply = [&](const CompactionCommit& c, const std::string& tier) -> bool {
    absl::StatusOr<CompactionResult> result = storage_->CommitCompaction(ctx, c);
    if (absl::IsAborted(result.status())) {
      // A concurrent compaction won; its result is as good as ours.
      LogInfo("compaction of ", key.conversation_id, " discarded: ", result.status().message());
    } else if (!result.ok()) {
      LogWarning("could not store the ", tier, " of ", key.conversation_id, ": ",
                 result.status().ToString());
      failed = true;
      failure = absl::StrCat(tier, " could not be stored");
      events.push_back(Event("failed", tier, 0, 0,
                             {{"reason", absl::StrCat("commit: ", result.status().message())},
                              {"code", absl::StatusCodeToString(result.status().code())}}));
      report(CompactionProgress::Kind::kFailed, tier, 0, 0, "the compaction could not be stored");
      return false;
    } else {
      out.version = result->version;
      out.compaction_version = result->compaction_version;
      if (result->chunk_id != 0) out.chunk_id = result->chunk_id;
    }
    absl::StatusOr<ContextSnapshot> fresh = storage_->LoadContext(ctx, key);
    if (!fresh.ok()) {
      // Stored all the same: the view is built from the state before it.
      LogWarning("could not reload ", key.conversation_id, " after compacting: ",
                 fresh.status().ToString());
      return true;
    }
    snapshot = std::move(*fresh);
    reloaded = true;
    return true;
  };
  const bool changes = commit.chunk.has_value() ||
                       commit.new_prune_boundary != commit.expected_prune_boundary;
  bool stored = false;
  if (changes) {
    stored = apply(commit, plan.summarize ? "summarize" : "prune");
    if (!stored) {
      // Its audit rows were not stored with it: keep them with the failure.
      events.insert(events.begin(), commit.events.begin(), commit.events.end());
    }
  } else {
    events = std::move(commit.events);
  }

  // Tier 3: fold chunks that outgrew their budget, merging their
  // structured content: lines, facts and standing instructions.
  const bool fold_wanted = changes || mode == CompactionMode::kAuto ||
                           mode == CompactionMode::kSummarize;
  if (!failed && fold_wanted && lease.has_value()) {
    const CompactionPlan again = PlanCompaction(input_for(snapshot), CompactionMode::kSummarize);
    if (!again.fold.empty()) {
      std::vector<SummaryChunk> folding;
      std::vector<SummaryChunk> staying;
      for (const SummaryChunk& chunk : snapshot.active_chunks) {
        const bool fold = std::find(again.fold.begin(), again.fold.end(), chunk.chunk_id) !=
                          again.fold.end();
        (fold ? folding : staying).push_back(chunk);
      }
      std::sort(folding.begin(), folding.end(), [](const SummaryChunk& a, const SummaryChunk& b) {
        return a.from_sequence < b.from_sequence;
      });
      int64_t folded_tokens = 0;
      for (const SummaryChunk& chunk : folding) folded_tokens += chunk.token_count;
      const TokenBreakdown fold_before = view_of(snapshot, {}).tokens;
      const int64_t before = fold_before.total;
      report(CompactionProgress::Kind::kStarted, "fold", before, 0, "");
      SummaryRequest req;
      req.transcript = RenderChunks(folding);
      req.merge = MergeLines(folding);
      // Facts and instructions, each once, in order. The fold keeps the
      // facts the ledger would rank highest, up to twice its budget, so
      // that what every view ranks stays bounded however long the
      // conversation grows (ExpandSummary still has every item).
      SummaryChunk merged_content;
      std::vector<const SummaryChunk*> folded;
      for (const SummaryChunk& chunk : folding) folded.push_back(&chunk);
      for (const LedgerFact* f :
           SelectLedger(folded, 2 * FractionOfWindow(profile, profile.ledger.budget_fraction)).shown) {
        merged_content.facts.push_back(*f);
      }
      merged_content.constraints = CollectConstraints(folded);
      for (const LedgerFact& f : merged_content.facts) req.preserved.push_back(f.text);
      req.max_tokens = TextBudget(profile, folded_tokens / 2);
      req.instructions = instructions;
      req.tokenizer = &tokenizer;
      req.deadline = std::min(ctx.deadline, lease_until);
      req.cancelled = ctx.cancelled;
      req.model = profile.summarizer.model;
      req.api = profile.summarizer.api;
      req.max_completion_tokens = profile.summarizer.max_completion_tokens;
    req.api = profile.summarizer.api;
    req.max_completion_tokens = profile.summarizer.max_completion_tokens;
      absl::StatusOr<SummaryResult> merged =
          IsCancelled(ctx) ? absl::CancelledError("the caller cancelled") : summarizer_->Summarize(req);
      if (!IsCancelled(ctx)) count_call(merged.status());
      if (!merged.ok()) {
        failed = true;
        failure = "summarizer unavailable";
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
          fold.lease = lease;
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
          SummaryChunk chunk = ChunkOf(from, through, std::move(text), tokens, *merged);
          chunk.lines = std::move(merged->lines);
          chunk.facts = std::move(merged_content.facts);
          chunk.constraints = std::move(merged_content.constraints);
          // Recall against every fact of the folded chunks, kept or not.
          std::vector<LedgerFact> span_facts;
          absl::flat_hash_set<uint64_t> seen;
          for (const SummaryChunk* c : folded) {
            for (const LedgerFact& f : c->facts) {
              if (seen.insert(FactHash(f.text)).second) span_facts.push_back(f);
            }
          }
          const double recall = GateRecall(staying, span_facts, /*complete=*/true, profile,
                                           tokenizer, chunk, fold.events);
          const int64_t after = before - folded_tokens + chunk.token_count;
          ContextSnapshot folded_state;
          folded_state.conversation = snapshot.conversation;
          folded_state.pinned_items = snapshot.pinned_items;
          folded_state.live_items = snapshot.live_items;
          folded_state.active_chunks = staying;
          folded_state.active_chunks.push_back(chunk);
          std::sort(folded_state.active_chunks.begin(), folded_state.active_chunks.end(),
                    [](const SummaryChunk& a, const SummaryChunk& b) {
                      return a.from_sequence < b.from_sequence;
                    });
          const TokenBreakdown fold_after = view_of(folded_state, {}).tokens;
          fold.events.push_back(WithBreakdown(
              Event("folded", "fold", before, after,
                    {{"chunks", fold.supersedes.size()},
                     {"folded_tokens", folded_tokens},
                     {"summary_tokens", chunk.token_count},
                     {"recall", recall}}),
              fold_before, fold_after));
          fold.chunk = std::move(chunk);
          if (apply(fold, "fold")) {
            report(CompactionProgress::Kind::kCompleted, "fold", before, after, "", recall,
                   &fold_before, &fold_after);
          } else {
            events.insert(events.end(), fold.events.begin(), fold.events.end());
          }
        }
      }
    }
  }

  // Tier 4: truncate the view (never storage) when nothing else was enough.
  // Unless something was committed, the planner's view is still current.
  out.view = reloaded ? view_of(snapshot, {}) : std::move(out.plan.view_before);
  const Band band = BandOf(out.view.tokens.total, profile);
  // Prune-only and summarize do what they say; the other modes end with a
  // view that fits, truncating as the last resort.
  const bool may_truncate = mode == CompactionMode::kByBand || mode == CompactionMode::kAuto ||
                            mode == CompactionMode::kTruncate;
  const bool truncate =
      may_truncate && (mode == CompactionMode::kTruncate || band == Band::kEmergency ||
                       (failed && band >= Band::kHard) ||
                       out.view.tokens.total > profile.context_window);
  if (truncate) {
    const TokenBreakdown truncate_before = out.view.tokens;
    const int64_t before = out.view.tokens.total;
    const Truncation t = PlanTruncation(input_for(snapshot), snapshot.conversation.prune_boundary,
                                        Threshold(profile, profile.hard_threshold));
    if (t.any()) {
      report(CompactionProgress::Kind::kStarted, "truncate", before, 0, "");
      out.view = view_of(snapshot, t);
      const std::string reason = mode == CompactionMode::kTruncate ? "requested"
                                 : failed                        ? failure
                                                                 : "still over the emergency threshold";
      events.push_back(WithBreakdown(
          Event("truncated", "truncate", before, out.view.tokens.total,
                {{"before_sequence", t.before_sequence},
                 {"summaries", t.chunks},
                 {"ledger_dropped", t.ledger_budget.has_value()},
                 {"reason", reason}}),
          truncate_before, out.view.tokens));
      report(CompactionProgress::Kind::kCompleted, "truncate", before, out.view.tokens.total, reason,
             0, &truncate_before, &out.view.tokens);
    }
  }
  if (!events.empty()) {
    // Audit rows of steps that changed nothing stored; losing them must not
    // fail the call. They are written even if the caller's deadline passed.
    const CallContext own{options_.clock->Now() + kReleaseTimeout};
    if (absl::Status s = storage_->RecordCompactionEvents(own, key, events); !s.ok()) {
      LogWarning("could not record compaction events for ", key.conversation_id, ": ", s.ToString());
    }
  }
  out.version = snapshot.conversation.version;
  out.compaction_version = snapshot.conversation.compaction_version;
  out.prune_boundary = snapshot.conversation.prune_boundary;
  if (!breakpoints_before.empty() && (reloaded || truncate)) {
    out.invalidated_breakpoint = FirstInvalidated(breakpoints_before, out.view);
  }
  return out;
}

}  // namespace convstate
