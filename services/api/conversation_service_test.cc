#include "services/compaction/summarizers/extractive.h"
#include "services/api/conversation_service.h"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <cmath>
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

constexpr char kProfiles[] = R"pb(
  default_profile: "default"
  profiles {
    name: "default"
    context_window: 128000
    output_reserve: 4096
    tokenizer { encoding: "approximate" bytes_per_token: 4.0 }
  }
  profiles {
    name: "small"
    patterns: "small-*"
    context_window: 4096
    output_reserve: 512
    tokenizer { encoding: "approximate" bytes_per_token: 2.0 }
    per_message_tokens: 0
  }
)pb";

std::unique_ptr<ModelRegistry> Registry(const char* text) {
  auto r = ModelRegistry::FromText(text, "");
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

class ConversationServiceTest : public ::testing::Test {
 protected:
  ConversationServiceTest()
      : models_(Registry(kProfiles)),
        storage_(NewMemoryStorage()),
        summarizer_(NewExtractiveSummarizer()),
        service_(ConversationService::Options{}, models_.get(), storage_.get(),
                 summarizer_.get()) {}

  v1::Conversation Create(const std::string& id, const std::string& system_prompt = "") {
    v1::CreateConversationRequest req;
    req.set_conversation_id(id);
    req.set_model("gpt-4o");
    req.set_system_prompt(system_prompt);
    auto c = service_.CreateConversation(ctx_, req);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::Conversation{};
  }

  static v1::NewItem Message(v1::Role role, const std::string& text) {
    v1::NewItem item;
    item.set_role(role);
    item.set_kind(v1::ITEM_KIND_MESSAGE);
    item.set_content(text);
    return item;
  }

  v1::AppendTurnRequest Append(const std::string& id, const std::string& text) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    *req.add_items() = Message(v1::ROLE_USER, text);
    return req;
  }

  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<Storage> storage_;
  std::unique_ptr<Summarizer> summarizer_;
  ConversationService service_;
  CallContext ctx_;
};

// A replica keeps each conversation's context between calls and asks
// storage only what changed; a plain view that did not change is sent again
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

// A view at the hard band is compacted before it is served, under the soft
// band, and says which band it is in; with hard_band_policy
// SERVE_WHILE_BACKGROUND it is answered as it stands and the summary is
// written in the background, ahead of the call that would need it.
TEST_F(ConversationServiceTest, HardBandIsCompactedBeforeItIsServed) {
  for (const bool serve : {false, true}) {
    SCOPED_TRACE(serve ? "serve while background" : "block");
    const std::string id = serve ? "serve" : "block";
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
    if (serve) {
      create.mutable_profile_overrides()->set_hard_band_policy(
          v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND);
    }
    ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
    for (int i = 0; i < 7; ++i) {
      v1::AppendTurnRequest req = Append(id, absl::StrCat(i, " ", std::string(400, 'q')));
      *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat(i, " ", std::string(450, 'a')));
      ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    }
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    auto first = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(first.ok()) << first.status();
    if (!serve) {
      EXPECT_EQ(first->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
      EXPECT_LT(first->tokens().total(), 2867) << "not under the soft band (0.70 of 4096)";
      EXPECT_EQ(first->band(), v1::BAND_NORMAL);
      EXPECT_EQ(first->band_reason(), "");
      continue;
    }
    EXPECT_EQ(first->context_status(), v1::CONTEXT_STATUS_FULL);  // Answered as is...
    EXPECT_GE(first->tokens().total(), 3277);                      // ...in the hard band
    EXPECT_LT(first->tokens().total(), 3891);                      // (0.80-0.95 of 4096).
    EXPECT_EQ(first->band(), v1::BAND_HARD);
    EXPECT_TRUE(absl::StrContains(first->band_reason(), "SERVE_WHILE_BACKGROUND"))
        << first->band_reason();
    // ...and the compaction happens off the request path.
    bool done = false;
    for (int i = 0; i < 500 && !done; ++i) {
      done = !AllSummaries(*storage_, ctx_, {"default", id}, false)->empty();
      if (!done) absl::SleepFor(absl::Milliseconds(10));
    }
    if (!done) {
      const auto events = AllCompactionEvents(*storage_, ctx_, {"default", id});
      for (const auto& e : *events) ADD_FAILURE() << e.event << " " << e.detail;
    }
    ASSERT_TRUE(done) << "no background compaction within 5 s";
    auto second = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
    EXPECT_LT(second->tokens().total(), 3277);
    EXPECT_EQ(second->band_reason(), "");
  }
}

// A view that the parts no compaction removes keep above the hard band is
// served, and says why.
TEST_F(ConversationServiceTest, AViewCompactionCannotBringUnderTheHardBandSaysWhy) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("heavy");
  create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
  create.set_pinned_instructions(std::string(5600, 'p'));  // 2,800 tokens, never removed.
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("heavy", "What now?")).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("heavy");
  *build.add_pending_input() = Message(v1::ROLE_USER, std::string(300, 'n'));
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_GE(view->tokens().total(), 3277);
  EXPECT_EQ(view->band(), v1::BAND_HARD);
  EXPECT_TRUE(absl::StrContains(view->band_reason(), "compaction cannot bring the view under"))
      << view->band_reason();
}

// A view in the hard band still fits: under hard_band_policy
// SERVE_WHILE_BACKGROUND (and background compaction on), the call is
// answered as it stands even while another replica holds the
// conversation's compaction lease, instead of waiting to compact in the
// foreground; under BLOCK, or with the background off, the call waits for
// the lease (here, past its deadline).
TEST_F(ConversationServiceTest, AViewThatFitsWaitsForNoCompaction) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("busy");
  create.set_model("small-1");  // 4096 window, 512 reserve, 2 bytes per token.
  create.mutable_profile_overrides()->set_hard_band_policy(
      v1::HARD_BAND_POLICY_SERVE_WHILE_BACKGROUND);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  const ConversationKey key{"default", "busy"};
  auto held = storage_->TryAcquireCompactionLease(ctx_, key, "another-replica", absl::Minutes(5));
  ASSERT_TRUE(held.ok() && held->has_value());
  v1::BuildContextRequest build;
  build.set_conversation_id("busy");
  v1::BuildContextResponse view;
  // Turns with tool output (which the hard band prunes) until the view is
  // in the hard band (0.80 to 0.95 of 4096).
  for (int turn = 0; view.tokens().total() < 3277; ++turn) {
    ASSERT_LT(turn, 40);
    v1::AppendTurnRequest req = Append("busy", absl::StrCat("Check host ", turn, " please."));
    v1::NewItem call = Message(v1::ROLE_ASSISTANT, absl::StrCat(R"({"host": )", turn, "}"));
    call.set_kind(v1::ITEM_KIND_TOOL_CALL);
    call.set_tool_name("probe");
    call.set_tool_call_id(absl::StrCat("call-", turn));
    *req.add_items() = call;
    v1::NewItem result = Message(v1::ROLE_TOOL, absl::StrCat(turn, " ", std::string(380, 'r')));
    result.set_kind(v1::ITEM_KIND_TOOL_RESULT);
    result.set_tool_name("probe");
    result.set_tool_call_id(absl::StrCat("call-", turn));
    *req.add_items() = result;
    *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat("Host ", turn, " is fine."));
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    CallContext bounded;
    bounded.deadline = absl::Now() + absl::Seconds(2);
    auto built = service_.BuildContext(bounded, build);
    ASSERT_TRUE(built.ok()) << built.status();
    view = *built;
  }
  EXPECT_LT(view.tokens().total(), 3891) << "past the hard band";
  EXPECT_EQ(view.context_status(), v1::CONTEXT_STATUS_FULL);
  EXPECT_EQ(view.band(), v1::BAND_HARD);
  const auto events = AllCompactionEvents(*storage_, ctx_, key);
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) EXPECT_NE(e.event, "threshold_hit") << e.detail;

  ConversationService::Options waits;
  waits.background_compaction = false;
  ConversationService foreground(waits, models_.get(), storage_.get(), summarizer_.get());
  CallContext bounded;
  bounded.deadline = absl::Now() + absl::Seconds(1);
  EXPECT_EQ(foreground.BuildContext(bounded, build).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  v1::UpdateConversationRequest block;
  block.set_conversation_id("busy");
  block.mutable_profile_overrides()->set_hard_band_policy(v1::HARD_BAND_POLICY_BLOCK);
  ASSERT_TRUE(service_.UpdateConversation(ctx_, block).ok());
  bounded.deadline = absl::Now() + absl::Seconds(1);
  EXPECT_EQ(service_.BuildContext(bounded, build).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// Storage whose idle claims throw, as a driver bug or a malformed row might.
class ThrowingIdleStorage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<std::vector<ConversationKey>> ClaimIdle(const CallContext&, absl::Time,
                                                          int) override {
    claims_.fetch_add(1);
    throw std::runtime_error("malformed row");
  }
  int claims() const { return claims_.load(); }

 private:
  std::atomic<int> claims_{0};
};

// Storage that counts the recounts it is asked to keep.
class CountingRecountStorage : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::Status SaveTokenCounts(const CallContext& c, const ConversationKey& k,
                               const TokenRecount& r) override {
    ++saved_;
    return ForwardingStorage::SaveTokenCounts(c, k, r);
  }
  int saved() const { return saved_.load(); }

 private:
  std::atomic<int> saved_{0};
};

