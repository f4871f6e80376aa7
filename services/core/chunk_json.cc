#include "services/core/chunk_json.h"

#include <string>
#include <vector>

namespace convstate {
using Json = nlohmann::json;

Json FactsJson(const std::vector<LedgerFact>& facts) {
  Json out = Json::array();
  for (const LedgerFact& f : facts) {
    out.push_back({{"s", f.sequence}, {"u", f.turn_index}, {"r", std::string(RoleName(f.role))},
                   {"t", f.text}, {"n", f.token_count}, {"h", f.token_hashes}});
  }
  return out;
}

std::vector<LedgerFact> FactsFromJson(const Json& in) {
  std::vector<LedgerFact> out;
  if (!in.is_array()) return out;
  for (const Json& f : in) {
    if (!f.is_object()) continue;
    LedgerFact fact;
    fact.sequence = f.value("s", int64_t{0});
    fact.turn_index = f.value("u", int64_t{0});
    fact.role = RoleFromName(f.value("r", std::string("user"))).value_or(Role::kUser);
    fact.text = f.value("t", std::string());
    fact.token_count = f.value("n", int64_t{0});
    if (auto h = f.find("h"); h != f.end() && h->is_array()) {
      for (const Json& v : *h) {
        if (v.is_number_unsigned()) fact.token_hashes.push_back(v.get<uint64_t>());
      }
    }
    out.push_back(std::move(fact));
  }
  return out;
}

Json PolicyJson(const CompactionPolicy& policy) {
  Json keep = Json::array();
  for (const KeepRule& r : policy.keep) {
    Json roles = Json::array();
    for (Role role : r.roles) roles.push_back(std::string(RoleName(role)));
    keep.push_back({{"pattern", r.pattern}, {"roles", roles}, {"tools", r.tool_names}});
  }
  Json out{{"instructions", policy.instructions}, {"keep", keep}};
  if (policy.keep_budget_fraction) out["keep_budget_fraction"] = *policy.keep_budget_fraction;
  return out;
}

CompactionPolicy PolicyFromJson(const Json& j) {
  CompactionPolicy policy;
  if (!j.is_object()) return policy;
  policy.instructions = j.value("instructions", std::string());
  if (auto it = j.find("keep"); it != j.end() && it->is_array()) {
    for (const Json& r : *it) {
      if (!r.is_object()) continue;
      KeepRule rule;
      rule.pattern = r.value("pattern", std::string());
      for (const Json& role : r.value("roles", Json::array())) {
        if (!role.is_string()) continue;
        if (std::optional<Role> parsed = RoleFromName(role.get<std::string>())) {
          rule.roles.push_back(*parsed);
        }
      }
      for (const Json& tool : r.value("tools", Json::array())) {
        if (tool.is_string()) rule.tool_names.push_back(tool.get<std::string>());
      }
      policy.keep.push_back(std::move(rule));
    }
  }
  if (auto it = j.find("keep_budget_fraction"); it != j.end() && it->is_number()) {
    policy.keep_budget_fraction = it->get<double>();
  }
  return policy;
}

Json ChunkStructureJson(const SummaryChunk& chunk) {
  Json lines = Json::array();
  for (const SummaryLine& l : chunk.lines) {
    lines.push_back({{"s", l.sequence}, {"w", l.speaker}, {"t", l.text}, {"k", l.score}});
  }
  Json out{{"lines", lines},
           {"facts", FactsJson(chunk.facts)},
           {"constraints", FactsJson(chunk.constraints)}};
  if (!chunk.lost.empty()) out["lost"] = FactsJson(chunk.lost);
  if (!chunk.source_conversation_id.empty()) {
    out["src"] = {{"c", chunk.source_conversation_id}, {"k", chunk.source_chunk_id}};
  }
  if (chunk.prune_boundary_before >= 0) out["pb"] = chunk.prune_boundary_before;
  return out;
}

void ReadChunkStructure(const Json& j, SummaryChunk& chunk) {
  if (!j.is_object()) return;
  if (auto it = j.find("lines"); it != j.end() && it->is_array()) {
    for (const Json& l : *it) {
      if (!l.is_object()) continue;
      chunk.lines.push_back(SummaryLine{l.value("s", int64_t{0}), l.value("w", std::string()),
                                        l.value("t", std::string()), l.value("k", 0)});
    }
  }
  if (auto it = j.find("facts"); it != j.end()) chunk.facts = FactsFromJson(*it);
  if (auto it = j.find("constraints"); it != j.end()) chunk.constraints = FactsFromJson(*it);
  if (auto it = j.find("lost"); it != j.end()) chunk.lost = FactsFromJson(*it);
  if (auto it = j.find("src"); it != j.end() && it->is_object()) {
    chunk.source_conversation_id = it->value("c", std::string());
    chunk.source_chunk_id = it->value("k", int64_t{0});
  }
  chunk.prune_boundary_before = j.value("pb", int64_t{-1});
  if (auto it = j.find("rv"); it != j.end() && it->is_object()) {
    chunk.reverted = true;
    chunk.reverted_by = it->value("by", std::string());
  }
}

void CopyChunkStructure(const SummaryChunk& from, SummaryChunk& to) {
  to.lines = from.lines;
  to.facts = from.facts;
  to.constraints = from.constraints;
  to.lost = from.lost;
  to.source_conversation_id = from.source_conversation_id;
  to.source_chunk_id = from.source_chunk_id;
  to.prune_boundary_before = from.prune_boundary_before;
  to.reverted = from.reverted;
  to.reverted_by = from.reverted_by;
}

Json ChunkJson(const SummaryChunk& chunk) {
  Json out = ChunkStructureJson(chunk);
  out["from"] = chunk.from_sequence;
  out["through"] = chunk.through_sequence;
  out["text"] = chunk.text;
  out["tokens"] = chunk.token_count;
  out["model"] = chunk.summarizer_model;
  out["prompt_version"] = chunk.prompt_version;
  out["tokens_in"] = chunk.tokens_in;
  out["tokens_out"] = chunk.tokens_out;
  out["latency_ms"] = chunk.latency_ms;
  if (chunk.recall.has_value()) out["recall"] = *chunk.recall;
  return out;
}

SummaryChunk ChunkFromJson(const Json& j) {
  SummaryChunk chunk;
  if (!j.is_object()) return chunk;
  ReadChunkStructure(j, chunk);
  chunk.from_sequence = j.value("from", int64_t{0});
  chunk.through_sequence = j.value("through", int64_t{0});
  chunk.text = j.value("text", std::string());
  chunk.token_count = j.value("tokens", int64_t{0});
  chunk.summarizer_model = j.value("model", std::string());
  chunk.prompt_version = j.value("prompt_version", std::string());
  chunk.tokens_in = j.value("tokens_in", int64_t{0});
  chunk.tokens_out = j.value("tokens_out", int64_t{0});
  chunk.latency_ms = j.value("latency_ms", int64_t{0});
  if (auto it = j.find("recall"); it != j.end() && it->is_number()) {
    chunk.recall = it->get<double>();
  }
  return chunk;
}

}  // namespace convstate
