#include "services/api/compaction_control.h"

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/api/wire.h"
#include "services/common/log.h"
#include "services/common/status_macros.h"
#include "services/compaction/engine/continuation.h"
#include "services/compaction/engine/summaries.h"
#include "services/core/chunk_json.h"

namespace convstate {
namespace {

using Json = nlohmann::json;

// What a stored proposal holds: the commit it would make, what it was made
// for, and what Compact answered about it.
struct StoredProposal {
  CompactionCommit commit;
  std::string model;
  std::vector<LedgerFact> span_facts;
  int64_t text_budget = 0;
  v1::CompactionProposal answer;
};

Json EventsJson(const std::vector<CompactionEvent>& events) {
  Json out = Json::array();
  for (const CompactionEvent& e : events) {
    out.push_back({{"e", e.event}, {"t", e.tier}, {"b", e.tokens_before},
                   {"a", e.tokens_after}, {"d", e.detail}});
  }
  return out;
}

std::vector<CompactionEvent> EventsFromJson(const Json& in) {
  std::vector<CompactionEvent> out;
  if (!in.is_array()) return out;
  for (const Json& j : in) {
    CompactionEvent e;
    e.event = j.value("e", std::string());
    e.tier = j.value("t", std::string());
    e.tokens_before = j.value("b", int64_t{0});
    e.tokens_after = j.value("a", int64_t{0});
    e.detail = j.value("d", std::string("{}"));
    out.push_back(std::move(e));
  }
  return out;
}

std::string Encode(const StoredProposal& p) {
  const CompactionCommit& c = p.commit;
  return Json{{"chunk", ChunkJson(*c.chunk)},
              {"st", c.expected_summarized_through},
              {"pb", c.expected_prune_boundary},
              {"npb", c.new_prune_boundary},
              {"cv", c.expected_compaction_version},
              {"events", EventsJson(c.events)},
              {"pins", c.pins},
              {"model", p.model},
              {"span", FactsJson(p.span_facts)},
              {"budget", p.text_budget},
              {"answer", absl::Base64Escape(p.answer.SerializeAsString())}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<StoredProposal> Decode(const ConversationKey& key, const std::string& body) {
  const absl::Status unreadable = absl::DataLossError(
      absl::StrCat("a stored proposal of '", key.conversation_id, "' cannot be read"));
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string answer;
  if (!j.is_object() || !j.contains("chunk") ||
      !absl::Base64Unescape(j.value("answer", std::string()), &answer)) {
    return unreadable;
  }
  StoredProposal p;
  p.commit.key = key;
  p.commit.chunk = ChunkFromJson(j["chunk"]);
  p.commit.expected_summarized_through = j.value("st", int64_t{0});
  p.commit.expected_prune_boundary = j.value("pb", int64_t{0});
  p.commit.new_prune_boundary = j.value("npb", int64_t{0});
  p.commit.expected_compaction_version = j.value("cv", int64_t{0});
  p.commit.events = EventsFromJson(j.value("events", Json::array()));
  for (const Json& pin : j.value("pins", Json::array())) {
    if (pin.is_number_integer()) p.commit.pins.push_back(pin.get<int64_t>());
  }
  p.model = j.value("model", std::string());
  p.span_facts = FactsFromJson(j.value("span", Json::array()));
  p.text_budget = j.value("budget", int64_t{0});
  if (!p.answer.ParseFromString(answer)) return unreadable;
  return p;
}

CompactionEvent AppliedEvent(const std::string& by, int64_t proposal_id, bool edited,
                             const SummaryChunk& chunk) {
  return AuditRow("proposal_applied", Tier::kSummarize, 0, 0,
                  DetailOf({{"by", by},
                            {"proposal_id", proposal_id},
                            {"edited", edited},
                            {"from", chunk.from_sequence},
                            {"through", chunk.through_sequence},
                            {"recall", chunk.recall.value_or(0.0)},
                            {"lost", chunk.lost.size()}}));
}

// The mode a validated Compact asks for: a boundary summarizes.
CompactionMode ModeOf(const v1::CompactRequest& req) {
  if (req.through_sequence() > 0) return CompactionMode::kSummarize;
  switch (req.mode()) {
    case v1::CompactRequest::MODE_PRUNE_ONLY: return CompactionMode::kPruneOnly;
    case v1::CompactRequest::MODE_SUMMARIZE: return CompactionMode::kSummarize;
    case v1::CompactRequest::MODE_TRUNCATE: return CompactionMode::kTruncate;
    default: return CompactionMode::kAuto;
  }
}

}  // namespace

CompactionController::CompactionController(Options options, Storage* storage,
                                           CompactionRunner* runner,
                                           const ProfileResolver* profiles)
    : options_(std::move(options)), storage_(storage), runner_(runner), profiles_(profiles) {}

absl::StatusOr<v1::CompactResponse> CompactionController::Compact(const CallContext& ctx,
                                                                  const ConversationKey& key,
                                                                  const v1::CompactRequest& req) {
  const CompactionMode mode = ModeOf(req);
  CompactionControl control;
  control.dry_run = req.dry_run();
  control.through_sequence = req.through_sequence();
  ASSIGN_OR_RETURN(ContextSnapshot snapshot, storage_->LoadContext(ctx, key));
  const Conversation& c = snapshot.conversation;
  if (req.through_sequence() > 0 &&
      (req.through_sequence() <= c.summarized_through || req.through_sequence() > c.last_sequence)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "through_sequence: must be in ", c.summarized_through + 1, "..", c.last_sequence,
        " (after the last summary, at most the last item)"));
  }
  const std::string model = c.model;
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(c));
  RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, snapshot, resolved));
  ASSIGN_OR_RETURN(CompactionOutcome outcome,
                   runner_->Run(ctx, std::move(snapshot), resolved, {}, mode,
                                req.instructions(), nullptr,
                                /*background=*/false, control));
  v1::CompactResponse out;
  out.set_tokens_before(outcome.tokens_before);
  out.set_tokens_after(outcome.view.tokens.total);
  out.set_context_status(static_cast<v1::ContextStatus>(outcome.view.status));
  out.set_version(outcome.version);
  out.set_compaction_version(outcome.compaction_version);
  out.set_summary_chunk_id(outcome.chunk_id);
  for (const std::string& step : outcome.not_done) out.add_not_done(step);
  if (control.dry_run && outcome.proposal.has_value()) {
    RETURN_IF_ERROR(Propose(ctx, key, model, outcome, *out.mutable_proposal()));
  }
  return out;
}

