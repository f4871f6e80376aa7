// ConversationService's RPCs: conversations, items, pages, plain views and
// the context each replica keeps.

#include "services/api/service_test_fixture.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/clock.h"
#include "storage/forwarding_storage.h"
#include "storage/memory_storage.h"

namespace convstate {
namespace {

// as the same bytes, serialized once.
TEST_F(ConversationServiceTest, ViewsComeFromTheKeptContextAndFollowEveryChange) {
  Create("kept", "You are terse.");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(service_.AppendTurn(ctx_, Append("kept", "hello")).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("kept");
  auto first = service_.BuildContextWire(ctx_, build);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(service_.context_cache_stats().misses, 1);
  auto second = service_.BuildContextWire(ctx_, build);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(service_.context_cache_stats().hits, 1);
  EXPECT_EQ(first->get(), second->get());  // The same bytes, not a copy.
  // The message form is the same view.
  auto message = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(message.ok());
  EXPECT_EQ(message->SerializeAsString(), **first);

  // Pending input is never answered from the kept bytes.
  v1::BuildContextRequest pending = build;
  *pending.add_pending_input() = Message(v1::ROLE_USER, "and now?");
  auto with_pending = service_.BuildContext(ctx_, pending);
  ASSERT_TRUE(with_pending.ok());
  EXPECT_EQ(with_pending->entries_size(), message->entries_size() + 1);

  // An append: only the new item is read, and the view shows it.
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("kept", "a new question")).ok());
  auto after_append = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(after_append.ok());
  EXPECT_EQ(service_.context_cache_stats().appended, 1);
  EXPECT_EQ(after_append->entries(after_append->entries_size() - 1).content(), "a new question");
  EXPECT_EQ(after_append->version(), 4);

  // A pin changes the compaction version: the whole context is read again.
  const int64_t misses = service_.context_cache_stats().misses;
  v1::PinItemRequest pin;
  pin.set_conversation_id("kept");
  pin.set_sequence(1);
  ASSERT_TRUE(service_.PinItem(ctx_, pin).ok());
  auto after_pin = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(after_pin.ok());
  EXPECT_EQ(service_.context_cache_stats().misses, misses + 1);
  EXPECT_EQ(after_pin->compaction_version(), after_append->compaction_version() + 1);

  // Deleted and created again under the same id: the old context is gone.
  v1::DeleteConversationRequest del;
  del.set_conversation_id("kept");
  ASSERT_TRUE(service_.DeleteConversation(ctx_, del).ok());
  EXPECT_EQ(service_.BuildContextWire(ctx_, build).status().code(), absl::StatusCode::kNotFound);
  Create("kept", "You are verbose.");
  auto recreated = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(recreated.ok());
  ASSERT_EQ(recreated->entries_size(), 1);
  EXPECT_EQ(recreated->entries(0).content(), "You are verbose.");
  EXPECT_GE(service_.context_cache_stats().entries, 1);
}

// A call that compacted keeps what it read after the commit: the next call
// reads only what changed since, not the whole context again.
TEST_F(ConversationServiceTest, TheContextReadAfterACompactionIsKept) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("full");
  create.set_model("small-test");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(service_.AppendTurn(ctx_, Append("full", std::string(800, 'a' + i))).ok());
  }
  v1::BuildContextRequest build;
  build.set_conversation_id("full");
  auto compacted = service_.BuildContext(ctx_, build);  // Past the emergency band.
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->compaction_version(), 0);
  const ContextCache::Stats before = service_.context_cache_stats();
  auto next = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(service_.context_cache_stats().misses, before.misses);
  EXPECT_EQ(service_.context_cache_stats().hits, before.hits + 1);
  EXPECT_EQ(next->view_hash(), compacted->view_hash());
}

TEST_F(ConversationServiceTest, CreateFillsDefaultsAndGeneratesIds) {
  v1::CreateConversationRequest req;
  req.set_model("self-hosted/llama-3.3-70b");
  auto c = service_.CreateConversation(ctx_, req);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tenant_id(), "default");
  EXPECT_EQ(c->conversation_id().rfind("conv_", 0), 0u) << c->conversation_id();
  EXPECT_EQ(c->conversation_id().size(), 5u + 32u);
  auto other = service_.CreateConversation(ctx_, req);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->conversation_id(), c->conversation_id());
}

