"""The broker HTTP server: ``docs/broker-protocol.md`` on top of real desktop drivers.

The protocol itself (routes, authentication, replay caches, state and index checks, error
bodies) is :class:`autocad_bench.broker.service.BrokerService`, the same code the test fake
(:mod:`autocad_bench.testing.fake_broker`) serves. :class:`BrokerServer` is its
:class:`~autocad_bench.broker.service.DesktopDriver` for one real desktop: an
:class:`~autocad_bench_broker.drivers.input.InputDriver` (input), a
:class:`~autocad_bench_broker.drivers.capture.ScreenCapture` (frames) and an
:class:`~autocad_bench_broker.apps.base.ApplicationAdapter` (the CAD program):

- reset runs the adapter handoff (kill, restore a fresh copy of the template to the
  broker-owned attempt path, launch, verify ready with stable pixels), up to
  ``reset_launches`` complete launches per call, and stores the stable first frame as frame 0;
- a batch is validated against the live desktop size and the session's remaining action
  budget, injected through the input driver in a worker thread; the server then waits
  (bounded) for the pixels to settle and stores the post-batch frame. Once input has been
  injected the batch is answered 200 whatever the frame did
  (``post_action_visual_stable=false`` when it did not settle);
- a checkpoint asks the adapter for its trusted save and snapshots the drawing as the
  artifact (``attempt.dxf`` / ``attempt.dwg``);
- release kills the application's process tree.

Blocking work (drivers, adapter, file I/O) never runs on the event loop; desktop-touching
work is additionally serialized by one desktop lock because the adapter is not thread-safe.
Errors never echo secrets or file system paths; details go to the event log (``/events``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from autocad_bench.actions import Action
from autocad_bench.broker.protocol import DEFAULT_MAX_BODY_BYTES, ArtifactInfo, ErrorCode, FrameInfo
from autocad_bench.broker.service import (
    Abort,
    BatchOutcome,
    BrokerIdentity,
    BrokerService,
    CheckpointOutcome,
    DesktopDriver,
    EventLog,
    FrameUnavailable,
    Middleware,
    ResetOutcome,
    Served,
    Session,
    describe_error,
    is_plain_name,
)
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import DisplaySize
from autocad_bench_broker.apps.base import ApplicationAdapter, HandoffEvidence, HandoffResult, ReadyResult
from autocad_bench_broker.desktop import (
    inject_batch,
    interruptible_sleep,
    read_pointer_safely,
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
from autocad_bench_broker.identity import boot_id as read_boot_id
from autocad_bench_broker.identity import new_startup_id
from autocad_bench_broker.idle import IDLE_LIMIT_S, idle_supported, wait_until_idle
from autocad_bench_broker.readiness import health_fields
from autocad_bench_broker.state import SessionDesktop
from autocad_bench_broker.store import NotStored, SessionFiles, StoreError

DEFAULT_MAX_ACTIONS = 5000
"""Actions one session may inject (the rollout budget of the sandbox contract)."""


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
    wait_idle_limit_s: float = IDLE_LIMIT_S
    """After a ``wait`` action's seconds, how long at most to wait on until the application's
    process is idle (Linux only; 0 turns it off): see :mod:`autocad_bench_broker.idle`."""

    def __post_init__(self) -> None:
        if not is_plain_name(self.artifact_name):
            raise ValueError("artifact_name must be a plain file name")
        if self.reset_launches < 1 or self.max_actions < 1 or self.max_body_bytes < 1024:
            raise ValueError("reset_launches and max_actions must be >= 1, max_body_bytes >= 1024")
        if self.shutdown_timeout_s <= 0 or self.request_grace_s < 0:
            raise ValueError("shutdown_timeout_s must be > 0 and request_grace_s >= 0")


class BrokerServer(DesktopDriver[SessionDesktop], Served):
    """One broker: the shared protocol service plus the real desktop it drives.

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
        self.boot_id = boot_id if boot_id is not None else read_boot_id()
        self.startup_id = startup_id if startup_id is not None else new_startup_id()
        self.events = EventLog(settings.workdir / "events.jsonl")
        self.service = BrokerService(
            self,
            token,
            events=self.events,
            max_body_bytes=settings.max_body_bytes,
            max_actions=settings.max_actions,
            middlewares=middlewares,
        )
        self._identity = BrokerIdentity(
            broker_version=settings.broker_version,
            input_driver_version=driver.version,
            pid=os.getpid(),
            interactive_session_id=settings.interactive_session_id,
            boot_id=self.boot_id,
            startup_id=self.startup_id,
            manifest_sha256=settings.manifest_sha256,
            app=adapter.name,
        )
        self._desktop = asyncio.Lock()
        self._stopping = threading.Event()
        self._sleep = interruptible_sleep(self._stopping)
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-png")
        self._size: tuple[int, int] | None = None
        self._stopped = False

    # Lifecycle --------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application of the protocol service (routes, auth and error middlewares)."""
        return self.service.make_app()

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
        await self.service.listen(host, port, shutdown_timeout=grace)
        self.events.add(
            "startup",
            {
                "pid": os.getpid(),
                "startup_id": self.startup_id,
                "port": self.port,
                "app": self.adapter.name,
                "input_driver_version": self.driver.version,
                "desktop": list(self._size),
            },
        )
        return self.url

    @property
    def port(self) -> int:
        return self.service.listener.port

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the listener (loopback name for wildcard binds)."""
        return self.service.listener.url

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
        await self.service.close()
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

    # Desktop driver: identity and storage ------------------------------------------------------

    @property
    def identity(self) -> BrokerIdentity:
        return self._identity

    def desktop_size(self) -> tuple[int, int]:
        return self._size or (1, 1)

    async def readiness_fields(self) -> JsonObject:
        path, boot = self.settings.readiness, self.boot_id
        if path is None:
            fields = health_fields(None, boot)
        else:  # a small file read, still kept off the event loop
            fields = await run_blocking(lambda: health_fields(path, boot), name="broker-readiness")
        return dict(fields)

    async def open_session(self, session_id: str) -> SessionDesktop:
        files = SessionFiles(self.settings.workdir / "sessions" / session_id)
        await run_blocking(files.create, name="broker-files")
        return SessionDesktop(files)

    async def read_frame(self, session: Session[SessionDesktop], info: FrameInfo) -> bytes:
        """The latest frame from memory, an older one read back (and re-checked) from the store."""
        latest = session.desktop.last_png
        if latest is not None and latest.sha256 == info.sha256:
            return latest.data
        files = session.desktop.files
        try:
            return await run_blocking(lambda: files.read_frame(info.sequence, info.sha256), name="broker-read")
        except StoreError as error:
            raise FrameUnavailable(describe_error(error)) from None

    async def read_artifact(self, session: Session[SessionDesktop], info: ArtifactInfo) -> bytes:
        files = session.desktop.files
        try:
            return await run_blocking(lambda: files.read_artifact(info.name, info.sha256), name="broker-read")
        except NotStored:
            raise FrameUnavailable("artifact file is missing") from None
        except StoreError as error:
            raise FrameUnavailable(describe_error(error)) from None

    # Desktop driver: reset ----------------------------------------------------------------------

    async def reset(self, session: Session[SessionDesktop]) -> ResetOutcome:
        async with self._desktop:
            handoff, ready, error, pointer = await run_blocking(lambda: self._handoff(session), name="broker-reset")
            frame_png = None
            if ready is not None and ready.frame is not None:
                frame = ready.frame
                level = self.settings.png_compress_level
                files = session.desktop.files
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
        session.desktop.last_png = frame_png
        detail: JsonObject = {
            "launches": len(handoff.attempts) + len(handoff.launch_errors),
            "evidence": ready.evidence.model_dump(mode="json"),
            "pid": self.adapter.pid,
        }
        return ResetOutcome(frame_png, detail, pointer)

    def _handoff(
        self, session: Session[SessionDesktop]
    ) -> tuple[HandoffResult | None, ReadyResult | None, str | None, tuple[int, int] | None]:
        """Blocking: the adapter handoff into the session's attempt path, never raising.

        The last item is the pointer read from the desktop right after the handoff captured
        frame 0 (``None`` without a frame or when it cannot be read).
        """

        def on_attempt(number: int, evidence: HandoffEvidence | None) -> None:
            detail: JsonObject = {"session_id": session.session_id, "launch": number}
            if evidence is None:
                detail["ok"] = False
                detail["error"] = "launch failed"
            else:
                detail["ok"] = evidence.ok
                detail["failures"] = list(evidence.failures)
            self.events.add("reset_attempt", detail)

        attempt_path = session.desktop.files.attempt_path(self.settings.artifact_name)
        try:
            handoff, ready = self.adapter.handoff(
                self.settings.template,
                attempt_path,
                launches=self.settings.reset_launches,
                on_attempt=on_attempt,
            )
        except Exception as error:  # an adapter bug must not leave the reset half-done
            return None, None, describe_error(error), None
        if ready is None:
            return handoff, None, "; ".join(handoff.launch_errors) or "handoff conditions not met", None
        if ready.frame is None:
            return handoff, None, "the handoff produced no initial frame", None
        return handoff, ready, None, read_pointer_safely(self.driver.pointer)

    # Desktop driver: actions --------------------------------------------------------------------

    async def live_display(self) -> DisplaySize:
        try:
            width, height = await run_blocking(lambda: self.capture.size, name="broker-size")
        except Exception as error:
            self.events.add("fault", {"operation": "display size", "error": describe_error(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the desktop size cannot be read; nothing was injected") from None
        self._size = (int(width), int(height))
        return DisplaySize(width=int(width), height=int(height))

    async def run_batch(
        self,
        session: Session[SessionDesktop],
        request_id: str,
        actions: Sequence[Action],
        first_index: int,
        sequence: int,
    ) -> BatchOutcome:
        desktop = session.desktop
        async with self._desktop:
            outcome, png = await run_blocking(lambda: self._run_batch(desktop, actions, first_index, sequence))
        if png is not None:
            desktop.last_png = png
        return outcome

    def _after_wait(self) -> None:
        """A ``wait`` action's second half: until the application is idle, within the bound."""
        pid = self.adapter.pid
        if pid is not None and self.settings.wait_idle_limit_s > 0 and idle_supported():
            wait_until_idle([pid], limit_s=self.settings.wait_idle_limit_s, stop=self._stopping)

    def _run_batch(
        self, desktop: SessionDesktop, actions: Sequence[Action], first: int, sequence: int
    ) -> tuple[BatchOutcome, PngImage | None]:
        """Blocking: inject, settle, encode and store the frame; never raises."""
        receipts = inject_batch(self.driver, actions, first, sleep=self._sleep, stop=self._stopping,
                                after_wait=self._after_wait)
        try:
            settled = settle_and_encode(
                self.capture,
                self.settings.stability,
                self._encoder,
                compress_level=self.settings.png_compress_level,
                reuse=desktop.last_png,
                sleep=self._sleep,
                read_pointer=self.driver.pointer,
            )
            desktop.files.write_frame(sequence, settled.png)
        except Exception as error:
            return BatchOutcome(receipts, None, error=describe_error(error)), None
        detail: JsonObject = {"settle_s": round(settled.elapsed_s, 3), "grabs": settled.grabs}
        outcome = BatchOutcome(receipts, settled.png, settled.stable, detail=detail, pointer=settled.pointer)
        return outcome, settled.png

    # Desktop driver: checkpoint and release -----------------------------------------------------

    async def checkpoint(self, session: Session[SessionDesktop], request_id: str) -> CheckpointOutcome:
        name = self.settings.artifact_name
        failed: JsonObject = {"session_id": session.session_id, "request_id": request_id}
        async with self._desktop:
            await self._release_held_input(session)
            try:
                result = await run_blocking(self.adapter.checkpoint, name="broker-checkpoint")
            except Exception as error:  # adapters report failures; this is a bug, still answered
                self.events.add("checkpoint_failed", {"session_id": session.session_id, "error": describe_error(error)})
                raise Abort(ErrorCode.INTERNAL_ERROR, "the drawing could not be saved") from None
        if not result.ok:
            self.events.add("checkpoint_failed", failed | {"result": result.model_dump(mode="json")})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the drawing could not be saved")
        files = session.desktop.files
        try:
            artifact = await run_blocking(lambda: files.store_artifact(Path(result.path), name), name="broker-store")
        except StoreError as error:
            self.events.add("checkpoint_failed", failed | {"error": describe_error(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the saved drawing could not be stored") from None
        if result.sha256 is not None and result.sha256 != artifact.sha256:
            # The file changed between the adapter's check and the snapshot; the snapshot wins.
            changed = "drawing changed after the save was verified"
            self.events.add("fault", {"operation": "checkpoint", "error": changed})
        detail: JsonObject = {
            "signature": result.signature,
            "save_attempts": [attempt.model_dump(mode="json") for attempt in result.attempts],
        }
        return CheckpointOutcome(artifact, detail)

    async def _release_held_input(self, session: Session[SessionDesktop]) -> None:
        """Release buttons and keys still held (native ``mouse_down``); a failure is only evidence."""
        try:
            await run_blocking(self.driver.release_all, name="broker-release-input")
        except Exception as error:
            self.events.add(
                "fault",
                {"session_id": session.session_id, "operation": "release held input", "error": describe_error(error)},
            )

    async def release(self, session: Session[SessionDesktop]) -> JsonObject:
        async with self._desktop:
            await self._release_held_input(session)
            try:
                kill = await run_blocking(self.adapter.kill, name="broker-kill")
                outcome: JsonObject = kill.model_dump(mode="json")
                gone = kill.gone
            except Exception as error:  # release is state-idempotent; the failure is evidence
                outcome = {"error": describe_error(error)}
                gone = False
        if not gone:
            self.events.add("fault", {"operation": "release", "error": "application processes survived the kill"})
        return {"kill": outcome}


def _encode_and_store(files: SessionFiles, sequence: int, frame: Frame, level: int) -> PngImage:
    png = encode_png(frame, level)
    files.write_frame(sequence, png)
    return png


__all__ = ["DEFAULT_MAX_ACTIONS", "Abort", "BrokerServer", "BrokerSettings", "Middleware"]
