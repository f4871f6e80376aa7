#include "services/api/profile_resolver.h"

#include <atomic>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

constexpr char kProfiles[] = R"pb(
  profiles {
    name: "small"
    patterns: "small-*"
    context_window: 4096
    output_reserve: 512
    tokenizer { encoding: "approximate" bytes_per_token: 2.0 }
  }
)pb";

// Storage that counts the conversations it is asked for.
class CountingReads : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<Conversation> GetConversation(const CallContext& c,
                                               const ConversationKey& k) override {
    reads_.fetch_add(1);
    return ForwardingStorage::GetConversation(c, k);
  }
  int reads() const { return reads_.load(); }

 private:
  std::atomic<int> reads_{0};
};

class ProfileResolverTest : public ::testing::Test {
 protected:
  ProfileResolverTest()
      : models_(*ModelRegistry::FromText(kProfiles, "")),
        base_(NewMemoryStorage()),
        storage_(base_.get()),
        resolver_(models_.get(), &storage_, /*background_compaction=*/true) {}

  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<Storage> base_;
  CountingReads storage_;
  ProfileResolver resolver_;
  CallContext ctx_;
};

// A conversation is served under its model's profile with its own
// overrides; a model without a profile is named, as the request's fault or
// as the configuration's.
TEST_F(ProfileResolverTest, ResolvesWithOverridesAndNamesAModelWithoutAProfile) {
  Conversation c;
  c.key = ConversationKey{"t", "c1"};
  c.model = "small-1";
  c.overrides.context_window = 2048;
  absl::StatusOr<ResolvedProfile> resolved = resolver_.ProfileOf(c);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->profile.context_window, 2048);
  EXPECT_NE(resolved->tokenizer, nullptr);

  c.model = "large-1";
  EXPECT_EQ(resolver_.ProfileOf(c).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(resolver_.ProfileOf(c).status().message(),
            "model 'large-1' of conversation 'c1' has no profile in the current configuration");
  EXPECT_EQ(resolver_.ForStored("large-1", "").status().message(),
            "model 'large-1' has no profile in the current configuration");
  const absl::Status asked = resolver_.ForRequest("large-1").status();
  EXPECT_EQ(asked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(asked.message().substr(0, 7), "model: ");
  EXPECT_TRUE(resolver_.ForRequest("small-2").ok());
}

// The model a conversation is bound to is read from storage once, and
// again only when asked to refresh.
TEST_F(ProfileResolverTest, RemembersEachConversationsModel) {
  NewConversation nc;
  nc.key = ConversationKey{"t", "c1"};
  nc.model = "small-1";
  ASSERT_TRUE(storage_.CreateConversation(ctx_, nc).ok());
  EXPECT_EQ(*resolver_.ModelOf(ctx_, nc.key, /*refresh=*/false), "small-1");
  EXPECT_EQ(*resolver_.ModelOf(ctx_, nc.key, /*refresh=*/false), "small-1");
  EXPECT_EQ(storage_.reads(), 1);
  EXPECT_EQ(*resolver_.ModelOf(ctx_, nc.key, /*refresh=*/true), "small-1");
  EXPECT_EQ(storage_.reads(), 2);
  EXPECT_EQ(resolver_.ModelOf(ctx_, ConversationKey{"t", "none"}, false).status().code(),
            absl::StatusCode::kNotFound);
}

// A call serves while the background compacts only when the profile asks
// for it and the background is on.
TEST_F(ProfileResolverTest, CallModeFollowsThePolicyAndTheBackground) {
  ModelProfile profile;
  EXPECT_EQ(resolver_.CallMode(profile), CompactionMode::kByBand);
  profile.hard_band_policy = HardBandPolicy::kServeWhileBackground;
  EXPECT_EQ(resolver_.CallMode(profile), CompactionMode::kByBandBehindBackground);
  ProfileResolver foreground(models_.get(), &storage_, /*background_compaction=*/false);
  EXPECT_EQ(foreground.CallMode(profile), CompactionMode::kByBand);
}

}  // namespace
}  // namespace convstate
