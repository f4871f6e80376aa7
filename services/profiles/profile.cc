#include "services/profiles/profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace convstate {

std::string JoinInstructions(const std::string& first, const std::string& then) {
  if (then.empty()) return first;
  if (first.empty()) return then;
  return absl::StrCat(first, "\n", then);
}

ModelProfile ApplyOverrides(ModelProfile p, const ProfileOverrides& o) {
  if (o.context_window && !o.output_reserve && *o.context_window > 0 &&
      p.context_window > 0) {
    const double window = static_cast<double>(*o.context_window);
    const double scaled = std::min(
        static_cast<double>(p.output_reserve),
        static_cast<double>(p.output_reserve) * window / static_cast<double>(p.context_window));
    p.output_reserve = static_cast<int64_t>(std::min(scaled, kMaxScaledReserveFraction * window));
  }
  if (o.context_window) p.context_window = *o.context_window;
  if (o.output_reserve) p.output_reserve = *o.output_reserve;
  if (o.hard_band_policy) p.hard_band_policy = *o.hard_band_policy;
  if (o.soft_threshold) p.soft_threshold = *o.soft_threshold;
  if (o.hard_threshold) p.hard_threshold = *o.hard_threshold;
  if (o.emergency_threshold) p.emergency_threshold = *o.emergency_threshold;
  if (o.token_floor) p.token_floor = *o.token_floor;
  if (o.recent_turns) p.recent_turns = *o.recent_turns;
  if (o.recent_tokens) p.recent_tokens = *o.recent_tokens;
  if (o.compaction_enabled) p.compaction_enabled = *o.compaction_enabled;
  if (o.recall_budget_fraction) p.recall.budget_fraction = *o.recall_budget_fraction;
  if (o.prompt_cache_ttl_s) p.prompt_cache_ttl_s = *o.prompt_cache_ttl_s;
  if (o.policy) {
    // Added to the profile's, never in its place.
    p.policy.instructions = JoinInstructions(p.policy.instructions, o.policy->instructions);
    p.policy.keep.insert(p.policy.keep.end(), o.policy->keep.begin(), o.policy->keep.end());
    if (o.policy->keep_budget_fraction) {
      p.policy.keep_budget_fraction = *o.policy->keep_budget_fraction;
    }
  }
  auto cap = [&p](int64_t& size, double fraction) {
    size = std::min(size, std::max<int64_t>(1, FractionOfWindow(p, fraction)));
  };
  cap(p.recent_tokens, p.recent_fraction);
  cap(p.tool_pruning.trigger_tokens, p.tool_pruning.trigger_fraction);
  cap(p.tool_pruning.min_savings_tokens, p.tool_pruning.min_savings_fraction);
  cap(p.summarizer.max_chunk_tokens, p.summarizer.max_chunk_fraction);
  // A floor above the soft threshold would keep a small window from ever
  // compacting, however full it gets.
  p.token_floor = std::min(p.token_floor, FractionOfWindow(p, p.soft_threshold));
  return p;
}

int64_t FractionOfWindow(const ModelProfile& p, double fraction) {
  return static_cast<int64_t>(fraction * static_cast<double>(p.context_window));
}

