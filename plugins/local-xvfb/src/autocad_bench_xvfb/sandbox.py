"""One rollout's private desktop: Xvfb display, runtime directory, token and broker.

:class:`LocalSandbox` brings one desktop to the verified handoff state and takes it down
again; :func:`terminate_record` takes down whatever a worker record names, from any process
(teardown, ``reap_batch`` and ``terminate_worker`` all end there). What a rollout owns:

- a fresh runtime directory (``0700``) with the broker's HOME, temp and XDG directories and
  the application's work directory, never shared with another rollout;
- an Xvfb server (1920x1080x24, no TCP) on a display number the server picks itself,
  started with an empty environment apart from PATH, its HOME and the worker marker;
- a random bearer token, in this process's memory, in the environments of the broker and
  the child, and in one ``0600`` file next to the worker record in the private state
  directory (so a new controller of the same user can re-attach after a crash; see
  :mod:`autocad_bench_xvfb.recovery`); never in argv, records, logs or the rollout directory;
- a broker on 127.0.0.1 with an OS-chosen port, in its own process group, whose identity
  is proven by authenticated ``/health`` before the child starts.

:class:`AdoptedSandbox` is the same desktop seen from a recovery process: it re-attaches to
the broker a crashed controller left running (after the same authenticated ``/health``
check) and tears it down through the record.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from autocad_bench.broker.protocol import HealthResponse
from autocad_bench.infrastructure import BROKER_TOKEN_ENV
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.errors import DisplayError
from autocad_bench_broker.procgroup import kill_process_group
from autocad_bench_xvfb.bounds import (
    APP_TERM_TIMEOUT_S,
    BROKER_EXIT_MARGIN_S,
    HEALTH_PROBE_TIMEOUT_S,
    KILL_TIMEOUT_S,
    SETTLE_POLL_S,
    XVFB_STOP_TIMEOUT_S,
)
from autocad_bench_xvfb.health import LaunchError, ReadyFile, verify_health, wait_for_ready_file
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.procs import WORKER_MARKER_ENV, ProcessRef, kill_pids, kill_ref, rollout_processes
from autocad_bench_xvfb.registry import TokenFileError, WorkerRecord, WorkerRegistry, new_worker_id, utcnow
from autocad_bench_xvfb.settings import DESKTOP_DEPTH, DESKTOP_HEIGHT, DESKTOP_WIDTH, LocalXvfbSettings

DEFAULT_BROKER_COMMAND: tuple[str, ...] = (sys.executable, "-m", "autocad_bench_broker")
"""The broker server (``autocad-bench-broker``) as a module of the running interpreter."""



@dataclass
class TeardownReport:
    """What teardown removed and what it could not (an error means a record is kept)."""

    cleaned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


class PrivateXvfbDisplay(XvfbDisplay):
    """broker-win's Xvfb helper, with the server started through ``env -i``.

    The server then sees only PATH, its own HOME and the worker marker, not the credentials
    of the controller that starts it (``env`` execs Xvfb, so the PID is the server's).
    """

    def __init__(self, environment: Mapping[str, str], *, startup_timeout_s: float, executable: str,
                 log_path: Path | None) -> None:
        super().__init__(DESKTOP_WIDTH, DESKTOP_HEIGHT, DESKTOP_DEPTH, startup_timeout_s=startup_timeout_s,
                         executable=executable, log_path=log_path)
        self._environment = dict(environment)

    def command(self, displayfd: int) -> list[str]:
        env = shutil.which("env") or "/usr/bin/env"
        assignments = [f"{key}={value}" for key, value in sorted(self._environment.items())]
        return [env, "-i", *assignments, *super().command(displayfd)]


@dataclass(frozen=True)
class SandboxIdentity:
    """Who a sandbox belongs to (from the launch request)."""

    batch_id: str
    rollout_id: str
    attempt_id: str
    broker_version: str
    template: Path | None


class LocalSandbox:
    """One desktop for one rollout. ``launch()`` once, then ``teardown()`` (idempotent, also after a failed launch).

    After a successful launch ``url``, ``token``, ``display`` and ``health`` describe the
    verified broker. ``timings`` holds the seconds each launch step took.
    """

    def __init__(
        self,
        settings: LocalXvfbSettings,
        identity: SandboxIdentity,
        *,
        runtime_root: Path,
        registry: WorkerRegistry,
        mode: Literal["shared", "subprocess"],
        log: LifecycleLog,
        broker_command: Sequence[str] = DEFAULT_BROKER_COMMAND,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self.runtime_root = runtime_root
        self.registry = registry
        self.mode: Literal["shared", "subprocess"] = mode
        self.log = log
        self.broker_command = tuple(broker_command)
        self.environ = dict(os.environ if environ is None else environ)
        self.worker_id = new_worker_id()
        self.token = secrets.token_urlsafe(32)
        self.runtime_dir: Path | None = None
        self.record: WorkerRecord | None = None
        self.display: str | None = None
        self.url: str | None = None
        self.health: HealthResponse | None = None
        self.launched = False
        self.timings: dict[str, float] = {}
        self._xvfb: PrivateXvfbDisplay | None = None
        self._broker: subprocess.Popen[bytes] | None = None
        self._torn_down: TeardownReport | None = None

    # --- launch ---------------------------------------------------------------------------

    def launch(self) -> None:
        """Start Xvfb and the broker and verify the broker; raise :class:`LaunchError` on any failure."""
        if self.launched or self.record is not None:
            raise LaunchError("a LocalSandbox is launched once")
        started = time.monotonic()
        template = self.identity.template
        if template is None or not Path(template).is_file():
            raise LaunchError(f"the task template drawing {template} does not exist; local-xvfb starts the "
                              "application on a copy of it")
        self._make_runtime_dir()
        assert self.runtime_dir is not None
        self._write_record()
        self._start_xvfb()
        self.timings["xvfb_s"] = time.monotonic() - started
        step = time.monotonic()
        ready = self._start_broker(Path(template))
        self.timings["broker_ready_s"] = time.monotonic() - step
        step = time.monotonic()
        assert self._broker is not None
        self.health = verify_health(
            ready, self.token, expected_pid=self._broker.pid, app=self.settings.app,
            broker_version=self.identity.broker_version, desktop=(DESKTOP_WIDTH, DESKTOP_HEIGHT),
            session_id=int(self.display.lstrip(":")) if self.display else -1,
            timeout_s=self.settings.handoff_timeout_s,
        )
        self.timings["health_s"] = time.monotonic() - step
        self.url = ready.url
        self._update_record(broker_url=ready.url, broker_startup_id=ready.startup_id)
        self.timings["launch_s"] = time.monotonic() - started
        self.launched = True

    def _make_runtime_dir(self) -> None:
        try:
            self.runtime_root.mkdir(mode=0o700, parents=True, exist_ok=True)
            # mkdtemp: a fresh 0700 directory that no other rollout can have chosen.
            self.runtime_dir = Path(tempfile.mkdtemp(prefix=f"{self.identity.rollout_id[:40]}-",
                                                     dir=self.runtime_root))
            for name in ("home", "tmp", "xdg", "broker"):
                (self.runtime_dir / name).mkdir(mode=0o700)
        except OSError as error:
            raise LaunchError(f"cannot create the rollout's runtime directory under {self.runtime_root}: "
                              f"{error}") from error

    def _owner(self) -> ProcessRef:
        return ProcessRef.of("controller" if self.mode == "shared" else "wrapper", os.getpid())

    def _controller(self) -> ProcessRef | None:
        return parent_controller() if self.mode == "subprocess" else None

    def _write_record(self) -> None:
        assert self.runtime_dir is not None
        self.record = WorkerRecord(
            batch_id=self.identity.batch_id, rollout_id=self.identity.rollout_id,
            attempt_id=self.identity.attempt_id, worker_id=self.worker_id, mode=self.mode,
            created_at=utcnow(), hostname=socket.gethostname(), owner=self._owner(),
            controller=self._controller(), runtime_dir=str(self.runtime_dir),
        )
        try:
            self.registry.write(self.record)
            self.registry.write_token(self.record, self.token)
        except OSError as error:
            raise LaunchError(f"cannot write the worker record in {self.registry.state_dir}: {error}") from error

    def _update_record(self, *, process: ProcessRef | None = None, **changes: object) -> None:
        assert self.record is not None
        record = self.record.with_process(process) if process is not None else self.record
        self.record = record.model_copy(update=changes)
        self.registry.write(self.record)

    def _path_dirs(self) -> str:
        """The broker's PATH: directories of configured executables first, then the parent's PATH."""
        extra = []
        for tool in ("librecad", "xdotool"):
            command = self.settings.executable(tool)
            if os.sep in command:
                extra.append(str(Path(command).parent))
        base = self.environ.get("PATH") or os.defpath
        return os.pathsep.join([*dict.fromkeys(extra), base])

    def _start_xvfb(self) -> None:
        assert self.runtime_dir is not None
        environment = {"PATH": self._path_dirs(), "HOME": str(self.runtime_dir / "home"),
                       WORKER_MARKER_ENV: self.worker_id}
        display = PrivateXvfbDisplay(
            environment, startup_timeout_s=self.settings.xvfb_timeout_s,
            executable=self.settings.executable("xvfb"), log_path=self.runtime_dir / "xvfb.log",
        )
        self._xvfb = display
        try:
            name = display.start()
        except DisplayError as error:
            raise LaunchError(f"Xvfb: {error}") from error
        assert display.pid is not None
        self.display = name
        self._update_record(process=ProcessRef.of("xvfb", display.pid), display=name)

    def _broker_environment(self) -> dict[str, str]:
        assert self.runtime_dir is not None and self.display is not None
        runtime = self.runtime_dir
        env = {
            "PATH": self._path_dirs(),
            "LANG": "C.UTF-8",
            "HOME": str(runtime / "home"),
            "TMPDIR": str(runtime / "tmp"),
            "XDG_RUNTIME_DIR": str(runtime / "xdg"),
            "XDG_CONFIG_HOME": str(runtime / "home" / ".config"),
            "XDG_CACHE_HOME": str(runtime / "home" / ".cache"),
            "DISPLAY": self.display,
            "PYTHONUNBUFFERED": "1",
            WORKER_MARKER_ENV: self.worker_id,
            BROKER_TOKEN_ENV: self.token,
        }
        # Interpreter plumbing only, so the broker imports the same packages as this process.
        for name in ("PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH"):
            if self.environ.get(name):
                env[name] = self.environ[name]
        return env

    def _start_broker(self, template: Path) -> ReadyFile:
        assert self.runtime_dir is not None and self.display is not None
        ready_file = self.runtime_dir / "broker-ready.json"
        argv = [
            *self.broker_command, "serve",
            "--host", "127.0.0.1", "--port", "0",
            "--app", self.settings.app,
            "--display", self.display,
            "--workdir", str(self.runtime_dir / "broker"),
            "--template", str(template),
            "--ready-file", str(ready_file),
            "--broker-version", self.identity.broker_version,
            "--shutdown-timeout-s", f"{self.settings.broker_shutdown_s:g}",
        ]
        self.log.line(f"worker {self.worker_id}: starting the broker on display {self.display}")
        try:
            with self.log.append_handle() as output:
                self._broker = subprocess.Popen(
                    argv, env=self._broker_environment(), cwd=self.runtime_dir, stdin=subprocess.DEVNULL,
                    stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                )
        except OSError as error:
            raise LaunchError(f"cannot start the broker: {error}") from error
        with contextlib.suppress(ProcessLookupError):
            self._update_record(process=ProcessRef.of("broker", self._broker.pid))
        return wait_for_ready_file(ready_file, self._broker, self.settings.launch_timeout_s)

    # --- teardown -------------------------------------------------------------------------

    def teardown(self) -> TeardownReport:
        """Stop everything this sandbox started and prove it is gone; idempotent."""
        if self._torn_down is not None:
            return self._torn_down
        report = TeardownReport()
        broker, self._broker = self._broker, None
        if broker is not None:
            # SIGTERM lets the broker stop the application itself; then its group is killed.
            outcome = kill_process_group(broker.pid, leader=broker, term_timeout_s=broker_grace_s(self.settings),
                                         kill_timeout_s=KILL_TIMEOUT_S)
            report.cleaned.append(f"broker pid {broker.pid} ({outcome.signal_sent})")
        xvfb, self._xvfb = self._xvfb, None
        if xvfb is not None and xvfb.pid is not None:
            pid = xvfb.pid
            try:
                stopped = xvfb.stop(XVFB_STOP_TIMEOUT_S)
                report.cleaned.append(f"Xvfb {self.display} pid {pid} ({stopped.signal_sent if stopped else 'none'})")
            except DisplayError as error:
                report.errors.append(f"Xvfb {self.display}: {error}")
        if self.record is not None:
            final = terminate_record(self.record, self.settings, self.registry, kill_owner=False)
            report.cleaned.extend(final.cleaned)
            report.errors.extend(final.errors)
        elif self.runtime_dir is not None:
            _remove_runtime(self.runtime_dir, report)
        self._torn_down = report
        return report


def parent_controller() -> ProcessRef | None:
    """This wrapper's parent (the controller that started it), or None once it was orphaned."""
    parent = os.getppid()
    if parent <= 1:
        return None
    try:
        return ProcessRef.of("controller", parent)
    except ProcessLookupError:
        return None


def adoption_problem(record: WorkerRecord, settings: LocalXvfbSettings, registry: WorkerRegistry,
                     broker_version: str) -> tuple[str | None, str | None]:
    """Whether the broker ``record`` names can be re-attached: ``(token, None)`` or ``(None, why not)``.

    The broker must be the recorded process, still running, and prove with the stored token
    (read only from a safe ``0600`` file) on authenticated ``/health`` that it is the broker
    this backend started: same PID, startup id, application, version, display and desktop.
    """
    broker = record.process("broker")
    if broker is None or not broker.is_alive():
        return None, f"the broker of display {record.display} is gone"
    if not record.broker_url or not record.broker_startup_id or not record.display:
        return None, "the broker never reached the verified handoff"
    try:
        token = registry.read_token(record)
    except TokenFileError as error:
        return None, str(error)
    port = urlsplit(record.broker_url).port
    try:
        ready = ReadyFile(url=record.broker_url, port=port or 0, pid=broker.pid, startup_id=record.broker_startup_id)
        verify_health(ready, token, expected_pid=broker.pid, app=settings.app, broker_version=broker_version,
                      desktop=(DESKTOP_WIDTH, DESKTOP_HEIGHT), session_id=int(record.display.lstrip(":")),
                      timeout_s=HEALTH_PROBE_TIMEOUT_S)
    except LaunchError as error:
        return None, f"broker pid {broker.pid} failed the authenticated /health check: {error}"
    except (OSError, ValueError, http.client.HTTPException) as error:
        return None, f"broker pid {broker.pid} did not answer /health: {type(error).__name__}"
    return token, None


class AdoptedSandbox:
    """A desktop whose controller died, re-attached by the recovery command.

    The record is rewritten first so that this process owns it (a second crash is then
    recoverable too); ``teardown()`` removes everything the record names, exactly as for a
    sandbox this process launched.
    """

    def __init__(self, record: WorkerRecord, token: str, settings: LocalXvfbSettings,
                 registry: WorkerRegistry) -> None:
        assert record.broker_url is not None
        self.settings = settings
        self.registry = registry
        self.worker_id = record.worker_id
        self.token = token
        self.url: str | None = record.broker_url
        self.display = record.display
        self.record = record.model_copy(update={
            "owner": ProcessRef.of("wrapper", os.getpid()), "controller": parent_controller(), "mode": "subprocess"})
        registry.write(self.record)
        self._torn_down: TeardownReport | None = None

    def teardown(self) -> TeardownReport:
        if self._torn_down is None:
            self._torn_down = terminate_record(self.record, self.settings, self.registry, kill_owner=False)
        return self._torn_down


def broker_grace_s(settings: LocalXvfbSettings) -> float:
    """SIGTERM to SIGKILL of the broker: its own shutdown bound plus a margin to exit."""
    return settings.broker_shutdown_s + BROKER_EXIT_MARGIN_S


def terminate_record(
    record: WorkerRecord,
    settings: LocalXvfbSettings,
    registry: WorkerRegistry,
    *,
    kill_owner: bool,
) -> TeardownReport:
    """Kill every process the record names or that carries the rollout's marks, verify, clean up.

    ``kill_owner`` also stops a subprocess-mode wrapper (and the child in its group); a
    controller is never signalled. The record is removed only when no process of the
    rollout remains, so a failed cleanup can be retried by ``reap_batch``.
    """
    report = TeardownReport()
    runtime = Path(record.runtime_dir)
    owner = record.owner
    if kill_owner and owner.role == "wrapper" and owner.pid != os.getpid() and owner.is_alive():
        # The wrapper's own teardown runs on SIGTERM: give it the time that teardown may take.
        left = kill_ref(owner, broker_grace_s(settings) + XVFB_STOP_TIMEOUT_S + APP_TERM_TIMEOUT_S, KILL_TIMEOUT_S)
        report.cleaned.append(f"wrapper pid {owner.pid}")
        if left:
            report.errors.append(f"wrapper pid {owner.pid}: {list(left)} survived SIGKILL")
    for role in ("broker", "xvfb"):
        ref = record.process(role)
        if ref is not None and ref.remaining():
            term = broker_grace_s(settings) if role == "broker" else XVFB_STOP_TIMEOUT_S
            left = kill_ref(ref, term, KILL_TIMEOUT_S)
            report.cleaned.append(f"{role} pid {ref.pid}")
            if left:
                report.errors.append(f"{role} pid {ref.pid}: {list(left)} survived SIGKILL")
    strays = rollout_processes(runtime, record.worker_id)
    if strays:
        left = kill_pids(strays, APP_TERM_TIMEOUT_S, KILL_TIMEOUT_S)
        report.cleaned.append(f"stray processes {list(strays)}")
        if left:
            report.errors.append(f"stray processes {list(left)} survived SIGKILL")
    remaining = _settle(record, settings.settle_s, include_owner=kill_owner)
    if remaining:
        report.errors.append(f"processes of rollout {record.rollout_id} still running after "
                             f"{settings.settle_s:.1f} s: {list(remaining)}")
        return report
    _remove_runtime(runtime, report)
    if not report.errors:
        registry.remove(record)
    return report


def _settle(record: WorkerRecord, settle_s: float, *, include_owner: bool) -> tuple[int, ...]:
    """Wait (bounded) until nothing of the rollout runs; return what still does."""
    deadline = time.monotonic() + settle_s
    while True:
        remaining = {pid for ref in record.processes for pid in ref.remaining()}
        remaining.update(rollout_processes(Path(record.runtime_dir), record.worker_id))
        owner = record.owner
        if include_owner and owner.role == "wrapper" and owner.pid != os.getpid() and owner.is_alive():
            remaining.update(owner.remaining())
        if not remaining or time.monotonic() >= deadline:
            return tuple(sorted(remaining))
        time.sleep(SETTLE_POLL_S)


def _remove_runtime(runtime: Path, report: TeardownReport) -> None:
    if runtime.exists():
        try:
            shutil.rmtree(runtime)
            report.cleaned.append(f"runtime directory {runtime}")
        except OSError as error:
            report.errors.append(f"runtime directory {runtime}: {error}")
            return
    if runtime.parent.name == "runtime":
        with contextlib.suppress(OSError):
            runtime.parent.rmdir()  # the batch's runtime area, once its last rollout is gone
