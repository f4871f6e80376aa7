// Recall from the whole history: BuildContext's RECALLED section and the
// SearchHistory RPC. The ranking is services/compaction/recall's; this
// file asks storage for the candidates and fits the answer to the call.

#include <cmath>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/api/recall.h"
#include "services/api/validation.h"
#include "services/api/wire.h"
#include "services/common/status_macros.h"
#include "services/common/task_guard.h"
#include "services/compaction/recall/recall.h"
#include "services/telemetry/telemetry.h"

namespace convstate {
namespace {

constexpr size_t kMaxQueryBytes = kMaxRecallQueryBytes;
constexpr int kDefaultResults = 10;
constexpr int64_t kDefaultResultTokens = 2000;
// Conversations whose common words are remembered (a few kilobytes each).
constexpr size_t kMaxCommonTermConversations = 10000;

HistorySearch SearchOf(const ConversationKey& key, const RecallQuery& query) {
  HistorySearch search = SearchFor(query);
  search.key = key;
  return search;
}

// A view's recall: what a compaction took out of the view (the rest is in
// it verbatim), from the best few turns.
HistorySearch RecallSearchOf(const ConversationKey& key, const RecallQuery& query) {
  HistorySearch search = SearchOf(key, query);
  search.compacted_only = true;
  search.max_items = kRecallCandidates;
  return search;
}

// Ends a "recall search" span with what the search found.
void EndSearchSpan(telemetry::Span& span, const absl::StatusOr<HistoryHits>& hits) {
  if (!span.recording()) return;
  if (hits.ok()) {
    span.SetAttribute("convstate.recall.candidates", static_cast<int64_t>(hits->found.size()));
  } else {
    span.SetAttribute("convstate.recall.error", std::string(hits.status().message()));
  }
  span.End();
}

}  // namespace

std::string RecallQueryOf(const v1::BuildContextRequest& req) {
  return RecallQueryOf(req.recall_query(), req.pending_input());
}

std::string RecallQueryOf(const std::string& recall_query,
                          const google::protobuf::RepeatedPtrField<v1::NewItem>& pending_input) {
  if (!recall_query.empty()) return recall_query;
  std::string query;
  for (const v1::NewItem& item : pending_input) {
    if (item.role() != v1::ROLE_USER || item.kind() != v1::ITEM_KIND_MESSAGE) continue;
    if (!query.empty()) query += "\n";
    query += item.content().substr(0, kMaxQueryBytes);
  }
  return query;
}

HistoryRecall::HistoryRecall(Storage* storage, HistoryCache& history,
                             const ProfileResolver& profiles)
    : storage_(storage), history_(history), profiles_(profiles) {}

struct HistoryRecall::PendingRecall {
  int64_t storage_key = 0;
  RecallQuery query;
  std::future<absl::StatusOr<HistoryHits>> hits;
};

std::shared_ptr<HistoryRecall::PendingRecall> HistoryRecall::StartRecall(
    const CallContext& ctx, const ConversationKey& key, const Conversation& conversation,
    const ResolvedProfile& resolved, const std::string& query) {
  if (query.empty() || resolved.profile.recall.budget_fraction <= 0 ||
      resolved.tokenizer == nullptr) {
    return nullptr;
  }
  // Nothing summarized and nothing pruned: every item is in the view
  // verbatim (short of an emergency truncation), and there is nothing to
  // bring back. Most calls end here, at no cost.
  if (conversation.summarized_through == 0 && conversation.prune_boundary == 0) return nullptr;
  auto pending = std::make_shared<PendingRecall>();
  pending->storage_key = conversation.storage_key;
  pending->query = ParseRecallQuery(query);
  HistorySearch search = RecallSearchOf(key, pending->query);
  {
    // Words already found too common are not counted again.
    absl::MutexLock lock(&common_terms_mu_);
    auto known = common_terms_.find(conversation.storage_key);
    if (known != common_terms_.end() && known->second.Holds(conversation.item_count)) {
      for (const std::string& t : search.terms) {
        if (known->second.terms.contains(t)) search.known_common.push_back(t);
      }
    }
  }
  // Nothing discriminative: no search at all.
  if (search.terms.size() == search.known_common.size()) return nullptr;
  // What the search costs the call, on a span of its own.
  telemetry::Span span = telemetry::StartSpan("recall search", telemetry::SpanKind::kInternal);
  span.SetAttribute("convstate.recall.terms", static_cast<int64_t>(search.terms.size()));
  if (history_.Ready(conversation)) {
    // This replica's copy of the history, brought up to date from the
    // database when a compaction moved: searched here, in memory.
    span.SetAttribute("convstate.recall.copy", true);
    telemetry::ScopedSpan scope(&span);
    std::promise<absl::StatusOr<HistoryHits>> hits;
    absl::StatusOr<HistoryHits> found = history_.Search(ctx, conversation, search);
    EndSearchSpan(span, found);
    hits.set_value(std::move(found));
    pending->hits = hits.get_future();
    return pending;
  }
  // The database's search (while a copy is made) waits on the database
  // while this thread builds the view.
  span.SetAttribute("convstate.recall.copy", false);
  pending->hits = std::async(std::launch::async, [this, ctx, conversation,
                                                  search = std::move(search),
                                                  span = std::move(span)]() mutable {
    // Recall adds to a view that is complete without it: nothing thrown
    // here may end the call (or the process).
    absl::StatusOr<HistoryHits> hits = absl::InternalError("recall's search failed");
    RunGuarded("recall search", [&] { hits = history_.Search(ctx, conversation, search); });
    EndSearchSpan(span, hits);
    return hits;
  });
  return pending;
}

int64_t HistoryRecall::RecallBudget(const ModelProfile& profile) {
  if (profile.recall.budget_fraction <= 0) return 0;
  // A small window's share is too little for the passages a question about
  // two values needs, each under its provenance: recall.min_tokens, as long
  // as that is at most a tenth of the window.
  const int64_t floor = std::min(profile.recall.min_tokens, FractionOfWindow(profile, 0.1));
  return std::max(FractionOfWindow(profile, profile.recall.budget_fraction), floor);
}

int64_t HistoryRecall::RecallHeadroom(const ModelProfile& profile) {
  return std::min(RecallBudget(profile), profile.recall.min_tokens);
}

std::vector<RecalledPassage> HistoryRecall::AddRecall(
    const std::shared_ptr<PendingRecall>& pending, const Conversation& conversation,
    const ResolvedProfile& resolved, ContextView& view) {
  if (pending == nullptr) return {};
  absl::StatusOr<HistoryHits> hits = pending->hits.get();
  const RecallQuery& parsed = pending->query;
  if (hits.ok() && pending->storage_key != 0) {
    const int64_t cap = MaxDocumentFrequency(HistorySearch{}, hits->items);
    absl::MutexLock lock(&common_terms_mu_);
    if (common_terms_.size() >= kMaxCommonTermConversations) common_terms_.clear();
    CommonTerms& known = common_terms_[pending->storage_key];
    if (!known.Holds(hits->items)) known = CommonTerms{hits->items, {}};
    for (const auto& [term, df] : hits->document_frequency) {
      if (df > cap) known.terms.insert(term);
    }
  }
  const ModelProfile& profile = resolved.profile;
  // Recall never lifts a view into the band a call would have compacted it
  // for: the hard band, or the emergency band where a call serves while the
  // background compacts.
  const double limit = CallMode(profile) == CompactionMode::kByBandBehindBackground
                           ? profile.emergency_threshold
                           : profile.hard_threshold;
  const int64_t room = Threshold(profile, limit) - 1 - view.tokens.total;
  const int64_t budget = std::min(RecallBudget(profile), room);
  if (budget <= 0) return {};
  telemetry::Span* span = telemetry::CurrentSpan();
  if (!hits.ok()) {
    // Recall adds to a view that is complete without it: the call goes on.
    if (span != nullptr && span->recording()) {
      span->SetAttribute("convstate.recall.error", std::string(hits.status().message()));
    }
    return {};
  }
  // The view counts what the provider will count: the same corrections.
  const double correction = ViewCorrection(conversation, resolved.tokenizer->approximate());
  RecallLimits limits;
  limits.max_tokens = static_cast<int64_t>(std::floor(static_cast<double>(budget) / correction));
  limits.per_message_tokens = profile.per_message_tokens;
  for (const ViewEntry& e : view.entries) {
    if (e.section == Section::kLive && !e.pruned && e.sequence > 0) limits.shown.insert(e.sequence);
    if (e.section == Section::kSummary || e.section == Section::kLedger ||
        e.section == Section::kPinned) {
      absl::StrAppend(&limits.shown_text, e.content, "\n");
    }
  }
  // What ranking and counting the section cost the call, on a span of
  // their own.
  telemetry::Span rank = telemetry::StartSpan("recall rank", telemetry::SpanKind::kInternal);
  std::vector<RecalledPassage> passages = RankPassages(parsed, *hits, *resolved.tokenizer, limits);
  rank.SetAttribute("convstate.recall.passages", static_cast<int64_t>(passages.size()));
  if (span != nullptr && span->recording()) {
    span->SetAttribute("convstate.recall.candidates", static_cast<int64_t>(hits->found.size()));
    span->SetAttribute("convstate.recall.passages", static_cast<int64_t>(passages.size()));
  }
  if (passages.empty()) return {};
  std::string text = RenderRecalled(passages);
  const int64_t tokens = Corrected(
      CountSystemTokens(*resolved.tokenizer, text, profile.per_message_tokens), correction);
  rank.SetAttribute("convstate.recall.tokens", tokens);
  rank.End();
  // RankPassages keeps to it; never let a view outgrow its room.
  if (tokens > budget) return {};
  AddRecalled(view, std::move(text), tokens);
  return passages;
}


absl::StatusOr<v1::SearchHistoryResponse> HistoryRecall::SearchHistory(
    const CallContext& ctx, const ConversationKey& key, const v1::SearchHistoryRequest& req) {
  ASSIGN_OR_RETURN(Conversation conversation, storage_->GetConversation(ctx, key));
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_.ProfileOf(conversation));
  v1::SearchHistoryResponse out;
  out.set_items(conversation.item_count);
  const RecallQuery parsed = ParseRecallQuery(req.query());
  if (parsed.terms.empty()) return out;
  ASSIGN_OR_RETURN(HistoryHits hits, history_.Search(ctx, conversation, SearchOf(key, parsed)));
  out.set_items(hits.items);
  for (const auto& [term, df] : hits.document_frequency) (*out.mutable_document_frequency())[term] = df;
  RecallLimits limits;
  limits.max_tokens = req.max_tokens() > 0 ? req.max_tokens() : kDefaultResultTokens;
  limits.max_passages = req.max_results() > 0 ? req.max_results() : kDefaultResults;
  for (RecalledPassage& p : RankPassages(parsed, hits, *resolved.tokenizer, limits)) {
    ToProto(std::move(p), out.add_passages());
  }
  return out;
}

}  // namespace convstate
