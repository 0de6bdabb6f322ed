"""``example-pool``: lease one desktop of a fixed pool per rollout.

Each worker is a desktop whose broker already listens at a URL. A rollout takes the first
free worker by creating ``<lease_dir>/<n>.lease`` with ``O_EXCL`` (so two controllers
sharing the directory never take the same desktop), runs the child with the broker URL
and token in its environment, removes its lease in ``finally`` and then, when the batch
enables evaluation, scores the rollout (:func:`with_evaluation`).

It also implements the recovery protocol: the lease files are the durable record of which
rollout holds which worker, so after a crash ``autocad-bench-resume`` finds the worker of
an interrupted rollout, checks that its broker answers and that no live process still
holds it, and re-runs the resume command on that same desktop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.broker.client import BrokerClient
from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.infrastructure import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    ActiveWorkersRequest,
    CheckResult,
    InfrastructureRecoveryPlugin,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
    WorkerStatus,
)
from autocad_bench.infrastructure.processes import pid_alive
from autocad_bench.infrastructure.wrapper import run_child_process, run_terminable


class PoolSettings(BaseModel):
    """``infrastructure.settings`` of the example pool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: list[str] = Field(min_length=1, description="broker base URLs, one per desktop")
    token_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                           description="environment variable holding the brokers' bearer token")
    lease_dir: str = Field(description="directory for lease files shared by all controllers")
    health_timeout_s: float = Field(default=5.0, gt=0, le=60)


class ExamplePoolPlugin(InfrastructureRecoveryPlugin):
    name = "example-pool"
    settings_model = PoolSettings

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        settings: PoolSettings = self.parse_settings(request.spec)
        token = os.environ.get(settings.token_env)
        checks = [CheckResult(
            name="token",
            passed=bool(token),
            reason=f"{settings.token_env} is set" if token else f"{settings.token_env} is not set",
        )]
        healthy = 0
        for url in settings.workers:
            ok, reason = _health(url, token or "", settings.health_timeout_s)
            healthy += ok
            checks.append(CheckResult(name=f"worker {url}", passed=ok, reason=reason))
        # Counted exactly as lease_worker takes workers: a lease file blocks its worker even
        # when its holder died (resume may reconnect that rollout to it) until reap_batch or
        # terminate_worker removes it, except that a rollout of this batch takes back the
        # stale lease its own earlier attempt left, so that one is this batch's capacity.
        ours = {a.rollout_id for a in request.assignments}
        leases = [_read_lease(_lease_path(settings, i)) for i in range(len(settings.workers))]
        reclaimable = [owner is not None and _reclaimable(owner, request.batch_id, ours) for owner in leases]
        stale = sum(1 for owner, mine in zip(leases, reclaimable, strict=True)
                    if owner is not None and not mine and not _holder_alive(owner))
        free = sum(1 for i in range(len(settings.workers))
                   if reclaimable[i] or not _lease_path(settings, i).exists())
        wave = min(request.max_concurrency, len(request.assignments), free, healthy)
        reason = f"{free} of {len(settings.workers)} workers free; admitting {wave} at once"
        if stale:
            reason += (f"; {stale} held by a lease whose process is gone (reap its batch or resume it to free "
                       "the worker)")
        checks.append(CheckResult(name="capacity", passed=wave > 0, reason=reason))
        return PreflightReport(checks=tuple(checks), admitted_wave=wave)

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        settings: PoolSettings = self.parse_settings(request.spec)
        return RolloutCommand(
            argv=(sys.executable, "-m", "example_autocad_backend.wrapper",
                  json.dumps({"settings": settings.model_dump(), "batch_id": request.batch_id,
                              "rollout_id": request.rollout_id,
                              "child_names": list(request.child_environment_names),
                              "request": request.model_dump(mode="json")}),
                  "--", *request.child_command),
            environment_names=(settings.token_env, *request.child_environment_names),
            cwd=None,
        )

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings: PoolSettings = self.parse_settings(request.spec)
        with lease_worker(settings, request.batch_id, request.rollout_id) as url:
            environ = {BROKER_URL_ENV: url, BROKER_TOKEN_ENV: os.environ.get(settings.token_env, "")}
            code = asyncio.run(child.run(environ))
        return with_evaluation(request, code)

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        settings: PoolSettings = self.parse_settings(request.spec)
        cleaned, errors = [], []
        for index in range(len(settings.workers)):
            path = _lease_path(settings, index)
            try:
                owner = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as error:
                errors.append(f"{path}: {error}")
                continue
            if owner.get("batch_id") == request.batch_id:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                cleaned.append(f"lease {index} ({settings.workers[index]})")
        return ReapReport(cleaned=tuple(cleaned), errors=tuple(errors))


    # --- recovery ---------------------------------------------------------------------------

    def create_recovery_session(self, spec: InfrastructureSpec) -> PoolSettings:
        settings: PoolSettings = self.parse_settings(spec)
        return settings

    def list_active_workers(self, session: PoolSettings, request: ActiveWorkersRequest) -> dict[str, str]:
        workers = {}
        for index in range(len(session.workers)):
            owner = _read_lease(_lease_path(session, index))
            if owner and owner.get("batch_id") == request.batch_id:
                workers[str(owner["rollout_id"])] = str(index)
        return workers

    def worker_status(self, session: PoolSettings, worker_id: str) -> WorkerStatus:
        index = int(worker_id)
        if not 0 <= index < len(session.workers):
            return WorkerStatus(worker_id=worker_id, state="unknown", reconnectable=False, detail="no such worker")
        owner = _read_lease(_lease_path(session, index))
        if owner and pid_alive(int(str(owner.get("pid", 0)))):
            return WorkerStatus(worker_id=worker_id, state="running", reconnectable=False,
                                detail=f"still held by live process {owner['pid']}")
        ok, reason = _health(session.workers[index], os.environ.get(session.token_env, ""), session.health_timeout_s)
        return WorkerStatus(worker_id=worker_id, state="running" if ok else "unknown", reconnectable=ok,
                            detail=reason)

    def build_recovery_command(self, request: RecoveryLaunchRequest) -> RolloutCommand:
        settings: PoolSettings = self.parse_settings(request.launch.spec)
        return RolloutCommand(
            argv=(sys.executable, "-m", "example_autocad_backend.wrapper",
                  json.dumps({"settings": settings.model_dump(), "batch_id": request.launch.batch_id,
                              "rollout_id": request.launch.rollout_id, "worker": int(request.worker_id),
                              "child_names": list(request.launch.child_environment_names),
                              "request": request.launch.model_dump(mode="json")}),
                  "--", *request.resume_command),
            environment_names=(settings.token_env, *request.launch.child_environment_names),
        )

    def terminate_worker(self, session: PoolSettings, worker_id: str) -> bool:
        with contextlib.suppress(FileNotFoundError):
            _lease_path(session, int(worker_id)).unlink()
        return True


