"""Provider sessions over an append-only history, and the Chat Completions session.

Shared by the OpenAI-compatible providers (Fireworks, AWS Mantle), which pass in their
own OpenAI SDK client; nothing here imports the SDK (its exceptions are recognized by
duck typing, see :mod:`autocad_bench.providers.support.errors`).

:class:`HistorySession` owns the turn protocol every wire format shares: build the next
request from :class:`~.history.Conversation` (nothing changes yet), send exactly one
request, and only when a response arrived append the request and the reply. Failures are
classified and leave the history untouched, so the core's retry sends the same bytes.
Per-response telemetry (request bytes, compaction, token usage including cached tokens,
allow-listed response headers) is appended to ``provider_telemetry.jsonl`` in the rollout
directory; it never contains request headers or credentials.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from autocad_bench.models import JsonObject
from autocad_bench.providers.chat.history import Conversation, HistoryLimits, PreparedRequest, Renderer, dumps
from autocad_bench.providers.chat.wire import (
    ChatRenderer,
    ParsedTurn,
    chat_tool,
    chat_tool_choice,
    classify_openai_error,
    parse_chat_completion,
    pick_headers,
)
from autocad_bench.providers.models import (
    ModelTurn,
    Observation,
    ProviderRequestError,
    SessionRequest,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.errors import is_api_error
from autocad_bench.storage import append_jsonl

Exchange = tuple[bytes, Iterable[tuple[str, str]], int]
"""A response as :meth:`HistorySession._exchange` returns it: body bytes, headers and status."""

TELEMETRY_FILE = "provider_telemetry.jsonl"


def session_key(request: SessionRequest) -> str:
    """A short, rollout-unique, non-secret key for cache affinity headers and ``prompt_cache_key``."""
    digest = hashlib.sha256(f"{request.rollout_id}\0{request.attempt_id}".encode()).hexdigest()
    return f"acb-{digest[:32]}"


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What a provider decided for one session (model, request parameters, limits, telemetry)."""

    provider: str
    model: str
    max_tokens: int
    limits: HistoryLimits
    profile: str | None = None
    strict_tools: bool = True
    temperature: float | None = None
    reasoning_effort: str | None = None
    prompt_cache_key: str | None = None
    parallel_tool_calls: bool | None = None
    extra_body: JsonObject = field(default_factory=dict)
    header_prefixes: tuple[str, ...] = ("x-ratelimit-",)
    header_names: frozenset[str] = frozenset({"retry-after", "retry-after-ms", "x-request-id"})
    cached_tokens_header: str | None = None
    telemetry: bool = True
    server_seconds: bool = False
    """Report each response's request wall time as ``TokenUsage.server_seconds`` (for a model
    billed by server time: a self-hosted model with a GPU-hour price)."""


