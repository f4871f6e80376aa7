#include "tests/erasure_scenario.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "storage/contract.h"

namespace convstate::testing {
namespace {

constexpr char kReason[] = "erasure request 2026-311";
// What a user asks recall for, in the scenario and after it.
const std::string kRecallQuery =
    absl::StrCat("Which passphrase did we log into the vault with? Was it ", kErasedSecret, "?");

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// "hh:mm:ss." right before `at`: `at` starts the fraction of a time.
bool TimeFractionAt(absl::string_view text, size_t at) {
  if (at < 9) return false;
  const absl::string_view p = text.substr(at - 9, 9);
  auto digit = [&](int i) { return absl::ascii_isdigit(static_cast<unsigned char>(p[i])); };
  return digit(0) && digit(1) && p[2] == ':' && digit(3) && digit(4) && p[5] == ':' &&
         digit(6) && digit(7) && p[8] == '.';
}

// The first form of the secret in `text` (as SecretIn says), without
// decoding anything.
std::string PlainSecretIn(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (const std::string& form : SecretForms()) {
    const bool digits = IsDigits(form);
    for (size_t at = lower.find(form); at != std::string::npos; at = lower.find(form, at + 1)) {
      const size_t end = at + form.size();
      if (digits && ((at > 0 && IsAlnum(lower[at - 1])) ||
                     (end < lower.size() && IsAlnum(lower[end])) || TimeFractionAt(lower, at))) {
        continue;
      }
      const size_t from = at > 40 ? at - 40 : 0;
      const absl::string_view around = text.substr(from, end + 40 - from);
      return absl::StrCat("\"", form, "\" in \"", absl::CHexEscape(around), "\"");
    }
  }
  return "";
}

bool IsBase64Char(char c) { return IsAlnum(c) || c == '+' || c == '/' || c == '-' || c == '_'; }

std::string SecretInDepth(absl::string_view text, int depth) {
  std::string found = PlainSecretIn(text);
  if (!found.empty() || depth >= 2) return found;
  size_t i = 0;
  while (i < text.size()) {
    if (!IsBase64Char(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && IsBase64Char(text[j])) ++j;
    size_t end = j;
    while (end < text.size() && end - j < 2 && text[end] == '=') ++end;
    if (j - i >= 16) {
      std::string decoded;
      bool ok = absl::Base64Unescape(text.substr(i, end - i), &decoded) ||
                absl::WebSafeBase64Unescape(text.substr(i, end - i), &decoded);
      if (!ok) {
        const absl::string_view whole = text.substr(i, (j - i) / 4 * 4);
        ok = absl::Base64Unescape(whole, &decoded) || absl::WebSafeBase64Unescape(whole, &decoded);
      }
      if (ok) {
        const std::string inner = SecretInDepth(decoded, depth + 1);
        if (!inner.empty()) {
          return absl::StrCat("base64 \"", text.substr(i, std::min<size_t>(end - i, 40)),
                              "...\" decodes to ", inner);
        }
      }
    }
    i = end;
  }
  return "";
}

v1::NewItem MakeNewItem(v1::Role role, v1::ItemKind kind, std::string content,
                 std::string tool_name = "", std::string tool_call_id = "") {
  v1::NewItem item;
  item.set_role(role);
  item.set_kind(kind);
  item.set_content(std::move(content));
  item.set_tool_name(std::move(tool_name));
  item.set_tool_call_id(std::move(tool_call_id));
  return item;
}

void Append(ErasureApi& api, const std::string& id, std::vector<v1::NewItem> items,
            const std::string& idempotency_key = "") {
  v1::AppendTurnRequest req;
  req.set_conversation_id(id);
  req.set_idempotency_key(idempotency_key);
  for (v1::NewItem& item : items) *req.add_items() = std::move(item);
  const absl::StatusOr<v1::AppendTurnResponse> out = api.AppendTurn(req);
  ASSERT_TRUE(out.ok()) << id << ": " << out.status();
}

// A turn of ordinary work, about 200 tokens, none of the secret's words.
void Filler(ErasureApi& api, const std::string& id, int n) {
  Append(api, id,
         {MakeNewItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE,
               absl::StrCat("[turn ", n, "] Why is api-", n, " slow on port ", 8000 + n, "?")),
          MakeNewItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE,
               absl::StrCat("api-", n, " waits on db-", n, " because the orders table lacks an "
                            "index on customer_id; we decided to add the index and roll back "
                            "release 1.", n, " tonight, after the batch window closes at 02:00 "
                            "UTC. That should settle it for now, and nothing else needs to "
                            "change until the next review comes around, so there is no rush on "
                            "anything else in the meantime. The other services look healthy "
                            "and their dashboards show nothing unusual for this hour of the "
                            "night. If anything changes I will say so before we go any further "
                            "with the plan as it stands."))});
}

// The secret in a user message and in the result of the tool call that
// used it; the call and the reply do not quote it.
void SecretTurn(ErasureApi& api, const std::string& id, const std::string& question, int n) {
  const std::string call = absl::StrCat("call-vault-", n);
  Append(api, id,
         {MakeNewItem(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, question),
          MakeNewItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL,
               R"({"cmd": "vault login -method=userpass username=ops"})", "shell", call),
          MakeNewItem(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT,
               absl::StrCat("vault: authenticated as ops with passphrase ", kErasedSecret,
                            "\nvault: token ttl 768h, policies [ops-admin]"),
               "shell", call),
          MakeNewItem(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE,
               "The login works: the vault token lasts 768 hours.")},
         absl::StrCat("vault-login-", n));
}

