#include "services/grpc/access_gate.h"

#include "convstate/v1/convstate.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

// A method added to the API without a role could be called by no one (or,
// worse, by anyone if the check were loose): every one names its role.
TEST(AccessGateTest, EveryMethodOfTheServiceNamesItsRole) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::ConversationState::service_full_name());
  ASSERT_GT(service->method_count(), 15);
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_TRUE(RequiredRole(service->method(i)->name()).has_value())
        << service->method(i)->name() << " has no required_role option";
  }
}

TEST(AccessGateTest, RolesComeFromTheProto) {
  EXPECT_EQ(RequiredRole("ListItems"), auth::Role::kReader);
  EXPECT_EQ(RequiredRole("BuildContext"), auth::Role::kGateway);
  EXPECT_EQ(RequiredRole("AppendTurn"), auth::Role::kGateway);
  EXPECT_EQ(RequiredRole("SearchHistory"), auth::Role::kGateway);
  EXPECT_EQ(RequiredRole("ExpandSummary"), auth::Role::kGateway);
  EXPECT_EQ(RequiredRole("Compact"), auth::Role::kOperator);
  EXPECT_EQ(RequiredRole("ListCompactionEvents"), auth::Role::kOperator);
  EXPECT_EQ(RequiredRole("Nope"), std::nullopt);
}

}  // namespace
}  // namespace convstate
