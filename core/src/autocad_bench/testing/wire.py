"""Wire-level fakes of model APIs: a real HTTP server with a scripted queue of replies.

A provider test points the provider's *real* SDK at :attr:`WireServer.url` (through its
``base_url``) and scripts what the "API" answers, request by request::

    with ResponsesWire() as wire:
        wire.push_tool_call({"actions": [{"type": "done"}]})
        wire.push_error(429, "slow down", headers={"retry-after": "3"})
        wire.push_reset()
        ...                                   # run the provider session
        body = wire.model_requests()[0].json()

:class:`WireServer` is format-neutral: it records every request (method, path, headers,
exact body bytes) and answers requests on its *model routes* with the next queued
:class:`Reply` (or a callable that builds one from the recorded request). A subclass
teaches it one provider's wire format by implementing the reply builders
(:meth:`WireServer.tool_call_reply`, :meth:`~WireServer.text_reply`,
:meth:`~WireServer.malformed_arguments_reply`, :meth:`~WireServer.error_reply`), which
is all :class:`~autocad_bench.testing.provider_conformance.ProviderConformance` needs,
plus :meth:`WireServer.billed_usage` (what one reply bills, for the cost check) and,
optionally, :meth:`~WireServer.refusal_reply`, :meth:`~WireServer.tool_declarations`
and :meth:`~WireServer.replayed_calls` when the generic defaults do not fit the format.
:class:`ResponsesWire` is the ready-made fake of OpenAI's Responses API (also spoken by
OpenRouter and other compatible endpoints).

The server runs its own event loop on a daemon thread, so it works the same from
synchronous tests, from ``asyncio`` tests and from benchmarks, and its CPU time never lands
on the caller's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from aiohttp import web
from pydantic import JsonValue

from autocad_bench.providers.models import TokenUsage

__all__ = [
    "RecordedRequest",
    "Reply",
    "ReplySource",
    "ResponsesWire",
    "WireServer",
    "sse_body",
]

TOOL_NAME = "computer_action"
_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema")
_ARGUMENT_KEYS = ("arguments", "input")


def sse_body(events: Iterable[tuple[str | None, JsonValue | str]]) -> bytes:
    """Encode ``(event name or None, data)`` pairs as a ``text/event-stream`` body.

    ``data`` that is not a string is JSON-encoded; multi-line strings become several
    ``data:`` lines as the SSE format requires.
    """
    parts: list[str] = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        if name is not None:
            parts.append(f"event: {name}\n")
        parts.extend(f"data: {line}\n" for line in text.split("\n"))
        parts.append("\n")
    return "".join(parts).encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: a status, headers and exact body bytes, or a connection reset.

    ``reset=True`` closes the TCP connection without any response (a "connection reset by
    peer" for the client); ``delay_s`` waits before answering (use it to trip client
    timeouts).
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    reset: bool = False
    delay_s: float = 0.0

    @classmethod
    def json(cls, value: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
        """A JSON body (``value`` is serialized compactly)."""
        return cls(
            status=status,
            body=json.dumps(value, separators=(",", ":")).encode(),
            headers=tuple((headers or {}).items()),
        )

    @classmethod
    def sse(
        cls,
        events: Iterable[tuple[str | None, JsonValue | str]],
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """A server-sent-events stream (see :func:`sse_body`)."""
        return cls(
            status=status,
            body=sse_body(events),
            headers=tuple((headers or {}).items()),
            content_type="text/event-stream",
        )

    @classmethod
    def connection_reset(cls) -> Reply:
        """Drop the connection without answering."""
        return cls(reset=True)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as it reached the fake. ``headers`` keys are lower-case.

    ``size`` is the body length; ``body`` is empty when the server does not keep bodies.
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    size: int = 0
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


ReplySource = Reply | Callable[[RecordedRequest], Reply]
"""What a queue entry may be: a fixed reply or a function of the request it answers."""

ExtraHandler = Callable[[RecordedRequest], Reply]


class WireServer:
    """A scripted HTTP fake of a model API on ``127.0.0.1`` at a random port.

    Subclasses set :attr:`model_routes` (``(method, path)`` pairs; a request path matches
    when it *ends with* the route path, so base URLs with a prefix such as ``/api`` work)
    and implement the reply builders for their format. Requests on model routes take the
    next queued reply; when the queue is empty ``default`` answers (a reply or a callable),
    and without one the fake answers 400 "script exhausted" so a test fails fast instead of
    retrying forever. ``too_large_above`` answers 413 (through :meth:`error_reply`) for
    model requests whose body exceeds that many bytes. ``keep_bodies=False`` records only
    body sizes (for long benchmarks with large requests). :meth:`extra_routes` adds other
    endpoints (catalogs, token counting); unknown paths get 404.

    Thread-safe: the queue and the records are shared with the server thread under a lock.
    """

    model_routes: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(
        self,
        *,
        default: ReplySource | None = None,
        too_large_above: int | None = None,
        max_body_bytes: int = 1024 * 1024 * 1024,
        keep_bodies: bool = True,
    ) -> None:
        self.default = default
        self.keep_bodies = keep_bodies
        self.too_large_above = too_large_above
        self.max_body_bytes = max_body_bytes
        self._queue: deque[ReplySource] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._startup_error: BaseException | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start serving on a background thread; returns once the port is bound."""
        if self._thread is not None:
            return
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._serve, args=(loop, ready), name=f"{type(self).__name__}-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError(f"{type(self).__name__} did not start within 30 s")
        if self._startup_error is not None:
            raise RuntimeError(f"{type(self).__name__} failed to start") from self._startup_error

    def stop(self) -> None:
        """Close every connection and stop the server thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._runner is not None:
            runner = self._runner
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
            self._runner = None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = None
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` once started."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}"

    # --- scripting -----------------------------------------------------------------------

    def push(self, *replies: ReplySource) -> None:
        """Queue replies for the next model requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Queued replies not yet used."""
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()

    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (model routes and others), oldest first."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        """Requests on model routes only, oldest first."""
        return [r for r in self.requests() if self._is_model_route(r.method, r.path)]

    def next_id(self, prefix: str) -> str:
        """A fresh identifier such as ``call_0007`` (unique per server)."""
        return f"{prefix}_{next(self._ids):04d}"

    # --- format hooks (override per provider) ---------------------------------------------

    def tool_call_reply(self, arguments: JsonValue, *, call_id: str) -> Reply:
        """A successful response that calls ``computer_action`` with ``arguments``."""
        raise NotImplementedError(f"{type(self).__name__} must implement tool_call_reply")

    def text_reply(self, text: str) -> Reply:
        """A successful response with text only and no tool call."""
        raise NotImplementedError(f"{type(self).__name__} must implement text_reply")

    def malformed_arguments_reply(self, raw: str, *, call_id: str) -> Reply:
        """A successful response whose ``computer_action`` arguments are the raw string ``raw``."""
        raise NotImplementedError(f"{type(self).__name__} must implement malformed_arguments_reply")

    def error_reply(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        """An HTTP error in the provider's error format (default: ``{"error": {...}}``)."""
        return Reply.json(
            {"error": {"message": message, "type": _ERROR_TYPES.get(status, "api_error"), "code": None}},
            status=status,
            headers=headers,
        )

    def refusal_reply(self, text: str) -> Reply:
        """A successful response in which the model refuses (no tool call).

        Override it with the format's own refusal (a ``refusal`` content part, a
        ``refusal`` stop reason, a content filter); the default is :meth:`text_reply`.
        """
        return self.text_reply(text)

    def billed_usage(self) -> TokenUsage:
        """The :class:`TokenUsage` a provider must report for one reply built by this fake.

        The cost check of the conformance suite compares every turn's usage with it, so it
        states the provider's documented reading of the format's ``usage`` object (which
        counts include cached tokens, where reasoning tokens are). Must be overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement billed_usage() (the usage one reply bills) for the cost check")

    def tool_declarations(self, body: JsonValue) -> list[JsonValue]:
        """The JSON schemas of every ``computer_action`` tool a request body declares.

        The default finds, anywhere in the body, an object named ``computer_action`` with a
        ``parameters`` (Responses, Chat Completions), ``input_schema`` (Messages) or
        ``inputSchema`` (Converse, whose schema is under ``json``) member.
        """
        found: list[JsonValue] = []
        for node in _named_objects(body, TOOL_NAME):
            for key in _SCHEMA_KEYS:
                if key in node:
                    schema = node[key]
                    if key == "inputSchema" and isinstance(schema, dict) and "json" in schema:
                        schema = schema["json"]
                    found.append(schema)
                    break
        return found

    def replayed_calls(self, body: JsonValue) -> list[JsonValue]:
        """The arguments of every past ``computer_action`` call a request body replays.

        The default finds objects named ``computer_action`` with an ``arguments`` (a JSON
        string, parsed here; an unparsable one is returned as the string) or ``input``
        member and no schema member.
        """
        calls: list[JsonValue] = []
        for node in _named_objects(body, TOOL_NAME):
            if any(key in node for key in _SCHEMA_KEYS):
                continue
            for key in _ARGUMENT_KEYS:
                if key in node:
                    value = node[key]
                    if isinstance(value, str):
                        with contextlib.suppress(ValueError):
                            value = json.loads(value)
                    calls.append(value)
                    break
        return calls

    def extra_routes(self) -> Mapping[tuple[str, str], ExtraHandler]:
        """Non-model endpoints: ``{(method, path suffix): handler}`` (default: none)."""
        return {}

    # --- convenience -----------------------------------------------------------------------

    def push_tool_call(self, arguments: JsonValue, *, call_id: str | None = None) -> str:
        """Queue a ``computer_action`` call; returns its call id."""
        call_id = call_id or self.next_id("call")
        self.push(self.tool_call_reply(arguments, call_id=call_id))
        return call_id

    def push_text(self, text: str = "I will look at the screen first.") -> None:
        """Queue a response without any tool call."""
        self.push(self.text_reply(text))

    def push_malformed_arguments(self, raw: str = '{"actions": [{"type": "mo', *, call_id: str | None = None) -> str:
        """Queue a ``computer_action`` call whose arguments are not valid JSON."""
        call_id = call_id or self.next_id("call")
        self.push(self.malformed_arguments_reply(raw, call_id=call_id))
        return call_id

    def push_error(self, status: int, message: str = "injected error", *,
                   headers: Mapping[str, str] | None = None) -> None:
        """Queue an HTTP error reply."""
        self.push(self.error_reply(status, message, headers=headers))

    def push_reset(self) -> None:
        """Queue a dropped connection."""
        self.push(Reply.connection_reset())

    def push_refusal(self, text: str = "I can't help with that.") -> None:
        """Queue a refusal (see :meth:`refusal_reply`)."""
        self.push(self.refusal_reply(text))

    # --- internals -------------------------------------------------------------------------

    def _is_model_route(self, method: str, path: str) -> bool:
        return any(method == m and path.endswith(p) for m, p in self.model_routes)

    def _serve(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as error:  # reported to start() on the caller's thread
            self._startup_error = error
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            # Handlers still sleeping on a delayed reply are cancelled, not destroyed pending.
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _startup(self) -> None:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            query=request.query_string,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body if self.keep_bodies else b"",
            size=len(body),
        )
        with self._lock:
            self._requests.append(recorded)
        if self._is_model_route(request.method, request.path):
            reply = self._model_reply(recorded, len(body))
        else:
            handler = next(
                (h for (m, p), h in self.extra_routes().items()
                 if m == request.method and request.path.endswith(p)),
                None,
            )
            reply = handler(recorded) if handler is not None else self.error_reply(404, f"no route {request.path}")
        return await self._send(request, reply)

    def _model_reply(self, recorded: RecordedRequest, size: int) -> Reply:
        if self.too_large_above is not None and size > self.too_large_above:
            return self.error_reply(413, f"request of {size} bytes exceeds {self.too_large_above}")
        with self._lock:
            source = self._queue.popleft() if self._queue else self.default
        if source is None:
            return self.error_reply(400, "wire fake: script exhausted (no reply queued for this request)")
        return source(recorded) if callable(source) else source

    @staticmethod
    async def _send(request: web.Request, reply: Reply) -> web.StreamResponse:
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.reset:
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=204)
        headers = {"Content-Type": reply.content_type, **dict(reply.headers)}
        return web.Response(status=reply.status, body=reply.body, headers=headers)


def _named_objects(value: JsonValue, name: str) -> Iterable[dict[str, Any]]:
    """Every JSON object under ``value`` (itself included) whose ``name`` member is ``name``."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("name") == name:
                yield node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


