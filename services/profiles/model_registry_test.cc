#include "services/profiles/model_registry.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace convstate {
namespace {

std::string VocabDir() {
  const char* dir = std::getenv("CONVSTATE_VOCAB_DIR");
  return dir == nullptr ? "" : dir;
}

TEST(GlobMatchTest, StarsAndQuestionMarks) {
  EXPECT_TRUE(GlobMatch("gpt-4o*", "gpt-4o"));
  EXPECT_TRUE(GlobMatch("gpt-4o*", "gpt-4o-mini-2024-07-18"));
  EXPECT_FALSE(GlobMatch("gpt-4o*", "gpt-4"));
  EXPECT_TRUE(GlobMatch("self-hosted/*", "self-hosted/llama-3.3-70b"));
  EXPECT_TRUE(GlobMatch("gpt-4-*preview", "gpt-4-0125-preview"));
  EXPECT_FALSE(GlobMatch("gpt-4-*preview", "gpt-4-0125-preview-x"));
  EXPECT_TRUE(GlobMatch("o?", "o1"));
  EXPECT_FALSE(GlobMatch("o?", "o10"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
}

// The shipped file: every current model family resolves to its real window
// and tokenizer.
TEST(ModelRegistryTest, DefaultProfilesResolveEveryFamily) {
  ASSERT_FALSE(VocabDir().empty()) << "CONVSTATE_VOCAB_DIR is not set: run under tools/test";
  auto registry = ModelRegistry::FromText(ModelRegistry::DefaultText(), VocabDir());
  ASSERT_TRUE(registry.ok()) << registry.status();
  const struct {
    const char* model;
    const char* profile;
    int64_t window;
    const char* encoding;
  } cases[] = {
      {"gpt-4o", "gpt-4o", 128000, "o200k_base"},
      {"gpt-4o-mini-2024-07-18", "gpt-4o", 128000, "o200k_base"},
      {"gpt-4.1-nano", "gpt-4.1", 1047576, "o200k_base"},
      {"gpt-5-mini", "gpt-5", 400000, "o200k_base"},
      {"o3-mini", "o-series", 200000, "o200k_base"},
      {"gpt-4-turbo-2024-04-09", "gpt-4-turbo", 128000, "cl100k_base"},
      {"gpt-3.5-turbo-0125", "gpt-3.5-turbo", 16385, "cl100k_base"},
      {"claude-sonnet-4-5", "claude", 200000, "approximate"},
      {"gemini-2.5-pro", "gemini", 1048576, "approximate"},
      {"gemini-1.5-pro-002", "gemini-1.5-pro", 2097152, "approximate"},
      {"self-hosted/llama-3.3-70b", "self-hosted/llama-3", 131072, "approximate"},
      {"self-hosted/qwen2.5-7b", "self-hosted/qwen", 32768, "approximate"},
      {"self-hosted/mistral-7b", "self-hosted", 32768, "approximate"},
      {"some-new-model", "default", 128000, "approximate"},
  };
  for (const auto& c : cases) {
    auto r = (*registry)->Resolve(c.model);
    ASSERT_TRUE(r.ok()) << c.model << ": " << r.status();
    EXPECT_EQ((*r)->profile.name, c.profile) << c.model;
    EXPECT_EQ((*r)->profile.context_window, c.window) << c.model;
    EXPECT_EQ((*r)->profile.encoding, c.encoding) << c.model;
    EXPECT_EQ((*r)->tokenizer->approximate(), std::string(c.encoding) == "approximate");
  }
  // Exact counts through the registry's tokenizer.
  auto gpt4o = (*registry)->Resolve("gpt-4o");
  EXPECT_EQ((*gpt4o)->tokenizer->CountTokens("hello world"), 2);
  EXPECT_EQ((*gpt4o)->profile.per_message_tokens, 3);
  // Defaults fill what the file leaves out.
  EXPECT_DOUBLE_EQ((*gpt4o)->profile.soft_threshold, 0.70);
  EXPECT_EQ((*gpt4o)->profile.recent_turns, 4);
}

constexpr char kApproximateOnly[] = R"pb(
  profiles {
    name: "small"
    patterns: "small-*"
    context_window: 4096
    output_reserve: 512
    tokenizer { encoding: "approximate" bytes_per_token: 3.0 }
    thresholds { soft: 0.5 hard: 0.6 }
    recent { turns: 2 max_tokens: 1000 }
    per_message_tokens: 0
  }
)pb";

TEST(ModelRegistryTest, UnknownModelWithoutDefaultIsNotFound) {
  auto registry = ModelRegistry::FromText(kApproximateOnly, "");
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto small = (*registry)->Resolve("small-1");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->profile.context_window, 4096);
  EXPECT_DOUBLE_EQ((*small)->profile.soft_threshold, 0.5);
  EXPECT_DOUBLE_EQ((*small)->profile.emergency_threshold, 0.95);
  EXPECT_EQ((*small)->profile.per_message_tokens, 0);
  EXPECT_EQ((*small)->tokenizer->CountTokens("abcdef"), 2);
  auto unknown = (*registry)->Resolve("gpt-4o");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(),
            "no model profile matches 'gpt-4o' and no default profile is configured");
}

