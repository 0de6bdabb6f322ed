"""An in-process broker that speaks the real wire protocol over real HTTP, for tests.

:class:`FakeBroker` implements every endpoint of ``docs/broker-protocol.md`` with the same
replay rules as the real broker (lease identity, fixed reset key, cached action results,
request-id and index conflicts, state-idempotent checkpoint and release), records every
injected action in :attr:`FakeBroker.injected`, and serves genuine PNG frames built with
``zlib``/``struct`` only. Faults are scheduled with :meth:`FakeBroker.add_faults`: each
incoming request takes the first queued :class:`Fault` whose route matches, so a test can
lose a request before it is handled, lose or truncate a response after the action ran,
delay a request, or answer with an HTTP error.

Usage::

    async with FakeBroker(display=DisplaySize(width=64, height=48)) as broker:
        client = BrokerClient(broker.url, broker.token)
        broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.ACTIONS))
        ...
        assert [item.index for item in broker.injected] == [0, 1, 2]
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import hmac
import json
import re
import secrets
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from autocad_bench.actions.models import Action, action_to_wire
from autocad_bench.actions.validation import BatchRejection, validate_batch
from autocad_bench.broker.protocol import (
    CONTENT_SHA256_HEADER,
    DEFAULT_MAX_BODY_BYTES,
    ERROR_STATUS,
    NAME_PATTERN,
    ActionReceipt,
    ActionsEnvelope,
    ActionsResponse,
    ArtifactInfo,
    BrokerEvent,
    BrokerState,
    CheckpointRequest,
    CheckpointResponse,
    ErrorCode,
    ErrorResponse,
    EventsResponse,
    FrameEvent,
    FrameEventsResponse,
    FrameInfo,
    HealthResponse,
    LeaseRequest,
    LeaseResponse,
    ReleaseRequest,
    ReleaseResponse,
    ResetRequest,
    ResetResponse,
    Route,
    StatusResponse,
    actions_frame_body,
    request_fingerprint,
    reset_request_id,
    wants_actions_frame,
)
from autocad_bench.providers.models import DisplaySize

_M = TypeVar("_M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FaultKind(enum.StrEnum):
    """What happens to the request a :class:`Fault` is applied to."""

    PASS = "pass"
    """Handled normally (a placeholder that keeps a fault schedule aligned)."""
    DROP_REQUEST = "drop_request"
    """The connection is closed before the handler runs: no side effect, no answer."""
    DROP_RESPONSE = "drop_response"
    """The handler runs (the side effect happens), then the connection closes unanswered."""
    TRUNCATE_RESPONSE = "truncate_response"
    """The handler runs; the headers and half the body are sent, then the connection closes."""
    CORRUPT_RESPONSE = "corrupt_response"
    """The handler runs; the body arrives complete but with its last byte altered."""
    DELAY = "delay"
    """The request waits ``delay_s`` seconds, then is handled normally."""
    HTTP_ERROR = "http_error"
    """Answered with ``status`` (an ``internal_error`` body) without running the handler."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One scheduled fault; ``route=None`` applies it to whichever request comes next."""

    kind: FaultKind
    route: Route | None = None
    delay_s: float = 0.0
    status: int = 500


@dataclass(frozen=True, slots=True)
class InjectedInput:
    """One action the fake "injected" into its desktop (the recording input log)."""

    index: int
    request_id: str
    action: Action
    injected_at: datetime


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as it reached the fake: route, client port, body digest, fault applied.

    A new ``peer_port`` means a new TCP connection; equal ``body_sha256`` values mean the
    bytes were resent unchanged.
    """

    route: str
    peer_port: int | None
    body_sha256: str
    fault: FaultKind | None


@dataclass
class _Cached:
    fingerprint: str
    response: BaseModel


@dataclass
class _Session:
    session_id: str
    task_id: str
    attempt_id: str
    state: BrokerState = "leased"
    reset: ResetResponse | None = None
    next_index: int = 0
    actions: dict[str, _Cached] = field(default_factory=dict)
    checkpoints: dict[str, _Cached] = field(default_factory=dict)
    frames: dict[int, tuple[FrameInfo, bytes]] = field(default_factory=dict)
    frame_events: list[FrameEvent] = field(default_factory=list)


class _Abort(Exception):
    """Raised inside a handler to answer with a protocol error body."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        next_index: int | None = None,
        problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.error = ErrorResponse(code=code, message=message, next_index=next_index, problems=problems)


