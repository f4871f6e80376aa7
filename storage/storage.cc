#include "storage/storage.h"

#include <utility>

namespace convstate {
namespace {

constexpr PageLimit kWholePages{1000, int64_t{16} << 20};

}  // namespace

absl::StatusOr<std::vector<SummaryChunk>> AllSummaries(Storage& storage, const CallContext& ctx,
                                                       const ConversationKey& key,
                                                       bool include_superseded) {
  std::vector<SummaryChunk> out;
  for (int64_t after = 0;;) {
    absl::StatusOr<Page<SummaryChunk>> page =
        storage.ListSummaries(ctx, key, include_superseded, after, kWholePages);
    if (!page.ok()) return page.status();
    for (SummaryChunk& c : page->rows) out.push_back(std::move(c));
    if (!page->more || out.empty()) return out;
    after = out.back().chunk_id;
  }
}

absl::StatusOr<std::vector<CompactionEvent>> AllCompactionEvents(Storage& storage,
                                                                 const CallContext& ctx,
                                                                 const ConversationKey& key) {
  std::vector<CompactionEvent> out;
  for (int64_t after = 0;;) {
    absl::StatusOr<Page<CompactionEvent>> page =
        storage.ListCompactionEvents(ctx, key, after, kWholePages);
    if (!page.ok()) return page.status();
    for (CompactionEvent& e : page->rows) out.push_back(std::move(e));
    if (!page->more || out.empty()) return out;
    after = out.back().event_id;
  }
}

}  // namespace convstate
