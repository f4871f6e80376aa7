#include "tests/e2e_harness.h"

#include <utility>

namespace convstate::testing {

absl::StatusOr<std::unique_ptr<ServerProcess>> StartServerOn(
    const ScratchDatabase& db, const std::vector<std::string>& flags,
    const std::string& log_file) {
  std::vector<std::string> all = {"--database_url=" + db.url()};
  all.insert(all.end(), flags.begin(), flags.end());
  return ServerProcess::Start(all, absl::Seconds(60), log_file);
}

std::shared_ptr<grpc::Channel> ChannelTo(const ServerProcess& server) {
  return grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
}

std::unique_ptr<v1::ConversationState::Stub> StubFor(const ServerProcess& server) {
  return v1::ConversationState::NewStub(ChannelTo(server));
}

void E2eTest::SetUp() {
  auto db = ScratchDatabase::Create(/*migrate=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  db_ = std::move(*db);
}

void E2eTest::StartServer(const std::vector<std::string>& flags, const std::string& log_file) {
  stub_.reset();
  channel_.reset();
  server_.reset();
  auto server = StartServerOn(*db_, flags, log_file);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  channel_ = ChannelTo(*server_);
  stub_ = v1::ConversationState::NewStub(channel_);
}

grpc::Status E2eTest::Create(const std::string& id, const std::string& model,
                             const std::string& system_prompt, v1::Conversation* out) {
  v1::CreateConversationRequest req;
  req.set_conversation_id(id);
  req.set_model(model);
  req.set_system_prompt(system_prompt);
  v1::Conversation ignored;
  grpc::ClientContext ctx;
  rpc::SetDeadline(ctx);
  return stub_->CreateConversation(&ctx, req, out != nullptr ? out : &ignored);
}

grpc::Status E2eTest::Append(const std::string& id, const std::vector<v1::NewItem>& items,
                             v1::AppendTurnResponse* out) {
  v1::AppendTurnRequest req;
  req.set_conversation_id(id);
  for (const v1::NewItem& item : items) *req.add_items() = item;
  v1::AppendTurnResponse ignored;
  grpc::ClientContext ctx;
  rpc::SetDeadline(ctx);
  return stub_->AppendTurn(&ctx, req, out != nullptr ? out : &ignored);
}

grpc::Status E2eTest::Build(const std::string& id, v1::BuildContextResponse* out,
                            const std::vector<v1::NewItem>& pending) {
  v1::BuildContextRequest req;
  req.set_conversation_id(id);
  for (const v1::NewItem& item : pending) *req.add_pending_input() = item;
  grpc::ClientContext ctx;
  rpc::SetDeadline(ctx);
  return stub_->BuildContext(&ctx, req, out);
}

v1::Conversation E2eTest::Get(const std::string& id) {
  v1::GetConversationRequest req;
  req.set_conversation_id(id);
  v1::Conversation out;
  grpc::ClientContext ctx;
  rpc::SetDeadline(ctx);
  const grpc::Status s = stub_->GetConversation(&ctx, req, &out);
  EXPECT_TRUE(s.ok()) << id << ": " << s.error_message();
  return out;
}

}  // namespace convstate::testing
