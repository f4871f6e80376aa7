// The proxy with a real application: the official OpenAI SDK, pointed at
// tools/proxy, which keeps the conversation in the real convstate server
// and calls an upstream fake that records what it receives.

import assert from "node:assert/strict";
import * as http from "node:http";
import { after, before, test } from "node:test";
import OpenAI from "openai";

import { ConvstateClient, isValidTraceparent, traceIdOf, v1, viewToOpenAI } from "../src";
import { RememberedHistories } from "../src/proxy/proxy";
import { ProxyProcess, serverAddress, startProxyProcess, storedUsage, uniqueId } from "./helpers";
import { REFUSAL_TOKENS, UpstreamFake, replyTo } from "./upstream_fake";

const { Role, ItemKind } = v1;
const API_KEY = "sk-test-passes-through";
const MODEL = "tiny-1";

const fake = new UpstreamFake();
const convstate = new ConvstateClient({ address: serverAddress() });
let proxy: ProxyProcess;
let sdk: OpenAI;

before(async () => {
  await fake.start();
  proxy = await startProxyProcess(fake.url);
  sdk = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: API_KEY, maxRetries: 0 });
});

after(async () => {
  await proxy.stop();
  await fake.stop();
  convstate.close();
});

type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;

async function stored(id: string): Promise<Array<[number, number, string]>> {
  return (await convstate.listAllItems(id)).filter((i) => i.kind !== ItemKind.ITEM_KIND_SUMMARY_MARKER).map((i) => [i.role, i.kind, i.content]);
}

/** One non-streamed turn through the proxy: the answer, and the view's version and hash the proxy reports. */
async function turn(id: string, messages: Msg[], extra: Record<string, string> = {}) {
  const { data, response } = await sdk.chat.completions
    .create({ model: MODEL, messages }, { headers: { "x-convstate-conversation-id": id, ...extra } })
    .withResponse();
  return { answer: data.choices[0].message, version: Number(response.headers.get("x-convstate-version")), viewHash: response.headers.get("x-convstate-view-hash") ?? "" };
}

/** The upstream's last chat request must be the view convstate had at `version`, as OpenAI messages. */
async function assertUpstreamSawView(id: string, version: number, viewHash: string) {
  const view = await convstate.getContextAt({ conversationId: id, version });
  assert.equal(view.viewHash, viewHash);
  const last = fake.chats().at(-1)!;
  assert.deepEqual(last.body.messages, viewToOpenAI(view));
  return last;
}

