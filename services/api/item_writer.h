#ifndef CONVSTATE_SERVICES_API_ITEM_WRITER_H_
#define CONVSTATE_SERVICES_API_ITEM_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/api/context_cache.h"
#include "services/api/history_cache.h"
#include "services/api/profile_resolver.h"
#include "services/api/tenant_usage.h"
#include "services/common/clock.h"
#include "storage/storage.h"

namespace convstate {

// The calls that write a conversation's items: AppendTurn (the items
// counted with the conversation's own tokenizer, a limited tenant's bytes
// checked against a recent total) and RedactItems (items' content erased
// with every summary derived from it). Requests arrive validated.
// Thread-safe.
class ItemWriter {
 public:
  struct Options {
    // Bytes one conversation stores at most (Limits::max_conversation_bytes).
    int64_t max_conversation_bytes = int64_t{256} << 20;
    // The key of the digests redacted items keep; empty: none.
    std::string redaction_key;
    // Each tenant's limits (never null).
    std::function<TenantLimits(const std::string& tenant)> tenant_limits;
  };

  // Everything but `options` must outlive the writer.
  ItemWriter(Options options, Storage* storage, ProfileResolver* profiles, ContextCache* cache,
             HistoryCache* history, const Clock* clock);

  ItemWriter(const ItemWriter&) = delete;
  ItemWriter& operator=(const ItemWriter&) = delete;

  // AppendTurn to `key`.
  absl::StatusOr<v1::AppendTurnResponse> Append(const CallContext& ctx, const ConversationKey& key,
                                                const v1::AppendTurnRequest& req);
  // RedactItems of `key`: this replica's copies of the conversation go.
  absl::StatusOr<v1::RedactItemsResponse> Redact(const CallContext& ctx,
                                                 const ConversationKey& key,
                                                 const v1::RedactItemsRequest& req);

 private:
  const Options options_;
  Storage* const storage_;
  ProfileResolver* const profiles_;
  ContextCache* const cache_;
  HistoryCache* const history_;
  // A limited tenant's stored bytes, as this replica checks its appends.
  TenantBytes tenant_bytes_;
};

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_ITEM_WRITER_H_
