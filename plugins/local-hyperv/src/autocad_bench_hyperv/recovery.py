"""Cleanup and interrupted-run recovery from the marks on the VMs themselves.

The Notes of the pool VMs are the durable worker index: any process that can reach the
hosts finds every VM a batch holds, also after the controller was killed. ``reap_batch``
returns each of them to clean (turn off, restore, unmark; a quarantined VM keeps its
quarantine mark); ``terminate_worker`` does the same for one VM, idempotently.
"""

from __future__ import annotations

from autocad_bench.infrastructure import WorkerStatus
from autocad_bench_hyperv.hyperv import HEARTBEAT_OK
from autocad_bench_hyperv.marks import VmMark, free_mark, parse_mark
from autocad_bench_hyperv.pool import Pool
from autocad_bench_hyperv.runner import HostCommandError
from autocad_bench_hyperv.settings import HyperVSettings


class RecoverySession:
    """The recovery hooks' control-plane client: the pool of the batch's settings."""

    def __init__(self, settings: HyperVSettings, pool: Pool) -> None:
        self.settings = settings
        self.pool = pool


def _clean_mark(mark: VmMark) -> VmMark:
    """What a returned VM is marked: a quarantine stays (with its reason), everything else is free."""
    return mark if mark.state == "quarantined" else free_mark(mark.broker_version)


def reap(pool: Pool, batch_id: str) -> tuple[list[str], list[str]]:
    """Return every VM marked with ``batch_id`` to its clean checkpoint (one pass).

    A quarantined VM was restored by the same script that quarantined it; it is touched again
    only if something started it since.
    """
    cleaned: list[str] = []
    errors: list[str] = []
    try:
        view = pool.view()
        errors += [f"host {host}: {error}" for host, error in sorted(view.errors.items())]
        for vm in view.vms:
            mark = vm.mark
            if vm.info is None or mark is None or mark.batch_id != batch_id:
                continue
            if mark.state == "quarantined" and vm.info.state == "Off":
                continue
            try:
                if pool.reset(vm.host, vm.name, vm.info.notes, _clean_mark(mark)):
                    cleaned.append(f"{vm.worker_id} ({mark.state} by {mark.rollout_id}): turned off, restored"
                                   + (", still quarantined" if mark.state == "quarantined" else ", marked free"))
            except HostCommandError as error:
                errors.append(f"{vm.worker_id}: {error}")
    finally:
        pool.close()
    return cleaned, errors


def active_workers(session: RecoverySession, batch_id: str) -> dict[str, str]:
    """Rollout id to worker id for every VM leased to ``batch_id``."""
    found: dict[str, str] = {}
    for vm in session.pool.view().vms:
        mark = vm.mark
        if mark is not None and mark.state == "leased" and mark.batch_id == batch_id and mark.rollout_id:
            found[mark.rollout_id] = vm.worker_id
    return found


def worker_status(session: RecoverySession, worker: str) -> WorkerStatus:
    """The recovery status of ``worker`` (``host/vm``): reconnectable only when it is leased,
    Running and its heartbeat is OK. Host command errors become ``unknown`` (VM unreadable)
    or a non-reconnectable ``running`` (heartbeat unreadable), with the error as the detail.
    """
    found = session.pool.find(worker)
    if found is None:
        return WorkerStatus(worker_id=worker, state="unknown", reconnectable=False, detail="not a VM of this pool")
    host, name = found
    client = session.pool.client(host)
    try:
        info = client.get_vm(name)
    except (HostCommandError, ValueError) as error:
        return WorkerStatus(worker_id=worker, state="unknown", reconnectable=False, detail=str(error))
    mark = parse_mark(info.notes)
    if mark is None or mark.state != "leased":
        return WorkerStatus(worker_id=worker, state="terminated", reconnectable=False,
                            detail=f"not leased ({mark.state if mark else 'unmarked'})")
    if info.state != "Running":
        return WorkerStatus(worker_id=worker, state="stopped" if info.state in ("Off", "Saved") else "pending",
                            reconnectable=False, detail=f"VM {info.state}")
    try:
        heartbeat = client.heartbeat(name)
    except HostCommandError as error:
        return WorkerStatus(worker_id=worker, state="running", reconnectable=False, detail=str(error))
    return WorkerStatus(worker_id=worker, state="running", reconnectable=heartbeat == HEARTBEAT_OK,
                        detail=f"VM Running; heartbeat {heartbeat}; leased to {mark.batch_id}/{mark.rollout_id}")


def terminate_worker(session: RecoverySession, worker: str) -> bool:
    """Turn off, restore and unmark ``worker`` (idempotent: an unleased VM is already clean)."""
    found = session.pool.find(worker)
    if found is None:
        return False
    host, name = found
    try:
        info = session.pool.client(host).get_vm(name)
        mark = parse_mark(info.notes)
        if mark is None or mark.state == "free" or (mark.state == "quarantined" and info.state == "Off"):
            return True
        session.pool.reset(host, name, info.notes, _clean_mark(mark))
        return True
    except (HostCommandError, ValueError):
        return False
