// The convstate client: the generated grpc-js stub behind promise-returning
// calls with a deadline each, the tenant filled in, a bearer token and a
// trace context as metadata, and UNAVAILABLE retried for the calls that are
// safe to repeat. On top of it, the inference helper: beforeInference,
// afterInference and rebuildAfterOverflow.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";

import { ConvstateError, checkText, invalidInput } from "./errors";
import {
  AnthropicPrompt,
  AnthropicUsage,
  OpenAIMessage,
  OpenAIUsage,
  assistantToItems,
  MAX_RECALL_QUERY_BYTES,
  messagesToItems,
  recallQueryOf,
  truncateUtf8,
  splitLeadingSystem,
  toProviderUsage,
  toolNamesOf,
  viewToAnthropic,
  viewToOpenAI,
} from "./format";
import {
  AppendTurnRequest,
  AppendTurnResponse,
  BuildContextRequest,
  BuildContextResponse,
  CompactRequest,
  CompactResponse,
  Conversation,
  ConversationStateClient,
  CreateConversationRequest,
  DeleteConversationRequest,
  DeepPartial,
  DeleteConversationResponse,
  GetContextAtRequest,
  GetConversationRequest,
  InspectContextRequest,
  InspectContextResponse,
  Item,
  ItemKind,
  ListCompactionEventsRequest,
  ListCompactionEventsResponse,
  ListItemsRequest,
  ListItemsResponse,
  NewItem,
  ProfileOverrides,
  RewindConversationRequest,
  RewindConversationResponse,
  UpdateConversationRequest,
} from "./gen/convstate/v1/convstate";

export interface ConvstateClientOptions {
  /** host:port; default CONVSTATE_ADDRESS, else localhost:50051. */
  address?: string;
  /** Bearer token sent as `authorization` metadata; default CONVSTATE_TOKEN. */
  token?: string;
  /** The tenant every request names; default CONVSTATE_TENANT, else the server's default tenant. */
  tenantId?: string;
  /** PEM of the CA to trust, or a file path; turns TLS on. Default: the file CONVSTATE_CACERT. */
  caCert?: string | Buffer;
  /** Client certificate chain and key (mutual TLS), PEM or file paths. Default: CONVSTATE_CERT, CONVSTATE_KEY. */
  certChain?: string | Buffer;
  privateKey?: string | Buffer;
  /** TLS with the system's CAs even without caCert. */
  tls?: boolean;
  /** Each attempt's deadline, in ms (default 30000). */
  deadlineMs?: number;
  /** Attempts of a call that is safe to repeat while it fails UNAVAILABLE (default 4). */
  maxAttempts?: number;
  /** First back-off between attempts, in ms, doubled each time (default 100). */
  retryBaseMs?: number;
  /** grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
  /** Environment to read the defaults from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Send the token without TLS to an address that is not loopback (refused otherwise). */
  allowInsecureToken?: boolean;
}

export interface CallOptions {
  /** This call's deadline per attempt, in ms. */
  deadlineMs?: number;
  /** W3C traceparent sent as metadata. */
  traceparent?: string;
  /** More metadata. */
  metadata?: Record<string, string>;
}

export interface BeforeInferenceOptions extends CallOptions {
  /** The model profile to create the conversation with when it does not exist (without it: NOT_FOUND). */
  model?: string;
  /** The system prompt of a conversation this call creates (default: the leading system messages). */
  systemPrompt?: string;
  pinnedInstructions?: string;
  profileOverrides?: Partial<ProfileOverrides>;
  /** The append's idempotency key (default: a new random one, kept across retries). */
  idempotencyKey?: string;
  /** The view's leading system entries as one OpenAI system message (see viewToOpenAI). */
  mergeLeadingSystem?: boolean;
  /** The last of the new messages ends a task. */
  taskBoundary?: boolean;
  /**
   * Recall (default true): the text of the last user message among the new
   * ones is BuildContext's recall_query, so passages of the history the view
   * no longer shows verbatim that match it come back (RECALLED section).
   */
  recall?: boolean;
}