// InspectContext is a reader's call: after a model change it counts the
// view with the new model for its answer and stores nothing; the next
// BuildContext keeps the counts.
TEST_F(ConversationServiceTest, InspectContextWritesNoRecount) {
  CountingRecountStorage storage(storage_.get());
  ConversationService service(ConversationService::Options{}, models_.get(), &storage,
                              summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("recount");
  create.set_model("small-1");  // 2 bytes per token.
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("recount", std::string(400, 'w'))).ok());
  v1::UpdateConversationRequest update;
  update.set_conversation_id("recount");
  update.set_model("gpt-4o");  // The default profile: 4 bytes per token.
  ASSERT_TRUE(service.UpdateConversation(ctx_, update).ok());
  v1::InspectContextRequest inspect;
  inspect.set_conversation_id("recount");
  auto inspected = service.InspectContext(ctx_, inspect);
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  EXPECT_EQ(inspected->tokens().live(), 104);  // 400 / 4 + 4 per message: the new model's.
  EXPECT_EQ(storage.saved(), 0);
  v1::BuildContextRequest build;
  build.set_conversation_id("recount");
  ASSERT_TRUE(service.BuildContext(ctx_, build).ok());
  EXPECT_EQ(storage.saved(), 1);
}

// What a sweep of idle conversations throws ends that sweep, not the
// process: the sweeper runs again.
TEST_F(ConversationServiceTest, AnIdleSweepThatThrowsDoesNotEndTheProcess) {
  ThrowingIdleStorage storage(storage_.get());
  ConversationService::Options options;
  options.idle_scan = absl::Milliseconds(1);
  ConversationService service(options, models_.get(), &storage, summarizer_.get());
  for (int i = 0; i < 5000 && storage.claims() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GE(storage.claims(), 3);
}

TEST_F(ConversationServiceTest, UnknownModelWithoutDefaultProfileIsRefused) {
  auto strict = Registry(R"pb(profiles { name: "only" })pb");
  ConversationService service(ConversationService::Options{}, strict.get(), storage_.get(),
                              summarizer_.get());
  v1::CreateConversationRequest req;
  req.set_model("mystery-model");
  auto r = service.CreateConversation(ctx_, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "model: no model profile matches 'mystery-model' and no default profile is "
            "configured");
  req.set_model("only");
  EXPECT_TRUE(service.CreateConversation(ctx_, req).ok());
}

// A provider that counts 30% more tokens than the approximate estimate: the
// gateway reports its usage with every turn, and the conversation's counts
// converge on the provider's.
TEST_F(ConversationServiceTest, ReportedUsageCorrectsApproximateCounts) {
  Create("chat", "You are a helpful assistant that answers in detail.");
  constexpr double kProviderRatio = 1.3;
  std::vector<double> errors;
  for (int turn = 0; turn < 12; ++turn) {
    const std::string question = absl::StrCat("Question ", turn, ": ", std::string(400, 'q'));
    // What convstate would count, uncorrected, for the prompt the provider sees.
    v1::BuildContextRequest build;
    build.set_conversation_id("chat");
    *build.add_pending_input() = Message(v1::ROLE_USER, question);
    auto view = service_.BuildContext(ctx_, build);
    ASSERT_TRUE(view.ok()) << view.status();

    // The raw prompt: the view with this conversation's correction undone.
    // Computed independently: system + items + the question, at 4 bytes per
    // token plus 4 per message.
    int64_t raw = 0;
    for (const auto& e : view->entries()) raw += 4 + (e.content().size() + 3) / 4;
    const int64_t provider_count = static_cast<int64_t>(kProviderRatio * raw + 0.5);
    const double error =
        std::abs(static_cast<double>(view->tokens().total() - view->tokens().output_reserve()) /
                     provider_count -
                 1.0);
    errors.push_back(error);

    v1::AppendTurnRequest append;
    append.set_conversation_id("chat");
    *append.add_items() = Message(v1::ROLE_USER, question);
    *append.add_items() = Message(v1::ROLE_ASSISTANT, std::string(300, 'a'));
    append.mutable_usage()->set_input_tokens(provider_count);
    append.mutable_usage()->set_output_tokens(90);
    ASSERT_TRUE(service_.AppendTurn(ctx_, append).ok());
  }
  // Far off at first (the estimate knows nothing of the provider), then
  // closer with every report until rounding is all that is left.
  EXPECT_GT(errors.front(), 0.2);
  for (size_t i = 1; i < errors.size(); ++i) {
    if (errors[i - 1] > 0.02) {
      EXPECT_LT(errors[i], errors[i - 1]) << "turn " << i;
    }
  }
  EXPECT_LT(errors.back(), 0.02);
  // And the next view counts like the provider does.
  v1::BuildContextRequest build;
  build.set_conversation_id("chat");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  int64_t raw = 0;
  for (const auto& e : view->entries()) raw += 4 + (e.content().size() + 3) / 4;
  const double ratio =
      static_cast<double>(view->tokens().total() - view->tokens().output_reserve()) / raw;
  EXPECT_NEAR(ratio, kProviderRatio, 0.03);
}

TEST_F(ConversationServiceTest, ProviderOverflowCorrectsTheEstimateAndNeverReturnsTheRefusedView) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("o");
  create.set_model("small-1");
  create.set_system_prompt("You are terse.");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int i = 0; i < 6; ++i) {
    v1::AppendTurnRequest req = Append("o", std::string(300, 'a' + i));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, std::string(300, 'z'));
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  v1::BuildContextRequest build;
  build.set_conversation_id("o");
  auto refused = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(refused.ok()) << refused.status();
  const int64_t estimated = refused->tokens().total() - refused->tokens().output_reserve();

  build.set_provider_overflow(true);
  build.set_provider_reported_tokens(estimated * 3 / 2);
  auto recovered = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_NE(recovered->view_hash(), refused->view_hash());
  EXPECT_LT(recovered->entries_size(), refused->entries_size());
  // The next ordinary call counts with the correction: never the refused view.
  build.set_provider_overflow(false);
  build.set_provider_reported_tokens(0);
  auto next = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next->view_hash(), refused->view_hash());

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("o");
  auto audit = service_.ListCompactionEvents(ctx_, list);
  ASSERT_TRUE(audit.ok());
  bool recorded = false;
  for (const auto& e : audit->events()) {
    if (e.event() != "provider_overflow") continue;
    recorded = true;
    EXPECT_EQ(e.tokens_before(), estimated);
    EXPECT_EQ(e.tokens_after(), estimated * 3 / 2);
    EXPECT_NE(e.detail_json().find(refused->view_hash()), std::string::npos) << e.detail_json();
  }
  EXPECT_TRUE(recorded);

  build.set_provider_reported_tokens(100);  // Without provider_overflow.
  EXPECT_TRUE(absl::IsInvalidArgument(service_.BuildContext(ctx_, build).status()));
  build.set_provider_overflow(true);
  build.set_provider_reported_tokens(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(service_.BuildContext(ctx_, build).status()));
}

