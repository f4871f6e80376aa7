#include "storage/postgres_storage.h"

#include <memory>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/status_macros.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_storage_internal.h"

namespace convstate::pg {

const DbOperation& DbOperationOf(absl::string_view operation) {
  static const auto* const kOperations = new absl::flat_hash_map<std::string, DbOperation>{
      {"ping", {"SELECT", "SELECT"}},
      {"create conversation", {"INSERT", "INSERT conversations"}},
      {"get conversation", {"SELECT", "SELECT conversations"}},
      {"list conversations", {"SELECT", "SELECT conversations"}},
      {"delete conversation", {"DELETE", "DELETE conversations"}},
      {"append items", {"INSERT", "INSERT items"}},
      {"list items", {"SELECT", "SELECT items"}},
      {"load context", {"SELECT", "SELECT conversations items summary_chunks"}},
      {"commit compaction", {"INSERT", "INSERT summary_chunks"}},
      {"index words", {"INSERT", "INSERT item_words"}},
      {"acquire compaction lease", {"UPDATE", "UPDATE conversations"}},
      {"release compaction lease", {"UPDATE", "UPDATE conversations"}},
      {"record compaction events", {"INSERT", "INSERT compaction_events"}},
      {"list summaries", {"SELECT", "SELECT summary_chunks"}},
      {"pin item", {"INSERT", "INSERT item_pins"}},
      {"unpin item", {"DELETE", "DELETE item_pins"}},
      {"list compaction events", {"SELECT", "SELECT compaction_events"}},
      {"record provider overflow", {"UPDATE", "UPDATE conversations"}},
      {"update conversation", {"UPDATE", "UPDATE conversations"}},
      {"save token counts", {"UPDATE", "UPDATE items summary_chunks"}},
      {"load context at a version", {"SELECT", "SELECT view_states items summary_chunks"}},
  };
  static const DbOperation kOther{"TRANSACTION", "TRANSACTION"};
  auto it = kOperations->find(operation);
  return it == kOperations->end() ? kOther : it->second;
}

PostgresStorage::PostgresStorage(const PostgresOptions& options)
    : options_(options), pool_(options) {}

PostgresStorage::~PostgresStorage() {
  // What is still queued is left to the next compaction of each
  // conversation; the one running ends within its deadline.
  absl::MutexLock lock(&words_mu_);
  words_stopping_ = true;
}

absl::Status PostgresStorage::Ping() {
  return Ping(CallContext{absl::Now() + options_.connect_timeout});
}

absl::Status PostgresStorage::Ping(const CallContext& ctx) {
  return Run<bool>(ctx, "ping", [](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
                     tx.exec("SELECT 1");
                     return true;
                   })
      .status();
}

absl::Status PostgresStorage::CheckForkLayout() {
  if (options_.shared_forks) return absl::OkStatus();
  return Run<bool>(CallContext{absl::Now() + options_.connect_timeout}, "check fork layout",
                   [](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
                     if (tx.exec("SELECT to_regclass('item_segments')")[0][0].is_null()) {
                       return true;
                     }
                     if (tx.exec("SELECT EXISTS (SELECT 1 FROM item_segments)")[0][0].as<bool>()) {
                       return absl::FailedPreconditionError(
                           "db_shared_forks=false, but forks in this database share items "
                           "(item_segments holds rows): a replica copying forks would read "
                           "none of what they share; run with db_shared_forks=true");
                     }
                     return true;
                   })
      .status();
}

bool PostgresStorage::Limited(const TenantLimits& limits) {
  return limits.max_stored_bytes > 0 || limits.max_conversations > 0;
}

absl::StatusOr<TenantUsage> PostgresStorage::LockTenant(pqxx::transaction_base& tx,
                                                        const std::string& tenant_id) {
  const pqxx::row row = Exec1(tx, "lock_tenant", tenant_id);
  if (!row[2].as<bool>()) return TenantUsage{row[1].as<int64_t>(), row[0].as<int64_t>()};
  const pqxx::row counted = Exec1(tx, "recount_tenant", tenant_id);
  return TenantUsage{counted[1].as<int64_t>(), counted[0].as<int64_t>()};
}

absl::StatusOr<int64_t> PostgresStorage::ConvKeyOf(pqxx::transaction_base& tx,
                                                   const ConversationKey& key) {
  pqxx::result r = ExecNamed(tx, "conv_key", key);
  if (r.empty()) return NotFound(key);
  return r[0][0].as<int64_t>();
}

void PostgresStorage::InsertEvents(pqxx::transaction_base& tx, int64_t conv_key,
                                   const std::vector<CompactionEvent>& events) {
  if (events.empty()) return;
  const EventArrays a(events);
  Exec(tx, "insert_events", conv_key, a.names, a.tiers, a.before, a.after, a.details);
}

}  // namespace convstate::pg

namespace convstate {

absl::StatusOr<std::unique_ptr<Storage>> NewPostgresStorage(const PostgresOptions& options) {
  if (options.database_url.empty()) {
    return absl::InvalidArgumentError("database_url: required for PostgreSQL storage");
  }
  auto storage = std::make_unique<pg::PostgresStorage>(options);
  RETURN_IF_ERROR(Annotate(storage->Ping(), "connecting to PostgreSQL"));
  RETURN_IF_ERROR(storage->CheckForkLayout());
  return storage;
}

}  // namespace convstate
