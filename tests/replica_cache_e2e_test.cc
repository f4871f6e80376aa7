// Two replicas of the real server on one PostgreSQL, each keeping the
// contexts it read between calls: whatever one replica changes, the other's
// next BuildContext shows, with no wait. Every step compares the two
// replicas' whole views, which must be equal.

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

}  // namespace
}  // namespace convstate
