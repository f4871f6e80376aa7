// The conversions, without a server: messages to items, views to both
// providers' formats with their cache breakpoints, usage, refusals, trace
// context.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ConvstateError,
  assistantToItems,
  isContextLengthExceeded,
  isValidTraceparent,
  messagesToItems,
  newTraceparent,
  recallQueryOf,
  truncateUtf8,
  reportedTokens,
  splitLeadingSystem,
  toProviderUsage,
  v1,
  viewToAnthropic,
  viewToOpenAI,
} from "../src";
import { SeenItem, align, itemKey, overlap } from "../src/proxy/proxy";

const { Role, ItemKind, Section } = v1;

function entry(section: number, role: number, kind: number, content: string, extra: Partial<v1.ContextEntry> = {}): v1.ContextEntry {
  return v1.ContextEntry.fromPartial({ section, role, kind, content, ...extra });
}

// A view with every shape: system prompt, pinned, summary, ledger, live
// turns with a tool call and its result, recalled passages, pending input.
const view = v1.BuildContextResponse.fromPartial({
  entries: [
    entry(Section.SECTION_SYSTEM, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "You are terse."), // 0
    entry(Section.SECTION_PINNED, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "Never restart prod."), // 1
    entry(Section.SECTION_SUMMARY, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "Summary of items #1-#4"), // 2
    entry(Section.SECTION_LEDGER, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "Facts: port 8080"), // 3
    entry(Section.SECTION_LIVE, Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "Why is api slow?", { sequence: 5 }), // 4
    entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_REASONING, "thinking", { sequence: 6 }), // 5
    entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "Let me look.", { sequence: 7 }), // 6
    entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_TOOL_CALL, '{"cmd":"logs"}', { sequence: 8, toolName: "kubectl", toolCallId: "c1" }), // 7
    entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_TOOL_CALL, "not json", { sequence: 9, toolName: "grep", toolCallId: "c2" }), // 8
    entry(Section.SECTION_LIVE, Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, "[pruned]", { sequence: 10, toolName: "kubectl", toolCallId: "c1", pruned: true }), // 9
    entry(Section.SECTION_LIVE, Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, "3 matches", { sequence: 11, toolName: "grep", toolCallId: "c2" }), // 10
    entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "The db is slow.", { sequence: 12 }), // 11
    entry(Section.SECTION_RECALLED, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "Recalled: port 8080"), // 12
    entry(Section.SECTION_PENDING, Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "And now?"), // 13
  ],
  cacheBreakpoints: [
    { kind: v1.CacheBreakpointKind.CACHE_BREAKPOINT_KIND_PINNED, lastEntry: 1 },
    { kind: v1.CacheBreakpointKind.CACHE_BREAKPOINT_KIND_SUMMARIES, lastEntry: 3 },
    { kind: v1.CacheBreakpointKind.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY, lastEntry: 9 },
  ],
  viewHash: "abc",
  version: 12,
});

