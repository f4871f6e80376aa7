#include "services/api/item_writer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/api/wire.h"
#include "services/common/fingerprint.h"
#include "services/common/status_macros.h"
#include "services/tokenizer/tokens.h"
#include "storage/rules.h"

namespace convstate {
namespace {

// What an erased item holds instead of its content.
constexpr char kTombstone[] = "[redacted]";

std::string Fingerprint(const std::vector<ItemData>& items) {
  Fingerprinter fp;
  fp.Add(static_cast<int64_t>(items.size()));
  for (const ItemData& item : items) {
    fp.Add(static_cast<int64_t>(item.role)).Add(static_cast<int64_t>(item.kind));
    fp.Add(item.content).Add(item.tool_name).Add(item.tool_call_id);
    fp.Add(static_cast<int64_t>(item.pinned));
    fp.Add(static_cast<int64_t>(item.metadata.size()));
    for (const auto& [k, v] : item.metadata) fp.Add(k).Add(v);
  }
  return fp.Hex();
}

}  // namespace

ItemWriter::ItemWriter(Options options, Storage* storage, ProfileResolver* profiles,
                       ContextCache* cache, HistoryCache* history, const Clock* clock)
    : options_(std::move(options)),
      storage_(storage),
      profiles_(profiles),
      cache_(cache),
      history_(history),
      tenant_bytes_(storage, clock) {}

absl::StatusOr<v1::AppendTurnResponse> ItemWriter::Append(const CallContext& ctx,
                                                          const ConversationKey& key,
                                                          const v1::AppendTurnRequest& req) {
  AppendRequest append;
  append.key = key;
  const v1::ProviderUsage& usage = req.usage();
  for (const v1::NewItem& item : req.items()) append.items.push_back(ToItemData(item));
  if (req.task_boundary()) append.items.back().metadata[kTaskBoundaryKey] = "true";
  append.idempotency_key = req.idempotency_key();
  append.request_fingerprint = Fingerprint(append.items);
  if (req.has_expected_version()) append.expected_version = req.expected_version();
  // Counted here, once, with the conversation's own tokenizer, before the
  // append takes the conversation's lock; storage checks that the model is
  // still the one counted with.
  const bool has_usage = usage.input_tokens() > 0 || usage.output_tokens() > 0;
  auto count = [&](const std::string& model) -> absl::Status {
    ASSIGN_OR_RETURN(const ResolvedProfile* resolved,
                     profiles_->ForStored(model, append.key.conversation_id));
    for (ItemData& item : append.items) {
      item.token_count =
          CountItemTokens(*resolved->tokenizer, item, resolved->profile.per_message_tokens);
    }
    append.expected_model = model;
    if (has_usage) {
      append.usage = UsageReport{usage.input_tokens(),        usage.output_tokens(),
                                 usage.cached_input_tokens(), usage.reasoning_tokens(),
                                 0,  // Filled in by storage from the locked row.
                                 resolved->tokenizer->approximate()};
    }
    return absl::OkStatus();
  };
  // A limited tenant's bytes are checked here, against a recent total
  // (tenant_usage.h), not by storage under the tenant's row: its appends run
  // in parallel like anyone's.
  const TenantLimits limits = options_.tenant_limits(append.key.tenant_id);
  append.max_conversation_bytes = options_.max_conversation_bytes;
  ASSIGN_OR_RETURN(std::string model, profiles_->ModelOf(ctx, append.key, /*refresh=*/false));
  RETURN_IF_ERROR(count(model));
  const int64_t adding = StoredBytes(append);
  if (absl::Status within = tenant_bytes_.Check(ctx, append.key.tenant_id, limits, adding);
      !within.ok()) {
    if (append.idempotency_key.empty() || !absl::IsResourceExhausted(within)) return within;
    // Perhaps a retry of an append that was stored: storage looks its key
    // up before it checks the limit (exactly, under the tenant's row).
    append.tenant_limits = limits;
  }
  absl::StatusOr<AppendResult> appended = storage_->AppendItems(ctx, append);
  if (absl::IsAborted(appended.status()) &&
      absl::StrContains(appended.status().message(), "is now bound to model")) {
    // Deleted and created again with another model: count again, once.
    ASSIGN_OR_RETURN(model, profiles_->ModelOf(ctx, append.key, /*refresh=*/true));
    RETURN_IF_ERROR(count(model));
    appended = storage_->AppendItems(ctx, append);
  }
  ASSIGN_OR_RETURN(AppendResult result, std::move(appended));
  if (!result.replayed) tenant_bytes_.Added(append.key.tenant_id, adding);
  v1::AppendTurnResponse out;
  for (const Item& item : result.items) ToProto(item, out.add_items());
  out.set_version(result.version);
  out.set_replayed(result.replayed);
  return out;
}

absl::StatusOr<v1::RedactItemsResponse> ItemWriter::Redact(const CallContext& ctx,
                                                           const ConversationKey& key,
                                                           const v1::RedactItemsRequest& req) {
  RedactRequest redact;
  redact.key = key;
  redact.sequences.assign(req.sequences().begin(), req.sequences().end());
  std::sort(redact.sequences.begin(), redact.sequences.end());
  redact.sequences.erase(std::unique(redact.sequences.begin(), redact.sequences.end()),
                         redact.sequences.end());
  // The tombstone is counted with the conversation's own tokenizer.
  ASSIGN_OR_RETURN(std::string model, profiles_->ModelOf(ctx, redact.key, /*refresh=*/true));
  ASSIGN_OR_RETURN(const ResolvedProfile* resolved, profiles_->ForStored(model, ""));
  ItemData tombstone;
  tombstone.content = kTombstone;
  redact.tombstone = kTombstone;
  redact.tombstone_tokens =
      CountItemTokens(*resolved->tokenizer, tombstone, resolved->profile.per_message_tokens);
  redact.actor = ctx.principal;
  redact.reason = req.reason();
  redact.digest_key = options_.redaction_key;
  ASSIGN_OR_RETURN(RedactResult result, storage_->RedactItems(ctx, redact));
  // This replica's copy goes now; others see the new compaction_version.
  cache_->Erase(redact.key);
  history_->Forget(redact.key);
  v1::RedactItemsResponse out;
  for (const Item& item : result.items) ToProto(item, out.add_items());
  out.set_chunks_removed(result.chunks_removed);
  out.set_compaction_version(result.compaction_version);
  out.set_continued_chunks_removed(result.continued_chunks_removed);
  return out;
}

}  // namespace convstate
