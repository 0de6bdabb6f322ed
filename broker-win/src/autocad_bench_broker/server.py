"""The broker HTTP server: ``docs/broker-protocol.md`` on top of real desktop drivers.

:class:`BrokerServer` is an aiohttp application that owns one desktop: an
:class:`~autocad_bench_broker.drivers.input.InputDriver` (input), a
:class:`~autocad_bench_broker.drivers.capture.ScreenCapture` (frames) and an
:class:`~autocad_bench_broker.apps.base.ApplicationAdapter` (the CAD program). It speaks the
protocol exactly as the reference fake (:mod:`autocad_bench.testing.fake_broker`) does — same
order of checks, same status codes, same replay rules — but every step touches the real
desktop:

- ``POST /reset`` runs the adapter handoff (kill, restore a fresh copy of the template to the
  broker-owned attempt path, launch, verify ready with stable pixels), up to
  ``reset_launches`` complete launches per call, and stores the stable first frame as frame 0;
- ``POST /actions`` re-validates the whole batch against the live desktop size and the
  session's remaining action budget, injects it through the input driver in a worker thread,
  waits (bounded) for the pixels to settle and stores the post-batch frame;
- ``POST /checkpoint`` asks the adapter for its trusted save and snapshots the drawing as the
  artifact (``attempt.dxf`` / ``attempt.dwg``);
- ``POST /release`` kills the application's process tree.

Exactly-once rules (see the protocol's "Exactly-once" section): answers of mutations are
cached under their identity and replayed with ``replayed=true`` and no side effect; a
request id reused with another body is a conflict; concurrent duplicates of one action
request wait for the single execution (``Session.inflight``) and then replay it. Every
mutation runs as a task shielded from its HTTP request, so a client that disconnects never
leaves an executed but uncached mutation behind. Once input has been injected the batch is
answered 200 whatever the frame did (``post_action_visual_stable=false`` when it did not
settle); only if *no* frame at all can be captured or stored is the answer a 500, and that
500 is cached like a result so a replay cannot inject twice.

Blocking work (drivers, adapter, file I/O) never runs on the event loop; desktop-touching
work is additionally serialized by one desktop lock because the adapter is not thread-safe.
Errors never echo secrets or file system paths; details go to the event log (``/events``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import secrets
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import BaseModel, JsonValue, ValidationError

from autocad_bench.actions import Action, BatchRejection, validate_batch
from autocad_bench.broker.protocol import (
    CONTENT_SHA256_HEADER,
    DEFAULT_MAX_BODY_BYTES,
    ERROR_STATUS,
    ActionReceipt,
    ActionsEnvelope,
    ActionsResponse,
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
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import DisplaySize
from autocad_bench_broker.apps.base import ApplicationAdapter, HandoffEvidence, HandoffResult, ReadyResult
from autocad_bench_broker.desktop import (
    SettledFrame,
    describe_error,
    inject_batch,
    interruptible_sleep,
    run_blocking,
    settle_and_encode,
)
from autocad_bench_broker.drivers.capture import (
    DEFAULT_PNG_COMPRESS_LEVEL,
    Frame,
    PngImage,
    ScreenCapture,
    StabilityPolicy,
    encode_png,
)
from autocad_bench_broker.drivers.input import InputDriver
from autocad_bench_broker.events import EventLog
from autocad_bench_broker.identity import boot_id as read_boot_id
from autocad_bench_broker.identity import new_startup_id
from autocad_bench_broker.readiness import health_fields
from autocad_bench_broker.state import CachedAnswer, Session
from autocad_bench_broker.store import NotStored, SessionFiles, StoreError, is_plain_name

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")

DEFAULT_MAX_ACTIONS = 5000
"""Actions one session may inject (the rollout budget of the sandbox contract)."""

_UNAUTHORIZED_BODY = ErrorResponse(code=ErrorCode.UNAUTHORIZED, message="unauthorized").model_dump_json().encode()
_MAX_SEQUENCE_DIGITS = 9


@dataclass(frozen=True)
class BrokerSettings:
    """Everything the server needs besides its drivers (see the CLI for the defaults).

    ``workdir`` is the runtime directory (sessions, frames, artifacts, ``events.jsonl``);
    ``template`` the drawing every reset restores; ``artifact_name`` the file name of the
    attempt drawing and of the checkpoint artifact (``attempt.dxf`` for LibreCAD,
    ``attempt.dwg`` for AutoCAD). ``stability`` bounds the post-action poll (a batch is
    never failed by it); ``reset_launches`` is the number of complete launches per reset call.
    """

    workdir: Path
    template: Path
    broker_version: str
    manifest_sha256: str
    interactive_session_id: int
    artifact_name: str = "attempt.dxf"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_actions: int = DEFAULT_MAX_ACTIONS
    stability: StabilityPolicy = field(default_factory=StabilityPolicy)
    reset_launches: int = 2
    png_compress_level: int = DEFAULT_PNG_COMPRESS_LEVEL
    shutdown_timeout_s: float = 30.0
    """Bound of :meth:`BrokerServer.stop` as a whole (grace, application kill, closing)."""
    readiness: Path | None = None
    """The image's readiness record (``--readiness``): ``/health`` then reports its
    ``deployment_id``, ``startup_id`` and prewarm result when it belongs to this boot."""
    request_grace_s: float = 2.0
    """Part of the shutdown that in-flight requests get to finish."""

    def __post_init__(self) -> None:
        if not is_plain_name(self.artifact_name):
            raise ValueError("artifact_name must be a plain file name")
        if self.reset_launches < 1 or self.max_actions < 1 or self.max_body_bytes < 1024:
            raise ValueError("reset_launches and max_actions must be >= 1, max_body_bytes >= 1024")
        if self.shutdown_timeout_s <= 0 or self.request_grace_s < 0:
            raise ValueError("shutdown_timeout_s must be > 0 and request_grace_s >= 0")


class Abort(Exception):
    """Raised inside a handler to answer with a protocol error body (never logged as a fault)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        next_index: int | None = None,
        problems: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.error = ErrorResponse(code=code, message=message, next_index=next_index, problems=tuple(problems))


