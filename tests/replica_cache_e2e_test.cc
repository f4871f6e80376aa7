// Two replicas of the real server on one PostgreSQL, each keeping the
// contexts it read between calls: whatever one replica changes, the other's
// next BuildContext shows, with no wait. Every step compares the two
// replicas' whole views, which must be equal. And each keeping a copy of
// the histories it recalls from: an erasure through one replica is never
// recalled by the other.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tools/rpc/rpc_helpers.h"
#include "tests/server_process.h"

namespace convstate {
namespace {

using rpc::Message;
using testing::ScratchDatabase;
using testing::ServerProcess;
using rpc::SetDeadline;
using v1::ConversationState;

class ReplicaCacheE2eTest : public testing::E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    // No background compaction: every change below is one this test makes.
    const std::vector<std::string> flags = {"--background_compaction=false", "--otel_disabled"};
    for (auto* replica : {&a_, &b_}) {
      auto server = testing::StartServerOn(*db_, flags);
      ASSERT_TRUE(server.ok()) << server.status();
      replica->server = std::move(*server);
      replica->stub = testing::StubFor(*replica->server);
    }
  }

  struct Replica {
    std::unique_ptr<ServerProcess> server;
    std::unique_ptr<ConversationState::Stub> stub;
  };

  static grpc::Status Build(Replica& r, v1::BuildContextResponse* out) {
    v1::BuildContextRequest req;
    req.set_conversation_id("shared");
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    return r.stub->BuildContext(&ctx, req, out);
  }

