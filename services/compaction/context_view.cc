#include "services/compaction/context_view.h"

#include <cmath>

namespace convstate {
namespace {

ViewEntry FromItem(Section section, const ItemData& data, int64_t sequence,
                   int64_t summary_chunk_id) {
  ViewEntry e;
  e.section = section;
  e.role = data.role;
  e.kind = data.kind;
  e.content = data.content;
  e.tool_name = data.tool_name;
  e.tool_call_id = data.tool_call_id;
  e.sequence = sequence;
  e.token_count = data.token_count;
  e.summary_chunk_id = summary_chunk_id;
  return e;
}

ViewEntry SystemEntry(Section section, const std::string& text, int64_t tokens) {
  ViewEntry e;
  e.section = section;
  e.role = Role::kSystem;
  e.kind = ItemKind::kMessage;
  e.content = text;
  e.token_count = tokens;
  return e;
}

}  // namespace

ContextView AssembleView(const ContextSnapshot& snapshot, const ModelProfile& profile,
                         bool approximate, const std::vector<ItemData>& pending) {
  const Conversation& c = snapshot.conversation;
  const double correction = approximate ? c.token_correction : 1.0;
  auto scale = [correction](int64_t n) {
    return correction == 1.0 ? n : static_cast<int64_t>(std::ceil(n * correction));
  };
  ContextView view;
  view.version = c.version;
  view.entries.reserve(2 + snapshot.pinned_items.size() + snapshot.active_chunks.size() +
                       snapshot.live_items.size() + pending.size());
  TokenBreakdown& t = view.tokens;

  auto add = [&](ViewEntry e, int64_t& section) {
    e.token_count = scale(e.token_count);
    section += e.token_count;
    view.entries.push_back(std::move(e));
  };
  if (!c.system_prompt.empty()) {
    add(SystemEntry(Section::kSystem, c.system_prompt, c.system_prompt_tokens), t.system);
  }
  if (!c.pinned_instructions.empty()) {
    add(SystemEntry(Section::kPinned, c.pinned_instructions, c.pinned_instructions_tokens),
        t.pinned);
  }
  for (const Item& item : snapshot.pinned_items) {
    add(FromItem(Section::kPinned, item.data, item.sequence, 0), t.pinned);
  }
  for (const SummaryChunk& chunk : snapshot.active_chunks) {
    ViewEntry e = SystemEntry(Section::kSummary, chunk.text, chunk.token_count);
    e.summary_chunk_id = chunk.chunk_id;
    add(std::move(e), t.summaries);
  }
  for (const Item& item : snapshot.live_items) {
    // Markers record where a summary begins; the chunk itself is shown above.
    if (item.data.kind == ItemKind::kSummaryMarker) continue;
    add(FromItem(Section::kLive, item.data, item.sequence, item.summary_chunk_id), t.live);
  }
  for (const ItemData& data : pending) add(FromItem(Section::kPending, data, 0, 0), t.pending);
  t.output_reserve = profile.output_reserve;
  t.context_window = profile.context_window;
  t.approximate = approximate;
  t.total = t.system + t.pinned + t.summaries + t.live + t.pending + t.output_reserve;
  view.status = snapshot.active_chunks.empty() ? ContextStatus::kFull : ContextStatus::kSummarized;
  return view;
}

}  // namespace convstate
