// What the access checks cost a call on the server, without the network:
// the bearer token looked up (a token seen before, as on every call but a
// credential's first), the policy taken from the access file, the tenant's
// rate bucket. The gRPC adapter does these once per call. Run:
//   bazel run -c opt //services/auth:access_benchmark
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "services/auth/access_policy.h"
#include "services/auth/rate_limiter.h"

namespace convstate::auth {
namespace {

// An access file of `tokens` gateway tokens; the last one is "token-N".
std::string AccessText(int tokens) {
  std::string text = "tenants { id: 'acme' max_requests_per_second: 1000000000 }\n";
  for (int i = 0; i < tokens; ++i) {
    const std::string salt = absl::StrCat("salt-", i);
    absl::StrAppend(&text, "tokens { name: 'gw-", i, "' tenant: 'acme' role: ROLE_GATEWAY salt: '",
                    salt, "' sha256: '", TokenDigest(salt, absl::StrCat("token-", i)), "' }\n");
  }
  return text;
}

void BM_FindSeenToken(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  auto policy = AccessPolicy::FromText(AccessText(tokens));
  const std::string token = absl::StrCat("token-", tokens - 1);
  (*policy)->FindToken(token);  // Seen once, as after a credential's first call.
  for (auto _ : state) benchmark::DoNotOptimize((*policy)->FindToken(token));
}
BENCHMARK(BM_FindSeenToken)->Arg(1)->Arg(100);

// A token's first call: one salted hash per entry until it matches.
void BM_FindFirstToken(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  const std::string token = absl::StrCat("token-", tokens - 1);
  for (auto _ : state) {
    state.PauseTiming();
    auto policy = AccessPolicy::FromText(AccessText(tokens));
    state.ResumeTiming();
    benchmark::DoNotOptimize((*policy)->FindToken(token));
  }
}
BENCHMARK(BM_FindFirstToken)->Arg(1)->Arg(100);

void BM_CurrentPolicy(benchmark::State& state) {
  const std::string path = "/tmp/convstate_access_benchmark.textproto";
  std::ofstream(path, std::ios::trunc) << AccessText(10);
  auto file = AccessFile::Open(path, absl::Seconds(5));
  for (auto _ : state) benchmark::DoNotOptimize((*file)->Current());
}
BENCHMARK(BM_CurrentPolicy);

void BM_RateLimiterAdmit(benchmark::State& state) {
  RateLimiter limiter;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.Admit("acme", 1e9, 0, absl::Now()));
  }
}
BENCHMARK(BM_RateLimiterAdmit);

// All of it, as AccessGate::Admit does for a known token.
void BM_AdmitCall(benchmark::State& state) {
  const std::string path = "/tmp/convstate_access_benchmark.textproto";
  std::ofstream(path, std::ios::trunc) << AccessText(10);
  auto file = AccessFile::Open(path, absl::Seconds(5));
  RateLimiter limiter;
  for (auto _ : state) {
    const Principal* p = (*file)->Current()->FindToken("token-9");
    const TenantLimits limits = (*file)->Current()->Limits(p->tenant);
    benchmark::DoNotOptimize(
        limiter.Admit(p->tenant, limits.max_requests_per_second, limits.burst, absl::Now()));
  }
}
BENCHMARK(BM_AdmitCall);

}  // namespace
}  // namespace convstate::auth

BENCHMARK_MAIN();
