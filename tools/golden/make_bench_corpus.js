// Writes the tokenizer benchmark inputs into a directory:
//   mixed.txt     the golden corpus texts, repeated to about 4 MB
//   repeat_a.txt  1 MB of one repeated character
//   no_space.txt  1 MB of printable ASCII with no whitespace
//   latin1.txt    1 MB of random bytes read as Latin-1 text (UTF-8 encoded)
// and quarter-size variants (*_256k.txt) to show how time grows with size.
"use strict";
const fs = require("fs");
const path = require("path");
const { corpus, rng } = require("./corpus");

const dir = process.argv[2];
fs.mkdirSync(dir, { recursive: true });
const MB = 1 << 20;

// Realistic text only: the long pathological samples have files of their own.
let mixed = corpus().filter(([id]) => !id.startsWith("long_")).map(([, text]) => text).join("\n");
while (Buffer.byteLength(mixed) < 4 * MB) mixed += "\n" + mixed;
fs.writeFileSync(path.join(dir, "mixed.txt"), mixed);

function write(name, make) {
  fs.writeFileSync(path.join(dir, name + ".txt"), make(MB));
  fs.writeFileSync(path.join(dir, name + "_256k.txt"), make(MB / 4));
}
write("repeat_a", (n) => "a".repeat(n));
write("no_space", (n) => {
  const r = rng(99);
  let s = "";
  for (let i = 0; i < n; i++) s += String.fromCharCode(33 + Math.floor(r() * 94));
  return s;
});
write("latin1", (n) => {
  const r = rng(1234);
  let s = "";
  for (let i = 0; i < n; i++) s += String.fromCharCode(Math.floor(r() * 256));
  return s;
});
