#ifndef CONVSTATE_TESTS_TEST_PROFILES_H_
#define CONVSTATE_TESTS_TEST_PROFILES_H_

// Model profiles for end-to-end tests: "tiny-*" models have a 4,096-token
// window (o200k_base), so that a few dozen turns go through every tier;
// "brief-*" are the same but drop reasoning blocks when they summarize.

#include <cstdlib>
#include <fstream>
#include <string>

namespace convstate::testing {

inline constexpr char kTinyProfiles[] = R"pb(
  default_profile: "default"
  profiles { name: "default" tokenizer { encoding: "approximate" } }
  profiles {
    name: "tiny"
    patterns: "tiny-*"
    context_window: 4096
    output_reserve: 512
    token_floor: 0
    tokenizer { encoding: "o200k_base" }
    recent { turns: 3 max_tokens: 1200 }
    tool_pruning { trigger_tokens: 800 keep_recent: 2 min_savings_tokens: 100 keep_recent_fraction: 1.0 }
    summarizer { max_chunk_tokens: 250 chunk_budget_fraction: 0.15 }
  }
  profiles {
    name: "brief"
    patterns: "brief-*"
    context_window: 4096
    output_reserve: 512
    token_floor: 0
    tokenizer { encoding: "o200k_base" }
    recent { turns: 3 max_tokens: 1200 }
    tool_pruning { trigger_tokens: 800 keep_recent: 2 min_savings_tokens: 100 keep_recent_fraction: 1.0 }
    summarizer { max_chunk_tokens: 250 chunk_budget_fraction: 0.15 }
    reasoning_policy: "drop"
  }
)pb";

// Writes kTinyProfiles to the test's temporary folder; returns the path, for
// the server's --model_profiles.
inline std::string WriteTinyProfiles() {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/profiles.textproto";
  std::ofstream(path) << kTinyProfiles;
  return path;
}

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_TEST_PROFILES_H_