TEST_F(ConversationServiceTest, ProviderOverflowOfAViewThatCannotShrinkIsRefused) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("tiny");
  create.set_model("small-1");
  create.set_system_prompt("You are terse.");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("tiny");
  *build.add_pending_input() = Message(v1::ROLE_USER, "hello");
  build.set_provider_overflow(true);
  auto out = service_.BuildContext(ctx_, build);
  // The system prompt and the pending input cannot go: nothing fits the
  // limit the refusal set.
  ASSERT_TRUE(absl::IsResourceExhausted(out.status())) << out.status();
}

TEST_F(ConversationServiceTest, ContinueFromCarriesSummariesAndFactsNotLiveItems) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("monday");
  create.set_model("small-1");
  create.set_system_prompt("You are the release assistant.");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  std::string chatter;
  for (int i = 0; i < 12; ++i) chatter += " I will look into it and get back to you soon.";
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("monday", "We ship api v1.4 from registry.local:5000 on Friday." + chatter)).ok());
  v1::AppendTurnRequest more = Append("monday", "Also rotate the key KEY-4471 before that." + chatter);
  *more.add_items() = Message(v1::ROLE_ASSISTANT, "Noted: rotate KEY-4471 before the Friday release." + chatter);
  ASSERT_TRUE(service_.AppendTurn(ctx_, more).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("monday", "What is left for today?")).ok());
  v1::CompactRequest compact;
  compact.set_conversation_id("monday");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);

  v1::CreateConversationRequest resume;
  resume.set_conversation_id("tuesday");
  resume.set_continue_from("monday");
  auto resumed = service_.CreateConversation(ctx_, resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->continued_from(), "monday");
  EXPECT_EQ(resumed->model(), "small-1");  // Taken from the source.
  EXPECT_EQ(resumed->system_prompt(), "You are the release assistant.");

  v1::BuildContextRequest build;
  build.set_conversation_id("tuesday");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok()) << view.status();
  std::string ledger;
  int summaries = 0, live = 0;
  for (const auto& e : view->entries()) {
    if (e.section() == v1::SECTION_SUMMARY) ++summaries;
    if (e.section() == v1::SECTION_LEDGER) ledger += e.content();
    if (e.section() == v1::SECTION_LIVE) ++live;
  }
  EXPECT_EQ(summaries, 1);
  EXPECT_EQ(live, 0) << "live items are not carried over";
  EXPECT_NE(ledger.find("registry.local:5000"), std::string::npos) << ledger << view->DebugString();
  EXPECT_NE(ledger.find("(earlier)"), std::string::npos) << ledger;

  v1::ListSummariesRequest list;
  list.set_conversation_id("tuesday");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).source_conversation_id(), "monday");
  EXPECT_EQ(chunks->chunks(0).source_chunk_id(), compacted->summary_chunk_id());

  // The source is untouched; a missing source is NOT_FOUND.
  v1::GetConversationRequest get;
  get.set_conversation_id("monday");
  EXPECT_EQ(service_.GetConversation(ctx_, get)->item_count(), 5);  // 4 items, 1 marker.
  resume.set_conversation_id("wednesday");
  resume.set_continue_from("nobody");
  EXPECT_TRUE(absl::IsNotFound(service_.CreateConversation(ctx_, resume).status()));
}

// A continuation is validated before its hand-off touches the source: an
// id that exists, or a field that is invalid by itself, is refused with the
// source's compaction state as it was.
TEST_F(ConversationServiceTest, ContinueFromValidatesBeforeItCompactsTheSource) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("src");
  create.set_model("small-1");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  std::string chatter;
  for (int i = 0; i < 12; ++i) chatter += " I will look into it and get back to you soon.";
  for (int i = 0; i < 4; ++i) {
    v1::AppendTurnRequest turn =
        Append("src", absl::StrCat("Deploy web-", i, " to eu-west-1.", chatter));
    *turn.add_items() =
        Message(v1::ROLE_ASSISTANT, absl::StrCat("web-", i, " is rolling out.", chatter));
    ASSERT_TRUE(service_.AppendTurn(ctx_, turn).ok());
  }
  Create("taken");
  v1::GetConversationRequest get;
  get.set_conversation_id("src");
  const int64_t before = service_.GetConversation(ctx_, get)->compaction_version();

  v1::CreateConversationRequest resume;
  resume.set_conversation_id("taken");
  resume.set_continue_from("src");
  resume.set_carry_recent_turns(1);  // The rest is summarized in the source first.
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kAlreadyExists);
  resume.set_conversation_id("fresh");
  (*resume.mutable_metadata())["convstate.task_boundary"] = "true";
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kInvalidArgument);
  resume.clear_metadata();
  resume.set_model("no such model here");
  EXPECT_EQ(service_.CreateConversation(ctx_, resume).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service_.GetConversation(ctx_, get)->compaction_version(), before)
      << "the source was compacted for a continuation that was refused";
  resume.clear_model();
  ASSERT_TRUE(service_.CreateConversation(ctx_, resume).ok());
  EXPECT_GT(service_.GetConversation(ctx_, get)->compaction_version(), before);
}

