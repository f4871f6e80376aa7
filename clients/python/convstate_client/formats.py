"""A BuildContext view as a provider's request: OpenAI Chat or Anthropic Messages.

Both functions take the view's ``entries`` (and, for Anthropic, its
``cache_breakpoints``) and keep the view's order exactly; they never drop,
reorder or rewrite content, with one exception: REASONING entries are left
out, because neither API accepts an earlier turn's reasoning back as input
(Anthropic wants signed thinking blocks, which the service does not keep).

OpenAI Chat Completions (``to_openai``)
    Every system-role entry (system prompt, pinned instructions, summaries,
    the fact ledger, recalled passages) becomes a ``{"role": "system"}``
    message where it stands in the view: the summaries and the ledger come
    right after the system prompt, recalled passages after the live items
    (the Chat API accepts system messages anywhere). With
    ``merge_leading_system=True`` the system messages before the first
    other message are joined into one (blank line between), for servers
    whose chat template wants a single system message first. User entries
    become user messages; assistant text an assistant message; a tool call
    joins the assistant message right before it (its text, or the calls
    before it) as one more entry of ``tool_calls``
    (``{"id", "type": "function", "function": {"name", "arguments"}}``),
    else starts an assistant message with ``content: None``; tool results
    become ``{"role": "tool", "tool_call_id", "content"}``.

Anthropic Messages (``to_anthropic``)
    The system-role entries before the first other entry become the
    ``system`` list, one text block each. Every other entry becomes one
    content block: user and assistant text a ``text`` block, a tool call a
    ``tool_use`` block (``input`` parsed from the arguments' JSON; text
    that is not a JSON object becomes ``{"arguments": TEXT}``), a tool
    result a ``tool_result`` block in a user message, and a system-role
    entry after the first message (recalled passages) a user ``text``
    block, the API having no system role inside ``messages``. Consecutive
    blocks of the same role go into one message, so roles alternate; no
    block is ever merged into another. Text blocks with empty text are
    left out (the API refuses them).

    Cache breakpoints: a breakpoint's ``last_entry`` is the index of the
    last entry of its prefix. ``cache_control: {"type": "ephemeral"}`` goes
    on the block made from that entry; when that entry made no block (a
    REASONING entry, empty text), on the block of the nearest entry before
    it that made one, which ends the same prefix of the request. A
    breakpoint inside the leading system part marks a ``system`` block.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._proto import pb

EPHEMERAL = {"type": "ephemeral"}


def _tool_call(entry: Any) -> dict[str, Any]:
    return {
        "id": entry.tool_call_id,
        "type": "function",
        "function": {"name": entry.tool_name, "arguments": entry.content},
    }


def to_openai(entries: Iterable[Any], *, merge_leading_system: bool = False) -> list[dict[str, Any]]:
    """The view's entries as OpenAI Chat Completions ``messages``."""
    messages: list[dict[str, Any]] = []
    # The assistant message the next tool call joins, if any.
    open_assistant: dict[str, Any] | None = None
    leading_system = True
    for e in entries:
        if e.kind == pb.ITEM_KIND_REASONING:
            continue
        if e.role == pb.ROLE_SYSTEM:
            if leading_system and merge_leading_system and messages:
                messages[-1]["content"] += "\n\n" + e.content
            else:
                messages.append({"role": "system", "content": e.content})
            open_assistant = None
            continue
        leading_system = False
        if e.kind == pb.ITEM_KIND_TOOL_CALL:
            if open_assistant is None:
                open_assistant = {"role": "assistant", "content": None, "tool_calls": []}
                messages.append(open_assistant)
            open_assistant.setdefault("tool_calls", []).append(_tool_call(e))
            continue
        if e.kind == pb.ITEM_KIND_TOOL_RESULT or e.role == pb.ROLE_TOOL:
            messages.append({"role": "tool", "tool_call_id": e.tool_call_id, "content": e.content})
            open_assistant = None
            continue
        if e.role == pb.ROLE_ASSISTANT:
            open_assistant = {"role": "assistant", "content": e.content}
            messages.append(open_assistant)
            continue
        messages.append({"role": "user", "content": e.content})
        open_assistant = None
    return messages


def _tool_input(arguments: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


@dataclass
class AnthropicRequest:
    """The ``system`` and ``messages`` parameters of a Messages API call.

    ``block_of_entry`` maps an entry's index to where its block is:
    ``("system", i)`` or ``("messages", message_index, block_index)``;
    entries that made no block are absent.
    """

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    block_of_entry: dict[int, tuple[Any, ...]]

    def block(self, where: tuple[Any, ...]) -> dict[str, Any]:
        """The block at a ``block_of_entry`` value."""
        if where[0] == "system":
            return self.system[where[1]]
        return self.messages[where[1]]["content"][where[2]]


def to_anthropic(entries: Sequence[Any], cache_breakpoints: Iterable[Any] = ()) -> AnthropicRequest:
    """The view as Anthropic Messages ``system`` and ``messages``, with cache_control."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    where: dict[int, tuple[Any, ...]] = {}
    leading_system = True
    for i, e in enumerate(entries):
        if e.kind == pb.ITEM_KIND_REASONING:
            continue
        if leading_system and e.role == pb.ROLE_SYSTEM:
            if e.content:
                system.append({"type": "text", "text": e.content})
                where[i] = ("system", len(system) - 1)
            continue
        leading_system = False
        if e.kind == pb.ITEM_KIND_TOOL_CALL:
            role = "assistant"
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": e.tool_call_id,
                "name": e.tool_name,
                "input": _tool_input(e.content),
            }
        elif e.kind == pb.ITEM_KIND_TOOL_RESULT or e.role == pb.ROLE_TOOL:
            role = "user"
            block = {"type": "tool_result", "tool_use_id": e.tool_call_id, "content": e.content}
        else:
            if not e.content:
                continue
            role = "assistant" if e.role == pb.ROLE_ASSISTANT else "user"
            block = {"type": "text", "text": e.content}
        if not messages or messages[-1]["role"] != role:
            messages.append({"role": role, "content": []})
        messages[-1]["content"].append(block)
        where[i] = ("messages", len(messages) - 1, len(messages[-1]["content"]) - 1)

    request = AnthropicRequest(system=system, messages=messages, block_of_entry=where)
    for bp in cache_breakpoints:
        last = bp.last_entry
        if last < 0 or last >= len(entries):
            raise ValueError(f"cache breakpoint at entry {last}: the view has {len(entries)} entries")
        for j in range(last, -1, -1):
            if j in where:
                request.block(where[j])["cache_control"] = dict(EPHEMERAL)
                break
    return request