class HistorySession(ProviderSession):
    """The turn protocol over :class:`Conversation`; subclasses speak one wire format."""

    renderer: Renderer

    def __init__(self, request: SessionRequest, settings: SessionSettings, key: str) -> None:
        self._request = request
        self._settings = settings
        self.session_key = key
        self._conversation = Conversation(request, settings.limits, self.renderer, self._overhead())
        self.last_request: PreparedRequest | None = None
        self.adapter_cpu_s = 0.0
        if request.resume_state is not None:
            self._restore(request.resume_state)

    # --- wire format hooks ---------------------------------------------------------------

    @abc.abstractmethod
    def body_base(self) -> JsonObject:
        """The request body without its message/input list, exactly as it is sent."""

    @abc.abstractmethod
    async def _exchange(self, prepared: PreparedRequest) -> Exchange:
        """Send one request; return body bytes, headers and status, or raise ProviderRequestError."""

    @abc.abstractmethod
    def _parse(self, data: Any, sequence: int) -> ParsedTurn:
        """Interpret a decoded response body."""

    def _extra_state(self) -> JsonObject:
        return {}

    def _restore_extra(self, state: JsonObject) -> None:
        """Restore what :meth:`_extra_state` saved (nothing by default)."""

    # --- ProviderSession ----------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        cpu = time.thread_time()
        prepared = self._conversation.prepare(observation)
        self.last_request = prepared
        cpu = time.thread_time() - cpu
        started = time.monotonic()
        try:
            body, headers, status = await self._exchange(prepared)
        except ProviderRequestError as error:
            self._telemetry({"error": error.kind.value, "status": error.status, "message": str(error),
                             "retry_after_s": error.retry_after_s, **self._request_facts(prepared)},
                            getattr(error, "headers", ()))
            raise
        elapsed = time.monotonic() - started
        resumed_cpu = time.thread_time()
        header_list = list(headers)
        sequence = self._conversation.responses
        try:
            data: Any = json.loads(body)
        except ValueError:
            data = None
        parsed = self._parse(data, sequence)
        if data is None:
            parsed = _malformed(parsed, "the response body is not JSON")
        parsed = self._cached_from_headers(parsed, header_list)
        if self._settings.server_seconds:
            usage = parsed.turn.usage.model_copy(update={"server_seconds": round(elapsed, 3)})
            parsed = ParsedTurn(parsed.turn.model_copy(update={"usage": usage}), parsed.assistant, parsed.call_id,
                                parsed.call_summary, parsed.finish_reason, parsed.reasoning_chars, parsed.raw_usage)
        self._conversation.commit(prepared, parsed.assistant, parsed.call_id, parsed.call_summary)
        self.adapter_cpu_s = cpu + time.thread_time() - resumed_cpu
        self._telemetry({
            "status": status,
            "elapsed_s": round(elapsed, 4),
            "response_id": parsed.turn.response_id,
            "finish_reason": parsed.finish_reason,
            "malformed": parsed.turn.malformed,
            "tool_call": parsed.call_id is not None,
            "reasoning_chars": parsed.reasoning_chars,
            "usage": parsed.raw_usage,
            "cache_hit_ratio": _ratio(parsed.raw_usage),
            "adapter_cpu_s": round(self.adapter_cpu_s, 6),
            **self._request_facts(prepared),
        }, header_list)
        return parsed.turn

    def shrink(self) -> bool:
        return self._conversation.shrink()

    def checkpoint(self) -> JsonObject:
        return {"conversation": self._conversation.snapshot(), "session_key": self.session_key,
                **self._extra_state()}

    # --- internals ------------------------------------------------------------------------

    def _overhead(self) -> int:
        return len(dumps({**self.body_base(), self.renderer.container_key: []}))

    def _restore(self, state: JsonObject) -> None:
        conversation = state.get("conversation")
        if not isinstance(conversation, dict):
            raise ValueError("provider resume state has no conversation")
        key = state.get("session_key")
        if isinstance(key, str) and key:
            self.session_key = key
        self._restore_extra(state)
        self._conversation = Conversation(self._request, self._settings.limits, self.renderer, self._overhead(),
                                          self._conversation.images)
        self._conversation.restore(conversation)

    def _request_facts(self, prepared: PreparedRequest) -> JsonObject:
        return {
            "request_bytes": prepared.size,
            "messages": prepared.messages,
            "images": prepared.images,
            "image_base64_bytes": prepared.image_bytes,
            "compacted": prepared.compacted,
            "compaction_reason": prepared.reason,
            "observation_turn": prepared.observation_turn,
        }

    def _cached_from_headers(self, parsed: ParsedTurn, headers: list[tuple[str, str]]) -> ParsedTurn:
        name = self._settings.cached_tokens_header
        usage = parsed.turn.usage
        if name is None or usage.cached_input_tokens:
            return parsed
        value = next((v for k, v in headers if k.lower() == name), None)
        cached = int(value) if value is not None and value.strip().isdigit() else 0
        cached = min(cached, usage.input_tokens)
        if not cached:
            return parsed
        fixed = usage.model_copy(update={"input_tokens": usage.input_tokens - cached, "cached_input_tokens": cached})
        raw = {**parsed.raw_usage, "cached_tokens": cached, "cached_tokens_source": name}
        return ParsedTurn(parsed.turn.model_copy(update={"usage": fixed}), parsed.assistant, parsed.call_id,
                          parsed.call_summary, parsed.finish_reason, parsed.reasoning_chars, raw)

    def _telemetry(self, record: JsonObject, headers: Iterable[tuple[str, str]]) -> None:
        s = self._settings
        if not s.telemetry:
            return
        entry: JsonObject = {
            "at": datetime.now(UTC).isoformat(),
            "provider": s.provider,
            "profile": s.profile,
            "model": s.model,
            "response_seq": self._conversation.responses,
            "compactions": self._conversation.compactions,
            "retained_messages": self._conversation.retained_messages,
            **record,
            "headers": cast(JsonObject, pick_headers(headers, s.header_prefixes, s.header_names)),
        }
        with contextlib.suppress(OSError):  # telemetry must never fail a turn
            append_jsonl(self._request.rollout_dir / TELEMETRY_FILE, entry)