TEST_F(ConversationServiceTest, InspectNamesTheBandsInTokens) {
  Create("c");
  v1::InspectContextRequest req;
  req.set_conversation_id("c");
  auto out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  // The default profile's fractions (0.70, 0.80, 0.95) of a 128,000 window.
  EXPECT_EQ(out->thresholds().soft(), 89600);
  EXPECT_EQ(out->thresholds().hard(), 102400);
  EXPECT_EQ(out->thresholds().emergency(), 121600);
  EXPECT_EQ(out->band(), v1::BAND_NORMAL);
}

TEST_F(ConversationServiceTest, CreateRejectsBadInputNamingTheField) {
  struct Case {
    std::function<void(v1::CreateConversationRequest&)> mutate;
    std::string message_prefix;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.clear_model(); }, "model: required"},
      {[](auto& r) { r.set_model("has space"); }, "model: "},
      {[](auto& r) { r.set_conversation_id("bad/id"); }, "conversation_id: "},
      {[](auto& r) { r.set_tenant_id("bad tenant"); }, "tenant_id: "},
      {[](auto& r) { r.set_system_prompt("\xFF"); }, "system_prompt: not valid UTF-8"},
      {[](auto& r) { r.set_pinned_instructions(std::string("a\0", 2)); },
       "pinned_instructions: contains a NUL"},
      {[](auto& r) { r.mutable_profile_overrides()->set_context_window(0); },
       "profile_overrides.context_window: "},
      {[](auto& r) { r.mutable_profile_overrides()->set_hard_threshold(0.5); },
       "profile_overrides.soft_threshold: "},
  };
  for (const Case& c : cases) {
    v1::CreateConversationRequest req;
    req.set_conversation_id("ok");
    req.set_model("gpt-4o");
    c.mutate(req);
    auto r = service_.CreateConversation(ctx_, req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message_prefix;
    EXPECT_EQ(std::string(r.status().message()).rfind(c.message_prefix, 0), 0u)
        << r.status() << " wanted prefix " << c.message_prefix;
  }
  // Nothing was stored by any of them.
  auto list = service_.ListConversations(ctx_, v1::ListConversationsRequest{});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->conversations_size(), 0);
}

