// The tokenizer test corpus: fixed samples of many scripts and shapes, plus
// seeded random mixtures. Deterministic: the same list on every run.
"use strict";

function rng(seed) {
  // xorshift32: small, seeded, the same in every JavaScript engine.
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 4294967296;
  };
}

const fixed = [
  ["english", "The quick brown fox jumps over the lazy dog. It's 5 o'clock; we'll see what they've done."],
  ["contractions", "I'm, you're, he's, she'd, we'll, they've, don't, CAN'T, WE'RE, I'M, You'Re, it'S, 'tis, ſ 'ſ, O'Neil's"],
  ["apostrophes", "’curly’ 'straight' ''double'' `back` 's 't 're 've 'm 'll 'd 'x"],
  ["german", "Größenmaßstäbe für Straßenbahnhaltestellen: Äpfel, Öl, Übermut — ẞ GROẞ."],
  ["french", "L'élève a dû répondre à ces questions délicates. Où est-ce qu'on va ? « Déjà vu »"],
  ["spanish", "¿Dónde está el niño? ¡Mañana será otro día! Pingüino, acción, corazón."],
  ["russian", "Съешь же ещё этих мягких французских булок, да выпей чаю. ПРИВЕТ Мир"],
  ["greek", "Ξεσκεπάζω τὴν ψυχοφθόρα βδελυγμία. ΑΒΓΔ αβγδ ς"],
  ["turkish", "İstanbul'da ılık bir gün; IĞDIR, ığdır, Işık ışık."],
  ["vietnamese", "Tiếng Việt có dấu: người, được, những, trường học, Hà Nội."],
  ["chinese", "我们今天讨论上下文压缩。对话越来越长，模型的窗口有限，所以需要总结早期的内容。"],
  ["japanese", "これは日本語のテストです。カタカナ、ひらがな、漢字が混在しています。ｶﾀｶﾅ半角"],
  ["korean", "안녕하세요, 대화 상태 서비스입니다. 한국어 텍스트를 토큰화합니다."],
  ["arabic", "مرحبا بالعالم! هذا نص عربي للاختبار، مع أرقام ١٢٣ و 456."],
  ["hebrew", "שלום עולם, זהו טקסט בעברית עם ניקוד: שָׁלוֹם."],
  ["hindi", "नमस्ते दुनिया। यह हिंदी में एक परीक्षण वाक्य है, क्षत्रिय ज्ञान।"],
  ["thai", "สวัสดีครับ นี่คือการทดสอบภาษาไทย ภาษาไทยไม่มีช่องว่างระหว่างคำ"],
  ["emoji", "Launch 🚀🚀 done ✅ family 👨‍👩‍👧‍👦 coder 👩🏽‍💻 flag 🇫🇷🇯🇵 heart ❤️ keycap 1️⃣ rainbow 🏳️‍🌈"],
  ["combining", "e\u0301 a\u0300\u0316 Z\u0351\u0358a\u0360l\u0327g\u0337o\u0338 n\u0303 \u0301alone A\u030AB\u0308"],
  ["titlecase_modifiers", "ǅungla ǈ ǋ ʰʲʷ ˢᵘᵖ ᴬᴮ ǲ Ⅻ ⅷ ² ³ ¼ ① ⑳ ꙮ"],
  ["cpp", "#include <vector>\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;  // double\n  return v.size() > 2 ? 0 : 1;\n}\n"],
  ["python", "def compact(items, budget=4096):\n    \"\"\"Summarize old turns.\"\"\"\n    if sum(i.tokens for i in items) <= budget:\n        return items\n    return [summarize(items[:-4])] + items[-4:]\n"],
  ["json_tool_output", "{\"status\":\"error\",\"code\":503,\"items\":[{\"id\":\"a1b2\",\"score\":0.9173},{\"id\":\"c3d4\",\"score\":-1e-7}],\"path\":\"/var/log/app.log\",\"ok\":false,\"nested\":{\"x\":null}}"],
  ["yaml", "models:\n  - name: gpt-4o\n    context_window: 128000\n    thresholds: {soft: 0.7, hard: 0.8}\n  - name: \"self-hosted/*\"\n"],
  ["log", "2026-11-22T03:14:34.514Z WARN [pid 4242] conn=0x7ffd5a3c req=3fa85f64-5717-4562-b3fc-2c963f66afa6 latency_ms=1234.56 status=503 msg=\"upstream timeout after 30s\"\nE1122 03:14:35.001 handler.cc:88] Failed: ECONNREFUSED 127.0.0.1:5432\n"],
  ["digits", "1 12 123 1234 12345 123456 1234567 3.14159265358979 1,234,567.89 0x1F 1e10 -42 +7 ٣٤٥٦ १२३४ 𝟏𝟐𝟑 ¹²³"],
  ["long_digits", "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"],
  ["spaces", "a  b   c    d     e\t\tf \t g\n\nh\n\n\ni   \n   j\r\nk\r\n\r\nl     "],
  ["trailing_ws", "trailing spaces   \nand tabs\t\t\nand both \t \n   "],
  ["only_newlines", "\n\n\n\n"],
  ["only_spaces", "          "],
  ["leading_ws", "   leading and\n\n  indented\n    lines"],
  ["mixed_case", "HelloWORLD iPhone McDonald's ABCdef XMLHttpRequest getHTTPResponseCode camelCaseWord SCREAMING_SNAKE_CASE"],
  ["urls", "https://example.com/path/to/page?query=1&x=%20y#frag mailto:a.b@c.io file:///etc/hosts C:\\Users\\x\\file.txt"],
  ["punctuation", "!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> /// \\\\\\ ||| ~~~ ``` ,,, ;;; :::"],
  ["slashes", "a/b//c///d / // /// \n/ \n//\n path/\n/\r\n"],
  ["nbsp_and_friends", "no\u00a0break\u2002en\u2003em\u2009thin\u200bzero\u3000ideographic\u2028line\u2029para\u0085nel\u000bvt\u000cff"],
  ["private_use_and_rare", "\ue000\ue001 \u{f0000} \u{1d11e} \u{1f600}\u{1f601} \u{20000}\u{2a6d6} \u{e0041}"],
  ["markdown", "# Title\n\n- item **bold** _it_ `code`\n1. first\n> quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n```sh\nls -la\n```\n"],
];

