#include "storage/context_delta.h"

#include <utility>

namespace convstate {

ContextDelta::Kind DeltaKind(const Conversation& now, const Conversation* held) {
  if (held == nullptr || held->storage_key != now.storage_key ||
      held->compaction_version != now.compaction_version ||
      held->count_encoding != now.count_encoding || held->recounted != now.recounted ||
      held->version > now.version) {
    return ContextDelta::Kind::kReloaded;
  }
  return held->version == now.version ? ContextDelta::Kind::kUnchanged
                                      : ContextDelta::Kind::kAppended;
}

ContextSnapshot ApplyDelta(const ContextSnapshot& held, ContextDelta delta) {
  if (delta.kind == ContextDelta::Kind::kReloaded) return std::move(delta.snapshot);
  ContextSnapshot out = held;
  if (delta.kind == ContextDelta::Kind::kUnchanged) return out;
  out.conversation = std::move(delta.snapshot.conversation);
  out.live_items.reserve(out.live_items.size() + delta.snapshot.live_items.size());
  for (Item& item : delta.snapshot.live_items) out.live_items.push_back(std::move(item));
  return out;
}

}  // namespace convstate
