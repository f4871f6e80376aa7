// Erasure on the memory backend: the erasure scenario (tests/erasure_scenario.h)
// through ConversationService in process, on NewMemoryStorage; then nothing
// the API answers holds the secret, and neither does anything the Storage
// interface can be asked about: every conversation, every item, every
// summary chunk (retired ones too), the audit trail, every proposal id,
// the context now and at every version and compaction_version, and the
// word index (SearchHistory for each of the secret's words).
//
// The memory backend has no dump: state that no Storage call reads back
// (proposals past their expiry but not yet dropped, idempotency records,
// lease holders, the word index's postings beyond the words asked for)
// is out of this scan's reach.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.pb.h"
#include "gtest/gtest.h"
#include "services/api/conversation_service.h"
#include "services/compaction/summarizers/extractive.h"
#include "services/profiles/model_registry.h"
#include "storage/contract.h"
#include "storage/memory_storage.h"
#include "storage/storage.h"
#include "tests/erasure_scenario.h"
#include "tests/test_profiles.h"

namespace convstate {
namespace {

using testing::SecretIn;

constexpr char kRedactionKey[] = "0123456789abcdef0123456789abcdef-redaction-test-key";
// Proposal ids asked for: far more than the scenario makes.
constexpr int64_t kProposalIds = 64;

// The scenario's calls, answered by the service in process.
class ServiceErasureApi : public testing::ErasureApi {
 public:
  ServiceErasureApi(ConversationService& service, CallContext ctx)
      : service_(service), ctx_(std::move(ctx)) {}

  absl::StatusOr<v1::Conversation> CreateConversation(
      const v1::CreateConversationRequest& req) override {
    return service_.CreateConversation(ctx_, req);
  }
  absl::StatusOr<v1::Conversation> GetConversation(const v1::GetConversationRequest& req) override {
    return service_.GetConversation(ctx_, req);
  }
  absl::StatusOr<v1::AppendTurnResponse> AppendTurn(const v1::AppendTurnRequest& req) override {
    return service_.AppendTurn(ctx_, req);
  }
  absl::StatusOr<v1::ListItemsResponse> ListItems(const v1::ListItemsRequest& req) override {
    return service_.ListItems(ctx_, req);
  }
  absl::StatusOr<v1::BuildContextResponse> BuildContext(
      const v1::BuildContextRequest& req) override {
    return service_.BuildContext(ctx_, req);
  }
  absl::StatusOr<v1::InspectContextResponse> InspectContext(
      const v1::InspectContextRequest& req) override {
    return service_.InspectContext(ctx_, req);
  }
  absl::StatusOr<v1::BuildContextResponse> GetContextAt(
      const v1::GetContextAtRequest& req) override {
    return service_.GetContextAt(ctx_, req);
  }
  absl::StatusOr<v1::CompactResponse> Compact(const v1::CompactRequest& req) override {
    return service_.Compact(ctx_, req);
  }
  absl::StatusOr<v1::ApplyCompactionResponse> ApplyCompaction(
      const v1::ApplyCompactionRequest& req) override {
    return service_.ApplyCompaction(ctx_, req);
  }
  absl::StatusOr<v1::ListSummariesResponse> ListSummaries(
      const v1::ListSummariesRequest& req) override {
    return service_.ListSummaries(ctx_, req);
  }
  absl::StatusOr<v1::ExpandSummaryResponse> ExpandSummary(
      const v1::ExpandSummaryRequest& req) override {
    return service_.ExpandSummary(ctx_, req);
  }
  absl::StatusOr<v1::ListCompactionEventsResponse> ListCompactionEvents(
      const v1::ListCompactionEventsRequest& req) override {
    return service_.ListCompactionEvents(ctx_, req);
  }
  absl::StatusOr<v1::SearchHistoryResponse> SearchHistory(
      const v1::SearchHistoryRequest& req) override {
    return service_.SearchHistory(ctx_, req);
  }
  absl::StatusOr<v1::RedactItemsResponse> RedactItems(const v1::RedactItemsRequest& req) override {
    return service_.RedactItems(ctx_, req);
  }