// Characters from every class the split patterns care about.
const pools = [
  "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
  "       ", "\n\n\r\t", "'''", "!?.,;:-_()[]{}<>/\\|@#$%^&*+=~`\"",
  "éèêëàâäôöûüçñßøåæœ", "ÉÈÊËÀÂÄÔÖÛÜÇÑØÅÆŒ", "ǅǈǋǲ", "ʰʲʷˢᴬᴮ", "\u0301\u0300\u0308\u0327\u0338",
  "αβγδεζηθ", "ΑΒΓΔ", "абвгдежз", "АБВГД", "我们今天讨论上下文", "ひらがなカタカナ",
  "안녕하세요", "مرحبا", "שלום", "नमस्ते", "สวัสดี", "١٢٣٤", "१२३४", "Ⅻⅷ²³¼",
  "\u00a0\u2003\u3000", "🚀✅❤️👩🏽‍💻🇫🇷", "ſ", "İı",
];

function randomSamples(count, seed) {
  const r = rng(seed);
  const out = [];
  for (let n = 0; n < count; n++) {
    const len = 1 + Math.floor(r() * 120);
    let s = "";
    while ([...s].length < len) {
      const pool = [...pools[Math.floor(r() * pools.length)]];
      const runs = 1 + Math.floor(r() * 6);
      for (let k = 0; k < runs; k++) s += pool[Math.floor(r() * pool.length)];
    }
    out.push([`random_${n}`, s]);
  }
  return out;
}

function latin1Samples(count, seed) {
  const r = rng(seed);
  const out = [];
  for (let n = 0; n < count; n++) {
    const len = 1 + Math.floor(r() * 200);
    let s = "";
    for (let k = 0; k < len; k++) s += String.fromCharCode(Math.floor(r() * 256));
    out.push([`latin1_${n}`, s]);
  }
  return out;
}

// Long pieces: these take the heap merge path, which must agree with the
// reference's quadratic one.
function longSamples() {
  const r = rng(4242);
  let noSpace = "";
  const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_-.:/";
  for (let k = 0; k < 3000; k++) noSpace += chars[Math.floor(r() * chars.length)];
  let latin1 = "";
  for (let k = 0; k < 3000; k++) latin1 += String.fromCharCode(33 + Math.floor(r() * 94));
  return [
    ["long_repeated_letter", "a".repeat(5000)],
    ["long_repeated_upper", "Q".repeat(3000)],
    ["long_repeated_pair", "ab".repeat(2500)],
    ["long_no_whitespace", noSpace],
    ["long_printable_no_space", latin1],
    ["long_spaces", " ".repeat(4000) + "x"],
    ["long_newlines", "\n".repeat(3000)],
    ["long_digits_run", "9".repeat(3000)],
    ["long_cjk", "我".repeat(2000)],
    ["long_emoji", "🚀".repeat(500)],
    ["long_base64", Buffer.from(noSpace).toString("base64")],
  ];
}

function corpus() {
  return [...fixed, ...longSamples(), ...randomSamples(300, 12345), ...latin1Samples(40, 777)];
}

module.exports = { corpus, rng };