test("a view as OpenAI Chat messages: tool calls join their assistant message, reasoning is left out", () => {
  assert.deepEqual(viewToOpenAI(view), [
    { role: "system", content: "You are terse." },
    { role: "system", content: "Never restart prod." },
    { role: "system", content: "Summary of items #1-#4" },
    { role: "system", content: "Facts: port 8080" },
    { role: "user", content: "Why is api slow?" },
    {
      role: "assistant",
      content: "Let me look.",
      tool_calls: [
        { id: "c1", type: "function", function: { name: "kubectl", arguments: '{"cmd":"logs"}' } },
        { id: "c2", type: "function", function: { name: "grep", arguments: "not json" } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "[pruned]" },
    { role: "tool", tool_call_id: "c2", content: "3 matches" },
    { role: "assistant", content: "The db is slow." },
    { role: "system", content: "Recalled: port 8080" },
    { role: "user", content: "And now?" },
  ]);
});

test("mergeLeadingSystem: the system entries before the first turn are one message; later ones stay", () => {
  const merged = viewToOpenAI(view, { mergeLeadingSystem: true });
  assert.deepEqual(merged[0], { role: "system", content: "You are terse.\n\nNever restart prod.\n\nSummary of items #1-#4\n\nFacts: port 8080" });
  assert.equal(merged[1].role, "user");
  assert.deepEqual(merged.at(-2), { role: "system", content: "Recalled: port 8080" });
  assert.equal(merged.length, viewToOpenAI(view).length - 3);
});

test("a refusal is kept as the answer's text; Anthropic's redacted_thinking is left out", () => {
  assert.deepEqual(
    assistantToItems({ role: "assistant", content: null, refusal: "I can't help with that." }).map((i) => [i.role, i.kind, i.content]),
    [[Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "I can't help with that."]],
  );
  // The same message resent by the client lines up with it.
  assert.deepEqual(messagesToItems([{ role: "assistant", content: null, refusal: "I can't help with that." }]), assistantToItems({ role: "assistant", content: null, refusal: "I can't help with that." }));
  const items = assistantToItems({
    role: "assistant",
    content: [{ type: "redacted_thinking", data: "EqQBCgIYAh..." }, { type: "text", text: "Done." }],
  });
  assert.deepEqual(items.map((i) => [i.kind, i.content]), [[ItemKind.ITEM_KIND_MESSAGE, "Done."]]);
});

test("a view as Anthropic Messages: system apart, roles alternate, breakpoints become cache_control", () => {
  const a = viewToAnthropic(view);
  assert.deepEqual(a.system, [
    { type: "text", text: "You are terse." },
    { type: "text", text: "Never restart prod.", cache_control: { type: "ephemeral" } },
    { type: "text", text: "Summary of items #1-#4" },
    { type: "text", text: "Facts: port 8080", cache_control: { type: "ephemeral" } },
  ]);
  assert.deepEqual(a.messages, [
    { role: "user", content: [{ type: "text", text: "Why is api slow?" }] },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "c1", name: "kubectl", input: { cmd: "logs" } },
        { type: "tool_use", id: "c2", name: "grep", input: { arguments: "not json" } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "c1", content: "[pruned]", cache_control: { type: "ephemeral" } },
        { type: "tool_result", tool_use_id: "c2", content: "3 matches" },
      ],
    },
    { role: "assistant", content: [{ type: "text", text: "The db is slow." }] },
    { role: "user", content: [{ type: "text", text: "Recalled: port 8080" }, { type: "text", text: "And now?" }] },
  ]);
  for (let i = 1; i < a.messages.length; i++) assert.notEqual(a.messages[i].role, a.messages[i - 1].role);
});

test("a breakpoint on an entry that makes no block marks the block before it", () => {
  const v = v1.BuildContextResponse.fromPartial({
    entries: [
      entry(Section.SECTION_SYSTEM, Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "sys"),
      entry(Section.SECTION_LIVE, Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "q"),
      entry(Section.SECTION_LIVE, Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_REASONING, "hmm"),
    ],
    cacheBreakpoints: [{ kind: v1.CacheBreakpointKind.CACHE_BREAKPOINT_KIND_PRUNE_BOUNDARY, lastEntry: 2 }],
  });
  const a = viewToAnthropic(v);
  assert.deepEqual(a.messages, [{ role: "user", content: [{ type: "text", text: "q", cache_control: { type: "ephemeral" } }] }]);
  assert.equal(a.system[0].cache_control, undefined);
});

