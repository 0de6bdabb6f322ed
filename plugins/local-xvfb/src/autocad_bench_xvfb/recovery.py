"""Reaping and the recovery protocol for local desktops.

Why a local desktop is never reconnectable: its broker accepts only the random token the
lifecycle created, and that token exists only in the memory of the process that ran the
lifecycle (and in the environments of the broker and the child). Keeping a copy on disk
(even ``0600`` in the state directory) would put a live credential in a file that outlives
the rollout, which the project's secret rules forbid, and would buy little: a resumed pilot
needs the broker's session *and* an unchanged desktop, and a controller crash usually takes
the in-process pilot with it mid-turn. So after a controller crash the worker is reported
``reconnectable=False`` with the reason, ``autocad-bench-resume`` marks the rollout ``lost``,
and ``terminate_worker`` or ``reap_batch`` removes the desktop.
"""

from __future__ import annotations

from pathlib import Path

from autocad_bench.infrastructure import WorkerStatus
from autocad_bench_xvfb.bounds import HEALTH_PROBE_TIMEOUT_S
from autocad_bench_xvfb.health import http_get
from autocad_bench_xvfb.registry import WORKER_ID_PATTERN, WorkerRecord, WorkerRegistry
from autocad_bench_xvfb.sandbox import TeardownReport, terminate_record
from autocad_bench_xvfb.settings import LocalXvfbSettings

NOT_RECONNECTABLE = (
    "a local-xvfb desktop cannot be reconnected: its broker token exists only in the memory of the "
    "process that ran its lifecycle, never on disk; terminate_worker (or reap_batch) removes the desktop"
)


class RecoverySession:
    """The control plane of local recovery: the settings and the worker records."""

    def __init__(self, settings: LocalXvfbSettings, state_dir: Path) -> None:
        self.settings = settings
        self.registry = WorkerRegistry(state_dir)


def reap(settings: LocalXvfbSettings, registry: WorkerRegistry, batch_id: str) -> tuple[list[str], list[str]]:
    """Remove every worker of the batch; returns (cleaned, errors). Idempotent."""
    cleaned: list[str] = []
    errors: list[str] = []
    for path, record in registry.batch(batch_id):
        if record is None:
            errors.append(f"unreadable worker record {path}")
            continue
        report = terminate_record(record, settings, registry, kill_owner=True)
        cleaned.append(_describe(record, report))
        errors.extend(f"worker {record.worker_id} ({record.rollout_id}): {e}" for e in report.errors)
    return cleaned, errors


def _describe(record: WorkerRecord, report: TeardownReport) -> str:
    done = ", ".join(report.cleaned) if report.cleaned else "record only"
    return f"worker {record.worker_id} of rollout {record.rollout_id} on {record.display or 'no display'}: {done}"


def worker_status(session: RecoverySession, worker_id: str) -> WorkerStatus:
    record = session.registry.find(worker_id)
    if record is None:
        return WorkerStatus(worker_id=worker_id, state="terminated", reconnectable=False,
                            detail="no worker record: the desktop was torn down")
    alive = [ref.role for ref in record.processes if ref.is_alive()]
    if record.owner.is_alive():
        return WorkerStatus(worker_id=worker_id, state="running", reconnectable=False,
                            detail=f"still run by live {record.owner.role} process {record.owner.pid}; "
                            + NOT_RECONNECTABLE)
    if "broker" not in alive:
        state = "stopped" if alive else "terminated"
        left = f" ({', '.join(alive)} still running)" if alive else ""
        return WorkerStatus(worker_id=worker_id, state=state, reconnectable=False,
                            detail=f"the broker of display {record.display} is gone{left}; " + NOT_RECONNECTABLE)
    answer = _probe(record)
    return WorkerStatus(worker_id=worker_id, state="running", reconnectable=False,
                        detail=f"broker pid {_pid(record)} on display {record.display} is alive ({answer}); "
                        + NOT_RECONNECTABLE)


def _pid(record: WorkerRecord) -> int | str:
    broker = record.process("broker")
    return broker.pid if broker is not None else "?"


def _probe(record: WorkerRecord) -> str:
    """Whether the broker still answers (without a token, so only 401 can be expected)."""
    if not record.broker_url:
        return "it never became ready"
    try:
        status, _ = http_get(record.broker_url, "/health", None, HEALTH_PROBE_TIMEOUT_S)
    except OSError as error:
        return f"/health unreachable: {type(error).__name__}"
    except Exception as error:  # a half-dead broker must not break the resume plan
        return f"/health failed: {type(error).__name__}"
    return f"/health without a token answers {status}"


def worker_id_from_log(log_text: str) -> str | None:
    """The last local-xvfb worker id named in a rollout log."""
    found = WORKER_ID_PATTERN.findall(log_text)
    return found[-1] if found else None


def terminate_worker(session: RecoverySession, worker_id: str) -> bool:
    record = session.registry.find(worker_id)
    if record is None:
        return True
    return terminate_record(record, session.settings, session.registry, kill_owner=True).ok
