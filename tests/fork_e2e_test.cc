// Forks through a client that knows nothing but what reflection tells it
// (`buf curl`, as grpcurl would call them), against a real server and
// PostgreSQL: a fork at an earlier item serves the view its source had
// then (same view_hash as GetContextAt), the two go on apart, ListForks
// names it, and erasing a shared item leaves its text in neither, even
// when the erasure comes while a fork of a fork is being made.

#include <pqxx/pqxx>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convstate/v1/convstate.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/buf_client.h"
#include "tests/e2e_harness.h"
#include "tests/server_process.h"
#include "tools/rpc/rpc_helpers.h"

namespace convstate {
namespace {

using testing::CurlConversationState;

constexpr char kSecret[] = "sk-live-51HdZ9qTtokenXq7";

// A deploy tool's output of 60 lines (JSON-escaped newlines).
std::string Log() {
  std::string out;
  for (int i = 1; i <= 60; ++i) {
    absl::StrAppend(&out, "2026-11-27T10:", 10 + i % 50, ":00Z pod payments-", i,
                    " pulled image, started container, readiness probe passed\\n");
  }
  return out;
}

class ForkE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("CONVSTATE_BUF"), nullptr) << "CONVSTATE_BUF is not set: run tools/test";
    auto db = testing::ScratchDatabase::Create(/*migrate=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    // No background compaction: views change only when the test asks.
    auto server = testing::StartServerOn(*db_, {"--background_compaction=false"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // The answer of `method` to `json`, parsed into `out`; fails the test if
  // the call fails.
  void Call(const std::string& method, const std::string& json, google::protobuf::Message* out) {
    const testing::BufOutput r = CurlConversationState(server_->address(), method, json, true);
    ASSERT_EQ(r.exit_code, 0) << method << ": " << r.out;
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, out, lenient).ok()) << r.out;
  }

  std::string Raw(const std::string& method, const std::string& json) {
    const testing::BufOutput r = CurlConversationState(server_->address(), method, json, true);
    EXPECT_EQ(r.exit_code, 0) << method << ": " << r.out;
    return r.out;
  }

  std::vector<std::string> Contents(const std::string& conversation) {
    v1::ListItemsResponse items;
    Call("ListItems", absl::StrCat(R"({"conversation_id": ")", conversation,
                                   R"(", "page_size": 1000})"),
         &items);
    std::vector<std::string> out;
    for (const v1::Item& item : items.items()) out.push_back(item.content());
    return out;
  }

  std::unique_ptr<testing::ScratchDatabase> db_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(ForkE2eTest, AForkServesItsSourcesPastViewGoesOnApartAndShareErasures) {
  v1::Conversation created;
  Call("CreateConversation", R"({"conversation_id": "src", "model": "gpt-4o",
       "system_prompt": "You are a release engineer.", "profile_overrides": {"recent_turns": 1}})",
       &created);
  v1::AppendTurnResponse appended;
  Call("AppendTurn", absl::StrCat(R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "Deploy payments v2.3 to prod."},
       {"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_TOOL_CALL", "tool_name": "shell",
        "tool_call_id": "c1", "content": "{\"cmd\": \"deploy payments v2.3\"}"},
       {"role": "ROLE_TOOL", "kind": "ITEM_KIND_TOOL_RESULT", "tool_name": "shell",
        "tool_call_id": "c1", "content": ")", Log(), R"(rollout ok; api key )", kSecret,
                                  R"( written to the vault"},
       {"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_MESSAGE", "content": "Deployed v2.3."}]})"),
       &appended);  // Items 1-4, version 1.
  Call("AppendTurn", R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "Now scale it to 6 replicas."},
       {"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_MESSAGE", "content": "Scaled to 6."}]})",
       &appended);  // Items 5-6, version 2.
  v1::CompactResponse compacted;
  Call("Compact", R"({"conversation_id": "src", "mode": "MODE_SUMMARIZE", "through_sequence": 4})",
       &compacted);
  ASSERT_GT(compacted.summary_chunk_id(), 0) << compacted.DebugString();
  v1::BuildContextResponse served;
  Call("BuildContext", R"({"conversation_id": "src"})", &served);
  Call("AppendTurn", R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "Roll back to v2.2."},
       {"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_MESSAGE", "content": "Rolled back."}]})",
       &appended);  // Version 3.

  v1::BuildContextResponse then;
  Call("GetContextAt", R"({"conversation_id": "src", "version": 2})", &then);
  EXPECT_EQ(then.view_hash(), served.view_hash());
  v1::Conversation fork;
  Call("ForkConversation",
       R"({"conversation_id": "branch", "source_conversation_id": "src", "at_sequence": 6})",
       &fork);
  EXPECT_EQ(fork.forked_from().conversation_id(), "src");
  EXPECT_EQ(fork.forked_from().sequence(), 6);
  v1::BuildContextResponse first;
  Call("BuildContext", R"({"conversation_id": "branch"})", &first);
  EXPECT_EQ(first.view_hash(), then.view_hash());
  ASSERT_EQ(first.entries_size(), then.entries_size());
  for (int i = 0; i < first.entries_size(); ++i) {
    EXPECT_EQ(first.entries(i).content(), then.entries(i).content()) << i;
    EXPECT_EQ(first.entries(i).section(), then.entries(i).section()) << i;
  }

  // Each goes on alone.
  Call("AppendTurn", R"({"conversation_id": "branch", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "branch only: try v2.4"}]})",
       &appended);
  Call("AppendTurn", R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "source only: done"}]})",
       &appended);
  const std::vector<std::string> in_branch = Contents("branch");
  const std::vector<std::string> in_source = Contents("src");
  EXPECT_EQ(in_branch.back(), "branch only: try v2.4");
  EXPECT_EQ(in_source.back(), "source only: done");
  for (const std::string& c : in_source) EXPECT_EQ(c.find("branch only"), std::string::npos);
  for (const std::string& c : in_branch) {
    EXPECT_EQ(c.find("source only"), std::string::npos);
    EXPECT_EQ(c.find("Rolled back"), std::string::npos);
  }
  v1::ListForksResponse forks;
  Call("ListForks", R"({"conversation_id": "src"})", &forks);
  ASSERT_EQ(forks.forks_size(), 1);
  EXPECT_EQ(forks.forks(0).conversation_id(), "branch");

  // A rewind of the fork to where it began: its own turn lives on in the
  // fork the rewind names, and its view is its source's past one again.
  v1::RewindConversationResponse rewound;
  const std::string rewind = R"({"conversation_id": "branch", "to_sequence": 6,
       "abandoned_conversation_id": "branch-rest", "idempotency_key": "rw-1"})";
  Call("RewindConversation", rewind, &rewound);
  EXPECT_FALSE(rewound.replayed());
  EXPECT_EQ(rewound.conversation().last_sequence(), 6);
  EXPECT_EQ(rewound.abandoned().conversation_id(), "branch-rest");
  EXPECT_EQ(rewound.abandoned().forked_from().conversation_id(), "branch");
  EXPECT_EQ(Contents("branch").size(), 6u);
  EXPECT_EQ(Contents("branch-rest").back(), "branch only: try v2.4");
  Call("BuildContext", R"({"conversation_id": "branch"})", &first);
  EXPECT_EQ(first.view_hash(), then.view_hash());
  Call("RewindConversation", rewind, &rewound);
  EXPECT_TRUE(rewound.replayed());
  EXPECT_EQ(Contents("branch").size(), 6u);

  // Erasing the shared tool result in the source erases every copy.
  v1::RedactItemsResponse redacted;
  Call("RedactItems", R"({"conversation_id": "src", "sequences": [3], "reason": "leaked key"})",
       &redacted);
  for (const char* conversation : {"src", "branch", "branch-rest"}) {
    SCOPED_TRACE(conversation);
    for (const std::string& c : Contents(conversation)) {
      EXPECT_EQ(c.find(kSecret), std::string::npos) << c;
    }
    const std::string id = absl::StrCat(R"({"conversation_id": ")", conversation, R"("})");
    for (const char* method : {"BuildContext", "ListSummaries", "ListCompactionEvents"}) {
      EXPECT_EQ(Raw(method, id).find(kSecret), std::string::npos) << method;
    }
    const std::string search = Raw(
        "SearchHistory", absl::StrCat(R"({"conversation_id": ")", conversation,
                                      R"(", "query": "which api key was written to the vault?"})"));
    EXPECT_EQ(search.find(kSecret), std::string::npos) << search;
  }
}

// An erasure that comes while a fork of a fork of the erased conversation
// is being made waits for it, then reaches it: the fork holds its source
// while it copies (FOR SHARE), the erasure holds every conversation of
// the family and reads the family again once it has them. The fork is
// held inside its transaction, after it took its source, by a row the
// test inserts under the fork's name and does not commit, so the erasure
// reads the family while the fork is under way on every run, not by
// timing.
TEST_F(ForkE2eTest, AnErasureDuringAForkOfAForkWaitsForItAndReachesIt) {
  v1::Conversation created;
  Call("CreateConversation", R"({"conversation_id": "src", "model": "gpt-4o"})", &created);
  v1::AppendTurnResponse appended;
  Call("AppendTurn", absl::StrCat(R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "Rotate the payments key."},
       {"role": "ROLE_ASSISTANT", "kind": "ITEM_KIND_MESSAGE", "content": "New key )", kSecret,
                                  R"( is live."}]})"),
       &appended);
  Call("AppendTurn", R"({"conversation_id": "src", "items": [
       {"role": "ROLE_USER", "kind": "ITEM_KIND_MESSAGE", "content": "Thanks."}]})",
       &appended);
  v1::Conversation fork;
  Call("ForkConversation", R"({"conversation_id": "child", "source_conversation_id": "src"})",
       &fork);

  auto lock_waiters = [&] {
    return *db_->QueryValue(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = "
        "current_database()");
  };
  // The row: the child's, under the grandchild's name and key.
  const std::string columns = *db_->QueryValue(
      "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) "
      "FROM information_schema.columns WHERE table_schema = current_schema() "
      "AND table_name = 'conversations' AND column_name NOT IN ('conv_key', 'conversation_id')");
  auto holder = std::make_unique<pqxx::connection>(db_->url());
  auto hold = std::make_unique<pqxx::work>(*holder);
  hold->exec(absl::StrCat("INSERT INTO conversations (conv_key, conversation_id, ", columns,
                          ") SELECT conversation_key(tenant_id, 'grandchild'), 'grandchild', ",
                          columns, " FROM conversations WHERE conversation_id = 'child'"));
  std::string forked, erased;
  std::thread grandchild([&] {
    forked = Raw("ForkConversation",
                 R"({"conversation_id": "grandchild", "source_conversation_id": "child"})");
  });
  ASSERT_TRUE(rpc::WaitUntil([&] { return lock_waiters() == "1"; }))
      << "the fork never waited for the row";
  std::thread erasure([&] {
    erased = Raw("RedactItems",
                 R"({"conversation_id": "src", "sequences": [2], "reason": "leaked key"})");
  });
  // The erasure waits for the fork (on "child", which the fork holds).
  const bool waited = rpc::WaitUntil([&] { return lock_waiters() == "2"; });
  hold->abort();
  hold.reset();
  holder.reset();
  grandchild.join();
  erasure.join();
  EXPECT_TRUE(waited) << "the erasure did not wait for the fork";
  EXPECT_NE(forked.find("grandchild"), std::string::npos) << forked;
  EXPECT_NE(erased.find("ITEM_KIND_MESSAGE"), std::string::npos) << erased;
  for (const char* conversation : {"src", "child", "grandchild"}) {
    SCOPED_TRACE(conversation);
    const std::vector<std::string> contents = Contents(conversation);
    ASSERT_EQ(contents.size(), 3u);
    for (const std::string& c : contents) EXPECT_EQ(c.find(kSecret), std::string::npos) << c;
    const std::string id = absl::StrCat(R"({"conversation_id": ")", conversation, R"("})");
    EXPECT_EQ(Raw("BuildContext", id).find(kSecret), std::string::npos);
  }
}

}  // namespace
}  // namespace convstate
