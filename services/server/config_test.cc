#include "services/server/config.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "gtest/gtest.h"

namespace convstate {
namespace {

GetEnv Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const GetEnv kNoEnv = Env({});

TEST(LoadConfigTest, DefaultsAndEnvironment) {
  auto c = LoadConfig({"--auth=none"}, Env({{"CONVSTATE_DATABASE_URL", "postgresql://env/db"}, {"HOME", "/home/x"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_dir, "/home/x/.cache/convstate/vocab/gpt-tokenizer-4.0.0");
  EXPECT_TRUE(c->model_profiles.empty());
  EXPECT_EQ(c->server.port, 50051);
  // Loopback unless asked otherwise.
  EXPECT_EQ(c->server.host, "127.0.0.1");
  EXPECT_EQ(c->server.service.context_cache_bytes, int64_t{256} << 20);
  EXPECT_FALSE(c->server.bench_echo);
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
  auto c = LoadConfig({"--auth=none", "--config=" + path, "--port=7000", "--storage=memory",
                       "--model_profiles=/etc/profiles.textproto"},
                      Env({{"CONVSTATE_DATABASE_URL", "postgresql://env/db"},
                           {"CONVSTATE_VOCAB_DIR", "/opt/vocab"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.port, 7000);
  EXPECT_EQ(c->postgres.database_url, "postgresql://file/db");
  EXPECT_EQ(c->server.service.limits.max_item_bytes, 2048);
  EXPECT_FALSE(c->migrate);
  EXPECT_EQ(c->storage, "memory");
  EXPECT_EQ(c->vocab_dir, "/opt/vocab");
  EXPECT_EQ(c->model_profiles, "/etc/profiles.textproto");
}

TEST(LoadConfigTest, SummarizerIsChosenByAKnownName) {
  auto c = LoadConfig({"--auth=none"}, kNoEnv);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->summarizer.name.empty()) << "the URL decides, as before the flag";
  c = LoadConfig({"--auth=none", "--summarizer=extractive"}, kNoEnv);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->summarizer.name, "extractive");
  c = LoadConfig({"--auth=none", "--summarizer=abstractive"}, kNoEnv);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("unknown summarizer \"abstractive\"; known: extractive, llm"),
            std::string::npos)
      << c.status();
}

TEST(LoadConfigTest, EveryFlagAlsoComesFromItsVariableAndTheFlagWins) {
  auto c = LoadConfig({"--auth=none", "--port=7000"},
                      Env({{"CONVSTATE_PORT", "6000"},
                           {"CONVSTATE_DB_POOL_SIZE", "3"},
                           {"CONVSTATE_SHUTDOWN_DRAIN_MS", "1500"},
                           {"CONVSTATE_PUBLIC_HEALTH", "true"},
                           {"CONVSTATE_OTEL_SERVICE_NAME", "convstate-env"},
                           {"OTEL_SERVICE_NAME", "otel-env"},
                           {"CONVSTATE_MAX_ITEM_BYTES", ""}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.port, 7000);
  EXPECT_EQ(c->postgres.pool_size, 3);
  EXPECT_EQ(c->server.drain, absl::Milliseconds(1500));
  EXPECT_TRUE(c->server.access.public_health);
  // CONVSTATE_ wins over the OpenTelemetry variable of the same setting.
  EXPECT_EQ(c->telemetry.service_name, "convstate-env");
  // An empty variable counts as unset.
  EXPECT_EQ(c->server.service.limits.max_item_bytes, 1048576);
}

TEST(LoadConfigTest, ABadVariableIsNamedAndTheFileItNamesIsRead) {
  auto bad = LoadConfig({"--auth=none"}, Env({{"CONVSTATE_DB_POOL_SIZE", "many"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("CONVSTATE_DB_POOL_SIZE"), std::string::npos)
      << bad.status();
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/from_env.conf";
  std::ofstream(path) << "port = 6100\nworker_threads = 5\n";
  auto c = LoadConfig({"--auth=none"}, Env({{"CONVSTATE_CONFIG", path},
                                            {"CONVSTATE_PORT", "6000"},
                                            {"CONVSTATE_WORKER_THREADS", "7"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.port, 6100);  // The file wins over the variables.
  EXPECT_EQ(c->server.worker_threads, 5);
}

TEST(LoadConfigTest, SummarizerKeyComesFromItsVariableOrFile) {
  auto c = LoadConfig({"--auth=none", "--summarizer_url=http://127.0.0.1:9/v1", "--summarizer_retries=1"},
                      Env({{"CONVSTATE_SUMMARIZER_API_KEY", "sk-env"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->summarizer.llm.base_url, "http://127.0.0.1:9/v1");
  EXPECT_EQ(c->summarizer.llm.api_key, "sk-env");
  EXPECT_EQ(c->summarizer.llm.max_retries, 1);
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/key";
  std::ofstream(path) << "sk-file\n";
  // Readable by every user: refused, without the key in the message.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  c = LoadConfig({"--auth=none", "--summarizer_api_key_file=" + path}, kNoEnv);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message().find("sk-file"), std::string::npos);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  c = LoadConfig({"--auth=none", "--summarizer_api_key_file=" + path}, Env({{"CONVSTATE_SUMMARIZER_API_KEY", "sk-env"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->summarizer.llm.api_key, "sk-file");
  c = LoadConfig({"--auth=none", "--summarizer_api_key_env=MY_KEY"}, Env({{"MY_KEY", "sk-mine"}}));
  EXPECT_EQ(c->summarizer.llm.api_key, "sk-mine");
}

TEST(LoadConfigTest, BadInputNamesTheSetting) {
  EXPECT_EQ(LoadConfig({"--auth=none", "--port=70000"}, kNoEnv).status().message(),
            "--port: expected a whole number in 0..65535, got '70000'");
  EXPECT_EQ(LoadConfig({"--auth=none", "--nope=1"}, kNoEnv).status().message(), "--nope: unknown setting");
  EXPECT_EQ(LoadConfig({"--auth=none", "--storage=redis"}, kNoEnv).status().message(),
            "--storage: expected postgres or memory, got 'redis'");
  EXPECT_EQ(LoadConfig({"--auth=none", "--migrate=maybe"}, kNoEnv).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfig({"--auth=none", "stray"}, kNoEnv).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfig({"--auth=none", "--context_cache_mb=-1"}, kNoEnv).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto cache = LoadConfig({"--auth=none", "--context_cache_mb=0", "--bench_echo"}, kNoEnv);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(cache->server.service.context_cache_bytes, 0);
  EXPECT_TRUE(cache->server.bench_echo);
  EXPECT_EQ(LoadConfig({"--auth=none", "--config=/nonexistent/file"}, kNoEnv).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoadConfigTest, ASummarizerThatCannotFinishInsideTheLeaseIsRefused) {
  // The defaults fit: 12 s x (2 + 2) plus backoff inside a 60 s lease.
  auto ok = LoadConfig({"--auth=none", "--summarizer_url=http://127.0.0.1:1/v1"}, kNoEnv);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_LE(WorstCaseDuration(ok->summarizer.llm),
            ok->server.service.compaction.lease - LeaseMargin(ok->server.service.compaction.lease));
  auto bad = LoadConfig({"--auth=none", "--summarizer_url=http://127.0.0.1:1/v1", "--summarizer_timeout_ms=20000",
                         "--compaction_lease_ms=30000"},
                        kNoEnv);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--compaction_lease_ms"), absl::string_view::npos)
      << bad.status();
  // Without an LLM there is nothing to fit.
  EXPECT_TRUE(LoadConfig({"--auth=none", "--summarizer_timeout_ms=20000", "--compaction_lease_ms=30000"}, kNoEnv)
                  .ok());
}

TEST(LoadConfigTest, HelpListsEverySetting) {
  auto c = LoadConfig({"--auth=none", "--help"}, kNoEnv);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->help);
  const std::string usage = ConfigUsage();
  for (const char* name : {"--port", "--database_url", "--max_item_bytes", "--shutdown_grace_ms"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

TEST(LoadConfigTest, OpenTelemetryFromTheEnvironmentAndFlags) {
  auto c = LoadConfig({"--auth=none"}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"},
                               {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                               {"OTEL_TRACES_SAMPLER_ARG", "0.1"},
                               {"OTEL_SERVICE_NAME", "state"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->telemetry.traces_url, "http://collector:4318/v1/traces");
  EXPECT_EQ(c->telemetry.service_name, "state");
  EXPECT_DOUBLE_EQ(c->telemetry.sampler.ratio, 0.1);
  EXPECT_TRUE(c->telemetry.sampler.parent_based);

  // Flags win; the sampler's name and ratio combine with the environment's.
  c = LoadConfig({"--auth=none", "--otel_endpoint=http://other:4318/", "--otel_sampler_arg=0.5",
                  "--otel_metrics_endpoint=", "--shutdown_drain_ms=3000"},
                 Env({{"OTEL_TRACES_SAMPLER", "traceidratio"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->telemetry.traces_url, "http://other:4318/v1/traces");
  EXPECT_TRUE(c->telemetry.metrics_url.empty());
  EXPECT_DOUBLE_EQ(c->telemetry.sampler.ratio, 0.5);
  EXPECT_FALSE(c->telemetry.sampler.parent_based);
  EXPECT_EQ(c->server.drain, absl::Seconds(3));

  EXPECT_FALSE(LoadConfig({"--auth=none", "--otel_sampler=sometimes"}, kNoEnv).ok());
  EXPECT_FALSE(LoadConfig({"--auth=none"}, Env({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}})).ok());
  EXPECT_TRUE(LoadConfig({"--auth=none", "--otel_disabled"}, kNoEnv)->telemetry.disabled);
}

TEST(LoadConfigTest, AMigrationJobNeedsNoAuthenticationSetting) {
  EXPECT_EQ(LoadConfig({}, kNoEnv).status().code(), absl::StatusCode::kInvalidArgument);
  auto c = LoadConfig({"--migrate_only", "--database_url=postgresql://db/x"}, kNoEnv);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->migrate_only);
}

TEST(LoadConfigTest, NoAuthenticationOffLoopbackIsRefusedUnlessSaidTwice) {
  for (const char* host : {"--host=0.0.0.0", "--host=10.1.2.3", "--host=::"}) {
    auto refused = LoadConfig({"--auth=none", host}, kNoEnv);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << host;
    EXPECT_NE(refused.status().message().find("--access_file"), std::string::npos);
    EXPECT_TRUE(LoadConfig({"--auth=none", host, "--allow_auth_none_on_network"}, kNoEnv).ok())
        << host;
  }
  for (const char* host : {"--host=127.0.0.1", "--host=localhost", "--host=::1", "--host=127.0.1.1"}) {
    EXPECT_TRUE(LoadConfig({"--auth=none", host}, kNoEnv).ok()) << host;
  }
}

TEST(LoadConfigTest, KeysOthersMayWriteAreRefused) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/writable_key";
  std::ofstream(path) << "sk-file\n";
  ASSERT_EQ(chmod(path.c_str(), 0620), 0);
  auto c = LoadConfig({"--auth=none", "--summarizer_api_key_file=" + path}, kNoEnv);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
}

}  // namespace
}  // namespace convstate