test("three turns through the SDK, the third streamed, then the whole history resent", async () => {
  const id = uniqueId("sdk");
  const messages: Msg[] = [{ role: "system", content: "You are a terse on-call assistant." }];
  const before = fake.chats().length;

  for (const q of ["Why is api-1 slow?", "What about db-1 on port 5432?"]) {
    messages.push({ role: "user", content: q });
    const r = await turn(id, messages);
    assert.equal(r.answer.content, replyTo(q));
    messages.push(r.answer);
    await assertUpstreamSawView(id, r.version, r.viewHash);
  }

  const q3 = "Summarize the incident so far.";
  messages.push({ role: "user", content: q3 });
  const { data: stream, response } = await sdk.chat.completions
    .create({ model: MODEL, messages, stream: true }, { headers: { "x-convstate-conversation-id": id } })
    .withResponse();
  let text = "";
  let usageChunks = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usageChunks++;
  }
  assert.equal(text, replyTo(q3));
  assert.equal(usageChunks, 0); // The client did not ask for usage: the chunk the proxy asked for is kept from it.
  messages.push({ role: "assistant", content: text });
  const streamed = fake.chats().at(-1)!;
  assert.equal(streamed.body.stream, true);
  assert.equal(streamed.body.stream_options.include_usage, true);
  await assertUpstreamSawView(id, Number(response.headers.get("x-convstate-version")), response.headers.get("x-convstate-view-hash")!);

  // Exactly the six messages, in order.
  const six: Array<[number, number, string]> = [
    [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "Why is api-1 slow?"],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, replyTo("Why is api-1 slow?")],
    [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, "What about db-1 on port 5432?"],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, replyTo("What about db-1 on port 5432?")],
    [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, q3],
    [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, replyTo(q3)],
  ];
  assert.deepEqual(await stored(id), six);
  const conversation = await convstate.getConversation(id);
  assert.equal(conversation.model, MODEL);
  assert.equal(conversation.systemPrompt, "You are a terse on-call assistant.");

  // Every answer was stored with the upstream's usage, the streamed one too.
  const usage = storedUsage(id);
  assert.deepEqual(usage.map((u) => u.sequence), [2, 4, 6]);
  fake.chats().slice(before).forEach((r, i) => {
    assert.ok(usage[i].input > 0 && usage[i].output > 0);
    assert.equal(usage[i].input, Math.ceil(JSON.stringify(r.body.messages).length / 4));
    assert.equal(usage[i].cached, 7);
    assert.equal(usage[i].reasoning, 3);
  });

  // The whole history resent with a fourth question: only it and its answer are added.
  const q4 = "Who owns db-1?";
  messages.push({ role: "user", content: q4 });
  const r4 = await turn(id, messages);
  assert.equal(r4.answer.content, replyTo(q4));
  assert.deepEqual(await stored(id), [...six, [Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, q4], [Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, replyTo(q4)]]);
  const last = await assertUpstreamSawView(id, r4.version, r4.viewHash);
  // The upstream saw convstate's view: its system prompt, the stored turns, the new question.
  assert.deepEqual(last.body.messages[0], { role: "system", content: "You are a terse on-call assistant." });
  assert.equal(last.body.messages.at(-1).content, q4);
  // The API key and the model passed through; every request had a trace context.
  for (const r of fake.chats().slice(before)) {
    assert.equal(r.headers.authorization, `Bearer ${API_KEY}`);
    assert.equal(r.body.model, MODEL);
    assert.ok(isValidTraceparent(r.headers.traceparent as string));
    assert.equal(r.headers["x-convstate-conversation-id"], undefined);
  }
});

test("after a proxy restart, the resent history is matched against the stored one", async () => {
  const id = uniqueId("restart");
  const messages: Msg[] = [{ role: "system", content: "Be brief." }, { role: "user", content: "First question?" }];
  messages.push((await turn(id, messages)).answer);
  await proxy.stop();
  proxy = await startProxyProcess(fake.url);
  sdk = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: API_KEY, maxRetries: 0 });
  messages.push({ role: "user", content: "Second question?" });
  const r = await turn(id, messages);
  assert.equal(r.answer.content, replyTo("Second question?"));
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["First question?", replyTo("First question?"), "Second question?", replyTo("Second question?")]);
});

test("a client that sends only the new turn gets the history from convstate", async () => {
  const id = uniqueId("newonly");
  await turn(id, [{ role: "system", content: "Remember ports." }, { role: "user", content: "api-7 listens on 8007." }]);
  await turn(id, [{ role: "user", content: "db-7 listens on 5437." }]);
  const r = await turn(id, [{ role: "user", content: "Which ports did I give you?" }]);
  assert.deepEqual((await stored(id)).map((s) => s[2]), [
    "api-7 listens on 8007.", replyTo("api-7 listens on 8007."),
    "db-7 listens on 5437.", replyTo("db-7 listens on 5437."),
    "Which ports did I give you?", replyTo("Which ports did I give you?"),
  ]);
  const last = await assertUpstreamSawView(id, r.version, r.viewHash);
  // The system prompt, the four earlier messages the client did not send, and the question.
  assert.equal(last.body.messages.length, 6);
  assert.equal(last.body.messages[1].content, "api-7 listens on 8007.");
});