TEST_F(ConversationServiceTest, UpdateConversationRebudgetsForTheNewModel) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("u");
  create.set_model("small-1");  // 4,096 window, 2 bytes a token.
  create.set_system_prompt("You are terse.");
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("u", std::string(400, 'x'))).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("u");
  auto before = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->tokens().context_window(), 4096);

  v1::UpdateConversationRequest update;
  update.set_conversation_id("u");
  update.set_model("gpt-4o");  // The default profile: 128k, 4 bytes a token.
  update.set_system_prompt("You are terse and exact.");
  auto updated = service_.UpdateConversation(ctx_, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->model(), "gpt-4o");
  EXPECT_EQ(updated->system_prompt(), "You are terse and exact.");

  auto after = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->tokens().context_window(), 128000);
  // The stored item was counted again with the new tokenizer: half the
  // tokens for the same bytes.
  EXPECT_LT(after->tokens().live(), before->tokens().live() * 6 / 10);
  EXPECT_GT(after->tokens().live(), before->tokens().live() * 4 / 10);
  EXPECT_EQ(after->entries(0).content(), "You are terse and exact.");

  v1::ListCompactionEventsRequest list;
  list.set_conversation_id("u");
  auto audit = service_.ListCompactionEvents(ctx_, list);
  ASSERT_TRUE(audit.ok());
  ASSERT_GE(audit->events_size(), 1);
  EXPECT_EQ(audit->events(0).event(), "conversation_updated");
  EXPECT_NE(audit->events(0).detail_json().find("\"recount\":true"), std::string::npos)
      << audit->events(0).detail_json();

  update.set_model("");
  EXPECT_TRUE(absl::IsInvalidArgument(service_.UpdateConversation(ctx_, update).status()));
  update.set_conversation_id("nobody");
  update.set_model("gpt-4o");
  EXPECT_TRUE(absl::IsNotFound(service_.UpdateConversation(ctx_, update).status()));
}

// Storage where another UpdateConversation lands between the service's
// read of the conversation and its own update, once.
class RacedUpdates final : public ForwardingStorage {
 public:
  RacedUpdates(Storage* base, ConversationUpdate first)
      : ForwardingStorage(base), first_(std::move(first)) {}
  absl::StatusOr<Conversation> UpdateConversation(const CallContext& c, const ConversationKey& k,
                                                 const ConversationUpdate& u) override {
    if (!raced_) {
      raced_ = true;
      auto other = base_->UpdateConversation(c, k, first_);
      EXPECT_TRUE(other.ok()) << other.status();
    }
    return base_->UpdateConversation(c, k, u);
  }

 private:
  const ConversationUpdate first_;
  bool raced_ = false;
};

// Two updates at once (one changes the model, the other the system prompt)
// end with counts that match the conversation as it is after both: the
// one that read the conversation before the other landed counts again.
TEST(ConversationServiceRaceTest, ConcurrentUpdatesLeaveCountsThatMatchTheResult) {
  auto models = Registry(kProfiles);
  auto memory = NewMemoryStorage();
  const std::string long_prompt(4000, 'p');
  ConversationUpdate other;
  other.system_prompt = long_prompt;
  other.count_encoding = "approximate:4";
  other.system_prompt_tokens = 1000;  // What the other call counted, for gpt-4o's profile.
  RacedUpdates storage(memory.get(), other);
  auto summarizer = NewExtractiveSummarizer();
  ConversationService service(ConversationService::Options{}, models.get(), &storage,
                              summarizer.get());
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("raced");
  create.set_model("gpt-4o");
  create.set_system_prompt("short");
  ASSERT_TRUE(service.CreateConversation(ctx, create).ok());
  v1::UpdateConversationRequest update;
  update.set_conversation_id("raced");
  update.set_model("small-model");
  ASSERT_TRUE(service.UpdateConversation(ctx, update).ok());
  auto after = memory->GetConversation(ctx, {"default", "raced"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->model, "small-model");
  EXPECT_EQ(after->system_prompt, long_prompt);
  // The small profile counts 2 bytes a token and nothing per message.
  EXPECT_EQ(after->system_prompt_tokens, 2000);
}

}  // namespace
}  // namespace convstate

namespace convstate {
namespace {

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

namespace convstate {
namespace {

// What a compaction took out of the view comes back, verbatim, when the
// user asks about it: after the live items, before the pending input,
// counted on its own; an unrelated question, a budget of 0 and erased text
// bring back nothing.
class RecallTest : public ConversationServiceTest {
 protected:
  void Fill(const std::string& id) {
    v1::AppendTurnRequest first = Append(id, "Set up the tenant database for fjord-tide please.");
    v1::NewItem call = Message(v1::ROLE_ASSISTANT, R"({"cmd": "provision fjord-tide"})");
    call.set_kind(v1::ITEM_KIND_TOOL_CALL);
    call.set_tool_name("shell");
    call.set_tool_call_id("call-1");
    *first.add_items() = call;
    v1::NewItem result = Message(v1::ROLE_TOOL, "");
    result.set_kind(v1::ITEM_KIND_TOOL_RESULT);
    result.set_tool_name("shell");
    result.set_tool_call_id("call-1");
    std::string out = "# fjord-tide: provisioning report\n";
    for (int i = 0; i < 30; ++i) absl::StrAppend(&out, "step ", i, ": created table t", i, "\n");
    out += "primary host: db-41.north.internal (guard_value 7731)\n";
    result.set_content(out);
    *first.add_items() = result;
    ASSERT_TRUE(service_.AppendTurn(ctx_, first).ok());
    for (int i = 0; i < 10; ++i) {
      v1::AppendTurnRequest req = Append(id, absl::StrCat("Status of step ", i, "?"));
      *req.add_items() = Message(v1::ROLE_ASSISTANT, absl::StrCat("Step ", i, " is done."));
      ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
    }
    v1::CompactRequest compact;
    compact.set_conversation_id(id);
    compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
    ASSERT_TRUE(service_.Compact(ctx_, compact).ok());
  }

  absl::StatusOr<v1::BuildContextResponse> Ask(const std::string& id, const std::string& q) {
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    *build.add_pending_input() = Message(v1::ROLE_USER, q);
    return service_.BuildContext(ctx_, build);
  }

  static const v1::ContextEntry* Recalled(const v1::BuildContextResponse& view) {
    for (const v1::ContextEntry& e : view.entries()) {
      if (e.section() == v1::SECTION_RECALLED) return &e;
    }
    return nullptr;
  }
};

TEST_F(RecallTest, BuildContextBringsBackWhatTheQuestionAsksFor) {
  Create("r");
  Fill("r");
  auto view = Ask("r", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok()) << view.status();
  for (const v1::ContextEntry& e : view->entries()) {
    if (e.section() == v1::SECTION_LIVE) {
      EXPECT_GT(e.sequence(), 3) << "item still live";
    }
  }
  const v1::ContextEntry* recalled = Recalled(*view);
  ASSERT_NE(recalled, nullptr);
  EXPECT_NE(recalled->content().find("primary host: db-41.north.internal (guard_value 7731)"),
            std::string::npos)
      << recalled->content();
  EXPECT_NE(recalled->content().find("[#3, turn 1, result of shell"), std::string::npos);
  EXPECT_EQ(recalled->role(), v1::ROLE_SYSTEM);
  // Right before the pending input, counted on its own and in the total.
  const int n = view->entries_size();
  EXPECT_EQ(view->entries(n - 2).section(), v1::SECTION_RECALLED);
  EXPECT_EQ(view->entries(n - 1).section(), v1::SECTION_PENDING);
  const v1::TokenBreakdown& t = view->tokens();
  EXPECT_EQ(t.recalled(), recalled->token_count());
  EXPECT_GT(t.recalled(), 0);
  EXPECT_LE(t.recalled(), 128000 * 5 / 100);
  EXPECT_EQ(t.total(), t.system() + t.pinned() + t.summaries() + t.ledger() + t.live() +
                           t.recalled() + t.pending() + t.output_reserve());

  // An explicit query without pending input.
  v1::BuildContextRequest build;
  build.set_conversation_id("r");
  build.set_recall_query("fjord-tide primary host");
  auto explicit_view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(explicit_view.ok());
  ASSERT_NE(Recalled(*explicit_view), nullptr);
  build.set_recall_query(std::string(9000, 'x'));
  EXPECT_EQ(service_.BuildContext(ctx_, build).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A question about something else recalls nothing.
  auto other = Ask("r", "Can you write me a short poem about autumn leaves?");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Recalled(*other), nullptr);
  EXPECT_EQ(other->tokens().recalled(), 0);
}

TEST_F(RecallTest, ABudgetOfZeroTurnsRecallOffAndErasedTextNeverComesBack) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("off");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_recall_budget_fraction(0);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  Fill("off");
  auto view = Ask("off", "Which host does the fjord-tide database live on?");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(Recalled(*view), nullptr);

