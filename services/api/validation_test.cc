#include "services/api/validation.h"

#include <string>

#include "gtest/gtest.h"

namespace convstate {
namespace {

TEST(ValidateTextTest, NamesFieldAndReason) {
  absl::Status s = ValidateText("items[0].content", "a\xFF", 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "items[0].content: not valid UTF-8");
  s = ValidateText("x", std::string("a\0b", 3), 100);
  EXPECT_EQ(s.message(), "x: contains a NUL character");
  s = ValidateText("x", "12345", 4);
  EXPECT_EQ(s.message(), "x: 5 bytes exceeds the limit of 4");
  EXPECT_TRUE(ValidateText("x", "1234", 4).ok());
}

TEST(ValidateIdTest, AcceptsOnlyTheDocumentedAlphabet) {
  EXPECT_TRUE(ValidateId("id", "conv_1.a:b-c").ok());
  EXPECT_EQ(ValidateId("id", "").message(), "id: required");
  EXPECT_FALSE(ValidateId("id", "has space").ok());
  EXPECT_FALSE(ValidateId("id", "slash/no").ok());
  EXPECT_FALSE(ValidateId("id", std::string(129, 'a')).ok());
  EXPECT_TRUE(ValidateId("id", std::string(128, 'a')).ok());
}

TEST(NormalizeTenantTest, EmptyIsDefault) {
  EXPECT_EQ(*NormalizeTenant(""), "default");
  EXPECT_EQ(*NormalizeTenant("acme"), "acme");
  EXPECT_EQ(NormalizeTenant("bad tenant").status().code(), absl::StatusCode::kInvalidArgument);
}

v1::NewItem Item(v1::Role role, v1::ItemKind kind) {
  v1::NewItem item;
  item.set_role(role);
  item.set_kind(kind);
  item.set_content("x");
  return item;
}

std::string Error(const v1::NewItem& item, const Limits& limits = Limits{}) {
  return std::string(ValidateNewItem("items[1]", item, limits).message());
}

TEST(ValidateNewItemTest, AcceptsEveryWellFormedKind) {
  Limits limits;
  EXPECT_TRUE(ValidateNewItem("i", Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE), limits).ok());
  EXPECT_TRUE(ValidateNewItem("i", Item(v1::ROLE_SYSTEM, v1::ITEM_KIND_MESSAGE), limits).ok());
  EXPECT_TRUE(
      ValidateNewItem("i", Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_REASONING), limits).ok());
  v1::NewItem call = Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL);
  call.set_tool_name("grep");
  call.set_tool_call_id("c1");
  EXPECT_TRUE(ValidateNewItem("i", call, limits).ok());
  v1::NewItem result = Item(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT);
  result.set_tool_call_id("c1");
  EXPECT_TRUE(ValidateNewItem("i", result, limits).ok());
}

TEST(ValidateNewItemTest, RejectsMalformedItemsNamingTheField) {
  EXPECT_EQ(Error(Item(v1::ROLE_UNSPECIFIED, v1::ITEM_KIND_MESSAGE)), "items[1].role: required");
  EXPECT_EQ(Error(Item(static_cast<v1::Role>(42), v1::ITEM_KIND_MESSAGE)),
            "items[1].role: unknown role 42");
  EXPECT_EQ(Error(Item(v1::ROLE_USER, v1::ITEM_KIND_UNSPECIFIED)), "items[1].kind: required");
  EXPECT_EQ(Error(Item(v1::ROLE_USER, static_cast<v1::ItemKind>(9))),
            "items[1].kind: unknown kind 9");
  EXPECT_EQ(Error(Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_SUMMARY_MARKER)),
            "items[1].kind: summary markers are written by the service, not by clients");
  EXPECT_EQ(Error(Item(v1::ROLE_USER, v1::ITEM_KIND_TOOL_CALL)),
            "items[1].role: a tool call must come from the assistant");
  EXPECT_EQ(Error(Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL)),
            "items[1].tool_name: required for a tool call");
  v1::NewItem no_id = Item(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT);
  EXPECT_EQ(Error(no_id), "items[1].tool_call_id: required for tool calls and tool results");
  EXPECT_EQ(Error(Item(v1::ROLE_TOOL, v1::ITEM_KIND_MESSAGE)),
            "items[1].kind: an item with role ROLE_TOOL must be a tool result");
  v1::NewItem stray = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  stray.set_tool_call_id("c9");
  EXPECT_EQ(Error(stray), "items[1].tool_call_id: only tool calls and tool results carry tool fields");
  v1::NewItem bad_text = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  bad_text.set_content("\xC3\x28");
  EXPECT_EQ(Error(bad_text), "items[1].content: not valid UTF-8");
  // The service's own metadata keys: a redaction of a continuation's
  // source follows convstate.continued_from_sequence.
  v1::NewItem reserved = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  (*reserved.mutable_metadata())["convstate.continued_from_sequence"] = "3";
  EXPECT_EQ(Error(reserved),
            "items[1].metadata[\"convstate.continued_from_sequence\"]: keys under "
            "\"convstate.\" are the service's own and may not be set");
  v1::NewItem other = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  (*other.mutable_metadata())["convstatex"] = "ok";
  EXPECT_TRUE(ValidateNewItem("items[1]", other, Limits()).ok());
}

