// A rolling restart as a platform makes one: two replicas on one database,
// a client that balances every call over both (round robin, watching each
// replica's health) and retries UNAVAILABLE, appends with idempotency keys
// and BuildContext calls running all along, and each replica in turn sent
// SIGTERM and started again on its address. Every call succeeds, every
// acknowledged turn is stored exactly once and in order, and each replica
// exits 0 after it reported NOT_SERVING to the clients watching it.

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tests/pg_harness.h"
#include "tests/server_process.h"
#include "tools/rpc/rpc_helpers.h"

namespace convstate::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr int kWorkers = 4;
constexpr char kService[] = "convstate.v1.ConversationState";

// What a gateway configures: per-call round robin over the replicas, only
// those whose health is SERVING, and UNAVAILABLE retried with backoff.
constexpr char kServiceConfig[] = R"({
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": "convstate.v1.ConversationState"},
  "methodConfig": [{
    "name": [{"service": "convstate.v1.ConversationState"}],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.05s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})";

// Calls that succeeded, by the port of the replica that answered, and
// every failure; waited on by the test as the replicas come and go.
class Tally {
 public:
  void Succeeded(const std::string& peer) {
    const size_t colon = peer.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(peer.substr(colon + 1), &port)) return;
    absl::MutexLock lock(&mu_);
    ++served_[port];
  }
  void Failed(const std::string& what) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(what);
  }
  int64_t ServedBy(int port) {
    absl::MutexLock lock(&mu_);
    return served_[port];
  }
  // Waits until `port` has answered `more` calls beyond `from`; false if
  // that did not happen within a bound far above what it takes.
  bool AwaitServed(int port, int64_t from, int64_t more) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return served_[port] >= from + more; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(120));
  }
  std::vector<std::string> failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  absl::Mutex mu_;
  std::map<int, int64_t> served_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
};

std::string TurnText(int worker, int turn, const char* part) {
  return absl::StrCat("worker ", worker, " turn ", turn, " ", part);
}

// One gateway's conversation: appends turn after turn, each under its own
// idempotency key, and builds the context between them, until told to stop.
// Returns the number of turns acknowledged.
int RunWorker(int worker, v1::ConversationState::Stub* stub, Tally* tally,
              const std::atomic<bool>* stop) {
  const std::string id = absl::StrCat("drain-", worker);
  int turns = 0;
  while (!stop->load()) {
    v1::AppendTurnRequest append;
    append.set_conversation_id(id);
    append.set_idempotency_key(absl::StrCat(id, "-turn-", turns));
    *append.add_items() = rpc::Message(v1::ROLE_USER, TurnText(worker, turns, "question"));
    *append.add_items() = rpc::Message(v1::ROLE_ASSISTANT, TurnText(worker, turns, "answer"));
    v1::AppendTurnResponse appended;
    grpc::ClientContext append_ctx;
    rpc::SetDeadline(append_ctx);
    const grpc::Status a = stub->AppendTurn(&append_ctx, append, &appended);
    if (!a.ok()) {
      tally->Failed(absl::StrCat("AppendTurn ", id, " turn ", turns, ": ", a.error_message()));
      continue;  // Sent again under the same key.
    }
    tally->Succeeded(append_ctx.peer());
    ++turns;
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    *build.add_pending_input() = rpc::Message(v1::ROLE_USER, "and now?");
    v1::BuildContextResponse context;
    grpc::ClientContext build_ctx;
    rpc::SetDeadline(build_ctx);
    const grpc::Status b = stub->BuildContext(&build_ctx, build, &context);
    if (b.ok()) {
      tally->Succeeded(build_ctx.peer());
    } else {
      tally->Failed(absl::StrCat("BuildContext ", id, ": ", b.error_message()));
    }
  }
  return turns;
}

// Watches `address`'s health for the service until the stream ends;
// records whether NOT_SERVING was seen after SERVING.
class HealthWatch {
 public:
  explicit HealthWatch(const std::string& address)
      : stub_(grpc::health::v1::Health::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(kService);
    reader_ = stub_->Watch(&ctx_, request);
    HealthCheckResponse first;
    serving_first_ = reader_->Read(&first) && first.status() == HealthCheckResponse::SERVING;
    thread_ = std::thread([this] {
      HealthCheckResponse next;
      while (reader_->Read(&next)) {
        if (next.status() == HealthCheckResponse::NOT_SERVING) not_serving_seen_ = true;
      }
      reader_->Finish().IgnoreError();
    });
  }
  // Waits for the stream to end (the replica stopped).
  bool SawServingThenNotServing() {
    thread_.join();
    return serving_first_ && not_serving_seen_;
  }

