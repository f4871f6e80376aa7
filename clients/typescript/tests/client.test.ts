// The helper against the real server and PostgreSQL: a conversation
// created on first use, turns appended once (idempotency keys), tool calls
// and results, usage stored, a view rebuilt after a provider overflow, and
// errors with their gRPC codes.

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { ConvstateClient, ConvstateError, GrpcStatus, v1 } from "../src";
import { serverAddress, storedUsage, uniqueId } from "./helpers";

const client = new ConvstateClient({ address: serverAddress() });
after(() => client.close());

const { Role, ItemKind } = v1;

test("beforeInference creates the conversation, appends, and returns the view in both formats", async () => {
  const id = uniqueId("lib");
  const first = await client.beforeInference(id, [
    { role: "system", content: "You are an on-call assistant." },
    { role: "user", content: "Why is api-1 slow on port 8001?" },
  ], { model: "tiny-1", pinnedInstructions: "Never restart production without asking." });
  assert.equal(first.appended.length, 1);
  assert.deepEqual(first.openai, [
    { role: "system", content: "You are an on-call assistant." },
    { role: "system", content: "Never restart production without asking." },
    { role: "user", content: "Why is api-1 slow on port 8001?" },
  ]);
  assert.deepEqual(first.anthropic.system.map((b) => b.text), ["You are an on-call assistant.", "Never restart production without asking."]);
  // The pinned breakpoint ends the system part.
  assert.deepEqual(first.anthropic.system[1].cache_control, { type: "ephemeral" });
  assert.deepEqual(first.anthropic.messages, [{ role: "user", content: [{ type: "text", text: "Why is api-1 slow on port 8001?" }] }]);
  assert.match(first.viewHash, /^[0-9a-f]{64}$/);
  assert.equal(first.version, 1);

  // The answer asks for a tool; its result and the next answer follow.
  const call = { role: "assistant" as const, content: "Checking the logs.", tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "kubectl", arguments: '{"cmd":"logs api-1"}' } }] };
  await client.afterInference(id, call, { prompt_tokens: 40, completion_tokens: 12, prompt_tokens_details: { cached_tokens: 30 }, completion_tokens_details: { reasoning_tokens: 4 } });
  const second = await client.beforeInference(id, [{ role: "tool", tool_call_id: "call_1", content: "db-1 latency 900ms" }]);
  assert.equal(second.appended[0].toolName, "kubectl"); // Named from the stored call.
  const openaiTail = second.openai.slice(2);
  assert.deepEqual(openaiTail, [
    { role: "user", content: "Why is api-1 slow on port 8001?" },
    { role: "assistant", content: "Checking the logs.", tool_calls: call.tool_calls },
    { role: "tool", tool_call_id: "call_1", content: "db-1 latency 900ms" },
  ]);
  assert.deepEqual(second.anthropic.messages.map((m) => [m.role, m.content.map((b) => b.type)]), [
    ["user", ["text"]],
    ["assistant", ["text", "tool_use"]],
    ["user", ["tool_result"]],
  ]);
  const answer = await client.afterInference(id, { role: "assistant", content: [{ type: "text", text: "db-1 is slow." }] }, { input_tokens: 20, output_tokens: 5, cache_read_input_tokens: 50 });

  const items = await client.listAllItems(id);
  assert.deepEqual(items.map((i) => [i.role, i.kind, i.content]), [
    [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "Why is api-1 slow on port 8001?"],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "Checking the logs."],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_TOOL_CALL, '{"cmd":"logs api-1"}'],
    [Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, "db-1 latency 900ms"],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, "db-1 is slow."],
  ]);
  // The usage of both answers, OpenAI's and Anthropic's, as stored.
  assert.deepEqual(storedUsage(id).map((u) => [u.input, u.output, u.cached, u.reasoning]), [
    [40, 12, 30, 4],
    [70, 5, 50, 0],
  ]);
  assert.equal(answer.items[0].sequence, 5);
});

test("an append sent again with its idempotency key stores nothing", async () => {
  const id = uniqueId("lib-idem");
  await client.beforeInference(id, [{ role: "user", content: "hello" }], { model: "tiny-1", idempotencyKey: "k1" });
  const again = await client.beforeInference(id, [{ role: "user", content: "hello" }], { model: "tiny-1", idempotencyKey: "k1" });
  assert.equal(again.version, 1);
  assert.equal((await client.listAllItems(id)).length, 1);
});

test("without a model, an unknown conversation is NOT_FOUND", async () => {
  await assert.rejects(
    client.beforeInference(uniqueId("lib-none"), [{ role: "user", content: "hi" }]),
    (e: unknown) => e instanceof ConvstateError && e.code === GrpcStatus.NOT_FOUND && e.method === "AppendTurn",
  );
});

test("a bad id is INVALID_ARGUMENT from the server, invalid UTF-8 from the library; nothing is stored", async () => {
  await assert.rejects(
    client.beforeInference("no spaces allowed", [{ role: "user", content: "hi" }], { model: "tiny-1" }),
    (e: unknown) => e instanceof ConvstateError && e.code === GrpcStatus.INVALID_ARGUMENT && !e.local,
  );
  const id = uniqueId("lib-utf8");
  await client.beforeInference(id, [{ role: "user", content: "fine" }], { model: "tiny-1" });
  await assert.rejects(
    client.beforeInference(id, [{ role: "user", content: "ok" }, { role: "user", content: "bad \ud800" }]),
    (e: unknown) => e instanceof ConvstateError && e.code === GrpcStatus.INVALID_ARGUMENT && e.local,
  );
  assert.equal((await client.listAllItems(id)).length, 1);
});

test("after a provider overflow the view is built anew and an audit row says so", async () => {
  const id = uniqueId("lib-overflow");
  let prepared = await client.beforeInference(id, [{ role: "system", content: "Be brief." }, { role: "user", content: "Start." }], { model: "tiny-1" });
  for (let i = 0; i < 6; i++) {
    await client.afterInference(id, { role: "assistant", content: `Host db-${i}.internal answers on port ${5400 + i}. ` + "Details follow. ".repeat(30) }, null);
    prepared = await client.beforeInference(id, [{ role: "user", content: `And db-${i + 1}? ` + "Context words. ".repeat(20) }]);
  }
  const rebuilt = await client.rebuildAfterOverflow(id, { reportedTokens: 5000 });
  assert.notEqual(rebuilt.viewHash, prepared.viewHash);
  // The new view as Chat messages, written out here: no tool calls in this
  // conversation, so one message per entry with the entry's role and text.
  const roles: Record<number, string> = { [Role.ROLE_SYSTEM]: "system", [Role.ROLE_USER]: "user", [Role.ROLE_ASSISTANT]: "assistant" };
  const expected = rebuilt.view.entries.filter((e) => e.kind !== ItemKind.ITEM_KIND_REASONING).map((e) => ({ role: roles[e.role], content: e.content }));
  assert.deepEqual(rebuilt.openai, expected);
  assert.deepEqual(rebuilt.openai[0], { role: "system", content: "Be brief." });
  assert.equal(rebuilt.openai.at(-1)!.role, "user");
  assert.match(rebuilt.openai.at(-1)!.content as string, /^And db-6\? /);
  assert.ok(rebuilt.openai.length < 14, `${rebuilt.openai.length} messages: the view, not the whole history`);
  const events = await client.listCompactionEvents({ conversationId: id });
  assert.ok(events.events.some((e) => e.event === "provider_overflow"), JSON.stringify(events.events.map((e) => e.event)));
});
