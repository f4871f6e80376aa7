#ifndef CONVSTATE_TESTS_ERASURE_SCENARIO_H_
#define CONVSTATE_TESTS_ERASURE_SCENARIO_H_

// One erasure scenario for both storage backends. A secret is appended (in
// a user message and in a tool result), previewed by a Compact dry run (a
// stored proposal), that proposal applied, previewed again (another
// proposal), carried into a conversation continued from the first (its
// summaries and its newest turns), searched for and recalled (so that it is
// in the word index and in the replica's caches); then every item that held
// it, in every conversation, is redacted. The calls go through ErasureApi:
// the real server over gRPC on PostgreSQL (tests/redaction_e2e_test.cc) or
// ConversationService in process on the memory backend
// (tests/redaction_memory_test.cc). Each test then scans its own store;
// what the API still answers is checked here, for both.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convstate/v1/convstate.pb.h"

namespace convstate::testing {

// The secret. Its words are found in no other text the scenario writes.
inline constexpr char kErasedSecret[] = "Zephyr-Quokka-88231";

// Every form of the secret a store could keep: as written, in lower case,
// and each word the history search stores it as (storage/contract.h
// SearchTerms: the compound, its parts, their stems), lower case, each
// once.
std::vector<std::string> SecretForms();

// Where `text` holds a form of the secret: "" when nowhere, else the first
// form found with the text around it. Letters are matched whatever their
// case, inside words too; a form of digits only ("88231") only as a word of
// its own, and not as the fraction of a time of day ("12:00:01.88231",
// which a timestamp may print). Runs of base64 in `text` (a stored
// proposal's answer, say) are decoded and searched as well.
std::string SecretIn(absl::string_view text);

// The calls the scenario makes, as the API answers them.
class ErasureApi {
 public:
  virtual ~ErasureApi() = default;
  virtual absl::StatusOr<v1::Conversation> CreateConversation(
      const v1::CreateConversationRequest& req) = 0;
  virtual absl::StatusOr<v1::Conversation> GetConversation(
      const v1::GetConversationRequest& req) = 0;
  virtual absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const v1::AppendTurnRequest& req) = 0;
  virtual absl::StatusOr<v1::ListItemsResponse> ListItems(const v1::ListItemsRequest& req) = 0;
  virtual absl::StatusOr<v1::BuildContextResponse> BuildContext(
      const v1::BuildContextRequest& req) = 0;
  virtual absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const v1::InspectContextRequest& req) = 0;
  virtual absl::StatusOr<v1::BuildContextResponse> GetContextAt(
      const v1::GetContextAtRequest& req) = 0;
  virtual absl::StatusOr<v1::CompactResponse> Compact(const v1::CompactRequest& req) = 0;
  virtual absl::StatusOr<v1::ApplyCompactionResponse> ApplyCompaction(
      const v1::ApplyCompactionRequest& req) = 0;
  virtual absl::StatusOr<v1::ListSummariesResponse> ListSummaries(
      const v1::ListSummariesRequest& req) = 0;
  virtual absl::StatusOr<v1::ExpandSummaryResponse> ExpandSummary(
      const v1::ExpandSummaryRequest& req) = 0;
  virtual absl::StatusOr<v1::ListCompactionEventsResponse> ListCompactionEvents(
      const v1::ListCompactionEventsRequest& req) = 0;
  virtual absl::StatusOr<v1::SearchHistoryResponse> SearchHistory(
      const v1::SearchHistoryRequest& req) = 0;
  virtual absl::StatusOr<v1::RedactItemsResponse> RedactItems(
      const v1::RedactItemsRequest& req) = 0;
};

// What the scenario did, for the checks after it.
struct ErasureScenario {
  // The conversation the secret was appended to (model tiny-1, see
  // tests/test_profiles.h), and the one continued from it.
  std::string source = "vault-session";
  std::string continued = "vault-session-next";
  // The proposals of the two dry runs, in order; the first was applied,
  // with `applied` its answer.
  std::vector<std::string> proposals;
  v1::ApplyCompactionResponse applied;
  // The sequences of the items whose content held the secret before the
  // erasure, by conversation.
  std::map<std::string, std::vector<int64_t>> holding;
  // The views built before the erasure: conversation, version and
  // compaction_version, for GetContextAt afterwards.
  struct View {
    std::string conversation;
    int64_t version = 0;
    int64_t compaction_version = 0;
  };
  std::vector<View> views;
  // What the continued conversation still answered (as
  // WhatTheApiStillAnswers does) after the source's erasure alone, before
  // its own: "" when that erasure reached it by itself.
  std::string continuation_after_source_erasure;
};

// Runs the scenario up to the erasure and checks (fatally) that the secret
// spread as it should: into both proposals' stores, a summary, the
// continued conversation, the search and the recall.
void SpreadTheSecret(ErasureApi& api, ErasureScenario& s);

// Redacts every item that held the secret: the source's first, then
// (whatever that reached) the continued conversation's.
void EraseTheSecret(ErasureApi& api, ErasureScenario& s);

// Everything the API answers about the scenario's conversations that still
// holds the secret, one line each ("" when nothing): items, summaries and
// their expansions, the audit trail, searches and recall for each of its
// forms, views now and at every recorded compaction_version, and the
// replay of the applied proposal.
std::string WhatTheApiStillAnswers(ErasureApi& api, const ErasureScenario& s);

// What applying the already applied proposal again answers now: its
// status, and its response when it has one.
std::string ReplayOfTheAppliedProposal(ErasureApi& api, const ErasureScenario& s);

}  // namespace convstate::testing

#endif  // CONVSTATE_TESTS_ERASURE_SCENARIO_H_
