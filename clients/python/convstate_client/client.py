"""The client a gateway calls around each inference: ``ConvStateClient``."""

from __future__ import annotations

import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc

from . import formats
from ._proto import pb, pb_grpc
from .errors import ConfigurationError, ConvStateError
from .messages import items_from_messages, text, usage_from_provider

Format = Literal["openai", "anthropic"]
FORMATS = ("openai", "anthropic")

DEFAULT_ADDRESS = "localhost:50051"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_ATTEMPTS = 4

_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# The service refuses longer recall queries.
_MAX_RECALL_QUERY_BYTES = 8192
_PAGE_SIZE = 1000

RetryHook = Callable[[str, int, grpc.RpcError, float], None]


def new_idempotency_key() -> str:
    """A fresh key for one AppendTurn: 128 random bits."""
    return "py-" + uuid.uuid4().hex


def _check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ValueError(f"{what}: 1 to 128 characters of [A-Za-z0-9._:-], got {value!r}")
    return value


def _check_format(value: str) -> Format:
    if value not in FORMATS:
        raise ValueError(f"format: 'openai' or 'anthropic', got {value!r}")
    return value  # type: ignore[return-value]


def is_loopback(address: str) -> bool:
    """True when ``address`` (HOST:PORT, a gRPC target) stays on this machine."""
    target = address
    if target.startswith("unix:") or target.startswith("unix-abstract:"):
        return True
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme):]
    if target.startswith("["):
        host = target[1:].split("]", 1)[0]
    elif target.count(":") == 1:
        host = target.split(":", 1)[0]
    else:
        host = target
    return host in ("localhost", "::1") or host.startswith("127.")


def _truncate_utf8(s: str, limit: int) -> str:
    data = s.encode("utf-8")
    if len(data) <= limit:
        return s
    return data[:limit].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class InferenceContext:
    """A view, ready to send, and what identifies it.

    Attributes:
        format: "openai" or "anthropic".
        messages: the provider's ``messages`` parameter.
        system: Anthropic: the ``system`` parameter (a list of text blocks);
            None for OpenAI, whose system messages are in ``messages``.
        view_hash: the service's digest of the view; equal hashes, equal views.
        version: the conversation version the view was built from (pass it
            as ``expected_version`` to guard the next append).
        compaction_version: the compaction state the view was built from.
        response: the service's BuildContextResponse, entries and token
            counts included.
    """

    format: Format
    messages: list[dict[str, Any]]
    system: list[dict[str, Any]] | None
    view_hash: str
    version: int
    compaction_version: int
    response: pb.BuildContextResponse = field(repr=False)

    def request_kwargs(self) -> dict[str, Any]:
        """``messages`` (and ``system`` for Anthropic) as keyword arguments."""
        if self.format == "anthropic":
            return {"system": self.system, "messages": self.messages}
        return {"messages": self.messages}


