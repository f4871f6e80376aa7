#include "tools/convstatectl/report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/convstatectl/render.h"

namespace convstate::ctl {
namespace {

struct SectionStyle {
  const char* name;
  const char* color;
};

// The window's sections in the order a view lays them out, and the reserve.
constexpr SectionStyle kSections[] = {
    {"system", "#4e79a7"},  {"ledger", "#f28e2b"}, {"pinned", "#e15759"},
    {"summaries", "#76b7b2"}, {"live", "#59a14f"},  {"pending", "#edc948"},
    {"reserve", "#bab0ac"}};

int64_t SectionTokens(const v1::TokenBreakdown& t, const std::string& name) {
  if (name == "system") return t.system();
  if (name == "ledger") return t.ledger();
  if (name == "pinned") return t.pinned();
  if (name == "summaries") return t.summaries();
  if (name == "live") return t.live();
  if (name == "pending") return t.pending();
  return t.output_reserve();
}

struct BandLine {
  const char* name;
  int64_t tokens;
  const char* color;
};

std::vector<BandLine> Bands(const v1::InspectContextResponse& inspect) {
  std::vector<BandLine> out;
  const v1::BandThresholds& b = inspect.thresholds();
  if (b.soft() > 0) out.push_back({"soft", b.soft(), "#d4a017"});
  if (b.hard() > 0) out.push_back({"hard", b.hard(), "#e8731c"});
  if (b.emergency() > 0) out.push_back({"emergency", b.emergency(), "#c0392b"});
  return out;
}

constexpr char kStyle[] = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px 32px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta span { margin-right: 18px; }
table { border-collapse: collapse; margin-top: 8px; }
th, td { text-align: left; padding: 3px 10px; border-bottom: 1px solid #eee; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.superseded { color: #999; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
.legend span { margin-right: 14px; }
code { font-size: 13px; }
:target { background: #fff3bf; }
)";

std::string Attr(const std::string& s) { return HtmlEscape(s); }

std::string WindowBar(const ReportData& d) {
  const v1::TokenBreakdown& t = d.view.tokens();
  const double width = 960, bar_y = 30, bar_h = 44;
  const int64_t window = std::max<int64_t>(t.context_window(), 1);
  int64_t used = 0;
  for (const SectionStyle& s : kSections) used += SectionTokens(t, s.name);
  const double scale = width / static_cast<double>(std::max(window, used));
  std::string svg = absl::StrFormat(
      "<svg id=\"window\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"110\" "
      "viewBox=\"0 0 %.0f 110\" role=\"img\" aria-label=\"the window by section\">\n",
      width + 20, width + 20);
  absl::StrAppendFormat(&svg,
                        "<rect class=\"window\" data-tokens=\"%d\" x=\"10\" y=\"%.0f\" width=\"%.1f\" "
                        "height=\"%.0f\" fill=\"#f6f6f6\" stroke=\"#888\"/>\n",
                        t.context_window(), bar_y, window * scale, bar_h);
  double x = 10;
  for (const SectionStyle& s : kSections) {
    const int64_t tokens = SectionTokens(t, s.name);
    const double w = tokens * scale;
    absl::StrAppendFormat(&svg,
                          "<rect class=\"segment\" data-section=\"%s\" data-tokens=\"%d\" "
                          "x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"%s>"
                          "<title>%s: %d tokens</title></rect>\n",
                          s.name, tokens, x, bar_y, w, bar_h, s.color,
                          std::string(s.name) == "reserve" ? " fill-opacity=\"0.6\"" : "", s.name,
                          tokens);
    x += w;
  }
  for (const BandLine& b : Bands(d.inspect)) {
    const double bx = 10 + b.tokens * scale;
    absl::StrAppendFormat(&svg,
                          "<line class=\"band\" data-band=\"%s\" data-tokens=\"%d\" x1=\"%.2f\" "
                          "y1=\"20\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\" "
                          "stroke-dasharray=\"4 3\"/>\n"
                          "<text x=\"%.2f\" y=\"14\" font-size=\"11\" text-anchor=\"middle\" "
                          "fill=\"%s\">%s %d</text>\n",
                          b.name, b.tokens, bx, bx, bar_y + bar_h + 8, b.color, bx, b.color, b.name,
                          b.tokens);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"10\" y=\"100\" font-size=\"12\">0</text>"
                        "<text x=\"%.1f\" y=\"100\" font-size=\"12\" text-anchor=\"end\">window "
                        "%d</text>\n</svg>\n",
                        10 + window * scale, t.context_window());
  std::string legend = "<p class=\"legend\">";
  for (const SectionStyle& s : kSections) {
    absl::StrAppend(&legend, "<span><i class=\"swatch\" style=\"background:", s.color, "\"></i>",
                    s.name, " ", SectionTokens(t, s.name), "</span>");
  }
  absl::StrAppend(&legend, "</p>\n");
  return svg + legend;
}

}  // namespace

bool IsStep(const std::string& event) {
  return event == "completed" || event == "pruned" || event == "folded" || event == "truncated";
}

namespace {

// The compactions that moved the view, in order.
std::vector<const v1::CompactionEvent*> Steps(const std::vector<v1::CompactionEvent>& events) {
  std::vector<const v1::CompactionEvent*> out;
  for (const v1::CompactionEvent& e : events) {
    if (IsStep(e.event()) && e.tokens_before() > 0) out.push_back(&e);
  }
  return out;
}

// A color per tier of the API's CompactionTier (by its number, so that a
// tier added there gets one), and another for what no tier names.
const char* TierColor(const std::string& tier) {
  static constexpr const char* kPalette[] = {"#9c755f", "#59a14f", "#4e79a7", "#76b7b2",
                                             "#e15759", "#f28e2b", "#b07aa1", "#edc948"};
  v1::CompactionTier value = v1::COMPACTION_TIER_UNSPECIFIED;
  if (!v1::CompactionTier_Parse("COMPACTION_TIER_" + absl::AsciiStrToUpper(tier), &value)) {
    return kPalette[0];
  }
  return kPalette[1 + (static_cast<int>(value) - 1) % (std::size(kPalette) - 1)];
}

std::string Sawtooth(const ReportData& d) {
  const std::vector<const v1::CompactionEvent*> steps = Steps(d.events);
  const double left = 60, top = 16, plot_w = 900, plot_h = 260;
  int64_t top_tokens = std::max<int64_t>(d.view.tokens().context_window(), 1);
  for (const auto* s : steps) top_tokens = std::max(top_tokens, s->tokens_before());
  top_tokens = std::max(top_tokens, d.view.tokens().total());
  auto y = [&](int64_t tokens) { return top + plot_h - plot_h * tokens / double(top_tokens); };
  const size_t slots = steps.size() + 1;  // Each compaction, then now.
  auto x = [&](size_t i) { return left + plot_w * (i + 0.5) / double(slots); };
  std::string svg = absl::StrFormat(
      "<svg id=\"sawtooth\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"view tokens over the conversation's "
      "life\">\n",
      left + plot_w + 20, top + plot_h + 40, left + plot_w + 20, top + plot_h + 40);
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\"/>"
                        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\"/>\n",
                        left, top, left, top + plot_h, left, top + plot_h, left + plot_w,
                        top + plot_h);
  for (int64_t tick : {int64_t{0}, top_tokens / 2, top_tokens}) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%d"
                          "</text>\n",
                          left - 6, y(tick) + 4, tick);
  }
  const int64_t window = d.view.tokens().context_window();
  absl::StrAppendFormat(&svg,
                        "<line class=\"band\" data-band=\"window\" data-tokens=\"%d\" x1=\"%.0f\" "
                        "y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"#888\"/>\n",
                        window, left, y(window), left + plot_w, y(window));
  for (const BandLine& b : Bands(d.inspect)) {
    absl::StrAppendFormat(&svg,
                          "<line class=\"band\" data-band=\"%s\" data-tokens=\"%d\" x1=\"%.0f\" "
                          "y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"%s\" "
                          "stroke-dasharray=\"4 3\"/><text x=\"%.0f\" y=\"%.2f\" font-size=\"11\" "
                          "fill=\"%s\">%s</text>\n",
                          b.name, b.tokens, left, y(b.tokens), left + plot_w, y(b.tokens),
                          b.color, left + plot_w - 60, y(b.tokens) - 3, b.color, b.name);
  }
  // The saw: up to each compaction's "before", down to its "after".
  std::string points;
  for (size_t i = 0; i < steps.size(); ++i) {
    absl::StrAppendFormat(&points, "%.1f,%.1f %.1f,%.1f ", x(i), y(steps[i]->tokens_before()),
                          x(i), y(steps[i]->tokens_after()));
  }
  absl::StrAppendFormat(&points, "%.1f,%.1f", x(steps.size()), y(d.view.tokens().total()));
  absl::StrAppendFormat(&svg,
                        "<polyline points=\"%s\" fill=\"none\" stroke=\"#555\" "
                        "stroke-width=\"1.5\"/>\n",
                        points);
  for (size_t i = 0; i < steps.size(); ++i) {
    const v1::CompactionEvent& s = *steps[i];
    for (const auto& [phase, tokens] :
         {std::pair<const char*, int64_t>{"before", s.tokens_before()},
          {"after", s.tokens_after()}}) {
      absl::StrAppendFormat(&svg,
                            "<circle class=\"point\" data-event-id=\"%d\" data-phase=\"%s\" "
                            "data-tier=\"%s\" data-tokens=\"%d\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" "
                            "fill=\"%s\"><title>event %d, %s, %s: %d tokens</title></circle>\n",
                            s.event_id(), phase, Attr(s.tier()), tokens, x(i), y(tokens),
                            TierColor(s.tier()), s.event_id(), Attr(s.tier()), phase, tokens);
    }
  }
  absl::StrAppendFormat(&svg,
                        "<circle class=\"point now\" data-phase=\"now\" data-tokens=\"%d\" "
                        "cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#222\"><title>now: %d tokens"
                        "</title></circle>\n"
                        "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">now"
                        "</text>\n",
                        d.view.tokens().total(), x(steps.size()), y(d.view.tokens().total()),
                        d.view.tokens().total(), x(steps.size()), top + plot_h + 16);
  absl::StrAppend(&svg, "</svg>\n");
  std::string legend = "<p class=\"legend\">";
  std::set<std::string> tiers;
  for (const auto* s : steps) tiers.insert(s->tier());
  for (const std::string& tier : tiers) {
    absl::StrAppend(&legend, "<span><i class=\"swatch\" style=\"background:", TierColor(tier),
                    "\"></i>", HtmlEscape(tier), "</span>");
  }
  absl::StrAppend(&legend, steps.empty() ? "no compaction yet" : "", "</p>\n");
  return svg + legend;
}

