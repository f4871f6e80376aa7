#ifndef CONVSTATE_TESTS_SERVER_PROCESS_H_
#define CONVSTATE_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convstate::testing {

// The real convstate_server binary, run as a child process on loopback.
class ServerProcess {
 public:
  // Starts the server with `flags` plus --host=127.0.0.1, --port=0 unless
  // `flags` name a port (and
  // --auth=none unless `flags` hold --access_file or --auth), and waits
  // (up to `timeout`) for its "convstate listening on" line. Fails if the
  // process exits first. Its stderr goes to the test log, or is appended
  // to `log_file` when one is named.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& flags, absl::Duration timeout = absl::Seconds(60),
      const std::string& log_file = "");
  // Any program of this workspace (`runfile`, e.g. "tests/fake_llm_server")
  // that prints "<ready_prefix>HOST:PORT" once it listens.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> StartProgram(
      const std::string& runfile, const std::vector<std::string>& args,
      const std::string& ready_prefix, absl::Duration timeout = absl::Seconds(60),
      const std::string& log_file = "");
  // Kills the process if it still runs.
  ~ServerProcess();

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits for the process; returns its exit code, or
  // 128 + signal number if a signal ended it.
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout = absl::Seconds(30));

  // Runs the binary to completion with `flags` (e.g. --migrate_only) and
  // returns its exit code.
  static absl::StatusOr<int> RunToExit(const std::vector<std::string>& flags);

  // Where the server binary is in the test's runfiles.
  static std::string BinaryPath();
  static std::string RunfilePath(const std::string& runfile);

 private:
  ServerProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  int port_;
  bool reaped_ = false;
};

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_SERVER_PROCESS_H_