@dataclass(frozen=True, slots=True)
class _BatchOutcome:
    receipts: tuple[ActionReceipt, ...]
    settled: SettledFrame | None
    error: str | None


class BrokerServer:
    """One broker: protocol state plus the desktop it drives.

    ``token`` is the bearer token (kept only as the expected header bytes, never logged).
    ``middlewares`` are placed *outside* authentication (tests use them to lose responses).
    ``boot_id``/``startup_id`` default to the real boot id and a fresh random id. Call
    :meth:`start` to listen and :meth:`stop` to shut down (which kills the application).
    """

    def __init__(
        self,
        settings: BrokerSettings,
        token: str,
        driver: InputDriver,
        capture: ScreenCapture,
        adapter: ApplicationAdapter,
        *,
        middlewares: Sequence[Middleware] = (),
        boot_id: str | None = None,
        startup_id: str | None = None,
    ) -> None:
        if not token:
            raise ValueError("the broker token must not be empty")
        self.settings = settings
        self.driver = driver
        self.capture = capture
        self.adapter = adapter
        self._expected_auth = f"Bearer {token}".encode()
        self._extra_middlewares = tuple(middlewares)
        self.boot_id = boot_id if boot_id is not None else read_boot_id()
        self.startup_id = startup_id if startup_id is not None else new_startup_id()
        self.events = EventLog(settings.workdir / "events.jsonl")
        self._sessions: dict[str, Session] = {}
        self._current: Session | None = None
        self._counter = 0
        self._lease_lock = asyncio.Lock()
        self._desktop = asyncio.Lock()
        self._stopping = threading.Event()
        self._sleep = interruptible_sleep(self._stopping)
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-png")
        self._tasks: set[asyncio.Task[Any]] = set()
        self._size: tuple[int, int] | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._stopped = False

    # Lifecycle --------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application (routes of :class:`Route`, auth and error middlewares)."""
        app = web.Application(
            middlewares=[*self._extra_middlewares, self._auth_middleware, self._error_middleware],
            client_max_size=self.settings.max_body_bytes,
        )
        for route, handler in self._routes().items():
            app.router.add_route(route.method, route.path, handler)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Check the desktop, then listen on ``host:port`` (0 picks a free port); returns :attr:`url`.

        Raises :class:`~autocad_bench_broker.errors.CaptureError` if the display cannot be
        captured, ``ValueError`` if the input driver and the capture disagree on the desktop
        size, and ``OSError`` if the address cannot be bound.
        """
        self.settings.workdir.mkdir(parents=True, exist_ok=True)
        capture_size = await run_blocking(lambda: self.capture.size)
        input_size = await run_blocking(self.driver.screen_size)
        if tuple(capture_size) != tuple(input_size):
            raise ValueError(f"the input desktop is {input_size} but the captured desktop is {capture_size}")
        self._size = (int(capture_size[0]), int(capture_size[1]))
        grace = min(self.settings.request_grace_s, self.settings.shutdown_timeout_s / 5)
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=grace)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self._port = int(address[1])
        self.events.add(
            "startup",
            {
                "pid": os.getpid(),
                "startup_id": self.startup_id,
                "port": self._port,
                "app": self.adapter.name,
                "input_driver_version": self.driver.version,
                "desktop": list(self._size),
            },
        )
        return self.url

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the broker is not listening")
        return self._port

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the listener (loopback name for wildcard binds)."""
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the broker is not listening")
        host = str(self._runner.addresses[0][0])
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        """Graceful shutdown within ``settings.shutdown_timeout_s``; idempotent, never raises.

        Order: stop listening and give in-flight requests ``request_grace_s`` (at most a fifth
        of the budget); interrupt ``wait`` actions and stability polls; wait for the desktop
        lock for at most a quarter of what is left (a reset still launching is not waited
        for: the application is killed anyway); kill the application tree with what remains
        but one second; close the adapter, driver and capture. A step that overruns its
        share is abandoned (its daemon thread cannot hold the process) and logged as a
        ``fault`` event.
        """
        if self._stopped:
            return
        self._stopped = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.shutdown_timeout_s
        self._stopping.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        acquired = False
        try:
            await asyncio.wait_for(self._desktop.acquire(), timeout=max(0.0, (deadline - loop.time()) / 4))
            acquired = True
        except TimeoutError:
            self.events.add("fault", {"operation": "shutdown", "error": "the desktop is still busy; killing anyway"})
        try:
            bound = max(0.1, deadline - loop.time() - 1.0)
            kill = await asyncio.wait_for(run_blocking(self.adapter.kill, name="broker-kill"), timeout=bound)
            self.events.add("shutdown", {"kill": kill.model_dump(mode="json")})
            if not kill.gone:
                self.events.add("fault", {"operation": "shutdown", "error": "application processes survived"})
        except Exception as error:  # shutdown must finish whatever the adapter does
            self.events.add("fault", {"operation": "shutdown", "error": describe_error(error)})
        finally:
            if acquired:
                self._desktop.release()
        for closer in (self.adapter.close, self.driver.close, self.capture.close):
            try:
                bound = max(0.1, deadline - loop.time())
                await asyncio.wait_for(run_blocking(closer, name="broker-close"), timeout=bound)
            except Exception as error:
                self.events.add("fault", {"operation": "close", "error": describe_error(error)})
        self._encoder.shutdown(wait=False, cancel_futures=True)
        self.events.close()

    async def __aenter__(self) -> BrokerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # Middlewares ------------------------------------------------------------------------------

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # Checked before routing so that an unknown path without a token says nothing either.
        supplied = request.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(supplied, self._expected_auth):
            return web.Response(
                body=_UNAUTHORIZED_BODY,
                status=401,
                content_type="application/json",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await handler(request)

    @web.middleware
    async def _error_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except Abort as abort:
            return _error_response(abort.error)
        except web.HTTPException as error:
            code = {
                400: ErrorCode.BAD_REQUEST,
                404: ErrorCode.NOT_FOUND,
                405: ErrorCode.METHOD_NOT_ALLOWED,
                413: ErrorCode.BODY_TOO_LARGE,
            }.get(error.status, ErrorCode.INTERNAL_ERROR)
            message = error.reason.lower() if code is not ErrorCode.INTERNAL_ERROR else "internal error"
            return _error_response(ErrorResponse(code=code, message=message))
        except Exception as error:  # a broker bug still answers like a broker, and is logged
            self.events.add("fault", {"operation": f"{request.method} {request.path}", "error": describe_error(error)})
            return _error_response(ErrorResponse(code=ErrorCode.INTERNAL_ERROR, message="internal error"))

    # Routing ----------------------------------------------------------------------------------

    def _routes(self) -> dict[Route, Handler]:
        return {
            Route.HEALTH: self._health,
            Route.LEASE: self._lease,
            Route.RESET: self._reset,
            Route.ACTIONS: self._actions,
            Route.FRAME: self._frame,
            Route.CHECKPOINT: self._checkpoint,
            Route.ARTIFACT: self._artifact,
            Route.EVENTS: self._events,
            Route.FRAME_EVENTS: self._frame_events,
            Route.STATUS: self._status,
            Route.RELEASE: self._release,
        }

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise Abort(ErrorCode.UNKNOWN_SESSION, "unknown session")
        return session

    def _spawn(self, coroutine: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        """Run a mutation as its own task, independent of the request that asked for it."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)

        def finished(done: asyncio.Task[_T]) -> None:
            self._tasks.discard(done)
            if not done.cancelled():
                done.exception()  # retrieved here: the requester may have gone away

        task.add_done_callback(finished)
        return task

    async def _shielded(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return await asyncio.shield(self._spawn(coroutine))

    # Read-only routes -------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        current = self._current
        width, height = self._size or (1, 1)
        path, boot = self.settings.readiness, self.boot_id
        if path is None:
            readiness = health_fields(None, boot)
        else:  # a small file read, still kept off the event loop
            readiness = await run_blocking(lambda: health_fields(path, boot), name="broker-readiness")
        return _ok(
            HealthResponse(
                broker_version=self.settings.broker_version,
                input_driver_version=self.driver.version,
                pid=os.getpid(),
                interactive_session_id=self.settings.interactive_session_id,
                desktop_width=width,
                desktop_height=height,
                boot_id=self.boot_id,
                startup_id=self.startup_id,
                manifest_sha256=self.settings.manifest_sha256,
                app=self.adapter.name,
                state=self._state(),
                session_id=current.session_id if current else None,
                **readiness,
            )
        )

    def _state(self) -> BrokerState:
        return self._current.state if self._current is not None else "idle"

    async def _frame(self, request: web.Request) -> web.Response:
        raw = request.match_info["sequence"]
        if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_SEQUENCE_DIGITS:
            raise Abort(ErrorCode.BAD_REQUEST, "frame sequence must be a non-negative integer")
        sequence = int(raw)
        session = self._current
        if session is None or sequence >= len(session.frames):
            raise Abort(ErrorCode.NOT_FOUND, f"no frame {sequence}")
        info = session.frames[sequence]
        files = session.files
        try:
            data = await run_blocking(lambda: files.read_frame(sequence, info.sha256), name="broker-read")
        except StoreError as error:
            self.events.add("fault", {"operation": "frame", "sequence": sequence, "error": describe_error(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the stored frame is unavailable") from None
        return _binary(data, "image/png", info.sha256)

    async def _artifact(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        # Refused before any file system access: only plain names recorded by a checkpoint.
        if not is_plain_name(name):
            raise Abort(ErrorCode.BAD_REQUEST, "artifact name must be a single plain file name")
        session = self._current
        info = session.artifacts.get(name) if session is not None else None
        if session is None or info is None:
            raise Abort(ErrorCode.NOT_FOUND, "no such artifact")
        files = session.files
        try:
            data = await run_blocking(lambda: files.read_artifact(name, info.sha256), name="broker-read")
        except NotStored:
            self.events.add("fault", {"operation": "artifact", "name": name, "error": "artifact file is missing"})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the stored artifact is unavailable") from None
        except StoreError as error:
            self.events.add("fault", {"operation": "artifact", "name": name, "error": describe_error(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the stored artifact is unavailable") from None
        return _binary(data, "application/octet-stream", info.sha256)

    async def _events(self, request: web.Request) -> web.Response:
        return _ok(EventsResponse(events=self.events.snapshot()))

    async def _frame_events(self, request: web.Request) -> web.Response:
        session = self._current
        return _ok(FrameEventsResponse(frame_events=tuple(session.frame_events) if session else ()))

    async def _status(self, request: web.Request) -> web.Response:
        session = self._current
        if session is None:
            return _ok(
                StatusResponse(
                    state="idle",
                    session_id=None,
                    task_id=None,
                    attempt_id=None,
                    next_index=0,
                    last_frame_sequence=None,
                    checkpoints=(),
                )
            )
        return _ok(
            StatusResponse(
                state=session.state,
                session_id=session.session_id,
                task_id=session.task_id,
                attempt_id=session.attempt_id,
                next_index=session.next_index,
                last_frame_sequence=session.last_frame_sequence,
                checkpoints=tuple(session.checkpoint_artifacts),
            )
        )

    # Lease ------------------------------------------------------------------------------------

    async def _lease(self, request: web.Request) -> web.Response:
        body = await self._parse(request, LeaseRequest)
        async with self._lease_lock:
            current = self._current
            if current is not None and current.state != "released":
                if current.identity != (body.task_id, body.attempt_id):
                    raise Abort(ErrorCode.LEASE_CONFLICT, "the desktop is leased to another attempt")
                return _ok(current.lease_response(replayed=True))
            self._counter += 1
            # The random part keeps ids of a restarted broker from matching old ones.
            session_id = f"session-{self._counter}-{secrets.token_hex(4)}"
            files = SessionFiles(self.settings.workdir / "sessions" / session_id)
            await run_blocking(files.create, name="broker-files")
            session = Session(session_id, body.task_id, body.attempt_id, files)
            self._sessions[session_id] = session
            self._current = session
            self.events.add("lease", {"session_id": session_id, "task_id": body.task_id, "attempt_id": body.attempt_id})
            return _ok(session.lease_response(replayed=False))

    # Reset ------------------------------------------------------------------------------------

    async def _reset(self, request: web.Request) -> web.Response:
        body = await self._parse(request, ResetRequest)
        session = self._session(body.session_id)
        expected = reset_request_id(session.session_id)
        if body.request_id != expected:
            raise Abort(ErrorCode.RESET_KEY_CONFLICT, f"reset request_id must be {expected!r}")
        if session.reset is not None:
            return _ok(session.reset.model_copy(update={"replayed": True}))
        return _ok(await self._shielded(self._do_reset(session)))

    async def _do_reset(self, session: Session) -> ResetResponse:
        async with session.lock:
            if session.reset is not None:  # a concurrent duplicate finished first
                return session.reset.model_copy(update={"replayed": True})
            if session.state != "leased":
                raise Abort(ErrorCode.WRONG_STATE, f"session is {session.state}; reset needs a fresh lease")
            async with self._desktop:
                handoff, ready, error = await run_blocking(lambda: self._handoff(session), name="broker-reset")
                frame_png = None
                if ready is not None and ready.frame is not None:
                    frame = ready.frame
                    level = self.settings.png_compress_level
                    files = session.files
                    try:
                        frame_png = await run_blocking(
                            lambda: _encode_and_store(files, 0, frame, level), name="broker-frame"
                        )
                    except Exception as store_error:
                        error = f"frame 0 could not be stored: {describe_error(store_error)}"
                if frame_png is None:
                    # No handoff: leave no half-started application behind.
                    kill = await run_blocking(self.adapter.kill, name="broker-kill")
                    self.events.add(
                        "reset_failed",
                        {
                            "session_id": session.session_id,
                            "handoff": handoff.model_dump(mode="json") if handoff else None,
                            "error": error,
                            "kill": kill.model_dump(mode="json"),
                        },
                    )
                    launches = self.settings.reset_launches
                    raise Abort(
                        ErrorCode.INTERNAL_ERROR,
                        f"the application did not reach a clean handoff within {launches} launch(es)",
                    )
            assert handoff is not None and ready is not None
            info = self._record_frame(session, frame_png, reset_request_id(session.session_id), 0, 0, True)
            response = ResetResponse(
                session_id=session.session_id,
                request_id=reset_request_id(session.session_id),
                frame=info,
                next_index=0,
                replayed=False,
            )
            session.reset = response
            session.state = "ready"
            self.events.add(
                "reset",
                {
                    "session_id": session.session_id,
                    "frame": info.sequence,
                    "frame_sha256": info.sha256,
                    "launches": len(handoff.attempts) + len(handoff.launch_errors),
                    "evidence": ready.evidence.model_dump(mode="json"),
                    "pid": self.adapter.pid,
                },
            )
            return response

    def _handoff(self, session: Session) -> tuple[HandoffResult | None, ReadyResult | None, str | None]:
        """Blocking: the adapter handoff into the session's attempt path, never raising."""

        def on_attempt(number: int, evidence: HandoffEvidence | None) -> None:
            detail: JsonObject = {"session_id": session.session_id, "launch": number}
            if evidence is None:
                detail["ok"] = False
                detail["error"] = "launch failed"
            else:
                detail["ok"] = evidence.ok
                detail["failures"] = list(evidence.failures)
            self.events.add("reset_attempt", detail)

        attempt_path = session.files.attempt_path(self.settings.artifact_name)
        try:
            handoff, ready = self.adapter.handoff(
                self.settings.template,
                attempt_path,
                launches=self.settings.reset_launches,
                on_attempt=on_attempt,
            )
        except Exception as error:  # an adapter bug must not leave the reset half-done
            return None, None, describe_error(error)
        if ready is None:
            return handoff, None, "; ".join(handoff.launch_errors) or "handoff conditions not met"
        if ready.frame is None:
            return handoff, None, "the handoff produced no initial frame"
        return handoff, ready, None

    # Actions ----------------------------------------------------------------------------------

    async def _actions(self, request: web.Request) -> web.Response:
        envelope = await self._parse(request, ActionsEnvelope)
        fingerprint = request_fingerprint(envelope)
        session = self._session(envelope.session_id)
        request_id = envelope.request_id
        with_frame = wants_actions_frame(request.headers.get("Accept"))
        while True:
            cached = session.actions.get(request_id)
            if cached is not None:
                return await self._actions_answer(
                    session, _replayed_model(cached, fingerprint, ActionsResponse), with_frame
                )
            running = session.inflight.get(request_id)
            if running is None or running.done():
                break
            # A duplicate of a request that is executing right now: wait, then replay it.
            await asyncio.wait([running])
        task = self._spawn(self._execute_actions(session, envelope, fingerprint))
        session.inflight[request_id] = task
        task.add_done_callback(lambda _: _forget(session.inflight, request_id, task))
        return await self._actions_answer(session, await asyncio.shield(task), with_frame)

    async def _actions_answer(self, session: Session, response: ActionsResponse, with_frame: bool) -> web.Response:
        """The JSON answer, or JSON followed by the post-batch PNG when the client asked.

        The frame normally comes from memory (the latest one); a replay of an older batch
        reads it back from the session's store. If that read fails the answer is plain
        JSON, and the client fetches the frame with ``GET /frames/{sequence}``.
        """
        if not with_frame:
            return _ok(response)
        info = response.frame
        latest = session.last_png
        if latest is not None and latest.sha256 == info.sha256:
            data = latest.data
        else:
            files = session.files
            try:
                data = await run_blocking(lambda: files.read_frame(info.sequence, info.sha256), name="broker-read")
            except StoreError as error:
                self.events.add(
                    "fault", {"operation": "frame", "sequence": info.sequence, "error": describe_error(error)}
                )
                return _ok(response)
        body, headers = actions_frame_body(response, data)
        return web.Response(body=body, headers=headers)

    async def _execute_actions(self, session: Session, envelope: ActionsEnvelope, fingerprint: str) -> ActionsResponse:
        async with session.lock:
            cached = session.actions.get(envelope.request_id)
            if cached is not None:
                return _replayed_model(cached, fingerprint, ActionsResponse)
            if session.state != "ready":
                raise Abort(ErrorCode.WRONG_STATE, f"session is {session.state}, not ready")
            if envelope.expected_index != session.next_index:
                raise Abort(
                    ErrorCode.INDEX_CONFLICT,
                    f"expected_index is {envelope.expected_index}, the broker is at {session.next_index}",
                    next_index=session.next_index,
                )
            display = await self._live_display()
            remaining = self.settings.max_actions - session.next_index
            checked = validate_batch({"actions": envelope.actions}, display, remaining)
            if isinstance(checked, BatchRejection):
                problems = checked.messages()
                rejected: JsonObject = {
                    "session_id": session.session_id,
                    "request_id": envelope.request_id,
                    "problems": list[JsonValue](problems),
                }
                self.events.add("batch_rejected", rejected)
                raise Abort(ErrorCode.BATCH_REJECTED, "batch rejected; nothing was injected", problems=problems)
            actions = checked.actions
            first = session.next_index
            sequence = len(session.frames)
            async with self._desktop:
                outcome = await run_blocking(lambda: self._run_batch(session, actions, first, sequence))
            # From here on the input happened: the indices are consumed whatever comes next.
            session.next_index = first + len(actions)
            detail: JsonObject = {
                "session_id": session.session_id,
                "request_id": envelope.request_id,
                "first_index": first,
                "next_index": session.next_index,
                "actions": [_wire(action) for action in actions],
            }
            failed = next((receipt for receipt in outcome.receipts if not receipt.ok), None)
            if failed is not None:
                detail["failed_index"] = failed.index
                detail["error"] = failed.error
            if outcome.settled is None:
                detail["frame_error"] = outcome.error
                self.events.add("actions", detail)
                error = ErrorResponse(
                    code=ErrorCode.INTERNAL_ERROR,
                    message="the input was injected but no post-batch frame could be captured",
                )
                # Cached like a result: a replay must repeat this answer, never the input.
                session.actions[envelope.request_id] = CachedAnswer(fingerprint, error)
                raise Abort(error.code, error.message)
            settled = outcome.settled
            info = self._record_frame(
                session, settled.png, envelope.request_id, first, session.next_index, settled.stable
            )
            response = ActionsResponse(
                session_id=session.session_id,
                request_id=envelope.request_id,
                first_index=first,
                next_index=session.next_index,
                receipts=outcome.receipts,
                frame=info,
                post_action_visual_stable=settled.stable,
                replayed=False,
            )
            session.actions[envelope.request_id] = CachedAnswer(fingerprint, response)
            detail.update(
                {
                    "frame": info.sequence,
                    "frame_sha256": info.sha256,
                    "visual_stable": settled.stable,
                    "settle_s": round(settled.elapsed_s, 3),
                    "grabs": settled.grabs,
                }
            )
            self.events.add("actions", detail)
            return response

    async def _live_display(self) -> DisplaySize:
        try:
            width, height = await run_blocking(lambda: self.capture.size, name="broker-size")
        except Exception as error:
            self.events.add("fault", {"operation": "display size", "error": describe_error(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the desktop size cannot be read; nothing was injected") from None
        self._size = (int(width), int(height))
        return DisplaySize(width=int(width), height=int(height))

    def _run_batch(self, session: Session, actions: Sequence[Action], first: int, sequence: int) -> _BatchOutcome:
        """Blocking: inject, settle, encode and store the frame; never raises."""
        receipts = inject_batch(self.driver, actions, first, sleep=self._sleep, stop=self._stopping)
        try:
            settled = settle_and_encode(
                self.capture,
                self.settings.stability,
                self._encoder,
                compress_level=self.settings.png_compress_level,
                reuse=session.last_png,
                sleep=self._sleep,
            )
            session.files.write_frame(sequence, settled.png)
        except Exception as error:
            return _BatchOutcome(receipts, None, describe_error(error))
        return _BatchOutcome(receipts, settled, None)

    def _record_frame(
        self,
        session: Session,
        png: PngImage,
        request_id: str,
        first_index: int,
        next_index: int,
        stable: bool,
    ) -> FrameInfo:
        sequence = len(session.frames)
        info = FrameInfo(sequence=sequence, sha256=png.sha256, width=png.width, height=png.height, size=len(png.data))
        session.frames.append(info)
        session.last_png = png
        session.frame_events.append(
            FrameEvent(
                sequence=sequence,
                sha256=png.sha256,
                width=png.width,
                height=png.height,
                captured_at=datetime.now(UTC),
                request_id=request_id,
                first_index=first_index,
                next_index=next_index,
                visual_stable=stable,
            )
        )
        return info

    # Checkpoint -------------------------------------------------------------------------------

    async def _checkpoint(self, request: web.Request) -> web.Response:
        body = await self._parse(request, CheckpointRequest)
        fingerprint = request_fingerprint(body)
        session = self._session(body.session_id)
        cached = session.checkpoints.get(body.request_id)
        if cached is not None:
            return _replay(cached, fingerprint)
        return _ok(await self._shielded(self._do_checkpoint(session, body, fingerprint)))

    async def _do_checkpoint(self, session: Session, body: CheckpointRequest, fingerprint: str) -> CheckpointResponse:
        async with session.lock:
            cached = session.checkpoints.get(body.request_id)
            if cached is not None:
                return _replayed_model(cached, fingerprint, CheckpointResponse)
            if session.state != "ready":
                raise Abort(ErrorCode.WRONG_STATE, f"session is {session.state}, not ready")
            name = self.settings.artifact_name
            async with self._desktop:
                try:
                    result = await run_blocking(self.adapter.checkpoint, name="broker-checkpoint")
                except Exception as error:  # adapters report failures; this is a bug, still answered
                    self.events.add(
                        "checkpoint_failed", {"session_id": session.session_id, "error": describe_error(error)}
                    )
                    raise Abort(ErrorCode.INTERNAL_ERROR, "the drawing could not be saved") from None
            if not result.ok:
                self.events.add(
                    "checkpoint_failed",
                    {
                        "session_id": session.session_id,
                        "request_id": body.request_id,
                        "result": result.model_dump(mode="json"),
                    },
                )
                raise Abort(ErrorCode.INTERNAL_ERROR, "the drawing could not be saved")
            files = session.files
            try:
                artifact = await run_blocking(
                    lambda: files.store_artifact(Path(result.path), name), name="broker-store"
                )
            except StoreError as error:
                self.events.add(
                    "checkpoint_failed",
                    {"session_id": session.session_id, "request_id": body.request_id, "error": describe_error(error)},
                )
                raise Abort(ErrorCode.INTERNAL_ERROR, "the saved drawing could not be stored") from None
            if result.sha256 is not None and result.sha256 != artifact.sha256:
                # The file changed between the adapter's check and the snapshot; the snapshot wins.
                self.events.add(
                    "fault",
                    {"operation": "checkpoint", "error": "drawing changed after the save was verified"},
                )
            response = CheckpointResponse(
                session_id=session.session_id,
                request_id=body.request_id,
                artifact=artifact,
                next_index=session.next_index,
                replayed=False,
            )
            session.checkpoints[body.request_id] = CachedAnswer(fingerprint, response)
            session.artifacts[artifact.name] = artifact
            session.checkpoint_artifacts.append(artifact)
            self.events.add(
                "checkpoint",
                {
                    "session_id": session.session_id,
                    "request_id": body.request_id,
                    "artifact": artifact.model_dump(mode="json"),
                    "next_index": session.next_index,
                    "signature": result.signature,
                    "save_attempts": [attempt.model_dump(mode="json") for attempt in result.attempts],
                },
            )
            return response

    # Release ----------------------------------------------------------------------------------

    async def _release(self, request: web.Request) -> web.Response:
        body = await self._parse(request, ReleaseRequest)
        session = self._session(body.session_id)
        if session.released is not None:
            return _ok(session.released.model_copy(update={"replayed": True}))
        return _ok(await self._shielded(self._do_release(session)))

    async def _do_release(self, session: Session) -> ReleaseResponse:
        async with session.lock:
            if session.released is not None:
                return session.released.model_copy(update={"replayed": True})
            async with self._desktop:
                try:
                    kill = await run_blocking(self.adapter.kill, name="broker-kill")
                    outcome: JsonObject = kill.model_dump(mode="json")
                    gone = kill.gone
                except Exception as error:  # release is state-idempotent; the failure is evidence
                    outcome = {"error": describe_error(error)}
                    gone = False
            session.state = "released"
            session.released = ReleaseResponse(session_id=session.session_id, replayed=False)
            self.events.add("release", {"session_id": session.session_id, "kill": outcome})
            if not gone:
                self.events.add("fault", {"operation": "release", "error": "application processes survived the kill"})
            return session.released

    # Parsing ----------------------------------------------------------------------------------

    async def _parse(self, request: web.Request, model: type[_M]) -> _M:
        """Read and validate a JSON body: 413 above the cap, 400 for anything malformed."""
        limit = self.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise Abort(ErrorCode.BODY_TOO_LARGE, f"request body above {limit} bytes")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise Abort(ErrorCode.BODY_TOO_LARGE, f"request body above {limit} bytes") from None
        try:
            data = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise Abort(ErrorCode.BAD_REQUEST, "body is not JSON") from None
        if not isinstance(data, dict):
            raise Abort(ErrorCode.BAD_REQUEST, "body must be a JSON object")
        try:
            return model.model_validate(data)
        except ValidationError as error:
            problems = [
                f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}"
                for item in error.errors(include_url=False, include_input=False)
            ]
            raise Abort(ErrorCode.BAD_REQUEST, "body does not match the request schema", problems=problems) from None


def _encode_and_store(files: SessionFiles, sequence: int, frame: Frame, level: int) -> PngImage:
    png = encode_png(frame, level)
    files.write_frame(sequence, png)
    return png


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _wire(action: Action) -> JsonObject:
    wire: JsonObject = action.model_dump(mode="json")
    return wire


def _forget(inflight: dict[str, asyncio.Task[Any]], request_id: str, task: asyncio.Task[Any]) -> None:
    if inflight.get(request_id) is task:
        del inflight[request_id]


def _replayed_model(cached: CachedAnswer, fingerprint: str, model: type[_M]) -> _M:
    """The cached answer as a replay, or the conflict/cached error it stands for."""
    if cached.fingerprint != fingerprint:
        raise Abort(ErrorCode.REQUEST_CONFLICT, "request_id was already used with another body")
    if isinstance(cached.response, ErrorResponse):
        error = cached.response
        raise Abort(error.code, error.message, next_index=error.next_index, problems=error.problems)
    if not isinstance(cached.response, model):
        raise TypeError(f"cached {type(cached.response).__name__} is not a {model.__name__}")
    return cached.response.model_copy(update={"replayed": True})


def _replay(cached: CachedAnswer, fingerprint: str) -> web.Response:
    return _ok(_replayed_model(cached, fingerprint, BaseModel))


def _ok(model: BaseModel) -> web.Response:
    return web.Response(body=model.model_dump_json().encode(), content_type="application/json")


def _binary(data: bytes, content_type: str, sha256: str) -> web.Response:
    return web.Response(body=data, content_type=content_type, headers={CONTENT_SHA256_HEADER: sha256})


def _error_response(error: ErrorResponse) -> web.Response:
    return web.Response(
        body=error.model_dump_json().encode(),
        status=ERROR_STATUS[error.code],
        content_type="application/json",
    )


__all__ = ["DEFAULT_MAX_ACTIONS", "Abort", "BrokerServer", "BrokerSettings", "Middleware"]