std::string ItemLink(int64_t sequence) {
  return absl::StrCat("<a href=\"#item-", sequence, "\">#", sequence, "</a>");
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string RenderReport(const ReportData& d) {
  const v1::Conversation& c = d.conversation;
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>convstate: ", HtmlEscape(c.conversation_id()), "</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<h1>Conversation <code>", HtmlEscape(c.conversation_id()),
      "</code></h1>\n<p class=\"meta\">");
  absl::StrAppend(&html, "<span>tenant <b>", HtmlEscape(c.tenant_id()), "</b></span>",
                  "<span>model <b>", HtmlEscape(c.model()), "</b></span>",
                  "<span>version <b id=\"version\">", c.version(), "</b></span>",
                  "<span>items <b>", c.item_count(), "</b></span>",
                  "<span>compaction version <b>", c.compaction_version(), "</b></span>",
                  "<span>status <b id=\"status\">", StatusName(d.view.context_status()),
                  "</b></span><span>band <b id=\"band\">", BandName(d.inspect.band()),
                  "</b></span>");
  if (!d.generated_at.empty()) {
    absl::StrAppend(&html, "<span>read at ", HtmlEscape(d.generated_at), "</span>");
  }
  absl::StrAppend(&html, "</p>\n");

  absl::StrAppend(&html, "<h2>The window now: ", d.view.tokens().total(), " of ",
                  d.view.tokens().context_window(), " tokens</h2>\n", WindowBar(d));
  if (d.inspect.planned_actions_size() > 0) {
    absl::StrAppend(&html, "<p>Next compaction would: ");
    for (int i = 0; i < d.inspect.planned_actions_size(); ++i) {
      absl::StrAppend(&html, i > 0 ? "; " : "", HtmlEscape(d.inspect.planned_actions(i)));
    }
    absl::StrAppend(&html, " (projected ", d.inspect.projected_total(), " tokens).</p>\n");
  }

  absl::StrAppend(&html, "<h2>View tokens over the conversation's life</h2>\n", Sawtooth(d));

  absl::StrAppend(&html,
                  "<h2>Summary chunks</h2>\n<table id=\"chunks\">\n<tr><th class=\"n\">chunk</th>"
                  "<th>items</th><th class=\"n\">tokens</th><th class=\"n\">recall</th>"
                  "<th>model</th><th>state</th><th class=\"n\">facts</th>"
                  "<th class=\"n\">constraints</th></tr>\n");
  for (const v1::SummaryChunk& ch : d.chunks) {
    const bool active = ch.superseded_by() == 0;
    absl::StrAppend(
        &html, "<tr class=\"chunk", active ? "" : " superseded", "\" id=\"chunk-", ch.chunk_id(),
        "\" data-chunk-id=\"", ch.chunk_id(), "\" data-tokens=\"", ch.token_count(),
        "\"><td class=\"n\">", ch.chunk_id(), "</td><td>", ItemLink(ch.from_sequence()), " to ",
        ItemLink(ch.through_sequence()), "</td><td class=\"n\">", ch.token_count(),
        "</td><td class=\"n\">",
        ch.has_recall() ? absl::StrFormat("%.2f", ch.recall()) : std::string("-"), "</td><td>",
        HtmlEscape(ch.summarizer_model()), "</td><td>",
        active ? std::string("active")
               : absl::StrCat("superseded by <a href=\"#chunk-", ch.superseded_by(), "\">",
                              ch.superseded_by(), "</a>"),
        "</td><td class=\"n\">", ch.facts_size(), "</td><td class=\"n\">", ch.constraints_size(),
        "</td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n", d.chunks.empty() ? "<p>No summary yet.</p>\n" : "");

  absl::StrAppend(&html,
                  "<h2>Ledger and constraints of the active chunks</h2>\n<table id=\"ledger\">\n"
                  "<tr><th>kind</th><th>source</th><th>role</th><th>text</th>"
                  "<th class=\"n\">tokens</th><th class=\"n\">chunk</th></tr>\n");
  int facts = 0;
  for (const v1::SummaryChunk& ch : d.chunks) {
    if (ch.superseded_by() != 0) continue;
    for (const auto& [kind, list] :
         {std::pair<const char*, const google::protobuf::RepeatedPtrField<v1::LedgerFact>*>{
              "constraint", &ch.constraints()},
          {"fact", &ch.facts()}}) {
      for (const v1::LedgerFact& f : *list) {
        ++facts;
        absl::StrAppend(&html, "<tr class=\"fact ", kind, "\" data-sequence=\"", f.sequence(),
                        "\"><td>", kind, "</td><td>", ItemLink(f.sequence()), "</td><td>",
                        RoleName(f.role()), "</td><td>", HtmlEscape(f.text()),
                        "</td><td class=\"n\">", f.token_count(),
                        "</td><td class=\"n\"><a href=\"#chunk-", ch.chunk_id(), "\">",
                        ch.chunk_id(), "</a></td></tr>\n");
      }
    }
  }
  absl::StrAppend(&html, "</table>\n", facts == 0 ? "<p>No fact or constraint kept.</p>\n" : "");

  absl::StrAppend(&html,
                  "<h2>Items</h2>\n<table id=\"items\">\n<tr><th class=\"n\">seq</th>"
                  "<th class=\"n\">turn</th><th>role</th><th>kind</th><th class=\"n\">tokens"
                  "</th><th>content</th></tr>\n");
  for (const v1::Item& it : d.items) {
    std::string flags;
    if (it.pinned()) flags += " pinned";
    if (it.redacted()) flags += " redacted";
    absl::StrAppend(&html, "<tr class=\"item", flags, "\" id=\"item-", it.sequence(),
                    "\"><td class=\"n\">", it.sequence(), "</td><td class=\"n\">",
                    it.turn_index(), "</td><td>", RoleName(it.role()), "</td><td>",
                    KindName(it.kind()), flags, "</td><td class=\"n\">", it.token_count(),
                    "</td><td>", HtmlEscape(Preview(it.content(), 160)), "</td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n</body>\n</html>\n");
  return html;
}

}  // namespace convstate::ctl
