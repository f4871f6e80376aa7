// Measures BuildContext latency against a running convstate server, next to
// a plain gRPC round trip (health Check) measured in the same run,
// interleaved call by call so both see the same machine load.
//
//   bench_build_context --target=127.0.0.1:50051 [--items=200] [--calls=2000]
//   bench_build_context --target=... --items=10000 --fork_rounds=10
//
// With --fork_rounds: the conversation is written turn by turn with a
// BuildContext every 50 items (compacting as a gateway's calls would), then
// each round times a ForkConversation of it at its last item, the fork's
// first BuildContext (nothing of it cached), and a BuildContext of the
// source after a pin change (which makes the server read its whole context
// again, as for a conversation it has not cached), interleaved.
//
// Creates its own conversation, deletes it at the end. Loopback only by
// intent: it is bounded by --calls and sends nothing else.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

struct Args {
  std::string target = "127.0.0.1:50051";
  int items = 200;
  int calls = 2000;
  int warmup = 200;
  int item_bytes = 400;
  int fork_rounds = 0;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return absl::StartsWith(a, prefix) ? a.c_str() + prefix.size() : nullptr;
    };
    if (const char* v = value("target")) {
      args->target = v;
    } else if (const char* v = value("items")) {
      if (!absl::SimpleAtoi(v, &args->items) || args->items < 1) return false;
    } else if (const char* v = value("calls")) {
      if (!absl::SimpleAtoi(v, &args->calls) || args->calls < 1) return false;
    } else if (const char* v = value("warmup")) {
      if (!absl::SimpleAtoi(v, &args->warmup) || args->warmup < 0) return false;
    } else if (const char* v = value("fork_rounds")) {
      if (!absl::SimpleAtoi(v, &args->fork_rounds) || args->fork_rounds < 0) return false;
    } else if (const char* v = value("item_bytes")) {
      if (!absl::SimpleAtoi(v, &args->item_bytes) || args->item_bytes < 1) return false;
    } else {
      return false;
    }
  }
  return true;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

void Report(const char* name, const std::vector<double>& us) {
  double sum = 0;
  for (double x : us) sum += x;
  std::printf("%-28s n=%-6zu p50=%8.1f us  p90=%8.1f us  p99=%8.1f us  mean=%8.1f us\n", name,
              us.size(), Percentile(us, 0.50), Percentile(us, 0.90), Percentile(us, 0.99),
              sum / us.size());
}

