// Conversions between the providers' message formats and convstate's items
// and views: OpenAI Chat Completions messages in (what a gateway receives
// and appends), OpenAI Chat and Anthropic Messages out (what it sends).

import { checkText, invalidInput } from "./errors";
import {
  BuildContextResponse,
  CacheBreakpoint,
  ContextEntry,
  Item,
  ItemKind,
  NewItem,
  ProviderUsage,
  Role,
} from "./gen/convstate/v1/convstate";

// ---- OpenAI Chat Completions -------------------------------------------

export interface OpenAIToolCall {
  id: string;
  type?: "function";
  function: { name: string; arguments: string };
}

export interface OpenAIContentPart {
  type: string;
  text?: string;
  refusal?: string;
  [key: string]: unknown;
}

export interface OpenAIMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content?: string | null | OpenAIContentPart[];
  tool_calls?: OpenAIToolCall[];
  tool_call_id?: string;
  name?: string;
  [key: string]: unknown;
}

/** OpenAI's `usage` object (Chat Completions). */
export interface OpenAIUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

// ---- Anthropic Messages --------------------------------------------------

export interface CacheControl {
  type: "ephemeral";
}

export interface AnthropicTextBlock {
  type: "text";
  text: string;
  cache_control?: CacheControl;
}

export interface AnthropicToolUseBlock {
  type: "tool_use";
  id: string;
  name: string;
  input: Record<string, unknown>;
  cache_control?: CacheControl;
}

export interface AnthropicToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  content: string;
  cache_control?: CacheControl;
}

export type AnthropicBlock = AnthropicTextBlock | AnthropicToolUseBlock | AnthropicToolResultBlock;

export interface AnthropicMessage {
  role: "user" | "assistant";
  content: AnthropicBlock[];
}

/** The `system` and `messages` of an Anthropic Messages request. */
export interface AnthropicPrompt {
  system: AnthropicTextBlock[];
  messages: AnthropicMessage[];
}

/** Anthropic's `usage` object (Messages). */
export interface AnthropicUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

// ---- Messages to items -----------------------------------------------------

export function isSystemRole(role: unknown): boolean {
  return role === "system" || role === "developer";
}

/**
 * The leading system (or developer) messages' text, joined by blank lines,
 * and the messages after them.
 */
export function splitLeadingSystem(messages: OpenAIMessage[]): { system: string; rest: OpenAIMessage[] } {
  let i = 0;
  const parts: string[] = [];
  while (i < messages.length && isSystemRole(messages[i]?.role)) {
    parts.push(contentText(messages[i].content, `messages[${i}]`));
    i++;
  }
  return { system: parts.join("\n\n"), rest: messages.slice(i) };
}

/** The text of a message's content: a string, or its text parts joined by newlines. */
export function contentText(content: OpenAIMessage["content"], where: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return checkText(content, `${where}.content`);
  if (!Array.isArray(content)) throw invalidInput(`${where}.content: expected a string or an array of parts`);
  const texts: string[] = [];
  content.forEach((part, j) => {
    const at = `${where}.content[${j}]`;
    if (part === null || typeof part !== "object") throw invalidInput(`${at}: expected an object`);
    if (part.type === "text") texts.push(checkText(part.text, `${at}.text`));
    else if (part.type === "refusal") texts.push(checkText(part.refusal, `${at}.refusal`));
    else throw invalidInput(`${at}: content parts of type ${JSON.stringify(part.type)} are not supported (convstate stores text)`);
  });
  return texts.join("\n");
}

/** The service refuses longer recall queries (bytes of UTF-8). */
export const MAX_RECALL_QUERY_BYTES = 8192;

/** `s` cut to at most `maxBytes` of UTF-8, on a character boundary. */
export function truncateUtf8(s: string, maxBytes: number): string {
  const bytes = Buffer.from(s, "utf8");
  if (bytes.length <= maxBytes) return s;
  let end = maxBytes;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // Not inside a character.
  return bytes.subarray(0, end).toString("utf8");
}

/** The recall query for a request: the text of its last user message (capped at MAX_RECALL_QUERY_BYTES), or "". */
export function recallQueryOf(items: Array<Pick<NewItem, "role" | "kind" | "content">>): string {
  for (let i = items.length - 1; i >= 0; i--) {
    if (items[i].role === Role.ROLE_USER && items[i].kind === ItemKind.ITEM_KIND_MESSAGE) return truncateUtf8(items[i].content, MAX_RECALL_QUERY_BYTES);
  }
  return "";
}