test("what another writer appended meanwhile is read before the proxy appends", async () => {
  const id = uniqueId("other-writer");
  await turn(id, [{ role: "user", content: "Through the proxy." }]);
  // Another gateway appends behind this proxy's back: what it remembers is stale.
  await convstate.beforeInference(id, [{ role: "user", content: "Through another gateway." }]);
  await convstate.afterInference(id, { role: "assistant", content: "Answered there." }, null);
  const r = await turn(id, [{ role: "user", content: "Back through the proxy." }]);
  assert.deepEqual((await stored(id)).map((s) => s[2]), [
    "Through the proxy.", replyTo("Through the proxy."),
    "Through another gateway.", "Answered there.",
    "Back through the proxy.", replyTo("Back through the proxy."),
  ]);
  const last = await assertUpstreamSawView(id, r.version, r.viewHash);
  assert.ok(last.body.messages.some((m: any) => m.content === "Answered there."));
});

test("tool calls and results round-trip, streamed and resent", async () => {
  const id = uniqueId("tools");
  const messages: Msg[] = [{ role: "user", content: "CALL_TOOL for the disk usage" }];
  const { data: stream } = await sdk.chat.completions
    .create({ model: MODEL, messages, stream: true, stream_options: { include_usage: true } }, { headers: { "x-convstate-conversation-id": id } })
    .withResponse();
  const calls: Array<{ id: string; name: string; args: string }> = [];
  let usageChunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usageChunks++;
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[tc.index] ??= { id: "", name: "", args: "" };
      if (tc.id) calls[tc.index].id = tc.id;
      calls[tc.index].name += tc.function?.name ?? "";
      calls[tc.index].args += tc.function?.arguments ?? "";
    }
  }
  assert.equal(usageChunks, 1); // Asked for: passed on.
  assert.equal(calls.length, 1);
  messages.push({ role: "assistant", content: null, tool_calls: calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.args } })) });
  messages.push({ role: "tool", tool_call_id: calls[0].id, content: "/var is 91% full" });
  const r = await turn(id, messages);
  assert.equal(r.answer.content, replyTo("CALL_TOOL for the disk usage"));
  const items = await convstate.listAllItems(id);
  assert.deepEqual(items.map((i) => [i.kind, i.toolName, i.toolCallId]), [
    [ItemKind.ITEM_KIND_MESSAGE, "", ""],
    [ItemKind.ITEM_KIND_TOOL_CALL, "lookup", calls[0].id],
    [ItemKind.ITEM_KIND_TOOL_RESULT, "lookup", calls[0].id],
    [ItemKind.ITEM_KIND_MESSAGE, "", ""],
  ]);
  assert.equal(items[1].content, calls[0].args);
  await assertUpstreamSawView(id, r.version, r.viewHash);
});

test("a prompt the upstream refuses as too long is reported, rebuilt and retried once", async () => {
  const id = uniqueId("overflow");
  const messages: Msg[] = [{ role: "system", content: "You keep track of hosts." }];
  for (let i = 0; i < 8; i++) {
    messages.push({ role: "user", content: `Host db-${i}.internal answers on port ${5400 + i}. ` + "Background detail. ".repeat(40) });
    messages.push((await turn(id, messages)).answer);
  }
  const storedBefore = (await stored(id)).length;
  const chatsBefore = fake.chats().length;
  fake.refuseNext(1);
  messages.push({ role: "user", content: "Which host answers on port 5403?" });
  const r = await turn(id, messages);
  assert.equal(r.answer.content, replyTo("Which host answers on port 5403?"));
  const tries = fake.chats().slice(chatsBefore);
  assert.equal(tries.length, 2);
  assert.notDeepEqual(tries[1].body.messages, tries[0].body.messages); // The rebuilt view, not the refused one.
  assert.ok(tries[1].body.messages.length < messages.length); // convstate's view, not the client's history.
  await assertUpstreamSawView(id, r.version, r.viewHash);
  const events = await convstate.listCompactionEvents({ conversationId: id });
  const overflow = events.events.find((e) => e.event === "provider_overflow");
  assert.ok(overflow, JSON.stringify(events.events.map((e) => e.event)));
  assert.match(overflow!.detailJson, new RegExp(String(REFUSAL_TOKENS)));
  assert.equal((await stored(id)).length, storedBefore + 2); // The question and its answer, once each.
});

