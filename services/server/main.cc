// convstate_server: serves convstate.v1.ConversationState over gRPC.
// See `convstate_server --help` for configuration.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "migrations/embedded_migrations.h"
#include "services/common/log.h"
#include "services/common/clock.h"
#include "services/compaction/summarizers/factory.h"
#include "services/profiles/model_registry.h"
#include "services/server/config.h"
#include "services/server/server.h"
#include "storage/memory_storage.h"
#include "storage/migrator.h"
#include "storage/postgres_storage.h"

namespace convstate {
namespace {

absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(const ServerConfig& config) {
  if (config.storage == "memory") {
    LogWarning("using in-memory storage: everything is lost when the server stops");
    return NewMemoryStorage();
  }
  if (config.postgres.database_url.empty()) {
    return absl::InvalidArgumentError(
        "database_url: required with --storage=postgres (flag, config file or "
        "CONVSTATE_DATABASE_URL)");
  }
  if (config.migrate || config.migrate_only) {
    auto report = ApplyMigrations(config.postgres.database_url, EmbeddedMigrations(),
                                  config.postgres.connect_timeout, config.layout);
    if (!report.ok()) return report.status();
    LogInfo("migrations: ", report->applied.size(), " applied, ",
            report->already_applied.size(), " already present; ",
            report->hash_partitions == 0
                ? std::string("plain tables")
                : absl::StrCat(report->hash_partitions, " hash partitions per table"));
  }
  return NewPostgresStorage(config.postgres);
}

int Run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ServerConfig> config =
      LoadConfig(args, [](const char* name) -> const char* { return std::getenv(name); });
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n\n%s", std::string(config.status().message()).c_str(),
                 ConfigUsage().c_str());
    return 2;
  }
  if (config->help) {
    std::fputs(ConfigUsage().c_str(), stdout);
    return 0;
  }

  // SIGINT and SIGTERM are taken by sigwait below, never by a handler: block
  // them before any thread starts so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<ModelRegistry>> models =
      config->model_profiles.empty()
          ? ModelRegistry::FromText(ModelRegistry::DefaultText(), config->vocab_dir)
          : ModelRegistry::FromFile(config->model_profiles, config->vocab_dir);
  if (!models.ok()) {
    LogError("cannot load model profiles: ", models.status().ToString());
    return 1;
  }
  LogInfo("model profiles: ", (*models)->profiles().size(), " loaded from ",
          config->model_profiles.empty() ? "the built-in defaults" : config->model_profiles);
  absl::StatusOr<std::unique_ptr<Storage>> storage = OpenStorage(*config);
  if (!storage.ok()) {
    LogError("cannot open storage: ", storage.status().ToString());
    return 1;
  }
  if (config->migrate_only) {
    LogInfo("migrations done");
    return 0;
  }
  std::unique_ptr<telemetry::Telemetry> telemetry =
      telemetry::Telemetry::Start(config->telemetry, config->server.service.compaction.holder);
  if (config->telemetry.disabled) {
    LogInfo("telemetry: disabled (OTEL_SDK_DISABLED)");
  } else {
    LogInfo("telemetry: traces to ",
            config->telemetry.traces_url.empty() ? "nowhere" : config->telemetry.traces_url,
            ", metrics to ",
            config->telemetry.metrics_url.empty() ? "nowhere" : config->telemetry.metrics_url,
            " every ", absl::FormatDuration(config->telemetry.metric_interval),
            ", service.name ", config->telemetry.service_name);
  }
  config->summarizer.llm.telemetry = telemetry.get();
  absl::StatusOr<std::unique_ptr<Summarizer>> summarizer =
      NewSummarizer(config->summarizer, Clock::Real());
  if (!summarizer.ok()) {
    LogError("cannot make the summarizer: ", summarizer.status().ToString());
    return 1;
  }
  LogInfo("summarizer: ", DescribeSummarizer(config->summarizer));
  absl::StatusOr<std::unique_ptr<Server>> server = Server::BuildAndStart(
      config->server, std::move(*models), std::move(*storage), std::move(*summarizer),
      std::move(telemetry));
  if (!server.ok()) {
    LogError("cannot start: ", server.status().ToString());
    return 1;
  }
  // Tools and tests wait for this exact line to learn the port.
  std::printf("convstate listening on %s\n", (*server)->address().c_str());
  std::fflush(stdout);
  LogInfo("serving convstate.v1.ConversationState on ", (*server)->address(), " with ",
          config->storage, " storage");

  int received = 0;
  sigwait(&signals, &received);
  LogInfo("received ", received == SIGINT ? "SIGINT" : "SIGTERM",
          ": finishing calls in flight, then stopping");
  (*server)->Shutdown(config->shutdown_grace);
  server->reset();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace convstate

int main(int argc, char** argv) { return convstate::Run(argc, argv); }
