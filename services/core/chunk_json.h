#ifndef CONVSTATE_SERVICES_CORE_CHUNK_JSON_H_
#define CONVSTATE_SERVICES_CORE_CHUNK_JSON_H_

// Summary chunks as JSON: the structured part PostgreSQL keeps beside a
// chunk's columns (its lines, facts, standing instructions, lost facts,
// provenance, the prune boundary it was made at, its revert), and the whole
// chunk, as a compaction proposal keeps it until it is applied.

#include <vector>

#include <nlohmann/json.hpp>

#include "services/core/types.h"

namespace convstate {

// Facts (or standing instructions) with their provenance, and back.
nlohmann::json FactsJson(const std::vector<LedgerFact>& facts);
std::vector<LedgerFact> FactsFromJson(const nlohmann::json& facts);

// A conversation's compaction policy, and back.
nlohmann::json PolicyJson(const CompactionPolicy& policy);
CompactionPolicy PolicyFromJson(const nlohmann::json& policy);

// The structured part of `chunk`.
nlohmann::json ChunkStructureJson(const SummaryChunk& chunk);
// Reads a structured part into `chunk`; what is missing or malformed is
// left as it is (chunks written before a field existed).
void ReadChunkStructure(const nlohmann::json& structure, SummaryChunk& chunk);
// Copies the fields ReadChunkStructure sets from `from` to `to`.
void CopyChunkStructure(const SummaryChunk& from, SummaryChunk& to);

// The whole chunk, and back.
nlohmann::json ChunkJson(const SummaryChunk& chunk);
SummaryChunk ChunkFromJson(const nlohmann::json& json);

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_CORE_CHUNK_JSON_H_
