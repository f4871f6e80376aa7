// A load generator for convstate, for loopback targets only.
//
//   load --targets=127.0.0.1:50051[,127.0.0.1:50052] --scenario=build
//        --concurrency=8 --duration_s=10 [--max_requests=200000]
//        [--conversations=16] [--items=200] [--history=0] [--item_bytes=400]
//        [--database_url=postgresql://...] [--token=TOKEN --tenant=ID]
//        [--ask=TEXT] [--recall_budget=F] [--insert_alone=true] [--window=8192]
//        [--hard_band_policy=block|serve_while_background]
//
// Scenarios:
//   append   AppendTurn of a user/assistant pair to random conversations
//   build    BuildContext of random conversations (of --items live items,
//            with --history items summarized behind a marker)
//   mixed    both, on conversations with an 8k window so that compactions
//            happen along the way (--window=N: another window; one far
//            larger than what a run appends compacts nothing)
//   health   the standard health Check: a plain gRPC round trip
//   floor    BuildContext as in `build`, each call followed by the server's
//            same-size echo (--bench_echo: as many bytes as that view) and,
//            with --database_url, a primary-key SELECT on the same
//            database: the floor of a BuildContext, interleaved with it
//   echo     the same-size echo alone (--bench_echo), as many bytes as the
//            view of a conversation set up as for `build`: the throughput
//            floor of `build`
//   insert   the floor of an AppendTurn: a transaction INSERTing the same
//            two rows, committed as durably, into a scratch table shaped
//            like items (--database_url; no convstate call); with
//            --insert_alone=true the INSERT is sent on its own, committed
//            as it runs (one round trip instead of three)
//   storage  the same two items appended through convstate's PostgreSQL
//            storage (the append the server makes, on --database_url, the
//            server's database) with no gRPC call and no server: what the
//            append costs in the database and its client library alone
// With --ask=TEXT every BuildContext carries TEXT as a pending user
// message (what recall searches the history for); --recall_budget=F sets
// the conversations' recall_budget_fraction (0: recall off).
// --hard_band_policy sets the conversations' hard_band_policy (default:
// the profile's, BLOCK).
// With --database_url the other scenarios also time a primary-key SELECT,
// one client, after the run. With --token=TOKEN every call carries
// `authorization: Bearer TOKEN` and speaks for --tenant (the token's).
//
// Prints, per RPC: calls, errors by code, calls per second, p50/p90/p99;
// for BuildContext answers read as messages, how many views were truncated
// and how many stood at or above the hard band.
// Bounded by --duration_s and --max_requests; sends nothing but to the
// targets, which must be loopback addresses.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "services/core/types.h"
#include "storage/postgres_storage.h"
#include "storage/storage.h"
#include "tools/rpc/rpc_helpers.h"