std::vector<v1::Item> AllItems(ErasureApi& api, const std::string& id) {
  std::vector<v1::Item> out;
  v1::ListItemsRequest req;
  req.set_conversation_id(id);
  req.set_page_size(1000);
  for (int page = 0; page < 100; ++page) {
    const absl::StatusOr<v1::ListItemsResponse> r = api.ListItems(req);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status();
    if (!r.ok()) break;
    out.insert(out.end(), r->items().begin(), r->items().end());
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  return out;
}

std::vector<v1::SummaryChunk> AllChunks(ErasureApi& api, const std::string& id) {
  std::vector<v1::SummaryChunk> out;
  v1::ListSummariesRequest req;
  req.set_conversation_id(id);
  req.set_include_superseded(true);
  for (int page = 0; page < 100; ++page) {
    const absl::StatusOr<v1::ListSummariesResponse> r = api.ListSummaries(req);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status();
    if (!r.ok()) break;
    out.insert(out.end(), r->chunks().begin(), r->chunks().end());
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  return out;
}

std::vector<v1::CompactionEvent> AllEvents(ErasureApi& api, const std::string& id) {
  std::vector<v1::CompactionEvent> out;
  v1::ListCompactionEventsRequest req;
  req.set_conversation_id(id);
  for (int page = 0; page < 100; ++page) {
    const absl::StatusOr<v1::ListCompactionEventsResponse> r = api.ListCompactionEvents(req);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status();
    if (!r.ok()) break;
    out.insert(out.end(), r->events().begin(), r->events().end());
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  return out;
}

// Builds a view of `id` (recalling for `recall` when set) and records it.
void RecordView(ErasureApi& api, ErasureScenario& s, const std::string& id,
                const std::string& recall) {
  v1::BuildContextRequest req;
  req.set_conversation_id(id);
  req.set_recall_query(recall);
  const absl::StatusOr<v1::BuildContextResponse> view = api.BuildContext(req);
  ASSERT_TRUE(view.ok()) << id << ": " << view.status();
  s.views.push_back({id, view->version(), view->compaction_version()});
}

// Appends "where: what" to `out` when `text` holds the secret.
void Note(std::string& out, const std::string& where, absl::string_view text) {
  const std::string found = SecretIn(text);
  if (!found.empty()) absl::StrAppend(&out, where, ": ", found, "\n");
}

// Everything the API answers about conversation `id` that holds the secret.
std::string AnswersAbout(ErasureApi& api, const std::string& id) {
  std::string out;
  v1::GetConversationRequest get;
  get.set_conversation_id(id);
  const absl::StatusOr<v1::Conversation> conversation = api.GetConversation(get);
  EXPECT_TRUE(conversation.ok()) << id << ": " << conversation.status();
  if (!conversation.ok()) return out;
  Note(out, absl::StrCat("GetConversation(", id, ")"), conversation->DebugString());
  for (const v1::Item& item : AllItems(api, id)) {
    Note(out, absl::StrCat("ListItems(", id, ") item ", item.sequence()), item.DebugString());
  }
  for (const v1::SummaryChunk& chunk : AllChunks(api, id)) {
    Note(out, absl::StrCat("ListSummaries(", id, ") chunk ", chunk.chunk_id()),
         chunk.DebugString());
    v1::ExpandSummaryRequest expand;
    expand.set_conversation_id(id);
    expand.set_chunk_id(chunk.chunk_id());
    expand.set_page_size(1000);
    for (int page = 0; page < 20; ++page) {
      const absl::StatusOr<v1::ExpandSummaryResponse> r = api.ExpandSummary(expand);
      if (!r.ok()) break;
      Note(out, absl::StrCat("ExpandSummary(", id, ", ", chunk.chunk_id(), ")"), r->DebugString());
      if (r->next_page_token().empty()) break;
      expand.set_page_token(r->next_page_token());
    }
  }
  for (const v1::CompactionEvent& e : AllEvents(api, id)) {
    Note(out, absl::StrCat("ListCompactionEvents(", id, ") event ", e.event_id(), " ", e.event()),
         e.DebugString());
  }
  std::vector<std::string> queries = {kErasedSecret, kRecallQuery};
  for (const std::string& form : SecretForms()) queries.push_back(form);
  for (const std::string& query : queries) {
    v1::SearchHistoryRequest search;
    search.set_conversation_id(id);
    search.set_query(query);
    search.set_max_results(50);
    const absl::StatusOr<v1::SearchHistoryResponse> found = api.SearchHistory(search);
    EXPECT_TRUE(found.ok()) << id << ": " << found.status();
    if (found.ok()) {
      // The statistics name the query's words: only their counts tell.
      for (const v1::RecalledPassage& p : found->passages()) {
        Note(out, absl::StrCat("SearchHistory(", id, ", \"", query, "\") item ", p.sequence()),
             p.DebugString());
      }
      for (const auto& [word, items] : found->document_frequency()) {
        if (items > 0 && !PlainSecretIn(word).empty()) {
          absl::StrAppend(&out, "SearchHistory(", id, ", \"", query, "\"): ", items,
                          " items still hold the word \"", word, "\"\n");
        }
      }
    }
    v1::InspectContextRequest inspect;
    inspect.set_conversation_id(id);
    inspect.set_recall_query(query);
    const absl::StatusOr<v1::InspectContextResponse> inspected = api.InspectContext(inspect);
    EXPECT_TRUE(inspected.ok()) << id << ": " << inspected.status();
    if (inspected.ok()) {
      Note(out, absl::StrCat("InspectContext(", id, ", \"", query, "\")"),
           inspected->DebugString());
    }
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    build.set_recall_query(query);
    const absl::StatusOr<v1::BuildContextResponse> view = api.BuildContext(build);
    EXPECT_TRUE(view.ok()) << id << ": " << view.status();
    if (view.ok()) {
      Note(out, absl::StrCat("BuildContext(", id, ", recall \"", query, "\")"),
           view->DebugString());
    }
  }
  // The view at every compaction_version it had, as of now.
  const absl::StatusOr<v1::Conversation> now = api.GetConversation(get);
  if (!now.ok()) return out;
  for (int64_t cv = 0; cv <= now->compaction_version(); ++cv) {
    v1::GetContextAtRequest at;
    at.set_conversation_id(id);
    at.set_version(now->version());
    at.set_compaction_version(cv);
    const absl::StatusOr<v1::BuildContextResponse> then = api.GetContextAt(at);
    if (then.ok()) {
      Note(out, absl::StrCat("GetContextAt(", id, ", version ", now->version(),
                             ", compaction_version ", cv, ")"),
           then->DebugString());
    }
  }
  return out;
}

void Redact(ErasureApi& api, const std::string& id, const std::vector<int64_t>& sequences,
            v1::RedactItemsResponse* out) {
  v1::RedactItemsRequest req;
  req.set_conversation_id(id);
  for (int64_t s : sequences) req.add_sequences(s);
  req.set_reason(kReason);
  absl::StatusOr<v1::RedactItemsResponse> r = api.RedactItems(req);
  ASSERT_TRUE(r.ok()) << id << ": " << r.status();
  EXPECT_EQ(r->items_size(), static_cast<int>(sequences.size())) << id;
  for (const v1::Item& item : r->items()) {
    EXPECT_TRUE(item.redacted()) << id << " item " << item.sequence();
    EXPECT_EQ(SecretIn(item.DebugString()), "") << id << " item " << item.sequence();
  }
  *out = *std::move(r);
}

}  // namespace

std::vector<std::string> SecretForms() {
  static const std::vector<std::string>* const kForms = [] {
    auto* forms = new std::vector<std::string>{absl::AsciiStrToLower(kErasedSecret)};
    for (const std::string& term : SearchTerms(kErasedSecret)) {
      const std::string lower = absl::AsciiStrToLower(term);
      if (std::find(forms->begin(), forms->end(), lower) == forms->end()) forms->push_back(lower);
    }
    return forms;
  }();
  return *kForms;
}

std::string SecretIn(absl::string_view text) { return SecretInDepth(text, 0); }

void SpreadTheSecret(ErasureApi& api, ErasureScenario& s) {
  // Short forms would be found in unrelated text.
  for (const std::string& form : SecretForms()) ASSERT_GE(form.size(), 5u) << form;
  {
    v1::CreateConversationRequest req;
    req.set_conversation_id(s.source);
    req.set_model("tiny-1");
    const absl::StatusOr<v1::Conversation> c = api.CreateConversation(req);
    ASSERT_TRUE(c.ok()) << c.status();
  }
  ASSERT_NO_FATAL_FAILURE(Filler(api, s.source, 1));
  ASSERT_NO_FATAL_FAILURE(SecretTurn(
      api, s.source,
      absl::StrCat("Log into the vault with the passphrase ", kErasedSecret,
                   " and tell me whether it still works."),
      1));
  for (int n = 2; n <= 6; ++n) ASSERT_NO_FATAL_FAILURE(Filler(api, s.source, n));

  // A preview: its proposal is stored, the secret in it.
  v1::CompactRequest dry;
  dry.set_conversation_id(s.source);
  dry.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  dry.set_dry_run(true);
  const absl::StatusOr<v1::CompactResponse> first = api.Compact(dry);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_proposal()) << absl::StrJoin(first->not_done(), "; ");
  ASSERT_NE(SecretIn(first->proposal().DebugString()), "") << first->proposal().DebugString();
  s.proposals.push_back(first->proposal().proposal_id());
  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id(s.source);
  apply.set_proposal_id(s.proposals[0]);
  const absl::StatusOr<v1::ApplyCompactionResponse> applied = api.ApplyCompaction(apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_FALSE(applied->replayed());
  ASSERT_GT(applied->summary_chunk_id(), 0);
  s.applied = *applied;
  // Its replay answers as the apply did.
  const absl::StatusOr<v1::ApplyCompactionResponse> replayed = api.ApplyCompaction(apply);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  ASSERT_TRUE(replayed->replayed());
  EXPECT_EQ(replayed->summary_chunk_id(), applied->summary_chunk_id());

  for (int n = 7; n <= 8; ++n) ASSERT_NO_FATAL_FAILURE(Filler(api, s.source, n));
  ASSERT_NO_FATAL_FAILURE(SecretTurn(
      api, s.source,
      absl::StrCat("Is ", kErasedSecret, " still the vault passphrase after the rotation?"), 2));
  // Past the recent buffer (three turns), so that the next preview takes it.
  for (int n = 9; n <= 12; ++n) ASSERT_NO_FATAL_FAILURE(Filler(api, s.source, n));
  // Another preview, left unapplied, the secret in it too.
  const absl::StatusOr<v1::CompactResponse> second = api.Compact(dry);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(second->has_proposal()) << absl::StrJoin(second->not_done(), "; ");
  ASSERT_NE(second->proposal().proposal_id(), s.proposals[0]);
  ASSERT_NE(SecretIn(second->proposal().DebugString()), "") << second->proposal().DebugString();
  s.proposals.push_back(second->proposal().proposal_id());
  ASSERT_NO_FATAL_FAILURE(RecordView(api, s, s.source, ""));

  // The continuation: the source's summaries and its five newest turns
  // (the second secret turn among them) come along.
  {
    v1::CreateConversationRequest req;
    req.set_conversation_id(s.continued);
    req.set_continue_from(s.source);
    req.set_carry_recent_turns(5);
    const absl::StatusOr<v1::Conversation> c = api.CreateConversation(req);
    ASSERT_TRUE(c.ok()) << c.status();
  }

  // Searched for and recalled in both: the word index and the caches hold
  // it.
  for (const std::string& id : {s.source, s.continued}) {
    v1::SearchHistoryRequest search;
    search.set_conversation_id(id);
    // The secret alone is too common here to answer a search (four items
    // hold it): the question says what about it.
    search.set_query(kRecallQuery);
    const absl::StatusOr<v1::SearchHistoryResponse> found = api.SearchHistory(search);
    ASSERT_TRUE(found.ok()) << id << ": " << found.status();
    std::string passages;
    for (const v1::RecalledPassage& p : found->passages()) absl::StrAppend(&passages, p.text());
    ASSERT_NE(SecretIn(passages), "") << id << ": " << found->DebugString();
    ASSERT_NO_FATAL_FAILURE(RecordView(api, s, id, kRecallQuery));
    v1::InspectContextRequest inspect;
    inspect.set_conversation_id(id);
    inspect.set_recall_query(kRecallQuery);
    const absl::StatusOr<v1::InspectContextResponse> inspected = api.InspectContext(inspect);
    ASSERT_TRUE(inspected.ok()) << id << ": " << inspected.status();
    ASSERT_NO_FATAL_FAILURE(RecordView(api, s, id, ""));
  }

  for (const std::string& id : {s.source, s.continued}) {
    for (const v1::Item& item : AllItems(api, id)) {
      if (!SecretIn(item.content()).empty()) s.holding[id].push_back(item.sequence());
    }
    std::string chunks;
    for (const v1::SummaryChunk& chunk : AllChunks(api, id)) {
      absl::StrAppend(&chunks, chunk.DebugString());
    }
    ASSERT_NE(SecretIn(chunks), "") << id << ": the secret should be in a summary";
  }
  // Two user messages and two tool results; the second pair carried over.
  ASSERT_EQ(s.holding[s.source].size(), 4u);
  ASSERT_EQ(s.holding[s.continued].size(), 2u);
}

void EraseTheSecret(ErasureApi& api, ErasureScenario& s) {
  v1::RedactItemsResponse source;
  ASSERT_NO_FATAL_FAILURE(Redact(api, s.source, s.holding[s.source], &source));
  EXPECT_GT(source.chunks_removed(), 0);
  // RedactItems promises the copies in continuations (carried summaries and
  // items carried from an erased one) go with the source's.
  EXPECT_GT(source.continued_chunks_removed(), 0);
  s.continuation_after_source_erasure = AnswersAbout(api, s.continued);
  EXPECT_EQ(s.continuation_after_source_erasure, "")
      << "the source's erasure did not reach its continuation by itself";
  v1::RedactItemsResponse continued;
  ASSERT_NO_FATAL_FAILURE(Redact(api, s.continued, s.holding[s.continued], &continued));
}

std::string WhatTheApiStillAnswers(ErasureApi& api, const ErasureScenario& s) {
  std::string out = AnswersAbout(api, s.source);
  absl::StrAppend(&out, AnswersAbout(api, s.continued));
  for (const ErasureScenario::View& view : s.views) {
    v1::GetContextAtRequest at;
    at.set_conversation_id(view.conversation);
    at.set_version(view.version);
    at.set_compaction_version(view.compaction_version);
    const absl::StatusOr<v1::BuildContextResponse> then = api.GetContextAt(at);
    if (then.ok()) {
      Note(out, absl::StrCat("GetContextAt(", view.conversation, ", version ", view.version,
                             ", compaction_version ", view.compaction_version, ")"),
           then->DebugString());
    }
  }
  Note(out, "ApplyCompaction replay", ReplayOfTheAppliedProposal(api, s));
  return out;
}

std::string ReplayOfTheAppliedProposal(ErasureApi& api, const ErasureScenario& s) {
  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id(s.source);
  apply.set_proposal_id(s.proposals.empty() ? "1" : s.proposals[0]);
  const absl::StatusOr<v1::ApplyCompactionResponse> r = api.ApplyCompaction(apply);
  if (!r.ok()) return r.status().ToString();
  return absl::StrCat("OK ", r->DebugString());
}

}  // namespace convstate::testing
