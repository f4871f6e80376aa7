#include "services/compaction/engine/tier.h"

#include <algorithm>
#include <utility>

namespace convstate {

PlanInput CompactionJob::InputFor(const ContextSnapshot& s) const {
  PlanInput in;
  in.snapshot = &s;
  in.profile = profile;
  in.approximate = tokenizer.approximate();
  in.pending = pending;
  in.tokenizer = &tokenizer;
  in.through_sequence = through_sequence;
  in.headroom = headroom;
  return in;
}

ContextView CompactionJob::ViewOf(const ContextSnapshot& s, const Truncation& t) const {
  ViewOptions options;
  options.tokenizer = &tokenizer;
  options.truncate_before = t.before_sequence;
  options.truncate_chunks = t.chunks;
  options.ledger_budget = t.ledger_budget;
  return AssembleView(s, profile, tokenizer.approximate(), pending, options);
}

ContextView CompactionJob::ViewPrunedTo(const ContextSnapshot& s, int64_t boundary) const {
  ViewOptions options;
  options.tokenizer = &tokenizer;
  options.prune_boundary = boundary;
  return AssembleView(s, profile, tokenizer.approximate(), pending, options);
}

ContextView& CompactionJob::CurrentView() {
  if (!view_current) {
    // Unless something was committed, the planner's view is still current.
    view = reloaded ? ViewOf(snapshot) : std::move(plan.view_before);
    view_current = true;
  }
  return view;
}

void CompactionJob::Adopt(ContextSnapshot s) {
  snapshot = std::move(s);
  kept = ApplyKeepRules(profile, snapshot, std::min(ctx.deadline, lease_until));
}

SummaryRequest CompactionJob::NewSummaryRequest() const {
  SummaryRequest req;
  // The conversation's policy adds to the default prompt; the call's adds
  // to that.
  req.instructions = JoinInstructions(profile.policy.instructions, instructions);
  req.tokenizer = &tokenizer;
  req.deadline = std::min(ctx.deadline, lease_until);
  req.cancelled = ctx.cancelled;
  req.model = profile.summarizer.model;
  req.api = profile.summarizer.api;
  req.max_completion_tokens = profile.summarizer.max_completion_tokens;
  return req;
}

}  // namespace convstate
