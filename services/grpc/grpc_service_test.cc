// The gRPC adapter in process, on loopback: clients that cancel
// StreamBuildContext at random points of a compaction (before it starts,
// while the summarizer works, while events are written, after) never leave
// the adapter touching a finished call. Run also under AddressSanitizer
// (tools/test --config=asan), where a use after free aborts the test.

#include "services/grpc/grpc_service.h"

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

constexpr char kProfiles[] = R"pb(
  default_profile: "tiny"
  profiles {
    name: "tiny"
    context_window: 4000
    output_reserve: 100
    tokenizer { encoding: "approximate" bytes_per_token: 1.0 }
    recent { turns: 1 max_tokens: 400 }
    per_message_tokens: 0
  }
)pb";

// A summarizer that takes a random few milliseconds, like a slow LLM, and
// stops early when the caller went away.
class SlowSummarizer final : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& req) override {
    int ms;
    {
      absl::MutexLock lock(&mu_);
      ms = static_cast<int>(rng_() % 15);
    }
    absl::SleepFor(absl::Milliseconds(ms));
    ++calls;
    SummaryResult r;
    r.text = std::string(std::min<int64_t>(req.max_tokens, 40), 's');
    r.model = "slow";
    return r;
  }
  std::atomic<int> calls{0};

 private:
  absl::Mutex mu_;
  std::mt19937 rng_ ABSL_GUARDED_BY(mu_){42};
};

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto models = ModelRegistry::FromText(kProfiles, "");
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models);
    ConversationService::Options options;
    options.background_compaction = false;
    service_ = std::make_unique<ConversationService>(options, models_.get(), storage_.get(),
                                                     &summarizer_);
    workers_ = std::make_unique<ThreadPool>(4, 1000);
    telemetry_ = telemetry::Telemetry::Disabled();
    gate_ = std::make_unique<AccessGate>(telemetry_.get());
    grpc_service_ = std::make_unique<GrpcService>(service_.get(), workers_.get(), telemetry_.get(),
                                                  gate_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(grpc_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ConversationState::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
    workers_.reset();  // Every queued call runs to its end first.
  }

  // A conversation past its emergency band (3,892 of 4,000 tokens, above the
  // default 2,000-token floor): it would not fit, and the next build compacts.
  void CreateFull(const std::string& id) {
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model("tiny");
    v1::Conversation conversation;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateConversation(&ctx, create, &conversation).ok());
    for (int turn = 0; turn < 12; ++turn) {
      v1::AppendTurnRequest append;
      append.set_conversation_id(id);
      for (v1::Role role : {v1::ROLE_USER, v1::ROLE_ASSISTANT}) {
        v1::NewItem* item = append.add_items();
        item->set_role(role);
        item->set_kind(v1::ITEM_KIND_MESSAGE);
        item->set_content(absl::StrCat(std::string(150, 'x'), " turn ", turn));
      }
      v1::AppendTurnResponse out;
      grpc::ClientContext actx;
      ASSERT_TRUE(stub_->AppendTurn(&actx, append, &out).ok());
    }
  }

  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<Storage> storage_ = NewMemoryStorage();
  SlowSummarizer summarizer_;
  std::unique_ptr<ConversationService> service_;
  std::unique_ptr<ThreadPool> workers_;
  std::unique_ptr<telemetry::Telemetry> telemetry_;
  std::unique_ptr<AccessGate> gate_;
  std::unique_ptr<GrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ConversationState::Stub> stub_;
};

// Every method of the service's descriptor reaches ConversationService:
// none answers UNIMPLEMENTED, and a unary call reaches the method its name
// says (a conversation read back is the one created).
TEST_F(GrpcServiceTest, ServesEveryMethodOfTheDescriptor) {
  EXPECT_TRUE(grpc_service_->unserved().empty())
      << absl::StrJoin(grpc_service_->unserved(), ", ");
  CreateFull("served");
  v1::GetConversationRequest get;
  get.set_conversation_id("served");
  v1::Conversation got;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->GetConversation(&ctx, get, &got).ok());
  EXPECT_EQ(got.conversation_id(), "served");
  EXPECT_EQ(got.model(), "tiny");
  v1::ListItemsRequest list;
  list.set_conversation_id("served");
  v1::ListItemsResponse items;
  grpc::ClientContext lctx;
  ASSERT_TRUE(stub_->ListItems(&lctx, list, &items).ok());
  EXPECT_EQ(items.items_size(), 24);
}

TEST_F(GrpcServiceTest, StreamsCancelledAtAnyPointOfACompactionLeaveNothingBehind) {
  std::mt19937 rng(2026);
  constexpr int kRounds = 150;
  int cancelled = 0, finished = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string id = absl::StrCat("c", round);
    CreateFull(id);
    v1::BuildContextRequest req;
    req.set_conversation_id(id);
    grpc::ClientContext ctx;
    auto reader = stub_->StreamBuildContext(&ctx, req);
    // Cancel before anything, after some events, or at a random time.
    const int mode = static_cast<int>(rng() % 3);
    const int after_events = static_cast<int>(rng() % 4);
    const int after_us = static_cast<int>(rng() % 20000);
    std::thread timer;
    if (mode == 0) ctx.TryCancel();
    if (mode == 2) {
      timer = std::thread([&ctx, after_us] {
        absl::SleepFor(absl::Microseconds(after_us));
        ctx.TryCancel();
      });
    }
    v1::BuildContextEvent event;
    int events = 0;
    while (reader->Read(&event)) {
      if (mode == 1 && ++events == after_events) ctx.TryCancel();
    }
    if (timer.joinable()) timer.join();
    const grpc::Status s = reader->Finish();
    ASSERT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::CANCELLED) << s.error_message();
    (s.ok() ? finished : cancelled) += 1;
  }
  // Both outcomes happened, and the server still answers a plain build.
  EXPECT_GT(cancelled, 10);
  EXPECT_GT(finished, 10);
  EXPECT_GT(summarizer_.calls.load(), 10);
  CreateFull("after");
  v1::BuildContextRequest req;
  req.set_conversation_id("after");
  v1::BuildContextResponse view;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->BuildContext(&ctx, req, &view).ok());
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_SUMMARIZED) << view.tokens().DebugString();
}

}  // namespace
}  // namespace convstate