def with_evaluation(request: RolloutLaunchRequest, code: int) -> int:
    """The lifecycle's last step, after the desktop is released: evaluate the rollout when the
    batch enables evaluation (the backend contract; the drawing is already in the rollout
    directory, out of the model's reach). A failed evaluation fails a successful rollout."""
    evaluated = evaluate_rollout(request, os.environ)
    return evaluated if code == 0 and evaluated != 0 else code


def _holder_alive(owner: dict[str, object]) -> bool:
    try:
        return pid_alive(int(str(owner.get("pid", 0))))
    except ValueError:
        return False


def _reclaimable(owner: dict[str, object], batch_id: str, rollout_ids: set[str]) -> bool:
    """A dead holder's lease that one of these rollouts of this batch would take back."""
    return owner.get("batch_id") == batch_id and owner.get("rollout_id") in rollout_ids and not _holder_alive(owner)


def _read_lease(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _create_lease(path: Path) -> int | None:
    """The descriptor of a new lease file at ``path``; ``None`` when the worker is held."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None


def _lease_path(settings: PoolSettings, index: int) -> Path:
    return Path(settings.lease_dir) / f"{index}.lease"


@contextlib.contextmanager
def lease_worker(settings: PoolSettings, batch_id: str, rollout_id: str, worker: int | None = None) -> Iterator[str]:
    """Hold a free worker (or, resuming, exactly ``worker``) for the block's duration."""
    Path(settings.lease_dir).mkdir(parents=True, exist_ok=True)
    if worker is not None:
        owner = _read_lease(_lease_path(settings, worker))
        if owner and pid_alive(int(str(owner.get("pid", 0)))):
            raise RuntimeError(f"worker {worker} is still held by live process {owner['pid']}")
        # The stale lease of the interrupted rollout is ours to take over.
        with contextlib.suppress(FileNotFoundError):
            _lease_path(settings, worker).unlink()
    count = len(settings.workers)
    # Each rollout starts looking at its own place in the pool (a hash of its id), so that a
    # wave of rollouts starting at once spreads over the free workers instead of all of them
    # probing worker 0, 1, 2, ... in turn (quadratic in the wave at 1,000 rollouts).
    start = zlib.crc32(f"{batch_id}/{rollout_id}".encode()) % count if count else 0
    order = [worker] if worker is not None else [(start + step) % count for step in range(count)]
    for index in order:
        url = settings.workers[index]
        path = _lease_path(settings, index)
        fd = _create_lease(path)
        if fd is None:
            owner = _read_lease(path)
            if owner and owner.get("batch_id") == batch_id and owner.get("rollout_id") == rollout_id \
                    and not pid_alive(int(str(owner.get("pid", 0)))):
                # This rollout's own earlier attempt died holding the worker: take it back. A
                # stale lease of another rollout stays: resume may reconnect that rollout to it.
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                fd = _create_lease(path)
            if fd is None:
                continue
        try:
            # Inside the try: a stop arriving while the lease is written still removes it.
            with os.fdopen(fd, "w") as handle:
                json.dump({"batch_id": batch_id, "rollout_id": rollout_id, "pid": os.getpid()}, handle)
            if worker is None:
                # A fresh attempt gets a clean desktop: a session still open on the broker
                # belongs to a holder that died with it (the lease file is ours alone now).
                asyncio.run(_release_stale_session(url, os.environ.get(settings.token_env, ""),
                                                   settings.health_timeout_s))
            yield url
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return
    raise RuntimeError(f"no free worker in pool {settings.lease_dir} for rollout {rollout_id}")


async def _release_stale_session(url: str, token: str, timeout_s: float) -> None:
    """Release the session a dead holder left open on the broker at ``url``, if any.

    Raises the broker client's errors when the broker cannot be asked (the rollout then
    fails to start, as it would at its own handoff).
    """
    client = BrokerClient(url, token, operation_deadline_s=timeout_s)
    try:
        status = await client.status()
        if status.session_id is not None and status.state not in ("idle", "released"):
            await client.release(status.session_id)
    finally:
        await client.aclose()


def _health(url: str, token: str, timeout_s: float) -> tuple[bool, str]:
    request = urllib.request.Request(url.rstrip("/") + "/health",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status == 200, f"/health answered {response.status}"
    except urllib.error.HTTPError as error:
        return False, f"/health answered {error.code}"
    except (urllib.error.URLError, OSError) as error:
        return False, f"unreachable: {getattr(error, 'reason', error)}"


CHILD_STOP_TIMEOUT_S = 20.0
"""After a stop, how long the child may take to finish its turn before it is SIGKILLed (below
the controller's 30 s grace, so the lease is still released in time)."""


def run_wrapped(argv: list[str]) -> int:
    """Subprocess-mode lifecycle: lease, run the exact child command, release.

    SIGTERM or SIGINT (the controller's stop, sent to the whole process group) stop the child
    within :data:`CHILD_STOP_TIMEOUT_S` and still release the lease; the wrapper then exits
    ``128 + signal``. The child sees the controller-passed variables without the pool's own
    token variable, plus the broker URL and token.
    """
    spec = json.loads(argv[0])
    child = argv[argv.index("--") + 1:]
    settings = PoolSettings.model_validate(spec["settings"])
    rollout = RolloutIdentity(batch_id=spec["batch_id"], rollout_id=spec["rollout_id"],
                              child_names=tuple(spec.get("child_names", ())))

    launch = RolloutLaunchRequest.model_validate(spec["request"]) if "request" in spec else None

    def body() -> int:
        with lease_worker(settings, rollout.batch_id, rollout.rollout_id, spec.get("worker")) as url:
            broker = {BROKER_URL_ENV: url, BROKER_TOKEN_ENV: os.environ.get(settings.token_env, "")}
            hidden = {settings.token_env} - set(rollout.child_names)
            env = {key: value for key, value in os.environ.items() if key not in hidden}
            env.update(broker)
            code = run_child_process(child, env, CHILD_STOP_TIMEOUT_S)
        return with_evaluation(launch, code) if launch is not None else code

    return run_terminable(body)


class RolloutIdentity(BaseModel):
    """What the wrapper needs to know about its rollout beyond the settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_id: str
    rollout_id: str
    child_names: tuple[str, ...] = ()
