#include "services/grpc/reflection_v1.h"

#include <memory>

#include "convstate/v1/convstate.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

namespace refl = grpc::reflection::v1;

class ReflectionV1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)v1::BuildContextRequest::descriptor();
    (void)grpc::health::v1::HealthCheckRequest::descriptor();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = refl::ServerReflection::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  // Sends `requests` on one stream; returns the answers in order.
  std::vector<refl::ServerReflectionResponse> Ask(std::vector<refl::ServerReflectionRequest> requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->ServerReflectionInfo(&ctx);
    std::vector<refl::ServerReflectionResponse> out;
    for (const auto& r : requests) {
      EXPECT_TRUE(stream->Write(r));
      refl::ServerReflectionResponse response;
      EXPECT_TRUE(stream->Read(&response));
      out.push_back(response);
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    return out;
  }

  ReflectionV1 service_{{"convstate.v1.ConversationState", "grpc.health.v1.Health",
                         "grpc.reflection.v1.ServerReflection"}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<refl::ServerReflection::Stub> stub_;
};

TEST_F(ReflectionV1Test, ListsServicesAndDescribesThemWithTheirImports) {
  refl::ServerReflectionRequest list;
  list.set_list_services("");
  refl::ServerReflectionRequest health;
  health.set_file_containing_symbol("grpc.health.v1.Health");
  refl::ServerReflectionRequest api;
  api.set_file_containing_symbol("convstate.v1.ConversationState.BuildContext");
  const auto answers = Ask({list, health, api});

  ASSERT_EQ(answers[0].list_services_response().service_size(), 3);
  EXPECT_EQ(answers[0].list_services_response().service(1).name(), "grpc.health.v1.Health");

  google::protobuf::FileDescriptorProto file;
  ASSERT_GE(answers[1].file_descriptor_response().file_descriptor_proto_size(), 1);
  ASSERT_TRUE(file.ParseFromString(answers[1].file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "grpc.health.v1");
  EXPECT_EQ(file.service(0).name(), "Health");

  ASSERT_TRUE(file.ParseFromString(answers[2].file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "convstate/v1/convstate.proto");
  // Every import comes along, so a client can build the descriptors.
  EXPECT_EQ(answers[2].file_descriptor_response().file_descriptor_proto_size(),
            1 + v1::BuildContextRequest::descriptor()->file()->dependency_count());
}

TEST_F(ReflectionV1Test, UnknownNamesAreNotFoundAnswersNotStreamErrors) {
  refl::ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("no.such.Service");
  refl::ServerReflectionRequest file;
  file.set_file_by_filename("no/such.proto");
  refl::ServerReflectionRequest empty;
  const auto answers = Ask({symbol, file, empty});
  EXPECT_EQ(answers[0].error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(answers[1].error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(answers[2].error_response().error_code(),
            static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(answers[0].original_request().file_containing_symbol(), "no.such.Service");
}

TEST_F(ReflectionV1Test, FileByNameAndExtensions) {
  refl::ServerReflectionRequest by_name;
  by_name.set_file_by_filename("grpc/health/v1/health.proto");
  refl::ServerReflectionRequest extensions;
  extensions.set_all_extension_numbers_of_type("google.protobuf.FieldOptions");
  const auto answers = Ask({by_name, extensions});
  EXPECT_EQ(answers[0].file_descriptor_response().file_descriptor_proto_size(), 1);
  EXPECT_EQ(answers[1].all_extension_numbers_response().base_type_name(),
            "google.protobuf.FieldOptions");
}

}  // namespace
}  // namespace convstate