class ConvStateClient:
    """A client of convstate.v1.ConversationState for one gateway process.

    Thread-safe (one gRPC channel); close it, or use it as a context manager.

    Args:
        address: HOST:PORT (any gRPC target) of the service.
        token: a bearer token, sent as ``authorization: Bearer TOKEN``. Sent
            in plaintext only to a loopback address, unless
            ``allow_insecure_token``.
        ca_cert: path of the PEM CA that signed the server's certificate;
            turns TLS on.
        cert, key: paths of a PEM client certificate and its key, for
            mutual TLS (both or neither; need ``ca_cert``).
        tenant: the tenant to name in requests; None leaves it to the
            service (the credential's tenant, or "default").
        timeout: each call's deadline in seconds (each attempt's).
        max_attempts: how often a call that is safe to repeat is sent when
            the service answers UNAVAILABLE: reads, BuildContext without
            provider_overflow, and appends with an idempotency key (the
            helpers always set one). Other calls are sent once.
        initial_backoff, max_backoff: the wait before the second attempt,
            doubled for each further one up to ``max_backoff`` (seconds),
            each with up to 25 % added at random.
        on_retry: called as ``on_retry(method, attempt, error, delay)``
            before waiting to send ``method`` again.
        channel_options: extra gRPC channel options.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        ca_cert: str | None = None,
        cert: str | None = None,
        key: str | None = None,
        tenant: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        initial_backoff: float = 0.2,
        max_backoff: float = 3.0,
        on_retry: RetryHook | None = None,
        allow_insecure_token: bool = False,
        channel_options: Iterable[tuple[str, Any]] = (),
    ):
        if not isinstance(address, str) or not address:
            raise ConfigurationError("address: required (HOST:PORT)")
        if not timeout or timeout <= 0:
            raise ConfigurationError(f"timeout: a positive number of seconds, got {timeout!r}")
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(f"max_attempts: at least 1, got {max_attempts!r}")
        if initial_backoff < 0 or max_backoff < initial_backoff:
            raise ConfigurationError("backoff: 0 <= initial_backoff <= max_backoff")
        if (cert is None) != (key is None):
            raise ConfigurationError("cert and key: give both or neither")
        if cert is not None and ca_cert is None:
            raise ConfigurationError("cert and key: mutual TLS needs ca_cert too")
        if tenant is not None:
            try:
                _check_id(tenant, "tenant")
            except ValueError as error:
                raise ConfigurationError(str(error)) from None
        self._metadata: tuple[tuple[str, str], ...] = ()
        if token:
            if not re.fullmatch(r"[\x21-\x7e]+", token):
                raise ConfigurationError("token: printable ASCII without spaces")
            if ca_cert is None and not is_loopback(address) and not allow_insecure_token:
                raise ConfigurationError(
                    f"refusing to send the token in plaintext to {address}: give ca_cert "
                    "(CONVSTATE_CACERT) for TLS, or reach the service on loopback"
                )
            self._metadata = (("authorization", f"Bearer {token}"),)

        self.address = address
        self.tenant = tenant or ""
        self.timeout = float(timeout)
        self.max_attempts = max_attempts
        self.initial_backoff = float(initial_backoff)
        self.max_backoff = float(max_backoff)
        self.on_retry = on_retry
        self.tls = ca_cert is not None

        # Views can be large (a window of a million tokens is megabytes), and
        # a retry after a refused connection should find the channel trying
        # again rather than still backing off.
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", max(100, int(self.max_backoff * 1000))),
        ]
        options.extend(channel_options)
        if ca_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(ca_cert, "ca_cert"),
                private_key=_read(key, "key") if key else None,
                certificate_chain=_read(cert, "cert") if cert else None,
            )
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self.stub = pb_grpc.ConversationStateStub(self._channel)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ConvStateClient:
        """A client configured by the environment; ``overrides`` win over it.

        ``CONVSTATE_ADDRESS`` (default localhost:50051), ``CONVSTATE_TOKEN``,
        ``CONVSTATE_CACERT``, ``CONVSTATE_CERT``, ``CONVSTATE_KEY``,
        ``CONVSTATE_TENANT``, ``CONVSTATE_TIMEOUT_MS`` (default 30000). An
        empty variable counts as unset.
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(name, "")
            return value if value else None

        settings: dict[str, Any] = {
            "address": get("CONVSTATE_ADDRESS") or DEFAULT_ADDRESS,
            "token": get("CONVSTATE_TOKEN"),
            "ca_cert": get("CONVSTATE_CACERT"),
            "cert": get("CONVSTATE_CERT"),
            "key": get("CONVSTATE_KEY"),
            "tenant": get("CONVSTATE_TENANT"),
        }
        timeout_ms = get("CONVSTATE_TIMEOUT_MS")
        if timeout_ms is not None:
            try:
                settings["timeout"] = int(timeout_ms) / 1000.0
            except ValueError:
                raise ConfigurationError(
                    f"CONVSTATE_TIMEOUT_MS: a number of milliseconds, got {timeout_ms!r}"
                ) from None
        settings.update(overrides)
        address = settings.pop("address")
        return cls(address, **settings)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> ConvStateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- calls --------------------------------------------------------------

    def call(self, method: str, request: Any, *, safe_to_repeat: bool) -> Any:
        """Sends ``request`` to the RPC ``method`` (e.g. "GetConversation").

        With ``safe_to_repeat``, UNAVAILABLE is retried up to
        ``max_attempts`` times in all. Raises ConvStateError.
        """
        rpc = getattr(self.stub, method)
        attempts = self.max_attempts if safe_to_repeat else 1
        attempt = 1
        while True:
            try:
                return rpc(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as error:
                code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
                details = (error.details() if hasattr(error, "details") else None) or str(error)
                if code != grpc.StatusCode.UNAVAILABLE or attempt >= attempts:
                    raise ConvStateError(code, details, method, attempt) from None
                delay = min(self.max_backoff, self.initial_backoff * 2 ** (attempt - 1))
                delay *= 1 + 0.25 * random.random()
                if self.on_retry is not None:
                    self.on_retry(method, attempt, error, delay)
                time.sleep(delay)
                attempt += 1

    def create_conversation(
        self,
        conversation_id: str,
        model: str,
        *,
        system_prompt: str = "",
        pinned_instructions: str = "",
        metadata: Mapping[str, str] | None = None,
        profile_overrides: pb.ProfileOverrides | None = None,
    ) -> pb.Conversation:
        """Creates a conversation bound to ``model``'s profile (sent once)."""
        request = pb.CreateConversationRequest(
            tenant_id=self.tenant,
            conversation_id=_check_id(conversation_id, "conversation_id"),
            model=text(model, "model"),
            system_prompt=text(system_prompt, "system_prompt"),
            pinned_instructions=text(pinned_instructions, "pinned_instructions"),
        )
        if not model:
            raise ValueError("model: required")
        for k, v in (metadata or {}).items():
            request.metadata[text(k, "metadata key")] = text(v, f"metadata[{k!r}]")
        if profile_overrides is not None:
            request.profile_overrides.CopyFrom(profile_overrides)
        return self.call("CreateConversation", request, safe_to_repeat=False)

    def get_conversation(self, conversation_id: str) -> pb.Conversation:
        request = pb.GetConversationRequest(
            tenant_id=self.tenant, conversation_id=_check_id(conversation_id, "conversation_id")
        )
        return self.call("GetConversation", request, safe_to_repeat=True)

    def list_items(self, conversation_id: str) -> list[pb.Item]:
        """The conversation's whole stored history, every page."""
        _check_id(conversation_id, "conversation_id")
        items: list[pb.Item] = []
        token = ""
        while True:
            page = self.call(
                "ListItems",
                pb.ListItemsRequest(
                    tenant_id=self.tenant,
                    conversation_id=conversation_id,
                    page_size=_PAGE_SIZE,
                    page_token=token,
                ),
                safe_to_repeat=True,
            )
            items.extend(page.items)
            token = page.next_page_token
            if not token:
                return items

    def append(
        self,
        conversation_id: str,
        messages: Iterable[Any],
        *,
        usage: Any = None,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> pb.AppendTurnResponse:
        """Stores ``messages`` (OpenAI or Anthropic shaped) as one AppendTurn.

        Always with an idempotency key (a new one unless given), so that the
        call is retried on UNAVAILABLE and a retry stores nothing twice.
        """
        items = items_from_messages(messages)
        if not items:
            raise ValueError("messages: nothing to append")
        return self._append(conversation_id, items, usage_from_provider(usage),
                            idempotency_key or new_idempotency_key(), expected_version)

    def _append(
        self,
        conversation_id: str,
        items: list[pb.NewItem],
        usage: pb.ProviderUsage | None,
        key: str,
        expected_version: int | None = None,
    ) -> pb.AppendTurnResponse:
        request = pb.AppendTurnRequest(
            tenant_id=self.tenant,
            conversation_id=_check_id(conversation_id, "conversation_id"),
            items=items,
            idempotency_key=text(key, "idempotency_key"),
        )
        if not key or len(key.encode("utf-8")) > 128:
            raise ValueError("idempotency_key: 1 to 128 bytes")
        if usage is not None:
            request.usage.CopyFrom(usage)
        if expected_version is not None:
            request.expected_version = expected_version
        return self.call("AppendTurn", request, safe_to_repeat=True)

    def build_context(
        self,
        conversation_id: str,
        *,
        format: Format = "openai",
        pending_messages: Iterable[Any] = (),
        recall_query: str = "",
        merge_leading_system: bool = False,
    ) -> InferenceContext:
        """BuildContext, converted to the provider's ``format``.

        ``pending_messages`` are counted and placed last without being
        stored (BuildContextRequest.pending_input).
        """
        _check_format(format)
        request = pb.BuildContextRequest(
            tenant_id=self.tenant,
            conversation_id=_check_id(conversation_id, "conversation_id"),
            pending_input=items_from_messages(pending_messages),
            recall_query=_truncate_utf8(text(recall_query, "recall_query"), _MAX_RECALL_QUERY_BYTES),
        )
        response = self.call("BuildContext", request, safe_to_repeat=True)
        return self.view(response, format=format, merge_leading_system=merge_leading_system)

    @staticmethod
    def view(
        response: pb.BuildContextResponse, *, format: Format = "openai",
        merge_leading_system: bool = False,
    ) -> InferenceContext:
        """A BuildContextResponse (or GetContextAt's) as an InferenceContext."""
        _check_format(format)
        if format == "anthropic":
            request = formats.to_anthropic(response.entries, response.cache_breakpoints)
            messages, system = request.messages, request.system
        else:
            messages = formats.to_openai(response.entries, merge_leading_system=merge_leading_system)
            system = None
        return InferenceContext(
            format=format,
            messages=messages,
            system=system,
            view_hash=response.view_hash,
            version=response.version,
            compaction_version=response.compaction_version,
            response=response,
        )

    # ---- the gateway's three calls -------------------------------------------

    def before_inference(
        self,
        conversation_id: str,
        new_messages: Iterable[Any],
        *,
        format: Format = "openai",
        model: str | None = None,
        system_prompt: str | None = None,
        idempotency_key: str | None = None,
        recall: bool = True,
        merge_leading_system: bool = False,
    ) -> InferenceContext:
        """Stores the caller's new messages and returns the view to send.

        The messages (the user's turn, tool results: whatever the gateway
        received since the last call) go in one AppendTurn with an
        idempotency key (``idempotency_key``, else a new one; pass the same
        key again when repeating this call for the same messages, and
        nothing is stored twice). If the conversation does not exist and
        ``model`` is given, it is created first with ``system_prompt``; an
        existing conversation keeps its model and prompt. Then BuildContext,
        whose view includes those messages. With ``recall``, the text of the
        last user message is the recall query: passages of the history the
        view no longer shows verbatim that match it come back in the
        RECALLED section (after the live items, so after the new message).
        """
        _check_format(format)
        _check_id(conversation_id, "conversation_id")
        items = items_from_messages(new_messages)
        key = idempotency_key or new_idempotency_key()
        if items:
            try:
                self._append(conversation_id, items, None, key)
            except ConvStateError as error:
                if error.code != grpc.StatusCode.NOT_FOUND or model is None:
                    raise
                self._create_if_missing(conversation_id, model, system_prompt)
                self._append(conversation_id, items, None, key)
        elif model is not None:
            try:
                self.get_conversation(conversation_id)
            except ConvStateError as error:
                if error.code != grpc.StatusCode.NOT_FOUND:
                    raise
                self._create_if_missing(conversation_id, model, system_prompt)
        query = ""
        if recall:
            users = [i.content for i in items if i.role == pb.ROLE_USER and i.kind == pb.ITEM_KIND_MESSAGE]
            query = users[-1] if users else ""
        return self.build_context(
            conversation_id, format=format, recall_query=query,
            merge_leading_system=merge_leading_system,
        )

    def _create_if_missing(self, conversation_id: str, model: str, system_prompt: str | None) -> None:
        try:
            self.create_conversation(conversation_id, model, system_prompt=system_prompt or "")
        except ConvStateError as error:
            # Created meanwhile (another gateway replica, or this call's
            # earlier attempt): it exists, which is all that is needed.
            if error.code != grpc.StatusCode.ALREADY_EXISTS:
                raise

    def after_inference(
        self,
        conversation_id: str,
        assistant_message: Any,
        usage: Any = None,
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> pb.AppendTurnResponse:
        """Stores the model's answer with the provider's reported usage.

        ``assistant_message`` is an OpenAI assistant message (``content``,
        ``tool_calls``), an Anthropic assistant message or Messages response
        (``content`` blocks: text, tool_use, thinking), or a whole OpenAI
        ChatCompletion (its first choice's message). ``usage`` is the
        provider's usage (see ``usage_from_provider``); when None, the
        response's own ``usage`` is used if it has one. One AppendTurn with
        an idempotency key; ``expected_version`` (a view's ``version``)
        makes it fail with ABORTED if another append came first.
        """
        message = assistant_message
        if not isinstance(message, Mapping):
            dump = getattr(message, "model_dump", None)
            if callable(dump):
                message = dump()
        if not isinstance(message, Mapping):
            raise ValueError(
                f"assistant_message: expected a dict, got {type(assistant_message).__name__}"
            )
        if "choices" in message:
            choices = message.get("choices") or []
            if not choices:
                raise ValueError("assistant_message: the completion has no choices")
            if usage is None:
                usage = message.get("usage")
            message = choices[0].get("message") if isinstance(choices[0], Mapping) else None
            if not isinstance(message, Mapping):
                raise ValueError("assistant_message.choices[0].message: expected a dict")
        elif usage is None and message.get("usage") is not None:
            usage = message.get("usage")
        if message.get("role", "assistant") != "assistant":
            raise ValueError(f"assistant_message.role: expected 'assistant', got {message.get('role')!r}")
        message = dict(message)
        message["role"] = "assistant"
        return self.append(
            conversation_id, [message], usage=usage,
            idempotency_key=idempotency_key, expected_version=expected_version,
        )

    def report_overflow(
        self,
        conversation_id: str,
        provider_reported_tokens: int | None = None,
        *,
        format: Format = "openai",
        merge_leading_system: bool = False,
    ) -> InferenceContext:
        """The provider refused the last view as too long: a smaller view.

        BuildContext with ``provider_overflow``: the service corrects its
        count for the conversation (from ``provider_reported_tokens``, the
        prompt size the provider's refusal named, when known), compacts to a
        stricter target and never returns the refused view again. Sent
        once: repeating it would count the refusal twice.
        """
        _check_format(format)
        reported = 0 if provider_reported_tokens is None else provider_reported_tokens
        if isinstance(reported, bool) or not isinstance(reported, int) or reported < 0:
            raise ValueError(
                f"provider_reported_tokens: a non-negative number, got {provider_reported_tokens!r}"
            )
        request = pb.BuildContextRequest(
            tenant_id=self.tenant,
            conversation_id=_check_id(conversation_id, "conversation_id"),
            provider_overflow=True,
            provider_reported_tokens=reported,
        )
        response = self.call("BuildContext", request, safe_to_repeat=False)
        return self.view(response, format=format, merge_leading_system=merge_leading_system)


def _read(path: str | None, what: str) -> bytes:
    try:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            return f.read()
    except OSError as error:
        raise ConfigurationError(f"{what}: cannot read {path}: {error.strerror}") from None
