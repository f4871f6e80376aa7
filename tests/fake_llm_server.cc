// fake_llm_server: the FakeLlm as its own program, for end-to-end tests that
// run the real convstate server against it. Prints "fake llm listening on
// 127.0.0.1:PORT", then serves until SIGTERM/SIGINT. Scripted over HTTP:
// POST /control (see fake_llm.h), GET /stats.

#include <signal.h>

#include <cstdio>

#include "tests/fake_llm.h"

int main() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto llm = convstate::testing::FakeLlm::Start();
  if (!llm.ok()) {
    std::fprintf(stderr, "%s\n", llm.status().ToString().c_str());
    return 1;
  }
  std::printf("fake llm listening on 127.0.0.1:%d\n", (*llm)->port());
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  return 0;
}
