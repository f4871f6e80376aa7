#include "services/api/tenant_quota.h"

#include "gtest/gtest.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

class TenantQuotaTest : public ::testing::Test {
 protected:
  void Create(const std::string& tenant, const std::string& id) {
    NewConversation nc;
    nc.key = ConversationKey{tenant, id};
    nc.model = "m";
    ASSERT_TRUE(storage_->CreateConversation(ctx_, nc).ok());
  }
  void Append(const std::string& tenant, const std::string& id, const std::string& text) {
    AppendRequest req;
    req.key = ConversationKey{tenant, id};
    req.items.push_back(ItemData{Role::kUser, ItemKind::kMessage, text, "", "", false, {}, 1});
    ASSERT_TRUE(storage_->AppendItems(ctx_, req).ok());
  }

  std::unique_ptr<Storage> storage_ = NewMemoryStorage();
  CallContext ctx_;
  TenantLimits acme_{/*max_conversations=*/2, /*max_stored_bytes=*/10};
  TenantQuota::LimitsOf limits_ = [this](const std::string& tenant) {
    return tenant == "acme" ? acme_ : TenantLimits{};
  };
};

TEST_F(TenantQuotaTest, ConversationsStopAtTheLimitNamingIt) {
  TenantQuota quota(limits_, storage_.get());
  EXPECT_TRUE(quota.AdmitConversation(ctx_, "acme").ok());
  Create("acme", "a");
  Create("acme", "b");
  const absl::Status refused = quota.AdmitConversation(ctx_, "acme");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_conversations 2"), std::string::npos) << refused;
  // Another tenant is not affected.
  Create("globex", "a");
  Create("globex", "b");
  EXPECT_TRUE(quota.AdmitConversation(ctx_, "globex").ok());
}

TEST_F(TenantQuotaTest, StoredBytesCountWhatThisReplicaAppendedSinceItLooked) {
  TenantQuota quota(limits_, storage_.get(), absl::Hours(1));
  Create("acme", "a");
  Append("acme", "a", "12345");
  EXPECT_TRUE(quota.AdmitBytes(ctx_, "acme", 5).ok());
  // Appended through this replica: counted without reading storage again.
  Append("acme", "a", "12345");
  quota.Appended("acme", 5);
  const absl::Status refused = quota.AdmitBytes(ctx_, "acme", 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_stored_bytes 10"), std::string::npos) << refused;
  EXPECT_TRUE(quota.AdmitBytes(ctx_, "globex", 1 << 20).ok());
}

TEST_F(TenantQuotaTest, AnOldFigureIsReadAgain) {
  TenantQuota quota(limits_, storage_.get(), absl::ZeroDuration());
  Create("acme", "a");
  EXPECT_TRUE(quota.AdmitBytes(ctx_, "acme", 10).ok());
  // Another replica appended: seen at the next check.
  Append("acme", "a", "1234567890");
  EXPECT_EQ(quota.AdmitBytes(ctx_, "acme", 1).code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(TenantQuotaTest, NoLimitsAdmitEverything) {
  TenantQuota quota(nullptr, storage_.get());
  Create("acme", "a");
  Create("acme", "b");
  EXPECT_TRUE(quota.AdmitConversation(ctx_, "acme").ok());
  EXPECT_TRUE(quota.AdmitBytes(ctx_, "acme", int64_t{1} << 40).ok());
}

}  // namespace
}  // namespace convstate