  Create("erase");
  Fill("erase");
  v1::RedactItemsRequest redact;
  redact.set_conversation_id("erase");
  redact.add_sequences(3);
  redact.set_reason("test");
  ASSERT_TRUE(service_.RedactItems(ctx_, redact).ok());
  view = Ask("erase", "Which host does the fjord-tide database live on, and its guard value?");
  ASSERT_TRUE(view.ok());
  for (const v1::ContextEntry& e : view->entries()) {
    EXPECT_EQ(e.content().find("db-41"), std::string::npos) << e.content();
  }
  v1::SearchHistoryRequest search;
  search.set_conversation_id("erase");
  search.set_query("db-41.north.internal guard_value");
  auto found = service_.SearchHistory(ctx_, search);
  ASSERT_TRUE(found.ok()) << found.status();
  for (const v1::RecalledPassage& p : found->passages()) {
    EXPECT_NE(p.sequence(), 3);
    EXPECT_EQ(p.text().find("db-41"), std::string::npos) << p.text();
    EXPECT_EQ(p.text().find("7731"), std::string::npos) << p.text();
  }
}

// InspectContext shows what recall would add for a question, with scores,
// and changes nothing.
TEST_F(RecallTest, InspectContextShowsWhatRecallWouldAdd) {
  Create("i");
  Fill("i");
  v1::InspectContextRequest req;
  req.set_conversation_id("i");
  req.set_recall_query("what guard value did the fjord-tide report give for the primary host?");
  auto out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(out->recalled().empty());
  EXPECT_EQ(out->recalled(0).text(), "primary host: db-41.north.internal (guard_value 7731)");
  EXPECT_EQ(out->recalled(0).call(), R"({"cmd": "provision fjord-tide"})");
  EXPECT_GT(out->recalled(0).score(), 0);
  EXPECT_GT(out->recalled_tokens(), 0);
  // The same question pending: the same passages.
  req.clear_recall_query();
  *req.add_pending_input() = Message(v1::ROLE_USER, "And the fjord-tide primary host's guard value?");
  out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(out->recalled().empty());
  EXPECT_EQ(out->recalled(0).sequence(), 3);
  // No question, nothing recalled; a question too long is refused.
  req.clear_pending_input();
  out = service_.InspectContext(ctx_, req);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->recalled().empty());
  EXPECT_EQ(out->recalled_tokens(), 0);
  req.set_recall_query(std::string(9000, 'q'));
  EXPECT_EQ(service_.InspectContext(ctx_, req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RecallTest, SearchHistoryAnswersPassagesWithProvenance) {
  Create("s");
  Fill("s");
  v1::SearchHistoryRequest req;
  req.set_conversation_id("s");
  req.set_query("what guard value did the fjord-tide report give for the primary host?");
  auto out = service_.SearchHistory(ctx_, req);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GE(out->passages_size(), 1);
  const v1::RecalledPassage& p = out->passages(0);
  EXPECT_EQ(p.sequence(), 3);
  EXPECT_EQ(p.turn_index(), 1);
  EXPECT_EQ(p.kind(), v1::ITEM_KIND_TOOL_RESULT);
  EXPECT_EQ(p.tool_name(), "shell");
  EXPECT_EQ(p.text(), "primary host: db-41.north.internal (guard_value 7731)");
  EXPECT_EQ(p.title(), "# fjord-tide: provisioning report");
  EXPECT_GT(p.token_count(), 0);
  EXPECT_GE(out->document_frequency().at("fjord-tide"), 2);
  EXPECT_EQ(out->items(), 24);  // 23 appended and the summary's marker

  req.set_max_results(51);
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_max_results(0);
  req.set_max_tokens(-1);
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_max_tokens(0);
  req.set_query("");
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_query("fjord-tide");
  req.set_conversation_id("missing");
  EXPECT_EQ(service_.SearchHistory(ctx_, req).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace convstate

namespace convstate {
namespace {

// A compaction says what it lost: the facts of its span that the view no
// longer shows verbatim, in the chunk (ListSummaries, ExpandSummary) and
// its audit row; every one of them is really missing from the view.
TEST_F(ConversationServiceTest, ACompactionReportsTheFactsItLost) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("lossy");
  create.set_model("small-1");  // 4096 window: the ledger holds ~800 tokens.
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int t = 0; t < 12; ++t) {
    std::string facts;
    for (int k = 0; k < 10; ++k) {
      absl::StrAppend(&facts, " host-", t, "-", k, ".eu port ", 7000 + t * 10 + k, ";");
    }
    v1::AppendTurnRequest req = Append("lossy", absl::StrCat("Register these:", facts));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, "Registered, all of them.");
    ASSERT_TRUE(service_.AppendTurn(ctx_, req).ok());
  }
  v1::CompactRequest compact;
  compact.set_conversation_id("lossy");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);

  v1::ExpandSummaryRequest expand;
  expand.set_conversation_id("lossy");
  expand.set_chunk_id(compacted->summary_chunk_id());
  auto expanded = service_.ExpandSummary(ctx_, expand);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const v1::SummaryChunk& chunk = expanded->chunk();
  ASSERT_GT(chunk.lost_facts_size(), 0) << "120 facts cannot all stay in a 4k window";

  v1::BuildContextRequest build;
  build.set_conversation_id("lossy");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  std::string shown;
  for (const v1::ContextEntry& e : view->entries()) shown += e.content() + "\n";
  for (const v1::LedgerFact& f : chunk.lost_facts()) {
    EXPECT_GE(f.sequence(), chunk.from_sequence());
    EXPECT_LE(f.sequence(), chunk.through_sequence());
    EXPECT_EQ(shown.find(f.text()), std::string::npos) << f.text() << " is in the view";
  }
  for (const v1::LedgerFact& f : chunk.facts()) {
    bool lost = false;
    for (const v1::LedgerFact& l : chunk.lost_facts()) lost |= l.text() == f.text();
    if (!lost) {
      EXPECT_NE(shown.find(f.text()), std::string::npos) << f.text();
    }
  }
  v1::ListSummariesRequest list;
  list.set_conversation_id("lossy");
  auto listed = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->chunks_size(), 1);
  EXPECT_EQ(listed->chunks(0).lost_facts_size(), chunk.lost_facts_size());
  v1::ListCompactionEventsRequest events;
  events.set_conversation_id("lossy");
  auto audit = service_.ListCompactionEvents(ctx_, events);
  ASSERT_TRUE(audit.ok());
  bool named = false;
  for (const auto& e : audit->events()) {
    if (e.event() != "completed" || e.tier() != "summarize") continue;
    const std::string& detail = e.detail_json();
    named = detail.find("\"lost_facts\"") != std::string::npos &&
            detail.find(absl::StrCat("\"lost\":", chunk.lost_facts_size())) != std::string::npos;
  }
  EXPECT_TRUE(named);
}

}  // namespace

// Five turns of a deploy log, each a user fact and a long answer.
void AppendDeployTurns(ConversationService& service, const CallContext& ctx,
                       const std::string& id) {
  for (int i = 0; i < 5; ++i) {
    v1::AppendTurnRequest req;
    req.set_conversation_id(id);
    v1::NewItem user;
    user.set_role(v1::ROLE_USER);
    user.set_kind(v1::ITEM_KIND_MESSAGE);
    user.set_content(absl::StrCat("Deploy web-", i, " to eu-west-1 at 0", i, ":00 UTC."));
    *req.add_items() = user;
    v1::NewItem answer = user;
    answer.set_role(v1::ROLE_ASSISTANT);
    answer.set_content(
        "That should be safe to do now. I will keep an eye on the error rate while it rolls "
        "out, and I will tell you as soon as anything looks unusual. If something goes wrong "
        "we can roll back with a single command, so there is little risk in trying.");
    *req.add_items() = answer;
    ASSERT_TRUE(service.AppendTurn(ctx, req).ok());
  }
}

// A dry run stores nothing; its proposal applies as made, once; a revert
// brings back the view before it, byte for byte.
TEST_F(ConversationServiceTest, ADryRunProposesAndApplyAndRevertUndoIt) {
  Create("ctl", "You are terse.");
  AppendDeployTurns(service_, ctx_, "ctl");
  v1::BuildContextRequest build;
  build.set_conversation_id("ctl");
  auto before = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(before.ok()) << before.status();

  v1::CompactRequest dry;
  dry.set_conversation_id("ctl");
  dry.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  dry.set_dry_run(true);
  auto proposed = service_.Compact(ctx_, dry);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_TRUE(proposed->has_proposal()) << proposed->DebugString();
  const v1::CompactionProposal& p = proposed->proposal();
  EXPECT_EQ(p.proposal_id(), "1");
  EXPECT_EQ(proposed->summary_chunk_id(), 0);
  EXPECT_EQ(p.from_sequence(), 1);
  EXPECT_GT(p.through_sequence(), 1);
  EXPECT_FALSE(p.summary_text().empty());
  EXPECT_FALSE(p.facts().empty());
  EXPECT_LT(p.after().total(), p.before().total());
  EXPECT_EQ(p.before().total(), before->tokens().total());
  EXPECT_TRUE(p.has_expire_time());
  auto unchanged = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->view_hash(), before->view_hash());
  EXPECT_EQ(unchanged->compaction_version(), before->compaction_version());

  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id("ctl");
  apply.set_proposal_id(p.proposal_id());
  auto applied = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_GT(applied->summary_chunk_id(), 0);
  EXPECT_FALSE(applied->replayed());
  EXPECT_FALSE(applied->edited());
  auto compacted = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(compacted.ok());
  EXPECT_NE(compacted->view_hash(), before->view_hash());
  EXPECT_EQ(compacted->context_status(), v1::CONTEXT_STATUS_SUMMARIZED);
  EXPECT_EQ(compacted->tokens().total(), applied->tokens_after());
  auto again = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->summary_chunk_id(), applied->summary_chunk_id());

