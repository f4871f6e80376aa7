// Retries, deadlines and metadata against an in-process gRPC server that
// fails on purpose: UNAVAILABLE is retried for reads and keyed appends
// only, with the same idempotency key; errors carry their gRPC code.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";

import { ConvstateClient, ConvstateError, isLoopback, v1 } from "../src";

interface Seen {
  method: string;
  request: any;
  metadata: grpc.Metadata;
}

const seen: Seen[] = [];
let failuresLeft = 0; // UNAVAILABLE answers before a call succeeds.
let server: grpc.Server;
let address = "";

function handler(method: string, answer: (req: any) => unknown, delayMs = 0) {
  return (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
    seen.push({ method, request: call.request, metadata: call.metadata });
    setTimeout(() => {
      if (failuresLeft > 0) {
        failuresLeft--;
        callback({ code: grpc.status.UNAVAILABLE, details: "database unreachable" }, null);
        return;
      }
      callback(null, answer(call.request));
    }, delayMs);
  };
}

before(async () => {
  server = new grpc.Server();
  const unimplemented = (_: unknown, cb: grpc.sendUnaryData<any>) => cb({ code: grpc.status.UNIMPLEMENTED }, null);
  const impl: Record<string, unknown> = {};
  for (const name of Object.keys(v1.ConversationStateService)) impl[name] = unimplemented;
  Object.assign(impl, {
    listItems: handler("listItems", () => v1.ListItemsResponse.fromPartial({ items: [{ sequence: 1, content: "hi" }] })),
    appendTurn: handler("appendTurn", (req) => v1.AppendTurnResponse.fromPartial({ version: 1, items: req.items })),
    createConversation: handler("createConversation", (req) => v1.Conversation.fromPartial({ conversationId: req.conversationId })),
    buildContext: handler("buildContext", () => v1.BuildContextResponse.fromPartial({ viewHash: "h", version: 1 })),
    getConversation: handler("getConversation", () => v1.Conversation.fromPartial({}), 300),
  });
  server.addService(v1.ConversationStateService, impl as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});

after(() => server.forceShutdown());

function client(extra: Record<string, string> = {}): ConvstateClient {
  return new ConvstateClient({ env: { CONVSTATE_ADDRESS: address, ...extra }, retryBaseMs: 1, maxAttempts: 4 });
}

test("a read is retried while the service is unavailable", async () => {
  seen.length = 0;
  failuresLeft = 2;
  const res = await client().listItems({ conversationId: "c" });
  assert.equal(res.items[0].content, "hi");
  assert.equal(seen.length, 3);
});

test("an append with an idempotency key is retried with that key; the helper always sets one", async () => {
  seen.length = 0;
  failuresLeft = 1;
  const c = client();
  await c.afterInference("c", { role: "assistant", content: "ok" }, { prompt_tokens: 5, completion_tokens: 1 });
  assert.equal(seen.length, 2);
  assert.ok(seen[0].request.idempotencyKey.length > 0);
  assert.equal(seen[0].request.idempotencyKey, seen[1].request.idempotencyKey);
  assert.deepEqual(seen[1].request.usage, { inputTokens: 5, outputTokens: 1, cachedInputTokens: 0, reasoningTokens: 0 });
});

test("an append without a key and a creation are not repeated", async () => {
  const c = client();
  for (const call of [
    () => c.appendTurn({ conversationId: "c", items: [v1.NewItem.fromPartial({ role: v1.Role.ROLE_USER, kind: v1.ItemKind.ITEM_KIND_MESSAGE, content: "x" })] }),
    () => c.createConversation({ conversationId: "c", model: "m" }),
    () => c.buildContext({ conversationId: "c", providerOverflow: true }),
  ]) {
    seen.length = 0;
    failuresLeft = 1;
    await assert.rejects(call(), (e: unknown) => e instanceof ConvstateError && e.code === grpc.status.UNAVAILABLE && e.codeName === "UNAVAILABLE");
    assert.equal(seen.length, 1);
  }
});

test("retries stop after maxAttempts, and the error carries the code", async () => {
  seen.length = 0;
  failuresLeft = 10;
  await assert.rejects(client().buildContext({ conversationId: "c" }), (e: unknown) => e instanceof ConvstateError && e.code === grpc.status.UNAVAILABLE && e.method === "BuildContext");
  assert.equal(seen.length, 4);
  failuresLeft = 0;
});

test("each call has a deadline", async () => {
  failuresLeft = 0;
  await assert.rejects(client().getConversation("c", { deadlineMs: 50 }), (e: unknown) => e instanceof ConvstateError && e.code === grpc.status.DEADLINE_EXCEEDED);
});

test("the token, the tenant and the trace context come along", async () => {
  seen.length = 0;
  failuresLeft = 0;
  const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  await client({ CONVSTATE_TOKEN: "s3cret", CONVSTATE_TENANT: "acme" }).listItems({ conversationId: "c" }, { traceparent: tp });
  assert.equal(seen[0].metadata.get("authorization")[0], "Bearer s3cret");
  assert.equal(seen[0].metadata.get("traceparent")[0], tp);
  assert.equal(seen[0].request.tenantId, "acme");
});

test("invalid UTF-8 is refused before any call", async () => {
  seen.length = 0;
  await assert.rejects(
    client().afterInference("c", { role: "assistant", content: "\udc00" }, null),
    (e: unknown) => e instanceof ConvstateError && e.code === grpc.status.INVALID_ARGUMENT && e.local,
  );
  assert.equal(seen.length, 0);
});

test("a token is not sent in plaintext to an address off this machine unless allowed", () => {
  assert.throws(
    () => new ConvstateClient({ env: { CONVSTATE_ADDRESS: "convstate.example:50051", CONVSTATE_TOKEN: "t" } }),
    (e: unknown) => e instanceof ConvstateError && e.local && /refusing to send the token in plaintext/.test(e.details),
  );
  for (const address of ["localhost:1", "127.0.0.1:1", "[::1]:1"]) new ConvstateClient({ address, token: "t" }).close();
  new ConvstateClient({ address: "convstate.example:1", token: "t", allowInsecureToken: true }).close();
  new ConvstateClient({ address: "convstate.example:1", token: "t", tls: true }).close();
  new ConvstateClient({ address: "convstate.example:1" }).close(); // No token, nothing to protect.
  for (const a of ["localhost:50051", "127.1.2.3:9", "[::1]:50051", "dns:///localhost:50051", "unix:/run/convstate.sock"]) assert.ok(isLoopback(a), a);
  for (const a of ["convstate:50051", "10.0.0.1:50051", "[2001:db8::1]:443", "localhost.evil:1"]) assert.ok(!isLoopback(a), a);
});
