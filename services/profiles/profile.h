#ifndef CONVSTATE_SERVICES_PROFILES_PROFILE_H_
#define CONVSTATE_SERVICES_PROFILES_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/core/types.h"

namespace convstate {

// The settings of one model that the context window is built against.
struct ModelProfile {
  std::string name = "default";
  // Total tokens the model accepts, prompt and output together.
  int64_t context_window = 128000;
  // Tokens kept free for the model's answer. A conversation that overrides
  // the window and not the reserve gets this reserve scaled with the window
  // (ApplyOverrides), at most kMaxScaledReserveFraction of it.
  int64_t output_reserve = 4096;
  // Bands, as fractions of the context window.
  double soft_threshold = 0.70;
  double hard_threshold = 0.80;
  double emergency_threshold = 0.95;
  // Below this many tokens nothing triggers (ApplyOverrides lowers it to
  // the soft threshold where that is lower).
  int64_t token_floor = 2000;
  // The recent buffer kept verbatim: last N turns, at most T tokens.
  int32_t recent_turns = 4;
  int64_t recent_tokens = 8000;
  // The buffer's cap is also at most this fraction of the window.
  double recent_fraction = 0.25;
  // False: never pruned, summarized or truncated; a view that does not fit
  // is refused instead.
  bool compaction_enabled = true;
  // At or above the hard band: compact before answering, or serve the view
  // as it stands below the emergency band while the background compacts.
  HardBandPolicy hard_band_policy = HardBandPolicy::kBlock;

  // "cl100k_base", "o200k_base", or "approximate".
  std::string encoding = "approximate";
  // For "approximate": UTF-8 bytes per token.
  double bytes_per_token = 4.0;
  // Tokens the chat format adds per message.
  int32_t per_message_tokens = 4;

  struct ToolPruning {
    int64_t trigger_tokens = 20000;
    int32_t keep_recent = 3;
    std::vector<std::string> keep_tools;
    int64_t min_savings_tokens = 2000;
    // Fractions of the window that cap the sizes above; the recent results
    // kept also stay within keep_recent_fraction in tokens.
    double trigger_fraction = 0.10;
    double keep_recent_fraction = 0.10;
    double min_savings_fraction = 0.02;
  } tool_pruning;

  struct Summarizer {
    // Empty: the built-in extractive summarizer.
    std::string model;
    // For an LLM summarizer: the API to speak (empty: the server's), and
    // whether the model takes max_completion_tokens instead of max_tokens.
    std::string api;
    bool max_completion_tokens = false;
    int64_t max_chunk_tokens = 2000;
    double chunk_budget_fraction = 0.15;
    double max_chunk_fraction = 0.04;
    // Tokens the summarizer model takes in one request (its own profile's
    // window less its output reserve; 0: no limit known). A span larger
    // than that goes to it in pieces.
    int64_t input_limit = 0;
  } summarizer;

  struct Ledger {
    double budget_fraction = 0.20;
    double min_recall = 0.9;
    double constraints_fraction = 0.05;
  } ledger;

  // Reasoning blocks of summarized turns: into the summary as attributed
  // text, or dropped.
  enum class ReasoningPolicy { kSummarize, kDrop };
  ReasoningPolicy reasoning = ReasoningPolicy::kSummarize;

  // What every compaction keeps and is told: the profile's policy with
  // the conversation's added (ApplyOverrides).
  struct Policy {
    std::string instructions;
    std::vector<KeepRule> keep;
    double keep_budget_fraction = 0.25;
  } policy;

  // How long the provider keeps a prompt cache warm; 0: unknown (never
  // idle-compacted).
  int64_t prompt_cache_ttl_s = 0;

  struct Recall {
    // The share of the window BuildContext's RECALLED section may take; 0:
    // no recall.
    double budget_fraction = 0.05;
    // The least it may take while on, at most a tenth of the window
    // (RecallBudget).
    int64_t min_tokens = 640;
  } recall;
};

// The largest share of an overridden window that the profile's output
// reserve, scaled with it, may take.
inline constexpr double kMaxScaledReserveFraction = 0.25;

// `base` with the conversation's overrides applied, and every size that
// has a fractional cap scaled down to the (possibly overridden) window, so
// that budgets, triggers and buffers shrink with it. A window overridden
// without a reserve takes the profile's reserve in proportion when the
// window shrinks (16,384 of 128,000 becomes 524 of 4,096), never more than
// kMaxScaledReserveFraction of the window; an explicit reserve is kept as
// given (and validated).
ModelProfile ApplyOverrides(ModelProfile base, const ProfileOverrides& overrides);

// Summary instructions `first`, then `then` on a line of their own; either
// may be empty. (A conversation's policy adds to its profile's, a call's to
// both.)
std::string JoinInstructions(const std::string& first, const std::string& then);

// `overrides` for a conversation whose provider refused a larger prompt
// than `prompt_limit` (0: none): the window becomes the limit plus the
// output reserve, and the bands the same fractions of the limit (above the
// reserve) as they were of the prompt's share before. `base` is the
// model's profile.
ProfileOverrides WithPromptLimit(const ModelProfile& base, ProfileOverrides overrides,
                                 int64_t prompt_limit);

// The name of the tokenizer a profile counts with, as stored with counts
// ("o200k_base", "approximate:4").
std::string TokenizerKey(const ModelProfile& profile);

// Tokens a fraction of the window stands for.
int64_t FractionOfWindow(const ModelProfile& profile, double fraction);

// INVALID_ARGUMENT naming the field if `profile` is inconsistent: a window
// that is not positive, a reserve that leaves no room, thresholds outside
// (0, 1] or out of order, negative sizes. `field_prefix` is prepended to
// field names (e.g. "profile_overrides.").
absl::Status ValidateProfile(const ModelProfile& profile, const std::string& field_prefix);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_PROFILES_PROFILE_H_
