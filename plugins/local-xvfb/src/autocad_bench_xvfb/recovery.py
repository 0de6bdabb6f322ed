"""Reaping and the recovery protocol for local desktops.

A local desktop outlives a crashed controller: the broker, Xvfb and the application run in
their own sessions, and the worker record names them. The broker token is stored next to
the record in a ``0600`` file of the private state directory (see
:mod:`autocad_bench_xvfb.registry`), so a new controller run by the same user can
re-attach. What :func:`worker_status` reports, from the record alone:

- owner alive and it is a **controller** (shared mode), or a wrapper whose controller still
  runs: another controller still runs the batch; not reconnectable;
- owner is a live **wrapper** whose controller died (subprocess mode): the wrapper carries
  on with the rollout on its own; reconnectable, and the recovery command *adopts* it:
  it waits for the wrapper to finish and reports what the rollout wrote;
- owner dead and the broker alive and proving its identity on authenticated ``/health``
  with the stored token: reconnectable; the recovery command *takes over* the desktop
  (rewrites the record to name itself as owner), runs the exact child command against it
  (the pilot continues from its last committed turn; the broker's replay cache makes a
  re-sent batch execute once), tears the desktop down and evaluates;
- otherwise (broker gone, token file missing or unsafe, ``/health`` refused): not
  reconnectable; ``autocad-bench-resume`` closes the rollout as lost and
  ``terminate_worker`` or ``reap_batch`` removes what is left.

The token never appears in a status, a log line, the plan or the rollout directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from autocad_bench.infrastructure import WorkerStatus
from autocad_bench_xvfb.registry import WORKER_ID_PATTERN, WorkerRecord, WorkerRegistry
from autocad_bench_xvfb.sandbox import TeardownReport, adoption_problem, terminate_record
from autocad_bench_xvfb.settings import LocalXvfbSettings

NOT_RECONNECTABLE = "terminate_worker (or reap_batch) removes the desktop"


class RecoverySession:
    """The control plane of local recovery: the settings and the worker records."""

    def __init__(self, settings: LocalXvfbSettings, state_dir: Path, broker_version: str) -> None:
        self.settings = settings
        self.registry = WorkerRegistry(state_dir)
        self.broker_version = broker_version


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


Verdict = Literal["busy", "adopt", "take-over", "gone"]


@dataclass(frozen=True)
class Assessment:
    """What recovery can do with one worker; ``token`` is set only for ``take-over``."""

    verdict: Verdict
    state: Literal["running", "stopped", "terminated"]
    detail: str
    token: str | None = field(default=None, repr=False)

    @property
    def reconnectable(self) -> bool:
        return self.verdict in ("adopt", "take-over")


def assess(record: WorkerRecord, settings: LocalXvfbSettings, registry: WorkerRegistry,
           broker_version: str) -> Assessment:
    """Decide from the record and the live processes (see the module docstring)."""
    owner = record.owner
    if owner.is_alive():
        if owner.role != "wrapper":
            return Assessment("busy", "running", f"still run by live {owner.role} process {owner.pid}: another "
                              "controller still runs this rollout; " + NOT_RECONNECTABLE)
        controller = record.controller
        if controller is None or controller.is_alive():
            who = f"controller process {controller.pid}" if controller is not None else "an unknown controller"
            return Assessment("busy", "running", f"still run by live wrapper process {owner.pid} of {who}; "
                              + NOT_RECONNECTABLE)
        return Assessment("adopt", "running", f"the rollout is still running in wrapper process {owner.pid} "
                          f"(its controller process {controller.pid} died); the recovery command adopts it "
                          "and waits for it to finish")
    alive = [ref.role for ref in record.processes if ref.is_alive()]
    if "broker" not in alive:
        state: Literal["stopped", "terminated"] = "stopped" if alive else "terminated"
        left = f" ({', '.join(alive)} still running)" if alive else ""
        return Assessment("gone", state, f"the broker of display {record.display} is gone{left}; "
                          + NOT_RECONNECTABLE)
    token, problem = adoption_problem(record, settings, registry, broker_version)
    if token is None:
        return Assessment("gone", "running", f"{problem}; " + NOT_RECONNECTABLE)
    broker = record.process("broker")
    return Assessment("take-over", "running", f"{owner.role} process {owner.pid} is gone but broker pid "
                      f"{broker.pid if broker else '?'} on display {record.display} is alive and proved its "
                      "identity with the stored token; the recovery command takes the desktop over and "
                      "continues the rollout from its last committed turn", token=token)


def worker_status(session: RecoverySession, worker_id: str) -> WorkerStatus:
    """What :func:`assess` says about worker ``worker_id`` (``terminated`` when its record is gone).

    Reads the record and probes its processes and broker; starts and stops nothing.
    """
    record = session.registry.find(worker_id)
    if record is None:
        return WorkerStatus(worker_id=worker_id, state="terminated", reconnectable=False,
                            detail="no worker record: the desktop was torn down")
    verdict = assess(record, session.settings, session.registry, session.broker_version)
    return WorkerStatus(worker_id=worker_id, state=verdict.state, reconnectable=verdict.reconnectable,
                        detail=verdict.detail)


def worker_id_from_log(log_text: str) -> str | None:
    """The last local-xvfb worker id named in a rollout log."""
    found = WORKER_ID_PATTERN.findall(log_text)
    return found[-1] if found else None


def terminate_worker(session: RecoverySession, worker_id: str) -> bool:
    """Tear down worker ``worker_id``, its owner wrapper included; True when nothing of it is left.

    A worker without a record counts as torn down; a failed cleanup keeps the record for a retry.
    """
    record = session.registry.find(worker_id)
    if record is None:
        return True
    return terminate_record(record, session.settings, session.registry, kill_owner=True).ok
