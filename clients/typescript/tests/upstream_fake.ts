// A stand-in for an OpenAI-compatible model server, for the tests and the
// proxy benchmark: records every request it receives and answers chat
// completions plain or streamed (SSE, with usage when asked), with a
// reply derived from the last user message; "CALL_TOOL" in it asks for a
// tool call instead, "SLOW_STREAM" a stream that takes ten seconds,
// "HUGE_STREAM" 64 MiB streamed as fast as they are read, "BIG_ANSWER" an
// answer of 100 kB.
// refuseNext(n) makes the next n chat completions fail
// as OpenAI does for a prompt too long.
//
// Run alone: node dist/tests/upstream_fake.js [--port=N]; prints
// "upstream listening on HOST:PORT".

import * as http from "node:http";
import { AddressInfo } from "node:net";

export interface Recorded {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: any;
}

export const REFUSAL_TOKENS = 5000;

export class UpstreamFake {
  readonly requests: Recorded[] = [];
  private server?: http.Server;
  private refusals = 0;
  /** Bytes of HUGE_STREAM answers written so far. */
  hugeBytesWritten = 0;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  refuseNext(n = 1): void {
    this.refusals = n;
  }

  /** The chat completion requests received, oldest first. */
  chats(): Recorded[] {
    return this.requests.filter((r) => r.path.startsWith("/v1/chat/completions"));
  }

  async start(port = 0): Promise<void> {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.keepAliveTimeout = 65000;
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", () => resolve()));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      let body: any;
      try {
        body = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
      } catch {
        body = undefined;
      }
      this.requests.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers, raw, body });
      if (req.method === "POST" && (req.url ?? "").startsWith("/v1/chat/completions")) this.chat(body, res);
      else if (req.method === "GET" && req.url === "/v1/models") json(res, 200, { object: "list", data: [{ id: "fake-model", object: "model" }] });
      else json(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error", code: null } });
    });
  }

  private chat(body: any, res: http.ServerResponse): void {
    if (!body || !Array.isArray(body.messages)) {
      json(res, 400, { error: { message: "messages required", type: "invalid_request_error", code: null } });
      return;
    }
    if (this.refusals > 0) {
      this.refusals--;
      json(res, 400, {
        error: {
          message: `This model's maximum context length is 4096 tokens. However, your messages resulted in ${REFUSAL_TOKENS} tokens. Please reduce the length of the messages.`,
          type: "invalid_request_error",
          param: "messages",
          code: "context_length_exceeded",
        },
      });
      return;
    }
    const lastUser = [...body.messages].reverse().find((m: any) => m.role === "user");
    const question = typeof lastUser?.content === "string" ? lastUser.content : JSON.stringify(lastUser?.content ?? "");
    const promptTokens = Math.ceil(JSON.stringify(body.messages).length / 4);
    const id = `chatcmpl-fake-${this.requests.length}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body.model;
    const toolCall = question.includes("CALL_TOOL") && !body.messages.some((m: any) => m.role === "tool" && m.tool_call_id === `call_${hash(question)}`);
    const content = toolCall ? null : question.includes("BIG_ANSWER") ? replyTo(question) + " " + "y".repeat(100000) : replyTo(question);
    const calls = toolCall
      ? [{ id: `call_${hash(question)}`, type: "function", function: { name: "lookup", arguments: JSON.stringify({ q: question.slice(0, 20) }) } }]
      : undefined;
    const completionTokens = content ? content.split(/\s+/).length : 12;
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: 7 },
      completion_tokens_details: { reasoning_tokens: 3 },
    };
    const finish = toolCall ? "tool_calls" : "stop";
    if (!body.stream) {
      json(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message: { role: "assistant", content, refusal: null, ...(calls ? { tool_calls: calls } : {}) }, logprobs: null, finish_reason: finish }],
        usage,
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const withUsage = body.stream_options?.include_usage === true;
    const chunk = (delta: unknown, finishReason: string | null) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], ...(withUsage ? { usage: null } : {}) })}\n\n`;
    res.write(chunk({ role: "assistant", content: "" }, null));
    if (calls) {
      const c = calls[0];
      res.write(chunk({ tool_calls: [{ index: 0, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } }] }, null));
      const a = c.function.arguments;
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: a.slice(0, 5) } }] }, null));
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: a.slice(5) } }] }, null));
    } else if (question.includes("HUGE_STREAM")) {
      // 64 MiB in 64 KiB pieces, as fast as the reader takes them.
      const piece = "x".repeat(65536);
      let n = 0;
      const more = () => {
        while (n < 1024) {
          n++;
          this.hugeBytesWritten += piece.length;
          if (!res.write(chunk({ content: piece }, null))) return void res.once("drain", more);
        }
        res.write(chunk({}, finish));
        res.end("data: [DONE]\n\n");
      };
      res.on("close", () => (n = 1024));
      more();
      return;
    } else if (question.includes("SLOW_STREAM")) {
      // A piece every 50 ms for ten seconds, unless the client goes away first.
      let n = 0;
      const timer = setInterval(() => {
        if (++n > 200) {
          clearInterval(timer);
          res.write(chunk({}, finish));
          res.end("data: [DONE]\n\n");
        } else {
          res.write(chunk({ content: `piece ${n} ` }, null));
        }
      }, 50);
      res.on("close", () => clearInterval(timer));
      return;
    } else {
      for (const piece of content!.match(/.{1,7}/gs) ?? []) res.write(chunk({ content: piece }, null));
    }
    res.write(chunk({}, finish));
    if (withUsage) res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`);
    res.end("data: [DONE]\n\n");
  }
}

/** The fake's reply to a question. */
export function replyTo(question: string): string {
  return `Reply ${hash(question)}: you asked "${question.slice(0, 60)}".`;
}

function hash(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h.toString(16);
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

if (require.main === module) {
  const arg = process.argv.find((a) => a.startsWith("--port="));
  const fake = new UpstreamFake();
  // Long runs (the benchmark) must not keep every request.
  fake.requests.push = function (...items: Recorded[]) {
    if (this.length > 100) this.splice(0, this.length - 100);
    return Array.prototype.push.apply(this, items);
  };
  fake.start(arg ? Number(arg.slice(7)) : 0).then(() => process.stdout.write(`upstream listening on 127.0.0.1:${fake.port}\n`));
  process.on("SIGTERM", () => fake.stop().then(() => process.exit(0)));
}