export interface AfterInferenceOptions extends CallOptions {
  idempotencyKey?: string;
}

export interface OverflowOptions extends CallOptions {
  /** The prompt size the provider reported in its refusal; 0 or unset if unknown. */
  reportedTokens?: number;
  /** BuildContext's recall_query (the last user message's text, as beforeInference sends it). */
  recallQuery?: string;
  mergeLeadingSystem?: boolean;
}

/** What to send to the model. */
export interface PreparedContext {
  /** The view as OpenAI Chat messages. */
  openai: OpenAIMessage[];
  /** The view as Anthropic Messages' system and messages, with cache_control on the breakpoints. */
  anthropic: AnthropicPrompt;
  viewHash: string;
  /** The conversation version the view was built from. */
  version: number;
  /** The whole BuildContext answer (token breakdown, status, breakpoints). */
  view: BuildContextResponse;
  /** The items this call stored. */
  appended: Item[];
}

/** Calls that change nothing, or nothing twice: retried on UNAVAILABLE. */
const SAFE_TO_REPEAT = new Set([
  "getConversation",
  "listConversations",
  "listItems",
  "inspectContext",
  "getContextAt",
  "listForks",
  "listSummaries",
  "listCompactionEvents",
  "expandSummary",
  "searchHistory",
]);