function newItem(role: Role, kind: ItemKind, content: string, toolName = "", toolCallId = ""): NewItem {
  return NewItem.fromPartial({ role, kind, content, toolName, toolCallId });
}

/** Finds the tool name of a tool call id the messages themselves do not name. */
export type ToolNameLookup = (toolCallId: string) => string | undefined;

/** Tool names by call id, from tool call items (stored or not). */
export function toolNamesOf(items: Array<Pick<Item, "kind" | "toolName" | "toolCallId">>): Map<string, string> {
  const names = new Map<string, string>();
  for (const it of items) {
    if (it.kind === ItemKind.ITEM_KIND_TOOL_CALL && it.toolCallId) names.set(it.toolCallId, it.toolName);
  }
  return names;
}

/**
 * OpenAI Chat messages as items, in order: a user or system message is one
 * item; an assistant message is its text (if any) then one tool call item
 * per tool call; a tool message is a tool result, named after its call
 * (from these messages, or `lookup` for calls made earlier). Throws a local
 * INVALID_ARGUMENT for anything convstate cannot hold (non-text parts,
 * invalid UTF-8, a tool result whose call is unknown); nothing is appended
 * then.
 */
export function messagesToItems(messages: OpenAIMessage[], lookup?: ToolNameLookup): NewItem[] {
  if (!Array.isArray(messages)) throw invalidInput("messages: expected an array");
  const names = new Map<string, string>();
  for (const m of messages) {
    for (const c of (m && Array.isArray(m.tool_calls) ? m.tool_calls : [])) {
      if (c && typeof c.id === "string" && c.function && typeof c.function.name === "string") {
        names.set(c.id, c.function.name);
      }
    }
  }
  const items: NewItem[] = [];
  messages.forEach((m, i) => {
    const where = `messages[${i}]`;
    if (m === null || typeof m !== "object") throw invalidInput(`${where}: expected an object`);
    switch (m.role) {
      case "system":
      case "developer":
        items.push(newItem(Role.ROLE_SYSTEM, ItemKind.ITEM_KIND_MESSAGE, contentText(m.content, where)));
        break;
      case "user":
        items.push(newItem(Role.ROLE_USER, ItemKind.ITEM_KIND_MESSAGE, contentText(m.content, where)));
        break;
      case "assistant": {
        let text = contentText(m.content, where);
        // A refusal (content null) is kept as the answer's text.
        if (text === "" && typeof m.refusal === "string") text = checkText(m.refusal, `${where}.refusal`);
        const calls = m.tool_calls ?? [];
        if (!Array.isArray(calls)) throw invalidInput(`${where}.tool_calls: expected an array`);
        if (text !== "" || calls.length === 0) {
          items.push(newItem(Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, text));
        }
        calls.forEach((c, j) => {
          const at = `${where}.tool_calls[${j}]`;
          if (!c || typeof c !== "object" || !c.function) throw invalidInput(`${at}: expected a function call`);
          items.push(
            newItem(
              Role.ROLE_ASSISTANT,
              ItemKind.ITEM_KIND_TOOL_CALL,
              checkText(c.function.arguments ?? "", `${at}.function.arguments`),
              checkText(c.function.name, `${at}.function.name`),
              checkText(c.id, `${at}.id`),
            ),
          );
        });
        break;
      }
      case "tool": {
        const id = checkText(m.tool_call_id, `${where}.tool_call_id`);
        const name = (typeof m.name === "string" && m.name) || names.get(id) || lookup?.(id);
        if (!name) throw invalidInput(`${where}: no tool call with id ${JSON.stringify(id)} precedes this tool result`);
        items.push(newItem(Role.ROLE_TOOL, ItemKind.ITEM_KIND_TOOL_RESULT, contentText(m.content, where), checkText(name, `${where}.name`), id));
        break;
      }
      default:
        throw invalidInput(`${where}.role: ${JSON.stringify(m.role)} is not one of system, developer, user, assistant, tool`);
    }
  });
  return items;
}

/**
 * An assistant's answer as items: an OpenAI Chat message (content and
 * tool_calls; a refusal without content is kept as its text) or an
 * Anthropic Messages one (content blocks text, tool_use, and thinking, kept
 * as a reasoning item; redacted_thinking is left out).
 */
