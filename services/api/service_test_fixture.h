#ifndef CONVSTATE_SERVICES_API_SERVICE_TEST_FIXTURE_H_
#define CONVSTATE_SERVICES_API_SERVICE_TEST_FIXTURE_H_

// What the ConversationService tests share: two model profiles and a
// service over in-memory storage with the extractive summarizer.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "services/api/conversation_service.h"
#include "services/compaction/summarizers/extractive.h"
#include "storage/memory_storage.h"

namespace convstate {

inline constexpr char kProfiles[] = R"pb(
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

inline std::unique_ptr<ModelRegistry> Registry(const char* text) {
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

}  // namespace convstate

#endif  // CONVSTATE_SERVICES_API_SERVICE_TEST_FIXTURE_H_