TEST(ModelRegistryTest, BadFilesSayWhatIsWrong) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"profiles { name: \"a\" } profiles { name: \"a\" }",
       "model profiles: profile 'a': name used twice"},
      {"default_profile: \"missing\" profiles { name: \"a\" }",
       "model profiles: default_profile 'missing' is not defined"},
      {"profiles { name: \"a\" context_window: 1000 output_reserve: 2000 }",
       "model profiles: profile 'a': output_reserve: must be at least 0 and less than the "
       "context window (1000), got 2000"},
      {"profiles { name: \"a\" thresholds { soft: 0.9 hard: 0.8 } }",
       "model profiles: profile 'a': soft_threshold: must not exceed hard_threshold"},
      {"profiles { name: \"a\" tokenizer { encoding: \"p50k_base\" } }",
       "model profiles: profile 'a': tokenizer.encoding: unknown encoding 'p50k_base' "
       "(cl100k_base, o200k_base or approximate)"},
      {"profiles { name: \"a\"\n contxt_window: 5 }", "model profiles: line 2:"},
  };
  for (const auto& c : cases) {
    auto r = ModelRegistry::FromText(c.text, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(std::string(r.status().message()).rfind(c.message, 0), 0u)
        << r.status() << "\nwanted: " << c.message;
  }
  // An exact encoding whose vocabulary is not where it should be.
  auto missing = ModelRegistry::FromText(
      "profiles { name: \"a\" tokenizer { encoding: \"o200k_base\" } }", "/nonexistent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

TEST(ModelRegistryTest, CompactionSwitchAndReasoningPolicy) {
  auto registry = ModelRegistry::FromText(R"pb(
    profiles { name: "a" }
    profiles { name: "b" compaction_enabled: false reasoning_policy: "drop" }
  )pb", "");
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_TRUE((*(*registry)->Resolve("a"))->profile.compaction_enabled);
  EXPECT_EQ((*(*registry)->Resolve("a"))->profile.reasoning, ModelProfile::ReasoningPolicy::kSummarize);
  EXPECT_FALSE((*(*registry)->Resolve("b"))->profile.compaction_enabled);
  EXPECT_EQ((*(*registry)->Resolve("b"))->profile.reasoning, ModelProfile::ReasoningPolicy::kDrop);
  auto bad = ModelRegistry::FromText(R"pb(profiles { name: "c" reasoning_policy: "hide" })pb", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reasoning_policy"), std::string::npos) << bad.status();
}

TEST(ModelRegistryTest, RecallFloor) {
  auto registry = ModelRegistry::FromText(
      R"pb(profiles { name: "a" }
           profiles { name: "b" recall { min_tokens: 100 } })pb",
      "");
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_EQ((*(*registry)->Resolve("a"))->profile.recall.min_tokens, 640);
  EXPECT_EQ((*(*registry)->Resolve("b"))->profile.recall.min_tokens, 100);
  auto bad = ModelRegistry::FromText(R"pb(profiles { name: "c" recall { min_tokens: -1 } })pb", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("recall.min_tokens"), std::string::npos) << bad.status();
}

TEST(ModelRegistryTest, HardBandPolicy) {
  auto registry = ModelRegistry::FromText(R"pb(
    profiles { name: "a" }
    profiles { name: "b" hard_band_policy: "serve_while_background" }
    profiles { name: "c" hard_band_policy: "block" }
  )pb", "");
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_EQ((*(*registry)->Resolve("a"))->profile.hard_band_policy, HardBandPolicy::kBlock);
  EXPECT_EQ((*(*registry)->Resolve("b"))->profile.hard_band_policy,
            HardBandPolicy::kServeWhileBackground);
  EXPECT_EQ((*(*registry)->Resolve("c"))->profile.hard_band_policy, HardBandPolicy::kBlock);
  auto bad = ModelRegistry::FromText(R"pb(profiles { name: "d" hard_band_policy: "wait" })pb", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hard_band_policy"), std::string::npos) << bad.status();
  // A policy value the API does not know is refused, naming the field.
  ModelProfile p;
  p.hard_band_policy = static_cast<HardBandPolicy>(7);
  EXPECT_EQ(ValidateProfile(p, "profile_overrides.").message(),
            "profile_overrides.hard_band_policy: must be HARD_BAND_POLICY_BLOCK or "
            "HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND, got 7");
}

// A conversation that only shrinks the window gets an output reserve that
// shrinks with it; an explicit one is kept, and validated.
TEST(ProfileTest, TheReserveScalesWithAnOverriddenWindow) {
  ModelProfile gpt4o;
  gpt4o.context_window = 128000;
  gpt4o.output_reserve = 16384;
  ProfileOverrides o;
  o.context_window = 4096;
  ModelProfile p = ApplyOverrides(gpt4o, o);
  EXPECT_EQ(p.output_reserve, 524);  // 16,384 * 4,096 / 128,000.
  EXPECT_TRUE(ValidateProfile(p, "").ok());
  // Never more than a quarter of the window, however large the profile's share.
  ModelProfile greedy = gpt4o;
  greedy.output_reserve = 100000;
  p = ApplyOverrides(greedy, o);
  EXPECT_EQ(p.output_reserve, 1024);
  // A larger window keeps the profile's reserve.
  o.context_window = 256000;
  EXPECT_EQ(ApplyOverrides(gpt4o, o).output_reserve, 16384);
  // An explicit reserve is the caller's, and is validated.
  o.context_window = 4096;
  o.output_reserve = 16384;
  p = ApplyOverrides(gpt4o, o);
  EXPECT_EQ(p.output_reserve, 16384);
  EXPECT_EQ(ValidateProfile(p, "profile_overrides.").code(), absl::StatusCode::kInvalidArgument);
  // A provider's prompt limit keeps the reserve it had.
  ProfileOverrides limited = WithPromptLimit(gpt4o, ProfileOverrides{}, 20000);
  EXPECT_EQ(ApplyOverrides(gpt4o, limited).output_reserve, 16384);
  EXPECT_EQ(ApplyOverrides(gpt4o, limited).context_window, 36384);
}

}  // namespace
}  // namespace convstate
