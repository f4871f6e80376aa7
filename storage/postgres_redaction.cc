#include "storage/postgres_storage_internal.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "storage/contract.h"
#include "storage/pg_util.h"
#include "storage/postgres_rows.h"
#include "storage/rules.h"

namespace convstate::pg {
namespace {

// How many times an erasure reads the forks sharing its items again while
// forks are being made of them.
constexpr int kMaxFamilyReads = 5;

}  // namespace

absl::StatusOr<RedactResult> PostgresStorage::RedactItems(const CallContext& ctx,
                                                          const RedactRequest& request) {
  const std::string sequences = IdArray(request.sequences);
  return Run<RedactResult>(ctx, "redact items",
                           [&](pqxx::transaction_base& tx) -> absl::StatusOr<RedactResult> {
    pqxx::result locked = ExecNamed(tx, "lock_conversation", request.key);
    if (locked.empty()) return NotFound(request.key);
    const ConversationRow row = ParseConversation(locked[0]);
    const int64_t conv_key = row.conv_key;
    for (const auto& r : Exec(tx, "redact_check", conv_key, sequences)) {
      if (r[1].is_null()) {
        return absl::NotFoundError(absl::StrCat("conversation '", request.key.conversation_id,
                                                "' has no item ", r[0].as<int64_t>()));
      }
      if (r[1].as<std::string>() == "summary_marker") {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequences: item ", r[0].as<int64_t>(), " is a summary marker, not content"));
      }
    }
    // The digests, computed here: the key never goes to the database.
    absl::flat_hash_map<int64_t, std::string> digests;
    if (!request.digest_key.empty()) {
      for (const auto& r : Exec(tx, "redact_read", conv_key, sequences)) {
        digests[r[0].as<int64_t>()] = RedactedDigest(request.digest_key, r[1].as<std::string>());
      }
    }
    std::vector<std::string> digest_list;
    for (int64_t s : request.sequences) digest_list.push_back(digests[s]);
    RedactResult result;
    Tombstoned tombstoned;
    const Erasure erased =
        Erase(tx, conv_key, request.sequences, digest_list, request, tombstoned);
    result.chunks_removed = static_cast<int64_t>(erased.retired.size());
    result.compaction_version = erased.compaction_version;
    InsertEvents(tx, conv_key, {RedactedEvent(request, result.chunks_removed)});
    const std::vector<Item> range = ParseItems(Exec(
        tx, row.conversation.recounted ? "items_range_recounted" : "items_range", conv_key,
        request.sequences.front(), request.sequences.back(), row.conversation.count_encoding));
    for (const Item& item : range) {
      if (std::binary_search(request.sequences.begin(), request.sequences.end(),
                             item.sequence)) {
        result.items.push_back(item);
      }
    }
    RETURN_IF_ERROR(EraseContinuations(tx, request, row.conversation.storage_key, erased.retired,
                                       tombstoned, result));
    // The forks and sources that hold copies of the items, held: a fork
    // being made of one of them (which holds its source FOR SHARE) commits
    // first and is read again here, and one made later copies the items as
    // this erasure leaves them.
    std::vector<ForkLink> family;
    std::map<std::string, int64_t> conv_keys;
    for (int round = 0; round < kMaxFamilyReads; ++round) {
      std::vector<ForkLink> read;
      std::map<std::string, int64_t> keys;
      for (const auto& r : Exec(tx, "fork_family", request.key.tenant_id)) {
        read.push_back(ForkLink{r[0].as<std::string>(), r[1].as<int64_t>(),
                                r[2].as<int64_t>(), r[3].as<int64_t>()});
        keys[read.back().id] = r[4].as<int64_t>();
      }
      const bool settled = round > 0 && keys == conv_keys;
      family = std::move(read);
      conv_keys = std::move(keys);
      if (family.empty() || settled) break;
      std::vector<int64_t> members;
      for (const auto& [id, key] : conv_keys) members.push_back(key);
      std::sort(members.begin(), members.end());
      Exec(tx, "lock_members", IdArray(members));
    }
    if (!family.empty()) {
      const Conversation& c = row.conversation;
      ASSIGN_OR_RETURN(const auto sharing,
                       ForkFamilyErasure(family,
                                         ForkLink{request.key.conversation_id, c.storage_key,
                                                  c.forked_from_key, c.forked_at},
                                         request.sequences));
      for (const auto& [link, seqs] : sharing) {
        RedactRequest here = request;
        here.key = ConversationKey{request.key.tenant_id, link.id};
        here.sequences = seqs;
        std::vector<std::string> copy_digests;
        for (int64_t s : seqs) copy_digests.push_back(digests[s]);
        const Erasure copy = Erase(tx, conv_keys[link.id], seqs, copy_digests, here, tombstoned);
        InsertEvents(tx, conv_keys[link.id],
                     {RedactedEvent(here, static_cast<int64_t>(copy.retired.size()))});
        // And what was continued from the copy.
        RETURN_IF_ERROR(
            EraseContinuations(tx, here, link.key, copy.retired, tombstoned, result));
      }
    }
    tx.commit();
    return result;
  });
}

PostgresStorage::Erasure PostgresStorage::Erase(pqxx::transaction_base& tx, int64_t conv_key,
                                                const std::vector<int64_t>& seqs,
                                                const std::vector<std::string>& digests,
                                                const RedactRequest& request,
                                                Tombstoned& tombstoned) {
  const std::string sequences = IdArray(seqs);
  // What others tombstoned of the items it may share, and it has not
  // counted yet.
  Tombstoned earlier;
  for (size_t k = 0; k < tombstoned.sequences.size(); ++k) {
    if (tombstoned.counted.contains({conv_key, tombstoned.sequences[k]})) continue;
    earlier.owners.push_back(tombstoned.owners[k]);
    earlier.sequences.push_back(tombstoned.sequences[k]);
    earlier.bytes.push_back(tombstoned.bytes[k]);
    earlier.tokens.push_back(tombstoned.tokens[k]);
  }
  const pqxx::row removed = Exec1(
      tx, "redact_items", conv_key, sequences, request.tombstone, request.tombstone_tokens,
      pg::TextArray(digests), IdArray(earlier.owners), IdArray(earlier.sequences),
      IdArray(earlier.bytes), IdArray(earlier.tokens));
  auto add = [&](int column, std::vector<int64_t>& to) {
    for (int64_t v : ParseIdArray(removed[column].as<std::string>())) to.push_back(v);
  };
  add(3, tombstoned.owners);
  add(4, tombstoned.sequences);
  add(5, tombstoned.bytes);
  add(6, tombstoned.tokens);
  for (int64_t s : seqs) tombstoned.counted.insert({conv_key, s});
  Exec(tx, "redact_token_counts", conv_key, sequences);
  Erasure erasure;
  const pqxx::row cut = Exec1(tx, "redact_cut", conv_key, sequences);
  if (!cut[0].is_null()) {
    for (const auto& r : Exec(tx, "redact_chunks", conv_key, cut[0].as<int64_t>())) {
      erasure.retired.push_back(r[0].as<int64_t>());
    }
    Exec(tx, "redact_reactivate", conv_key);
  }
  const int64_t redacted = removed[2].as<int64_t>();
  erasure.compaction_version =
      Exec1(tx, "redact_conversation", conv_key, removed[0].as<int64_t>(),
            removed[1].as<int64_t>(), redacted * request.tombstone_tokens,
            !erasure.retired.empty(),
            redacted * static_cast<int64_t>(request.tombstone.size()))[0]
          .as<int64_t>();
  Exec(tx, "redact_idempotency", conv_key, sequences);
  // What was derived from the erased items: the conversation's compaction
  // proposals go, and the audit trail's fact texts of them give way to the
  // tombstone.
  Exec(tx, "redact_proposals", conv_key);
  Exec(tx, "redact_event_facts", conv_key, sequences, request.tombstone);
  Exec(tx, "record_view_state", conv_key);
  // A fork's copies shrank as its source's did.
  Exec(tx, "recount_shared", IdArray({conv_key}));
  return erasure;
}

absl::Status PostgresStorage::EraseContinuations(pqxx::transaction_base& tx,
                                                 const RedactRequest& request,
                                                 int64_t root_incarnation,
                                                 const std::vector<int64_t>& retired_here,
                                                 Tombstoned& tombstoned, RedactResult& result) {
  std::map<std::string, std::set<int64_t>> retired;
  if (!retired_here.empty()) {
    retired[request.key.conversation_id].insert(retired_here.begin(), retired_here.end());
  }
  // Erased items by conversation, as their sequences' text.
  std::map<std::string, std::vector<std::string>> erased;
  for (int64_t s : request.sequences) {
    erased[request.key.conversation_id].push_back(absl::StrCat(s));
  }
  // The lineage, by incarnation; each conversation once, and at most
  // kMaxLineage of them.
  std::vector<std::string> frontier = {request.key.conversation_id};
  std::vector<int64_t> incarnations = {root_incarnation};
  absl::flat_hash_set<int64_t> visited = {root_incarnation};
  while (!frontier.empty()) {
    std::vector<std::string> next;
    std::vector<int64_t> next_incarnations;
    for (const auto& r : Exec(tx, "continued_from", request.key.tenant_id,
                              pg::TextArray(frontier), IdArray(incarnations))) {
      const int64_t continued = r[0].as<int64_t>();
      const std::string id = r[1].as<std::string>();
      const std::string parent = r[2].as<std::string>();
      const int64_t incarnation = r[3].as<int64_t>();
      if (!visited.insert(incarnation).second) continue;
      if (visited.size() > kMaxLineage) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the erasure would reach more than ", kMaxLineage,
            " conversations continued from this one; nothing was erased"));
      }
      next.push_back(id);
      next_incarnations.push_back(incarnation);
      std::vector<SummaryChunk> chunks;
      for (const auto& c : Exec(tx, "all_chunks", continued)) chunks.push_back(ParseChunk(c));
      const ContinuedErasure erasure = EraseContinued(chunks, retired);
      int64_t removed = static_cast<int64_t>(erasure.retire.size());
      if (!erasure.retire.empty()) {
        Exec(tx, "retire_chunks", continued, IdArray(erasure.retire));
        Exec(tx, "reactivate_chunks", continued, IdArray(erasure.reactivate));
        Exec(tx, "continued_erased", continued);
        Exec(tx, "record_view_state", continued);
        retired[id].insert(erasure.retire.begin(), erasure.retire.end());
      }
      std::vector<int64_t> carried;
      for (const auto& c : Exec(tx, "carried_items", continued, pg::TextArray(erased[parent]))) {
        carried.push_back(c[0].as<int64_t>());
      }
      if (!carried.empty()) {
        const Erasure copies =
            Erase(tx, continued, carried, std::vector<std::string>(carried.size()), request,
                  tombstoned);
        retired[id].insert(copies.retired.begin(), copies.retired.end());
        removed += static_cast<int64_t>(copies.retired.size());
        for (int64_t s : carried) erased[id].push_back(absl::StrCat(s));
      }
      if (erasure.retire.empty() && carried.empty()) continue;
      result.continued_chunks_removed += removed;
      InsertEvents(tx, continued, {ContinuedErasedEvent(request, removed)});
    }
    frontier = std::move(next);
    incarnations = std::move(next_incarnations);
  }
  return absl::OkStatus();
}

}  // namespace convstate::pg
