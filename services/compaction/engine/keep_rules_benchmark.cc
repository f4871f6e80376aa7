// What keep rules cost a compaction's view (ApplyKeepRules runs each time a
// compaction adopts a snapshot, on the BuildContext path too): three rules
// over 100 live items, with the patterns compiled once and kept (as the
// code does), against compiling them on each call as it did before, in one
// run.
//
//   bazel run //services/compaction/engine:keep_rules_benchmark

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "re2/re2.h"
#include "services/compaction/engine/keep_rules.h"

namespace convstate {
namespace {

const std::vector<KeepRule>& Rules() {
  static const auto* const kRules = new std::vector<KeepRule>{
      {"(?i)\\b(always|never|must)\\b", {Role::kUser}, {}},
      {"guard[_ ]value=\\d+", {}, {"read_config"}},
      {"checksum [0-9a-f]{8,}", {}, {}}};
  return *kRules;
}

ContextSnapshot Snapshot() {
  ContextSnapshot s;
  for (int i = 0; i < 100; ++i) {
    Item item;
    item.sequence = i + 1;
    item.data.role = i % 2 ? Role::kAssistant : Role::kUser;
    item.data.content = absl::StrCat("Checked node-", i, " at 12:", i % 60,
                                     " and it is fine. ", std::string(700, 'x'));
    item.data.token_count = 200;
    s.live_items.push_back(item);
  }
  return s;
}

ModelProfile Profile() {
  ModelProfile profile;
  profile.context_window = 32768;
  profile.policy.keep = Rules();
  return profile;
}

// ApplyKeepRules as it runs now.
void Apply(benchmark::State& state) {
  const ContextSnapshot snapshot = Snapshot();
  const ModelProfile profile = Profile();
  for (auto _ : state) {
    ContextSnapshot s = snapshot;
    benchmark::DoNotOptimize(ApplyKeepRules(profile, s));
  }
}
BENCHMARK(Apply);

// The baseline: the same, plus compiling the three patterns, which each
// call did before they were kept.
void CompileThenApply(benchmark::State& state) {
  const ContextSnapshot snapshot = Snapshot();
  const ModelProfile profile = Profile();
  RE2::Options options;
  options.set_log_errors(false);
  for (auto _ : state) {
    for (const KeepRule& rule : Rules()) {
      RE2 re(rule.pattern, options);
      benchmark::DoNotOptimize(re.ok());
    }
    ContextSnapshot s = snapshot;
    benchmark::DoNotOptimize(ApplyKeepRules(profile, s));
  }
}
BENCHMARK(CompileThenApply);

// Copying the snapshot alone, which both include.
void CopyOnly(benchmark::State& state) {
  const ContextSnapshot snapshot = Snapshot();
  for (auto _ : state) {
    ContextSnapshot s = snapshot;
    benchmark::DoNotOptimize(s.live_items.data());
  }
}
BENCHMARK(CopyOnly);

}  // namespace
}  // namespace convstate

BENCHMARK_MAIN();
