#include "tools/convstatectl/render.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convstate::ctl {
namespace {

// Lower-case name of an enum value without its prefix: SECTION_LIVE: live.
std::string Short(const std::string& full, absl::string_view prefix) {
  std::string out = full;
  if (absl::StartsWith(out, prefix)) out = out.substr(prefix.size());
  if (out.empty() || out == "UNSPECIFIED") return "-";
  return absl::AsciiStrToLower(out);
}

size_t Characters(absl::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string SectionName(v1::Section s) { return Short(v1::Section_Name(s), "SECTION_"); }
std::string RoleName(v1::Role r) { return Short(v1::Role_Name(r), "ROLE_"); }
std::string KindName(v1::ItemKind k) { return Short(v1::ItemKind_Name(k), "ITEM_KIND_"); }
std::string BandName(v1::Band b) { return Short(v1::Band_Name(b), "BAND_"); }
std::string StatusName(v1::ContextStatus s) {
  return Short(v1::ContextStatus_Name(s), "CONTEXT_STATUS_");
}

std::string Preview(absl::string_view text, size_t width) {
  // The API's strings are UTF-8 (protobuf checks them), so only bytes
  // below 0x80 need looking at.
  std::string line;
  bool space = false;
  for (unsigned char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (c < 0x20 || c == 0x7f) continue;
    if (space && !line.empty()) line.push_back(' ');
    space = false;
    line.push_back(static_cast<char>(c));
  }
  if (Characters(line) <= width) return line;
  const size_t keep_chars = width > 3 ? width - 3 : 0;
  size_t chars = 0;
  size_t cut = 0;
  for (; cut < line.size(); ++cut) {
    if ((static_cast<unsigned char>(line[cut]) & 0xC0) != 0x80) {
      if (chars == keep_chars) break;
      ++chars;
    }
  }
  return line.substr(0, cut) + "...";
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Characters(row[i]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - Characters(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string SectionBars(const v1::TokenBreakdown& t, int width) {
  const int64_t window = std::max<int64_t>(t.context_window(), 1);
  const std::vector<std::pair<std::string, int64_t>> sections = {
      {"system", t.system()},   {"pinned", t.pinned()},         {"summaries", t.summaries()},
      {"ledger", t.ledger()},   {"live", t.live()},             {"pending", t.pending()},
      {"reserve", t.output_reserve()}};
  std::vector<std::vector<std::string>> rows = {{"section", "tokens", "window", ""}};
  for (const auto& [name, tokens] : sections) {
    const int cells = static_cast<int>((tokens * width + window - 1) / window);
    rows.push_back({name, absl::StrCat(tokens), absl::StrFormat("%.1f%%", 100.0 * tokens / window),
                    std::string(std::min(cells, width), '#')});
  }
  rows.push_back({"total", absl::StrCat(t.total()),
                  absl::StrFormat("%.1f%%", 100.0 * t.total() / window),
                  absl::StrCat("of ", t.context_window(), t.approximate() ? " (approximate)" : "")});
  return Table(rows);
}

std::string ViewTable(const v1::BuildContextResponse& view) {
  std::vector<std::vector<std::string>> rows = {
      {"section", "role", "kind", "seq", "tokens", "preview"}};
  for (const v1::ContextEntry& e : view.entries()) {
    std::string kind = KindName(e.kind());
    if (e.pruned()) kind += " (pruned)";
    rows.push_back({SectionName(e.section()), RoleName(e.role()), kind,
                    e.sequence() > 0 ? absl::StrCat(e.sequence()) : "-",
                    absl::StrCat(e.token_count()), Preview(e.content(), 60)});
  }
  return Table(rows);
}

}  // namespace convstate::ctl
