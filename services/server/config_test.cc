#include "services/server/config.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(LoadConfigTest, DefaultsAndEnvironment) {
  auto c = LoadConfig({}, "postgresql://env/db");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.port, 50051);
  EXPECT_EQ(c->storage, "postgres");
  EXPECT_EQ(c->postgres.database_url, "postgresql://env/db");
  EXPECT_TRUE(c->migrate);
  EXPECT_FALSE(c->help);
}

TEST(LoadConfigTest, FlagsOverrideTheFileWhichOverridesTheEnvironment) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/convstate.conf";
  {
    std::ofstream f(path);
    f << "# comment\n\nport = 6000\n  database_url = postgresql://file/db  \n"
         "max_item_bytes=2048\nmigrate = false\n";
  }
  auto c = LoadConfig({"--config=" + path, "--port=7000", "--storage=memory"},
                      "postgresql://env/db");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.port, 7000);
  EXPECT_EQ(c->postgres.database_url, "postgresql://file/db");
  EXPECT_EQ(c->server.service.limits.max_item_bytes, 2048);
  EXPECT_FALSE(c->migrate);
  EXPECT_EQ(c->storage, "memory");
}

TEST(LoadConfigTest, BadInputNamesTheSetting) {
  EXPECT_EQ(LoadConfig({"--port=70000"}, nullptr).status().message(),
            "--port: expected a whole number in 0..65535, got '70000'");
  EXPECT_EQ(LoadConfig({"--nope=1"}, nullptr).status().message(), "--nope: unknown setting");
  EXPECT_EQ(LoadConfig({"--storage=redis"}, nullptr).status().message(),
            "--storage: expected postgres or memory, got 'redis'");
  EXPECT_EQ(LoadConfig({"--migrate=maybe"}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfig({"stray"}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfig({"--config=/nonexistent/file"}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoadConfigTest, HelpListsEverySetting) {
  auto c = LoadConfig({"--help"}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->help);
  const std::string usage = ConfigUsage();
  for (const char* name : {"--port", "--database_url", "--max_item_bytes", "--shutdown_grace_ms"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace convstate
