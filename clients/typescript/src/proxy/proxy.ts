// An OpenAI-compatible proxy that keeps every conversation in convstate.
//
// POST /v1/chat/completions with the header x-convstate-conversation-id:
// the request's messages are matched against the conversation's stored
// history and only what follows it is appended; the upstream receives
// convstate's view instead of the client's history; its answer (plain JSON
// or SSE chunks, forwarded as they come) is appended with the usage it
// reported. A refusal for a prompt too long is reported to convstate, the
// view built again and the call retried once. Every other request, and a
// chat completion without the header, passes through untouched.

import { createHash, randomUUID } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import { AddressInfo } from "node:net";
import { TextDecoder } from "node:util";

import { status as GrpcStatusCode } from "@grpc/grpc-js";

import { ConvstateClient, ConvstateClientOptions } from "../client";
import { ConvstateError } from "../errors";
import {
  OpenAIMessage,
  OpenAIToolCall,
  assistantToItems,
  isContextLengthExceeded,
  messagesToItems,
  recallQueryOf,
  reportedTokens,
  splitLeadingSystem,
  toProviderUsage,
  toolNamesOf,
  viewToOpenAI,
} from "../format";
import { BuildContextResponse, Item, ItemKind, NewItem } from "../gen/convstate/v1/convstate";
import { isValidTraceparent, newTraceparent } from "../trace";

export const CONVERSATION_HEADER = "x-convstate-conversation-id";

export interface ProxyOptions {
  /** The convstate client, or the options to make one (unset fields from the environment). */
  convstate: ConvstateClient | ConvstateClientOptions;
  /** The upstream's API root, e.g. http://127.0.0.1:8000/v1: /v1/X goes to <upstream>/X. */
  upstream: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Largest request body accepted (default 32 MiB). */
  maxBodyBytes?: number;
  /** How long an upstream call may take, in ms (default 600000). */
  upstreamTimeoutMs?: number;
  /** Largest upstream answer read whole (JSON, an error, one SSE event, a streamed answer to store); beyond it 502 (default 64 MiB). */
  maxUpstreamBodyBytes?: number;
  /** What the proxy remembers of stored histories, in bytes, all conversations together (default 64 MiB; one conversation at most a sixteenth). */
  maxRememberedBytes?: number;
  /** Send upstream the view's leading system entries as one system message (default false). */
  mergeSystem?: boolean;
  /** Where to log (default stderr). */
  log?: (line: string) => void;
}

export interface RunningProxy {
  host: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}

/** Ids the service accepts: 1 to 128 characters of [A-Za-z0-9._:-]. */
const CONVERSATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "trailers",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);

/** An answer to the client in OpenAI's error shape. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

/**
 * A stored item as the proxy remembers it: enough to line a request's
 * messages up against it (a digest of what a client's message shows) and to
 * name tool results after their calls, without the item's text.
 */
export interface SeenItem {
  sequence: number;
  kind: ItemKind;
  toolName: string;
  toolCallId: string;
  /** itemKey of the item: role, kind, content, tool name and call id. */
  key: string;
}

/** What the proxy knows of a conversation's stored history. */
export interface Known {
  version: number;
  /** The stored items a client's messages can show (no summary markers, no reasoning). */
  items: SeenItem[];
}

/**
 * What the proxy remembers of conversations' stored histories (item
 * digests, not their text), within a byte budget: the least recently used
 * go first, and a history larger than one conversation's share is not kept
 * (it is read again with each request).
 */
export class RememberedHistories {
  private readonly map = new Map<string, { known: Known; bytes: number }>();
  bytes = 0;

  constructor(
    readonly maxBytes: number,
    readonly maxBytesPerConversation: number,
  ) {}

  get(conversationId: string): Known | undefined {
    const e = this.map.get(conversationId);
    if (!e) return undefined;
    this.map.delete(conversationId);
    this.map.set(conversationId, e);
    return e.known;
  }

  set(conversationId: string, known: Known): void {
    this.delete(conversationId);
    let bytes = 64 + conversationId.length * 2;
    for (const it of known.items) bytes += 96 + (it.key.length + it.toolName.length + it.toolCallId.length) * 2;
    if (bytes > this.maxBytesPerConversation) return;
    this.map.set(conversationId, { known, bytes });
    this.bytes += bytes;
    for (const [id, e] of this.map) {
      if (this.bytes <= this.maxBytes) break;
      this.map.delete(id);
      this.bytes -= e.bytes;
    }
  }