 private:
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader_;
  bool serving_first_ = false;
  std::atomic<bool> not_serving_seen_{false};
  std::thread thread_;
};

// Every turn the workers had acknowledged, exactly once, in order.
void ExpectEveryTurnOnce(v1::ConversationState::Stub* stub, int worker, int turns) {
  const std::string id = absl::StrCat("drain-", worker);
  std::vector<v1::Item> items;
  const grpc::Status s = rpc::ListAllItems(*stub, id, items);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<std::string> stored;
  for (const v1::Item& item : items) {
    if (item.kind() != v1::ITEM_KIND_SUMMARY_MARKER) stored.push_back(item.content());
  }
  ASSERT_EQ(stored.size(), static_cast<size_t>(2 * turns)) << id;
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(stored[i], TurnText(worker, static_cast<int>(i / 2),
                                  i % 2 == 0 ? "question" : "answer"))
        << id << " item " << i;
  }
}

class DrainE2eTest : public E2eTest {
 protected:
  std::vector<std::string> ReplicaFlags(int index, int port) {
    return {"--database_url=" + db_->url(), absl::StrCat("--replica_id=replica-", index),
            absl::StrCat("--port=", port), "--shutdown_drain_ms=500",
            "--shutdown_grace_ms=10000", "--health_interval_ms=200"};
  }
};

TEST_F(DrainE2eTest, RollingRestartUnderLoadFailsNoCallAndLosesNoTurn) {
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  for (int i = 0; i < 2; ++i) {
    auto replica = ServerProcess::Start(ReplicaFlags(i, 0));
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas.push_back(std::move(*replica));
  }
  const std::vector<int> ports = {replicas[0]->port(), replicas[1]->port()};

  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kServiceConfig);
  // A replica that comes back is found again soon.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  auto channel = grpc::CreateCustomChannel(
      absl::StrCat("ipv4:127.0.0.1:", ports[0], ",127.0.0.1:", ports[1]),
      grpc::InsecureChannelCredentials(), args);
  auto stub = v1::ConversationState::NewStub(channel);

  for (int w = 0; w < kWorkers; ++w) {
    v1::CreateConversationRequest create;
    create.set_conversation_id(absl::StrCat("drain-", w));
    create.set_model("gpt-4o");
    create.set_system_prompt("You are terse.");
    // A small window: compactions run while replicas stop.
    create.mutable_profile_overrides()->set_context_window(2048);
    v1::Conversation created;
    grpc::ClientContext ctx;
    rpc::SetDeadline(ctx);
    const grpc::Status s = stub->CreateConversation(&ctx, create, &created);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<int> turns(kWorkers, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { turns[w] = RunWorker(w, stub.get(), &tally, &stop); });
  }
  // Both replicas take calls before the first restart.
  ASSERT_TRUE(tally.AwaitServed(ports[0], 0, 20));
  ASSERT_TRUE(tally.AwaitServed(ports[1], 0, 20));

  for (int i = 0; i < 2; ++i) {
    const int other = ports[1 - i];
    HealthWatch watch(replicas[i]->address());
    absl::StatusOr<int> code = replicas[i]->Stop(SIGTERM);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << "replica " << i << " after SIGTERM";
    EXPECT_TRUE(watch.SawServingThenNotServing()) << "replica " << i;
    // The other replica carries the load meanwhile.
    ASSERT_TRUE(tally.AwaitServed(other, tally.ServedBy(other), 20));
    auto restarted = ServerProcess::Start(ReplicaFlags(i, ports[i]));
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    replicas[i] = std::move(*restarted);
    // The client balances onto it again.
    ASSERT_TRUE(tally.AwaitServed(ports[i], tally.ServedBy(ports[i]), 20)) << "replica " << i;
  }

  stop = true;
  for (std::thread& t : workers) t.join();
  const std::vector<std::string> failures = tally.failures();
  EXPECT_TRUE(failures.empty()) << failures.size() << " calls failed, the first: "
                                << (failures.empty() ? "" : failures.front());
  int total = 0;
  for (int t : turns) total += t;
  std::printf("%d turns appended over two restarts; calls answered by replica 0: %lld, "
              "by replica 1: %lld; %zu failed\n",
              total, static_cast<long long>(tally.ServedBy(ports[0])),
              static_cast<long long>(tally.ServedBy(ports[1])), failures.size());
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_GT(turns[w], 0);
    ExpectEveryTurnOnce(stub.get(), w, turns[w]);
  }
}

}  // namespace
}  // namespace convstate::testing