namespace {

using convstate::rpc::Message;

struct Args {
  std::vector<std::string> targets = {"127.0.0.1:50051"};
  std::string scenario = "build";
  int concurrency = 1;
  int duration_s = 10;
  int64_t max_requests = 200000;
  int conversations = 16;
  int items = 200;
  int history = 0;
  int item_bytes = 400;
  std::string database_url;
  std::string ask;
  double recall_budget = -1;  // unset: the profile's
  // BuildContext answers parsed into messages, as a gateway does; false
  // takes them as raw bytes, as the echo's are (what the server alone
  // costs, when the client shares its machine).
  bool decode = true;
  // `insert`: the INSERT sent as a statement on its own (committed as it
  // runs, one round trip), not between BEGIN and COMMIT.
  bool insert_alone = false;
  // `mixed`: the conversations' context window.
  int window = 8192;
  // The conversations' hard_band_policy; UNSPECIFIED: the profile's.
  convstate::v1::HardBandPolicy hard_band_policy = convstate::v1::HARD_BAND_POLICY_UNSPECIFIED;
  // A bearer token sent with every call, and the tenant it is for (default:
  // a fresh one per run).
  std::string token;
  std::string tenant;
};

bool Loopback(const std::string& target) {
  return absl::StartsWith(target, "127.") || absl::StartsWith(target, "localhost:") ||
         absl::StartsWith(target, "[::1]:");
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (!absl::StartsWith(arg, "--") || eq == std::string::npos) return false;
    const std::string name = arg.substr(2, eq - 2), v = arg.substr(eq + 1);
    bool ok = true;
    if (name == "targets") {
      a->targets = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (name == "scenario") {
      a->scenario = v;
    } else if (name == "concurrency") {
      ok = absl::SimpleAtoi(v, &a->concurrency) && a->concurrency > 0 && a->concurrency <= 256;
    } else if (name == "duration_s") {
      ok = absl::SimpleAtoi(v, &a->duration_s) && a->duration_s > 0 && a->duration_s <= 600;
    } else if (name == "max_requests") {
      ok = absl::SimpleAtoi(v, &a->max_requests) && a->max_requests > 0;
    } else if (name == "conversations") {
      ok = absl::SimpleAtoi(v, &a->conversations) && a->conversations > 0;
    } else if (name == "items") {
      ok = absl::SimpleAtoi(v, &a->items) && a->items >= 0;
    } else if (name == "history") {
      ok = absl::SimpleAtoi(v, &a->history) && a->history >= 0;
    } else if (name == "item_bytes") {
      ok = absl::SimpleAtoi(v, &a->item_bytes) && a->item_bytes > 0;
    } else if (name == "database_url") {
      a->database_url = v;
    } else if (name == "ask") {
      a->ask = v;
    } else if (name == "recall_budget") {
      ok = absl::SimpleAtod(v, &a->recall_budget) && a->recall_budget >= 0 && a->recall_budget < 1;
    } else if (name == "token") {
      a->token = v;
    } else if (name == "tenant") {
      a->tenant = v;
    } else if (name == "decode") {
      ok = v == "true" || v == "false";
      a->decode = v == "true";
    } else if (name == "window") {
      ok = absl::SimpleAtoi(v, &a->window) && a->window >= 1024;
    } else if (name == "hard_band_policy") {
      ok = v == "block" || v == "serve_while_background";
      a->hard_band_policy = v == "block" ? convstate::v1::HARD_BAND_POLICY_BLOCK
                                         : convstate::v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND;
    } else if (name == "insert_alone") {
      ok = v == "true" || v == "false";
      a->insert_alone = v == "true";
    } else {
      return false;
    }
    if (!ok) return false;
  }
  for (const std::string& t : a->targets) {
    if (!Loopback(t)) {
      std::fprintf(stderr, "refusing target %s: load goes to loopback addresses only\n",
                   t.c_str());
      return false;
    }
  }
  if ((a->scenario == "insert" || a->scenario == "storage") && a->database_url.empty()) {
    std::fprintf(stderr, "--scenario=%s needs --database_url\n", a->scenario.c_str());
    return false;
  }
  return a->scenario == "append" || a->scenario == "build" || a->scenario == "mixed" ||
         a->scenario == "health" || a->scenario == "floor" || a->scenario == "insert" ||
         a->scenario == "echo" || a->scenario == "storage";
}

using Clock = std::chrono::steady_clock;

// Microseconds from `t0` to now: one call's latency.
double MicrosSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Stats {
  std::vector<double> micros;
  std::map<std::string, int64_t> errors;
  // Response bytes of the calls that succeeded, where known.
  int64_t bytes = 0;
  // Views read (decoded BuildContext answers), and how many of them were
  // truncated (CONTEXT_STATUS_TRUNCATED).
  int64_t views = 0;
  int64_t truncated = 0;
  // Views served at or above the hard band (their `band`).
  int64_t over_hard = 0;
  void Merge(const Stats& o) {
    micros.insert(micros.end(), o.micros.begin(), o.micros.end());
    for (const auto& [k, v] : o.errors) errors[k] += v;
    bytes += o.bytes;
    views += o.views;
    truncated += o.truncated;
    over_hard += o.over_hard;
  }
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

void Report(const std::string& name, Stats& s, double seconds) {
  int64_t errors = 0;
  std::string codes;
  for (const auto& [code, n] : s.errors) {
    errors += n;
    absl::StrAppend(&codes, " ", code, "=", n);
  }
  const double p50 = Percentile(s.micros, 0.50), p90 = Percentile(s.micros, 0.90),
               p99 = Percentile(s.micros, 0.99);
  std::string size;
  if (s.bytes > 0 && !s.micros.empty()) {
    size = absl::StrFormat("  %.1f kB/answer", s.bytes / 1000.0 / s.micros.size());
  }
  if (s.views > 0) {
    absl::StrAppend(&size, "  truncated=", s.truncated, "  over_hard=", s.over_hard);
  }
  std::printf("%-22s calls=%-8zu errors=%-4lld %9.0f/s  p50=%8.1f us  p90=%8.1f us  p99=%8.1f us%s%s\n",
              name.c_str(), s.micros.size(), static_cast<long long>(errors),
              s.micros.size() / seconds, p50, p90, p99, size.c_str(), codes.c_str());
}

std::string Filler(int bytes, std::mt19937_64& rng) {
  static const char* kWords[] = {"deploy", "error", "staging", "rollback", "latency", "index",
                                 "cache", "timeout", "retry", "shard", "replica", "lease"};
  std::string out;
  while (static_cast<int>(out.size()) < bytes) {
    absl::StrAppend(&out, kWords[rng() % 12], " ", rng() % 10000, " ");
  }
  return out.substr(0, bytes);
}

// Adds `authorization: Bearer TOKEN` to every call of a channel.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;
};

class BearerInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(std::string token) : value_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(&value_);
  }

 private:
  const std::string value_;
};