class ResponsesWire(WireServer):
    """The Responses API (``POST /v1/responses``) plus a model catalog (``GET /v1/models``).

    Responses are non-streaming JSON with ``usage`` set from :attr:`usage` (override per
    reply with the ``usage`` argument of the builders). :attr:`catalog` lists the model ids
    ``GET /v1/models`` and ``GET /v1/models/{id}`` know; set :attr:`catalog_error` to an
    HTTP status to make both answer that error instead.
    """

    model_routes = (("POST", "/responses"),)

    def __init__(
        self,
        *,
        default: ReplySource | None = None,
        too_large_above: int | None = None,
        catalog: Iterable[str] = (),
        usage: Mapping[str, int] | None = None,
        keep_bodies: bool = True,
    ) -> None:
        super().__init__(default=default, too_large_above=too_large_above, keep_bodies=keep_bodies)
        self.catalog = list(catalog)
        self.catalog_error: int | None = None
        self.usage = dict(usage or {"input_tokens": 1500, "cached_tokens": 1000, "output_tokens": 60,
                                    "reasoning_tokens": 20})

    def response_body(self, output: list[dict[str, Any]], *, usage: Mapping[str, int] | None = None,
                      status: str = "completed") -> dict[str, Any]:
        """A complete ``response`` object with ``output`` items."""
        u = {**self.usage, **(usage or {})}
        return {
            "id": self.next_id("resp"),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": "wire-fake-model",
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": u["input_tokens"],
                "input_tokens_details": {"cached_tokens": u["cached_tokens"], "cache_write_tokens": 0},
                "output_tokens": u["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": u["reasoning_tokens"]},
                "total_tokens": u["input_tokens"] + u["output_tokens"],
            },
        }

    def function_call_item(self, arguments: str, *, call_id: str, name: str = "computer_action") -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": self.next_id("fc"),
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": "completed",
        }

    def tool_call_reply(self, arguments: JsonValue, *, call_id: str,
                        usage: Mapping[str, int] | None = None) -> Reply:
        item = self.function_call_item(json.dumps(arguments, separators=(",", ":")), call_id=call_id)
        return Reply.json(self.response_body([item], usage=usage))

    def text_reply(self, text: str, *, usage: Mapping[str, int] | None = None) -> Reply:
        message = {
            "type": "message",
            "id": self.next_id("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return Reply.json(self.response_body([message], usage=usage))

    def malformed_arguments_reply(self, raw: str, *, call_id: str,
                                  usage: Mapping[str, int] | None = None) -> Reply:
        return Reply.json(self.response_body([self.function_call_item(raw, call_id=call_id)], usage=usage))

    def refusal_reply(self, text: str, *, usage: Mapping[str, int] | None = None) -> Reply:
        """An assistant message whose only content part is a ``refusal``."""
        message = {
            "type": "message",
            "id": self.next_id("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": text}],
        }
        return Reply.json(self.response_body([message], usage=usage))

    def billed_usage(self) -> TokenUsage:
        """``input_tokens`` includes the cached tokens; ``reasoning_tokens`` is part of ``output_tokens``."""
        u = self.usage
        return TokenUsage(input_tokens=u["input_tokens"] - u["cached_tokens"], cached_input_tokens=u["cached_tokens"],
                          output_tokens=u["output_tokens"], reasoning_tokens=u["reasoning_tokens"])

    def extra_routes(self) -> Mapping[tuple[str, str], ExtraHandler]:
        return {("GET", "/models"): self._list_models}

    def _list_models(self, request: RecordedRequest) -> Reply:
        if self.catalog_error is not None:
            return self.error_reply(self.catalog_error, "catalog error")
        return Reply.json({"object": "list", "data": [self._model(m) for m in self.catalog]})

    @staticmethod
    def _model(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 1_700_000_000, "owned_by": "wire-fake"}

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        # GET /v1/models/{id}: answered here because ids may contain slashes (OpenRouter).
        marker = "/models/"
        if request.method == "GET" and marker in request.path:
            model_id = request.path.split(marker, 1)[1]
            with self._lock:
                self._requests.append(RecordedRequest(
                    method=request.method, path=request.path, query=request.query_string,
                    headers={k.lower(): v for k, v in request.headers.items()}, body=b""))
            if self.catalog_error is not None:
                reply = self.error_reply(self.catalog_error, "catalog error")
            elif model_id in self.catalog:
                reply = Reply.json(self._model(model_id))
            else:
                reply = self.error_reply(404, f"model {model_id!r} not found")
            return await self._send(request, reply)
        return await super()._dispatch(request)
