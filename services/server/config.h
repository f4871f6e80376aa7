#ifndef CONVSTATE_SERVICES_SERVER_CONFIG_H_
#define CONVSTATE_SERVICES_SERVER_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/compaction/summarizers/factory.h"
#include "services/server/server.h"
#include "services/telemetry/options.h"
#include "storage/migrator.h"
#include "storage/postgres_storage.h"

namespace convstate {

// Everything convstate_server can be told.
struct ServerConfig {
  ServerOptions server;
  // "postgres" or "memory".
  std::string storage = "postgres";
  PostgresOptions postgres;
  // Apply pending migrations at start-up.
  bool migrate = true;
  // Apply pending migrations, then exit.
  bool migrate_only = false;
  // Hash partitions of the per-conversation tables, decided at the
  // database's first start.
  SchemaLayout layout;
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Model profiles file (text format); empty for the built-in profiles.
  std::string model_profiles;
  // Where the tokenizer vocabularies (*.tiktoken) are.
  std::string vocab_dir;
  // Which summarizer writes summaries (see NewSummarizer): the one
  // summarizer.name names, else the built-in extractive one unless
  // summarizer.llm.base_url is set.
  SummarizerConfig summarizer;
  // Where the API key comes from: this environment variable, or a file.
  std::string summarizer_api_key_env = "CONVSTATE_SUMMARIZER_API_KEY";
  std::string summarizer_api_key_file;
  // Where the key of redacted items' digests is; empty: no digests.
  std::string redaction_key_file;
  // Traces and metrics over OTLP: the OTEL_* environment, then --otel_*.
  telemetry::TelemetryOptions telemetry;
  // --otel_sampler and --otel_sampler_arg as given (applied last).
  std::string otel_sampler;
  std::string otel_sampler_arg;
  bool help = false;
  // --auth=none: no authentication (else --access_file is required).
  bool auth_none = false;
  // --auth=none is refused on an address other than loopback unless this
  // is set.
  bool allow_auth_none_on_network = false;
  // Whether --host was given; without it the host is 127.0.0.1, or 0.0.0.0
  // with TLS.
  bool host_given = false;
};

// Reads an environment variable; null when unset.
using GetEnv = std::function<const char*(const char*)>;

// Builds the configuration from, in increasing priority: defaults, the
// OTEL_* variables of the OpenTelemetry specification, CONVSTATE_<NAME>
// for every flag --name (its name in capitals; an empty one counts as
// unset), the file CONVSTATE_CONFIG names, a file named by --config=
// (lines of `name = value`, `#` comments), and --name=value flags.
// INVALID_ARGUMENT naming the flag for an unknown name or a bad value.
absl::StatusOr<ServerConfig> LoadConfig(const std::vector<std::string>& args, const GetEnv& env);

// One line per flag: name, default, meaning.
std::string ConfigUsage();

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_SERVER_CONFIG_H_
