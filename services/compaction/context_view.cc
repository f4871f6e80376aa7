#include "services/compaction/context_view.h"

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
                         const Tokenizer& tokenizer, const std::vector<ItemData>& pending) {
  const Conversation& c = snapshot.conversation;
  ContextView view;
  view.version = c.version;
  view.entries.reserve(2 + snapshot.pinned_items.size() + snapshot.active_chunks.size() +
                       snapshot.live_items.size() + pending.size());
  TokenBreakdown& t = view.tokens;

  if (!c.system_prompt.empty()) {
    const int64_t n = CountSystemTokens(tokenizer, c.system_prompt);
    view.entries.push_back(SystemEntry(Section::kSystem, c.system_prompt, n));
    t.system += n;
  }
  if (!c.pinned_instructions.empty()) {
    const int64_t n = CountSystemTokens(tokenizer, c.pinned_instructions);
    view.entries.push_back(SystemEntry(Section::kPinned, c.pinned_instructions, n));
    t.pinned += n;
  }
  for (const Item& item : snapshot.pinned_items) {
    view.entries.push_back(FromItem(Section::kPinned, item.data, item.sequence, 0));
    t.pinned += item.data.token_count;
  }
  for (const SummaryChunk& chunk : snapshot.active_chunks) {
    ViewEntry e = SystemEntry(Section::kSummary, chunk.text, chunk.token_count);
    e.summary_chunk_id = chunk.chunk_id;
    view.entries.push_back(std::move(e));
    t.summaries += chunk.token_count;
  }
  for (const Item& item : snapshot.live_items) {
    // Markers record where a summary begins; the chunk itself is shown above.
    if (item.data.kind == ItemKind::kSummaryMarker) continue;
    view.entries.push_back(
        FromItem(Section::kLive, item.data, item.sequence, item.summary_chunk_id));
    t.live += item.data.token_count;
  }
  for (const ItemData& data : pending) {
    view.entries.push_back(FromItem(Section::kPending, data, 0, 0));
    t.pending += data.token_count;
  }
  t.output_reserve = profile.output_reserve;
  t.context_window = profile.context_window;
  t.approximate = tokenizer.approximate();
  t.total = t.system + t.pinned + t.summaries + t.live + t.pending + t.output_reserve;
  view.status = snapshot.active_chunks.empty() ? ContextStatus::kFull : ContextStatus::kSummarized;
  return view;
}

}  // namespace convstate
