#ifndef CONVSTATE_TOOLS_CONVSTATECTL_REPORT_H_
#define CONVSTATE_TOOLS_CONVSTATECTL_REPORT_H_

#include <string>
#include <vector>

#include "convstate/v1/convstate.pb.h"

namespace convstate::ctl {

// What a report shows, as the API answered it.
struct ReportData {
  v1::Conversation conversation;
  v1::BuildContextResponse view;
  v1::InspectContextResponse inspect;
  // Every chunk, superseded ones included.
  std::vector<v1::SummaryChunk> chunks;
  std::vector<v1::CompactionEvent> events;
  std::vector<v1::Item> items;
  // When the data was read, as shown in the page.
  std::string generated_at;
};

// One self-contained HTML page (inline CSS and SVG, no script, nothing
// fetched): the window now as a stacked bar by section against the window
// and the bands; the view's tokens before and after each compaction over
// the conversation's life, by tier, with the bands; the chunks; the ledger
// facts and constraints linked to their source items; the items. Every
// drawn figure carries its number in a data- attribute (data-tokens,
// data-section, data-event-id) for checks.
std::string RenderReport(const ReportData& data);

// Whether an audit row is a compaction that moved the view (completed,
// pruned, folded, truncated): a step of the report's sawtooth.
bool IsStep(const std::string& event);

// `text` with &, <, >, " and ' escaped for HTML text and attributes.
std::string HtmlEscape(const std::string& text);

}  // namespace convstate::ctl

#endif  // CONVSTATE_TOOLS_CONVSTATECTL_REPORT_H_