/** True when `address` (HOST:PORT, a gRPC target) stays on this machine. */
export function isLoopback(address: string): boolean {
  let target = address;
  if (target.startsWith("unix:") || target.startsWith("unix-abstract:")) return true;
  for (const scheme of ["dns:///", "ipv4:", "ipv6:"]) if (target.startsWith(scheme)) target = target.slice(scheme.length);
  let host: string;
  if (target.startsWith("[")) host = target.slice(1).split("]")[0];
  else if (target.split(":").length === 2) host = target.split(":")[0];
  else host = target;
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

function pem(value: string | Buffer | undefined): Buffer | undefined {
  if (value === undefined || value === "") return undefined;
  if (Buffer.isBuffer(value)) return value;
  return value.includes("-----BEGIN") ? Buffer.from(value) : readFileSync(value);
}

export class ConvstateClient {
  readonly address: string;
  readonly tenantId: string;
  private readonly token: string;
  private readonly deadlineMs: number;
  private readonly maxAttempts: number;
  private readonly retryBaseMs: number;
  private readonly stub: ConversationStateClient;

  constructor(options: ConvstateClientOptions = {}) {
    const env = options.env ?? process.env;
    this.address = options.address || env.CONVSTATE_ADDRESS || "localhost:50051";
    this.token = options.token ?? env.CONVSTATE_TOKEN ?? "";
    this.tenantId = options.tenantId ?? env.CONVSTATE_TENANT ?? "";
    this.deadlineMs = options.deadlineMs ?? 30000;
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 4);
    this.retryBaseMs = options.retryBaseMs ?? 100;
    const ca = pem(options.caCert ?? env.CONVSTATE_CACERT);
    const cert = pem(options.certChain ?? env.CONVSTATE_CERT);
    const key = pem(options.privateKey ?? env.CONVSTATE_KEY);
    if ((cert === undefined) !== (key === undefined)) {
      throw invalidInput("a client certificate needs its key and the other way round (CONVSTATE_CERT, CONVSTATE_KEY)");
    }
    const tls = ca !== undefined || cert !== undefined || options.tls === true;
    if (this.token && !tls && !isLoopback(this.address) && !options.allowInsecureToken) {
      throw invalidInput(
        `refusing to send the token in plaintext to ${this.address}: give a CA (caCert, CONVSTATE_CACERT) or tls for TLS, reach the service on loopback, or set allowInsecureToken`,
      );
    }
    const credentials = tls ? grpc.credentials.createSsl(ca ?? null, key ?? null, cert ?? null) : grpc.credentials.createInsecure();
    this.stub = new ConversationStateClient(this.address, credentials, options.channelOptions ?? {});
  }

  close(): void {
    this.stub.close();
  }

  // ---- The RPCs --------------------------------------------------------

  createConversation(req: DeepPartial<CreateConversationRequest>, opts?: CallOptions): Promise<Conversation> {
    return this.invoke("createConversation", CreateConversationRequest.fromPartial(this.tenant(req)), opts, false);
  }

  getConversation(conversationId: string, opts?: CallOptions): Promise<Conversation> {
    return this.invoke("getConversation", GetConversationRequest.fromPartial(this.tenant<DeepPartial<GetConversationRequest>>({ conversationId })), opts);
  }

  updateConversation(req: DeepPartial<UpdateConversationRequest>, opts?: CallOptions): Promise<Conversation> {
    return this.invoke("updateConversation", UpdateConversationRequest.fromPartial(this.tenant(req)), opts, false);
  }

  deleteConversation(conversationId: string, opts?: CallOptions): Promise<DeleteConversationResponse> {
    return this.invoke("deleteConversation", DeleteConversationRequest.fromPartial(this.tenant<DeepPartial<DeleteConversationRequest>>({ conversationId })), opts, false);
  }

  /** Retried on UNAVAILABLE only when it carries an idempotency key. */
  async appendTurn(req: DeepPartial<AppendTurnRequest>, opts?: CallOptions): Promise<AppendTurnResponse> {
    const full = AppendTurnRequest.fromPartial(this.tenant(req));
    full.items.forEach((it, i) => checkItem(it, `items[${i}]`));
    return this.invoke("appendTurn", full, opts, full.idempotencyKey !== "");
  }

  listItems(req: DeepPartial<ListItemsRequest>, opts?: CallOptions): Promise<ListItemsResponse> {
    return this.invoke("listItems", ListItemsRequest.fromPartial(this.tenant(req)), opts);
  }

  /** Every stored item, all pages. */
  async listAllItems(conversationId: string, opts?: CallOptions): Promise<Item[]> {
    const items: Item[] = [];
    let pageToken = "";
    do {
      const page = await this.listItems({ conversationId, pageSize: 1000, pageToken }, opts);
      items.push(...page.items);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    return items;
  }

  /** Retried on UNAVAILABLE unless it reports a provider overflow (which compacts each time). */
  async buildContext(req: DeepPartial<BuildContextRequest>, opts?: CallOptions): Promise<BuildContextResponse> {
    const full = BuildContextRequest.fromPartial(this.tenant(req));
    full.pendingInput.forEach((it, i) => checkItem(it, `pending_input[${i}]`));
    return this.invoke("buildContext", full, opts, !full.providerOverflow);
  }

  inspectContext(req: DeepPartial<InspectContextRequest>, opts?: CallOptions): Promise<InspectContextResponse> {
    return this.invoke("inspectContext", InspectContextRequest.fromPartial(this.tenant(req)), opts);
  }

  getContextAt(req: DeepPartial<GetContextAtRequest>, opts?: CallOptions): Promise<BuildContextResponse> {
    return this.invoke("getContextAt", GetContextAtRequest.fromPartial(this.tenant(req)), opts);
  }

  listCompactionEvents(req: DeepPartial<ListCompactionEventsRequest>, opts?: CallOptions): Promise<ListCompactionEventsResponse> {
    return this.invoke("listCompactionEvents", ListCompactionEventsRequest.fromPartial(this.tenant(req)), opts);
  }

  /** Never repeated (a compaction each time). */
  compact(req: DeepPartial<CompactRequest>, opts?: CallOptions): Promise<CompactResponse> {
    return this.invoke("compact", CompactRequest.fromPartial(this.tenant(req)), opts, false);
  }

  /**
   * Takes the conversation back to `toSequence` (what followed becomes the
   * fork `abandonedConversationId`, named by the server when empty).
   * Retried on UNAVAILABLE only when it carries an idempotency key.
   */
  rewindConversation(req: DeepPartial<RewindConversationRequest>, opts?: CallOptions): Promise<RewindConversationResponse> {
    const full = RewindConversationRequest.fromPartial(this.tenant(req));
    return this.invoke("rewindConversation", full, opts, full.idempotencyKey !== "");
  }

  // ---- The inference helper ---------------------------------------------

  /**
   * Before a model call: appends the new OpenAI Chat messages (user,
   * assistant with tool_calls, tool results, system) in one AppendTurn with
   * an idempotency key, creating the conversation first when it does not
   * exist and `opts.model` is given (its leading system messages, or
   * opts.systemPrompt, become the system prompt; when the conversation
   * exists, leading system messages are not appended: its stored system
   * prompt stands), then builds the context and returns it in both
   * providers' formats.
   */
  async beforeInference(conversationId: string, newMessages: OpenAIMessage[], opts: BeforeInferenceOptions = {}): Promise<PreparedContext> {
    if (!Array.isArray(newMessages)) throw invalidInput("newMessages: expected an array");
    const { system, rest } = splitLeadingSystem(newMessages);
    const items = await this.toItems(conversationId, rest, opts);
    const key = opts.idempotencyKey ?? randomUUID();
    let appended: Item[] = [];
    const append = async () => {
      if (items.length === 0) {
        await this.getConversation(conversationId, opts);
        return;
      }
      const res = await this.appendTurn({ conversationId, items, idempotencyKey: key, taskBoundary: opts.taskBoundary ?? false }, opts);
      appended = res.items;
    };
    try {
      await append();
    } catch (err) {
      if (!(err instanceof ConvstateError) || err.code !== grpc.status.NOT_FOUND || !opts.model) throw err;
      await this.ensureConversation(conversationId, opts.model, opts.systemPrompt ?? system, opts);
      await append();
    }
    const recallQuery = opts.recall === false ? "" : recallQueryOf(items);
    return this.prepare(await this.buildContext({ conversationId, recallQuery }, opts), appended, opts.mergeLeadingSystem);
  }

  /**
   * After a model call: appends its answer (an OpenAI Chat assistant message
   * or an Anthropic Messages one) with an idempotency key and the
   * provider's usage (OpenAI's or Anthropic's usage object).
   */
  async afterInference(
    conversationId: string,
    assistantMessage: unknown,
    usage?: OpenAIUsage | AnthropicUsage | null,
    opts: AfterInferenceOptions = {},
  ): Promise<AppendTurnResponse> {
    const items = assistantToItems(assistantMessage);
    return this.appendTurn(
      { conversationId, items, usage: toProviderUsage(usage), idempotencyKey: opts.idempotencyKey ?? randomUUID() },
      opts,
    );
  }

  /**
   * The provider refused the last view as too long: tells convstate so
   * (it corrects its estimate and compacts harder) and returns the new view.
   */
  async rebuildAfterOverflow(conversationId: string, opts: OverflowOptions = {}): Promise<PreparedContext> {
    const view = await this.buildContext(
      {
        conversationId,
        providerOverflow: true,
        providerReportedTokens: Math.max(0, Math.floor(opts.reportedTokens ?? 0)),
        recallQuery: truncateUtf8(opts.recallQuery ?? "", MAX_RECALL_QUERY_BYTES),
      },
      opts,
    );
    return this.prepare(view, [], opts.mergeLeadingSystem);
  }

  /** Creates the conversation unless it exists (ALREADY_EXISTS from a concurrent creation is fine). */
  async ensureConversation(
    conversationId: string,
    model: string,
    systemPrompt: string,
    opts: BeforeInferenceOptions = {},
  ): Promise<void> {
    try {
      await this.createConversation(
        {
          conversationId,
          model: checkText(model, "model"),
          systemPrompt: checkText(systemPrompt, "system prompt"),
          pinnedInstructions: checkText(opts.pinnedInstructions ?? "", "pinned instructions"),
          profileOverrides: opts.profileOverrides ? ProfileOverrides.fromPartial(opts.profileOverrides) : undefined,
        },
        opts,
      );
    } catch (err) {
      if (!(err instanceof ConvstateError) || err.code !== grpc.status.ALREADY_EXISTS) throw err;
    }
  }

  /** A view in both formats. */
  prepare(view: BuildContextResponse, appended: Item[], mergeLeadingSystem = false): PreparedContext {
    return { openai: viewToOpenAI(view, { mergeLeadingSystem }), anthropic: viewToAnthropic(view), viewHash: view.viewHash, version: view.version, view, appended };
  }

  /** Messages as items; tool results whose calls the messages do not hold are named from the stored history. */
  private async toItems(conversationId: string, messages: OpenAIMessage[], opts: CallOptions): Promise<NewItem[]> {
    let stored: Map<string, string> | undefined;
    const unresolved = new Set<string>();
    try {
      return messagesToItems(messages, (id) => {
        if (stored) return stored.get(id);
        unresolved.add(id);
        return undefined;
      });
    } catch (err) {
      if (unresolved.size === 0) throw err;
    }
    try {
      stored = toolNamesOf(await this.listAllItems(conversationId, opts));
    } catch (err) {
      if (!(err instanceof ConvstateError) || err.code !== grpc.status.NOT_FOUND) throw err;
      stored = new Map();
    }
    return messagesToItems(messages, (id) => stored!.get(id));
  }

  // ---- Plumbing ------------------------------------------------------------

  private tenant<T extends { tenantId?: string }>(req: T): T {
    return req.tenantId ? req : { ...req, tenantId: this.tenantId };
  }

  private metadata(opts?: CallOptions): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    if (opts?.traceparent) md.set("traceparent", opts.traceparent);
    for (const [k, v] of Object.entries(opts?.metadata ?? {})) md.set(k, v);
    return md;
  }

  private async invoke<Res>(method: string, request: unknown, opts?: CallOptions, retryable = SAFE_TO_REPEAT.has(method)): Promise<Res> {
    const rpc = method.charAt(0).toUpperCase() + method.slice(1);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<Res>(method, request, opts);
      } catch (e) {
        const err = e as grpc.ServiceError;
        const code = typeof err.code === "number" ? err.code : grpc.status.UNKNOWN;
        if (code === grpc.status.UNAVAILABLE && retryable && attempt < this.maxAttempts) {
          const wait = Math.min(2000, this.retryBaseMs * 2 ** (attempt - 1)) * (0.5 + Math.random());
          await new Promise((r) => setTimeout(r, wait));
          continue;
        }
        throw new ConvstateError(code, err.details ?? err.message ?? String(e), rpc);
      }
    }
  }

  private once<Res>(method: string, request: unknown, opts?: CallOptions): Promise<Res> {
    const deadline = new Date(Date.now() + (opts?.deadlineMs ?? this.deadlineMs));
    const fn = (this.stub as unknown as Record<string, Function>)[method];
    return new Promise<Res>((resolve, reject) => {
      fn.call(this.stub, request, this.metadata(opts), { deadline }, (err: grpc.ServiceError | null, res: Res) => {
        if (err) reject(err);
        else resolve(res);
      });
    });
  }
}

function checkItem(it: NewItem, where: string): void {
  checkText(it.content, `${where}.content`);
  checkText(it.toolName, `${where}.tool_name`);
  checkText(it.toolCallId, `${where}.tool_call_id`);
  for (const [k, v] of Object.entries(it.metadata ?? {})) {
    checkText(k, `${where}.metadata key`);
    checkText(v, `${where}.metadata[${k}]`);
  }
  if (it.kind === ItemKind.ITEM_KIND_SUMMARY_MARKER) throw invalidInput(`${where}: summary markers are written by the service only`);
}