  // Both replicas' views, twice each (the second from what each kept);
  // all four equal. Returns A's.
  v1::BuildContextResponse SameOnBoth() {
    v1::BuildContextResponse first;
    EXPECT_TRUE(Build(a_, &first).ok());
    for (Replica* r : {&a_, &b_, &b_, &a_}) {
      v1::BuildContextResponse again;
      grpc::Status s = Build(*r, &again);
      EXPECT_TRUE(s.ok()) << s.error_message();
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first, again))
          << "replica " << (r == &a_ ? "A" : "B") << " differs:\n"
          << again.DebugString() << "\nfrom\n"
          << first.DebugString();
    }
    return first;
  }

  static void Append(Replica& r, const std::string& user, const std::string& assistant) {
    v1::AppendTurnRequest req;
    req.set_conversation_id("shared");
    *req.add_items() = Message(v1::ROLE_USER, user);
    *req.add_items() = Message(v1::ROLE_ASSISTANT, assistant);
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = r.stub->AppendTurn(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static void Create(Replica& r, const std::string& system_prompt) {
    v1::CreateConversationRequest req;
    req.set_conversation_id("shared");
    req.set_model("gpt-4o");
    req.set_system_prompt(system_prompt);
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = r.stub->CreateConversation(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static bool Shows(const v1::BuildContextResponse& view, const std::string& text) {
    for (const v1::ContextEntry& e : view.entries()) {
      if (e.content().find(text) != std::string::npos) return true;
    }
    return false;
  }

  Replica a_;
  Replica b_;
};

TEST_F(ReplicaCacheE2eTest, WhatOneReplicaChangesTheOtherShowsOnItsNextCall) {
  Create(a_, "You are the on-call assistant.");
  for (int i = 0; i < 6; ++i) {
    Append(a_, absl::StrCat("Deploy web-", i, " to eu-west-1 at 0", i, ":00 UTC."),
           "That should be safe to do now; I will watch the error rate while it rolls out.");
  }
  v1::BuildContextResponse view = SameOnBoth();
  EXPECT_EQ(view.version(), 6);

  // An append through B.
  Append(b_, "Ticket INC-7731 is about checkout latency.", "Noted INC-7731.");
  view = SameOnBoth();
  EXPECT_EQ(view.version(), 7);
  EXPECT_TRUE(Shows(view, "INC-7731"));

  // A pin through B moves the compaction version; A's view has it.
  v1::PinItemRequest pin;
  pin.set_conversation_id("shared");
  pin.set_sequence(1);
  v1::Item pinned;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(b_.stub->PinItem(&ctx, pin, &pinned).ok());
  }
  const int64_t pinned_at = view.compaction_version() + 1;
  view = SameOnBoth();
  EXPECT_EQ(view.compaction_version(), pinned_at);

  // A summary written through B replaces items in A's view.
  v1::CompactRequest compact;
  compact.set_conversation_id("shared");
  compact.set_mode(v1::CompactRequest::MODE_SUMMARIZE);
  v1::CompactResponse compacted;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = b_.stub->Compact(&ctx, compact, &compacted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_GT(compacted.summary_chunk_id(), 0);
  view = SameOnBoth();
  bool summary = false;
  for (const v1::ContextEntry& e : view.entries()) {
    summary = summary || e.section() == v1::SECTION_SUMMARY;
  }
  EXPECT_TRUE(summary);
  EXPECT_EQ(view.compaction_version(), pinned_at + 1);

  // A new system prompt through B.
  v1::UpdateConversationRequest update;
  update.set_conversation_id("shared");
  update.set_system_prompt("You are the day-shift assistant.");
  {
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = b_.stub->UpdateConversation(&ctx, update, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  view = SameOnBoth();
  EXPECT_TRUE(Shows(view, "day-shift"));
  EXPECT_FALSE(Shows(view, "on-call assistant"));

  // Deleted through B, and created again under the same id: A never shows
  // the old conversation.
  v1::DeleteConversationRequest del;
  del.set_conversation_id("shared");
  {
    v1::DeleteConversationResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(b_.stub->DeleteConversation(&ctx, del, &out).ok());
  }
  v1::BuildContextResponse gone;
  EXPECT_EQ(Build(a_, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  Create(b_, "You are a new conversation.");
  Append(b_, "First question of the new one.", "First answer.");
  view = SameOnBoth();
  EXPECT_EQ(view.version(), 1);
  EXPECT_TRUE(Shows(view, "First question"));
  EXPECT_FALSE(Shows(view, "INC-7731"));
  EXPECT_FALSE(Shows(view, "web-0"));
}

TEST_F(ReplicaCacheE2eTest, AnErasureThroughOneReplicaIsNeverRecalledByTheOther) {
  {
    v1::CreateConversationRequest req;
    req.set_conversation_id("shared");
    req.set_model("gpt-4o");
    req.mutable_profile_overrides()->set_context_window(8192);
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    ASSERT_TRUE(a_.stub->CreateConversation(&ctx, req, &out).ok());
  }
  // Tool outputs of about 500 tokens; the first holds the secret, on a
  // line that does not name what it belongs to.
  auto tool_turn = [this](const std::string& question, const std::string& path,
                          const std::string& line, int n) {
    v1::AppendTurnRequest req;
    req.set_conversation_id("shared");
    *req.add_items() = Message(v1::ROLE_USER, question);
    v1::NewItem* call = req.add_items();
    call->set_role(v1::ROLE_ASSISTANT);
    call->set_kind(v1::ITEM_KIND_TOOL_CALL);
    call->set_tool_name("read_file");
    call->set_tool_call_id(absl::StrCat("c", n));
    call->set_content(absl::StrCat("{\"path\": \"", path, "\"}"));
    v1::NewItem* result = req.add_items();
    result->set_role(v1::ROLE_TOOL);
    result->set_kind(v1::ITEM_KIND_TOOL_RESULT);
    result->set_tool_name("read_file");
    result->set_tool_call_id(absl::StrCat("c", n));
    std::string body;
    for (int i = 0; i < 40; ++i) absl::StrAppend(&body, "setting_", i, " = value ", i * 7, "\n");
    result->set_content(absl::StrCat(body, line, "\n", body));
    *req.add_items() = Message(v1::ROLE_ASSISTANT, "Read it.");
    v1::AppendTurnResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = a_.stub->AppendTurn(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  };
  tool_turn("Read the vault file of the billing export.", "vault/billing-export.env",
            "VAULT_PASSPHRASE=quartz-heron-5521", 0);
  for (int i = 1; i <= 8; ++i) {
    tool_turn(absl::StrCat("Read node pool ", i, "'s settings."),
              absl::StrCat("pools/pool-", i, ".ini"), absl::StrCat("size = ", i), i);
  }
  // Pruned through B: the secret's output leaves the view (and stays
  // behind the prune boundary when it is erased).
  v1::CompactRequest compact;
  compact.set_conversation_id("shared");
  compact.set_mode(v1::CompactRequest::MODE_PRUNE_ONLY);
  v1::CompactResponse compacted;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = b_.stub->Compact(&ctx, compact, &compacted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  v1::BuildContextResponse pruned;
  ASSERT_TRUE(Build(a_, &pruned).ok());
  ASSERT_FALSE(Shows(pruned, "quartz-heron-5521"));
  auto ask = [](Replica& r) {
    v1::BuildContextRequest req;
    req.set_conversation_id("shared");
    *req.add_pending_input() =
        Message(v1::ROLE_USER, "What is the billing export's vault passphrase again?");
    v1::BuildContextResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = r.stub->BuildContext(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::string recalled;
    for (const v1::ContextEntry& e : out.entries()) {
      if (e.section() == v1::SECTION_RECALLED) recalled += e.content();
    }
    return recalled;
  };
  // Recalled on A: the first time from PostgreSQL's search, then from the
  // copy A makes meanwhile.
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(ask(a_).find("quartz-heron-5521"), std::string::npos) << i;
    absl::SleepFor(absl::Milliseconds(100));
  }
  v1::RedactItemsRequest redact;
  redact.set_conversation_id("shared");
  redact.add_sequences(3);
  redact.set_reason("erasure request");
  {
    v1::RedactItemsResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    grpc::Status s = b_.stub->RedactItems(&ctx, redact, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  for (int i = 0; i < 3; ++i) {
    const std::string recalled = ask(a_);
    EXPECT_EQ(recalled.find("quartz-heron-5521"), std::string::npos) << recalled;
    v1::BuildContextResponse view;
    ASSERT_TRUE(Build(a_, &view).ok());
    EXPECT_FALSE(Shows(view, "quartz-heron-5521"));
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace
}  // namespace convstate
