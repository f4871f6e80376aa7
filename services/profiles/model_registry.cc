#include "services/profiles/model_registry.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "convstate/config/v1/model_profiles.pb.h"
#include "services/common/text_proto.h"
#include "services/tokenizer/bpe_tokenizer.h"

extern const char kConvstateDefaultModelProfiles[];

namespace convstate {
namespace {

// Fields left 0 in the file keep the built-in default.
template <typename T>
void SetIfNonZero(T value, T& field) {
  if (value != T{}) field = value;
}

ModelProfile FromProto(const config::v1::ModelProfile& p) {
  ModelProfile out;
  out.name = p.name();
  SetIfNonZero(p.context_window(), out.context_window);
  SetIfNonZero(p.output_reserve(), out.output_reserve);
  SetIfNonZero(p.thresholds().soft(), out.soft_threshold);
  SetIfNonZero(p.thresholds().hard(), out.hard_threshold);
  SetIfNonZero(p.thresholds().emergency(), out.emergency_threshold);
  SetIfNonZero(p.token_floor(), out.token_floor);
  SetIfNonZero(p.recent().turns(), out.recent_turns);
  SetIfNonZero(p.recent().max_tokens(), out.recent_tokens);
  if (!p.tokenizer().encoding().empty()) out.encoding = p.tokenizer().encoding();
  SetIfNonZero(p.tokenizer().bytes_per_token(), out.bytes_per_token);
  const bool openai = out.encoding != "approximate";
  out.per_message_tokens = p.has_per_message_tokens() ? p.per_message_tokens() : (openai ? 3 : 4);
  SetIfNonZero(p.tool_pruning().trigger_tokens(), out.tool_pruning.trigger_tokens);
  SetIfNonZero(p.tool_pruning().keep_recent(), out.tool_pruning.keep_recent);
  out.tool_pruning.keep_tools.assign(p.tool_pruning().keep_tools().begin(),
                                     p.tool_pruning().keep_tools().end());
  SetIfNonZero(p.tool_pruning().min_savings_tokens(), out.tool_pruning.min_savings_tokens);
  out.summarizer.model = p.summarizer().model();
  out.summarizer.api = p.summarizer().api();
  out.summarizer.max_completion_tokens = p.summarizer().max_completion_tokens();
  SetIfNonZero(p.summarizer().max_chunk_tokens(), out.summarizer.max_chunk_tokens);
  SetIfNonZero(p.summarizer().chunk_budget_fraction(), out.summarizer.chunk_budget_fraction);
  SetIfNonZero(p.recent().max_fraction(), out.recent_fraction);
  SetIfNonZero(p.tool_pruning().trigger_fraction(), out.tool_pruning.trigger_fraction);
  SetIfNonZero(p.tool_pruning().keep_recent_fraction(), out.tool_pruning.keep_recent_fraction);
  SetIfNonZero(p.tool_pruning().min_savings_fraction(), out.tool_pruning.min_savings_fraction);
  SetIfNonZero(p.summarizer().max_chunk_fraction(), out.summarizer.max_chunk_fraction);
  SetIfNonZero(p.ledger().budget_fraction(), out.ledger.budget_fraction);
  SetIfNonZero(p.ledger().min_recall(), out.ledger.min_recall);
  SetIfNonZero(p.ledger().constraints_fraction(), out.ledger.constraints_fraction);
  if (p.has_compaction_enabled()) out.compaction_enabled = p.compaction_enabled();
  if (p.recall().has_budget_fraction()) out.recall.budget_fraction = p.recall().budget_fraction();
  if (p.recall().has_min_tokens()) out.recall.min_tokens = p.recall().min_tokens();
  if (p.reasoning_policy() == "drop") out.reasoning = ModelProfile::ReasoningPolicy::kDrop;
  if (p.hard_band_policy() == "serve_while_background") {
    out.hard_band_policy = HardBandPolicy::kServeWhileBackground;
  }
  out.prompt_cache_ttl_s = p.prompt_cache_ttl_s();
  out.policy.instructions = p.compaction_policy().instructions();
  for (const auto& r : p.compaction_policy().keep()) {
    KeepRule rule;
    rule.pattern = r.pattern();
    for (const std::string& role : r.roles()) {
      if (std::optional<Role> parsed = RoleFromName(role)) rule.roles.push_back(*parsed);
    }
    rule.tool_names.assign(r.tool_names().begin(), r.tool_names().end());
    out.policy.keep.push_back(std::move(rule));
  }
  if (p.compaction_policy().has_keep_budget_fraction()) {
    out.policy.keep_budget_fraction = p.compaction_policy().keep_budget_fraction();
  }
  return out;
}

}  // namespace

bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0, star = absl::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

absl::string_view ModelRegistry::DefaultText() { return kConvstateDefaultModelProfiles; }

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::FromFile(
    const std::string& path, const std::string& vocab_dir) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("model profiles: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto registry = FromText(text.str(), vocab_dir);
  if (!registry.ok()) {
    return absl::Status(registry.status().code(),
                        absl::StrCat(path, ": ", registry.status().message()));
  }
  return registry;
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::FromText(
    absl::string_view textproto, const std::string& vocab_dir) {
  config::v1::ModelProfiles config;
  if (absl::Status parsed = ParseTextProto(textproto, &config); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model profiles: ", parsed.message()));
  }
  std::unique_ptr<ModelRegistry> registry(new ModelRegistry());
  std::set<std::string> names;
  for (const config::v1::ModelProfile& p : config.profiles()) {
    const std::string where = absl::StrCat("profile '", p.name(), "': ");
    if (p.name().empty()) return absl::InvalidArgumentError("model profiles: a profile has no name");
    if (!names.insert(p.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("model profiles: ", where, "name used twice"));
    }
    if (!p.reasoning_policy().empty() && p.reasoning_policy() != "summarize" &&
        p.reasoning_policy() != "drop") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model profiles: ", where, "reasoning_policy: expected summarize or drop, got '",
          p.reasoning_policy(), "'"));
    }
    if (!p.hard_band_policy().empty() && p.hard_band_policy() != "block" &&
        p.hard_band_policy() != "serve_while_background") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model profiles: ", where,
          "hard_band_policy: expected block or serve_while_background, got '",
          p.hard_band_policy(), "'"));
    }
    const std::string& api = p.summarizer().api();
    if (!api.empty() && api != "openai_chat" && api != "anthropic_messages") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model profiles: ", where,
          "summarizer.api: expected openai_chat or anthropic_messages, got '", api, "'"));
    }
    auto resolved = std::make_unique<ResolvedProfile>();
    // Sizes with a fractional cap scaled to the window, as for every conversation.
    resolved->profile = ApplyOverrides(FromProto(p), {});
    if (absl::Status s = ValidateProfile(resolved->profile, ""); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model profiles: ", where, s.message()));
    }
    const ModelProfile& profile = resolved->profile;
    if (profile.encoding == "approximate") {
      auto& t = registry->approximate_[profile.bytes_per_token];
      if (t == nullptr) t = NewApproximateTokenizer(profile.bytes_per_token);
    } else if (!registry->exact_.contains(profile.encoding)) {
      auto t = BpeTokenizer::LoadFile(profile.encoding,
                                      absl::StrCat(vocab_dir, "/", profile.encoding, ".tiktoken"));
      if (!t.ok()) {
        return absl::Status(t.status().code(),
                            absl::StrCat("model profiles: ", where, t.status().message()));
      }
      registry->exact_[profile.encoding] = std::move(*t);
    }
    resolved->tokenizer = &registry->TokenizerFor(profile);
    registry->patterns_.emplace_back(p.patterns().begin(), p.patterns().end());
    registry->profiles_.push_back(std::move(resolved));
  }
  // A summarizer model with a profile of its own: what one request to it
  // may hold.
  for (const auto& r : registry->profiles_) {
    const std::string& model = r->profile.summarizer.model;
    if (model.empty()) continue;
    for (size_t i = 0; i < registry->profiles_.size(); ++i) {
      const ModelProfile& s = registry->profiles_[i]->profile;
      bool match = s.name == model;
      for (const std::string& pattern : registry->patterns_[i]) match = match || GlobMatch(pattern, model);
      if (match) {
        r->profile.summarizer.input_limit = s.context_window - s.output_reserve;
        break;
      }
    }
  }
  if (!config.default_profile().empty()) {
    for (const auto& r : registry->profiles_) {
      if (r->profile.name == config.default_profile()) registry->default_ = r.get();
    }
    if (registry->default_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model profiles: default_profile '", config.default_profile(), "' is not defined"));
    }
  }
  return registry;
}

absl::StatusOr<const ResolvedProfile*> ModelRegistry::Resolve(absl::string_view model) const {
  for (const auto& r : profiles_) {
    if (r->profile.name == model) return r.get();
  }
  for (size_t i = 0; i < profiles_.size(); ++i) {
    for (const std::string& pattern : patterns_[i]) {
      if (GlobMatch(pattern, model)) return profiles_[i].get();
    }
  }
  if (default_ != nullptr) return default_;
  return absl::NotFoundError(absl::StrCat("no model profile matches '", model,
                                          "' and no default profile is configured"));
}

const Tokenizer& ModelRegistry::TokenizerFor(const ModelProfile& profile) const {
  if (profile.encoding == "approximate") return *approximate_.at(profile.bytes_per_token);
  return *exact_.at(profile.encoding);
}

}  // namespace convstate