export function assistantToItems(message: unknown): NewItem[] {
  if (message === null || typeof message !== "object") throw invalidInput("assistant message: expected an object");
  const m = message as { content?: unknown; tool_calls?: unknown };
  const blocks = Array.isArray(m.content) ? (m.content as Array<Record<string, unknown>>) : null;
  const anthropic = blocks !== null && blocks.some((b) => b && (b.type === "tool_use" || b.type === "thinking" || b.type === "redacted_thinking"));
  if (!anthropic) {
    return messagesToItems([{ ...(message as OpenAIMessage), role: "assistant" }]);
  }
  const items: NewItem[] = [];
  blocks!.forEach((b, j) => {
    const at = `assistant.content[${j}]`;
    if (b.type === "text") {
      items.push(newItem(Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_MESSAGE, checkText(b.text, `${at}.text`)));
    } else if (b.type === "thinking") {
      items.push(newItem(Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_REASONING, checkText(b.thinking, `${at}.thinking`)));
    } else if (b.type === "redacted_thinking") {
      // Encrypted reasoning: nothing convstate could show; left out.
    } else if (b.type === "tool_use") {
      items.push(
        newItem(Role.ROLE_ASSISTANT, ItemKind.ITEM_KIND_TOOL_CALL, JSON.stringify(b.input ?? {}),
          checkText(b.name, `${at}.name`), checkText(b.id, `${at}.id`)),
      );
    } else {
      throw invalidInput(`${at}: blocks of type ${JSON.stringify(b.type)} are not supported`);
    }
  });
  return items;
}

/**
 * A provider's usage as convstate's ProviderUsage. OpenAI: prompt_tokens
 * (cached included), completion_tokens, cached_tokens, reasoning_tokens.
 * Anthropic: input_tokens plus the cache's reads and writes (the whole
 * prompt, as OpenAI counts it), output_tokens, cache_read_input_tokens.
 */
export function toProviderUsage(usage: OpenAIUsage | AnthropicUsage | null | undefined): ProviderUsage | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
  if ("prompt_tokens" in usage || "completion_tokens" in usage) {
    const u = usage as OpenAIUsage;
    return ProviderUsage.fromPartial({
      inputTokens: n(u.prompt_tokens),
      outputTokens: n(u.completion_tokens),
      cachedInputTokens: n(u.prompt_tokens_details?.cached_tokens),
      reasoningTokens: n(u.completion_tokens_details?.reasoning_tokens),
    });
  }
  if ("input_tokens" in usage || "output_tokens" in usage) {
    const u = usage as AnthropicUsage;
    return ProviderUsage.fromPartial({
      inputTokens: n(u.input_tokens) + n(u.cache_read_input_tokens) + n(u.cache_creation_input_tokens),
      outputTokens: n(u.output_tokens),
      cachedInputTokens: n(u.cache_read_input_tokens),
    });
  }
  return undefined;
}

// ---- Views out -------------------------------------------------------------

type ViewLike = Pick<BuildContextResponse, "entries" | "cacheBreakpoints">;

/**
 * A view as OpenAI Chat messages, one per entry in order, except that an
 * assistant's tool calls join the assistant message before them (or one of
 * their own, with null content). Reasoning entries are left out: Chat
 * Completions takes none. With `mergeLeadingSystem`, the system entries
 * before the first turn (system prompt, pinned instructions, summaries,
 * ledger) are one system message, joined by blank lines, for servers that
 * take a single one.
 */
export function viewToOpenAI(view: ViewLike, options: { mergeLeadingSystem?: boolean } = {}): OpenAIMessage[] {
  const out: OpenAIMessage[] = [];
  let open: OpenAIMessage | null = null; // The assistant message tool calls may join.
  let leading = true;
  for (const e of view.entries) {
    if (e.kind === ItemKind.ITEM_KIND_REASONING) continue;
    const system = e.role === Role.ROLE_SYSTEM && e.kind !== ItemKind.ITEM_KIND_TOOL_RESULT && e.kind !== ItemKind.ITEM_KIND_TOOL_CALL;
    if (!system) leading = false;
    if (system && leading && options.mergeLeadingSystem && out.length > 0) {
      out[out.length - 1].content += "\n\n" + e.content;
      continue;
    }
    if (e.kind === ItemKind.ITEM_KIND_TOOL_CALL) {
      const call: OpenAIToolCall = { id: e.toolCallId, type: "function", function: { name: e.toolName, arguments: e.content } };
      if (open === null) {
        open = { role: "assistant", content: null, tool_calls: [] };
        out.push(open);
      }
      (open.tool_calls ??= []).push(call);
      continue;
    }
    open = null;
    if (e.kind === ItemKind.ITEM_KIND_TOOL_RESULT) {
      out.push({ role: "tool", tool_call_id: e.toolCallId, content: e.content });
    } else if (e.role === Role.ROLE_ASSISTANT) {
      open = { role: "assistant", content: e.content };
      out.push(open);
    } else if (e.role === Role.ROLE_SYSTEM) {
      out.push({ role: "system", content: e.content });
    } else {
      out.push({ role: "user", content: e.content });
    }
  }
  return out;
}

