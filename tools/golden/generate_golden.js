// Writes the tokenizer golden file: for every corpus sample, the token ids
// that the reference implementation (npm tiktoken, encode_ordinary) gives
// for cl100k_base and o200k_base. Run by tools/golden/generate.
"use strict";
const fs = require("fs");
const { get_encoding } = require("tiktoken");
const { corpus } = require("./corpus");

const out = process.argv[2];
const encodings = ["cl100k_base", "o200k_base"];
const enc = Object.fromEntries(encodings.map((e) => [e, get_encoding(e)]));
const lines = corpus().map(([id, text]) => {
  const row = { id, text };
  for (const e of encodings) row[e] = Array.from(enc[e].encode_ordinary(text));
  return JSON.stringify(row);
});
fs.writeFileSync(out, lines.join("\n") + "\n");
for (const e of encodings) enc[e].free();
console.error(`wrote ${lines.length} samples to ${out}`);