class Load {
 public:
  explicit Load(Args args) : args_(std::move(args)) {
    for (const std::string& t : args_.targets) {
      if (args_.token.empty()) {
        channels_.push_back(grpc::CreateChannel(t, grpc::InsecureChannelCredentials()));
        continue;
      }
      std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> bearer;
      bearer.push_back(std::make_unique<BearerInterceptorFactory>(args_.token));
      channels_.push_back(grpc::experimental::CreateCustomChannelWithInterceptors(
          t, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(bearer)));
    }
    std::mt19937_64 rng{std::random_device{}()};
    tenant_ = args_.tenant.empty() ? absl::StrFormat("load-%08x", static_cast<uint32_t>(rng()))
                                   : args_.tenant;
  }

  // Creates the conversations the scenario works on.
  bool Setup() {
    if (args_.scenario == "health") return true;
    if (args_.scenario == "insert") return CreateInsertTable();
    if (args_.scenario == "storage" && !OpenStorage()) return false;
    auto stub = convstate::v1::ConversationState::NewStub(channels_[0]);
    std::mt19937_64 rng(1);
    for (int c = 0; c < args_.conversations; ++c) {
      const std::string id = absl::StrCat("c", c);
      convstate::v1::CreateConversationRequest create;
      create.set_tenant_id(tenant_);
      create.set_conversation_id(id);
      create.set_model("gpt-4o");
      create.set_system_prompt("You are a load-test assistant.");
      if (args_.scenario == "mixed") {
        create.mutable_profile_overrides()->set_context_window(args_.window);
        create.mutable_profile_overrides()->set_output_reserve(512);
      } else {
        // No recent buffer: Compact summarizes all of the history; the live
        // items appended after it stay verbatim (their view is far below
        // the soft band of gpt-4o's 128k window).
        create.mutable_profile_overrides()->set_recent_turns(0);
      }
      if (args_.recall_budget >= 0) {
        create.mutable_profile_overrides()->set_recall_budget_fraction(args_.recall_budget);
      }
      if (args_.hard_band_policy != convstate::v1::HARD_BAND_POLICY_UNSPECIFIED) {
        create.mutable_profile_overrides()->set_hard_band_policy(args_.hard_band_policy);
      }
      // The history is summarized under pressure, in a 4k window: a
      // compaction that has room gives up no fact, and filler is mostly
      // facts (numbers). The window is widened again after it.
      const convstate::v1::ProfileOverrides wide = create.profile_overrides();
      if (args_.history > 0 && args_.scenario != "mixed") {
        create.mutable_profile_overrides()->set_context_window(4096);
        create.mutable_profile_overrides()->set_output_reserve(512);
      }
      convstate::v1::Conversation conv;
      grpc::ClientContext ctx;
      if (auto s = stub->CreateConversation(&ctx, create, &conv); !s.ok()) {
        std::fprintf(stderr, "create: %s\n", s.error_message().c_str());
        return false;
      }
      // History first, summarized behind a marker; then the live items.
      if (!Fill(*stub, id, args_.history, rng)) return false;
      if (args_.history > 0) {
        convstate::v1::CompactRequest compact;
        compact.set_tenant_id(tenant_);
        compact.set_conversation_id(id);
        compact.set_mode(convstate::v1::CompactRequest::MODE_SUMMARIZE);
        convstate::v1::CompactResponse out;
        grpc::ClientContext cctx;
        const grpc::Status s = stub->Compact(&cctx, compact, &out);
        if (!s.ok() || out.summary_chunk_id() == 0) {
          std::fprintf(stderr, "compact: %s\n",
                       s.ok() ? "nothing was summarized" : s.error_message().c_str());
          return false;
        }
        convstate::v1::UpdateConversationRequest widen;
        widen.set_tenant_id(tenant_);
        widen.set_conversation_id(id);
        *widen.mutable_profile_overrides() = wide;
        convstate::v1::Conversation updated;
        grpc::ClientContext uctx;
        if (auto u = stub->UpdateConversation(&uctx, widen, &updated); !u.ok()) {
          std::fprintf(stderr, "update: %s\n", u.error_message().c_str());
          return false;
        }
      }
      if (!Fill(*stub, id, args_.items, rng)) return false;
    }
    if (args_.scenario == "echo") {
      convstate::v1::BuildContextRequest req;
      req.set_tenant_id(tenant_);
      req.set_conversation_id("c0");
      convstate::v1::BuildContextResponse view;
      grpc::ClientContext ctx;
      if (auto s = stub->BuildContext(&ctx, req, &view); !s.ok()) {
        std::fprintf(stderr, "build: %s\n", s.error_message().c_str());
        return false;
      }
      echo_bytes_ = view.ByteSizeLong();
    }
    return true;
  }