  v1::RevertCompactionRequest revert;
  revert.set_conversation_id("ctl");
  revert.set_chunk_id(applied->summary_chunk_id());
  auto reverted = service_.RevertCompaction(ctx_, revert);
  ASSERT_TRUE(reverted.ok()) << reverted.status();
  EXPECT_TRUE(reverted->chunk().reverted());
  EXPECT_EQ(reverted->summarized_through(), 0);
  auto restored = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->view_hash(), before->view_hash());
  EXPECT_EQ(restored->context_status(), v1::CONTEXT_STATUS_FULL);
  EXPECT_EQ(service_.RevertCompaction(ctx_, revert).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An applied proposal answers as it did, even after a revert.
  apply.set_proposal_id("1");
  EXPECT_TRUE(service_.ApplyCompaction(ctx_, apply)->replayed());
  dry.set_through_sequence(4);
  auto bounded = service_.Compact(ctx_, dry);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->proposal().through_sequence(), 4);
  EXPECT_EQ(bounded->proposal().proposal_id(), "2");
  v1::PinItemRequest pin;
  pin.set_conversation_id("ctl");
  pin.set_sequence(8);
  ASSERT_TRUE(service_.PinItem(ctx_, pin).ok());
  apply.set_proposal_id("2");
  auto stale = service_.ApplyCompaction(ctx_, apply);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  apply.set_proposal_id("9");
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(), absl::StatusCode::kNotFound);
  apply.set_proposal_id("x'");
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The caller's own summary text goes into the view; appends made meanwhile
// do not stand in its way.
TEST_F(ConversationServiceTest, AnEditedProposalPutsTheCallersTextInTheView) {
  Create("edit");
  AppendDeployTurns(service_, ctx_, "edit");
  v1::CompactRequest dry;
  dry.set_conversation_id("edit");
  dry.set_dry_run(true);
  dry.set_through_sequence(6);
  auto proposed = service_.Compact(ctx_, dry);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_TRUE(proposed->has_proposal());
  EXPECT_EQ(proposed->proposal().through_sequence(), 6);
  ASSERT_TRUE(service_.AppendTurn(ctx_, Append("edit", "one more thing")).ok());

  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id("edit");
  apply.set_proposal_id(proposed->proposal().proposal_id());
  apply.set_summary_text(std::string(100000, 'x'));
  EXPECT_EQ(service_.ApplyCompaction(ctx_, apply).status().code(),
            absl::StatusCode::kInvalidArgument);
  apply.set_summary_text("Three web deploys to eu-west-1 went out; nothing failed.");
  auto applied = service_.ApplyCompaction(ctx_, apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(applied->edited());
  v1::BuildContextRequest build;
  build.set_conversation_id("edit");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  bool shown = false;
  for (const auto& e : view->entries()) {
    shown |= e.section() == v1::SECTION_SUMMARY &&
             e.content().find("nothing failed") != std::string::npos;
  }
  EXPECT_TRUE(shown) << view->DebugString();
  EXPECT_EQ(view->entries(view->entries_size() - 1).content(), "one more thing");
  v1::ListSummariesRequest list;
  list.set_conversation_id("edit");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).through_sequence(), 6);
  // A boundary inside the summaries or past the log is refused.
  v1::CompactRequest bad;
  bad.set_conversation_id("edit");
  bad.set_through_sequence(3);
  EXPECT_EQ(service_.Compact(ctx_, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.set_through_sequence(99);
  EXPECT_EQ(service_.Compact(ctx_, bad).status().code(), absl::StatusCode::kInvalidArgument);
}


// The extractive summarizer, remembering what it was told.
class InstructedSummarizer : public Summarizer {
 public:
  absl::StatusOr<SummaryResult> Summarize(const SummaryRequest& request) override {
    instructions.push_back(request.instructions);
    return base_->Summarize(request);
  }
  std::vector<std::string> instructions;

 private:
  std::unique_ptr<Summarizer> base_ = NewExtractiveSummarizer();
};

// A conversation's policy: a keep rule holds its match verbatim through a
// summary; its instructions reach every summary (with the call's after
// them); an update replaces it, and a continuation carries it.
TEST(CompactionPolicyTest, KeepRulesHoldItemsVerbatimAndInstructionsReachTheSummarizer) {
  auto models = Registry(kProfiles);
  auto storage = NewMemoryStorage();
  InstructedSummarizer summarizer;
  ConversationService service(ConversationService::Options{}, models.get(), storage.get(),
                              &summarizer);
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("policy");
  create.set_model("gpt-4o");
  v1::CompactionPolicy* policy = create.mutable_compaction_policy();
  policy->set_instructions("keep every ticket number");
  v1::KeepRule* rule = policy->add_keep();
  rule->set_pattern("ticket [A-Z]+-[0-9]+");
  rule->add_roles(v1::ROLE_USER);
  auto created = service.CreateConversation(ctx, create);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->compaction_policy().keep_size(), 1);
  AppendDeployTurns(service, ctx, "policy");
  v1::AppendTurnRequest ticket;
  ticket.set_conversation_id("policy");
  v1::NewItem user;
  user.set_role(v1::ROLE_USER);
  user.set_kind(v1::ITEM_KIND_MESSAGE);
  user.set_content("Track it under ticket OPS-4711, please.");
  *ticket.add_items() = user;
  ASSERT_TRUE(service.AppendTurn(ctx, ticket).ok());  // Item 11.
  AppendDeployTurns(service, ctx, "policy");

  v1::CompactRequest compact;
  compact.set_conversation_id("policy");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  compact.set_instructions("focus on the deploys");
  auto compacted = service.Compact(ctx, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(compacted->summary_chunk_id(), 0);
  ASSERT_FALSE(summarizer.instructions.empty());
  EXPECT_EQ(summarizer.instructions.back(), "keep every ticket number\nfocus on the deploys");
  v1::ExpandSummaryRequest expand;
  expand.set_conversation_id("policy");
  expand.set_chunk_id(compacted->summary_chunk_id());
  auto chunk = service.ExpandSummary(ctx, expand);
  ASSERT_TRUE(chunk.ok());
  ASSERT_GT(chunk->chunk().through_sequence(), 11);  // The span passed the ticket...
  v1::BuildContextRequest build;
  build.set_conversation_id("policy");
  auto view = service.BuildContext(ctx, build);
  ASSERT_TRUE(view.ok());
  bool pinned = false;
  for (const auto& e : view->entries()) {
    pinned |= e.section() == v1::SECTION_PINNED && e.sequence() == 11 &&
              e.content() == "Track it under ticket OPS-4711, please.";
  }
  EXPECT_TRUE(pinned) << view->DebugString();  // ...and it stayed, verbatim.
  v1::ListItemsRequest list;
  list.set_conversation_id("policy");
  auto items = service.ListItems(ctx, list);
  ASSERT_TRUE(items.ok());
  EXPECT_TRUE(items->items(10).pinned());
  EXPECT_FALSE(items->items(0).pinned());

  // Background and by-band compactions are told too: the policy is the
  // conversation's, not the call's.
  v1::CreateConversationRequest next;
  next.set_conversation_id("policy-2");
  next.set_continue_from("policy");
  auto continued = service.CreateConversation(ctx, next);
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_EQ(continued->compaction_policy().instructions(), "keep every ticket number");
  v1::UpdateConversationRequest update;
  update.set_conversation_id("policy");
  update.mutable_profile_overrides()->set_recent_turns(2);
  auto updated = service.UpdateConversation(ctx, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->compaction_policy().keep_size(), 1);  // Overrides leave it.
  update.clear_profile_overrides();
  update.mutable_compaction_policy();
  updated = service.UpdateConversation(ctx, update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_FALSE(updated->has_compaction_policy());
  // A pattern that is not RE2 is refused, naming the rule.
  update.mutable_compaction_policy()->add_keep()->set_pattern("(unclosed");
  auto refused = service.UpdateConversation(ctx, update);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("compaction_policy.keep[0].pattern"),
            std::string::npos)
      << refused.status();
}


// Storage that says when an idle due time was written (off the call path).
class IdleDueWatch : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::Status SetIdleDue(const CallContext& ctx, const ConversationKey& key,
                          std::optional<absl::Time> due) override {
    absl::Status s = ForwardingStorage::SetIdleDue(ctx, key, due);
    absl::MutexLock lock(&mu_);
    ++writes_;
    return s;
  }
  // Waits (really) until `n` writes happened.
  void AwaitWrites(int n) {
    absl::MutexLock lock(&mu_);
    target_ = n;
    mu_.AwaitWithTimeout(absl::Condition(this, &IdleDueWatch::Reached), absl::Seconds(10));
  }

 private:
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return writes_ >= target_; }

  absl::Mutex mu_;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  int target_ ABSL_GUARDED_BY(mu_) = 0;
};

