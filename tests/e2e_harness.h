#ifndef CONVSTATE_TESTS_E2E_HARNESS_H_
#define CONVSTATE_TESTS_E2E_HARNESS_H_

// What every end-to-end test starts from: a scratch database, the real
// server process on it, and a client that reaches it over loopback, plus
// the calls most tests make. A test that needs more (TLS, credentials, a
// fake LLM, replicas) adds flags and clients of its own on top.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/pg_harness.h"
#include "tests/server_process.h"
#include "tools/rpc/rpc_helpers.h"

namespace convstate::testing {

// Starts the server on `db` with --database_url plus `flags`.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartServerOn(
    const ScratchDatabase& db, const std::vector<std::string>& flags,
    const std::string& log_file = "");

// A plaintext channel to `server` and a stub on it.
std::shared_ptr<grpc::Channel> ChannelTo(const ServerProcess& server);
std::unique_ptr<v1::ConversationState::Stub> StubFor(const ServerProcess& server);

// The fixture of the end-to-end tests. SetUp creates db_ (unmigrated: the
// server migrates it as it starts); StartServer starts server_ on it and
// points channel_ and stub_ at it. Every call below has a 30 s deadline.
class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Starts server_ with `flags` (beyond --database_url); the test fails if
  // it does not start. A server already running is stopped first.
  void StartServer(const std::vector<std::string>& flags = {},
                   const std::string& log_file = "");

  // Creates conversation `id` for `model`.
  grpc::Status Create(const std::string& id, const std::string& model,
                      const std::string& system_prompt = "", v1::Conversation* out = nullptr);
  // Appends `items` to `id` in one turn.
  grpc::Status Append(const std::string& id, const std::vector<v1::NewItem>& items,
                      v1::AppendTurnResponse* out = nullptr);
  // BuildContext of `id` with `pending` input.
  grpc::Status Build(const std::string& id, v1::BuildContextResponse* out,
                     const std::vector<v1::NewItem>& pending = {});
  // The conversation as stored; fails the test if it cannot be read.
  v1::Conversation Get(const std::string& id);

  std::unique_ptr<ScratchDatabase> db_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ConversationState::Stub> stub_;
};

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_E2E_HARNESS_H_
