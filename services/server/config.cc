#include "services/server/config.h"

#include <unistd.h>

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/common/secret_file.h"
#include "services/common/status_macros.h"

namespace convstate {
namespace {

struct Flag {
  const char* name;
  const char* help;
  std::function<absl::Status(ServerConfig&, const std::string&)> set;
};

// Setter for an integer field reached through `field`, bounded to [min, max].
template <typename T>
std::function<absl::Status(ServerConfig&, const std::string&)> IntField(
    std::function<T&(ServerConfig&)> field, int64_t min, int64_t max) {
  return [field, min, max](ServerConfig& c, const std::string& v) -> absl::Status {
    int64_t n;
    if (!absl::SimpleAtoi(v, &n) || n < min || n > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected a whole number in ", min, "..", max, ", got '", v, "'"));
    }
    field(c) = static_cast<T>(n);
    return absl::OkStatus();
  };
}

std::function<absl::Status(ServerConfig&, const std::string&)> BoolField(
    std::function<bool&(ServerConfig&)> field) {
  return [field](ServerConfig& c, const std::string& v) -> absl::Status {
    const std::string lower = absl::AsciiStrToLower(v);
    if (lower == "true" || lower == "1" || lower == "yes" || lower.empty()) {
      field(c) = true;
    } else if (lower == "false" || lower == "0" || lower == "no") {
      field(c) = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("expected true or false, got '", v, "'"));
    }
    return absl::OkStatus();
  };
}

std::function<absl::Status(ServerConfig&, const std::string&)> MillisField(
    std::function<absl::Duration&(ServerConfig&)> field) {
  return [field](ServerConfig& c, const std::string& v) -> absl::Status {
    int64_t ms;
    if (!absl::SimpleAtoi(v, &ms) || ms < 0) {
      return absl::InvalidArgumentError(absl::StrCat("expected milliseconds, got '", v, "'"));
    }
    field(c) = absl::Milliseconds(ms);
    return absl::OkStatus();
  };
}

// A size given in whole MiB, from `min` to 1 TiB (1048576 MiB), kept in
// bytes.
std::function<absl::Status(ServerConfig&, const std::string&)> MebibyteField(
    std::function<int64_t&(ServerConfig&)> field, int64_t min) {
  return [field, min](ServerConfig& c, const std::string& v) -> absl::Status {
    int64_t mb = 0;
    if (!absl::SimpleAtoi(v, &mb) || mb < min || mb > (int64_t{1} << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("must be a whole number of MiB from ", min, " to 1048576"));
    }
    field(c) = mb << 20;
    return absl::OkStatus();
  };
}

constexpr int64_t kIntMax = 2147483647;

// Data table. Every flag: its name, its help, and how its value is read.
const std::vector<Flag>& Flags() {
  static const auto* const kFlags = new std::vector<Flag>{
      {"host",
       "address to listen on (default 127.0.0.1, loopback only, or 0.0.0.0 with --tls_cert)",
       [](ServerConfig& c, const std::string& v) {
         c.server.host = v;
         c.host_given = true;
         return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
       }},
      {"tls_cert", "PEM certificate chain to serve TLS with (with --tls_key); default plaintext",
       [](ServerConfig& c, const std::string& v) {
         c.server.tls.cert_file = v;
         return absl::OkStatus();
       }},
      {"tls_key", "PEM private key of --tls_cert; must not be readable by every user",
       [](ServerConfig& c, const std::string& v) {
         c.server.tls.key_file = v;
         return absl::OkStatus();
       }},
      {"tls_client_ca", "PEM CA that clients' certificates must chain to (mutual TLS)",
       [](ServerConfig& c, const std::string& v) {
         c.server.tls.client_ca_file = v;
         return absl::OkStatus();
       }},
      {"tls_client_auth",
       "with --tls_client_ca: require (default) or optional, a client certificate",
       [](ServerConfig& c, const std::string& v) {
         if (v != "require" && v != "optional") {
           return absl::InvalidArgumentError(
               absl::StrCat("expected require or optional, got '", v, "'"));
         }
         c.server.tls.require_client_cert = v == "require";
         return absl::OkStatus();
       }},
      {"tls_refresh_ms",
       "how often the TLS files are checked for changes and read again (default 5000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.server.tls.refresh; })},
      {"access_file",
       "who may call: bearer tokens and client certificates mapped to a tenant and a role, and "
       "tenants' limits (protos/convstate/config/v1/access.proto); must not be readable by "
       "every user",
       [](ServerConfig& c, const std::string& v) {
         c.server.access.access_file = v;
         return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
       }},
      {"auth",
       "access_file (default: every call needs a credential from --access_file) or none (no "
       "authentication, every tenant open to every caller: local development only)",
       [](ServerConfig& c, const std::string& v) {
         if (v != "none" && v != "access_file") {
           return absl::InvalidArgumentError(
               absl::StrCat("expected access_file or none, got '", v, "'"));
         }
         c.auth_none = v == "none";
         return absl::OkStatus();
       }},
      {"redaction_key_file",
       "a secret (at least 32 bytes) under which redacted items keep an HMAC-SHA-256 of what "
       "they held (Item.redacted_digest); default none, no digest is kept; must be private",
       [](ServerConfig& c, const std::string& v) {
         c.redaction_key_file = v;
         return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
       }},
      {"allow_auth_none_on_network",
       "with --auth=none, listen on an address other hosts reach (default false: refused)",
       BoolField([](ServerConfig& c) -> bool& { return c.allow_auth_none_on_network; })},
      {"public_health", "grpc.health.v1.Health answers callers without a credential (default false)",
       BoolField([](ServerConfig& c) -> bool& { return c.server.access.public_health; })},
      {"public_reflection",
       "server reflection answers callers without a credential (default false)",
       BoolField([](ServerConfig& c) -> bool& { return c.server.access.public_reflection; })},
      {"access_refresh_ms", "how often --access_file is checked for changes (default 5000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.server.access.refresh; })},
      {"port", "port to listen on; 0 picks a free one (default 50051)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.port; }, 0, 65535)},
      {"health_port",
       "also serve grpc.health.v1 alone on this port, plaintext and without a credential, for "
       "probes that speak neither TLS nor tokens such as the kubelet's (default 0: none)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.health_port; }, 0, 65535)},
      {"storage", "postgres or memory (default postgres; memory loses data at exit)",
       [](ServerConfig& c, const std::string& v) {
         if (v != "postgres" && v != "memory") {
           return absl::InvalidArgumentError(absl::StrCat("expected postgres or memory, got '", v, "'"));
         }
         c.storage = v;
         return absl::OkStatus();
       }},
      {"database_url", "libpq URL of the PostgreSQL database (or CONVSTATE_DATABASE_URL)",
       [](ServerConfig& c, const std::string& v) {
         c.postgres.database_url = v;
         return absl::OkStatus();
       }},
      {"db_pool_size", "database connections at most (default 8)",
       IntField<int>([](ServerConfig& c) -> int& { return c.postgres.pool_size; }, 1, 1000)},
      {"db_connect_timeout_ms", "time to open one database connection (default 5000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.postgres.connect_timeout; })},
      {"db_hash_partitions",
       "at a database's first start: lay out items, summary chunks, audit rows and idempotency "
       "keys as this many hash partitions of the conversation key (0: plain tables); later "
       "starts must ask for the same or leave it unset (default: unset)",
       [](ServerConfig& c, const std::string& v) {
         int n = 0;
         if (!absl::SimpleAtoi(v, &n) || n < 0 || n > 1024) {
           return absl::InvalidArgumentError(absl::StrCat("expected 0 to 1024, got '", v, "'"));
         }
         c.layout.hash_partitions = n;
         return absl::OkStatus();
       }},
      {"db_pooler",
       "none (default: connections to PostgreSQL itself) or transaction (the URL leads to a "
       "pooler such as PgBouncer in transaction mode: no prepared statements or session "
       "settings)",
       [](ServerConfig& c, const std::string& v) {
         if (v != "none" && v != "transaction") {
           return absl::InvalidArgumentError(
               absl::StrCat("expected none or transaction, got '", v, "'"));
         }
         c.postgres.pooler = v == "transaction";
         return absl::OkStatus();
       }},
      {"db_shared_forks",
       "a fork shares its source's items instead of copying them (default true; false on "
       "Citus, where each statement must stay on its conversation's shard)",
       BoolField([](ServerConfig& c) -> bool& { return c.postgres.shared_forks; })},
      {"db_default_timeout_ms", "statement timeout for calls without a deadline (default 30000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.postgres.default_timeout; })},
      {"migrate", "apply pending migrations at start-up (default true)",
       BoolField([](ServerConfig& c) -> bool& { return c.migrate; })},
      {"migrate_only", "apply pending migrations and exit (default false)",
       BoolField([](ServerConfig& c) -> bool& { return c.migrate_only; })},
      {"worker_threads", "threads that run calls (default 16)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.worker_threads; }, 1, 1024)},
      {"max_queued_calls", "calls waiting for a worker before UNAVAILABLE (default 10000)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.max_queued_calls; }, 1,
                     kIntMax)},
      {"max_message_bytes", "largest gRPC message (default 16777216)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.max_message_bytes; }, 1024,
                     kIntMax)},
      {"max_item_bytes", "largest item content (default 1048576)",
       IntField<int64_t>(
           [](ServerConfig& c) -> int64_t& { return c.server.service.limits.max_item_bytes; }, 1,
           kIntMax)},
      {"max_items_per_append", "items in one AppendTurn (default 256)",
       IntField<int>(
           [](ServerConfig& c) -> int& { return c.server.service.limits.max_items_per_append; },
           1, 100000)},
      {"max_request_content_bytes", "content bytes in one request (default 8388608)",
       IntField<int64_t>(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.limits.max_request_content_bytes;
           },
           1, kIntMax)},
      {"max_system_prompt_bytes", "system prompt / pinned instructions size (default 1048576)",
       IntField<int64_t>(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.limits.max_system_prompt_bytes;
           },
           0, kIntMax)},
      {"max_page_bytes",
       "bytes of text one page of a list holds at most, after its first row (default 4194304)",
       IntField<int64_t>(
           [](ServerConfig& c) -> int64_t& { return c.server.service.limits.max_page_bytes; },
           1024, int64_t{1} << 30)},
      {"max_conversation_mb",
       "MiB one conversation stores at most (items, prompts, summaries); an append past it "
       "gets RESOURCE_EXHAUSTED. It bounds every read of a conversation's items, with "
       "compaction disabled too (default 256)",
       MebibyteField(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.limits.max_conversation_bytes;
           },
           1)},
      {"max_view_mb",
       "MiB of items one read of a conversation's view takes at most (its live and pinned "
       "items); past it, the calls that read the view get RESOURCE_EXHAUSTED until it is "
       "compacted (default 64)",
       MebibyteField(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.limits.max_view_bytes;
           },
           1)},
      {"max_pending_items", "items in BuildContext's pending input (default 64)",
       IntField<int>(
           [](ServerConfig& c) -> int& { return c.server.service.limits.max_pending_items; }, 0,
           100000)},
      {"max_metadata_entries", "metadata entries per conversation or item (default 64)",
       IntField<int>(
           [](ServerConfig& c) -> int& { return c.server.service.limits.max_metadata_entries; },
           0, 100000)},
      {"model_profiles", "model profiles file, text format (default: the built-in profiles)",
       [](ServerConfig& c, const std::string& v) {
         c.model_profiles = v;
         return absl::OkStatus();
       }},
      {"vocab_dir",
       "directory of cl100k_base.tiktoken and o200k_base.tiktoken (or CONVSTATE_VOCAB_DIR; "
       "default ~/.cache/convstate/vocab/gpt-tokenizer-4.0.0)",
       [](ServerConfig& c, const std::string& v) {
         c.vocab_dir = v;
         return absl::OkStatus();
       }},
      {"summarizer",
       "which summarizer writes summaries, by name: extractive or llm (default: llm when "
       "--summarizer_url is set, else extractive)",
       [](ServerConfig& c, const std::string& v) -> absl::Status {
         RETURN_IF_ERROR(BuiltInSummarizers().Find(v).status());
         c.summarizer.name = v;
         return absl::OkStatus();
       }},
      {"summarizer_url",
       "API root for LLM summaries, e.g. http://127.0.0.1:8000/v1 or "
       "https://api.anthropic.com/v1 (default: none, the built-in extractive summarizer)",
       [](ServerConfig& c, const std::string& v) {
         c.summarizer.llm.base_url = v;
         return absl::OkStatus();
       }},
      {"summarizer_api",
       "the API --summarizer_url speaks: openai_chat (default; OpenAI, vLLM, llama.cpp, Ollama, "
       "LiteLLM) or anthropic_messages; a model profile's summarizer.api wins",
       [](ServerConfig& c, const std::string& v) {
         std::optional<LlmApi> api = LlmApiFromName(v);
         if (!api.has_value()) {
           return absl::InvalidArgumentError(
               absl::StrCat("expected openai_chat or anthropic_messages, got '", v, "'"));
         }
         c.summarizer.llm.api = *api;
         return absl::OkStatus();
       }},
      {"summarizer_max_response_bytes",
       "largest summarizer answer read; a larger one is a failed attempt (default 4194304)",
       IntField<int64_t>(
           [](ServerConfig& c) -> int64_t& { return c.summarizer.llm.max_response_bytes; }, 1024,
           int64_t{1} << 30)},
      {"summarizer_model", "model for summaries when the profile names none",
       [](ServerConfig& c, const std::string& v) {
         c.summarizer.llm.default_model = v;
         return absl::OkStatus();
       }},
      {"summarizer_api_key_env",
       "environment variable holding the summarizer API key (default "
       "CONVSTATE_SUMMARIZER_API_KEY)",
       [](ServerConfig& c, const std::string& v) {
         c.summarizer_api_key_env = v;
         return absl::OkStatus();
       }},
      {"summarizer_api_key_file", "file holding the summarizer API key (wins over the variable)",
       [](ServerConfig& c, const std::string& v) {
         c.summarizer_api_key_file = v;
         return absl::OkStatus();
       }},
      {"summarizer_timeout_ms", "per-attempt timeout of the LLM summarizer (default 12000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.summarizer.llm.timeout; })},
      {"summarizer_retries", "retries after a failed attempt (default 2)",
       IntField<int>([](ServerConfig& c) -> int& { return c.summarizer.llm.max_retries; }, 0, 10)},
      {"summarizer_failure_threshold", "failed calls in a row that open the circuit (default 3)",
       IntField<int>([](ServerConfig& c) -> int& { return c.summarizer.llm.failure_threshold; }, 1,
                     1000)},
      {"summarizer_open_ms", "how long the circuit stays open (default 30000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.summarizer.llm.open_for; })},
      {"summarizer_fallback",
       "while the circuit is open, summarize extractively (true) or truncate (false); default true",
       BoolField([](ServerConfig& c) -> bool& { return c.summarizer.fallback; })},
      {"compaction_lease_ms",
       "how long one compaction may hold a conversation; a replica that dies frees it after "
       "this; summarizer calls end before it does (default 60000)",
       MillisField([](ServerConfig& c) -> absl::Duration& {
         return c.server.service.compaction.lease;
       })},
      {"background_compaction",
       "compact in the background when a conversation enters the soft band; a BuildContext "
       "whose view is below the emergency band then waits for no compaction (default true)",
       BoolField([](ServerConfig& c) -> bool& { return c.server.service.background_compaction; })},
      {"background_threads",
       "threads that run background compactions, one conversation each at a time (default 4)",
       IntField<int>([](ServerConfig& c) -> int& { return c.server.service.background_threads; },
                     1, 256)},
      {"compaction_waiting_calls",
       "calls per conversation that wait for a compaction in flight and share what it stored; "
       "the calls past them get the view as it stands, truncated if it does not fit (default 4)",
       IntField<int>([](ServerConfig& c) -> int& {
         return c.server.service.compaction.waiting_calls;
       }, 1, 256)},
      {"idle_compaction",
       "compact a conversation above its idle band once its prompt cache has gone cold "
       "(its profile's prompt_cache_ttl_s after its last BuildContext); default true",
       BoolField([](ServerConfig& c) -> bool& { return c.server.service.idle_compaction; })},
      {"idle_band", "the band from which idle compaction applies: soft, hard or emergency "
                    "(default soft)",
       [](ServerConfig& c, const std::string& v) {
         if (v == "soft") {
           c.server.service.idle_band = Band::kSoft;
         } else if (v == "hard") {
           c.server.service.idle_band = Band::kHard;
         } else if (v == "emergency") {
           c.server.service.idle_band = Band::kEmergency;
         } else {
           return absl::InvalidArgumentError("must be soft, hard or emergency");
         }
         return absl::OkStatus();
       }},
      {"idle_scan_ms", "how often each replica looks for conversations due for idle compaction "
                       "(default 5000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.server.service.idle_scan; })},
      {"proposal_ttl_ms",
       "how long a Compact dry run's proposal can be applied, on any replica (default 1800000)",
       MillisField([](ServerConfig& c) -> absl::Duration& {
         return c.server.service.proposal_ttl;
       })},
      {"context_cache_mb",
       "MiB of conversations' contexts kept between calls, checked against PostgreSQL on "
       "every call; 0 keeps none (default 256)",
       MebibyteField(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.context_cache_bytes;
           },
           0)},
      {"history_cache_mb",
       "MiB of conversations' histories each replica keeps to recall from (each brought up to "
       "date from PostgreSQL on every call that recalls, read again after an erasure); 0 keeps "
       "none, and every recall runs the search statement (default 256)",
       MebibyteField(
           [](ServerConfig& c) -> int64_t& {
             return c.server.service.history_cache_bytes;
           },
           0)},
      {"bench_echo",
       "also serve /convstate.bench.Echo/Echo, a same-size echo that benchmarks compare "
       "BuildContext with (default false)",
       BoolField([](ServerConfig& c) -> bool& { return c.server.bench_echo; })},
      {"replica_id", "this replica's name in compaction leases (default host:pid)",
       [](ServerConfig& c, const std::string& v) {
         c.server.service.compaction.holder = v;
         return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
       }},
      {"shutdown_grace_ms", "how long calls in flight may finish at shutdown (default 10000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.shutdown_grace; })},
      {"shutdown_drain_ms",
       "at SIGTERM, how long health reports NOT_SERVING while calls are still taken, so "
       "that load balancers stop sending first (default 0)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.server.drain; })},
      {"otel_disabled",
       "export no traces or metrics (OTEL_SDK_DISABLED; default false)",
       BoolField([](ServerConfig& c) -> bool& { return c.telemetry.disabled; })},
      {"otel_endpoint",
       "OTLP/HTTP collector base URL; /v1/traces and /v1/metrics are appended "
       "(OTEL_EXPORTER_OTLP_ENDPOINT; default http://localhost:4318)",
       [](ServerConfig& c, const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("must not be empty");
         c.telemetry.traces_url = telemetry::SignalUrl(v, "traces");
         c.telemetry.metrics_url = telemetry::SignalUrl(v, "metrics");
         return absl::OkStatus();
       }},
      {"otel_traces_endpoint",
       "full URL for traces, used as given; empty: no traces "
       "(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)",
       [](ServerConfig& c, const std::string& v) {
         c.telemetry.traces_url = v;
         return absl::OkStatus();
       }},
      {"otel_metrics_endpoint",
       "full URL for metrics, used as given; empty: no metrics "
       "(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)",
       [](ServerConfig& c, const std::string& v) {
         c.telemetry.metrics_url = v;
         return absl::OkStatus();
       }},
      {"otel_service_name", "service.name of the resource (OTEL_SERVICE_NAME; default convstate)",
       [](ServerConfig& c, const std::string& v) {
         c.telemetry.service_name = v;
         return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
       }},
      {"otel_sampler",
       "always_on, always_off, traceidratio or parentbased_<one of them>, with "
       "--otel_sampler_arg the ratio (OTEL_TRACES_SAMPLER[_ARG]; default parentbased_always_on)",
       [](ServerConfig& c, const std::string& v) {
         c.otel_sampler = v;
         return absl::OkStatus();
       }},
      {"otel_sampler_arg", "the traceidratio sampler's ratio in [0, 1] (OTEL_TRACES_SAMPLER_ARG)",
       [](ServerConfig& c, const std::string& v) {
         c.otel_sampler_arg = v;
         return absl::OkStatus();
       }},
      {"otel_metric_interval_ms",
       "how often metrics are exported (OTEL_METRIC_EXPORT_INTERVAL; default 60000)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.telemetry.metric_interval; })},
      {"health_interval_ms",
       "how often health checks the database; health is NOT_SERVING while it does not answer "
       "(default 2000; 0: never)",
       MillisField([](ServerConfig& c) -> absl::Duration& { return c.server.health_interval; })},
  };
  return *kFlags;
}

absl::Status Set(ServerConfig& config, const std::string& name, const std::string& value,
                 const std::string& where) {
  for (const Flag& f : Flags()) {
    if (name == f.name) {
      return Annotate(f.set(config, value), absl::StrCat(where, name));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(where, name, ": unknown setting"));
}

absl::Status ReadFile(ServerConfig& config, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("config: cannot read ", path));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || absl::StartsWith(text, "#")) continue;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected name = value"));
    }
    const std::string name(absl::StripAsciiWhitespace(text.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(text.substr(eq + 1)));
    RETURN_IF_ERROR(Set(config, name, value, absl::StrCat(path, ":", number, ": ")));
  }
  return absl::OkStatus();
}

// The variable a flag can also come from: CONVSTATE_ and its name in
// capitals (--db_pool_size: CONVSTATE_DB_POOL_SIZE).
std::string EnvironmentName(absl::string_view flag) {
  return absl::StrCat("CONVSTATE_", absl::AsciiStrToUpper(flag));
}

// Every flag whose CONVSTATE_ variable is set and not empty, and the file
// CONVSTATE_CONFIG names (read after them, so it wins over them).
absl::Status ReadEnvironment(ServerConfig& config, const GetEnv& env) {
  for (const Flag& f : Flags()) {
    const std::string name = EnvironmentName(f.name);
    const char* value = env(name.c_str());
    if (value == nullptr || *value == '\0') continue;
    RETURN_IF_ERROR(Annotate(f.set(config, value), absl::StrCat(name, " (--", f.name, ")")));
  }
  const char* file = env("CONVSTATE_CONFIG");
  if (file != nullptr && *file != '\0') RETURN_IF_ERROR(ReadFile(config, file));
  return absl::OkStatus();
}

}  // namespace

namespace {

// A file a secret lives in: it must exist, be readable, and not be
// readable by every user.
absl::Status CheckSecretFile(const char* flag, const std::string& path) {
  return convstate::CheckSecretFile(absl::StrCat("--", flag), path);
}

absl::Status CheckReadable(const char* flag, const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  }
  return absl::OkStatus();
}

// TLS settings that go together, files that can be read, a private key
// that is private; and the default host: every interface with TLS,
// loopback without.
absl::Status CheckTls(ServerConfig& config) {
  const TlsOptions& tls = config.server.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key: give both or neither");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError("--tls_client_ca: needs --tls_cert and --tls_key");
  }
  if (tls.enabled()) {
    RETURN_IF_ERROR(CheckReadable("tls_cert", tls.cert_file));
    RETURN_IF_ERROR(CheckSecretFile("tls_key", tls.key_file));
    if (!tls.client_ca_file.empty()) {
      RETURN_IF_ERROR(CheckReadable("tls_client_ca", tls.client_ca_file));
    }
    if (!config.host_given) config.server.host = "0.0.0.0";
  }
  return absl::OkStatus();
}

// True for addresses only this machine reaches.
bool IsLoopback(absl::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" ||
         absl::StartsWith(host, "127.");
}

// Authentication is chosen, not defaulted away: an access file, or
// --auth=none said out loud (and, off loopback, said twice).
absl::Status CheckAccess(const ServerConfig& config) {
  const std::string& file = config.server.access.access_file;
  if (config.auth_none && !file.empty()) {
    return absl::InvalidArgumentError("--auth=none and --access_file: give one or the other");
  }
  if (!config.auth_none && file.empty()) {
    return absl::InvalidArgumentError(
        "--access_file: required (who may call, see protos/convstate/config/v1/access.proto); "
        "--auth=none runs without authentication, for local development only");
  }
  if (!file.empty()) RETURN_IF_ERROR(CheckSecretFile("access_file", file));
  if (config.auth_none && !IsLoopback(config.server.host) && !config.allow_auth_none_on_network) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--auth=none on ", config.server.host,
        " opens every tenant's conversations to anyone who reaches that address; give "
        "--access_file, listen on loopback (--host=127.0.0.1), or say "
        "--allow_auth_none_on_network=true if a network of your own stands in front"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerConfig> LoadConfig(const std::vector<std::string>& args, const GetEnv& env) {
  ServerConfig config;
  {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    config.server.service.compaction.holder = absl::StrCat(host, ":", getpid());
  }
  // CONVSTATE_VOCAB_DIR and CONVSTATE_DATABASE_URL, as every flag's
  // variable, are read by ReadEnvironment.
  if (const char* home = env("HOME")) {
    config.vocab_dir = absl::StrCat(home, "/.cache/convstate/vocab/gpt-tokenizer-4.0.0");
  }
  ASSIGN_OR_RETURN(config.telemetry, telemetry::OptionsFromEnvironment(env));
  RETURN_IF_ERROR(ReadEnvironment(config, env));
  std::vector<std::pair<std::string, std::string>> flags;
  for (const std::string& arg : args) {
    absl::string_view a = arg;
    if (a == "--help" || a == "-h") {
      config.help = true;
      continue;
    }
    if (!absl::ConsumePrefix(&a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    const size_t eq = a.find('=');
    std::string name(a.substr(0, eq));
    std::string value = eq == absl::string_view::npos ? "" : std::string(a.substr(eq + 1));
    if (name == "config") {
      RETURN_IF_ERROR(ReadFile(config, value));
    } else {
      flags.emplace_back(std::move(name), std::move(value));
    }
  }
  for (const auto& [name, value] : flags) RETURN_IF_ERROR(Set(config, name, value, "--"));
  if (!config.otel_sampler.empty() || !config.otel_sampler_arg.empty()) {
    const char* name = env("OTEL_TRACES_SAMPLER");
    const char* arg = env("OTEL_TRACES_SAMPLER_ARG");
    absl::StatusOr<telemetry::Sampler> sampler = telemetry::Sampler::FromNames(
        config.otel_sampler.empty() ? (name ? name : "") : config.otel_sampler,
        config.otel_sampler_arg.empty() ? (arg ? arg : "") : config.otel_sampler_arg);
    if (!sampler.ok()) return Annotate(sampler.status(), "--otel_sampler");
    config.telemetry.sampler = *sampler;
  }
  // A migration job serves no call: it needs neither TLS nor an access rule.
  if (!config.migrate_only) {
    RETURN_IF_ERROR(CheckTls(config));
    RETURN_IF_ERROR(CheckAccess(config));
  }
  if (!config.redaction_key_file.empty()) {
    RETURN_IF_ERROR(CheckSecretFile("redaction_key_file", config.redaction_key_file));
    std::ifstream in(config.redaction_key_file, std::ios::binary);
    std::stringstream key;
    key << in.rdbuf();
    config.server.service.redaction_key = std::string(absl::StripAsciiWhitespace(key.str()));
    if (config.server.service.redaction_key.size() < 32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--redaction_key_file: ", config.redaction_key_file,
          " holds fewer than 32 bytes; a short key can be guessed (e.g. openssl rand -hex 32)"));
    }
  }
  // The summarizer's API key: from its file, else its variable. Never logged.
  if (!config.summarizer_api_key_file.empty()) {
    RETURN_IF_ERROR(CheckSecretFile("summarizer_api_key_file", config.summarizer_api_key_file));
    std::ifstream in(config.summarizer_api_key_file);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--summarizer_api_key_file: cannot read ", config.summarizer_api_key_file));
    }
    std::getline(in, config.summarizer.llm.api_key);
    config.summarizer.llm.api_key =
        std::string(absl::StripAsciiWhitespace(config.summarizer.llm.api_key));
  } else if (const char* key = env(config.summarizer_api_key_env.c_str())) {
    config.summarizer.llm.api_key = key;
  }
  // A summarizer call must end before the compaction's lease does, or its
  // work is discarded and another replica calls the same failing LLM again.
  if (!config.summarizer.llm.base_url.empty()) {
    const absl::Duration lease = config.server.service.compaction.lease;
    const absl::Duration budget = WorstCaseDuration(config.summarizer.llm);
    if (budget > lease - LeaseMargin(lease)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--summarizer_timeout_ms x (--summarizer_retries + 2) plus backoff (",
          absl::FormatDuration(budget), ") must fit in --compaction_lease_ms less ",
          absl::FormatDuration(LeaseMargin(lease)), " (",
          absl::FormatDuration(lease - LeaseMargin(lease)),
          "): raise the lease, or lower the timeout or the retries"));
    }
  }
  return config;
}

std::string ConfigUsage() {
  std::string out =
      "usage: convstate_server [--config=FILE] [--name=value ...]\n"
      "A FILE holds `name = value` lines with the same names; flags win over it.\n"
      "Every flag can also come from the environment: CONVSTATE_ and its name in capitals\n"
      "(--db_pool_size: CONVSTATE_DB_POOL_SIZE; CONVSTATE_CONFIG names a FILE); the file\n"
      "and the flags win over it. An empty variable counts as unset.\n\n";
  for (const Flag& f : Flags()) absl::StrAppend(&out, "  --", f.name, "\n      ", f.help, "\n");
  absl::StrAppend(
      &out,
      "\nEnvironment (flags win over it):\n"
      "  CONVSTATE_<FLAG> for every flag above; CONVSTATE_SUMMARIZER_API_KEY (the key)\n"
      "  OpenTelemetry (traces and metrics over OTLP/HTTP with protobuf bodies):\n"
      "    OTEL_SDK_DISABLED                      true: export nothing\n"
      "    OTEL_EXPORTER_OTLP_ENDPOINT            base URL; /v1/traces and /v1/metrics are appended\n"
      "    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT     full URL for traces, used as given\n"
      "    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT    full URL for metrics, used as given\n"
      "    OTEL_EXPORTER_OTLP_HEADERS             k=v,... sent with every export (and _TRACES_/_METRICS_)\n"
      "    OTEL_EXPORTER_OTLP_TIMEOUT             ms per export request (default 10000; and per signal)\n"
      "    OTEL_EXPORTER_OTLP_CERTIFICATE         CA bundle for an https collector\n"
      "    OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_KEY   client TLS (PEM)\n"
      "    OTEL_EXPORTER_OTLP_PROTOCOL            only http/protobuf\n"
      "    OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER   otlp (default) or none\n"
      "    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES    the resource (k=v,...)\n"
      "    OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG   as --otel_sampler\n"
      "    OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE\n"
      "                                           span batching (5000 ms, 2048, 512)\n"
      "    OTEL_METRIC_EXPORT_INTERVAL            ms between metric exports (default 60000)\n");
  return out;
}

}  // namespace convstate
