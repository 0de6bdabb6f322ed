"""An in-process broker that speaks the real wire protocol over real HTTP, for tests.

:class:`FakeBroker` is served by the real broker's own protocol layer
(:class:`~autocad_bench.broker.service.BrokerService`: every endpoint, authentication,
replay caches, state and index checks, error bodies and status codes of
``docs/broker-protocol.md``); it replaces only the desktop. Its
:class:`~autocad_bench.broker.service.DesktopDriver` records every injected action in
:attr:`FakeBroker.injected`, serves genuine PNG frames built with ``zlib``/``struct`` only
and "saves" a text drawing of the injected actions. Faults are scheduled with
:meth:`FakeBroker.add_faults`: each incoming request takes the first queued :class:`Fault`
whose route matches, so a test can lose a request before it is handled, lose or truncate a
response after the action ran, delay a request, or answer with an HTTP error.

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
import json
import secrets
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiohttp import web
from aiohttp.typedefs import Handler

from autocad_bench.actions.models import (
    Action,
    ClickAction,
    DragAction,
    MouseDownAction,
    MouseUpAction,
    MoveAction,
    ScrollAction,
    action_to_wire,
)
from autocad_bench.broker.protocol import (
    DEFAULT_MAX_BODY_BYTES,
    ActionReceipt,
    ArtifactInfo,
    ErrorCode,
    ErrorResponse,
    FrameInfo,
    PointerPosition,
    Route,
)
from autocad_bench.broker.service import BrokerService, Session, driver, error_response, read_body, route_of
from autocad_bench.broker.service.http import Abort
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import DisplaySize


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


@dataclass(eq=False)
class FakeDesktop:
    """The fake's per-session desktop: every frame it captured, with its PNG bytes."""

    frames: dict[int, tuple[FrameInfo, bytes]] = field(default_factory=dict)