test("a refusal the retry does not cure reaches the client as the upstream's error", async () => {
  const id = uniqueId("refused");
  fake.refuseNext(2);
  await assert.rejects(turn(id, [{ role: "user", content: "hello" }]), (e: unknown) => e instanceof OpenAI.BadRequestError && (e as any).code === "context_length_exceeded");
  fake.refuseNext(0);
});

test("without the header, a request passes through untouched and nothing is stored", async () => {
  const body = '{"model":"gpt-4o","messages":[{"role":"user","content":"pass me through"}],  "temperature":0.5}';
  const res = await fetch(`${proxy.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${API_KEY}` }, body });
  assert.equal(res.status, 200);
  const last = fake.chats().at(-1)!;
  assert.equal(last.raw.toString("utf8"), body);
  assert.equal(last.headers.authorization, `Bearer ${API_KEY}`);
  assert.ok(isValidTraceparent(last.headers.traceparent as string));
  const models = await sdk.models.list();
  assert.equal(models.data[0].id, "fake-model");
  const missing = await fetch(`${proxy.url}/other`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as any).error.type, "not_found_error");
});

test("the client's trace context is propagated to the upstream", async () => {
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await turn(uniqueId("trace"), [{ role: "user", content: "trace me" }], { traceparent });
  assert.equal(traceIdOf(fake.chats().at(-1)!.headers.traceparent as string), "4bf92f3577b34da6a3ce929d0e0e4736");
});

