"""Async client of the broker HTTP protocol (see ``docs/broker-protocol.md``).

Every call is one *operation*: up to ``max_attempts`` HTTP attempts inside one deadline,
all carrying the same request body (and therefore the same idempotency identity). Only
transport failures are retried — refused or reset connections, timeouts, disconnects,
truncated or corrupted bodies — with stamina's jittered exponential backoff, and every
retry runs on a brand-new TCP connection. An HTTP error status is raised at once as
:class:`~autocad_bench.broker.errors.BrokerHTTPError`.

The *first* attempt of an operation runs on a fresh connection too, unless the caller
opened :meth:`BrokerClient.keep_alive`: inside that block first attempts may reuse an idle
keep-alive connection of the client's pool (the pilot holds one open for its whole run).
A retry never does: whatever the failed attempt left behind is never trusted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import stamina
from pydantic import BaseModel, ValidationError
from yarl import URL

from autocad_bench.actions.models import Action
from autocad_bench.actions.validation import ValidatedBatch
from autocad_bench.broker.errors import (
    BrokerConflict,
    BrokerHTTPError,
    BrokerProtocolError,
    BrokerTransportExhausted,
)
from autocad_bench.broker.protocol import (
    ACTIONS_FRAME_MEDIA_TYPE,
    ACTIONS_LENGTH_HEADER,
    CONTENT_SHA256_HEADER,
    NAME_PATTERN,
    WAIT_IDLE_LIMIT_S,
    ActionsRequest,
    ActionsResponse,
    CheckpointRequest,
    CheckpointResponse,
    ErrorResponse,
    EventsResponse,
    FrameEventsResponse,
    HealthResponse,
    LeaseRequest,
    LeaseResponse,
    ReleaseRequest,
    ReleaseResponse,
    ResetRequest,
    ResetResponse,
    Route,
    StatusResponse,
    reset_request_id,
)
from autocad_bench.errors import ConfigError, Problem
from autocad_bench.infrastructure.models import BROKER_TOKEN_ENV, BROKER_URL_ENV

log = logging.getLogger(__name__)

MAX_TRANSPORT_ATTEMPTS = 8
"""Retry-matrix bound: transport attempts per broker operation."""

DEFAULT_OPERATION_DEADLINE_S = 120.0
"""Default wall-clock bound of one operation, all attempts and backoff included."""

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")


class _TransportFailure(Exception):
    """The answer was lost in transit; safe to resend the identical request.

    Carries only a sanitised one-line description: aiohttp exceptions may hold the request
    headers (and so the token) in their ``repr``, which retry logging would print.
    """


class _CorruptBody(_TransportFailure):
    """A 200 body that did not arrive intact (bad JSON, checksum mismatch)."""


def _is_transport_failure(error: BaseException) -> bool:
    return isinstance(error, _TransportFailure)


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    content_type: str
    sha256_header: str | None
    body: bytes
    actions_length: str | None = None


class BrokerClient:
    """Talks to one broker; safe to share between tasks of one event loop.

    ``token`` is sent as ``Authorization: Bearer`` and never appears in ``repr``, logs or
    exception messages. ``operation_deadline_s`` bounds each call (backoff included);
    ``max_attempts`` may lower, never raise, the retry-matrix bound of 8;
    ``connect_timeout_s`` bounds each connection attempt. The ``wait_*`` arguments tune
    stamina's backoff between attempts. Raises ``ValueError`` for an unusable URL (not
    http(s), credentials or a query in it), an empty token or out-of-range bounds.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        operation_deadline_s: float = DEFAULT_OPERATION_DEADLINE_S,
        max_attempts: int = MAX_TRANSPORT_ATTEMPTS,
        connect_timeout_s: float = 10.0,
        wait_initial_s: float = 0.1,
        wait_max_s: float = 5.0,
        wait_jitter_s: float = 0.5,
    ) -> None:
        url = URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("broker base_url must be an http(s) URL with a host")
        if url.user is not None or url.password is not None or url.query_string:
            raise ValueError("broker base_url must not carry credentials or a query")
        if not token:
            raise ValueError("broker token must not be empty")
        if operation_deadline_s <= 0:
            raise ValueError("operation_deadline_s must be > 0")
        if not 1 <= max_attempts <= MAX_TRANSPORT_ATTEMPTS:
            raise ValueError(f"max_attempts must be between 1 and {MAX_TRANSPORT_ATTEMPTS}")
        self._base = url
        self._token = token
        auth = {"Authorization": f"Bearer {token}", "Accept": "*/*"}
        self._headers = {False: auth, True: {**auth, "Content-Type": "application/json"}}
        self._bundle_headers = {**self._headers[True], "Accept": f"{ACTIONS_FRAME_MEDIA_TYPE}, application/json"}
        self._urls: dict[str, URL] = {}
        self._pool: aiohttp.ClientSession | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._pool_users = 0
        self.operation_deadline_s = operation_deadline_s
        self.max_attempts = max_attempts
        self.connect_timeout_s = connect_timeout_s
        # No total: the operation deadline bounds every attempt (see ``_send``).
        self._attempt_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s)
        self._wait = {
            "wait_initial": wait_initial_s,
            "wait_max": wait_max_s,
            "wait_jitter": wait_jitter_s,
        }

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], **options: Any) -> BrokerClient:
        """Build a client from ``AUTOCAD_BENCH_BROKER_URL``/``AUTOCAD_BENCH_BROKER_TOKEN``.

        Raises :class:`~autocad_bench.errors.ConfigError` naming each missing variable
        (never a value).
        """
        problems = [
            Problem(name, "environment variable is not set")
            for name in (BROKER_URL_ENV, BROKER_TOKEN_ENV)
            if not environ.get(name)
        ]
        if problems:
            raise ConfigError(problems)
        try:
            return cls(environ[BROKER_URL_ENV], environ[BROKER_TOKEN_ENV], **options)
        except ValueError as error:
            raise ConfigError([Problem(BROKER_URL_ENV, str(error))]) from None

    @property
    def base_url(self) -> str:
        return str(self._base)

    def __repr__(self) -> str:
        return f"BrokerClient(base_url={self.base_url!r})"

    # Connection reuse ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def keep_alive(self) -> AsyncIterator[BrokerClient]:
        """Let the *first* attempt of each operation reuse an idle keep-alive connection.

        Until the block exits, first attempts go through one pooled session of this client
        instead of opening a TCP connection each; retries after a transport failure still
        always open a brand-new connection. Blocks may nest or overlap (tasks of one event
        loop); the pool is closed (:meth:`aclose`) when the last block exits, so nothing is
        left open once the caller is done. Outside any block every attempt uses a fresh
        connection, as before.
        """
        self._pool_users += 1
        try:
            yield self
        finally:
            self._pool_users -= 1
            if self._pool_users == 0:
                await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled keep-alive connections, if any (idempotent)."""
        pool, self._pool, self._pool_loop = self._pool, None, None
        if pool is not None and not pool.closed:
            await pool.close()

    def _pooled_session(self) -> aiohttp.ClientSession | None:
        """The keep-alive session for a first attempt, or ``None`` outside :meth:`keep_alive`."""
        if self._pool_users <= 0:
            return None
        loop = asyncio.get_running_loop()
        if self._pool is not None and not self._pool.closed:
            # A pool belongs to the loop that made it; another loop gets fresh connections.
            return self._pool if self._pool_loop is loop else None
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=_KEEPALIVE_S)
        pool = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), read_bufsize=_READ_BUFSIZE
        )
        # aiohttp silently resends an idempotent request once when a reused connection turns
        # out to be dead; every resend must be one of our counted, fresh-connection attempts.
        pool._retry_connection = False
        self._pool, self._pool_loop = pool, loop
        return pool

    # Endpoints -----------------------------------------------------------------------

    async def health(self) -> HealthResponse:
        """``GET /health``: broker identity and desktop size."""
        return await self._json(Route.HEALTH, "/health", None, HealthResponse)

    async def lease(self, task_id: str, attempt_id: str) -> LeaseResponse:
        """``POST /lease``; replaying the same identity returns the existing lease.

        Raises :class:`BrokerConflict` (``lease_conflict``) if another identity holds it.
        """
        body = LeaseRequest(task_id=task_id, attempt_id=attempt_id)
        return await self._json(Route.LEASE, "/lease", body, LeaseResponse)

    async def reset(self, session_id: str, *, deadline_s: float | None = None) -> ResetResponse:
        """``POST /reset`` with the session's fixed reset id; a replay returns frame 0 again."""
        body = ResetRequest(session_id=session_id, request_id=reset_request_id(session_id))
        return await self._json(Route.RESET, "/reset", body, ResetResponse, deadline_s)

    async def actions(
        self,
        session_id: str,
        request_id: str,
        expected_index: int,
        actions: Sequence[Action] | ValidatedBatch,
        *,
        deadline_s: float | None = None,
    ) -> ActionsResponse:
        """``POST /actions``: inject the batch exactly once.

        The default deadline is the operation deadline plus the batch's total ``wait``
        time. Raises :class:`BrokerConflict` for a reused request id with another body or
        a wrong ``expected_index`` (``next_index`` set), :class:`BrokerHTTPError` 422 when
        the broker's own validation refuses the batch.
        """
        items = actions.actions if isinstance(actions, ValidatedBatch) else tuple(actions)
        body = ActionsRequest(
            session_id=session_id,
            request_id=request_id,
            expected_index=expected_index,
            actions=items,
        )
        if deadline_s is None:
            deadline_s = self._actions_deadline(items)
        return await self._json(Route.ACTIONS, "/actions", body, ActionsResponse, deadline_s)

    def _actions_deadline(self, items: Sequence[Action]) -> float:
        """The operation deadline plus every ``wait`` and ``hold_key`` second, plus the broker's
        bounded wait for an idle application after each ``wait`` (:data:`WAIT_IDLE_LIMIT_S`)."""
        seconds = sum(getattr(action, "seconds", 0.0) for action in items)
        idle = WAIT_IDLE_LIMIT_S * sum(1 for action in items if action.type == "wait")
        return self.operation_deadline_s + seconds + idle

    async def actions_with_frame(
        self,
        session_id: str,
        request_id: str,
        expected_index: int,
        actions: Sequence[Action] | ValidatedBatch,
        *,
        deadline_s: float | None = None,
    ) -> tuple[ActionsResponse, memoryview]:
        """:meth:`actions`, plus the post-batch frame's PNG bytes, checksum-verified.

        The PNG is a read-only view into the answer (``bytes(view)`` copies it): a frame is
        about half a megabyte and the caller normally only writes it to a file.

        Asks for the frame in the same answer (:data:`ACTIONS_FRAME_MEDIA_TYPE`), which saves
        a round trip per turn; a broker that answers plain JSON gets the usual
        ``GET /frames/{sequence}``. Failures are those of :meth:`actions` and :meth:`frame`.
        A frame whose bytes do not match ``frame.sha256`` counts as a body lost in transit:
        the batch is re-sent under the same request id and the broker replays it.
        """
        items = actions.actions if isinstance(actions, ValidatedBatch) else tuple(actions)
        body = ActionsRequest(
            session_id=session_id, request_id=request_id, expected_index=expected_index, actions=items
        )
        if deadline_s is None:
            deadline_s = self._actions_deadline(items)

        def parse(reply: _Reply) -> tuple[ActionsResponse, memoryview | None]:
            if reply.content_type != ACTIONS_FRAME_MEDIA_TYPE:
                return self._parse_json(Route.ACTIONS, ActionsResponse, reply), None
            try:
                split = int(reply.actions_length or "")
            except ValueError:
                raise BrokerProtocolError(f"{Route.ACTIONS.value}: response lacks {ACTIONS_LENGTH_HEADER}") from None
            if not 0 < split <= len(reply.body):
                raise _CorruptBody("the actions response is shorter than its announced JSON part")
            view = memoryview(reply.body)
            response = self._parse_json(Route.ACTIONS, ActionsResponse, reply, view[:split])
            png = view[split:]
            if hashlib.sha256(png).hexdigest() != response.frame.sha256:
                raise _CorruptBody("the frame does not match its SHA-256")
            return response, png

        response, png = await self._operation(
            Route.ACTIONS, "/actions", body.model_dump_json().encode("utf-8"), parse, deadline_s,
            headers=self._bundle_headers,
        )
        if png is None:
            png = memoryview(await self.frame(response.frame.sequence, expected_sha256=response.frame.sha256))
        return response, png

    async def frame(self, sequence: int, *, expected_sha256: str | None = None) -> bytes:
        """``GET /frames/{sequence}``: PNG bytes whose SHA-256 matched the broker's header.

        With ``expected_sha256`` (from a ``FrameInfo``) the bytes must also match it, else
        :class:`BrokerProtocolError`.
        """
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
            raise ValueError("frame sequence must be an int >= 0")
        return await self._binary(Route.FRAME, f"/frames/{sequence}", expected_sha256)

    async def checkpoint(
        self, session_id: str, request_id: str, *, deadline_s: float | None = None
    ) -> CheckpointResponse:
        """``POST /checkpoint``: the broker saves the drawing; returns the artifact named."""
        body = CheckpointRequest(session_id=session_id, request_id=request_id)
        return await self._json(Route.CHECKPOINT, "/checkpoint", body, CheckpointResponse, deadline_s)

    async def artifact(self, name: str, *, expected_sha256: str | None = None) -> bytes:
        """``GET /artifacts/{name}``: the artifact's bytes, checksum-verified."""
        if not re.fullmatch(NAME_PATTERN, name):
            raise ValueError("artifact name must be one path segment of letters, digits, . _ -")
        return await self._binary(Route.ARTIFACT, f"/artifacts/{name}", expected_sha256)

    async def events(self) -> EventsResponse:
        """``GET /events``: the broker's event log (read-only)."""
        return await self._json(Route.EVENTS, "/events", None, EventsResponse)

    async def frame_events(self) -> FrameEventsResponse:
        """``GET /frame-events``: one record per captured frame (read-only)."""
        return await self._json(Route.FRAME_EVENTS, "/frame-events", None, FrameEventsResponse)

    async def status(self) -> StatusResponse:
        """``GET /status``: current session state (read-only)."""
        return await self._json(Route.STATUS, "/status", None, StatusResponse)

    async def release(self, session_id: str, *, deadline_s: float | None = None) -> ReleaseResponse:
        """``POST /release``; releasing an already released session succeeds again."""
        body = ReleaseRequest(session_id=session_id)
        return await self._json(Route.RELEASE, "/release", body, ReleaseResponse, deadline_s)

    # Operation machinery -------------------------------------------------------------

    async def _json(
        self,
        route: Route,
        path: str,
        body: BaseModel | None,
        model: type[_M],
        deadline_s: float | None = None,
    ) -> _M:
        payload = None if body is None else body.model_dump_json().encode("utf-8")
        return await self._operation(
            route, path, payload, functools.partial(self._parse_json, route, model), deadline_s
        )

    @staticmethod
    def _parse_json(route: Route, model: type[_M], reply: _Reply, data: bytes | memoryview | None = None) -> _M:
        """``reply``'s JSON body (or ``data``, a part of it) as ``model``."""
        raw = reply.body if data is None else bytes(data)
        try:
            return model.model_validate_json(raw)
        except ValidationError as error:
            if any(problem["type"] == "json_invalid" for problem in error.errors()):
                raise _CorruptBody("response body is not JSON") from None
            raise BrokerProtocolError(
                f"{route.value}: response does not match {model.__name__}: "
                f"{error.error_count()} problem(s), first: {error.errors()[0]['msg']}"
            ) from None

    async def _binary(self, route: Route, path: str, expected_sha256: str | None) -> bytes:
        def parse(reply: _Reply) -> bytes:
            if reply.sha256_header is None:
                raise BrokerProtocolError(f"{route.value}: response lacks {CONTENT_SHA256_HEADER}")
            digest = hashlib.sha256(reply.body).hexdigest()
            if digest != reply.sha256_header.lower():
                raise _CorruptBody("body does not match its advertised SHA-256")
            if expected_sha256 is not None and digest != expected_sha256:
                raise BrokerProtocolError(f"{route.value}: broker served {digest}, expected {expected_sha256}")
            return reply.body

        return await self._operation(route, path, None, parse, None)

    async def _operation(
        self,
        route: Route,
        path: str,
        payload: bytes | None,
        parse: Callable[[_Reply], _T],
        deadline_s: float | None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> _T:
        budget = self.operation_deadline_s if deadline_s is None else deadline_s
        deadline = asyncio.get_running_loop().time() + budget
        attempts = 0
        last_error = ""
        try:
            async with asyncio.timeout_at(deadline):
                async for attempt in stamina.retry_context(
                    on=_is_transport_failure,
                    attempts=self.max_attempts,
                    timeout=budget,
                    **self._wait,
                ):
                    with attempt:
                        attempts += 1
                        try:
                            # Only a first attempt may reuse a kept-alive connection.
                            reply = await self._send(
                                route, path, payload, deadline, reuse=attempts == 1, headers=headers
                            )
                            return parse(reply)
                        except _TransportFailure as error:
                            last_error = str(error)
                            log.info(
                                "%s attempt %d/%d failed: %s",
                                route.value, attempts, self.max_attempts, last_error,
                            )  # fmt: skip
                            if asyncio.get_running_loop().time() >= deadline:
                                # No attempt starts after the deadline, whichever clock saw it first.
                                raise TimeoutError from None
                            raise
        except TimeoutError as error:
            # The deadline expired while an attempt or a backoff sleep was in flight.
            raise self._exhausted(route, attempts, budget, last_error) from error
        except _TransportFailure as error:
            raise self._exhausted(route, attempts, budget, last_error) from error
        raise AssertionError("unreachable: stamina either returns or raises")

    def _exhausted(self, route: Route, attempts: int, budget: float, last_error: str) -> BrokerTransportExhausted:
        if attempts >= self.max_attempts:
            return BrokerTransportExhausted(
                route.value, attempts, "attempts", f"attempt limit of {attempts} reached", last_error
            )
        return BrokerTransportExhausted(
            route.value, attempts, "deadline", f"deadline of {budget:g} s passed", last_error
        )

    async def _send(
        self,
        route: Route,
        path: str,
        payload: bytes | None,
        deadline: float,
        *,
        reuse: bool,
        headers: Mapping[str, str] | None = None,
    ) -> _Reply:
        """One HTTP attempt; raises for HTTP error statuses.

        ``reuse`` (first attempts only) takes a connection from the keep-alive pool when
        :meth:`keep_alive` is open; otherwise the attempt runs on a brand-new connection.
        """
        # One clock owns the deadline: the ``asyncio.timeout_at`` around the whole operation.
        # An aiohttp total timeout due at the same instant raced it: when both fired together
        # aiohttp turned the cancellation into its own TimeoutError, the attempt looked like a
        # transport failure, and attempts were started after the deadline had passed.
        timeout = self._attempt_timeout
        if headers is None:
            headers = self._headers[payload is not None]
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._base.with_path(self._base.path.rstrip("/") + path)
        pool = self._pooled_session() if reuse else None
        failure = ""
        try:
            if pool is not None:
                reply = await _request(pool, route, url, payload, headers, timeout)
            else:
                # A fresh connector per attempt: a retry must never reuse a socket that the
                # failed attempt (or a dead tunnel) left behind.
                connector = aiohttp.TCPConnector(force_close=True, limit=1)
                async with aiohttp.ClientSession(
                    connector=connector,
                    timeout=timeout,
                    cookie_jar=aiohttp.DummyCookieJar(),
                    read_bufsize=_READ_BUFSIZE,
                ) as session:
                    # aiohttp silently resends an idempotent request once after a disconnect;
                    # every resend must be one of our counted, backed-off attempts instead.
                    session._retry_connection = False
                    reply = await _request(session, route, url, payload, headers, timeout)
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as error:
            if isinstance(error, aiohttp.InvalidURL):
                raise
            failure = _describe(error)
        if failure:
            # Raised outside the handler so the aiohttp exception is not kept as context.
            raise _TransportFailure(failure)
        if reply.status >= 400:
            raise _http_error(reply)
        if reply.status != 200:
            raise BrokerProtocolError(f"{route.value}: unexpected HTTP status {reply.status}")
        return reply


_READ_BUFSIZE = 1 << 20
"""Read-ahead per connection: a whole frame arrives without pausing the socket (default 64 KiB)."""

_KEEPALIVE_S = 15.0
"""Idle pooled connections are closed after this long (aiohttp's client default)."""


async def _request(
    session: aiohttp.ClientSession,
    route: Route,
    url: URL,
    payload: bytes | None,
    headers: Mapping[str, str],
    timeout: aiohttp.ClientTimeout,
) -> _Reply:
    async with session.request(route.method, url, data=payload, headers=headers, timeout=timeout) as response:
        return _Reply(
            status=response.status,
            content_type=response.content_type,
            sha256_header=response.headers.get(CONTENT_SHA256_HEADER),
            body=await response.read(),
            actions_length=response.headers.get(ACTIONS_LENGTH_HEADER),
        )


def _http_error(reply: _Reply) -> BrokerHTTPError:
    try:
        error = ErrorResponse.model_validate_json(reply.body)
    except ValidationError:
        text = reply.body[:200].decode("utf-8", "replace")
        return BrokerHTTPError(reply.status, f"http_{reply.status}", text or "no error body")
    if reply.status == 409:
        return BrokerConflict(error.code.value, error.message, next_index=error.next_index)
    return BrokerHTTPError(reply.status, error.code.value, error.message, problems=error.problems)


def _describe(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