  void Run() {
    std::vector<std::thread> threads;
    std::vector<std::map<std::string, Stats>> per_thread(args_.concurrency);
    const auto end = Clock::now() + std::chrono::seconds(args_.duration_s);
    const auto start = Clock::now();
    for (int t = 0; t < args_.concurrency; ++t) {
      threads.emplace_back([&, t] { Work(t, end, per_thread[t]); });
    }
    for (auto& th : threads) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::map<std::string, Stats> merged;
    for (auto& m : per_thread) {
      for (auto& [name, s] : m) merged[name].Merge(s);
    }
    std::printf("scenario=%s targets=%zu concurrency=%d conversations=%d items=%d history=%d "
                "duration=%.1fs\n",
                args_.scenario.c_str(), args_.targets.size(), args_.concurrency,
                args_.conversations, args_.items, args_.history, seconds);
    if (!args_.ask.empty() || args_.recall_budget >= 0) {
      std::printf("pending question: %s; recall budget: %s\n", args_.ask.empty() ? "no" : "yes",
                  args_.recall_budget >= 0 ? absl::StrCat(args_.recall_budget).c_str()
                                           : "the profile's");
    }
    for (auto& [name, s] : merged) Report(name, s, seconds);
  }

  // A primary-key SELECT on the same database: the floor of a BuildContext.
  void DatabaseBaseline() {
    if (args_.database_url.empty() || args_.scenario == "floor" || args_.scenario == "insert" ||
        args_.scenario == "storage") {
      return;
    }
    try {
      pqxx::connection conn(args_.database_url);
      conn.prepare("pk", "SELECT conversation_id FROM conversations "
                         "WHERE tenant_id = $1 AND conversation_id = $2");
      Stats s;
      const auto end = Clock::now() + std::chrono::seconds(std::min(args_.duration_s, 5));
      const auto start = Clock::now();
      while (Clock::now() < end && static_cast<int64_t>(s.micros.size()) < args_.max_requests) {
        const auto t0 = Clock::now();
        pqxx::nontransaction tx(conn);
        tx.exec_prepared("pk", tenant_, "c0");
        s.micros.push_back(MicrosSince(t0));
      }
      Report("postgres pk select", s, std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "database baseline: %s\n", e.what());
    }
  }