test("invalid UTF-8 and unusable requests get OpenAI-style errors and store nothing", async () => {
  const id = uniqueId("bad");
  await turn(id, [{ role: "user", content: "a good start" }]);
  const chatsBefore = fake.chats().length;
  const post = (body: Buffer | string, headers: Record<string, string> = {}) =>
    fetch(`${proxy.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-convstate-conversation-id": id, ...headers }, body });
  const cases: Array<[Buffer | string, Record<string, string>, number, string | null]> = [
    [Buffer.concat([Buffer.from('{"model":"tiny-1","messages":[{"role":"user","content":"bad '), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]), {}, 400, "invalid_utf8"],
    ['{"model":"tiny-1","messages":[{"role":"user","content":"ok"},{"role":"user","content":"half \\ud800"}]}', {}, 400, "invalid_argument"],
    ['{"model":"tiny-1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}', {}, 400, "invalid_argument"],
    ['{"model":"tiny-1","messages":', {}, 400, "invalid_json"],
    ['{"messages":[]}', {}, 400, "missing_model"],
    ['{"model":"tiny-1","messages":[{"role":"user","content":"x"}]}', { "x-convstate-conversation-id": "bad id!" }, 400, "invalid_conversation_id"],
  ];
  for (const [body, headers, status, code] of cases) {
    const res = await post(body, headers);
    assert.equal(res.status, status, String(body));
    const err = ((await res.json()) as any).error;
    assert.equal(err.code, code, String(body));
    assert.equal(typeof err.message, "string");
    assert.equal(err.type, "invalid_request_error");
  }
  assert.equal(fake.chats().length, chatsBefore);
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["a good start", replyTo("a good start")]);
});

/** One non-streamed turn, with the rewind headers. */
async function turnWithHeaders(id: string, messages: Msg[]) {
  const { data, response } = await sdk.chat.completions.create({ model: MODEL, messages }, { headers: { "x-convstate-conversation-id": id } }).withResponse();
  return {
    answer: data.choices[0].message,
    version: Number(response.headers.get("x-convstate-version")),
    viewHash: response.headers.get("x-convstate-view-hash") ?? "",
    rewoundTo: response.headers.get("x-convstate-rewound-to"),
    abandoned: response.headers.get("x-convstate-abandoned-conversation-id"),
  };
}

/** Two turns through the SDK; returns the messages as the client holds them. */
async function twoTurns(id: string): Promise<Msg[]> {
  const messages: Msg[] = [{ role: "system", content: "You answer about hosts." }, { role: "user", content: "Where does api-3 run?" }];
  messages.push((await turn(id, messages)).answer);
  messages.push({ role: "user", content: "And db-3?" });
  messages.push((await turn(id, messages)).answer);
  return messages;
}

test("an earlier message edited: the conversation is taken back and holds what the client sent; the old branch lives on in a fork", async () => {
  const id = uniqueId("edit");
  const messages = await twoTurns(id);
  const edited: Msg[] = [...messages.slice(0, 3), { role: "user", content: "And db-4?" }];
  const r = await turnWithHeaders(id, edited);
  assert.equal(r.answer.content, replyTo("And db-4?"));
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["Where does api-3 run?", replyTo("Where does api-3 run?"), "And db-4?", replyTo("And db-4?")]);
  assert.equal(r.rewoundTo, "2");
  assert.ok(r.abandoned);
  assert.deepEqual((await stored(r.abandoned!)).map((s) => s[2]), ["Where does api-3 run?", replyTo("Where does api-3 run?"), "And db-3?", replyTo("And db-3?")]);
  const last = await assertUpstreamSawView(id, r.version, r.viewHash);
  assert.ok(!last.body.messages.some((m: any) => m.content === "And db-3?"));

  // The first message edited too: taken back to nothing.
  const first: Msg[] = [messages[0], { role: "user", content: "Where does api-9 run?" }, messages[2], { role: "user", content: "And db-4?" }];
  const r2 = await turnWithHeaders(id, first);
  assert.equal(r2.rewoundTo, "0");
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["Where does api-9 run?", replyTo("Where does api-3 run?"), "And db-4?", replyTo("And db-4?")]);
});

test("regenerate: the history up to the last question sent again stores the question once and the new answer in place of the old", async () => {
  const id = uniqueId("regen");
  const messages = await twoTurns(id);
  const r = await turnWithHeaders(id, messages.slice(0, 4));
  assert.equal(r.answer.content, replyTo("And db-3?"));
  assert.equal(r.rewoundTo, "3");
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["Where does api-3 run?", replyTo("Where does api-3 run?"), "And db-3?", replyTo("And db-3?")]);
  const last = await assertUpstreamSawView(id, r.version, r.viewHash);
  assert.equal(last.body.messages.at(-1).content, "And db-3?"); // The old answer is not in the view.
  assert.deepEqual((await stored(r.abandoned!)).map((s) => s[2]).at(-1), replyTo("And db-3?"));
});

test("a request sent again whose answer was stored, and a failed question dropped: nothing is stored twice", async () => {
  const id = uniqueId("retry");
  const messages = await twoTurns(id);
  messages.push({ role: "user", content: "And cache-3?" });
  await turn(id, messages); // The answer is stored, but the client never saw it ...
  const again = await turnWithHeaders(id, messages); // ... and sends the request again.
  assert.equal(again.answer.content, replyTo("And cache-3?"));
  const six = ["Where does api-3 run?", replyTo("Where does api-3 run?"), "And db-3?", replyTo("And db-3?"), "And cache-3?", replyTo("And cache-3?")];
  assert.deepEqual((await stored(id)).map((s) => s[2]), six);
  messages.push(again.answer);

  // A question whose call failed, dropped by the client, and another asked instead.
  fake.refuseNext(2);
  await assert.rejects(turn(id, [...messages, { role: "user", content: "A question that fails." }]));
  fake.refuseNext(0);
  assert.equal((await stored(id)).length, 7);
  const sixth = (await convstate.listAllItems(id)).filter((i) => i.kind === ItemKind.ITEM_KIND_MESSAGE)[5].sequence;
  const r = await turnWithHeaders(id, [...messages, { role: "user", content: "And queue-3?" }]);
  assert.equal(r.rewoundTo, String(sixth));
  assert.deepEqual((await stored(id)).map((s) => s[2]), [...six, "And queue-3?", replyTo("And queue-3?")]);
  assert.deepEqual((await stored(r.abandoned!)).map((s) => s[2]).at(-1), "A question that fails.");
});

/** `p`, or a failure after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

test("a client that disconnects mid-stream does not hold the conversation up", async () => {
  const id = uniqueId("gone");
  const ctl = new AbortController();
  const res = await fetch(`${proxy.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-convstate-conversation-id": id },
    body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "SLOW_STREAM please" }] }),
    signal: ctl.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  ctl.abort(); // Gone mid-stream.
  await reader.read().catch(() => undefined);
  const r = await within(turn(id, [{ role: "user", content: "Still there?" }]), 5000, "the next request of the conversation");
  assert.equal(r.answer.content, replyTo("Still there?"));
  // The answer the client never saw whole is not stored.
  assert.deepEqual((await stored(id)).map((s) => s[2]), ["SLOW_STREAM please", "Still there?", replyTo("Still there?")]);
});

