#include "tools/convstatectl/render.h"

#include "gtest/gtest.h"

namespace convstate::ctl {
namespace {

TEST(PreviewTest, KeepsShortTextOnOneLine) {
  EXPECT_EQ(Preview("a\nb\t c\r\n", 20), "a b c");
  EXPECT_EQ(Preview("  lead", 20), "lead");
  EXPECT_EQ(Preview(std::string("x\x01y", 3), 20), "xy");
}

TEST(PreviewTest, CutsAtCharactersNotBytes) {
  // Six two-byte characters; room for four: one and the dots.
  EXPECT_EQ(Preview("\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9", 4), "\u00e9...");
  EXPECT_EQ(Preview("\u00e9\u00e9\u00e9\u00e9", 4), "\u00e9\u00e9\u00e9\u00e9");
  EXPECT_EQ(Preview("abcdefgh", 5), "ab...");
  EXPECT_EQ(Preview("\U0001F600\U0001F600\U0001F600\U0001F600\U0001F600", 4), "\U0001F600...");
}

TEST(TableTest, PadsColumnsByCharacters) {
  EXPECT_EQ(Table({{"a", "bb"}, {"\u00e9\u00e9\u00e9", "c"}}), "a    bb\n\u00e9\u00e9\u00e9  c\n");
}

TEST(SectionBarsTest, BarsAreShareOfTheWindow) {
  v1::TokenBreakdown t;
  t.set_context_window(1000);
  t.set_live(500);
  t.set_system(10);
  t.set_total(510);
  const std::string bars = SectionBars(t, 10);
  EXPECT_NE(bars.find("live       500     50.0%   #####\n"), std::string::npos) << bars;
  EXPECT_NE(bars.find("system     10      1.0%    #\n"), std::string::npos) << bars;
  EXPECT_NE(bars.find("total      510     51.0%   of 1000"), std::string::npos) << bars;
}

TEST(ViewTableTest, OneRowPerEntry) {
  v1::BuildContextResponse view;
  auto* e = view.add_entries();
  e->set_section(v1::SECTION_LIVE);
  e->set_role(v1::ROLE_USER);
  e->set_kind(v1::ITEM_KIND_MESSAGE);
  e->set_sequence(7);
  e->set_token_count(12);
  e->set_content("hello\nthere");
  auto* s = view.add_entries();
  s->set_section(v1::SECTION_SYSTEM);
  s->set_role(v1::ROLE_SYSTEM);
  s->set_kind(v1::ITEM_KIND_MESSAGE);
  s->set_content("You are kind.");
  EXPECT_EQ(ViewTable(view),
            "section  role    kind     seq  tokens  preview\n"
            "live     user    message  7    12      hello there\n"
            "system   system  message  -    0       You are kind.\n");
}

}  // namespace
}  // namespace convstate::ctl
