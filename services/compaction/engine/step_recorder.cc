#include "services/compaction/engine/step_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace convstate {

CompactionEvent AuditRow(const std::string& event, std::optional<Tier> tier, int64_t before,
                         int64_t after, std::string detail) {
  CompactionEvent e;
  e.event = event;
  if (tier.has_value()) e.tier = std::string(TierName(*tier));
  e.tokens_before = before;
  e.tokens_after = after;
  e.detail = std::move(detail);
  return e;
}

CompactionProgress CompletedStep(Tier tier, int64_t before, int64_t after,
                                 const TokenBreakdown& before_tokens,
                                 const TokenBreakdown& after_tokens) {
  CompactionProgress p;
  p.tier = tier;
  p.tokens_before = before;
  p.tokens_after = after;
  p.before_tokens = before_tokens;
  p.after_tokens = after_tokens;
  return p;
}

void StepRecorder::OpenSpan(const ConversationKey& key, const char* band, bool background,
                            int64_t tokens_before) {
  span_ = telemetry::StartSpan("compaction");
  span_.SetAttribute("gen_ai.conversation.id", key.conversation_id);
  span_.SetAttribute("convstate.tenant.id", key.tenant_id);
  span_.SetAttribute("convstate.context.band", band);
  span_.SetAttribute("convstate.compaction.background", background);
  span_.SetAttribute("convstate.compaction.tokens_before", tokens_before);
  scope_.emplace(&span_);
}

void StepRecorder::Started(Tier tier, int64_t before) {
  CompactionProgress p;
  p.kind = CompactionProgress::Kind::kStarted;
  p.tier = tier;
  p.tokens_before = before;
  Report(std::move(p));
}

void StepRecorder::Completed(CompactionProgress p) {
  p.kind = CompactionProgress::Kind::kCompleted;
  Report(std::move(p));
}

void StepRecorder::Failed(Tier tier, int64_t before, const std::string& reason) {
  CompactionProgress p;
  p.kind = CompactionProgress::Kind::kFailed;
  p.tier = tier;
  p.tokens_before = before;
  p.tokens_after = before;
  p.reason = reason;
  failures_.push_back(absl::StrCat(TierName(tier), ": ", reason));
  Report(std::move(p));
}

void StepRecorder::Note(Tier tier, const std::string& what) {
  failures_.push_back(absl::StrCat(TierName(tier), ": ", what));
}

void StepRecorder::Report(CompactionProgress p) {
  if (progress_) progress_(p);
  const absl::Time now = absl::Now();
  const int key = static_cast<int>(p.tier);
  if (p.kind == CompactionProgress::Kind::kStarted) {
    started_[key] = now;
    return;
  }
  const std::string tier(TierName(p.tier));
  const std::string outcome =
      p.kind == CompactionProgress::Kind::kCompleted ? "completed" : "failed";
  std::vector<telemetry::Attribute> attributes = {
      {"convstate.compaction.tier", tier},
      {"convstate.compaction.outcome", outcome},
      {"convstate.compaction.tokens_before", p.tokens_before},
      {"convstate.compaction.tokens_after", p.tokens_after}};
  if (p.recall > 0) attributes.push_back({"convstate.compaction.recall", p.recall});
  if (!p.reason.empty()) attributes.push_back({"convstate.compaction.reason", p.reason});
  span_.AddEvent(absl::StrCat("compaction.", tier), std::move(attributes));
  if (telemetry_ == nullptr) return;
  const telemetry::Instruments& m = telemetry_->instruments();
  m.compactions->Add(1, {{"convstate.compaction.tier", tier},
                         {"convstate.compaction.outcome", outcome}});
  if (auto it = started_.find(key); it != started_.end()) {
    m.compaction_duration->Record(absl::ToDoubleSeconds(now - it->second),
                                  {{"convstate.compaction.tier", tier}});
  }
  const bool completed = p.kind == CompactionProgress::Kind::kCompleted;
  if (completed && p.tier != Tier::kTruncate && p.tokens_after > 0 &&
      p.tokens_before > p.tokens_after) {
    m.compression_ratio->Record(
        static_cast<double>(p.tokens_before) / static_cast<double>(p.tokens_after),
        {{"convstate.compaction.tier", tier}});
  }
  if (completed && p.recall > 0) {
    m.fact_recall->Record(p.recall, {{"convstate.compaction.tier", tier}});
  }
}

void StepRecorder::SummarizerCall(const absl::Status& status) {
  if (telemetry_ == nullptr) return;
  telemetry_->instruments().summarizer_calls->Add(1, {{"outcome", status.ok() ? "ok" : "error"}});
}

void StepRecorder::LeaseWait(absl::Duration waited) {
  if (telemetry_ == nullptr) return;
  telemetry_->instruments().lease_wait->Record(absl::ToDoubleSeconds(waited));
}

}  // namespace convstate