/**
 * A view as an Anthropic Messages prompt: the system-role entries before
 * the first other entry make up `system` (one text block each); later
 * system entries (recalled passages) become user text, since Messages
 * takes no system turn; consecutive entries of one role share a message
 * (tool results are user blocks, tool calls assistant tool_use blocks).
 * Each cache breakpoint puts `cache_control: {type: "ephemeral"}` on the
 * block that ends its prefix (entries 0..last_entry). Empty text and
 * reasoning entries are left out (Anthropic refuses empty text blocks and
 * unsigned thinking blocks).
 */
export function viewToAnthropic(view: ViewLike): AnthropicPrompt {
  const system: AnthropicTextBlock[] = [];
  const messages: AnthropicMessage[] = [];
  const blockAt: Array<AnthropicBlock | undefined> = [];
  let leading = true;
  let last: AnthropicBlock | undefined;
  const push = (role: "user" | "assistant", block: AnthropicBlock) => {
    const tail = messages[messages.length - 1];
    if (tail && tail.role === role) tail.content.push(block);
    else messages.push({ role, content: [block] });
    last = block;
  };
  view.entries.forEach((e: ContextEntry, i: number) => {
    const isSystem = e.role === Role.ROLE_SYSTEM && e.kind !== ItemKind.ITEM_KIND_TOOL_RESULT;
    if (!isSystem) leading = false;
    if (e.kind === ItemKind.ITEM_KIND_REASONING) {
      // Left out.
    } else if (e.kind === ItemKind.ITEM_KIND_TOOL_CALL) {
      push("assistant", { type: "tool_use", id: e.toolCallId, name: e.toolName, input: toolInput(e.content) });
    } else if (e.kind === ItemKind.ITEM_KIND_TOOL_RESULT) {
      push("user", { type: "tool_result", tool_use_id: e.toolCallId, content: e.content });
    } else if (e.content !== "") {
      const block: AnthropicTextBlock = { type: "text", text: e.content };
      if (isSystem && leading) {
        system.push(block);
        last = block;
      } else {
        push(e.role === Role.ROLE_ASSISTANT ? "assistant" : "user", block);
      }
    }
    blockAt[i] = last;
  });
  for (const bp of view.cacheBreakpoints as CacheBreakpoint[]) {
    const block = blockAt[Math.min(bp.lastEntry, blockAt.length - 1)];
    if (block) block.cache_control = { type: "ephemeral" };
  }
  return { system, messages };
}

/** A tool call's arguments as the object Anthropic's tool_use.input must be. */
function toolInput(args: string): Record<string, unknown> {
  try {
    const v = JSON.parse(args);
    if (v !== null && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // Not JSON: kept as text below.
  }
  return { arguments: args };
}

// ---- Provider refusals -----------------------------------------------------

/**
 * True when a provider's error answer says the prompt is too long: HTTP 400
 * (or 413) with OpenAI's `context_length_exceeded` code, or a message that
 * says so (OpenAI-compatible servers word it their own way; Anthropic says
 * "prompt is too long").
 */
export function isContextLengthExceeded(status: number, body: unknown): boolean {
  if (status !== 400 && status !== 413) return false;
  const err = (body && typeof body === "object" ? (body as { error?: unknown }).error : undefined) as
    | { code?: unknown; message?: unknown; type?: unknown }
    | string
    | undefined;
  if (err && typeof err === "object" && err.code === "context_length_exceeded") return true;
  const message = typeof err === "string" ? err : err && typeof err.message === "string" ? err.message : typeof body === "string" ? body : "";
  return /context[ _-]length|maximum context|context window|prompt is too long|too many tokens|exceeds? the (model'?s )?(max|context)/i.test(message);
}

/** The prompt size a refusal reports ("resulted in 9000 tokens", "(9000 in the messages", "9000 tokens > 8192 maximum"), or 0. */
export function reportedTokens(body: unknown): number {
  const err = body && typeof body === "object" ? (body as { error?: { message?: unknown } }).error : undefined;
  const message = err && typeof err.message === "string" ? err.message : typeof body === "string" ? body : "";
  const m =
    /resulted in (\d+) tokens/i.exec(message) ??
    /\((\d+) in the messages/i.exec(message) ??
    /(\d+) (?:input )?tokens? > \d+/i.exec(message) ??
    /prompt (?:has|contains|is) (\d+) tokens/i.exec(message);
  return m ? Number(m[1]) : 0;
}