 private:
  ConversationService& service_;
  const CallContext ctx_;
};

// Every text field of each stored value, one after the other.
std::string ItemText(const Item& item) {
  std::string out = absl::StrCat(item.data.content, "\n", item.data.tool_name, "\n",
                                 item.data.tool_call_id, "\n", item.redacted_digest, "\n");
  for (const auto& [key, value] : item.data.metadata) absl::StrAppend(&out, key, "=", value, "\n");
  return out;
}

std::string FactsText(const std::vector<LedgerFact>& facts) {
  std::string out;
  for (const LedgerFact& f : facts) absl::StrAppend(&out, f.text, "\n");
  return out;
}

std::string ChunkText(const SummaryChunk& c) {
  std::string out = absl::StrCat(c.text, "\n", c.summarizer_model, "\n", c.prompt_version, "\n",
                                 c.source_conversation_id, "\n", c.reverted_by, "\n");
  for (const SummaryLine& line : c.lines) {
    absl::StrAppend(&out, line.speaker, ": ", line.text, "\n");
  }
  absl::StrAppend(&out, FactsText(c.facts), FactsText(c.constraints), FactsText(c.lost));
  return out;
}

std::string ConversationText(const Conversation& c) {
  std::string out =
      absl::StrCat(c.key.tenant_id, "\n", c.key.conversation_id, "\n", c.model, "\n",
                   c.system_prompt, "\n", c.pinned_instructions, "\n", c.continued_from, "\n",
                   c.count_encoding, "\n");
  for (const auto& [key, value] : c.metadata) absl::StrAppend(&out, key, "=", value, "\n");
  if (c.overrides.policy.has_value()) {
    absl::StrAppend(&out, c.overrides.policy->instructions, "\n");
    for (const KeepRule& rule : c.overrides.policy->keep) {
      absl::StrAppend(&out, rule.pattern, "\n");
      for (const std::string& tool : rule.tool_names) absl::StrAppend(&out, tool, "\n");
    }
  }
  return out;
}

std::string SnapshotText(const ContextSnapshot& s) {
  std::string out = ConversationText(s.conversation);
  for (const SummaryChunk& c : s.active_chunks) absl::StrAppend(&out, ChunkText(c));
  for (const Item& i : s.pinned_items) absl::StrAppend(&out, ItemText(i));
  for (const Item& i : s.live_items) absl::StrAppend(&out, ItemText(i));
  return out;
}

// Everything the Storage interface answers about `tenant` that holds the
// secret, one line each ("" when nothing).
std::string StorageLeaks(Storage& storage, const std::string& tenant) {
  const CallContext ctx;
  std::string out;
  auto note = [&](const std::string& where, absl::string_view text) {
    const std::string found = SecretIn(text);
    if (!found.empty()) absl::StrAppend(&out, where, ": ", found, "\n");
  };
  std::vector<Conversation> conversations;
  for (std::string after;;) {
    absl::StatusOr<Page<Conversation>> page =
        storage.ListConversations(ctx, tenant, after, PageLimit{100});
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok() || page->rows.empty()) break;
    conversations.insert(conversations.end(), page->rows.begin(), page->rows.end());
    if (!page->more) break;
    after = page->rows.back().key.conversation_id;
  }
  EXPECT_EQ(conversations.size(), 2u);
  for (const Conversation& c : conversations) {
    const ConversationKey& key = c.key;
    const std::string& id = key.conversation_id;
    note(absl::StrCat("ListConversations ", id), ConversationText(c));
    for (int64_t after = 0;;) {
      absl::StatusOr<Page<Item>> page = storage.ListItems(ctx, key, after, PageLimit{1000});
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok() || page->rows.empty()) break;
      for (const Item& item : page->rows) {
        note(absl::StrCat("ListItems(", id, ") item ", item.sequence), ItemText(item));
      }
      if (!page->more) break;
      after = page->rows.back().sequence;
    }
    absl::StatusOr<std::vector<SummaryChunk>> chunks =
        AllSummaries(storage, ctx, key, /*include_superseded=*/true);
    EXPECT_TRUE(chunks.ok()) << chunks.status();
    for (const SummaryChunk& chunk : chunks.value_or(std::vector<SummaryChunk>())) {
      note(absl::StrCat("ListSummaries(", id, ") chunk ", chunk.chunk_id), ChunkText(chunk));
    }
    absl::StatusOr<std::vector<CompactionEvent>> events = AllCompactionEvents(storage, ctx, key);
    EXPECT_TRUE(events.ok()) << events.status();
    for (const CompactionEvent& e : events.value_or(std::vector<CompactionEvent>())) {
      note(absl::StrCat("ListCompactionEvents(", id, ") event ", e.event_id, " ", e.event),
           absl::StrCat(e.event, "\n", e.tier, "\n", e.detail));
    }
    for (int64_t p = 1; p <= kProposalIds; ++p) {
      absl::StatusOr<ProposalRecord> proposal = storage.GetProposal(ctx, key, p);
      if (proposal.ok()) {
        note(absl::StrCat("GetProposal(", id, ", ", p, ")"),
             absl::StrCat(proposal->body, "\n", proposal->applied_answer));
      }
    }
    absl::StatusOr<ContextSnapshot> now = storage.LoadContext(ctx, key);
    EXPECT_TRUE(now.ok()) << now.status();
    if (now.ok()) note(absl::StrCat("LoadContext(", id, ")"), SnapshotText(*now));
    absl::StatusOr<ContextDelta> since = storage.LoadContextSince(ctx, key, nullptr);
    EXPECT_TRUE(since.ok()) << since.status();
    if (since.ok()) note(absl::StrCat("LoadContextSince(", id, ")"), SnapshotText(since->snapshot));
    for (int64_t cv = 0; cv <= c.compaction_version; ++cv) {
      absl::StatusOr<ContextSnapshot> then = storage.LoadContextAt(ctx, key, c.version, cv);
      if (then.ok()) {
        note(absl::StrCat("LoadContextAt(", id, ", ", c.version, ", compaction_version ", cv, ")"),
             SnapshotText(*then));
      }
    }
    for (int64_t v = 0; v <= c.version; ++v) {
      absl::StatusOr<ContextSnapshot> then = storage.LoadContextAt(ctx, key, v, -1);
      if (then.ok()) {
        note(absl::StrCat("LoadContextAt(", id, ", version ", v, ")"), SnapshotText(*then));
      }
    }
    HistorySearch search;
    search.key = key;
    search.terms = testing::SecretForms();
    search.max_items = 400;
    absl::StatusOr<HistoryHits> hits = storage.SearchHistory(ctx, search);
    EXPECT_TRUE(hits.ok()) << hits.status();
    if (!hits.ok()) continue;
    for (const Item& item : hits->found) {
      note(absl::StrCat("SearchHistory(", id, ") item ", item.sequence), ItemText(item));
    }
    for (const auto& [sequence, call] : hits->calls) {
      note(absl::StrCat("SearchHistory(", id, ") call of item ", sequence), call);
    }
    for (const auto& [term, items] : hits->document_frequency) {
      if (items > 0) {
        absl::StrAppend(&out, "SearchHistory(", id, "): ", items, " items hold the word \"", term,
                        "\"\n");
      }
    }
  }
  return out;
}

class RedactionMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* vocab = std::getenv("CONVSTATE_VOCAB_DIR");
    ASSERT_TRUE(vocab != nullptr && *vocab != '\0')
        << "CONVSTATE_VOCAB_DIR is not set: run under tools/test";
    absl::StatusOr<std::unique_ptr<ModelRegistry>> models =
        ModelRegistry::FromText(testing::kTinyProfiles, vocab);
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models);
    storage_ = NewMemoryStorage();
    summarizer_ = NewExtractiveSummarizer();
    ConversationService::Options options;
    // As the PostgreSQL test's server runs: nothing compacts behind the
    // scenario's back.
    options.background_compaction = false;
    options.idle_compaction = false;
    options.redaction_key = kRedactionKey;
    service_ = std::make_unique<ConversationService>(options, models_.get(), storage_.get(),
                                                     summarizer_.get());
  }

  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<Storage> storage_;
  std::unique_ptr<Summarizer> summarizer_;
  std::unique_ptr<ConversationService> service_;
};

// The scan both backends' erasure tests rely on: every form of the secret,
// as written, in lower case, each word, base64-encoded (twice), and no
// number that merely contains its digits.
TEST(SecretScanTest, FindsEveryFormOfTheSecretAndNothingElse) {
  const std::string secret = testing::kErasedSecret;
  EXPECT_NE(SecretIn(absl::StrCat("passphrase ", secret, ".")), "");
  for (const std::string& form : testing::SecretForms()) {
    EXPECT_NE(SecretIn(absl::StrCat("'1234#", form, "':7")), "") << form;
    EXPECT_NE(SecretIn(absl::AsciiStrToUpper(form)), "") << form;
  }
  EXPECT_NE(SecretIn("word_counts row: 42\tquokka\t0"), "");
  const std::string proto = "\x0a\x13" + secret + "\x10";
  EXPECT_NE(SecretIn("{\"answer\": \"" + absl::Base64Escape(proto) + "\"}"), "");
  const std::string json = "{\"a\":\"" + absl::Base64Escape("zz" + secret) + "\"}";
  EXPECT_NE(SecretIn(absl::Base64Escape(json)), "");
  EXPECT_NE(SecretIn("account 88231, please"), "");
  EXPECT_EQ(SecretIn("created 2026-11-27 11:21:03.88231+00"), "");
  EXPECT_EQ(SecretIn("view_hash 0a88231f 188231 882310"), "");
  EXPECT_EQ(SecretIn("[redacted] hmac-sha256:3f2a"), "");
}