TEST_F(ConversationServiceTest, ReusedIdIsAlreadyExists) {
  Create("c1");
  v1::CreateConversationRequest req;
  req.set_conversation_id("c1");
  req.set_model("gpt-4o");
  EXPECT_EQ(service_.CreateConversation(ctx_, req).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(ConversationServiceTest, AppendReturnsSequencesCountsAndVersion) {
  Create("c1");
  v1::AppendTurnRequest req;
  req.set_conversation_id("c1");
  *req.add_items() = Message(v1::ROLE_USER, "Find the failing test.");
  v1::NewItem call;
  call.set_role(v1::ROLE_ASSISTANT);
  call.set_kind(v1::ITEM_KIND_TOOL_CALL);
  call.set_tool_name("bash");
  call.set_tool_call_id("call_1");
  call.set_content(R"({"cmd":"make test"})");
  *req.add_items() = call;
  auto r = service_.AppendTurn(ctx_, req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items_size(), 2);
  EXPECT_EQ(r->items(0).sequence(), 1);
  EXPECT_EQ(r->items(1).sequence(), 2);
  EXPECT_EQ(r->items(0).turn_index(), 1);
  EXPECT_GT(r->items(0).token_count(), 0);
  EXPECT_EQ(r->items(1).tool_call_id(), "call_1");
  EXPECT_EQ(r->version(), 1);
  EXPECT_FALSE(r->replayed());
}

TEST_F(ConversationServiceTest, AppendRejectsBadInputAndStoresNothing) {
  Create("c1");
  v1::AppendTurnRequest empty;
  empty.set_conversation_id("c1");
  EXPECT_EQ(service_.AppendTurn(ctx_, empty).status().message(),
            "items: at least one is required");

  v1::AppendTurnRequest mixed = Append("c1", "good");
  *mixed.add_items() = Message(v1::ROLE_USER, "bad \xC3\x28");
  auto r = service_.AppendTurn(ctx_, mixed);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "items[1].content: not valid UTF-8");

  v1::AppendTurnRequest negative = Append("c1", "x");
  negative.mutable_usage()->set_input_tokens(-1);
  EXPECT_EQ(service_.AppendTurn(ctx_, negative).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(service_.AppendTurn(ctx_, Append("", "x")).status().message(),
            "conversation_id: required");
  EXPECT_EQ(service_.AppendTurn(ctx_, Append("nope", "x")).status().code(),
            absl::StatusCode::kNotFound);

  v1::GetConversationRequest get;
  get.set_conversation_id("c1");
  EXPECT_EQ(service_.GetConversation(ctx_, get)->item_count(), 0);
}

TEST_F(ConversationServiceTest, RequestLimitsAreEnforced) {
  ConversationService::Options options;
  options.limits.max_items_per_append = 2;
  options.limits.max_request_content_bytes = 10;
  ConversationService small(options, models_.get(), storage_.get(), summarizer_.get());
  Create("c1");
  v1::AppendTurnRequest three = Append("c1", "a");
  *three.add_items() = Message(v1::ROLE_ASSISTANT, "b");
  *three.add_items() = Message(v1::ROLE_USER, "c");
  EXPECT_EQ(small.AppendTurn(ctx_, three).status().message(),
            "items: 3 items exceeds the limit of 2");
  v1::AppendTurnRequest heavy = Append("c1", "123456");
  *heavy.add_items() = Message(v1::ROLE_ASSISTANT, "7890a");
  EXPECT_EQ(small.AppendTurn(ctx_, heavy).status().message(),
            "items: 11 bytes of content exceeds the limit of 10");
}

TEST_F(ConversationServiceTest, IdempotencyKeyComparesTheItems) {
  Create("c1");
  v1::AppendTurnRequest req = Append("c1", "once");
  req.set_idempotency_key("k1");
  auto first = service_.AppendTurn(ctx_, req);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = service_.AppendTurn(ctx_, req);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->items(0).sequence(), first->items(0).sequence());
  EXPECT_EQ(again->version(), first->version());

  req.mutable_items(0)->set_pinned(true);  // Same key, different request.
  auto clash = service_.AppendTurn(ctx_, req);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists) << clash.status();
}