TEST(ValidateNewItemTest, EnforcesLimits) {
  Limits limits;
  limits.max_item_bytes = 10;
  limits.max_metadata_entries = 1;
  v1::NewItem big = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  big.set_content(std::string(11, 'a'));
  EXPECT_EQ(Error(big, limits), "items[1].content: 11 bytes exceeds the limit of 10");
  v1::NewItem meta = Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE);
  (*meta.mutable_metadata())["a"] = "1";
  (*meta.mutable_metadata())["b"] = "2";
  EXPECT_EQ(Error(meta, limits), "items[1].metadata: 2 entries exceeds the limit of 1");
}

// A keep rule's pattern that would take more than kMaxKeepPatternMemory to
// compile is refused, naming the rule.
TEST(ValidatePolicyTest, PatternsPastTheirMemoryAreRefused) {
  v1::CompactionPolicy policy;
  policy.add_keep()->set_pattern("(?i)ticket [A-Z]+-[0-9]+");
  EXPECT_TRUE(ValidatePolicy("compaction_policy", policy).ok());
  policy.add_keep()->set_pattern("\\pL{100}");
  const absl::Status refused = ValidatePolicy("compaction_policy", policy);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("compaction_policy.keep[1].pattern"), std::string::npos)
      << refused.message();
}

// Each request kind's checks answer the conversation it names, tenant
// normalized, or the first field that is wrong.
TEST(ValidateRequestTest, AnswersTheKeyOrTheFirstBadField) {
  v1::GetConversationRequest get;
  get.set_conversation_id("c1");
  absl::StatusOr<ConversationKey> key = ValidateGetConversation(get);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->tenant_id, "default");
  EXPECT_EQ(key->conversation_id, "c1");
  get.clear_conversation_id();
  EXPECT_EQ(ValidateGetConversation(get).status().message(), "conversation_id: required");

  v1::CompactRequest compact;
  compact.set_conversation_id("c1");
  compact.set_mode(v1::CompactRequest::MODE_TRUNCATE);
  compact.set_dry_run(true);
  EXPECT_EQ(ValidateCompact(compact).status().message(),
            "dry_run: a truncation changes no stored state; InspectContext previews it");
  compact.set_through_sequence(4);
  EXPECT_EQ(ValidateCompact(compact).status().message(),
            "through_sequence: only with MODE_SUMMARIZE");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  EXPECT_TRUE(ValidateCompact(compact).ok());

  v1::BuildContextRequest build;
  build.set_conversation_id("c1");
  build.set_provider_reported_tokens(10);
  EXPECT_EQ(ValidateBuildContext(build, Limits()).status().message(),
            "provider_reported_tokens: only with provider_overflow set");
  build.set_provider_overflow(true);
  build.set_recall_query(std::string(kMaxRecallQueryBytes + 1, 'q'));
  EXPECT_EQ(ValidateBuildContext(build, Limits()).status().message(),
            "recall_query: at most 8192 bytes, got 8193");

  v1::ApplyCompactionRequest apply;
  apply.set_conversation_id("c1");
  apply.set_proposal_id("17");
  absl::StatusOr<ProposalRef> proposal = ValidateApplyCompaction(apply, Limits());
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  EXPECT_EQ(proposal->proposal_id, 17);
  apply.set_proposal_id("0");
  EXPECT_EQ(ValidateApplyCompaction(apply, Limits()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A continuation may leave the model to its source; a new conversation of
// its own may not.
TEST(ValidateRequestTest, CreateNeedsAModelUnlessItContinues) {
  v1::CreateConversationRequest create;
  absl::StatusOr<ConversationKey> key = ValidateCreateConversation(create, Limits());
  EXPECT_EQ(key.status().message(), "model: required");
  create.set_continue_from("c0");
  key = ValidateCreateConversation(create, Limits());
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->conversation_id, "");  // The service picks one.
  create.set_carry_recent_turns(101);
  EXPECT_EQ(ValidateCreateConversation(create, Limits()).status().message(),
            "carry_recent_turns: from 0 to 100, and only with continue_from");
}

}  // namespace
}  // namespace convstate