// A conversation left alone above its idle band for longer than its prompt
// cache lives is compacted without a call, once; a call meanwhile puts it
// off. Driven by an injected clock.
TEST(IdleCompactionTest, AColdConversationAboveItsBandIsCompactedOnceWithoutACall) {
  FakeClock clock;
  auto models = Registry(kProfiles);
  auto base = NewMemoryStorage(&clock);
  IdleDueWatch storage(base.get());
  auto summarizer = NewExtractiveSummarizer();
  ConversationService::Options options;
  options.compaction.clock = &clock;
  options.background_compaction = false;
  options.idle_scan = absl::ZeroDuration();  // Swept by hand below.
  ConversationService service(options, models.get(), &storage, summarizer.get());
  CallContext ctx;
  v1::CreateConversationRequest create;
  create.set_conversation_id("cold");
  create.set_model("small-model");
  create.mutable_profile_overrides()->set_prompt_cache_ttl_s(60);
  ASSERT_TRUE(service.CreateConversation(ctx, create).ok());
  // Into the soft band (70% of 4,096) and no further.
  v1::BuildContextResponse view;
  for (int turn = 0; view.tokens().total() < 2900; ++turn) {
    v1::AppendTurnRequest append;
    append.set_conversation_id("cold");
    v1::NewItem item;
    item.set_role(turn % 2 ? v1::ROLE_ASSISTANT : v1::ROLE_USER);
    item.set_kind(v1::ITEM_KIND_MESSAGE);
    item.set_content(absl::StrCat("Turn ", turn, " about host web-", turn,
                                  ".internal and its rollout; ", std::string(150, 'z')));
    *append.add_items() = item;
    ASSERT_TRUE(service.AppendTurn(ctx, append).ok());
    v1::BuildContextRequest build;
    build.set_conversation_id("cold");
    auto built = service.BuildContext(ctx, build);
    ASSERT_TRUE(built.ok()) << built.status();
    view = *built;
  }
  ASSERT_LT(view.tokens().total(), 3277) << "past the soft band";
  storage.AwaitWrites(1);
  clock.Advance(absl::Seconds(61));
  EXPECT_EQ(service.SweepIdle(), 0);  // Due a quarter lifetime late.
  // A call: the cache is warm again, and the due time moves on.
  v1::BuildContextRequest build;
  build.set_conversation_id("cold");
  ASSERT_TRUE(service.BuildContext(ctx, build).ok());
  storage.AwaitWrites(2);
  clock.Advance(absl::Seconds(30));
  EXPECT_EQ(service.SweepIdle(), 0);
  clock.Advance(absl::Seconds(50));
  EXPECT_EQ(service.SweepIdle(), 1);
  EXPECT_EQ(service.SweepIdle(), 0);  // Once.
  auto after = service.BuildContext(ctx, build);
  ASSERT_TRUE(after.ok());
  EXPECT_LT(after->tokens().total(), view.tokens().total());
  EXPECT_GT(after->compaction_version(), view.compaction_version());
  v1::ListCompactionEventsRequest events;
  events.set_conversation_id("cold");
  auto trail = service.ListCompactionEvents(ctx, events);
  ASSERT_TRUE(trail.ok());
  int idle = 0;
  for (const auto& e : trail->events()) {
    if (e.event() != "idle") continue;
    ++idle;
    // The band by name, as threshold_hit rows give it.
    EXPECT_NE(e.detail_json().find("\"band\":\"soft\""), std::string::npos) << e.detail_json();
  }
  EXPECT_EQ(idle, 1);
}


