#include "storage/structure_cache.h"

#include <string>

#include <gtest/gtest.h>

#include "services/core/chunk_json.h"

namespace convstate {
namespace {

SummaryChunk Structured(const std::string& fact) {
  SummaryChunk c;
  c.lines.push_back(SummaryLine{4, "user", "the line", 2});
  LedgerFact f;
  f.sequence = 4;
  f.turn_index = 2;
  f.role = Role::kAssistant;
  f.text = fact;
  f.token_count = 7;
  f.token_hashes = {1, 18446744073709551615ull};
  c.facts.push_back(f);
  f.text = "never deploy on Fridays";
  c.constraints.push_back(f);
  f.text = "lost " + fact;
  c.lost.push_back(f);
  c.source_conversation_id = "before";
  c.source_chunk_id = 3;
  c.prune_boundary_before = 9;
  return c;
}

// What the cache gives must be what parsing gives, field by field; the
// chunk JSON of both compares every structured field at once.
void ExpectSameStructure(const SummaryChunk& a, const SummaryChunk& b) {
  EXPECT_EQ(ChunkStructureJson(a), ChunkStructureJson(b));
}

TEST(StructureCacheTest, ReadsWhatParsingReadsAndParsesEachTextOnce) {
  StructureCache cache(1 << 20);
  const std::string json = ChunkStructureJson(Structured("port 5432 opened")).dump();
  SummaryChunk parsed;
  ReadChunkStructure(nlohmann::json::parse(json), parsed);

  SummaryChunk first, second;
  cache.Read(json, first);
  cache.Read(json, second);
  ExpectSameStructure(first, parsed);
  ExpectSameStructure(second, parsed);
  EXPECT_EQ(second.facts.at(0).token_hashes, parsed.facts.at(0).token_hashes);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
}

TEST(StructureCacheTest, AnotherTextIsAnotherEntry) {
  StructureCache cache(1 << 20);
  SummaryChunk a, b;
  cache.Read(ChunkStructureJson(Structured("port 5432 opened")).dump(), a);
  // A redaction rewrites the stored structure: the new text must not be
  // answered with the old one's facts.
  cache.Read(ChunkStructureJson(Structured("[redacted]")).dump(), b);
  EXPECT_EQ(a.facts.at(0).text, "port 5432 opened");
  EXPECT_EQ(b.facts.at(0).text, "[redacted]");
  EXPECT_EQ(cache.misses(), 2u);
}

TEST(StructureCacheTest, EmptyAndMalformedTextsLeaveTheChunkAsItIs) {
  StructureCache cache(1 << 20);
  SummaryChunk empty, malformed;
  cache.Read("{}", empty);
  cache.Read("{\"facts\": [", malformed);
  EXPECT_TRUE(empty.facts.empty());
  EXPECT_EQ(empty.prune_boundary_before, -1);
  EXPECT_TRUE(malformed.facts.empty());
  EXPECT_EQ(malformed.prune_boundary_before, -1);
}

TEST(StructureCacheTest, StaysWithinItsBytesDroppingTheLeastRecentlyUsed) {
  const std::string a = ChunkStructureJson(Structured("fact a 1")).dump();
  const std::string b = ChunkStructureJson(Structured("fact b 2")).dump();
  const std::string c = ChunkStructureJson(Structured("fact c 3")).dump();
  // Room for two entries of this size (each counted at twice its text).
  StructureCache cache(2 * a.size() + 2 * b.size() + a.size());
  SummaryChunk out;
  cache.Read(a, out);
  cache.Read(b, out);
  cache.Read(a, out);  // a is now the most recent: b goes first.
  cache.Read(c, out);
  EXPECT_LE(cache.bytes(), 2 * a.size() + 2 * b.size() + a.size());
  const size_t misses = cache.misses();
  cache.Read(a, out);
  EXPECT_EQ(cache.misses(), misses);
  cache.Read(b, out);
  EXPECT_EQ(cache.misses(), misses + 1);
}

TEST(StructureCacheTest, ATextLargerThanTheCacheIsParsedAndNotKept) {
  const std::string json = ChunkStructureJson(Structured("port 5432 opened")).dump();
  StructureCache cache(json.size());
  SummaryChunk out;
  cache.Read(json, out);
  cache.Read(json, out);
  EXPECT_EQ(out.facts.at(0).text, "port 5432 opened");
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_EQ(cache.bytes(), 0u);
}

}  // namespace
}  // namespace convstate