class FakeBroker:
    """A protocol-faithful broker on ``127.0.0.1`` at a random port.

    ``display`` is the desktop size (frames are PNGs of exactly that size, so keep it small
    where speed matters); ``visual_stable`` decides ``post_action_visual_stable`` from the
    frame sequence; ``fail_injection_at`` lists action indices whose injection fails (the
    batch then stops with ``ok=false`` receipts); ``wait_scale`` multiplies the real time
    spent on ``wait`` actions (0 skips them); ``actions_frame=False`` plays a broker that
    never sends the frame with the actions answer (clients must then fetch it).
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        display: DisplaySize | None = None,
        broker_version: str = "windows-autocad-2019-v11",
        app: str = "fake-cad",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        visual_stable: Callable[[int], bool] | None = None,
        fail_injection_at: frozenset[int] = frozenset(),
        wait_scale: float = 0.0,
        actions_frame: bool = True,
    ) -> None:
        self.token = token or secrets.token_urlsafe(24)
        self.display = display or DisplaySize()
        self.broker_version = broker_version
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.visual_stable = visual_stable or (lambda sequence: True)
        self.fail_injection_at = fail_injection_at
        self.wait_scale = wait_scale
        self.actions_frame = actions_frame
        self.boot_id = secrets.token_hex(8)
        self.startup_id = secrets.token_hex(8)
        self.manifest_sha256 = hashlib.sha256(b"fake-broker-manifest").hexdigest()
        self.injected: list[InjectedInput] = []
        self.requests: list[RecordedRequest] = []
        self._faults: list[Fault] = []
        self._events: list[BrokerEvent] = []
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._artifacts: dict[str, bytes] = {}
        self._counter = 0
        self._lock = asyncio.Lock()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # Lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1 at a free port (see :attr:`url`)."""
        app = web.Application(
            middlewares=[self._fault_middleware, self._auth_middleware, self._error_middleware],
            client_max_size=self.max_body_bytes,
        )
        for route, handler in self._routes().items():
            app.router.add_route(route.method, route.path, handler)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` once started."""
        if self._port is None:
            raise RuntimeError("FakeBroker is not started")
        return f"http://127.0.0.1:{self._port}"

    def clear(self) -> None:
        """Forget every session, log and pending fault (reuse one server across examples)."""
        self.injected.clear()
        self.requests.clear()
        self._faults.clear()
        self._events.clear()
        self._sessions.clear()
        self._artifacts.clear()
        self._current = None

    # Faults ---------------------------------------------------------------------------------

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults; each request consumes the first queued fault matching its route."""
        self._faults.extend(faults)

    @property
    def pending_faults(self) -> int:
        return len(self._faults)

    def _take_fault(self, route: Route | None) -> Fault | None:
        for position, fault in enumerate(self._faults):
            if fault.route is None or fault.route == route:
                return self._faults.pop(position)
        return None

    # Middlewares -------------------------------------------------------------------------------

    @web.middleware
    async def _fault_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        route = _route_of(request)
        fault = self._take_fault(route)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            body = b""
            request[_TOO_LARGE] = True
        self.requests.append(
            RecordedRequest(
                route=route.value if route else f"{request.method} {request.path}",
                peer_port=peer[1] if peer else None,
                body_sha256=hashlib.sha256(body).hexdigest(),
                fault=fault.kind if fault else None,
            )
        )
        kind = fault.kind if fault else FaultKind.PASS
        if kind is FaultKind.DELAY:
            assert fault is not None
            await asyncio.sleep(fault.delay_s)
        if kind is FaultKind.DROP_REQUEST:
            return _abort_connection(request)
        if kind is FaultKind.HTTP_ERROR:
            assert fault is not None
            error = ErrorResponse(code=ErrorCode.INTERNAL_ERROR, message="injected fault")
            return web.json_response(error.model_dump(mode="json"), status=fault.status)
        response = await handler(request)
        if kind is FaultKind.DROP_RESPONSE:
            return _abort_connection(request)
        if kind is FaultKind.TRUNCATE_RESPONSE and isinstance(response, web.Response):
            return await _send_truncated(request, response)
        if kind is FaultKind.CORRUPT_RESPONSE and isinstance(response, web.Response):
            body = bytes(response.body) if isinstance(response.body, bytes | bytearray) else b""
            if body:
                response.body = body[:-1] + bytes([body[-1] ^ 0x01])
        return response

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        supplied = request.headers.get("Authorization", "").encode("utf-8", "replace")
        expected = f"Bearer {self.token}".encode()
        if not hmac.compare_digest(supplied, expected):
            body = ErrorResponse(code=ErrorCode.UNAUTHORIZED, message="unauthorized")
            return web.json_response(body.model_dump(mode="json"), status=401, headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    @web.middleware
    async def _error_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except _Abort as abort:
            return _error_response(abort.error)
        except web.HTTPRequestEntityTooLarge:
            return _error_response(ErrorResponse(code=ErrorCode.BODY_TOO_LARGE, message="request body too large"))
        except web.HTTPMethodNotAllowed:
            return _error_response(ErrorResponse(code=ErrorCode.METHOD_NOT_ALLOWED, message="method not allowed"))
        except web.HTTPNotFound:
            return _error_response(ErrorResponse(code=ErrorCode.NOT_FOUND, message="not found"))
        except Exception as error:  # a fake-broker bug must still answer like a broker
            return _error_response(ErrorResponse(code=ErrorCode.INTERNAL_ERROR, message=type(error).__name__))

    # Handlers -----------------------------------------------------------------------------------

    def _routes(self) -> dict[Route, Handler]:
        return {
            Route.HEALTH: self._health,
            Route.LEASE: self._lease,
            Route.RESET: self._reset,
            Route.ACTIONS: self._actions,
            Route.FRAME: self._frame,
            Route.CHECKPOINT: self._checkpoint,
            Route.ARTIFACT: self._artifact,
            Route.EVENTS: self._events_route,
            Route.FRAME_EVENTS: self._frame_events,
            Route.STATUS: self._status,
            Route.RELEASE: self._release,
        }

    async def _health(self, request: web.Request) -> web.Response:
        current = self._current
        return _ok(
            HealthResponse(
                broker_version=self.broker_version,
                input_driver_version="fake-input-1",
                pid=12345,
                interactive_session_id=1,
                desktop_width=self.display.width,
                desktop_height=self.display.height,
                boot_id=self.boot_id,
                startup_id=self.startup_id,
                manifest_sha256=self.manifest_sha256,
                app=self.app,
                state=current.state if current else "idle",
                session_id=current.session_id if current else None,
            )
        )

    async def _lease(self, request: web.Request) -> web.Response:
        body = await _parse(request, LeaseRequest)
        async with self._lock:
            identity = (body.task_id, body.attempt_id)
            current = self._current
            if current is not None and current.state != "released":
                if (current.task_id, current.attempt_id) != identity:
                    raise _Abort(ErrorCode.LEASE_CONFLICT, "the desktop is leased to another attempt")
                return _ok(_lease_response(current, replayed=True))
            for known in self._sessions.values():
                # An identity names one session for good: a released one is not revived.
                if (known.task_id, known.attempt_id) == identity:
                    return _ok(_lease_response(known, replayed=True))
            self._counter += 1
            session = _Session(f"session-{self._counter}", body.task_id, body.attempt_id)
            self._sessions[session.session_id] = session
            self._current = session
            self._event("lease", session_id=session.session_id, task_id=body.task_id)
            return _ok(_lease_response(session, replayed=False))

    async def _reset(self, request: web.Request) -> web.Response:
        body = await _parse(request, ResetRequest)
        async with self._lock:
            session = self._session(body.session_id)
            if body.request_id != reset_request_id(session.session_id):
                raise _Abort(
                    ErrorCode.RESET_KEY_CONFLICT,
                    f"reset request_id must be {reset_request_id(session.session_id)!r}",
                )
            if session.reset is not None:
                return _ok(session.reset.model_copy(update={"replayed": True}))
            if session.state != "leased":
                raise _Abort(ErrorCode.WRONG_STATE, f"session is {session.state}")
            frame = self._capture(session, body.request_id, 0, 0, stable=True)
            session.state = "ready"
            session.reset = ResetResponse(
                session_id=session.session_id,
                request_id=body.request_id,
                frame=frame,
                next_index=0,
                replayed=False,
            )
            self._event("reset", session_id=session.session_id, frame=frame.sequence)
            return _ok(session.reset)

    async def _actions(self, request: web.Request) -> web.Response:
        body = await _parse(request, ActionsEnvelope)
        fingerprint = request_fingerprint(body)
        async with self._lock:
            session = self._session(body.session_id)
            cached = session.actions.get(body.request_id)
            with_frame = wants_actions_frame(request.headers.get("Accept"))
            if cached is not None:
                if cached.fingerprint != fingerprint:
                    raise _Abort(ErrorCode.REQUEST_CONFLICT, "request_id was already used with another body")
                return self._actions_answer(session, cached.response.model_copy(update={"replayed": True}), with_frame)
            if session.state != "ready":
                raise _Abort(ErrorCode.WRONG_STATE, f"session is {session.state}, not ready")
            if body.expected_index != session.next_index:
                raise _Abort(
                    ErrorCode.INDEX_CONFLICT,
                    f"expected_index is {body.expected_index}, broker is at {session.next_index}",
                    next_index=session.next_index,
                )
            checked = validate_batch({"actions": body.actions}, self.display, len(body.actions))
            if isinstance(checked, BatchRejection):
                raise _Abort(ErrorCode.BATCH_REJECTED, "batch rejected", problems=tuple(checked.messages()))
            response = await self._inject(session, body.request_id, checked.actions)
            session.actions[body.request_id] = _Cached(fingerprint, response)
            return self._actions_answer(session, response, with_frame)

    def _actions_answer(self, session: _Session, response: BaseModel, with_frame: bool) -> web.Response:
        """The JSON answer, or JSON plus the post-batch frame when the client asked for it."""
        stored = None
        if with_frame and self.actions_frame and isinstance(response, ActionsResponse):
            stored = session.frames.get(response.frame.sequence)
        if stored is None or not isinstance(response, ActionsResponse):
            return _ok(response)
        body, headers = actions_frame_body(response, stored[1])
        return web.Response(body=body, headers=headers)

    async def _inject(self, session: _Session, request_id: str, actions: tuple[Action, ...]) -> ActionsResponse:
        first = session.next_index
        receipts: list[ActionReceipt] = []
        failed = False
        for offset, action in enumerate(actions):
            index = first + offset
            if failed or index in self.fail_injection_at:
                error = "not attempted" if failed else "input injection failed"
                receipts.append(ActionReceipt(index=index, type=action.type, injected_at=None, ok=False, error=error))
                failed = True
                continue
            if action.type == "wait" and self.wait_scale > 0:
                await asyncio.sleep(action.seconds * self.wait_scale)
            now = datetime.now(UTC)
            self.injected.append(InjectedInput(index, request_id, action, now))
            receipts.append(ActionReceipt(index=index, type=action.type, injected_at=now, ok=True))
        session.next_index = first + len(actions)
        sequence = len(session.frames)
        stable = self.visual_stable(sequence)
        frame = self._capture(session, request_id, first, session.next_index, stable=stable)
        self._event(
            "actions",
            session_id=session.session_id,
            request_id=request_id,
            first_index=first,
            next_index=session.next_index,
            actions=[action_to_wire(action) for action in actions],
        )
        return ActionsResponse(
            session_id=session.session_id,
            request_id=request_id,
            first_index=first,
            next_index=session.next_index,
            receipts=tuple(receipts),
            frame=frame,
            post_action_visual_stable=stable,
            replayed=False,
        )

    async def _frame(self, request: web.Request) -> web.Response:
        raw = request.match_info["sequence"]
        if not raw.isdigit() or not raw.isascii():
            raise _Abort(ErrorCode.BAD_REQUEST, "frame sequence must be a non-negative integer")
        session = self._current
        stored = session.frames.get(int(raw)) if session else None
        if stored is None:
            raise _Abort(ErrorCode.NOT_FOUND, f"no frame {raw}")
        return _binary(stored[1], "image/png")

    async def _checkpoint(self, request: web.Request) -> web.Response:
        body = await _parse(request, CheckpointRequest)
        fingerprint = request_fingerprint(body)
        async with self._lock:
            session = self._session(body.session_id)
            cached = session.checkpoints.get(body.request_id)
            if cached is not None:
                if cached.fingerprint != fingerprint:
                    raise _Abort(ErrorCode.REQUEST_CONFLICT, "request_id was already used with another body")
                return _ok(cached.response.model_copy(update={"replayed": True}))
            if session.state != "ready":
                raise _Abort(ErrorCode.WRONG_STATE, f"session is {session.state}, not ready")
            name = "drawing.dxf"
            content = self._drawing(session)
            self._artifacts[name] = content
            artifact = ArtifactInfo(name=name, size=len(content), sha256=hashlib.sha256(content).hexdigest())
            response = CheckpointResponse(
                session_id=session.session_id,
                request_id=body.request_id,
                artifact=artifact,
                next_index=session.next_index,
                replayed=False,
            )
            session.checkpoints[body.request_id] = _Cached(fingerprint, response)
            self._event("checkpoint", session_id=session.session_id, artifact=name)
            return _ok(response)

    async def _artifact(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if not re.fullmatch(NAME_PATTERN, name):
            raise _Abort(ErrorCode.BAD_REQUEST, "artifact name must be a single plain file name")
        content = self._artifacts.get(name)
        if content is None:
            raise _Abort(ErrorCode.NOT_FOUND, f"no artifact {name}")
        return _binary(content, "application/octet-stream")

    async def _events_route(self, request: web.Request) -> web.Response:
        return _ok(EventsResponse(events=tuple(self._events)))

    async def _frame_events(self, request: web.Request) -> web.Response:
        events = tuple(self._current.frame_events) if self._current else ()
        return _ok(FrameEventsResponse(frame_events=events))

    async def _status(self, request: web.Request) -> web.Response:
        session = self._current
        checkpoints = tuple(
            cached.response.artifact
            for cached in (session.checkpoints.values() if session else ())
            if isinstance(cached.response, CheckpointResponse)
        )
        return _ok(
            StatusResponse(
                state=session.state if session else "idle",
                session_id=session.session_id if session else None,
                task_id=session.task_id if session else None,
                attempt_id=session.attempt_id if session else None,
                next_index=session.next_index if session else 0,
                last_frame_sequence=max(session.frames) if session and session.frames else None,
                checkpoints=checkpoints,
            )
        )

    async def _release(self, request: web.Request) -> web.Response:
        body = await _parse(request, ReleaseRequest)
        async with self._lock:
            session = self._session(body.session_id)
            replayed = session.state == "released"
            if not replayed:
                session.state = "released"
                self._event("release", session_id=session.session_id)
            return _ok(ReleaseResponse(session_id=session.session_id, replayed=replayed))

    # Helpers ----------------------------------------------------------------------------

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise _Abort(ErrorCode.UNKNOWN_SESSION, "unknown session")
        return session

    def _capture(self, session: _Session, request_id: str, first: int, next_index: int, *, stable: bool) -> FrameInfo:
        sequence = len(session.frames)
        data = png_frame(self.display.width, self.display.height, sequence, len(self.injected))
        info = FrameInfo(
            sequence=sequence,
            sha256=hashlib.sha256(data).hexdigest(),
            width=self.display.width,
            height=self.display.height,
            size=len(data),
        )
        session.frames[sequence] = (info, data)
        session.frame_events.append(
            FrameEvent(
                sequence=sequence,
                sha256=info.sha256,
                width=info.width,
                height=info.height,
                captured_at=datetime.now(UTC),
                request_id=request_id,
                first_index=first,
                next_index=next_index,
                visual_stable=stable,
            )
        )
        return info

    def _drawing(self, session: _Session) -> bytes:
        lines = [f"session={session.session_id}", f"next_index={session.next_index}"]
        lines += [json.dumps(action_to_wire(item.action), sort_keys=True) for item in self.injected]
        return ("\n".join(lines) + "\n").encode()

    def _event(self, kind: str, **detail: Any) -> None:
        self._events.append(BrokerEvent(seq=len(self._events), at=datetime.now(UTC), kind=kind, detail=detail))


def png_frame(width: int, height: int, sequence: int, injected: int) -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` whose colour and text chunk vary per frame."""
    palette = ((32, 32, 40), (200, 200, 210), (40, 90, 160), (160, 60, 40), (60, 140, 70))
    rgb = palette[(sequence + injected) % len(palette)]
    text = f"autocad-bench fake frame\x00sequence={sequence};injected={injected}".encode("latin-1")
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
            _chunk(b"tEXt", text),
            _chunk(b"IDAT", _solid_idat(width, height, rgb)),
            _chunk(b"IEND", b""),
        )
    )


_IDAT_CACHE: dict[tuple[int, int, tuple[int, int, int]], bytes] = {}


def _solid_idat(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    key = (width, height, rgb)
    if key not in _IDAT_CACHE:
        row = b"\x00" + bytes(rgb) * width
        _IDAT_CACHE[key] = zlib.compress(row * height, 6)
    return _IDAT_CACHE[key]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _route_of(request: web.Request) -> Route | None:
    resource = request.match_info.route.resource
    if resource is None:
        return None
    try:
        return Route(f"{request.method} {resource.canonical}")
    except ValueError:
        return None


_TOO_LARGE = web.RequestKey("body_too_large", bool)


async def _parse(request: web.Request, model: type[_M]) -> _M:
    if request.get(_TOO_LARGE):
        raise _Abort(ErrorCode.BODY_TOO_LARGE, "request body too large")
    raw = await request.read()
    try:
        data = json.loads(raw)
    except ValueError:
        raise _Abort(ErrorCode.BAD_REQUEST, "body is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = tuple(
            f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}"
            for item in error.errors(include_url=False, include_input=False)
        )
        raise _Abort(ErrorCode.BAD_REQUEST, "body does not match the request schema", problems=problems) from None


def _ok(model: BaseModel) -> web.Response:
    return web.Response(body=model.model_dump_json().encode(), content_type="application/json")


def _binary(data: bytes, content_type: str) -> web.Response:
    return web.Response(
        body=data,
        content_type=content_type,
        headers={CONTENT_SHA256_HEADER: hashlib.sha256(data).hexdigest()},
    )


def _error_response(error: ErrorResponse) -> web.Response:
    return web.Response(
        body=error.model_dump_json().encode(),
        status=ERROR_STATUS[error.code],
        content_type="application/json",
    )


def _lease_response(session: _Session, *, replayed: bool) -> LeaseResponse:
    return LeaseResponse(
        session_id=session.session_id,
        task_id=session.task_id,
        attempt_id=session.attempt_id,
        replayed=replayed,
    )


def _abort_connection(request: web.Request) -> web.Response:
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=204)


async def _send_truncated(request: web.Request, response: web.Response) -> web.StreamResponse:
    body = bytes(response.body) if isinstance(response.body, bytes | bytearray) else b""
    stream = web.StreamResponse(status=response.status, headers=response.headers)
    stream.content_length = len(body)
    await stream.prepare(request)
    await stream.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.abort()
    return stream


__all__ = [
    "FakeBroker",
    "Fault",
    "FaultKind",
    "InjectedInput",
    "RecordedRequest",
    "png_frame",
]
