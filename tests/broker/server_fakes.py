"""Fast fakes for the broker server tests: an in-memory capture, adapter and failing driver.

The server under test is the real :class:`~autocad_bench_broker.server.BrokerServer` over
real HTTP; only the desktop is simulated. :class:`FakeCapture` draws a tiny frame whose
pixels change with every input call the :class:`RecordingDriver` received (so each batch
produces a new, then stable, picture) or with every grab (``unstable``). :class:`FakeAdapter`
counts launches, checkpoints and kills and can be told to fail launches.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from autocad_bench.broker import BrokerClient
from autocad_bench_broker.apps.base import (
    ApplicationAdapter,
    CheckpointResult,
    HandoffEvidence,
    KillResult,
    ReadyResult,
    SaveAttempt,
)
from autocad_bench_broker.drivers.capture import Frame, StabilityPolicy
from autocad_bench_broker.drivers.input import RecordingDriver
from autocad_bench_broker.errors import AppLaunchError, CaptureError
from autocad_bench_broker.server import BrokerServer, BrokerSettings, Middleware

SIZE = (64, 48)
FAST_STABILITY = StabilityPolicy(window_s=0.3, interval_s=0.005, settle_s=0.0)


class FailingDriver(RecordingDriver):
    """A recording driver whose ``fail_on``-th input call (0-based, counted) raises."""

    def __init__(self, size: tuple[int, int], fail_on: int) -> None:
        super().__init__(size=size)
        self.fail_on = fail_on
        self.attempts = 0

    def _record(self, method: str, *args: Any) -> None:
        attempt = self.attempts
        self.attempts += 1
        if attempt == self.fail_on:
            raise RuntimeError("XTest refused the event")
        super()._record(method, *args)


@dataclass(repr=False)
class FakeCapture:
    """A ``ScreenCapture`` of ``size`` whose pixels follow the driver's call count."""

    driver: RecordingDriver
    size: tuple[int, int] = SIZE
    unstable: bool = False
    fail: bool = False
    grabs: int = 0

    def grab(self) -> Frame:
        if self.fail:
            raise CaptureError("the display is gone")
        self.grabs += 1
        width, height = self.size
        seed = self.grabs if self.unstable else len(self.driver.calls)
        row = bytes((seed * 7 + x) % 256 for x in range(width * 3))
        return Frame.from_rgb(width, height, row * height)

    def close(self) -> None:
        return None


@dataclass(repr=False)
class FakeAdapter(ApplicationAdapter):
    """An ``ApplicationAdapter`` that "runs" a program without processes.

    ``failing_launches`` launches fail (alternating a raised launch error and a failed
    verify). ``checkpoint`` writes the driver's call log into the attempt drawing.
    """

    capture: FakeCapture
    failing_launches: int = 0
    launches: int = 0
    checkpoints: int = 0
    kills: int = 0
    fail_checkpoint: bool = False
    running: bool = False
    template_seen: list[Path] = field(default_factory=list)
    _attempt: Path | None = None
    name: str = "fake-cad"
    process: int | None = None
    """A real process to stand for the program (its idle state is what a ``wait`` waits on)."""

    @property
    def pid(self) -> int | None:
        if not self.running:
            return None
        return self.process if self.process is not None else 4242

    @property
    def attempt_path(self) -> Path | None:
        return self._attempt

    def launch(self, template: Path, attempt_path: Path) -> None:
        self.launches += 1
        self.template_seen.append(template)
        if self.launches <= self.failing_launches and self.launches % 2 == 1:
            raise AppLaunchError("the program did not start")
        attempt_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, attempt_path)
        self._attempt = attempt_path
        self.running = True

    def verify_ready(self) -> ReadyResult:
        failures = ("an unknown dialog is open",) if self.launches <= self.failing_launches else ()
        frame = self.capture.grab()
        evidence = HandoffEvidence(
            app=self.name,
            pid=self.pid,
            process_alive=True,
            display_size=self.capture.size,
            initial_frame_stable=not failures,
            initial_frame_sha256=frame.sha256,
            failures=failures,
        )
        return ReadyResult(evidence=evidence, frame=frame)

    def checkpoint(self) -> CheckpointResult:
        self.checkpoints += 1
        path = self._attempt
        if path is None or self.fail_checkpoint:
            return CheckpointResult(ok=False, path=str(path or ""), error="save failed")
        driver = self.capture.driver
        lines = [f"{call.method} {call.args!r}" for call in driver.calls]
        path.write_text("\n".join(["FAKE DRAWING", *lines]) + "\n")
        data = path.read_bytes()
        return CheckpointResult(
            ok=True,
            path=str(path),
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            signature="FAKE",
            attempts=(SaveAttempt(number=1, method="fake", elapsed_s=0.0),),
        )

    def kill(self) -> KillResult:
        self.kills += 1
        was = self.pid
        self.running = False
        return KillResult(pid=was, signal_sent="SIGTERM" if was else "none")


