#include "storage/postgres_rows.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "services/core/chunk_json.h"
#include "storage/pg_util.h"
#include "storage/structure_cache.h"

namespace convstate::pg {
namespace {

using Json = nlohmann::json;

}  // namespace

std::string MetadataToJson(const Metadata& metadata) { return Json(metadata).dump(); }

Metadata MetadataFromJson(const std::string& text) {
  if (text == "{}") return Metadata();  // Most items have none.
  return Json::parse(text).get<Metadata>();
}

std::string OverridesToJson(const ProfileOverrides& o) {
  Json j = Json::object();
  if (o.context_window) j["context_window"] = *o.context_window;
  if (o.output_reserve) j["output_reserve"] = *o.output_reserve;
  if (o.soft_threshold) j["soft_threshold"] = *o.soft_threshold;
  if (o.hard_threshold) j["hard_threshold"] = *o.hard_threshold;
  if (o.emergency_threshold) j["emergency_threshold"] = *o.emergency_threshold;
  if (o.token_floor) j["token_floor"] = *o.token_floor;
  if (o.recent_turns) j["recent_turns"] = *o.recent_turns;
  if (o.recent_tokens) j["recent_tokens"] = *o.recent_tokens;
  if (o.compaction_enabled) j["compaction_enabled"] = *o.compaction_enabled;
  if (o.recall_budget_fraction) j["recall_budget_fraction"] = *o.recall_budget_fraction;
  if (o.prompt_cache_ttl_s) j["prompt_cache_ttl_s"] = *o.prompt_cache_ttl_s;
  if (o.hard_band_policy) j["hard_band_policy"] = static_cast<int>(*o.hard_band_policy);
  if (o.policy) j["policy"] = PolicyJson(*o.policy);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

template <typename T>
void ReadOptional(const Json& j, const char* name, std::optional<T>& out) {
  if (j.contains(name)) out = j.at(name).get<T>();
}

}  // namespace

ProfileOverrides OverridesFromJson(const std::string& text) {
  const Json j = Json::parse(text);
  ProfileOverrides o;
  ReadOptional(j, "context_window", o.context_window);
  ReadOptional(j, "output_reserve", o.output_reserve);
  ReadOptional(j, "soft_threshold", o.soft_threshold);
  ReadOptional(j, "hard_threshold", o.hard_threshold);
  ReadOptional(j, "emergency_threshold", o.emergency_threshold);
  ReadOptional(j, "token_floor", o.token_floor);
  ReadOptional(j, "recent_turns", o.recent_turns);
  ReadOptional(j, "recent_tokens", o.recent_tokens);
  ReadOptional(j, "compaction_enabled", o.compaction_enabled);
  ReadOptional(j, "recall_budget_fraction", o.recall_budget_fraction);
  ReadOptional(j, "prompt_cache_ttl_s", o.prompt_cache_ttl_s);
  if (auto it = j.find("hard_band_policy"); it != j.end()) {
    o.hard_band_policy = static_cast<HardBandPolicy>(it->get<int>());
  }
  if (auto it = j.find("policy"); it != j.end()) o.policy = PolicyFromJson(*it);
  return o;
}

ConversationRow ParseConversation(const pqxx::row& r) {
  ConversationRow out;
  out.conv_key = r[0].as<int64_t>();
  Conversation& c = out.conversation;
  c.key.tenant_id = r[1].as<std::string>();
  c.key.conversation_id = r[2].as<std::string>();
  c.model = r[3].as<std::string>();
  c.system_prompt = r[4].as<std::string>();
  c.pinned_instructions = r[5].as<std::string>();
  c.metadata = MetadataFromJson(r[6].as<std::string>());
  c.overrides = OverridesFromJson(r[7].as<std::string>());
  c.version = r[8].as<int64_t>();
  c.item_count = r[9].as<int64_t>();
  c.last_sequence = r[10].as<int64_t>();
  c.last_turn_index = r[11].as<int64_t>();
  c.summarized_through = r[12].as<int64_t>();
  c.create_time = absl::FromUnixMicros(r[13].as<int64_t>());
  c.update_time = absl::FromUnixMicros(r[14].as<int64_t>());
  c.system_prompt_tokens = r[15].as<int64_t>();
  c.pinned_instructions_tokens = r[16].as<int64_t>();
  c.item_tokens = r[17].as<int64_t>();
  c.token_correction = r[18].as<double>();
  c.prune_boundary = r[19].as<int64_t>();
  c.lease_token = r[20].as<int64_t>();
  c.lease_active = r[21].as<bool>();
  c.compaction_version = r[22].as<int64_t>();
  c.overflow_correction = r[23].as<double>();
  c.prompt_limit = r[24].as<int64_t>();
  c.continued_from = r[25].as<std::string>();
  c.count_encoding = r[26].as<std::string>();
  c.recounted = r[27].as<bool>();
  c.storage_key = r[28].as<int64_t>();
  c.redactions = r[29].as<int64_t>();
  out.stored_bytes = r[30].as<int64_t>();
  c.forked_from = r[31].as<std::string>();
  c.forked_from_key = r[32].as<int64_t>();
  c.forked_at = r[33].as<int64_t>();
  return out;
}

Item ParseItem(const pqxx::row& r) {
  Item item;
  item.sequence = r[0].as<int64_t>();
  item.turn_index = r[1].as<int64_t>();
  // The schema's CHECK constraints admit only known names.
  item.data.role = RoleFromName(r[2].as<std::string>()).value_or(Role::kUser);
  item.data.kind = ItemKindFromName(r[3].as<std::string>()).value_or(ItemKind::kMessage);
  item.data.content = r[4].as<std::string>();
  item.data.tool_name = r[5].as<std::string>();
  item.data.tool_call_id = r[6].as<std::string>();
  item.data.pinned = r[7].as<bool>();
  item.data.metadata = MetadataFromJson(r[8].as<std::string>());
  item.data.token_count = r[9].as<int64_t>();
  item.summary_chunk_id = r[10].as<int64_t>();
  item.create_time = absl::FromUnixMicros(r[11].as<int64_t>());
  item.appended_version = r[12].as<int64_t>();
  item.redacted = r[13].as<bool>();
  item.redacted_digest = r[14].as<std::string>();
  return item;
}

std::vector<Item> ParseItems(const pqxx::result& result) {
  std::vector<Item> items;
  items.reserve(result.size());
  for (const auto& row : result) items.push_back(ParseItem(row));
  return items;
}

// A chunk's structured content as stored: short keys, since every
// BuildContext reads it.
std::string StructureToJson(const SummaryChunk& chunk) { return ChunkStructureJson(chunk).dump(); }

namespace {

// Parsed once per distinct text, for the whole process: the cache maps a
// text to what it parses into, whichever storage read it.
void StructureFromJson(const std::string& text, SummaryChunk& chunk) {
  constexpr size_t kStructureCacheBytes = size_t{32} << 20;
  static StructureCache* const structures = new StructureCache(kStructureCacheBytes);
  structures->Read(text, chunk);
}

}  // namespace

ViewState ViewStateFromJson(const std::string& text) {
  const Json j = Json::parse(text);
  ViewState s;
  s.model = j.value("model", std::string());
  s.system_prompt = j.value("sp", std::string());
  s.pinned_instructions = j.value("pi", std::string());
  if (j.contains("ov")) s.overrides = OverridesFromJson(j["ov"].dump());
  s.summarized_through = j.value("st", int64_t{0});
  s.prune_boundary = j.value("pb", int64_t{0});
  s.token_correction = j.value("tc", 1.0);
  s.overflow_correction = j.value("oc", 1.0);
  s.prompt_limit = j.value("pl", int64_t{0});
  for (const Json& id : j.value("chunks", Json::array())) s.chunk_ids.push_back(id.get<int64_t>());
  for (const Json& p : j.value("pins", Json::array())) {
    s.pins.emplace_back(p.at(0).get<int64_t>(), p.at(1).get<bool>());
  }
  return s;
}

SummaryChunk ParseChunk(const pqxx::row& r) {
  SummaryChunk c;
  c.chunk_id = r[0].as<int64_t>();
  c.from_sequence = r[1].as<int64_t>();
  c.through_sequence = r[2].as<int64_t>();
  c.text = r[3].as<std::string>();
  c.token_count = r[4].as<int64_t>();
  c.summarizer_model = r[5].as<std::string>();
  c.prompt_version = r[6].as<std::string>();
  c.tokens_in = r[7].as<int64_t>();
  c.tokens_out = r[8].as<int64_t>();
  c.latency_ms = r[9].as<int64_t>();
  c.superseded_by = r[10].as<int64_t>();
  c.create_time = absl::FromUnixMicros(r[11].as<int64_t>());
  StructureFromJson(r[12].as<std::string>(), c);
  const double recall = r[13].as<double>();
  if (recall >= 0) c.recall = recall;
  return c;
}

// What items.search holds for `content` of the conversation `conv_key`:
// its words (SearchTerms, the split migration 0016 made in SQL), each as
// the lexeme "<conv_key>#<word>", separated by spaces (words hold none).
std::string SearchLexemes(int64_t conv_key, absl::string_view content) {
  const std::string prefix = absl::StrCat(conv_key, "#");
  std::string out;
  for (const std::string& w : SearchTerms(content)) {
    if (!out.empty()) out.push_back(' ');
    absl::StrAppend(&out, prefix, w);
  }
  return out;
}

// A bigint[] literal of `ids`.
std::string IdArray(const std::vector<int64_t>& ids) {
  return absl::StrCat("{", absl::StrJoin(ids, ","), "}");
}

// A boolean[] literal of `flags`.
std::string BoolArray(const std::vector<bool>& flags) {
  std::string out = "{";
  for (size_t i = 0; i < flags.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", flags[i] ? "t" : "f");
  }
  return out + "}";
}

std::vector<int64_t> ParseIdArray(absl::string_view text) {
  std::vector<int64_t> ids;
  text = absl::StripPrefix(absl::StripSuffix(text, "}"), "{");
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t id = 0;
    if (absl::SimpleAtoi(part, &id)) ids.push_back(id);
  }
  return ids;
}

EventArrays::EventArrays(const std::vector<CompactionEvent>& events) {
  std::vector<std::string> n, t, d;
  std::vector<int64_t> b, a;
  for (const CompactionEvent& e : events) {
    n.push_back(e.event);
    t.push_back(e.tier);
    b.push_back(e.tokens_before);
    a.push_back(e.tokens_after);
    d.push_back(e.detail.empty() ? std::string("{}") : e.detail);
  }
  names = pg::TextArray(n);
  tiers = pg::TextArray(t);
  before = IdArray(b);
  after = IdArray(a);
  details = pg::TextArray(d);
}

absl::Status NotFound(const ConversationKey& key) {
  return absl::NotFoundError(
      absl::StrCat("conversation '", key.conversation_id, "' not found"));
}

}  // namespace convstate::pg
