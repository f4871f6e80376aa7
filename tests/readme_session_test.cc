// Replays the grpcurl session of README.md against a fresh server and
// database, the way grpcurl does it: JSON -> request message (through the
// descriptors) -> call by method name -> response. grpcurl itself is not
// packaged for this machine; the reflection it relies on is tested in
// server_e2e_test.

#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/pg_harness.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

struct Call {
  std::string method;  // "package.Service/Method"
  std::string json;
};

std::string ReadReadme() {
  const std::string path =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/README.md");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<Call> ExtractCalls(const std::string& readme) {
  // grpcurl -plaintext -d '<json>' [\ newline] localhost:50051 <method>
  static const std::regex kCall(
      R"(grpcurl -plaintext -d '([^']*)'\s*(?:\\\s*)?localhost:50051 ([A-Za-z0-9_.]+/[A-Za-z0-9_]+))");
  std::vector<Call> calls;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), kCall);
       it != std::sregex_iterator(); ++it) {
    calls.push_back({(*it)[2].str(), (*it)[1].str()});
  }
  return calls;
}

TEST(ReadmeSessionTest, EveryGrpcurlCallSucceedsAgainstAFreshServer) {
  // Link the health client so its descriptors are in the generated pool.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  const std::string readme = ReadReadme();
  ASSERT_FALSE(readme.empty()) << "README.md not found in runfiles";
  const std::vector<Call> calls = ExtractCalls(readme);
  std::set<std::string> methods;
  for (const Call& c : calls) methods.insert(c.method);
  const std::set<std::string> expected = {
      "convstate.v1.ConversationState/CreateConversation",
      "convstate.v1.ConversationState/AppendTurn",
      "convstate.v1.ConversationState/BuildContext",
      "convstate.v1.ConversationState/ListItems",
      "convstate.v1.ConversationState/InspectContext",
      "convstate.v1.ConversationState/Compact",
      "convstate.v1.ConversationState/ListSummaries",
      "convstate.v1.ConversationState/ExpandSummary",
      "convstate.v1.ConversationState/ListCompactionEvents",
      "grpc.health.v1.Health/Check",
      "convstate.v1.ConversationState/DeleteConversation",
  };
  for (const std::string& m : expected) {
    EXPECT_TRUE(methods.count(m)) << "the README's session no longer calls " << m;
  }
  EXPECT_NE(readme.find("grpcurl -plaintext localhost:50051 list"), std::string::npos);

  auto db = testing::ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto server = testing::ServerProcess::Start({"--database_url=" + (*db)->url()});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);

  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  google::protobuf::DynamicMessageFactory factory(pool);
  for (const Call& call : calls) {
    SCOPED_TRACE(call.method);
    const auto* method =
        pool->FindMethodByName(absl::StrReplaceAll(call.method, {{"/", "."}}));
    ASSERT_NE(method, nullptr) << "unknown method in README: " << call.method;
    std::unique_ptr<google::protobuf::Message> request(
        factory.GetPrototype(method->input_type())->New());
    auto parsed = google::protobuf::util::JsonStringToMessage(call.json, request.get());
    ASSERT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << call.json;

    std::string wire = request->SerializeAsString();
    grpc::Slice slice(wire);
    grpc::ByteBuffer in(&slice, 1), out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&ctx, "/" + call.method, grpc::StubOptions(), &in, &out,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();

    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(out.Dump(&slices).ok());
    std::string response_wire;
    for (const auto& s : slices) response_wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
    std::unique_ptr<google::protobuf::Message> response(
        factory.GetPrototype(method->output_type())->New());
    ASSERT_TRUE(response->ParseFromString(response_wire));
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(*response, &json).ok());
    if (method->name() == "BuildContext") {
      v1::BuildContextResponse view;
      ASSERT_TRUE(view.ParseFromString(response_wire));
      EXPECT_EQ(view.entries_size(), 8) << json;  // system + 6 items + pending
      EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
    }
    if (method->name() == "Compact") {
      v1::CompactResponse compacted;
      ASSERT_TRUE(compacted.ParseFromString(response_wire));
      EXPECT_GT(compacted.summary_chunk_id(), 0) << json;
      EXPECT_LT(compacted.tokens_after(), compacted.tokens_before()) << json;
    }
    if (method->name() == "ListSummaries") {
      v1::ListSummariesResponse listed;
      ASSERT_TRUE(listed.ParseFromString(response_wire));
      EXPECT_EQ(listed.chunks_size(), 1) << json;
    }
    if (method->name() == "ExpandSummary") {
      v1::ExpandSummaryResponse expanded;
      ASSERT_TRUE(expanded.ParseFromString(response_wire));
      // The first turn: the question, the call, its result, the answer.
      EXPECT_EQ(expanded.items_size(), 4) << json;
      EXPECT_FALSE(expanded.chunk().facts().empty()) << json;
    }
    if (method->name() == "ListCompactionEvents") {
      v1::ListCompactionEventsResponse audit;
      ASSERT_TRUE(audit.ParseFromString(response_wire));
      ASSERT_FALSE(audit.events().empty()) << json;
      bool completed = false;
      for (const auto& e : audit.events()) completed |= e.event() == "completed";
      EXPECT_TRUE(completed) << json;
    }
    if (method->name() == "AppendTurn") {
      v1::AppendTurnResponse appended;
      ASSERT_TRUE(appended.ParseFromString(response_wire));
      EXPECT_GE(appended.items_size(), 2) << json;
      EXPECT_FALSE(appended.replayed()) << json;
    }
  }
}

}  // namespace
}  // namespace convstate