@dataclass
class Rig:
    """A running server with its fakes and an HTTP session for raw requests."""

    server: BrokerServer
    driver: RecordingDriver
    capture: FakeCapture
    adapter: FakeAdapter
    token: str
    http: aiohttp.ClientSession
    workdir: Path

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client(self, **options: Any) -> BrokerClient:
        defaults: dict[str, Any] = {
            "operation_deadline_s": 20.0,
            "wait_initial_s": 0.0,
            "wait_max_s": 0.0,
            "wait_jitter_s": 0.0,
        }
        return BrokerClient(self.url, self.token, **(defaults | options))

    async def post(self, path: str, body: Any, *, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        async with self.http.post(self.url + path, json=body, headers=headers or self.auth) as response:
            return response.status, await response.json(content_type=None)

    async def get(self, path: str, *, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        async with self.http.get(self.url + path, headers=headers or self.auth) as response:
            return response.status, await response.read()


@asynccontextmanager
async def running_rig(
    tmp_path: Path,
    *,
    driver: RecordingDriver | None = None,
    unstable: bool = False,
    failing_launches: int = 0,
    middlewares: tuple[Middleware, ...] = (),
    stability: StabilityPolicy = FAST_STABILITY,
    max_actions: int = 5000,
    configure: Callable[[FakeCapture, FakeAdapter], None] | None = None,
    wait_idle_limit_s: float = 0.0,
) -> AsyncIterator[Rig]:
    """Start a :class:`BrokerServer` on the fakes in ``tmp_path``; stop it afterwards."""
    driver = driver or RecordingDriver(size=SIZE)
    capture = FakeCapture(driver, unstable=unstable)
    adapter = FakeAdapter(capture, failing_launches=failing_launches)
    if configure is not None:
        configure(capture, adapter)
    template = tmp_path / "template.dxf"
    template.write_text("FAKE TEMPLATE\n")
    token = secrets.token_urlsafe(24)
    settings = BrokerSettings(
        workdir=tmp_path / "runtime",
        template=template,
        broker_version="windows-autocad-2019-v11",
        manifest_sha256=hashlib.sha256(b"manifest").hexdigest(),
        interactive_session_id=7,
        stability=stability,
        max_actions=max_actions,
        shutdown_timeout_s=5.0,
        request_grace_s=0.2,
        # off unless a test gives the fake program a real process (4242 could be anyone's)
        wait_idle_limit_s=wait_idle_limit_s,
    )
    server = BrokerServer(
        settings, token, driver, capture, adapter, middlewares=middlewares, boot_id="boot-test", startup_id="start-1"
    )
    await server.start()
    connector = aiohttp.TCPConnector(force_close=True)
    try:
        async with aiohttp.ClientSession(connector=connector) as http:
            yield Rig(server, driver, capture, adapter, token, http, settings.workdir)
    finally:
        await server.stop()