TEST_F(ConversationServiceTest, ListItemsPagesWithOpaqueTokens) {
  Create("c1");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(service_.AppendTurn(ctx_, Append("c1", "m")).ok());
  v1::ListItemsRequest req;
  req.set_conversation_id("c1");
  req.set_page_size(2);
  std::vector<int64_t> seen;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = service_.ListItems(ctx_, req);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& item : page->items()) seen.push_back(item.sequence());
    if (page->next_page_token().empty()) break;
    req.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4, 5}));

  req.set_page_token("not-a-token");
  EXPECT_EQ(service_.ListItems(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.clear_page_token();
  req.set_page_size(-1);
  EXPECT_EQ(service_.ListItems(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ConversationServiceTest, ListConversationsPages) {
  for (const char* id : {"a", "b", "c"}) Create(id);
  v1::ListConversationsRequest req;
  req.set_page_size(2);
  auto first = service_.ListConversations(ctx_, req);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->conversations_size(), 2);
  ASSERT_FALSE(first->next_page_token().empty());
  req.set_page_token(first->next_page_token());
  auto second = service_.ListConversations(ctx_, req);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->conversations_size(), 1);
  EXPECT_EQ(second->conversations(0).conversation_id(), "c");
  EXPECT_TRUE(second->next_page_token().empty());
  // A token from another method is refused.
  v1::ListItemsRequest items;
  items.set_conversation_id("a");
  items.set_page_token(first->next_page_token());
  EXPECT_EQ(service_.ListItems(ctx_, items).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ConversationServiceTest, BuildContextShowsEverythingWithCounts) {
  Create("c1", "You are a careful engineer.");
  v1::AppendTurnRequest req = Append("c1", "Why does the build fail?");
  *req.add_items() = Message(v1::ROLE_ASSISTANT, "The linker cannot find -lpq.");
  auto appended = service_.AppendTurn(ctx_, req);
  ASSERT_TRUE(appended.ok());

  v1::BuildContextRequest build;
  build.set_conversation_id("c1");
  *build.add_pending_input() = Message(v1::ROLE_USER, "How do I fix it?");
  auto ctx = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ(ctx->conversation_id(), "c1");
  EXPECT_EQ(ctx->version(), 1);
  EXPECT_EQ(ctx->context_status(), v1::CONTEXT_STATUS_FULL);
  ASSERT_EQ(ctx->entries_size(), 4);
  EXPECT_EQ(ctx->entries(0).section(), v1::SECTION_SYSTEM);
  EXPECT_EQ(ctx->entries(1).content(), "Why does the build fail?");
  EXPECT_EQ(ctx->entries(2).sequence(), 2);
  EXPECT_EQ(ctx->entries(3).section(), v1::SECTION_PENDING);
  const v1::TokenBreakdown& t = ctx->tokens();
  EXPECT_EQ(t.live(), appended->items(0).token_count() + appended->items(1).token_count());
  EXPECT_EQ(t.total(),
            t.system() + t.pinned() + t.summaries() + t.live() + t.pending() + t.output_reserve());
  EXPECT_TRUE(t.approximate());

  v1::BuildContextRequest bad;
  bad.set_conversation_id("c1");
  *bad.add_pending_input() = Message(v1::ROLE_UNSPECIFIED, "x");
  EXPECT_EQ(service_.BuildContext(ctx_, bad).status().message(),
            "pending_input[0].role: required");
  bad.set_conversation_id("missing");
  bad.clear_pending_input();
  EXPECT_EQ(service_.BuildContext(ctx_, bad).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ConversationServiceTest, TenantsAreIsolated) {
  Create("shared");
  v1::GetConversationRequest get;
  get.set_conversation_id("shared");
  get.set_tenant_id("other");
  EXPECT_EQ(service_.GetConversation(ctx_, get).status().code(), absl::StatusCode::kNotFound);
  v1::DeleteConversationRequest del;
  del.set_conversation_id("shared");
  del.set_tenant_id("other");
  EXPECT_EQ(service_.DeleteConversation(ctx_, del).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ConversationServiceTest, DeleteReportsItemsRemoved) {
  Create("c1");
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("c1", "x")).ok());
  v1::DeleteConversationRequest del;
  del.set_conversation_id("c1");
  auto r = service_.DeleteConversation(ctx_, del);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->items_deleted(), 1);
  EXPECT_EQ(service_.DeleteConversation(ctx_, del).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ConversationServiceTest, CountsUseTheModelsProfileOnceAtWriteTime) {
  v1::CreateConversationRequest req;
  req.set_conversation_id("small");
  req.set_model("small-1");  // 2 bytes per token, no per-message overhead.
  req.set_system_prompt("12345678");
  ASSERT_TRUE(service_.CreateConversation(ctx_, req).ok());
  auto appended = service_.AppendTurn(ctx_, Append("small", "abcdefghij"));
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended->items(0).token_count(), 5);
  v1::BuildContextRequest build;
  build.set_conversation_id("small");
  *build.add_pending_input() = Message(v1::ROLE_USER, "abcd");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->tokens().system(), 4);
  EXPECT_EQ(view->tokens().live(), 5);
  EXPECT_EQ(view->tokens().pending(), 2);
  EXPECT_EQ(view->tokens().context_window(), 4096);
  EXPECT_EQ(view->tokens().output_reserve(), 512);
}