test("the last question is the recall query: what compaction took out of the view comes back to the upstream", async () => {
  const id = uniqueId("recall");
  const report = ["# fjord-tide: provisioning report"];
  for (let i = 0; i < 30; i++) report.push(`step ${i}: created table t${i}`);
  report.push("primary host: db-41.north.internal (guard_value 7731)");
  // A tool's long report, then turns about other things.
  const messages: Msg[] = [{ role: "system", content: "You help with databases." }, { role: "user", content: "CALL_TOOL: set up the tenant database for fjord-tide." }];
  const call = (await turn(id, messages)).answer;
  messages.push(call, { role: "tool", tool_call_id: call.tool_calls![0].id, content: report.join("\n") });
  messages.push((await turn(id, messages)).answer);
  for (let i = 0; i < 8; i++) {
    messages.push({ role: "user", content: `Status of step ${i}?` });
    messages.push((await turn(id, messages)).answer);
  }
  const compacted = await convstate.compact({ conversationId: id, mode: v1.CompactRequest_Mode.MODE_SUMMARIZE });
  assert.equal(compacted.contextStatus, v1.ContextStatus.CONTEXT_STATUS_SUMMARIZED);
  messages.push({ role: "user", content: "Which host does the fjord-tide database live on, and its guard value?" });
  const r = await turn(id, messages);
  const sent = fake.chats().at(-1)!.body.messages as Array<{ role: string; content: string }>;
  // The first message is no longer in the view verbatim ...
  assert.ok(!sent.some((m) => m.content === report.join("\n")), JSON.stringify(sent));
  // ... but the passage that answers the question is, recalled.
  const recalled = sent.find((m) => m.role === "system" && /\[#\d+, turn \d+/.test(m.content));
  assert.ok(recalled, JSON.stringify(sent, null, 1));
  assert.match(recalled!.content, /primary host: db-41\.north\.internal \(guard_value 7731\)/);
  // After the live items, the question among them.
  assert.equal(sent.at(-1), recalled);
  assert.equal(sent.at(-2)!.content, "Which host does the fjord-tide database live on, and its guard value?");
  assert.ok(r.version > 0);
});

test("a path that would lead the proxy to another host is refused", async () => {
  // An upstream given without a path: "/v1//HOST/..." would otherwise make a URL of another origin.
  const elsewhere = new UpstreamFake();
  await elsewhere.start();
  const bare = await startProxyProcess(`http://127.0.0.1:${fake.port}`);
  const get = (base: string, path: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(base + path, { method: "GET", headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || "null") }));
      });
      req.on("error", reject);
      req.end();
    });
  try {
    for (const [base, path] of [
      [bare.url, `/v1//127.0.0.1:${elsewhere.port}/v1/models`],
      [bare.url, `/v1/\\\\127.0.0.1:${elsewhere.port}/v1/models`],
      [proxy.url, `/v1//127.0.0.1:${elsewhere.port}/v1/models`],
      [proxy.url, `/v1/models//x`],
    ]) {
      const r = await get(base, path, { authorization: `Bearer ${API_KEY}` });
      assert.equal(r.status, 400, path);
      assert.equal(r.body.error.type, "invalid_request_error", path);
      assert.equal(r.body.error.code, "invalid_path", path);
    }
    assert.equal(elsewhere.requests.length, 0);
    // What stays on the upstream passes.
    assert.equal((await get(bare.url, "/v1/models")).status, 404); // The fake serves /v1/models; this proxy sends /models.
    assert.equal(fake.requests.at(-1)!.path, "/models");
  } finally {
    await bare.stop();
    await elsewhere.stop();
  }
});

