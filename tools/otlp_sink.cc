// An OTLP/HTTP receiver for benchmarks: accepts every export to /v1/traces
// and /v1/metrics on loopback, decodes it, counts spans, keeps nothing.
//
//   otlp_sink [--port=0]
//
// Prints "otlp sink listening on 127.0.0.1:PORT" when ready; at SIGTERM or
// SIGINT prints "spans=N requests=M" and exits.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "tools/otlp/otlp_receiver.h"

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--port=") || !absl::SimpleAtoi(arg, &port)) {
      std::fprintf(stderr, "usage: otlp_sink [--port=N]\n");
      return 2;
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto receiver = convstate::otlp::OtlpReceiver::Start(port, /*keep=*/false);
  if (!receiver.ok()) {
    std::fprintf(stderr, "%s\n", std::string(receiver.status().message()).c_str());
    return 1;
  }
  std::printf("otlp sink listening on 127.0.0.1:%d\n", (*receiver)->port());
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  std::printf("spans=%lld requests=%d\n", static_cast<long long>((*receiver)->span_count()),
              (*receiver)->requests());
  return 0;
}