test("OpenAI messages as items, tool results named after their calls", () => {
  const items = messagesToItems([
    { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
    { role: "assistant", content: null, tool_calls: [{ id: "t1", type: "function", function: { name: "search", arguments: "{}" } }] },
    { role: "tool", tool_call_id: "t1", content: "found" },
    { role: "tool", tool_call_id: "old", content: "earlier" },
    { role: "system", content: "mid-conversation note" },
    { role: "assistant", content: "done" },
  ], (id) => (id === "old" ? "stored_tool" : undefined));
  assert.deepEqual(
    items.map((i) => [i.role, i.kind, i.content, i.toolName, i.toolCallId]),
    [
      [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "a\nb", "", ""],
      [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_TOOL_CALL, "{}", "search", "t1"],
      [Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, "found", "search", "t1"],
      [Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, "earlier", "stored_tool", "old"],
      [Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, "mid-conversation note", "", ""],
      [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "done", "", ""],
    ],
  );
});

test("what convstate cannot hold is refused before anything is sent, with INVALID_ARGUMENT", () => {
  const refused = (messages: any[], pattern: RegExp) =>
    assert.throws(() => messagesToItems(messages), (e: unknown) => e instanceof ConvstateError && e.code === 3 && e.local && pattern.test(e.details));
  refused([{ role: "user", content: "bad \ud800 half" }], /UTF-8/);
  refused([{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }], /image_url/);
  refused([{ role: "tool", tool_call_id: "nope", content: "x" }], /no tool call/);
  refused([{ role: "wizard", content: "x" }], /role/);
  refused([{ role: "assistant", content: "x", tool_calls: [{ id: "a", function: { name: "f", arguments: "\udfff" } }] }], /UTF-8/);
});

test("leading system messages are split off", () => {
  const { system, rest } = splitLeadingSystem([
    { role: "system", content: "one" },
    { role: "developer", content: "two" },
    { role: "user", content: "hi" },
    { role: "system", content: "later" },
  ]);
  assert.equal(system, "one\n\ntwo");
  assert.equal(rest.length, 2);
});

test("an Anthropic answer as items, thinking kept as reasoning", () => {
  const items = assistantToItems({
    role: "assistant",
    content: [
      { type: "thinking", thinking: "let me see", signature: "s" },
      { type: "text", text: "Checking." },
      { type: "tool_use", id: "tu1", name: "kubectl", input: { cmd: "get pods" } },
    ],
  });
  assert.deepEqual(items.map((i) => [i.kind, i.content, i.toolName, i.toolCallId]), [
    [ItemKind.ITEM_KIND_REASONING, "let me see", "", ""],
    [ItemKind.ITEM_KIND_MESSAGE, "Checking.", "", ""],
    [ItemKind.ITEM_KIND_TOOL_CALL, '{"cmd":"get pods"}', "kubectl", "tu1"],
  ]);
});

test("provider usage, OpenAI's and Anthropic's", () => {
  assert.deepEqual(
    toProviderUsage({ prompt_tokens: 120, completion_tokens: 30, prompt_tokens_details: { cached_tokens: 100 }, completion_tokens_details: { reasoning_tokens: 12 } }),
    { inputTokens: 120, outputTokens: 30, cachedInputTokens: 100, reasoningTokens: 12 },
  );
  assert.deepEqual(
    toProviderUsage({ input_tokens: 20, output_tokens: 30, cache_read_input_tokens: 100, cache_creation_input_tokens: 5 }),
    { inputTokens: 125, outputTokens: 30, cachedInputTokens: 100, reasoningTokens: 0 },
  );
  assert.equal(toProviderUsage(null), undefined);
});

test("refusals for a prompt too long are told from other errors", () => {
  const openai = { error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.", code: "context_length_exceeded" } };
  assert.ok(isContextLengthExceeded(400, openai));
  assert.equal(reportedTokens(openai), 9001);
  assert.ok(isContextLengthExceeded(400, { error: { message: "prompt is too long: 210000 tokens > 200000 maximum" } }));
  assert.equal(reportedTokens({ error: { message: "prompt is too long: 210000 tokens > 200000 maximum" } }), 210000);
  assert.ok(!isContextLengthExceeded(400, { error: { message: "Invalid value for temperature", code: "invalid_value" } }));
  assert.ok(!isContextLengthExceeded(500, openai));
  assert.equal(reportedTokens({ error: { message: "too long" } }), 0);
});

test("the proxy lines a request up against the stored history: appends what is new, takes back what the client changed", () => {
  const msg = (role: number, content: string) => v1.NewItem.fromPartial({ role, kind: ItemKind.ITEM_KIND_MESSAGE, content });
  const u = (s: string) => msg(Role.ROLE_USER, s), a = (s: string) => msg(Role.ROLE_ASSISTANT, s);
  let seq = 0;
  const stored = (...items: v1.NewItem[]): SeenItem[] => {
    seq = 0;
    return items.map((i) => ({ sequence: ++seq, kind: i.kind, toolName: i.toolName, toolCallId: i.toolCallId, key: itemKey(i) }));
  };
  const sent = (...items: v1.NewItem[]) => items.map(itemKey);
  const history = stored(u("u1"), a("a1"), u("u2"), a("a2"));
  // The whole history resent with a new question: it alone is appended.
  assert.deepEqual(align(history, sent(u("u1"), a("a1"), u("u2"), a("a2"), u("u3"))), { keep: 4, from: 4 });
  // Only the new turn, or a window of the history ending with it.
  assert.deepEqual(align(history, sent(u("u3"))), { keep: 4, from: 0 });
  assert.deepEqual(align(history, sent(u("u2"), a("a2"), u("u3"))), { keep: 4, from: 2 });
  // A new-turn request sent again after its answer failed: stored once.
  assert.deepEqual(align(stored(u("u1"), a("a1"), u("u3")), sent(u("u3"))), { keep: 3, from: 1 });
  assert.deepEqual(align([], sent(u("u1"))), { keep: 0, from: 0 });
  // An earlier message edited: taken back to the last item that matches, the edit and what follows appended.
  assert.deepEqual(align(history, sent(u("u1"), a("a1"), u("u2 edited"))), { keep: 2, from: 2 });
  assert.deepEqual(align(history, sent(u("u1 edited"), a("a1"), u("u2"))), { keep: 0, from: 0 });
  assert.deepEqual(align(history, sent(u("u1"), a("a1 edited"), u("u2"), a("a2"), u("u3"))), { keep: 1, from: 1 });
  // A question dropped after its call failed, and another asked instead.
  assert.deepEqual(align(stored(u("u1"), a("a1"), u("failed")), sent(u("u1"), a("a1"), u("u3"))), { keep: 2, from: 2 });
  // Regenerate, or a retry of a request whose answer was stored: the history up to the question; its answer is taken back.
  assert.deepEqual(align(history, sent(u("u1"), a("a1"), u("u2"))), { keep: 3, from: 3 });
  // With leading system messages even a lone question is the whole history; without, it is a new turn.
  assert.deepEqual(align(history, sent(u("u1")), true), { keep: 1, from: 1 });
  assert.deepEqual(align(history, sent(u("u1")), false), { keep: 4, from: 0 });
  // A cut never parts a kept tool call from its stored result.
  const call = v1.NewItem.fromPartial({ role: Role.ROLE_ASSISTANT, kind: ItemKind.ITEM_KIND_TOOL_CALL, content: "{}", toolName: "f", toolCallId: "c1" });
  const result = (s: string) => v1.NewItem.fromPartial({ role: Role.ROLE_TOOL, kind: ItemKind.ITEM_KIND_TOOL_RESULT, content: s, toolName: "f", toolCallId: "c1" });
  assert.deepEqual(align(stored(u("u1"), call, result("r1"), a("a1")), sent(u("u1"), call, result("r2"))), { keep: 1, from: 1 });
  assert.deepEqual(overlap(["x", "y"], ["y", "z"]), 1);
});

test("the recall query is the last user message, cut to 8192 bytes on a character boundary", () => {
  assert.equal(truncateUtf8("héllo", 2), "h"); // "é" is two bytes: not cut in half.
  assert.equal(truncateUtf8("héllo", 3), "hé");
  assert.equal(truncateUtf8("a😀b", 4), "a"); // Nor a four-byte character.
  assert.equal(truncateUtf8("short", 8192), "short");
  const items = messagesToItems([{ role: "user", content: "first" }, { role: "assistant", content: "answer" }, { role: "user", content: "€".repeat(3000) }]);
  const q = recallQueryOf(items);
  assert.equal(Buffer.byteLength(q), 8190); // 2730 three-byte characters.
  assert.equal(q, "€".repeat(2730));
  assert.equal(recallQueryOf(messagesToItems([{ role: "assistant", content: "no question" }])), "");
});

test("traceparent values", () => {
  const t = newTraceparent();
  assert.ok(isValidTraceparent(t));
  assert.ok(!isValidTraceparent("00-00000000000000000000000000000000-0000000000000001-01"));
  assert.ok(!isValidTraceparent("garbage"));
});