class FakeBroker(driver.DesktopDriver[FakeDesktop], driver.Served):
    """A protocol-faithful broker on ``127.0.0.1`` at a random port.

    The protocol is the real broker's own (:class:`~autocad_bench.broker.service.BrokerService`);
    only the desktop is simulated. ``display`` is the desktop size (frames are PNGs of exactly
    that size, so keep it small where speed matters); ``visual_stable`` decides
    ``post_action_visual_stable`` from the frame sequence; ``fail_injection_at`` lists action
    indices whose injection fails (the batch then stops with ``ok=false`` receipts);
    ``wait_scale`` multiplies the real time spent on ``wait`` actions (0 skips them);
    ``actions_frame=False`` plays a broker that never sends the frame with the actions
    answer (clients must then fetch it).

    The fake desktop has a pointer: :attr:`pointer` starts at ``pointer`` and follows every
    pointer action it executes (``move``, ``click``, ``scroll``, ``mouse_down``,
    ``mouse_up``: their point; ``drag``: its last point). Every frame reports it as
    ``FrameInfo.pointer``; a test plays a move the application made itself by assigning
    :attr:`pointer` between requests. ``report_pointer=False`` plays a broker from before
    the field (frames carry no pointer).
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
        pointer: PointerPosition | None = (0, 0),
        report_pointer: bool = True,
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
        self._initial_pointer = pointer
        self.pointer = pointer
        """Where the fake desktop's pointer is now (``None``: unknown, e.g. before any move)."""
        self.report_pointer = report_pointer
        self.boot_id = secrets.token_hex(8)
        self.startup_id = secrets.token_hex(8)
        self.manifest_sha256 = hashlib.sha256(b"fake-broker-manifest").hexdigest()
        self.injected: list[InjectedInput] = []
        self.requests: list[RecordedRequest] = []
        self._faults: list[Fault] = []
        self._artifacts: dict[str, bytes] = {}
        self._corrupt_frames: dict[int, bytes | None] = {}
        self._corrupt_artifacts: dict[str, bytes | None] = {}
        self.service = BrokerService(
            self,
            lambda: self.token,  # read per request: tests re-arm a broker by setting .token
            max_body_bytes=max_body_bytes,
            actions_frame=actions_frame,
            middlewares=(self._fault_middleware,),
        )

    # Lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1 at a free port (see :attr:`url`); ``OSError`` if none can be bound."""
        await self.service.listen("127.0.0.1", 0, shutdown_timeout=0.5)

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        await self.service.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` once started."""
        try:
            return f"http://127.0.0.1:{self.service.listener.port}"
        except RuntimeError:
            raise RuntimeError("FakeBroker is not started") from None

    def clear(self) -> None:
        """Forget every session, log and pending fault, and put the pointer back where it
        started (reuse one server across examples)."""
        self.pointer = self._initial_pointer
        self.injected.clear()
        self.requests.clear()
        self._faults.clear()
        self._artifacts.clear()
        self._corrupt_frames.clear()
        self._corrupt_artifacts.clear()
        self.service.clear()

    def corrupt(self, *, frame: int | None = None, artifact: str | None = None, data: bytes | None = None) -> None:
        """From now on serve other bytes for frame ``frame`` or artifact ``artifact`` than the
        ones recorded (``data``, or the recorded bytes with one bit flipped), while the recorded
        size and SHA-256 stay: a stored file that changed on disk after it was captured."""
        if (frame is None) == (artifact is None):
            raise ValueError("name exactly one of frame= or artifact=")
        if frame is not None:
            self._corrupt_frames[frame] = data
        else:
            assert artifact is not None
            self._corrupt_artifacts[artifact] = data

    @staticmethod
    def _flipped(original: bytes, replacement: bytes | None) -> bytes:
        if replacement is not None:
            return replacement
        return bytes([original[0] ^ 0x01]) + original[1:] if original else b"\x00"

    @property
    def _current(self) -> FakeDesktop | None:
        """The desktop of the active or last session (tests read its stored frames)."""
        session = self.service.current
        return session.desktop if session is not None else None

    # Faults ---------------------------------------------------------------------------------

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults; each request consumes the first queued fault matching its route."""
        self._faults.extend(faults)

    @property
    def pending_faults(self) -> int:
        return len(self._faults)

    def clear_faults(self) -> None:
        """Drop every queued fault that no request has consumed yet (sessions and logs stay)."""
        self._faults.clear()

    def _take_fault(self, route: Route | None) -> Fault | None:
        for position, fault in enumerate(self._faults):
            if fault.route is None or fault.route == route:
                return self._faults.pop(position)
        return None

    @web.middleware
    async def _fault_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        route = route_of(request)
        fault = self._take_fault(route)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        try:
            body = await read_body(request, self.max_body_bytes)
        except Abort:
            body = b""
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
            return error_response(error, status=fault.status)
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

    # Desktop driver ---------------------------------------------------------------------------

    @property
    def identity(self) -> driver.BrokerIdentity:
        return driver.BrokerIdentity(
            broker_version=self.broker_version,
            input_driver_version="fake-input-1",
            pid=12345,
            interactive_session_id=1,
            boot_id=self.boot_id,
            startup_id=self.startup_id,
            manifest_sha256=self.manifest_sha256,
            app=self.app,
        )

    def desktop_size(self) -> tuple[int, int]:
        return self.display.width, self.display.height

    async def open_session(self, session_id: str) -> FakeDesktop:
        return FakeDesktop()

    async def reset(self, session: Session[FakeDesktop]) -> driver.ResetOutcome:
        return driver.ResetOutcome(self._capture(session.desktop, 0), pointer=self._reported_pointer())

    async def live_display(self) -> DisplaySize:
        return self.display

    async def run_batch(
        self,
        session: Session[FakeDesktop],
        request_id: str,
        actions: Sequence[Action],
        first_index: int,
        sequence: int,
    ) -> driver.BatchOutcome:
        """Record the actions in :attr:`injected` (those at ``fail_injection_at`` fail and stop
        the batch), move :attr:`pointer` with each pointer action, sleep ``wait`` actions
        times ``wait_scale``, then draw the next frame and report the pointer with it."""
        receipts: list[ActionReceipt] = []
        failed = False
        for index, action in enumerate(actions, start=first_index):
            if failed or index in self.fail_injection_at:
                error = "not attempted" if failed else "input injection failed"
                receipts.append(ActionReceipt(index=index, type=action.type, injected_at=None, ok=False, error=error))
                failed = True
                continue
            if action.type == "wait" and self.wait_scale > 0:
                await asyncio.sleep(action.seconds * self.wait_scale)
            now = datetime.now(UTC)
            self.injected.append(InjectedInput(index, request_id, action, now))
            self.pointer = pointer_after(action, self.pointer)
            receipts.append(ActionReceipt(index=index, type=action.type, injected_at=now, ok=True))
        frame = self._capture(session.desktop, sequence)
        return driver.BatchOutcome(
            tuple(receipts), frame, self.visual_stable(sequence), pointer=self._reported_pointer()
        )

    def _reported_pointer(self) -> PointerPosition | None:
        return self.pointer if self.report_pointer else None

    async def read_frame(self, session: Session[FakeDesktop], info: FrameInfo) -> bytes:
        stored = session.desktop.frames[info.sequence][1]
        if info.sequence in self._corrupt_frames:
            return self._flipped(stored, self._corrupt_frames[info.sequence])
        return stored

    async def checkpoint(self, session: Session[FakeDesktop], request_id: str) -> driver.CheckpointOutcome:
        """"Save" ``drawing.dxf``: the session, its next index and every injected action as text."""
        name = "drawing.dxf"
        content = self._drawing(session)
        self._artifacts[name] = content
        artifact = ArtifactInfo(name=name, size=len(content), sha256=hashlib.sha256(content).hexdigest())
        return driver.CheckpointOutcome(artifact)

    def _drawing(self, session: Session[FakeDesktop]) -> bytes:
        """The bytes a save writes (tests replace it to play a desktop holding a real drawing)."""
        lines = [f"session={session.session_id}", f"next_index={session.next_index}"]
        lines += [json.dumps(action_to_wire(item.action), sort_keys=True) for item in self.injected]
        return ("\n".join(lines) + "\n").encode()

    async def read_artifact(self, session: Session[FakeDesktop], info: ArtifactInfo) -> bytes:
        stored = self._artifacts[info.name]
        if info.name in self._corrupt_artifacts:
            return self._flipped(stored, self._corrupt_artifacts[info.name])
        return stored

    async def release(self, session: Session[FakeDesktop]) -> JsonObject:
        return {}

    def _capture(self, desktop: FakeDesktop, sequence: int) -> driver.PngFrame:
        data = png_frame(self.display.width, self.display.height, sequence, len(self.injected))
        frame = driver.PngFrame(data, hashlib.sha256(data).hexdigest(), self.display.width, self.display.height)
        info = FrameInfo(sequence=sequence, sha256=frame.sha256, width=frame.width, height=frame.height, size=len(data))
        desktop.frames[sequence] = (info, data)
        return frame


def pointer_after(action: Action, pointer: PointerPosition | None) -> PointerPosition | None:
    """Where the pointer is after ``action`` ran from ``pointer`` (unchanged by non-pointer actions)."""
    match action:
        case DragAction(path=path):
            return (path[-1][0], path[-1][1])
        case MoveAction(x=x, y=y) | ClickAction(x=x, y=y) | ScrollAction(x=x, y=y):
            return (x, y)
        case MouseDownAction(x=x, y=y) | MouseUpAction(x=x, y=y):
            return (x, y)
    return pointer


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
    "FakeDesktop",
    "Fault",
    "FaultKind",
    "InjectedInput",
    "RecordedRequest",
    "png_frame",
    "pointer_after",
]
