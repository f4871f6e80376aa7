#include "tools/convstatectl/report.h"

#include "gtest/gtest.h"

namespace convstate::ctl {
namespace {

ReportData Sample() {
  ReportData d;
  d.conversation.set_conversation_id("c<1>");
  d.conversation.set_tenant_id("acme");
  d.conversation.set_model("gpt-4o");
  v1::TokenBreakdown* t = d.view.mutable_tokens();
  t->set_context_window(8000);
  t->set_system(100);
  t->set_summaries(400);
  t->set_ledger(50);
  t->set_live(2000);
  t->set_output_reserve(1000);
  t->set_total(3550);
  d.inspect.mutable_thresholds()->set_soft(5600);
  d.inspect.mutable_thresholds()->set_hard(6400);
  d.inspect.mutable_thresholds()->set_emergency(7600);
  for (int i = 1; i <= 2; ++i) {
    v1::CompactionEvent e;
    e.set_event_id(i * 10);
    e.set_event("completed");
    e.set_tier(i == 1 ? "prune" : "summarize");
    e.set_tokens_before(6000 + i);
    e.set_tokens_after(3000 + i);
    d.events.push_back(e);
  }
  v1::CompactionEvent started;
  started.set_event_id(5);
  started.set_event("started");
  started.set_tokens_before(6001);
  d.events.push_back(started);
  v1::SummaryChunk chunk;
  chunk.set_chunk_id(3);
  chunk.set_from_sequence(1);
  chunk.set_through_sequence(40);
  chunk.set_token_count(400);
  chunk.set_recall(0.9);
  v1::LedgerFact* f = chunk.add_facts();
  f->set_sequence(12);
  f->set_text("the deploy key is <b>not</b> rotated");
  v1::LedgerFact* k = chunk.add_constraints();
  k->set_sequence(2);
  k->set_text("never page before 9");
  d.chunks.push_back(chunk);
  v1::Item item;
  item.set_sequence(12);
  item.set_content("x & y");
  d.items.push_back(item);
  return d;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ReportTest, DrawsEverySectionBandAndCompaction) {
  const std::string html = RenderReport(Sample());
  EXPECT_NE(html.find("data-section=\"live\" data-tokens=\"2000\""), std::string::npos);
  EXPECT_NE(html.find("data-section=\"ledger\" data-tokens=\"50\""), std::string::npos);
  EXPECT_NE(html.find("data-section=\"summaries\" data-tokens=\"400\""), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"segment\""), 7u);
  EXPECT_EQ(Count(html, "data-band=\"soft\" data-tokens=\"5600\""), 2u);  // Bar and saw.
  // Two completed compactions, before and after each; "started" is no step.
  EXPECT_EQ(Count(html, "class=\"point\""), 4u);
  EXPECT_NE(html.find("data-event-id=\"20\" data-phase=\"before\" data-tier=\"summarize\" "
                      "data-tokens=\"6002\""),
            std::string::npos);
  EXPECT_NE(html.find("class=\"point now\" data-phase=\"now\" data-tokens=\"3550\""),
            std::string::npos);
}

TEST(ReportTest, LinksFactsToTheirItemsAndEscapesText) {
  const std::string html = RenderReport(Sample());
  EXPECT_NE(html.find("<a href=\"#item-12\">#12</a>"), std::string::npos);
  EXPECT_NE(html.find("id=\"item-12\""), std::string::npos);
  EXPECT_NE(html.find("the deploy key is &lt;b&gt;not&lt;/b&gt; rotated"), std::string::npos);
  EXPECT_NE(html.find("x &amp; y"), std::string::npos);
  EXPECT_NE(html.find("<code>c&lt;1&gt;</code>"), std::string::npos);
  EXPECT_EQ(html.find("<b>not</b>"), std::string::npos);
  // Self-contained: nothing to fetch.
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace convstate::ctl
