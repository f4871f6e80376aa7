#ifndef CONVSTATE_TOOLS_CONVSTATECTL_RENDER_H_
#define CONVSTATE_TOOLS_CONVSTATECTL_RENDER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "convstate/v1/convstate.pb.h"

namespace convstate::ctl {

// Short names of the API's enums, as the tables show them.
std::string SectionName(v1::Section section);
std::string RoleName(v1::Role role);
std::string KindName(v1::ItemKind kind);
std::string BandName(v1::Band band);
std::string StatusName(v1::ContextStatus status);

// `text` on one line (line breaks and tabs as spaces, other control
// characters dropped), cut at a character boundary
// to at most `width` characters, with "..." when cut.
std::string Preview(absl::string_view text, size_t width);

// Rows as columns padded to their widest cell (in characters); the first
// row is the header.
std::string Table(const std::vector<std::vector<std::string>>& rows);

// The window section by section: tokens, share of the window, and a bar.
std::string SectionBars(const v1::TokenBreakdown& tokens, int width = 40);

// Every entry of a view: section, role, kind, sequence, tokens, preview.
std::string ViewTable(const v1::BuildContextResponse& view);

}  // namespace convstate::ctl

#endif  // CONVSTATE_TOOLS_CONVSTATECTL_RENDER_H_