  // Removes the insert scenario's scratch table.
  void DropInsertTable() {
    if (args_.scenario != "insert") return;
    try {
      pqxx::connection conn(args_.database_url);
      pqxx::nontransaction tx(conn);
      tx.exec(absl::StrCat("DROP TABLE IF EXISTS ", kInsertTable));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "insert scenario: %s\n", e.what());
    }
  }

 private:
  bool Fill(convstate::v1::ConversationState::Stub& stub, const std::string& id, int items,
            std::mt19937_64& rng) {
    for (int done = 0; done < items;) {
      convstate::v1::AppendTurnRequest req;
      req.set_tenant_id(tenant_);
      req.set_conversation_id(id);
      for (int k = 0; k < 100 && done < items; ++k, ++done) {
        *req.add_items() = Message(done % 2 ? convstate::v1::ROLE_ASSISTANT : convstate::v1::ROLE_USER,
                                   Filler(args_.item_bytes, rng));
      }
      convstate::v1::AppendTurnResponse out;
      grpc::ClientContext ctx;
      if (auto s = stub.AppendTurn(&ctx, req, &out); !s.ok()) {
        std::fprintf(stderr, "fill: %s\n", s.error_message().c_str());
        return false;
      }
    }
    return true;
  }

  static constexpr char kInsertTable[] = "load_insert_baseline";

  // The scratch table of the insert scenario: the columns of an item.
  bool CreateInsertTable() {
    try {
      pqxx::connection conn(args_.database_url);
      pqxx::work tx(conn);
      tx.exec(absl::StrCat("DROP TABLE IF EXISTS ", kInsertTable));
      tx.exec(absl::StrCat(
          "CREATE TABLE ", kInsertTable,
          " (conv_key bigint, sequence bigint, turn_index bigint, role text, kind text, "
          "content text, tool_name text, tool_call_id text, pinned boolean, metadata jsonb, "
          "token_count bigint, created_at timestamptz NOT NULL DEFAULT now(), "
          "PRIMARY KEY (conv_key, sequence))"));
      tx.commit();
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "insert scenario: %s\n", e.what());
      return false;
    }
  }

  // Two rows like an AppendTurn's in a transaction (BEGIN, INSERT,
  // COMMIT), committed durably.
  void WorkInsert(int t, Clock::time_point end, std::map<std::string, Stats>& stats) {
    const std::string name = args_.insert_alone ? "INSERT (2 rows, alone)" : "INSERT (2 rows)";
    std::mt19937_64 rng(1000 + t);
    try {
      pqxx::connection conn(args_.database_url);
      conn.prepare("insert", absl::StrCat(
          "INSERT INTO ", kInsertTable,
          " (conv_key, sequence, turn_index, role, kind, content, tool_name, tool_call_id, "
          "pinned, metadata, token_count) VALUES "
          "($1, $2, $3, 'user', 'message', $4, '', '', false, '{}', $5), "
          "($1, $2 + 1, $3, 'assistant', 'message', $6, '', '', false, '{}', $7)"));
      int64_t sequence = 0;
      while (Clock::now() < end && requests_.fetch_add(1) < args_.max_requests) {
        const std::string user = Filler(args_.item_bytes, rng);
        const std::string assistant = Filler(args_.item_bytes, rng);
        // Committed at COMMIT, or as it runs when sent alone (a
        // nontransaction's commit sends nothing).
        auto insert = [&](pqxx::transaction_base& tx) {
          tx.exec_prepared("insert", t, sequence + 1, sequence / 2 + 1, user, 100, assistant, 100);
          tx.commit();
        };
        const auto t0 = Clock::now();
        if (args_.insert_alone) {
          pqxx::nontransaction tx(conn);
          insert(tx);
        } else {
          pqxx::work tx(conn);
          insert(tx);
        }
        sequence += 2;
        stats[name].micros.push_back(MicrosSince(t0));
      }
    } catch (const std::exception& e) {
      stats[name].errors[e.what()]++;
    }
  }

  // The echo's answer of `bytes` bytes, through a generic stub: no
  // decoding.
  static grpc::Status Echo(grpc::GenericStub& generic, size_t bytes) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    size_t got = 0;
    grpc::Status status = Raw(generic, ctx, "/convstate.bench.Echo/Echo", std::to_string(bytes), &got);
    if (status.ok() && got != bytes) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "echo answered another size");
    }
    return status;
  }

  // A unary call with a raw body; sets `bytes` to the answer's size.
  static grpc::Status Raw(grpc::GenericStub& generic, grpc::ClientContext& ctx,
                          const std::string& method, const std::string& body, size_t* bytes) {
    grpc::Slice slice(body);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = std::move(s);
                        done = true;
                        cv.notify_one();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    *bytes = response.Length();
    return status;
  }

  // The server's database through convstate's own storage, one
  // connection per client.
  bool OpenStorage() {
    convstate::PostgresOptions options;
    options.database_url = args_.database_url;
    options.pool_size = args_.concurrency;
    absl::StatusOr<std::unique_ptr<convstate::Storage>> storage =
        convstate::NewPostgresStorage(options);
    if (!storage.ok()) {
      std::fprintf(stderr, "storage: %s\n", storage.status().ToString().c_str());
      return false;
    }
    storage_ = std::move(*storage);
    return true;
  }

  // The append AppendTurn makes, a user/assistant pair, made through the
  // storage directly: the server's own work (decoding, validation, token
  // counting) and the gRPC call left out. The token counts are a fixed
  // estimate (4 bytes a token, 4 a message): the storage only stores them.
  void WorkStorage(int t, Clock::time_point end, std::map<std::string, Stats>& stats) {
    std::mt19937_64 rng(1000 + t);
    Stats& st = stats["storage append"];
    while (Clock::now() < end && requests_.fetch_add(1) < args_.max_requests) {
      convstate::AppendRequest req;
      req.key = {tenant_, absl::StrCat("c", rng() % args_.conversations)};
      req.expected_model = "gpt-4o";
      for (convstate::Role role : {convstate::Role::kUser, convstate::Role::kAssistant}) {
        convstate::ItemData item;
        item.role = role;
        item.kind = convstate::ItemKind::kMessage;
        item.content = Filler(args_.item_bytes, rng);
        item.token_count = static_cast<int64_t>(item.content.size() / 4) + 4;
        req.items.push_back(std::move(item));
      }
      convstate::CallContext ctx;
      ctx.deadline = absl::Now() + absl::Seconds(30);
      const auto t0 = Clock::now();
      const absl::StatusOr<convstate::AppendResult> r = storage_->AppendItems(ctx, req);
      if (r.ok()) {
        st.micros.push_back(MicrosSince(t0));
      } else {
        st.errors[absl::StatusCodeToString(r.status().code())]++;
      }
    }
  }

  void Work(int t, Clock::time_point end, std::map<std::string, Stats>& stats) {
    if (args_.scenario == "insert") {
      WorkInsert(t, end, stats);
      return;
    }
    if (args_.scenario == "storage") {
      WorkStorage(t, end, stats);
      return;
    }
    auto channel = channels_[t % channels_.size()];
    auto stub = convstate::v1::ConversationState::NewStub(channel);
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::GenericStub generic(channel);
    std::unique_ptr<pqxx::connection> db;
    if (args_.scenario == "floor" && !args_.database_url.empty()) {
      db = std::make_unique<pqxx::connection>(args_.database_url);
      db->prepare("pk", "SELECT conversation_id FROM conversations "
                        "WHERE tenant_id = $1 AND conversation_id = $2");
    }
    std::mt19937_64 rng(1000 + t);
    // Reused from call to call, as a client that reads many views would:
    // parsing into it again reuses its entries and strings.
    convstate::v1::BuildContextResponse view;
    while (Clock::now() < end && requests_.fetch_add(1) < args_.max_requests) {
      const std::string id = absl::StrCat("c", rng() % args_.conversations);
      size_t view_bytes = 0;
      bool append = args_.scenario == "append" || (args_.scenario == "mixed" && rng() % 2 == 0);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status s;
      std::string name;
      const auto t0 = Clock::now();
      if (args_.scenario == "echo") {
        name = "echo (same size)";
        s = Echo(generic, echo_bytes_);
        view_bytes = echo_bytes_;
      } else if (args_.scenario == "health") {
        name = "Health.Check";
        grpc::health::v1::HealthCheckRequest req;
        grpc::health::v1::HealthCheckResponse out;
        s = health->Check(&ctx, req, &out);
      } else if (append) {
        name = "AppendTurn";
        convstate::v1::AppendTurnRequest req;
        req.set_tenant_id(tenant_);
        req.set_conversation_id(id);
        *req.add_items() = Message(convstate::v1::ROLE_USER, Filler(args_.item_bytes, rng));
        *req.add_items() = Message(convstate::v1::ROLE_ASSISTANT, Filler(args_.item_bytes, rng));
        convstate::v1::AppendTurnResponse out;
        s = stub->AppendTurn(&ctx, req, &out);
      } else {
        name = "BuildContext";
        convstate::v1::BuildContextRequest req;
        req.set_tenant_id(tenant_);
        req.set_conversation_id(id);
        if (!args_.ask.empty()) {
          *req.add_pending_input() = Message(convstate::v1::ROLE_USER, args_.ask);
        }
        if (args_.decode) {
          s = stub->BuildContext(&ctx, req, &view);
          view_bytes = view.ByteSizeLong();
        } else {
          s = Raw(generic, ctx, "/convstate.v1.ConversationState/BuildContext",
                  req.SerializeAsString(), &view_bytes);
        }
      }
      Stats& st = stats[name];
      if (s.ok()) {
        st.micros.push_back(MicrosSince(t0));
        st.bytes += static_cast<int64_t>(view_bytes);
        if (name == "BuildContext" && args_.decode) {
          ++st.views;
          if (view.context_status() == convstate::v1::CONTEXT_STATUS_TRUNCATED) ++st.truncated;
          if (view.band() >= convstate::v1::BAND_HARD) ++st.over_hard;
        }
      } else {
        st.errors[std::to_string(s.error_code())]++;
      }
      if (args_.scenario != "floor") continue;
      // The floor of the call just made, right after it.
      const auto e0 = Clock::now();
      const grpc::Status e = Echo(generic, view_bytes);
      Stats& es = stats["echo (same size)"];
      if (e.ok()) {
        es.micros.push_back(MicrosSince(e0));
      } else {
        es.errors[std::to_string(e.error_code())]++;
      }
      if (db != nullptr) {
        const auto d0 = Clock::now();
        pqxx::nontransaction tx(*db);
        tx.exec_prepared("pk", tenant_, id);
        stats["postgres pk select"].micros.push_back(MicrosSince(d0));
      }
    }
  }

  const Args args_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::string tenant_;
  std::atomic<int64_t> requests_{0};
  size_t echo_bytes_ = 0;
  std::unique_ptr<convstate::Storage> storage_;
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: load --targets=127.0.0.1:PORT[,...] "
                 "--scenario=append|build|mixed|health|floor|echo|insert|storage "
                 "[--concurrency=1] [--duration_s=10] [--max_requests=200000] "
                 "[--conversations=16] [--items=200] [--history=0] [--item_bytes=400] "
                 "[--database_url=URL] [--decode=true|false] [--token=T --tenant=ID] "
                 "[--ask=TEXT] [--recall_budget=F] [--insert_alone=true] [--window=8192]\n"
                 "            [--hard_band_policy=block|serve_while_background]\n");
    return 2;
  }
  Load load(args);
  if (!load.Setup()) return 1;
  load.Run();
  load.DatabaseBaseline();
  load.DropInsertTable();
  return 0;
}
