"""Provider messages and usage in, convstate items and usage out.

``items_from_messages`` turns chat messages, OpenAI Chat Completions or
Anthropic Messages shaped (both may be mixed), into the ``NewItem``\\ s one
AppendTurn stores:

* a message's text (a string, or a list of ``{"type": "text"}`` parts,
  joined with newlines) becomes one MESSAGE item of the message's role
  (``system``, ``user`` or ``assistant``);
* OpenAI ``tool_calls`` of an assistant message, and Anthropic ``tool_use``
  blocks, become TOOL_CALL items (the arguments' JSON text as content, the
  function's name as tool_name, the call id as tool_call_id), after the
  message's text;
* an OpenAI ``{"role": "tool"}`` message, and each Anthropic
  ``tool_result`` block, becomes a TOOL_RESULT item (role TOOL). Its
  tool_name is the message's ``name`` when given, else the name of the call
  with the same id among the same messages, else empty;
* an assistant's reasoning, OpenAI-compatible ``reasoning_content`` or an
  Anthropic ``thinking`` block, becomes a REASONING item, before the text.
  Anthropic ``redacted_thinking`` blocks carry nothing readable and are
  left out.

Anything else (images, audio, documents, unknown block types) is refused
with a ``ValueError`` naming where it was: the service stores text only.
Every string must be encodable as UTF-8 (a ``str`` with lone surrogates is
not); ``bytes`` are accepted when they are valid UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._proto import pb

_ROLES = {
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
}


def text(value: Any, where: str) -> str:
    """``value`` as a str that is valid UTF-8, or a ValueError naming ``where``."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{where}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{where}: not valid UTF-8 (unpaired surrogate at character {error.start})"
        ) from None
    return value


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` for an SDK object."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _as_mapping(obj: Any, where: str) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)  # pydantic models of the provider SDKs
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    raise ValueError(f"{where}: expected a dict, got {type(obj).__name__}")


def _arguments(value: Any, where: str) -> str:
    """A tool call's arguments as JSON text: a string is kept verbatim."""
    if value is None:
        return "{}"
    if isinstance(value, (str, bytes, bytearray)):
        return text(value, where)
    try:
        encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: not JSON-serializable ({error})") from None
    return text(encoded, where)


def _required_id(value: Any, where: str) -> str:
    s = text(value, where) if value is not None else ""
    if not s:
        raise ValueError(f"{where}: required")
    return s


def _tool_result_content(content: Any, where: str) -> str:
    """An Anthropic tool_result's content: a string or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, (str, bytes, bytearray)):
        return text(content, where)
    if isinstance(content, Iterable) and not isinstance(content, Mapping):
        parts = []
        for j, block in enumerate(content):
            block = _as_mapping(block, f"{where}[{j}]")
            if block.get("type") != "text":
                raise ValueError(
                    f"{where}[{j}].type: only text is stored, not {block.get('type')!r}"
                )
            parts.append(text(block.get("text", ""), f"{where}[{j}].text"))
        return "\n".join(parts)
    raise ValueError(f"{where}: expected a string or a list of text blocks")


def items_from_messages(messages: Iterable[Any]) -> list[pb.NewItem]:
    """The items that store ``messages``, in order (see the module's doc)."""
    if isinstance(messages, Mapping) or isinstance(messages, (str, bytes)):
        raise ValueError("messages: expected a list of messages, got a single value")
    msgs = [_as_mapping(m, f"messages[{i}]") for i, m in enumerate(messages)]

    # Tool names by call id, for results that do not name their tool.
    names: dict[str, str] = {}
    for m in msgs:
        for call in _get(m, "tool_calls") or []:
            function = _get(call, "function") or {}
            if isinstance(_get(call, "id"), str) and isinstance(_get(function, "name"), str):
                names[_get(call, "id")] = _get(function, "name")
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if _get(block, "type") == "tool_use":
                    if isinstance(_get(block, "id"), str) and isinstance(_get(block, "name"), str):
                        names[_get(block, "id")] = _get(block, "name")

    items: list[pb.NewItem] = []
    for i, m in enumerate(msgs):
        items.extend(_message_items(m, f"messages[{i}]", names))
    return items


def _message_items(m: Mapping[str, Any], where: str, names: Mapping[str, str]) -> list[pb.NewItem]:
    role_name = m.get("role")
    if role_name == "tool":
        call_id = _required_id(m.get("tool_call_id"), f"{where}.tool_call_id")
        name = m.get("name")
        tool_name = text(name, f"{where}.name") if name else names.get(call_id, "")
        return [
            pb.NewItem(
                role=pb.ROLE_TOOL,
                kind=pb.ITEM_KIND_TOOL_RESULT,
                content=_tool_result_content(m.get("content"), f"{where}.content"),
                tool_name=tool_name,
                tool_call_id=call_id,
            )
        ]
    if role_name not in _ROLES:
        raise ValueError(
            f"{where}.role: expected system, user, assistant or tool, got {role_name!r}"
        )
    role = _ROLES[role_name]
    assistant = role == pb.ROLE_ASSISTANT
    items: list[pb.NewItem] = []
    texts: list[str] = []

    def flush_text() -> None:
        if texts:
            items.append(pb.NewItem(role=role, kind=pb.ITEM_KIND_MESSAGE, content="\n".join(texts)))
            texts.clear()

    reasoning = m.get("reasoning_content")
    if reasoning:
        if not assistant:
            raise ValueError(f"{where}.reasoning_content: only assistant messages carry reasoning")
        items.append(
            pb.NewItem(
                role=role,
                kind=pb.ITEM_KIND_REASONING,
                content=text(reasoning, f"{where}.reasoning_content"),
            )
        )

    content = m.get("content")
    if content is None:
        pass
    elif isinstance(content, (str, bytes, bytearray)):
        texts.append(text(content, f"{where}.content"))
    elif isinstance(content, Iterable) and not isinstance(content, Mapping):
        for j, raw in enumerate(content):
            at = f"{where}.content[{j}]"
            block = _as_mapping(raw, at)
            kind = block.get("type")
            if kind == "text":
                texts.append(text(block.get("text", ""), f"{at}.text"))
            elif kind == "tool_use":
                if not assistant:
                    raise ValueError(f"{at}: a tool_use block belongs to an assistant message")
                flush_text()
                items.append(
                    pb.NewItem(
                        role=role,
                        kind=pb.ITEM_KIND_TOOL_CALL,
                        content=_arguments(block.get("input"), f"{at}.input"),
                        tool_name=_required_id(block.get("name"), f"{at}.name"),
                        tool_call_id=_required_id(block.get("id"), f"{at}.id"),
                    )
                )
            elif kind == "tool_result":
                if role != pb.ROLE_USER:
                    raise ValueError(f"{at}: a tool_result block belongs to a user message")
                flush_text()
                call_id = _required_id(block.get("tool_use_id"), f"{at}.tool_use_id")
                items.append(
                    pb.NewItem(
                        role=pb.ROLE_TOOL,
                        kind=pb.ITEM_KIND_TOOL_RESULT,
                        content=_tool_result_content(block.get("content"), f"{at}.content"),
                        tool_name=names.get(call_id, ""),
                        tool_call_id=call_id,
                    )
                )
            elif kind == "thinking":
                if not assistant:
                    raise ValueError(f"{at}: a thinking block belongs to an assistant message")
                flush_text()
                items.append(
                    pb.NewItem(
                        role=role,
                        kind=pb.ITEM_KIND_REASONING,
                        content=text(block.get("thinking", ""), f"{at}.thinking"),
                    )
                )
            elif kind == "redacted_thinking":
                continue
            else:
                raise ValueError(f"{at}.type: only text is stored, not {kind!r}")
    else:
        raise ValueError(f"{where}.content: expected a string or a list of content blocks")
    flush_text()

    tool_calls = m.get("tool_calls")
    if tool_calls:
        if not assistant:
            raise ValueError(f"{where}.tool_calls: only assistant messages make tool calls")
        if isinstance(tool_calls, (Mapping, str, bytes)):
            raise ValueError(f"{where}.tool_calls: expected a list")
        for j, raw in enumerate(tool_calls):
            at = f"{where}.tool_calls[{j}]"
            call = _as_mapping(raw, at)
            kind = call.get("type", "function")
            if kind != "function":
                raise ValueError(f"{at}.type: only function calls are stored, not {kind!r}")
            function = _as_mapping(call.get("function"), f"{at}.function")
            items.append(
                pb.NewItem(
                    role=role,
                    kind=pb.ITEM_KIND_TOOL_CALL,
                    content=_arguments(function.get("arguments"), f"{at}.function.arguments"),
                    tool_name=_required_id(function.get("name"), f"{at}.function.name"),
                    tool_call_id=_required_id(call.get("id"), f"{at}.id"),
                )
            )

    if not items:
        # A message with nothing but empty text is still a message.
        items.append(pb.NewItem(role=role, kind=pb.ITEM_KIND_MESSAGE, content=""))
    return items


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected a whole number of tokens, got {value!r}")
    if value < 0:
        raise ValueError(f"{where}: must not be negative, got {value}")
    return value


def usage_from_provider(usage: Any) -> pb.ProviderUsage | None:
    """The provider's reported usage as ``ProviderUsage``; None for None.

    Accepts a ``ProviderUsage``, a dict, or a provider SDK's usage object:

    * OpenAI Chat Completions: ``prompt_tokens`` (cached ones included),
      ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
      ``completion_tokens_details.reasoning_tokens``;
    * OpenAI Responses: ``input_tokens``, ``output_tokens``,
      ``input_tokens_details.cached_tokens``,
      ``output_tokens_details.reasoning_tokens``;
    * Anthropic Messages: ``input_tokens`` counts only the prompt after the
      last cache breakpoint, so the prompt's size is ``input_tokens +
      cache_read_input_tokens + cache_creation_input_tokens``;
      ``cached_input_tokens`` is ``cache_read_input_tokens``.

    ``input_tokens`` is always the whole prompt: the service compares it
    with its own estimate of that prompt to correct approximate counts.
    """
    if usage is None:
        return None
    if isinstance(usage, pb.ProviderUsage):
        return usage
    u = _as_mapping(usage, "usage")
    if "prompt_tokens" in u or "completion_tokens" in u:
        prompt = _count(u.get("prompt_tokens"), "usage.prompt_tokens")
        completion = _count(u.get("completion_tokens"), "usage.completion_tokens")
        cached = _count(
            _get(u.get("prompt_tokens_details") or {}, "cached_tokens"),
            "usage.prompt_tokens_details.cached_tokens",
        )
        reasoning = _count(
            _get(u.get("completion_tokens_details") or {}, "reasoning_tokens"),
            "usage.completion_tokens_details.reasoning_tokens",
        )
    elif "input_tokens_details" in u or "output_tokens_details" in u:
        prompt = _count(u.get("input_tokens"), "usage.input_tokens")
        completion = _count(u.get("output_tokens"), "usage.output_tokens")
        cached = _count(
            _get(u.get("input_tokens_details") or {}, "cached_tokens"),
            "usage.input_tokens_details.cached_tokens",
        )
        reasoning = _count(
            _get(u.get("output_tokens_details") or {}, "reasoning_tokens"),
            "usage.output_tokens_details.reasoning_tokens",
        )
    elif "input_tokens" in u or "output_tokens" in u:
        read = _count(u.get("cache_read_input_tokens"), "usage.cache_read_input_tokens")
        written = _count(u.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens")
        prompt = _count(u.get("input_tokens"), "usage.input_tokens") + read + written
        completion = _count(u.get("output_tokens"), "usage.output_tokens")
        cached = read
        reasoning = 0
    else:
        raise ValueError(
            "usage: expected OpenAI (prompt_tokens, completion_tokens) or Anthropic "
            "(input_tokens, output_tokens) token counts"
        )
    return pb.ProviderUsage(
        input_tokens=prompt,
        output_tokens=completion,
        cached_input_tokens=cached,
        reasoning_tokens=reasoning,
    )