// A summary prefers to end where a task ended.
TEST_F(ConversationServiceTest, SummariesEndAtTaskBoundaries) {
  v1::CreateConversationRequest create;
  create.set_conversation_id("tasks");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_recent_turns(1);
  ASSERT_TRUE(service_.CreateConversation(ctx_, create).ok());
  for (int turn = 0; turn < 4; ++turn) {
    v1::AppendTurnRequest req = Append("tasks", absl::StrCat("Task step ", turn, " on db-", turn));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, std::string(400, 'a' + turn));
    req.set_task_boundary(turn == 0);
    auto appended = service_.AppendTurn(ctx_, req);
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_EQ(appended->items(1).metadata().count("convstate.task_boundary"), turn == 0 ? 1u : 0u);
  }
  v1::CompactRequest compact;
  compact.set_conversation_id("tasks");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  auto compacted = service_.Compact(ctx_, compact);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  v1::ListSummariesRequest list;
  list.set_conversation_id("tasks");
  auto chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->chunks_size(), 1);
  EXPECT_EQ(chunks->chunks(0).through_sequence(), 2);  // Not 6: the task ended at 2.
}

// With compaction disabled nothing bounds a live window but the view's
// byte bound: the calls that read the view are refused past it, naming it;
// with compaction on, BuildContext compacts what it read.
TEST_F(ConversationServiceTest, AViewPastItsByteBoundIsRefusedWhenNothingCompactsIt) {
  ConversationService::Options options;
  options.limits.max_view_bytes = 3000;
  ConversationService service(options, models_.get(), storage_.get(), summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("open");
  create.set_model("gpt-4o");
  create.mutable_profile_overrides()->set_compaction_enabled(false);
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("open", std::string(2000, 'a'))).ok());
  v1::BuildContextRequest build;
  build.set_conversation_id("open");
  ASSERT_TRUE(service.BuildContext(ctx_, build).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("open", std::string(2000, 'b'))).ok());
  const absl::Status refused = service.BuildContext(ctx_, build).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("--max_view_mb"), std::string::npos) << refused.message();
  v1::InspectContextRequest inspect;
  inspect.set_conversation_id("open");
  EXPECT_EQ(service.InspectContext(ctx_, inspect).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::GetContextAtRequest at;
  at.set_conversation_id("open");
  at.set_version(2);
  EXPECT_EQ(service.GetContextAt(ctx_, at).status().code(), absl::StatusCode::kResourceExhausted);
  // Nothing was lost: the items are all there.
  v1::ListItemsRequest items;
  items.set_conversation_id("open");
  EXPECT_EQ(service.ListItems(ctx_, items)->items_size(), 2);
}

// Erases the source's first item while the first hand-off of it is being
// created, as a RedactItems on another replica would.
class ErasedDuringHandoff : public ForwardingStorage {
 public:
  using ForwardingStorage::ForwardingStorage;
  absl::StatusOr<Conversation> CreateConversation(const CallContext& c,
                                                  const NewConversation& n) override {
    if (!n.continued_from.empty() && creates_++ == 0) {
      RedactRequest redact;
      redact.key = ConversationKey{n.key.tenant_id, n.continued_from};
      redact.sequences = {1};
      redact.tombstone = "[erased]";
      EXPECT_TRUE(ForwardingStorage::RedactItems(c, redact).ok());
    }
    return ForwardingStorage::CreateConversation(c, n);
  }
  int creates() const { return creates_; }

 private:
  int creates_ = 0;
};

// The hand-off is one write: an erasure between the read of the source and
// the create refuses the create, which reads the source again; the new
// conversation never holds the erased text.
TEST_F(ConversationServiceTest, AHandoffRacingAnErasureNeverCarriesTheErasedText) {
  ErasedDuringHandoff storage(storage_.get());
  ConversationService service(ConversationService::Options{}, models_.get(), &storage,
                              summarizer_.get());
  v1::CreateConversationRequest create;
  create.set_conversation_id("src");
  create.set_model("gpt-4o");
  ASSERT_TRUE(service.CreateConversation(ctx_, create).ok());
  ASSERT_TRUE(service.AppendTurn(ctx_, Append("src", "the passphrase is quartz-heron")).ok());
  v1::CreateConversationRequest next;
  next.set_conversation_id("next");
  next.set_continue_from("src");
  next.set_carry_recent_turns(1);
  auto created = service.CreateConversation(ctx_, next);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(storage.creates(), 2);
  v1::ListItemsRequest items;
  items.set_conversation_id("next");
  auto carried = service.ListItems(ctx_, items);
  ASSERT_TRUE(carried.ok());
  ASSERT_GT(carried->items_size(), 0);
  for (const v1::Item& item : carried->items()) {
    EXPECT_EQ(item.content().find("quartz-heron"), std::string::npos) << item.content();
  }
}

// A handoff summarizes what the source has not summarized yet, and brings
// its pinned items and newest turns along verbatim.
TEST_F(ConversationServiceTest, AHandoffCarriesTheSummaryPinsAndNewestTurns) {
  Create("source");
  AppendDeployTurns(service_, ctx_, "source");  // Items 1-10, five turns.
  v1::PinItemRequest pin;
  pin.set_conversation_id("source");
  pin.set_sequence(3);
  ASSERT_TRUE(service_.PinItem(ctx_, pin).ok());
  v1::CreateConversationRequest next;
  next.set_conversation_id("next");
  next.set_continue_from("source");
  next.set_carry_recent_turns(1);
  auto created = service_.CreateConversation(ctx_, next);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->continued_from(), "source");
  EXPECT_EQ(created->item_count(), 3);  // The pinned item and the last turn.
  v1::ListSummariesRequest list;
  list.set_conversation_id("source");
  auto source_chunks = service_.ListSummaries(ctx_, list);
  ASSERT_TRUE(source_chunks.ok());
  ASSERT_EQ(source_chunks->chunks_size(), 1);
  EXPECT_EQ(source_chunks->chunks(0).through_sequence(), 8);
  v1::ListItemsRequest items;
  items.set_conversation_id("next");
  auto carried = service_.ListItems(ctx_, items);
  ASSERT_TRUE(carried.ok());
  ASSERT_EQ(carried->items_size(), 3);
  EXPECT_TRUE(carried->items(0).pinned());
  EXPECT_EQ(carried->items(0).metadata().at("convstate.continued_from_sequence"), "3");
  EXPECT_EQ(carried->items(1).content(), "Deploy web-4 to eu-west-1 at 04:00 UTC.");
  EXPECT_EQ(carried->items(2).metadata().at("convstate.continued_from_sequence"), "10");
  v1::BuildContextRequest build;
  build.set_conversation_id("next");
  auto view = service_.BuildContext(ctx_, build);
  ASSERT_TRUE(view.ok());
  bool summary = false;
  for (const auto& e : view->entries()) summary |= e.section() == v1::SECTION_SUMMARY;
  EXPECT_TRUE(summary) << view->DebugString();
  next.set_conversation_id("orphan");
  next.clear_continue_from();
  EXPECT_EQ(service_.CreateConversation(ctx_, next).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace convstate