// Counts are taken before the append locks the conversation, with the model
// this replica remembers for it; a conversation deleted and created again
// with another model is counted again with the new one.
TEST_F(ConversationServiceTest, ARecreatedConversationIsCountedWithItsNewModel) {
  v1::CreateConversationRequest req;
  req.set_conversation_id("again");
  req.set_model("small-1");  // 2 bytes per token.
  ASSERT_TRUE(service_.CreateConversation(ctx_, req).ok());
  const std::string text = "abcdefghijklmnopqrstuvwx";  // 24 bytes.
  auto first = service_.AppendTurn(ctx_, Append("again", text));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->items(0).token_count(), 12);
  v1::DeleteConversationRequest del;
  del.set_conversation_id("again");
  ASSERT_TRUE(service_.DeleteConversation(ctx_, del).ok());
  req.set_model("gpt-4o");  // The default profile: 4 bytes per token, 4 per message.
  ASSERT_TRUE(service_.CreateConversation(ctx_, req).ok());
  auto second = service_.AppendTurn(ctx_, Append("again", text));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->items(0).token_count(), 10);  // 24 / 4 + 4 per message.
}

// ExpandSummary returns what a chunk replaced, page by page, with the facts
// kept from it and the sequence each came from.
TEST_F(ConversationServiceTest, ExpandSummaryPagesThroughTheItemsAChunkReplaced) {
  Create("expand");
  for (int i = 0; i < 5; ++i) {
    // A fact from the user, and an answer that is mostly explanation.
    v1::AppendTurnRequest req =
        Append("expand", absl::StrCat("Deploy web-", i, " to eu-west-1 at 0", i, ":00 UTC."));
    *req.add_items() = Message(
        v1::ROLE_ASSISTANT,
        "That should be safe to do now. I will keep an eye on the error rate while it rolls "
        "out, and I will tell you as soon as anything looks unusual. If something goes wrong "
        "we can roll back with a single command, so there is little risk in trying.");
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  v1::CompactRequest compact;
  compact.set_conversation_id("expand");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);
  v1::ExpandSummaryRequest req;
  req.set_conversation_id("expand");
  req.set_chunk_id(compacted->summary_chunk_id());
  req.set_page_size(3);
  std::vector<int64_t> sequences;
  v1::SummaryChunk chunk;
  for (int page = 0; page < 10; ++page) {
    auto out = service_.ExpandSummary(ctx_, req);
    ASSERT_TRUE(out.ok()) << out.status();
    chunk = out->chunk();
    for (const auto& item : out->items()) sequences.push_back(item.sequence());
    if (out->next_page_token().empty()) break;
    req.set_page_token(out->next_page_token());
  }
  ASSERT_FALSE(sequences.empty());
  EXPECT_EQ(sequences.front(), chunk.from_sequence());
  EXPECT_EQ(sequences.back(), chunk.through_sequence());
  EXPECT_EQ(static_cast<int64_t>(sequences.size()),
            chunk.through_sequence() - chunk.from_sequence() + 1);
  ASSERT_FALSE(chunk.facts().empty());
  for (const auto& f : chunk.facts()) {
    EXPECT_GE(f.sequence(), chunk.from_sequence());
    EXPECT_LE(f.sequence(), chunk.through_sequence());
  }
  req.set_chunk_id(999);
  req.clear_page_token();
  EXPECT_EQ(service_.ExpandSummary(ctx_, req).status().code(), absl::StatusCode::kNotFound);
  req.set_chunk_id(compacted->summary_chunk_id());
  req.set_page_token("bm90LWEtdG9rZW4");
  EXPECT_EQ(service_.ExpandSummary(ctx_, req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The engine's tiers and the API's CompactionTier are the same list: the
// names audit rows carry are the enum's, which clients read.
TEST(TierNamesTest, TheEngineAndTheApiNameTheSameTiers) {
  const google::protobuf::EnumDescriptor* api = v1::CompactionTier_descriptor();
  ASSERT_EQ(api->value_count(), static_cast<int>(TierList().size()) + 1);
  for (const TierEntry& e : TierList()) {
    const google::protobuf::EnumValueDescriptor* v = api->FindValueByNumber(static_cast<int>(e.tier));
    ASSERT_NE(v, nullptr) << e.name;
    EXPECT_EQ(v->name(), "COMPACTION_TIER_" + absl::AsciiStrToUpper(e.name));
  }
}

}  // namespace
}  // namespace convstate
