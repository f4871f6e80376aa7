#include "tests/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <initializer_list>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/pg_harness.h"

namespace convstate::testing {
namespace {


std::vector<char*> Argv(const std::string& binary, const std::vector<std::string>& flags) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& f : flags) argv.push_back(const_cast<char*>(f.c_str()));
  argv.push_back(nullptr);
  return argv;
}

absl::StatusOr<int> ExitCode(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return absl::InternalError("child neither exited nor was signalled");
}

// Waits for `pid` until `deadline`; nullopt-like error if it is still running.
absl::StatusOr<int> WaitUntil(pid_t pid, absl::Time deadline) {
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) return ExitCode(wstatus);
    if (r < 0) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("process still running");
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace

std::string ServerProcess::RunfilePath(const std::string& runfile) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "convstate", "/",
                      runfile);
}

namespace {

// Appends `flag` unless a flag starting with one of `given` is there.
void AddUnlessGiven(std::vector<std::string>& flags,
                    std::initializer_list<absl::string_view> given, std::string flag) {
  const bool found = std::any_of(flags.begin(), flags.end(), [&](const std::string& f) {
    return std::any_of(given.begin(), given.end(),
                       [&](absl::string_view prefix) { return absl::StartsWith(f, prefix); });
  });
  if (!found) flags.push_back(std::move(flag));
}

// What servers in tests run with unless the call says otherwise: no
// authentication (unless the test says who may call, --access_file, or
// asks for --auth itself), and the test's layout of the database
// (TestHashPartitions).
void AddTestDefaults(std::vector<std::string>& flags) {
  AddUnlessGiven(flags, {"--access_file=", "--auth="}, "--auth=none");
  if (const int partitions = TestHashPartitions(); partitions > 0) {
    AddUnlessGiven(flags, {"--db_hash_partitions="},
                   absl::StrCat("--db_hash_partitions=", partitions));
  }
}

}  // namespace

std::string ServerProcess::BinaryPath() { return RunfilePath("services/server/convstate_server"); }

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& flags, absl::Duration timeout, const std::string& log_file) {
  std::vector<std::string> all = flags;
  all.push_back("--host=127.0.0.1");
  // A replica restarted where it was (--port=N) keeps its address.
  AddUnlessGiven(all, {"--port="}, "--port=0");
  AddTestDefaults(all);
  return StartProgram("services/server/convstate_server", all, "convstate listening on ",
                      timeout, log_file);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::StartProgram(
    const std::string& runfile, const std::vector<std::string>& all,
    const std::string& ready_prefix, absl::Duration timeout, const std::string& log_file) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const std::string binary = RunfilePath(runfile);
  std::vector<char*> argv = Argv(binary, all);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    if (!log_file.empty()) {
      const int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (log >= 0) dup2(log, STDERR_FILENO);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  const absl::Time deadline = absl::Now() + timeout;
  std::string buffer;
  int port = 0;
  while (port == 0) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      return absl::DeadlineExceededError("server did not say it was listening in time");
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[512];
    const ssize_t n = read(out[0], chunk, sizeof(chunk));
    if (n <= 0) {
      int wstatus = 0;
      waitpid(pid, &wstatus, 0);
      close(out[0]);
      auto code = ExitCode(wstatus);
      return absl::FailedPreconditionError(
          absl::StrCat("server exited before listening, code ", code.ok() ? *code : -1));
    }
    buffer.append(chunk, n);
    const size_t at = buffer.find(ready_prefix);
    const size_t eol = at == std::string::npos ? at : buffer.find('\n', at);
    if (eol != std::string::npos) {
      const std::string address =
          buffer.substr(at + ready_prefix.size(), eol - at - ready_prefix.size());
      const size_t colon = address.rfind(':');
      if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return absl::InternalError(absl::StrCat("unexpected address line: ", address));
      }
    }
  }
  // Keep draining stdout so the server never blocks on a full pipe.
  std::thread([fd = out[0]] {
    char sink[512];
    while (read(fd, sink, sizeof(sink)) > 0) {
    }
    close(fd);
  }).detach();
  return std::unique_ptr<ServerProcess>(new ServerProcess(pid, port));
}

absl::StatusOr<int> ServerProcess::Stop(int signal, absl::Duration timeout) {
  if (reaped_) return absl::FailedPreconditionError("already stopped");
  kill(pid_, signal);
  auto code = WaitUntil(pid_, absl::Now() + timeout);
  if (code.ok()) reaped_ = true;
  return code;
}

ServerProcess::~ServerProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::StatusOr<int> ServerProcess::RunToExit(const std::vector<std::string>& flags) {
  const std::string binary = BinaryPath();
  std::vector<std::string> all = flags;
  AddTestDefaults(all);
  std::vector<char*> argv = Argv(binary, all);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return WaitUntil(pid, absl::Now() + absl::Seconds(60));
}

}  // namespace convstate::testing