  delete(conversationId: string): void {
    const e = this.map.get(conversationId);
    if (!e) return;
    this.map.delete(conversationId);
    this.bytes -= e.bytes;
  }
}

/** What storing a request did: the sequence the conversation was taken back to, and the fork that keeps what followed. */
interface Stored {
  rewoundTo?: number;
  abandoned?: string;
  /** The request's last user message: BuildContext's recall query. */
  recallQuery: string;
}

export async function startProxy(options: ProxyOptions): Promise<RunningProxy> {
  const proxy = new ChatProxy(options);
  const server = http.createServer((req, res) => {
    proxy.handle(req, res).catch((err) => {
      proxy.log(`internal error: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
      if (!res.headersSent) sendError(res, new HttpError(500, "internal proxy error", "server_error"));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 8080, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    host: address.address,
    port: address.port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        proxy.close();
      }),
  };
}

class ChatProxy {
  readonly log: (line: string) => void;
  private readonly client: ConvstateClient;
  private readonly ownsClient: boolean;
  private readonly upstream: URL;
  private readonly maxBodyBytes: number;
  private readonly upstreamTimeoutMs: number;
  private readonly agent: http.Agent;
  private readonly known: RememberedHistories;
  private readonly maxUpstreamBodyBytes: number;
  private readonly mergeSystem: boolean;
  private readonly locks = new Map<string, Promise<void>>();

  constructor(options: ProxyOptions) {
    this.log = options.log ?? ((line) => process.stderr.write(`[proxy] ${line}\n`));
    if (options.convstate instanceof ConvstateClient) {
      this.client = options.convstate;
      this.ownsClient = false;
    } else {
      this.client = new ConvstateClient(options.convstate);
      this.ownsClient = true;
    }
    this.upstream = new URL(options.upstream.replace(/\/+$/, ""));
    if (this.upstream.protocol !== "http:" && this.upstream.protocol !== "https:") {
      throw new Error(`--upstream must be an http or https URL, got ${options.upstream}`);
    }
    this.maxBodyBytes = options.maxBodyBytes ?? 32 << 20;
    this.upstreamTimeoutMs = options.upstreamTimeoutMs ?? 600000;
    this.maxUpstreamBodyBytes = options.maxUpstreamBodyBytes ?? 64 << 20;
    this.mergeSystem = options.mergeSystem ?? false;
    const memory = options.maxRememberedBytes ?? 64 << 20;
    this.known = new RememberedHistories(memory, Math.max(1, Math.floor(memory / 16)));
    const Agent = this.upstream.protocol === "https:" ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: 256 });
  }

  close(): void {
    this.agent.destroy();
    if (this.ownsClient) this.client.close();
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const incoming = req.headers.traceparent;
    const traceparent = typeof incoming === "string" && isValidTraceparent(incoming) ? incoming.trim() : newTraceparent();
    res.setHeader("traceparent", traceparent);
    const url = new URL(req.url ?? "/", "http://proxy");
    if (!url.pathname.startsWith("/v1/")) {
      sendError(res, new HttpError(404, `no route ${req.method} ${url.pathname}: the proxy serves /v1/...`, "not_found_error"));
      return;
    }
    // The upstream URL is the upstream's root and the path put together: a
    // path that would make it name another origin (or holds "//") is refused.
    const rawPath = (req.url ?? "/").split("?")[0];
    if (rawPath.includes("//") || rawPath.includes("\\") || url.pathname.includes("//") || this.target(url).origin !== this.upstream.origin) {
      sendError(res, new HttpError(400, `${url.pathname}: not a path the proxy forwards (it must stay on the upstream's origin, without "//")`, "invalid_request_error", "invalid_path"));
      return;
    }
    const conversationId = header(req, CONVERSATION_HEADER);
    if (req.method === "POST" && url.pathname === "/v1/chat/completions" && conversationId !== undefined) {
      try {
        await this.withLock(conversationId, () => this.chat(req, res, conversationId, traceparent));
      } catch (err) {
        const e = toHttpError(err);
        if (e.status >= 500) this.log(`${conversationId}: ${e.message}`);
        if (!res.headersSent) sendError(res, e);
        else res.destroy();
      }
      return;
    }
    await this.passThrough(req, res, url, traceparent);
  }

  // ---- Pass-through --------------------------------------------------------

  private passThrough(req: http.IncomingMessage, res: http.ServerResponse, url: URL, traceparent: string): Promise<void> {
    return new Promise<void>((resolve) => {
      const headers = forwardHeaders(req, traceparent, false);
      const up = this.send(url, req.method ?? "GET", headers, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, responseHeaders(upRes));
        upRes.pipe(res);
        upRes.on("end", resolve);
        upRes.on("error", () => resolve());
        upRes.on("close", () => {
          if (!upRes.complete) res.destroy();
          resolve();
        });
      });
      up.on("error", (err) => {
        if (!res.headersSent) sendError(res, new HttpError(502, `upstream: ${err.message}`, "upstream_error"));
        else res.destroy();
        resolve();
      });
      res.on("close", () => {
        up.destroy();
        resolve();
      });
      req.pipe(up);
    });
  }

  // ---- Chat completions kept in convstate -------------------------------------

  private async chat(req: http.IncomingMessage, res: http.ServerResponse, conversationId: string, traceparent: string): Promise<void> {
    if (!CONVERSATION_ID.test(conversationId)) {
      throw new HttpError(400, `${CONVERSATION_HEADER}: 1 to 128 characters of [A-Za-z0-9._:-]`, "invalid_request_error", "invalid_conversation_id");
    }
    const body = await this.readJson(req);
    const model = body.model;
    if (typeof model !== "string" || model === "") throw new HttpError(400, "model: required", "invalid_request_error", "missing_model");
    if (!Array.isArray(body.messages)) throw new HttpError(400, "messages: expected an array", "invalid_request_error");
    const call = { traceparent };
    const { system, rest } = splitLeadingSystem(body.messages as OpenAIMessage[]);

    // The stored history, and what of the request it does not hold yet.
    const stored = await this.store(conversationId, model, system, rest.length < body.messages.length, rest, call);
    if (stored.rewoundTo !== undefined) {
      res.setHeader("x-convstate-rewound-to", String(stored.rewoundTo));
      res.setHeader("x-convstate-abandoned-conversation-id", stored.abandoned ?? "");
    }

    // The upstream sees the view; a refusal for length is reported once.
    const stream = body.stream === true;
    const wantsUsage = stream && isObject(body.stream_options) && body.stream_options.include_usage === true;
    const recallQuery = stored.recallQuery;
    let view = await this.client.buildContext({ conversationId, recallQuery }, call);
    // A client that goes away takes the upstream call with it.
    const gone = new AbortController();
    res.on("close", () => {
      if (!res.writableEnded) gone.abort();
    });
    const headers = forwardHeaders(req, traceparent, true);
    const url = new URL("http://proxy/v1/chat/completions");
    let upRes: http.IncomingMessage;
    for (let attempt = 1; ; attempt++) {
      const upBody: Record<string, unknown> = { ...body, messages: viewToOpenAI(view, { mergeLeadingSystem: this.mergeSystem }) };
      if (stream) upBody.stream_options = { ...(isObject(body.stream_options) ? body.stream_options : {}), include_usage: true };
      upRes = await this.post(url, headers, Buffer.from(JSON.stringify(upBody)), gone.signal);
      const status = upRes.statusCode ?? 502;
      if (status >= 200 && status < 300) break;
      const raw = await readAll(upRes, this.maxUpstreamBodyBytes);
      const parsed = parseJson(raw);
      if (attempt === 1 && isContextLengthExceeded(status, parsed ?? raw.toString("utf8"))) {
        this.log(`${conversationId}: upstream refused ${view.tokens?.total ?? "?"} tokens as too long; rebuilding`);
        view = await this.client.buildContext(
          { conversationId, providerOverflow: true, providerReportedTokens: reportedTokens(parsed ?? raw.toString("utf8")), recallQuery },
          call,
        );
        continue;
      }
      res.writeHead(status, { ...responseHeaders(upRes), ...viewHeaders(conversationId, view) });
      res.end(raw);
      return;
    }
    if (stream) await this.relayStream(upRes, res, conversationId, view, wantsUsage, call);
    else await this.relayJson(upRes, res, conversationId, view, call);
  }

  /**
   * Makes the stored conversation what the request's messages say it is:
   * lines them up against the stored history (align), takes the
   * conversation back where they part from it (RewindConversation, what
   * followed kept in a fork) and appends what the history does not hold.
   * What this proxy last saw of the conversation is tried first: the append
   * names that version, and fails (ABORTED) when anyone appended since;
   * then the history is read again, as it is before any rewind.
   */
  private async store(
    conversationId: string,
    model: string,
    system: string,
    sentSystem: boolean,
    messages: OpenAIMessage[],
    call: { traceparent: string },
  ): Promise<Stored> {
    let known = this.known.get(conversationId);
    let fresh = false;
    if (!known) {
      known = await this.history(conversationId, model, system, call);
      fresh = true;
    }
    for (;;) {
      try {
        const names = toolNamesOf(known.items);
        const sent = messagesToItems(messages, (id) => names.get(id));
        const { keep, from } = align(known.items, sent.map(itemKey), sentSystem);
        const out: Stored = { recallQuery: recallQueryOf(sent) };
        if (keep < known.items.length) {
          if (!fresh) throw new StaleHistory();
          known = await this.rewind(conversationId, known, keep, out, call);
        }
        if (from < sent.length) await this.appendNew(conversationId, known, sent.slice(from), call);
        return out;
      } catch (err) {
        const stale =
          err instanceof StaleHistory ||
          (err instanceof ConvstateError && (err.local || err.code === GrpcStatusCode.ABORTED || err.code === GrpcStatusCode.NOT_FOUND));
        if (fresh || !stale) throw err;
        known = await this.history(conversationId, model, system, call);
        fresh = true;
      }
    }
  }

  /** The conversation's stored history; creates the conversation (model, system prompt) if it does not exist. */
  private async history(conversationId: string, model: string, system: string, call: { traceparent: string }): Promise<Known> {
    let version: number;
    try {
      version = (await this.client.getConversation(conversationId, call)).version;
    } catch (err) {
      if (!(err instanceof ConvstateError) || err.code !== GrpcStatusCode.NOT_FOUND) throw err;
      await this.client.ensureConversation(conversationId, model, system, call);
      version = (await this.client.getConversation(conversationId, call)).version;
    }
    const cached = this.known.get(conversationId);
    if (cached && cached.version === version) return cached;
    const items = (await this.client.listAllItems(conversationId, call)).filter(shown).map(seen);
    const known = { version, items };
    this.known.set(conversationId, known);
    return known;
  }

  /** Takes the conversation back to its first `keep` items; what followed lives on in a fork. */
  private async rewind(conversationId: string, known: Known, keep: number, out: Stored, call: { traceparent: string }): Promise<Known> {
    const toSequence = keep > 0 ? known.items[keep - 1].sequence : 0;
    try {
      const res = await this.client.rewindConversation(
        { conversationId, toSequence, idempotencyKey: `proxy-rewind-${randomUUID()}`, abandonedConversationId: "" },
        call,
      );
      out.rewoundTo = toSequence;
      out.abandoned = res.abandoned?.conversationId ?? "";
      this.log(`${conversationId}: the request parts from the stored history after item ${toSequence}: rewound, the rest kept in ${out.abandoned}`);
      const rewound = { version: res.conversation?.version ?? 0, items: known.items.slice(0, keep) };
      this.known.set(conversationId, rewound);
      return rewound;
    } catch (err) {
      this.known.delete(conversationId);
      throw err;
    }
  }

  /** Appends `fresh` at the version the history was read at (ABORTED when another writer got there first). */
  private async appendNew(conversationId: string, known: Known, fresh: NewItem[], call: { traceparent: string }): Promise<void> {
    const last = known.items.length ? known.items[known.items.length - 1].sequence : 0;
    const key = "proxy-" + createHash("sha256").update(JSON.stringify([conversationId, known.version, last, fresh.map((i) => NewItem.toJSON(i))])).digest("hex").slice(0, 40);
    try {
      const res = await this.client.appendTurn({ conversationId, items: fresh, idempotencyKey: key, expectedVersion: known.version }, call);
      this.known.set(conversationId, { version: res.version, items: [...known.items, ...res.items.filter(shown).map(seen)] });
    } catch (err) {
      this.known.delete(conversationId);
      throw err;
    }
  }

  private async appendAnswer(
    conversationId: string,
    message: unknown,
    usage: unknown,
    call: { traceparent: string },
  ): Promise<string | null> {
    try {
      const items = assistantToItems(message);
      const res = await this.client.afterInference(conversationId, message, usage as never, { ...call, idempotencyKey: `proxy-answer-${randomUUID()}` });
      const known = this.known.get(conversationId);
      if (known && res.items.length === items.length) {
        this.known.set(conversationId, { version: res.version, items: [...known.items, ...res.items.filter(shown).map(seen)] });
      } else {
        this.known.delete(conversationId);
      }
      return null;
    } catch (err) {
      // The client still gets the answer; a client that resends its
      // history appends it with its next request.
      this.known.delete(conversationId);
      const why = err instanceof Error ? err.message : String(err);
      this.log(`${conversationId}: the answer was not stored: ${why}`);
      return why;
    }
  }

  private async relayJson(upRes: http.IncomingMessage, res: http.ServerResponse, conversationId: string, view: BuildContextResponse, call: { traceparent: string }): Promise<void> {
    const raw = await readAll(upRes, this.maxUpstreamBodyBytes);
    const parsed = parseJson(raw) as { choices?: Array<{ message?: unknown }>; usage?: unknown } | undefined;
    const message = parsed?.choices?.[0]?.message;
    const failure = message ? await this.appendAnswer(conversationId, message, parsed?.usage, call) : "the upstream's answer holds no message";
    const headers: http.OutgoingHttpHeaders = { ...responseHeaders(upRes), ...viewHeaders(conversationId, view) };
    if (failure) headers["x-convstate-append-error"] = headerSafe(failure);
    res.writeHead(upRes.statusCode ?? 200, headers);
    res.end(raw);
  }

  private relayStream(
    upRes: http.IncomingMessage,
    res: http.ServerResponse,
    conversationId: string,
    view: BuildContextResponse,
    wantsUsage: boolean,
    call: { traceparent: string },
  ): Promise<void> {
    if (res.destroyed) {
      upRes.destroy(); // The client went away already.
      return Promise.resolve();
    }
    res.writeHead(upRes.statusCode ?? 200, { ...responseHeaders(upRes), ...viewHeaders(conversationId, view), "cache-control": "no-cache" });
    const answer = new StreamedAnswer();
    const decoder = new TextDecoder("utf-8");
    let buffer = "";
    let done = false;
    let clientGone = false;
    let waiting = false;
    return new Promise<void>((resolve) => {
      // Settled once the answer is stored (or not), or once either side is
      // gone: the conversation's next request waits for nothing more.
      let finishing: Promise<void> | null = null;
      const finish = () => {
        if (done) return;
        done = true;
        if (clientGone) return resolve(); // An answer the client never saw whole is not stored.
        finishing = (async () => {
          const failure = answer.tooLarge
            ? `the streamed answer is larger than ${this.maxUpstreamBodyBytes} bytes`
            : await this.appendAnswer(conversationId, answer.message(), answer.usage, call);
          if (failure) res.write(`: convstate: the answer was not stored: ${failure.replace(/[\r\n]+/g, " ")}\n\n`);
          res.end("data: [DONE]\n\n");
        })().then(resolve, resolve);
      };
      const abandon = () => {
        if (finishing) return; // Resolves once stored.
        done = true;
        if (!res.writableEnded) res.destroy();
        upRes.destroy();
        resolve();
      };
      res.on("close", () => {
        if (!res.writableEnded) {
          clientGone = true;
          abandon();
        }
      });
      const events = (text: string) => {
        buffer += text.replace(/\r\n?/g, "\n");
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = event
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).replace(/^ /, ""))
            .join("\n");
          if (data === "[DONE]") {
            finish();
            return;
          }
          const chunk = data ? parseJson(Buffer.from(data)) : undefined;
          if (isObject(chunk)) {
            answer.add(chunk, this.maxUpstreamBodyBytes);
            // The usage chunk the proxy asked for, kept from a client that did not.
            if (!wantsUsage && Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage) continue;
          }
          // Backpressure: the upstream waits while the client's socket is full.
          if (!res.write(event + "\n\n") && !waiting) {
            waiting = true;
            upRes.pause();
            res.once("drain", () => {
              waiting = false;
              upRes.resume();
            });
          }
        }
        if (buffer.length > this.maxUpstreamBodyBytes) {
          this.log(`${conversationId}: an SSE event of the upstream exceeds ${this.maxUpstreamBodyBytes} bytes; cut off`);
          abandon();
        }
      };
      upRes.on("data", (b: Buffer) => {
        if (!done) events(decoder.decode(b, { stream: true }));
      });
      upRes.on("end", () => {
        if (!done) {
          const tail = decoder.decode();
          if ((buffer + tail).trim() !== "") events(tail + "\n\n");
          finish();
        }
      });
      upRes.on("error", abandon);
      // Closed before its end (the upstream went away, or was cut off): nothing more comes.
      upRes.on("close", () => {
        if (!done && !upRes.complete) abandon();
      });
    });
  }

  // ---- Helpers -----------------------------------------------------------------

  /** Runs `fn` after every earlier request of the conversation through this proxy. */
  private async withLock(conversationId: string, fn: () => Promise<void>): Promise<void> {
    const before = this.locks.get(conversationId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = before.then(() => mine);
    this.locks.set(conversationId, tail);
    await before;
    try {
      await fn();
    } finally {
      release();
      if (this.locks.get(conversationId) === tail) this.locks.delete(conversationId);
    }
  }

  private async readJson(req: http.IncomingMessage): Promise<Record<string, any>> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > this.maxBodyBytes) throw new HttpError(413, `request body larger than ${this.maxBodyBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
    } catch {
      throw new HttpError(400, "the request body is not valid UTF-8", "invalid_request_error", "invalid_utf8");
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new HttpError(400, `the request body is not JSON: ${(err as Error).message}`, "invalid_request_error", "invalid_json");
    }
    if (!isObject(body)) throw new HttpError(400, "the request body must be a JSON object");
    return body as Record<string, any>;
  }

  /** Where a request for `url` (a path under /v1/) goes: the upstream's root and the path after /v1. */
  private target(url: URL): URL {
    return new URL(this.upstream.pathname.replace(/\/$/, "") + url.pathname.slice(3) + url.search, this.upstream);
  }

  private send(url: URL, method: string, headers: http.OutgoingHttpHeaders, onResponse: (res: http.IncomingMessage) => void, signal?: AbortSignal): http.ClientRequest {
    const target = this.target(url);
    if (target.origin !== this.upstream.origin) throw new HttpError(400, "the path leaves the upstream's origin", "invalid_request_error", "invalid_path");
    const lib = target.protocol === "https:" ? https : http;
    const req = lib.request(target, { method, headers, agent: this.agent, timeout: this.upstreamTimeoutMs, signal }, onResponse);
    req.on("timeout", () => req.destroy(new Error(`no answer within ${this.upstreamTimeoutMs} ms`)));
    return req;
  }

  private post(url: URL, headers: http.OutgoingHttpHeaders, body: Buffer, signal?: AbortSignal): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.send(url, "POST", { ...headers, "content-type": "application/json", "content-length": body.length }, resolve, signal);
      req.on("error", (err) => reject(new HttpError(502, `upstream: ${err.message}`, "upstream_error")));
      req.end(body);
    });
  }
}

/** The assistant message and usage a chat completion stream adds up to (choice 0). */
class StreamedAnswer {
  private content = "";
  private refusal = "";
  private readonly calls: OpenAIToolCall[] = [];
  private size = 0;
  usage: unknown = undefined;
  /** The answer grew past the limit: it is no longer added up (nor stored). */
  tooLarge = false;

  add(chunk: Record<string, any>, limit: number): void {
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    if (this.tooLarge) return;
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      const d = isObject(choice) && isObject(choice.delta) ? choice.delta : undefined;
      if (d && typeof d.content === "string") this.size += d.content.length;
      if (d && typeof d.refusal === "string") this.size += d.refusal.length;
      for (const tc of d && Array.isArray(d.tool_calls) ? d.tool_calls : []) {
        if (isObject(tc) && isObject(tc.function)) this.size += String(tc.function.arguments ?? "").length + String(tc.function.name ?? "").length;
      }
    }
    if (this.size > limit) {
      this.tooLarge = true;
      this.content = "";
      this.calls.length = 0;
      return;
    }
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (!isObject(choice) || (choice.index ?? 0) !== 0 || !isObject(choice.delta)) continue;
      const delta = choice.delta as Record<string, any>;
      if (typeof delta.content === "string") this.content += delta.content;
      if (typeof delta.refusal === "string") this.refusal += delta.refusal;
      for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
        if (!isObject(tc)) continue;
        const i = typeof tc.index === "number" ? tc.index : this.calls.length;
        const call = (this.calls[i] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        if (typeof tc.id === "string") call.id = tc.id;
        if (isObject(tc.function)) {
          if (typeof tc.function.name === "string") call.function.name += tc.function.name;
          if (typeof tc.function.arguments === "string") call.function.arguments += tc.function.arguments;
        }
      }
    }
  }

  message(): OpenAIMessage {
    const calls = this.calls.filter(Boolean);
    const refusal = this.refusal ? { refusal: this.refusal } : {};
    return calls.length ? { role: "assistant", content: this.content || null, tool_calls: calls, ...refusal } : { role: "assistant", content: this.content, ...refusal };
  }
}

/** Stored items a client's messages can show: not summary markers, not reasoning. */
function shown(item: Item): boolean {
  return item.kind !== ItemKind.ITEM_KIND_SUMMARY_MARKER && item.kind !== ItemKind.ITEM_KIND_REASONING;
}

/** The stored item as the proxy remembers it. */
function seen(item: Item): SeenItem {
  const tool = item.kind === ItemKind.ITEM_KIND_TOOL_CALL || item.kind === ItemKind.ITEM_KIND_TOOL_RESULT;
  return { sequence: item.sequence, kind: item.kind, toolName: tool ? item.toolName : "", toolCallId: tool ? item.toolCallId : "", key: itemKey(item) };
}

/** What identifies an item a client's message shows: a digest of its role, kind, content, tool name and call id. */
export function itemKey(item: Pick<NewItem, "role" | "kind" | "content" | "toolName" | "toolCallId">): string {
  return createHash("sha256").update(JSON.stringify([item.role, item.kind, item.content, item.toolName, item.toolCallId])).digest("base64").slice(0, 24);
}

/** Thrown to read the stored history again before taking a conversation back. */
class StaleHistory extends Error {}

/**
 * Lines a request's items (`sent`, as itemKey) up against the stored ones:
 * `keep` of the stored items stay (fewer than there are: the conversation is
 * taken back to them), and the sent items from `from` on are appended.
 *
 * A request that starts where the stored history starts (its first item
 * matches the first stored one, and it holds two items or more, or leading
 * system messages) is the whole history, resent: it is compared item by
 * item from the start. Where it parts from the stored history (an edited
 * earlier message, a question dropped after its call failed), or where it
 * ends before it (a regenerated answer, a request sent again whose answer
 * was stored), the stored history is taken back to the last item that
 * still matches, and the rest of the request appended. A cut that would
 * part a kept tool call from its stored result moves back before the call.
 *
 * So is a request of two items or more whose first item differs from the
 * stored one but whose later items match where they stand, and that does
 * not start with a tail of the stored history (the first message edited):
 * the conversation is taken back to nothing, the request appended.
 *
 * Any other request is a window of the history or only the new turn: what
 * follows the longest tail of the stored history it starts with is
 * appended (all of it when nothing matches), and nothing is taken back.
 */
export function align(stored: SeenItem[], sent: string[], sentSystem = false): { keep: number; from: number } {
  const m = stored.length;
  const n = sent.length;
  const keys = stored.map((s) => s.key);
  const resent = m > 0 && n > 0 && keys[0] === sent[0] && (n >= 2 || sentSystem);
  const tail = resent ? 0 : overlap(keys, sent);
  // No tail matches, but later items match where they stand: the whole history with its first message edited.
  const firstEdited = !resent && tail === 0 && n >= 2 && sent.some((k, i) => i > 0 && i < m && keys[i] === k);
  if (!resent && !firstEdited) return { keep: m, from: tail };
  let p = 0;
  while (p < m && p < n && keys[p] === sent[p]) p++;
  if (p < m) p = beforeOpenCalls(stored, p);
  return { keep: p, from: p };
}

/** The largest cut at or before `p` that keeps no tool call whose result comes after the cut. */
function beforeOpenCalls(stored: SeenItem[], p: number): number {
  for (;;) {
    const later = new Set(stored.slice(p).filter((s) => s.kind === ItemKind.ITEM_KIND_TOOL_RESULT).map((s) => s.toolCallId));
    const open = stored.findIndex((s, i) => i < p && s.kind === ItemKind.ITEM_KIND_TOOL_CALL && later.has(s.toolCallId));
    if (open < 0) return p;
    p = open;
  }
}

/**
 * How many of the sent items the stored history already ends with: the
 * largest k such that the last k stored items are the first k sent. A
 * client that sends only the new turn overlaps nothing (or the turn
 * itself, when a request whose answer failed is sent again); a window of
 * the history overlaps what it repeats.
 */
export function overlap(stored: string[], sent: string[]): number {
  const m = stored.length;
  for (let k = Math.min(m, sent.length); k > 0; k--) {
    let j = 0;
    while (j < k && stored[m - k + j] === sent[j]) j++;
    if (j === k) return k;
  }
  return 0;
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function forwardHeaders(req: http.IncomingMessage, traceparent: string, rewritingBody: boolean): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || k.startsWith("x-convstate-") || k === "traceparent") continue;
    if (rewritingBody && (k === "accept-encoding" || k === "content-type")) continue;
    out[k] = v;
  }
  if (!rewritingBody) {
    if (req.headers["content-length"] !== undefined) out["content-length"] = req.headers["content-length"];
    if (req.headers["transfer-encoding"] !== undefined) out["transfer-encoding"] = req.headers["transfer-encoding"];
  } else {
    out["accept-encoding"] = "identity";
  }
  out.traceparent = traceparent;
  return out;
}

function responseHeaders(res: http.IncomingMessage): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(res.headers)) {
    if (v === undefined || HOP_BY_HOP.has(k)) continue;
    out[k] = v;
  }
  return out;
}

function viewHeaders(conversationId: string, view: BuildContextResponse): http.OutgoingHttpHeaders {
  return {
    "x-convstate-conversation-id": conversationId,
    "x-convstate-view-hash": view.viewHash,
    "x-convstate-version": String(view.version),
    "x-convstate-compaction-version": String(view.compactionVersion),
  };
}

function headerSafe(s: string): string {
  return s.replace(/[^\x20-\x7e]+/g, " ").slice(0, 500);
}

function isObject(v: unknown): v is Record<string, any> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The whole body; 502 (and the stream destroyed) beyond `limit` bytes. */
async function readAll(stream: http.IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of stream) {
    size += (c as Buffer).length;
    if (size > limit) {
      stream.destroy();
      throw new HttpError(502, `the upstream's answer is larger than ${limit} bytes`, "upstream_error", "upstream_response_too_large");
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

function sendError(res: http.ServerResponse, e: HttpError): void {
  const body = JSON.stringify({ error: { message: e.message, type: e.type, param: null, code: e.code } });
  res.writeHead(e.status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** convstate's gRPC codes as HTTP answers. */
function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof ConvstateError) {
    const where = err.local ? "" : "convstate: ";
    const code = err.codeName.toLowerCase();
    switch (err.code) {
      case GrpcStatusCode.INVALID_ARGUMENT:
      case GrpcStatusCode.OUT_OF_RANGE:
      case GrpcStatusCode.FAILED_PRECONDITION:
        return new HttpError(400, `${where}${err.details}`, "invalid_request_error", code);
      case GrpcStatusCode.NOT_FOUND:
        return new HttpError(404, `${where}${err.details}`, "not_found_error", code);
      case GrpcStatusCode.ALREADY_EXISTS:
      case GrpcStatusCode.ABORTED:
        return new HttpError(409, `${where}${err.details}`, "conflict_error", code);
      case GrpcStatusCode.RESOURCE_EXHAUSTED:
        return err.method === "BuildContext"
          ? new HttpError(400, `${where}${err.details}`, "invalid_request_error", "context_length_exceeded")
          : new HttpError(429, `${where}${err.details}`, "rate_limit_error", code);
      case GrpcStatusCode.UNAUTHENTICATED:
      case GrpcStatusCode.PERMISSION_DENIED:
        return new HttpError(502, `${where}the proxy's credentials were refused: ${err.details}`, "convstate_error", code);
      case GrpcStatusCode.DEADLINE_EXCEEDED:
        return new HttpError(504, `${where}${err.details}`, "convstate_error", code);
      case GrpcStatusCode.UNAVAILABLE:
        return new HttpError(503, `${where}${err.details}`, "convstate_error", code);
      default:
        return new HttpError(502, `${where}${err.message}`, "convstate_error", code);
    }
  }
  return new HttpError(500, err instanceof Error ? err.message : String(err), "server_error");
}