absl::Status ValidateProfile(const ModelProfile& p, const std::string& prefix) {
  auto bad = [&](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, field, ": ", why));
  };
  constexpr int64_t kMaxWindow = 100'000'000;
  if (p.context_window <= 0 || p.context_window > kMaxWindow) {
    return bad("context_window", absl::StrCat("must be in 1..", kMaxWindow, ", got ",
                                              p.context_window));
  }
  if (p.output_reserve < 0 || p.output_reserve >= p.context_window) {
    return bad("output_reserve",
               absl::StrCat("must be at least 0 and less than the context window (",
                            p.context_window, "), got ", p.output_reserve));
  }
  for (auto [name, value] : {std::pair{"soft_threshold", p.soft_threshold},
                             std::pair{"hard_threshold", p.hard_threshold},
                             std::pair{"emergency_threshold", p.emergency_threshold}}) {
    if (!(value > 0.0 && value <= 1.0)) {
      return bad(name, absl::StrCat("must be in (0, 1], got ", value));
    }
  }
  if (p.soft_threshold > p.hard_threshold) {
    return bad("soft_threshold", "must not exceed hard_threshold");
  }
  if (p.hard_threshold > p.emergency_threshold) {
    return bad("hard_threshold", "must not exceed emergency_threshold");
  }
  if (p.token_floor < 0) return bad("token_floor", "must not be negative");
  if (p.recent_turns < 0) return bad("recent_turns", "must not be negative");
  if (p.recent_tokens < 0) return bad("recent_tokens", "must not be negative");
  if (p.encoding != "cl100k_base" && p.encoding != "o200k_base" && p.encoding != "approximate") {
    return bad("tokenizer.encoding", absl::StrCat("unknown encoding '", p.encoding,
                                                  "' (cl100k_base, o200k_base or approximate)"));
  }
  if (!(p.bytes_per_token > 0.0 && p.bytes_per_token <= 64.0)) {
    return bad("tokenizer.bytes_per_token", absl::StrCat("must be in (0, 64], got ", p.bytes_per_token));
  }
  if (p.per_message_tokens < 0) return bad("per_message_tokens", "must not be negative");
  if (p.tool_pruning.trigger_tokens < 0 || p.tool_pruning.keep_recent < 0 ||
      p.tool_pruning.min_savings_tokens < 0) {
    return bad("tool_pruning", "sizes must not be negative");
  }
  if (p.summarizer.max_chunk_tokens <= 0) {
    return bad("summarizer.max_chunk_tokens", "must be positive");
  }
  if (!(p.summarizer.chunk_budget_fraction > 0.0 && p.summarizer.chunk_budget_fraction < 1.0)) {
    return bad("summarizer.chunk_budget_fraction", "must be in (0, 1)");
  }
  for (auto [name, value] :
       {std::pair{"recent.max_fraction", p.recent_fraction},
        std::pair{"tool_pruning.trigger_fraction", p.tool_pruning.trigger_fraction},
        std::pair{"tool_pruning.keep_recent_fraction", p.tool_pruning.keep_recent_fraction},
        std::pair{"tool_pruning.min_savings_fraction", p.tool_pruning.min_savings_fraction},
        std::pair{"summarizer.max_chunk_fraction", p.summarizer.max_chunk_fraction},
        std::pair{"ledger.budget_fraction", p.ledger.budget_fraction},
        std::pair{"ledger.constraints_fraction", p.ledger.constraints_fraction}}) {
    if (!(value > 0.0 && value <= 1.0)) return bad(name, absl::StrCat("must be in (0, 1], got ", value));
  }
  if (!(p.policy.keep_budget_fraction > 0.0 && p.policy.keep_budget_fraction < 1.0)) {
    return bad("compaction_policy.keep_budget_fraction",
               absl::StrCat("must be in (0, 1), got ", p.policy.keep_budget_fraction));
  }
  if (p.prompt_cache_ttl_s < 0) {
    return bad("prompt_cache_ttl_s", "must not be negative");
  }
  if (p.hard_band_policy != HardBandPolicy::kBlock &&
      p.hard_band_policy != HardBandPolicy::kServeWhileBackground) {
    return bad("hard_band_policy",
               absl::StrCat("must be HARD_BAND_POLICY_BLOCK or "
                            "HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND, got ",
                            static_cast<int>(p.hard_band_policy)));
  }
  if (!(p.recall.budget_fraction >= 0.0 && p.recall.budget_fraction < 1.0)) {
    return bad("recall.budget_fraction",
               absl::StrCat("must be in [0, 1), got ", p.recall.budget_fraction));
  }
  if (p.recall.min_tokens < 0) {
    return bad("recall.min_tokens", absl::StrCat("must be 0 or more, got ", p.recall.min_tokens));
  }
  if (!(p.ledger.min_recall >= 0.0 && p.ledger.min_recall <= 1.0)) {
    return bad("ledger.min_recall", absl::StrCat("must be in [0, 1], got ", p.ledger.min_recall));
  }
  return absl::OkStatus();
}

ProfileOverrides WithPromptLimit(const ModelProfile& model, ProfileOverrides overrides,
                                 int64_t prompt_limit) {
  if (prompt_limit <= 0) return overrides;
  const ModelProfile base = ApplyOverrides(model, overrides);
  const int64_t window = std::min(base.context_window, prompt_limit + base.output_reserve);
  if (window >= base.context_window) return overrides;
  const double reserve = static_cast<double>(base.output_reserve);
  const double limit = static_cast<double>(window) - reserve;
  auto rescale = [&](double f) { return (reserve + f * limit) / static_cast<double>(window); };
  overrides.context_window = window;
  // The reserve stays what it was: the limit is the prompt's.
  overrides.output_reserve = base.output_reserve;
  overrides.soft_threshold = rescale(base.soft_threshold);
  overrides.hard_threshold = rescale(base.hard_threshold);
  overrides.emergency_threshold = rescale(base.emergency_threshold);
  return overrides;
}

std::string TokenizerKey(const ModelProfile& profile) {
  if (profile.encoding != "approximate") return profile.encoding;
  return absl::StrCat("approximate:", profile.bytes_per_token);
}

}  // namespace convstate