template <typename Fn>
double TimeMicros(Fn fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

int Fail(const std::string& what, const grpc::Status& s) {
  std::fprintf(stderr, "%s failed: %d %s\n", what.c_str(), s.error_code(),
               s.error_message().c_str());
  return 1;
}

// What --fork_rounds measures (see the top of the file).
int ForkRounds(convstate::v1::ConversationState::Stub& stub, const std::string& id,
               const Args& args) {
  std::vector<double> fork_us, fork_build_us, source_build_us;
  std::vector<std::string> forks;
  int64_t items = 0, entries = 0;
  for (int round = 0; round < args.fork_rounds; ++round) {
    grpc::Status s;
    {
      convstate::v1::PinItemRequest pin;
      pin.set_tenant_id("bench");
      pin.set_conversation_id(id);
      pin.set_sequence(1);
      convstate::v1::Item out;
      grpc::ClientContext ctx;
      s = round % 2 == 0 ? stub.PinItem(&ctx, pin, &out) : [&] {
        convstate::v1::UnpinItemRequest unpin;
        unpin.set_tenant_id("bench");
        unpin.set_conversation_id(id);
        unpin.set_sequence(1);
        return stub.UnpinItem(&ctx, unpin, &out);
      }();
      if (!s.ok()) return Fail("pin", s);
    }
    convstate::v1::BuildContextRequest build;
    build.set_tenant_id("bench");
    build.set_conversation_id(id);
    convstate::v1::BuildContextResponse view;
    source_build_us.push_back(TimeMicros([&] {
      grpc::ClientContext ctx;
      s = stub.BuildContext(&ctx, build, &view);
    }));
    if (!s.ok()) return Fail("build context", s);
    entries = view.entries_size();
    convstate::v1::ForkConversationRequest fork;
    fork.set_tenant_id("bench");
    fork.set_source_conversation_id(id);
    fork.set_conversation_id(absl::StrCat(id, "-fork-", round));
    convstate::v1::Conversation forked;
    fork_us.push_back(TimeMicros([&] {
      grpc::ClientContext ctx;
      s = stub.ForkConversation(&ctx, fork, &forked);
    }));
    if (!s.ok()) return Fail("fork", s);
    items = forked.item_count();
    forks.push_back(forked.conversation_id());
    build.set_conversation_id(forked.conversation_id());
    fork_build_us.push_back(TimeMicros([&] {
      grpc::ClientContext ctx;
      s = stub.BuildContext(&ctx, build, &view);
    }));
    if (!s.ok()) return Fail("build context of the fork", s);
  }
  forks.push_back(id);
  for (const std::string& conversation : forks) {
    convstate::v1::DeleteConversationRequest req;
    req.set_tenant_id("bench");
    req.set_conversation_id(conversation);
    convstate::v1::DeleteConversationResponse out;
    grpc::ClientContext ctx;
    stub.DeleteConversation(&ctx, req, &out);
  }
  std::printf("target %s, a conversation of %lld items of ~%d bytes (view of %lld entries), "
              "%d rounds\n",
              args.target.c_str(), static_cast<long long>(items), args.item_bytes,
              static_cast<long long>(entries), args.fork_rounds);
  Report("ForkConversation", fork_us);
  Report("fork's first BuildContext", fork_build_us);
  Report("source's BuildContext, reread", source_build_us);
  std::printf("fork's first BuildContext / source's: p50 %.2fx\n",
              Percentile(fork_build_us, 0.5) / Percentile(source_build_us, 0.5));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: bench_build_context --target=HOST:PORT [--items=200] [--calls=2000] "
                 "[--warmup=200] [--item_bytes=400] [--fork_rounds=N]\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(args.target, grpc::InsecureChannelCredentials());
  auto stub = convstate::v1::ConversationState::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  std::mt19937_64 rng{std::random_device{}()};
  const std::string id = absl::StrFormat("bench-%016x", rng());
  {
    convstate::v1::CreateConversationRequest req;
    req.set_tenant_id("bench");
    req.set_conversation_id(id);
    req.set_model("gpt-4o");
    req.set_system_prompt("You are a benchmark.");
    convstate::v1::Conversation out;
    grpc::ClientContext ctx;
    if (auto s = stub->CreateConversation(&ctx, req, &out); !s.ok()) return Fail("create", s);
  }
  const std::string filler(args.item_bytes, 'x');
  for (int done = 0; done < args.items;) {
    convstate::v1::AppendTurnRequest req;
    req.set_tenant_id("bench");
    req.set_conversation_id(id);
    for (int k = 0; k < 20 && done < args.items; ++k, ++done) {
      auto* item = req.add_items();
      item->set_role(done % 2 == 0 ? convstate::v1::ROLE_USER : convstate::v1::ROLE_ASSISTANT);
      item->set_kind(convstate::v1::ITEM_KIND_MESSAGE);
      item->set_content(absl::StrCat("message ", done, " ", filler));
    }
    convstate::v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    if (auto s = stub->AppendTurn(&ctx, req, &out); !s.ok()) return Fail("append", s);
    if (args.fork_rounds > 0 && done % 50 == 0) {
      convstate::v1::BuildContextRequest build;
      build.set_tenant_id("bench");
      build.set_conversation_id(id);
      convstate::v1::BuildContextResponse view;
      grpc::ClientContext build_ctx;
      if (auto s = stub->BuildContext(&build_ctx, build, &view); !s.ok()) {
        return Fail("build context", s);
      }
    }
  }
  if (args.fork_rounds > 0) return ForkRounds(*stub, id, args);

  convstate::v1::BuildContextRequest build;
  build.set_tenant_id("bench");
  build.set_conversation_id(id);
  grpc::health::v1::HealthCheckRequest check;
  std::vector<double> build_us, check_us;
  size_t response_bytes = 0;
  int entries = 0;
  for (int i = 0; i < args.warmup + args.calls; ++i) {
    grpc::Status s;
    const double c = TimeMicros([&] {
      grpc::health::v1::HealthCheckResponse out;
      grpc::ClientContext ctx;
      s = health->Check(&ctx, check, &out);
    });
    if (!s.ok()) return Fail("health check", s);
    convstate::v1::BuildContextResponse view;
    const double b = TimeMicros([&] {
      grpc::ClientContext ctx;
      s = stub->BuildContext(&ctx, build, &view);
    });
    if (!s.ok()) return Fail("build context", s);
    if (i >= args.warmup) {
      check_us.push_back(c);
      build_us.push_back(b);
    }
    response_bytes = view.ByteSizeLong();
    entries = view.entries_size();
  }
  {
    convstate::v1::DeleteConversationRequest req;
    req.set_tenant_id("bench");
    req.set_conversation_id(id);
    convstate::v1::DeleteConversationResponse out;
    grpc::ClientContext ctx;
    stub->DeleteConversation(&ctx, req, &out);
  }
  std::printf("target %s, %d items of ~%d bytes, view of %d entries (%zu bytes)\n",
              args.target.c_str(), args.items, args.item_bytes, entries, response_bytes);
  Report("grpc health Check", check_us);
  Report("BuildContext", build_us);
  std::printf("BuildContext / plain round trip: p50 %.2fx, p99 %.2fx\n",
              Percentile(build_us, 0.5) / Percentile(check_us, 0.5),
              Percentile(build_us, 0.99) / Percentile(check_us, 0.99));
  return 0;
}
