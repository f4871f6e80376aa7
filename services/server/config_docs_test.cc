// The README's configuration table against the server's flags: every flag
// has a row, every name in a row is a flag, and each row's environment
// column names CONVSTATE_ and the flag's name in capitals.

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "re2/re2.h"
#include "services/server/config.h"

namespace convstate {
namespace {

// The flags `convstate_server --help` lists.
std::set<std::string> HelpFlags() {
  std::set<std::string> names;
  std::istringstream in(ConfigUsage());
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view text = line;
    if (absl::ConsumePrefix(&text, "  --")) names.insert(std::string(text));
  }
  return names;
}

// The backticked names in one cell.
std::vector<std::string> Names(absl::string_view cell) {
  std::vector<std::string> names;
  std::string name;
  re2::StringPiece input(cell.data(), cell.size());
  static const re2::RE2 kName("`([A-Za-z0-9_]+)`");
  while (re2::RE2::FindAndConsume(&input, kName, &name)) names.push_back(name);
  return names;
}

struct Row {
  std::vector<std::string> settings;
  std::vector<std::string> variables;
};

// The rows of the table under "## Configuration".
std::vector<Row> ConfigurationTable() {
  std::ifstream in("README.md");
  EXPECT_TRUE(in.good()) << "README.md is not among the test's data";
  std::vector<Row> rows;
  std::string line;
  bool in_section = false, in_table = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Configuration";
    if (!in_section) continue;
    if (line == "| setting | environment | default | meaning |") {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!absl::StartsWith(line, "|")) break;
    if (absl::StartsWith(line, "| ---")) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, " | ");
    if (cells.size() < 3) {
      ADD_FAILURE() << "a row without its columns: " << line;
      continue;
    }
    rows.push_back(Row{Names(cells[0]), Names(cells[1])});
  }
  return rows;
}

TEST(ConfigDocsTest, TheReadmeTableListsEveryFlagWithItsVariable) {
  const std::set<std::string> flags = HelpFlags();
  ASSERT_GT(flags.size(), 50u);
  const std::vector<Row> rows = ConfigurationTable();
  ASSERT_FALSE(rows.empty()) << "no configuration table in README.md";
  std::set<std::string> documented;
  for (const Row& row : rows) {
    std::vector<std::string> expected;
    for (const std::string& name : row.settings) {
      EXPECT_TRUE(flags.count(name)) << "README names `" << name << "`, which is no flag";
      EXPECT_TRUE(documented.insert(name).second) << "`" << name << "` has two rows";
      expected.push_back("CONVSTATE_" + absl::AsciiStrToUpper(name));
    }
    EXPECT_EQ(row.variables, expected) << "the environment column of `"
                                       << (row.settings.empty() ? "?" : row.settings[0]) << "`";
  }
  for (const std::string& flag : flags) {
    EXPECT_TRUE(documented.count(flag)) << "--" << flag << " has no row in README.md";
  }
}

}  // namespace
}  // namespace convstate