absl::Status CompactionController::Propose(const CallContext& ctx, const ConversationKey& key,
                                           const std::string& model, CompactionOutcome& outcome,
                                           v1::CompactionProposal& answer) {
  StoredProposal p;
  p.commit = std::move(*outcome.proposal);
  p.commit.expected_compaction_version = outcome.compaction_version;
  p.model = model;
  p.span_facts = std::move(outcome.span_facts);
  p.text_budget = outcome.summary_text_budget;
  const SummaryChunk& chunk = *p.commit.chunk;
  answer.set_from_sequence(chunk.from_sequence);
  answer.set_through_sequence(chunk.through_sequence);
  answer.set_summary_text(chunk.text);
  for (const LedgerFact& f : chunk.facts) ToProto(f, answer.add_facts());
  for (const LedgerFact& f : chunk.constraints) ToProto(f, answer.add_constraints());
  for (const LedgerFact& f : chunk.lost) ToProto(f, answer.add_lost_facts());
  ToProto(outcome.view.tokens, answer.mutable_before());
  ToProto(outcome.proposal_tokens, answer.mutable_after());
  answer.set_recall(chunk.recall.value_or(0.0));
  answer.set_compaction_version(outcome.compaction_version);
  answer.set_summarizer_model(chunk.summarizer_model);
  p.answer = answer;
  ASSIGN_OR_RETURN(const ProposalRecord record,
                   storage_->SaveProposal(ctx, key, Encode(p), options_.proposal_ttl,
                                          options_.tenant_limits(key.tenant_id),
                                          outcome.compaction_version));
  answer.set_proposal_id(absl::StrCat(record.proposal_id));
  SetTimestamp(record.expire_time, answer.mutable_expire_time());
  return absl::OkStatus();
}

