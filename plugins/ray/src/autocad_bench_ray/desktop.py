"""The desktop actor: one private Xvfb + LibreCAD + broker on the Ray node where it lands.

The controller creates one :class:`DesktopActor` per rollout as a *detached, named* actor
(name: the rollout id; namespace: one per batch, :meth:`RaySettings.namespace`) that needs
one unit of the ``desktop`` custom resource, so Ray's scheduler decides the node. On the
node the actor runs local-xvfb's own launch (:func:`autocad_bench_xvfb.lifecycle.launch_sandbox`:
stale-record cleanup, runtime directory, worker record and ``0600`` token file, Xvfb,
broker, verified handoff) and teardown (:class:`~autocad_bench_xvfb.sandbox.LocalSandbox`),
so a Ray desktop is exactly a local-xvfb desktop, owned by the actor's process.

Cleanup on every path:

- normal end and cancellation: the controller calls :meth:`DesktopActor.teardown` (in a
  ``finally``), then ``ray.kill``;
- actor death (``ray.kill`` without teardown, node shutdown, ``kill -9``) and a vanished
  controller (no :meth:`heartbeat` for ``desktop_ttl_s``): the node's sentinel
  (:mod:`autocad_bench_ray.sentinel`) tears down what the worker record names.

The actor never sees the controller's credentials, the model's inputs or the evaluator's:
it gets the template drawing's bytes and ids, and hands back the broker URL and token.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.infrastructure import EvaluationArguments, InfrastructureSpec, RolloutLaunchRequest
from autocad_bench_ray.bounds import SENTINEL_EXIT_S
from autocad_bench_ray.forwarder import Forwarder
from autocad_bench_ray.sentinel import SentinelSpec
from autocad_bench_xvfb.health import LaunchError
from autocad_bench_xvfb.lifecycle import launch_sandbox
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.procs import ProcessRef
from autocad_bench_xvfb.registry import batch_key
from autocad_bench_xvfb.sandbox import LocalSandbox
from autocad_bench_xvfb.settings import LocalXvfbSettings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_DETACH = ("import subprocess, sys; print(subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, "
           "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True).pid, flush=True)")
"""The shim's program: start the sentinel, print its PID and exit, so the sentinel is nobody's child."""


class DesktopOrder(BaseModel):
    """What the controller asks a desktop actor to start (no secrets, no evaluator inputs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_id: str
    rollout_id: str
    attempt_id: str
    task_id: str
    broker_version: str
    settings: LocalXvfbSettings
    node_work_dir: str
    template_name: str = Field(min_length=1)
    template: bytes = Field(repr=False)
    desktop_ttl_s: float
    expose_broker: bool = True


class NodeInfo(BaseModel):
    """Where an actor runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: str
    node_ip: str
    hostname: str
    pid: int


class Handoff(BaseModel):
    """A verified desktop: where its broker answers and with which token (kept out of every repr)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    worker_id: str
    url: str
    token: str = Field(repr=False)
    display: str | None
    node: NodeInfo
    timings: dict[str, float] = Field(default_factory=dict)


class DesktopStatus(BaseModel):
    """What :meth:`DesktopActor.status` reports (read-only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: str
    worker_id: str | None
    node: NodeInfo
    broker_alive: bool
    seconds_since_heartbeat: float | None


class TeardownOutcome(BaseModel):
    """What :meth:`DesktopActor.teardown` removed, what it could not, and the node log since the launch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cleaned: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    log: str = ""


def rollout_work_dir(node_work_dir: str, batch_id: str, rollout_id: str) -> Path:
    """The node-local directory of one rollout's desktop (template copy, node log, heartbeat)."""
    return Path(node_work_dir) / "rollouts" / batch_key(batch_id) / rollout_id


def remove_node_files(node_work_dir: str, batch_id: str, rollout_id: str) -> None:
    """Remove a torn-down rollout's node-local files and the batch's emptied directories (best effort)."""
    shutil.rmtree(rollout_work_dir(node_work_dir, batch_id, rollout_id), ignore_errors=True)
    for directory in (Path(node_work_dir) / "rollouts" / batch_key(batch_id),
                      Path(node_work_dir) / "runtime" / batch_key(batch_id)):
        with contextlib.suppress(OSError):
            directory.rmdir()


def node_info() -> NodeInfo:
    """This process's Ray node (id, address), host name and PID."""
    import ray

    context = ray.get_runtime_context()
    node_ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
    return NodeInfo(node_id=context.get_node_id(), node_ip=node_ip, hostname=socket.gethostname(), pid=os.getpid())


class DesktopActor:
    """One rollout's desktop on one node (used as ``ray.remote(DesktopActor)``; threaded, so
    ``heartbeat`` and ``status`` answer while a launch or teardown runs)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sandbox: LocalSandbox | None = None
        self._forwarder: Forwarder | None = None
        self._order: DesktopOrder | None = None
        self._handoff: Handoff | None = None
        self._heartbeat: Path | None = None
        self._log_path: Path | None = None
        self._log_offset = 0
        self._state = "new"
        self._sentinel: ProcessRef | None = None

    # --- calls of the controller -------------------------------------------------------------

    def ping(self) -> NodeInfo:
        """Answers once Ray placed the actor; where it runs."""
        return node_info()

    def launch(self, order: DesktopOrder) -> Handoff:
        """Start and verify the desktop (local-xvfb's launch, its launch attempts included).

        Raises :class:`~autocad_bench_xvfb.health.LaunchError` when no launch reached the
        verified handoff (nothing of it is left then) or the actor was launched before.
        """
        with self._lock:
            if self._order is not None:
                raise LaunchError("a desktop actor launches once")
            self._order = order
            root = Path(order.node_work_dir)
            work = rollout_work_dir(order.node_work_dir, order.batch_id, order.rollout_id)
            work.mkdir(mode=0o700, parents=True, exist_ok=True)
            template = work / order.template_name
            template.write_bytes(order.template)
            self._log_path = work / "lifecycle.log"
            self._heartbeat = work / "heartbeat"
            self._heartbeat.touch()
            request = RolloutLaunchRequest(
                batch_id=order.batch_id, rollout_id=order.rollout_id, attempt_id=order.attempt_id,
                task_id=order.task_id, spec=InfrastructureSpec(backend="local-xvfb",
                                                               broker_version=order.broker_version),
                child_command=("true",), output_dir=work / "output", log_path=self._log_path,
                evaluation=EvaluationArguments(enabled=False, task_id=order.task_id), task_template=template)
            log = LifecycleLog(self._log_path)
            state_dir = Path(order.settings.state_dir or root / "state")
            self._state = "launching"
            sandbox = launch_sandbox(request, order.settings, state_dir=state_dir, mode="shared", log=log)
            self._sandbox = sandbox
            try:
                self._start_sentinel(order, sandbox)
                url = self._expose(order, sandbox)
            except (OSError, LaunchError) as error:
                sandbox.teardown()
                self._state = "failed"
                raise LaunchError(f"desktop {sandbox.worker_id} could not be guarded or exposed: {error}") from error
            self._handoff = Handoff(worker_id=sandbox.worker_id, url=url, token=sandbox.token,
                                    display=sandbox.display, node=node_info(), timings=dict(sandbox.timings))
            self._state = "ready"
            return self._handoff

    def handoff(self) -> Handoff | None:
        """The verified desktop again (for a controller that re-attaches), or None when there is none."""
        self.heartbeat()
        return self._handoff if self._state == "ready" else None

    def heartbeat(self) -> float:
        """The controller is alive: push the TTL back. Returns the time of this heartbeat."""
        now = time.time()
        if self._heartbeat is not None:
            with contextlib.suppress(OSError):
                os.utime(self._heartbeat, (now, now))
        return now

    def status(self) -> DesktopStatus:
        """The desktop's state, whether its broker runs and how old the last heartbeat is (read-only)."""
        sandbox = self._sandbox
        broker = sandbox.record.process("broker") if sandbox is not None and sandbox.record is not None else None
        seen = None
        if self._heartbeat is not None:
            with contextlib.suppress(OSError):
                seen = time.time() - self._heartbeat.stat().st_mtime
        return DesktopStatus(state=self._state, worker_id=sandbox.worker_id if sandbox else None, node=node_info(),
                             broker_alive=broker is not None and broker.is_alive(), seconds_since_heartbeat=seen)

    def teardown(self) -> TeardownOutcome:
        """Stop everything of the desktop and prove it gone (idempotent); returns the node log too."""
        with self._lock:
            cleaned: list[str] = []
            errors: list[str] = []
            if self._forwarder is not None:
                self._forwarder.close()
                self._forwarder = None
            if self._sandbox is not None:
                report = self._sandbox.teardown()
                cleaned += report.cleaned
                errors += report.errors
            self._state = "torn-down" if not errors else "teardown-failed"
            if not errors and self._sentinel is not None:
                # The record is gone, so the sentinel exits within one poll: wait for it (bounded).
                deadline = time.monotonic() + SENTINEL_EXIT_S
                while self._sentinel.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
            log = self._new_log()
            if not errors and self._order is not None:
                remove_node_files(self._order.node_work_dir, self._order.batch_id, self._order.rollout_id)
            return TeardownOutcome(cleaned=tuple(cleaned), errors=tuple(errors), log=log)

    # --- helpers ---------------------------------------------------------------------------

    def _new_log(self) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as handle:
                handle.seek(self._log_offset)
                text = handle.read()
                self._log_offset = handle.tell()
                return text
        except OSError:
            return ""

    def _start_sentinel(self, order: DesktopOrder, sandbox: LocalSandbox) -> None:
        assert self._heartbeat is not None and self._log_path is not None
        spec = SentinelSpec(actor=ProcessRef.of("actor", os.getpid()), batch_id=order.batch_id,
                            rollout_id=order.rollout_id, worker_id=sandbox.worker_id, settings=order.settings,
                            heartbeat_file=str(self._heartbeat), ttl_s=order.desktop_ttl_s,
                            log_path=str(self._log_path), node_work_dir=order.node_work_dir)
        environment = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONUNBUFFERED": "1"}
        for name in ("PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH"):
            if os.environ.get(name):
                environment[name] = os.environ[name]
        # Started through a short-lived shim, in a session of its own: Ray kills the children of
        # a worker process that exits, and the sentinel must outlive this one to clean up after it.
        shim = subprocess.Popen(
            [sys.executable, "-c", _DETACH, sys.executable, "-m", "autocad_bench_ray.sentinel", spec.model_dump_json()],
            env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
        output, _ = shim.communicate(timeout=30)
        if shim.returncode != 0 or not output.strip().isdigit():
            raise OSError(f"the sentinel of desktop {sandbox.worker_id} did not start (shim exit {shim.returncode})")
        with contextlib.suppress(ProcessLookupError):
            self._sentinel = ProcessRef.of("sentinel", int(output.strip()))

    def _expose(self, order: DesktopOrder, sandbox: LocalSandbox) -> str:
        assert sandbox.url is not None
        node_ip = node_info().node_ip
        if node_ip in LOOPBACK or not order.expose_broker:
            return sandbox.url
        from urllib.parse import urlsplit

        port = urlsplit(sandbox.url).port
        assert port is not None
        self._forwarder = Forwarder(node_ip, ("127.0.0.1", port))
        return f"http://{node_ip}:{self._forwarder.port}"
