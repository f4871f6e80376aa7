#include "services/api/wire_check.h"

#include "convstate/v1/convstate.pb.h"
#include "gtest/gtest.h"

namespace convstate {
namespace {

// Serializes `req` after planting `bad` bytes in the content of item `index`.
// Proto3 serialization does not check UTF-8 in release builds, which is how
// a buggy client sends it too.
std::string WireWithBadContent(v1::AppendTurnRequest req, int index, const std::string& bad) {
  req.mutable_items(index)->set_content(bad);
  std::string wire;
  req.SerializeToString(&wire);
  return wire;
}

TEST(FindInvalidUtf8Test, PointsAtTheRepeatedFieldAndIndex) {
  v1::AppendTurnRequest req;
  req.set_conversation_id("c");
  for (int i = 0; i < 3; ++i) req.add_items()->set_content("fine");
  const std::string wire = WireWithBadContent(req, 2, "bad\xFF");
  EXPECT_EQ(FindInvalidUtf8(v1::AppendTurnRequest::descriptor(), wire), "items[2].content");
  // The real parser refuses the same bytes, without saying where.
  v1::AppendTurnRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire));
}

TEST(FindInvalidUtf8Test, FindsTopLevelAndMapFields) {
  v1::CreateConversationRequest req;
  req.set_system_prompt("\xC0\xAF");
  std::string wire;
  req.SerializeToString(&wire);
  EXPECT_EQ(FindInvalidUtf8(v1::CreateConversationRequest::descriptor(), wire), "system_prompt");

  v1::CreateConversationRequest meta;
  (*meta.mutable_metadata())["k"] = "\xED\xA0\x80";
  meta.SerializeToString(&wire);
  EXPECT_EQ(FindInvalidUtf8(v1::CreateConversationRequest::descriptor(), wire),
            "metadata.value");
}

TEST(FindInvalidUtf8Test, CleanOrGarbledInputFindsNothing) {
  v1::AppendTurnRequest req;
  req.add_items()->set_content("\xE4\xBD\xA0\xE5\xA5\xBD");
  std::string wire;
  req.SerializeToString(&wire);
  EXPECT_EQ(FindInvalidUtf8(v1::AppendTurnRequest::descriptor(), wire), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8(v1::AppendTurnRequest::descriptor(), "\x1a\xff\xff"), std::nullopt);
}

}  // namespace
}  // namespace convstate