absl::StatusOr<v1::ApplyCompactionResponse> CompactionController::ApplyCompaction(
    const CallContext& ctx, const ProposalRef& proposal, const v1::ApplyCompactionRequest& req) {
  const ConversationKey& key = proposal.key;
  const int64_t id = proposal.proposal_id;
  ASSIGN_OR_RETURN(const ProposalRecord record, storage_->GetProposal(ctx, key, id));
  // Applied before: the same answer, nothing stored.
  auto replay = [&](const ProposalRecord& r) -> absl::StatusOr<v1::ApplyCompactionResponse> {
    v1::ApplyCompactionResponse out;
    std::string answer;
    if (!absl::Base64Unescape(r.applied_answer, &answer) || !out.ParseFromString(answer)) {
      return absl::DataLossError("the answer of an applied proposal cannot be read");
    }
    out.set_summary_chunk_id(r.applied_chunk_id);
    out.set_compaction_version(r.applied_compaction_version);
    out.set_replayed(true);
    return out;
  };
  if (record.applied_chunk_id != 0) return replay(record);
  ASSIGN_OR_RETURN(StoredProposal p, Decode(key, record.body));
  ASSIGN_OR_RETURN(ContextSnapshot snapshot, storage_->LoadContext(ctx, key));
  const Conversation& c = snapshot.conversation;
  if (c.compaction_version != p.commit.expected_compaction_version || c.model != p.model) {
    return absl::AbortedError(absl::StrCat(
        "proposal ", id, " was made for compaction_version ", p.commit.expected_compaction_version,
        " of model '", p.model, "'; the conversation has since changed (compaction_version ",
        c.compaction_version, ", model '", c.model, "'): make a new one"));
  }
  SummaryChunk& chunk = *p.commit.chunk;
  v1::ApplyCompactionResponse out;
  out.set_tokens_before(p.answer.before().total());
  out.set_tokens_after(p.answer.after().total());
  if (req.has_summary_text() && req.summary_text() != chunk.text) {
    ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(c));
    RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, snapshot, resolved));
    const std::string& text = req.summary_text();
    const int64_t tokens =
        CountSystemTokens(*resolved.tokenizer, text, resolved.profile.per_message_tokens);
    const int64_t cap = p.text_budget + resolved.profile.per_message_tokens;
    if (SaysNothing(text)) {
      return absl::InvalidArgumentError("summary_text: says nothing");
    }
    if (tokens > cap) {
      return absl::InvalidArgumentError(absl::StrCat(
          "summary_text: ", tokens, " tokens; the proposal's summary may have at most ", cap));
    }
    const TokenBreakdown after = Reword(snapshot, resolved, text, p.commit.new_prune_boundary,
                                        p.span_facts, chunk, p.commit.events);
    out.set_tokens_after(after.total);
    out.set_edited(true);
  }
  out.set_recall(chunk.recall.value_or(0.0));
  for (const LedgerFact& f : chunk.lost) ToProto(f, out.add_lost_facts());
  p.commit.events.push_back(AppliedEvent(ctx.principal, id, out.edited(), chunk));
  p.commit.proposal_id = id;
  // Kept as text (base64 of the serialized answer).
  p.commit.proposal_answer = absl::Base64Escape(out.SerializeAsString());
  absl::StatusOr<CompactionResult> result = storage_->CommitCompaction(ctx, p.commit);
  if (absl::IsAborted(result.status())) {
    // Another apply of the same proposal may have won: it answers.
    absl::StatusOr<ProposalRecord> again = storage_->GetProposal(ctx, key, id);
    if (again.ok() && again->applied_chunk_id != 0) return replay(*again);
    return absl::AbortedError(absl::StrCat("proposal ", id, ": ", result.status().message()));
  }
  if (!result.ok()) return result.status();
  out.set_summary_chunk_id(result->chunk_id);
  out.set_compaction_version(result->compaction_version);
  return out;
}

absl::StatusOr<v1::RevertCompactionResponse> CompactionController::RevertCompaction(
    const CallContext& ctx, const ConversationKey& key, const v1::RevertCompactionRequest& req) {
  RevertRequest revert;
  revert.key = key;
  revert.chunk_id = req.chunk_id();
  revert.actor = ctx.principal;
  ASSIGN_OR_RETURN(const RevertResult result, storage_->RevertCompaction(ctx, revert));
  LogInfo("chunk ", req.chunk_id(), " of ", key.conversation_id, " reverted",
          ctx.principal.empty() ? "" : absl::StrCat(" by ", ctx.principal));
  v1::RevertCompactionResponse out;
  ToProto(result.chunk, out.mutable_chunk());
  for (int64_t id : result.reactivated) out.add_reactivated_chunk_ids(id);
  out.set_compaction_version(result.compaction_version);
  out.set_summarized_through(result.summarized_through);
  out.set_prune_boundary(result.prune_boundary);
  return out;
}

absl::StatusOr<ContextSnapshot> CompactionController::PrepareHandoff(const CallContext& ctx,
                                                                    const ConversationKey& key,
                                                                    int recent_turns) {
  absl::StatusOr<ContextSnapshot> source = storage_->LoadContext(ctx, key);
  if (absl::IsNotFound(source.status())) {
    return absl::NotFoundError(
        absl::StrCat("continue_from: conversation '", key.conversation_id, "' not found"));
  }
  if (!source.ok()) return source.status();
  const int64_t through = HandoffThrough(*source, recent_turns);
  if (through == 0) return source;
  ASSIGN_OR_RETURN(const ResolvedProfile resolved, profiles_->ProfileOf(source->conversation));
  if (!resolved.profile.compaction_enabled) return source;
  RETURN_IF_ERROR(profiles_->EnsureCounts(ctx, *source, resolved));
  CompactionControl control;
  control.through_sequence = through;
  absl::StatusOr<CompactionOutcome> outcome =
      runner_->Run(ctx, *source, resolved, {}, CompactionMode::kSummarize, "", nullptr,
                   /*background=*/false, control);
  if (absl::IsFailedPrecondition(outcome.status())) {
    // A tool call there still waits for its result: up to where it can.
    outcome = runner_->Run(ctx, *source, resolved, {}, CompactionMode::kSummarize, "", nullptr);
  }
  if (!outcome.ok()) return outcome.status();
  return storage_->LoadContext(ctx, key);
}

}  // namespace convstate
