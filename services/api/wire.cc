#include "services/api/wire.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"
#include "services/core/ids.h"

namespace convstate {
namespace {

constexpr int kMaxPage = 1000;

}  // namespace

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(t);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

Metadata ToMetadata(const google::protobuf::Map<std::string, std::string>& in) {
  return Metadata(in.begin(), in.end());
}

void FromMetadata(const Metadata& in, google::protobuf::Map<std::string, std::string>* out) {
  for (const auto& [k, v] : in) (*out)[k] = v;
}

ProfileOverrides ToOverrides(const v1::ProfileOverrides& in) {
  ProfileOverrides o;
  if (in.has_context_window()) o.context_window = in.context_window();
  if (in.has_output_reserve()) o.output_reserve = in.output_reserve();
  if (in.has_soft_threshold()) o.soft_threshold = in.soft_threshold();
  if (in.has_hard_threshold()) o.hard_threshold = in.hard_threshold();
  if (in.has_emergency_threshold()) o.emergency_threshold = in.emergency_threshold();
  if (in.has_token_floor()) o.token_floor = in.token_floor();
  if (in.has_recent_turns()) o.recent_turns = in.recent_turns();
  if (in.has_recent_tokens()) o.recent_tokens = in.recent_tokens();
  if (in.has_compaction_enabled()) o.compaction_enabled = in.compaction_enabled();
  if (in.has_recall_budget_fraction()) o.recall_budget_fraction = in.recall_budget_fraction();
  if (in.has_prompt_cache_ttl_s()) o.prompt_cache_ttl_s = in.prompt_cache_ttl_s();
  // An unknown value is kept as sent: ValidateProfile refuses it.
  if (in.has_hard_band_policy()) o.hard_band_policy = static_cast<HardBandPolicy>(in.hard_band_policy());
  return o;
}

CompactionPolicy ToPolicy(const v1::CompactionPolicy& in) {
  CompactionPolicy policy;
  policy.instructions = in.instructions();
  for (const v1::KeepRule& r : in.keep()) {
    KeepRule rule;
    rule.pattern = r.pattern();
    for (int role : r.roles()) rule.roles.push_back(static_cast<Role>(role));
    rule.tool_names.assign(r.tool_names().begin(), r.tool_names().end());
    policy.keep.push_back(std::move(rule));
  }
  if (in.has_keep_budget_fraction()) policy.keep_budget_fraction = in.keep_budget_fraction();
  return policy;
}

void FromPolicy(const CompactionPolicy& policy, v1::CompactionPolicy* out) {
  out->set_instructions(policy.instructions);
  for (const KeepRule& r : policy.keep) {
    v1::KeepRule* rule = out->add_keep();
    rule->set_pattern(r.pattern);
    for (Role role : r.roles) rule->add_roles(static_cast<v1::Role>(role));
    for (const std::string& t : r.tool_names) rule->add_tool_names(t);
  }
  if (policy.keep_budget_fraction) out->set_keep_budget_fraction(*policy.keep_budget_fraction);
}

void FromOverrides(const ProfileOverrides& o, v1::ProfileOverrides* out) {
  if (o.context_window) out->set_context_window(*o.context_window);
  if (o.output_reserve) out->set_output_reserve(*o.output_reserve);
  if (o.soft_threshold) out->set_soft_threshold(*o.soft_threshold);
  if (o.hard_threshold) out->set_hard_threshold(*o.hard_threshold);
  if (o.emergency_threshold) out->set_emergency_threshold(*o.emergency_threshold);
  if (o.token_floor) out->set_token_floor(*o.token_floor);
  if (o.recent_turns) out->set_recent_turns(*o.recent_turns);
  if (o.recent_tokens) out->set_recent_tokens(*o.recent_tokens);
  if (o.compaction_enabled) out->set_compaction_enabled(*o.compaction_enabled);
  if (o.recall_budget_fraction) out->set_recall_budget_fraction(*o.recall_budget_fraction);
  if (o.prompt_cache_ttl_s) out->set_prompt_cache_ttl_s(*o.prompt_cache_ttl_s);
  if (o.hard_band_policy) {
    out->set_hard_band_policy(static_cast<v1::HardBandPolicy>(*o.hard_band_policy));
  }
}

v1::Conversation ToProto(const Conversation& c) {
  v1::Conversation out;
  out.set_conversation_id(c.key.conversation_id);
  out.set_tenant_id(c.key.tenant_id);
  out.set_model(c.model);
  out.set_system_prompt(c.system_prompt);
  out.set_pinned_instructions(c.pinned_instructions);
  FromMetadata(c.metadata, out.mutable_metadata());
  out.set_continued_from(c.continued_from);
  if (!c.forked_from.empty()) {
    v1::ForkOrigin* origin = out.mutable_forked_from();
    origin->set_conversation_id(c.forked_from);
    origin->set_incarnation(c.forked_from_key);
    origin->set_sequence(c.forked_at);
  }
  FromOverrides(c.overrides, out.mutable_profile_overrides());
  if (c.overrides.policy) FromPolicy(*c.overrides.policy, out.mutable_compaction_policy());
  out.set_version(c.version);
  out.set_compaction_version(c.compaction_version);
  out.set_item_count(c.item_count);
  out.set_last_sequence(c.last_sequence);
  out.set_last_turn_index(c.last_turn_index);
  SetTimestamp(c.create_time, out.mutable_create_time());
  SetTimestamp(c.update_time, out.mutable_update_time());
  return out;
}

void ToProto(const Item& item, v1::Item* out) {
  out->set_sequence(item.sequence);
  out->set_turn_index(item.turn_index);
  out->set_role(static_cast<v1::Role>(item.data.role));
  out->set_kind(static_cast<v1::ItemKind>(item.data.kind));
  out->set_content(item.data.content);
  out->set_tool_name(item.data.tool_name);
  out->set_tool_call_id(item.data.tool_call_id);
  out->set_pinned(item.data.pinned);
  FromMetadata(item.data.metadata, out->mutable_metadata());
  out->set_token_count(item.data.token_count);
  out->set_summary_chunk_id(item.summary_chunk_id);
  SetTimestamp(item.create_time, out->mutable_create_time());
  if (item.redacted) {
    out->set_redacted(true);
    out->set_redacted_digest(item.redacted_digest);
  }
}

void ToProto(const TokenBreakdown& t, v1::TokenBreakdown* pt) {
  pt->set_system(t.system);
  pt->set_pinned(t.pinned);
  pt->set_summaries(t.summaries);
  pt->set_ledger(t.ledger);
  pt->set_live(t.live);
  pt->set_tool_results(t.tool_results);
  pt->set_recalled(t.recalled);
  pt->set_pending(t.pending);
  pt->set_output_reserve(t.output_reserve);
  pt->set_total(t.total);
  pt->set_context_window(t.context_window);
  pt->set_approximate(t.approximate);
}

// Moves the entries' texts into `out`: each is copied once, into the
// message, on its way from storage to the wire.
void ToProto(ContextView&& view, v1::BuildContextResponse* out) {
  out->set_version(view.version);
  out->set_compaction_version(view.compaction_version);
  out->mutable_entries()->Reserve(static_cast<int>(view.entries.size()));
  for (ViewEntry& e : view.entries) {
    v1::ContextEntry* pe = out->add_entries();
    pe->set_section(static_cast<v1::Section>(e.section));
    pe->set_role(static_cast<v1::Role>(e.role));
    pe->set_kind(static_cast<v1::ItemKind>(e.kind));
    pe->set_content(std::move(e.content));
    pe->set_tool_name(e.tool_name);
    pe->set_tool_call_id(e.tool_call_id);
    pe->set_sequence(e.sequence);
    pe->set_token_count(e.token_count);
    pe->set_pruned(e.pruned);
    pe->set_summary_chunk_id(e.summary_chunk_id);
  }
  ToProto(view.tokens, out->mutable_tokens());
  out->set_context_status(static_cast<v1::ContextStatus>(view.status));
  out->set_ledger_facts_omitted(view.ledger_facts_omitted);
  out->set_summaries_truncated(view.summaries_truncated);
  out->set_instructions_shortened(view.instructions_shortened);
}

void ToProto(const LedgerFact& f, v1::LedgerFact* out) {
  out->set_sequence(f.sequence);
  out->set_turn_index(f.turn_index);
  out->set_role(static_cast<v1::Role>(f.role));
  out->set_text(f.text);
  out->set_token_count(f.token_count);
}

void ToProto(const SummaryChunk& c, v1::SummaryChunk* pc) {
  pc->set_chunk_id(c.chunk_id);
  pc->set_from_sequence(c.from_sequence);
  pc->set_through_sequence(c.through_sequence);
  pc->set_text(c.text);
  pc->set_token_count(c.token_count);
  pc->set_summarizer_model(c.summarizer_model);
  pc->set_prompt_version(c.prompt_version);
  pc->set_tokens_in(c.tokens_in);
  pc->set_tokens_out(c.tokens_out);
  pc->set_latency_ms(c.latency_ms);
  pc->set_superseded_by(c.superseded_by);
  SetTimestamp(c.create_time, pc->mutable_create_time());
  if (c.recall.has_value()) pc->set_recall(*c.recall);
  for (const LedgerFact& f : c.facts) ToProto(f, pc->add_facts());
  for (const LedgerFact& f : c.constraints) ToProto(f, pc->add_constraints());
  for (const LedgerFact& f : c.lost) ToProto(f, pc->add_lost_facts());
  pc->set_source_conversation_id(c.source_conversation_id);
  pc->set_source_chunk_id(c.source_chunk_id);
  pc->set_reverted(c.reverted);
  pc->set_reverted_by(c.reverted_by);
}

void ToProto(const CompactionEvent& e, v1::CompactionEvent* out) {
  out->set_event_id(e.event_id);
  out->set_event(e.event);
  out->set_tier(e.tier);
  out->set_tokens_before(e.tokens_before);
  out->set_tokens_after(e.tokens_after);
  out->set_detail_json(e.detail);
  SetTimestamp(e.create_time, out->mutable_create_time());
}

ItemData ToItemData(const v1::NewItem& item) {
  ItemData data;
  data.role = static_cast<Role>(item.role());
  data.kind = static_cast<ItemKind>(item.kind());
  data.content = item.content();
  data.tool_name = item.tool_name();
  data.tool_call_id = item.tool_call_id();
  data.pinned = item.pinned();
  data.metadata = ToMetadata(item.metadata());
  return data;
}

absl::StatusOr<int> PageSize(int32_t requested, int default_size) {
  if (requested < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must not be negative, got ", requested));
  }
  if (requested == 0) return default_size;
  return std::min<int>(requested, kMaxPage);
}

namespace {

absl::Status BadPageToken() {
  return absl::InvalidArgumentError(
      "page_token: not a token from a previous response of this method");
}

// The position a page token holds, checked before it goes anywhere: what a
// client sends as a token is arbitrary bytes.
absl::StatusOr<std::string> DecodePageToken(absl::string_view kind, absl::string_view token) {
  std::string raw;
  const std::string prefix = absl::StrCat(kind, ":");
  if (!absl::WebSafeBase64Unescape(token, &raw) || !absl::StartsWith(raw, prefix)) {
    return BadPageToken();
  }
  return raw.substr(prefix.size());
}

}  // namespace

std::string EncodePageToken(absl::string_view kind, absl::string_view position) {
  return absl::WebSafeBase64Escape(absl::StrCat(kind, ":", position));
}

// A page token that holds an id (a conversation's).
absl::StatusOr<std::string> DecodeIdToken(absl::string_view kind, absl::string_view token) {
  ASSIGN_OR_RETURN(std::string id, DecodePageToken(kind, token));
  if (!ValidateId("page_token", id).ok()) return BadPageToken();
  return id;
}

// A page token that holds a number in [min, max] (a sequence, an id).
absl::StatusOr<int64_t> DecodeNumberToken(absl::string_view kind, absl::string_view token,
                                          int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(std::string position, DecodePageToken(kind, token));
  int64_t n = 0;
  if (!absl::SimpleAtoi(position, &n) || n < min || n > max) return BadPageToken();
  return n;
}

void ToProto(RecalledPassage p, v1::RecalledPassage* out) {
  out->set_sequence(p.sequence);
  out->set_turn_index(p.turn_index);
  out->set_role(static_cast<v1::Role>(p.role));
  out->set_kind(static_cast<v1::ItemKind>(p.kind));
  out->set_tool_name(std::move(p.tool_name));
  out->set_text(std::move(p.text));
  out->set_offset(static_cast<int64_t>(p.offset));
  out->set_title(std::move(p.title));
  out->set_score(p.score);
  out->set_token_count(p.tokens);
  out->set_call(std::move(p.call));
}

}  // namespace convstate