TEST_F(RedactionMemoryTest, AnErasedSecretIsNowhereTheMemoryBackendAnswersFrom) {
  CallContext ctx;
  ctx.principal = "privacy-officer";
  ServiceErasureApi api(*service_, ctx);
  testing::ErasureScenario s;
  ASSERT_NO_FATAL_FAILURE(testing::SpreadTheSecret(api, s));
  v1::GetConversationRequest get;
  get.set_conversation_id(s.source);
  const absl::StatusOr<v1::Conversation> source = service_->GetConversation(ctx, get);
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string tenant = source->tenant_id();

  // The scan finds the secret wherever the scenario spread it.
  const std::string before = StorageLeaks(*storage_, tenant);
  for (const std::string& place :
       {absl::StrCat("ListItems(", s.source, ")"), absl::StrCat("ListItems(", s.continued, ")"),
        absl::StrCat("ListSummaries(", s.source, ")"),
        absl::StrCat("ListSummaries(", s.continued, ")"),
        absl::StrCat("GetProposal(", s.source, ", 1)"),
        absl::StrCat("GetProposal(", s.source, ", 2)"), absl::StrCat("LoadContextAt(", s.source),
        absl::StrCat("SearchHistory(", s.source, ")")}) {
    EXPECT_TRUE(absl::StrContains(before, place)) << place << " in\n" << before;
  }

  ASSERT_NO_FATAL_FAILURE(testing::EraseTheSecret(api, s));
  EXPECT_EQ(testing::WhatTheApiStillAnswers(api, s), "");
  const std::string replay = testing::ReplayOfTheAppliedProposal(api, s);
  EXPECT_EQ(SecretIn(replay), "") << replay;
  RecordProperty("replay_after_erasure", replay);
  EXPECT_EQ(StorageLeaks(*storage_, tenant), "");
}

}  // namespace
}  // namespace convstate