class HeaderedError(ProviderRequestError):
    """A classified failure that still carries the allow-listable response headers."""

    def __init__(self, error: ProviderRequestError, headers: Iterable[tuple[str, str]]) -> None:
        super().__init__(error.kind, str(error), status=error.status, retry_after_s=error.retry_after_s)
        self.headers = list(headers)


def failure(exc: Exception) -> ProviderRequestError:
    """Classify an OpenAI SDK exception, keeping its response headers for telemetry."""
    error = classify_openai_error(exc)
    if error is None:
        raise exc
    response = getattr(exc, "response", None)
    headers = list(response.headers.items()) if response is not None else []
    return HeaderedError(error, headers)


async def send(create: Callable[..., Awaitable[Any]], **params: Any) -> Exchange:
    """Call an SDK ``with_raw_response.create`` once; SDK errors are raised as :func:`failure`."""
    try:
        raw = await create(**params)
    except Exception as exc:
        if not is_api_error(exc):
            raise
        raise failure(exc) from None
    return raw.content, list(raw.headers.items()), raw.status_code


class ChatCompletionsSession(HistorySession):
    """One rollout over ``POST {base_url}/chat/completions`` with the OpenAI SDK (retries off).

    ``client`` is an ``openai.AsyncOpenAI`` configured by the provider (base URL, auth,
    ``max_retries=0``, timeout, default headers); the session closes it.
    """

    renderer = ChatRenderer()

    def __init__(self, request: SessionRequest, settings: SessionSettings, key: str, client: Any) -> None:
        self._client = client
        self._tool = chat_tool(request.action_schema, strict=settings.strict_tools)
        self._choice = chat_tool_choice()
        super().__init__(request, settings, key)

    def body_base(self) -> JsonObject:
        s = self._settings
        body: JsonObject = {
            "model": s.model,
            "max_tokens": s.max_tokens,
            "tools": [self._tool],
            "tool_choice": self._choice,
        }
        body.update(self._optional())
        body.update(s.extra_body)
        return body

    def _optional(self) -> dict[str, Any]:
        """The optional request parameters that are set (the SDK omits the others)."""
        s = self._settings
        optional: dict[str, Any] = {
            "temperature": s.temperature,
            "reasoning_effort": s.reasoning_effort,
            "prompt_cache_key": s.prompt_cache_key,
            "parallel_tool_calls": s.parallel_tool_calls,
        }
        return {k: v for k, v in optional.items() if v is not None}

    async def _exchange(self, prepared: PreparedRequest) -> Exchange:
        s = self._settings
        return await send(
            self._client.chat.completions.with_raw_response.create,
            model=s.model,
            messages=prepared.wire(),
            max_tokens=s.max_tokens,
            tools=[self._tool],
            tool_choice=self._choice,
            **self._optional(),
            extra_body=s.extra_body or None,
        )

    def _parse(self, data: Any, sequence: int) -> ParsedTurn:
        return parse_chat_completion(data, sequence)

    async def aclose(self) -> None:
        await self._client.close()


def _malformed(parsed: ParsedTurn, problem: str) -> ParsedTurn:
    turn = parsed.turn.model_copy(update={"action_input": None, "malformed": problem})
    return ParsedTurn(turn, parsed.assistant, parsed.call_id, parsed.call_summary, parsed.finish_reason,
                      parsed.reasoning_chars, parsed.raw_usage)


def _ratio(usage: Mapping[str, Any]) -> float | None:
    prompt = usage.get("prompt_tokens") or usage.get("input_tokens")
    cached = usage.get("cached_tokens")
    if not isinstance(prompt, int) or not isinstance(cached, int) or prompt <= 0:
        return None
    return round(cached / prompt, 4)


__all__ = [
    "TELEMETRY_FILE",
    "ChatCompletionsSession",
    "Exchange",
    "HeaderedError",
    "HistorySession",
    "SessionSettings",
    "failure",
    "send",
    "session_key",
]
