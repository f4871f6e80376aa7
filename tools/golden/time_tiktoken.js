// Times the reference tokenizer (npm tiktoken, encode_ordinary) on every
// .txt file of a directory; prints one JSON line per file and encoding.
"use strict";
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");

const dir = process.argv[2];
const minSeconds = Number(process.argv[3] || 2);
for (const encoding of ["cl100k_base", "o200k_base"]) {
  let enc = get_encoding(encoding);
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".txt")).sort()) {
    const text = fs.readFileSync(path.join(dir, file), "utf8");
    const bytes = Buffer.byteLength(text);
    let tokens;
    try {
      tokens = enc.encode_ordinary(text).length;  // Warm-up.
    } catch (e) {
      // The reference can fail outright on some inputs; say so and go on
      // with a fresh encoder (a trapped WebAssembly instance is unusable).
      console.log(JSON.stringify({ encoding, file, bytes, error: String(e.message || e) }));
      enc = get_encoding(encoding);
      continue;
    }
    let runs = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0;
    do {
      tokens = enc.encode_ordinary(text).length;
      runs++;
      elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    } while (elapsed < minSeconds);
    const seconds = elapsed / runs;
    console.log(JSON.stringify({ encoding, file, bytes, tokens, seconds, mb_per_s: bytes / seconds / 1e6 }));
  }
  enc.free();
}