test("a stream is relayed no faster than the client reads it", async () => {
  const id = uniqueId("slow-reader");
  const res = await fetch(`${proxy.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-convstate-conversation-id": id },
    body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "HUGE_STREAM please" }] }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const before = fake.hugeBytesWritten;
  await new Promise((r) => setTimeout(r, 1000)); // The client reads nothing meanwhile.
  const written = fake.hugeBytesWritten;
  await reader.cancel();
  // Without backpressure the proxy would take all 64 MiB; with it, what the sockets buffer.
  assert.ok(written < 24 << 20, `the upstream wrote ${written} bytes (${before} before the pause) to a client that read one chunk`);
});

test("an upstream answer larger than --max_upstream_body_bytes is 502, and the proxy remembers histories within a byte budget", async () => {
  const small = await startProxyProcess(fake.url, ["--max_upstream_body_bytes=50000"]);
  try {
    const res = await fetch(`${small.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-convstate-conversation-id": uniqueId("big") },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "BIG_ANSWER please" }] }),
    });
    assert.equal(res.status, 502);
    const err = ((await res.json()) as any).error;
    assert.equal(err.code, "upstream_response_too_large");
  } finally {
    await small.stop();
  }
  const seen = (sequence: number, key: string) => ({ sequence, kind: ItemKind.ITEM_KIND_MESSAGE, toolName: "", toolCallId: "", key });
  const memory = new RememberedHistories(1000, 400);
  memory.set("a", { version: 1, items: [seen(1, "k".repeat(24))] });
  memory.set("b", { version: 1, items: Array.from({ length: 10 }, (_, i) => seen(i + 1, "k".repeat(24))) }); // Too large for one conversation's share: not kept.
  assert.ok(memory.get("a"));
  assert.equal(memory.get("b"), undefined);
  for (let i = 0; i < 20; i++) memory.set(`c${i}`, { version: 1, items: [seen(1, "k".repeat(24))] });
  assert.ok(memory.bytes <= 1000);
  assert.equal(memory.get("a"), undefined); // The least recently used went first.
  assert.ok(memory.get("c19"));
});

test("--merge_system: the upstream gets one system message before the turns", async () => {
  const merging = await startProxyProcess(fake.url, ["--merge_system"]);
  try {
    const client = new OpenAI({ baseURL: `${merging.url}/v1`, apiKey: API_KEY, maxRetries: 0 });
    const id = uniqueId("merge");
    await convstate.createConversation({ conversationId: id, model: MODEL, systemPrompt: "Be brief.", pinnedInstructions: "Never restart prod." });
    await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello?" }] }, { headers: { "x-convstate-conversation-id": id } });
    assert.deepEqual(fake.chats().at(-1)!.body.messages, [
      { role: "system", content: "Be brief.\n\nNever restart prod." },
      { role: "user", content: "Hello?" },
    ]);
  } finally {
    await merging.stop();
  }
});
