#include "services/api/tenant_usage.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

class CountingUsage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<TenantUsage> GetTenantUsage(const CallContext& c, const std::string& t) override {
    ++reads;
    return ForwardingStorage::GetTenantUsage(c, t);
  }
  int reads = 0;
};

class TenantBytesTest : public ::testing::Test {
 protected:
  TenantBytesTest() : base_(NewMemoryStorage()), storage_(base_.get()) {}
  void SetUp() override {
    NewConversation nc;
    nc.key = {"t", "c"};
    nc.model = "m";
    ASSERT_TRUE(storage_.CreateConversation(ctx_, nc).ok());
    AppendRequest a;
    a.key = nc.key;
    a.items = {ItemData{Role::kUser, ItemKind::kMessage, std::string(1000, 'x')}};
    ASSERT_TRUE(storage_.AppendItems(ctx_, a).ok());
    stored_ = storage_.GetTenantUsage(ctx_, "t")->stored_bytes;
    storage_.reads = 0;
  }
  std::unique_ptr<Storage> base_;
  CountingUsage storage_;
  const CallContext ctx_;
  int64_t stored_ = 0;
};

TEST_F(TenantBytesTest, ChecksAgainstARecentTotalPlusWhatThisReplicaAdded) {
  FakeClock clock(absl::Now());
  TenantBytes bytes(&storage_, &clock, absl::Seconds(1));
  const TenantLimits limits{0, stored_ + 500};
  EXPECT_TRUE(bytes.Check(ctx_, "t", limits, 400).ok());
  bytes.Added("t", 400);
  const absl::Status refused = bytes.Check(ctx_, "t", limits, 200);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_stored_bytes"), std::string::npos) << refused.message();
  EXPECT_EQ(storage_.reads, 1);  // Within the second: the figure it holds.
  // A second later the total is read again: storage holds no more than
  // before (the 400 were counted here only), so 200 fit.
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(bytes.Check(ctx_, "t", limits, 200).ok());
  EXPECT_EQ(storage_.reads, 2);
  // Unlimited tenants are not read at all.
  EXPECT_TRUE(bytes.Check(ctx_, "u", TenantLimits{}, 1 << 30).ok());
  EXPECT_EQ(storage_.reads, 2);
}

}  // namespace
}  // namespace convstate
