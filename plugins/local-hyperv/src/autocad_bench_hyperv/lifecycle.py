"""The rollout lifecycle on a Hyper-V pool, one implementation for both execution modes.

``run_shared`` calls :func:`run_lifecycle` on the controller's worker thread with a child
runner that runs the in-process pilot; the subprocess wrapper calls it with a runner that
executes the exact child command. In order, for at most ``vm_attempts`` VMs:

1. lease a free VM (compare-and-set of its Notes; waits at most ``lease_wait_s`` for a free
   VM and a licence seat);
2. admit it (:mod:`autocad_bench_hyperv.admission`: restore, start, heartbeat, arm the
   per-rollout token by PowerShell Direct, current-boot readiness, authenticated ``/health``
   of the exact process). A VM that fails is turned off, restored and *quarantined*, and the
   next VM is leased; all before any model call;
3. the child, with ``AUTOCAD_BENCH_BROKER_URL``/``AUTOCAD_BENCH_BROKER_TOKEN``; a handoff the
   pilot reports as failed before any model request is replayed once on the same VM, then
   the VM is quarantined and replaced (never after a model request);
4. evidence retrieval and release for whatever the pilot left open;
5. in ``finally``: the VM is turned off, restored to its checkpoint and marked free;
6. the trusted evaluation (core :func:`~autocad_bench.evaluation.evaluate_rollout`).

``<rollout>/infrastructure.json`` records every VM used, its host, how long it was held and
its host's hourly rate. Exit codes: the child's; :data:`EXIT_LAUNCH_FAILED` when no VM
reached the handoff; :data:`EXIT_CLEANUP_FAILED` when the rollout succeeded but its VM could
not be returned clean (its mark stays for ``reap_batch``); :data:`EXIT_NOT_RECONNECTABLE`
when recovery finds no usable worker; the evaluation's exit code when it failed after a
successful rollout.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench.infrastructure.evidence import archive_attempt, finish_session, handoff_failed, mark_failure
from autocad_bench.infrastructure.rollout_log import LifecycleLog as RolloutLifecycleLog
from autocad_bench.storage import atomic_write_json
from autocad_bench_hyperv.admission import (
    AdmissionFailed,
    AdmittedVm,
    GuestCredential,
    admit,
    broker_url,
    guest_credential,
    read_readiness,
    verify_health,
)
from autocad_bench_hyperv.bounds import EVIDENCE, RESET_WRAPPER_ATTEMPTS
from autocad_bench_hyperv.guest import TOKEN_SCRIPT, ArmedRecord, readiness_problems
from autocad_bench_hyperv.hyperv import HEARTBEAT_OK, parse_one
from autocad_bench_hyperv.marks import parse_mark
from autocad_bench_hyperv.pool import Lease, NoVmAvailable, Pool
from autocad_bench_hyperv.runner import HostCommandError
from autocad_bench_hyperv.settings import HyperVSettings

EXIT_LAUNCH_FAILED = 70
EXIT_CLEANUP_FAILED = 72
EXIT_NOT_RECONNECTABLE = 73

ChildRunner = Callable[[Mapping[str, str]], int]
"""Runs the child with these variables added to its environment; returns its exit code."""


class LifecycleLog(RolloutLifecycleLog):
    """Appends timestamped ``hyperv:`` lines to the rollout log (both modes)."""

    prefix = "hyperv"


def new_token() -> str:
    """A fresh broker bearer token (43 URL-safe characters) for one rollout."""
    return secrets.token_urlsafe(32)


USAGE_FILE = "infrastructure.json"
"""The :class:`UsageRecord` in the rollout directory (kept when a failed handoff is archived)."""


class UsageRecord:
    """``<rollout>/infrastructure.json``: the VMs a rollout held, for per-host cost accounting."""

    def __init__(self, paths: RolloutPaths) -> None:
        self.path = paths.root / USAGE_FILE
        self.workers: list[dict[str, Any]] = []

    def add(self, lease: Lease, outcome: str) -> None:
        seconds = round(time.monotonic() - lease.leased_at, 3)
        rate = lease.host.hourly_usd
        self.workers.append({
            "worker_id": lease.worker_id, "host": lease.host.name, "vm": lease.vm,
            "leased_at": lease.leased_at_utc.isoformat(), "seconds": seconds, "hourly_usd": rate,
            "cost_usd": round(seconds / 3600 * rate, 6), "outcome": outcome})
        self.write()

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, {
            "backend": "local-hyperv", "workers": self.workers,
            "seconds": round(sum(w["seconds"] for w in self.workers), 3),
            "cost_usd": round(sum(w["cost_usd"] for w in self.workers), 6)})


def run_lifecycle(request: RolloutLaunchRequest, settings: HyperVSettings, run_child: ChildRunner, *, pool: Pool,
                  environ: Mapping[str, str], mode: Literal["shared", "subprocess"],
                  worker_id: str | None = None) -> int:
    """Run (or, with ``worker_id``, reconnect and resume) one rollout; see the module docstring."""
    log = LifecycleLog(request.log_path)
    paths = RolloutPaths(request.output_dir)
    log(f"rollout {request.rollout_id} on the Hyper-V pool ({settings.vm_count} VMs on {len(settings.hosts)} "
        f"hosts, {mode} mode)")
    try:
        credential = guest_credential(settings, environ)
    except AdmissionFailed as error:
        log(f"rollout {request.rollout_id} not started: {error}")
        return EXIT_LAUNCH_FAILED
    try:
        if worker_id is not None:
            code = _recover(request, settings, run_child, pool=pool, credential=credential, worker_id=worker_id,
                            log=log, paths=paths)
        else:
            code = _run(request, settings, run_child, pool=pool, credential=credential, log=log, paths=paths)
    finally:
        pool.close()
    if code in (EXIT_LAUNCH_FAILED, EXIT_NOT_RECONNECTABLE):
        return code
    if request.evaluation.enabled:
        evaluation_code = evaluate_rollout(request, environ)
        log(f"evaluation finished with code {evaluation_code}")
        if code == 0 and evaluation_code != 0:
            code = evaluation_code
    return code


def _run(request: RolloutLaunchRequest, settings: HyperVSettings, run_child: ChildRunner, *, pool: Pool,
         credential: GuestCredential, log: LifecycleLog, paths: RolloutPaths) -> int:
    token = new_token()
    usage = UsageRecord(paths)
    tried: set[str] = set()
    failures: list[str] = []
    cleanup: list[str] = []
    code: int | None = None
    for number in range(1, settings.vm_attempts + 1):
        try:
            lease = pool.lease(request, tried, settings.lease_wait_s, log)
        except NoVmAvailable as error:
            failures.append(str(error))
            break
        tried.add(lease.worker_id)
        log(f"admitting {lease.worker_id} (VM {number} of {settings.vm_attempts})")
        quarantine: str | None = None
        outcome = "admission_failed"
        try:
            try:
                vm = admit(pool, lease, token, request, settings, credential, log)
            except AdmissionFailed as error:
                failures.append(f"{lease.worker_id}: {error}")
                log(f"{lease.worker_id} failed admission (VM {number} of {settings.vm_attempts}): {error}")
                quarantine = f"admission failed: {error}"
                continue
            code = _run_child(run_child, vm, token, lease, paths, log)
            if handoff_failed(paths):
                failures.append(f"{lease.worker_id}: the exact lease/reset failed twice")
                quarantine = "the exact task lease/reset failed twice before any model request"
                if number < settings.vm_attempts:
                    archive_attempt(paths, f"vm{number}-attempt{RESET_WRAPPER_ATTEMPTS}", keep=(USAGE_FILE,))
                    log(f"{lease.worker_id} failed the exact lease/reset before any model request; replacing it")
                    code = None
                    continue
                break
            outcome = "completed" if code == 0 else f"exit {code}"
            for line in asyncio.run(finish_session(vm.url, token, paths, log, EVIDENCE)):
                log(f"evidence/release: {line}")
            break
        finally:
            problem = pool.give_back(lease, log, quarantine=quarantine)
            if problem:
                cleanup.append(problem)
            usage.add(lease, "quarantined" if quarantine else outcome)
    if code is None:
        log(f"rollout {request.rollout_id} failed before handoff: {' | '.join(failures) or 'no VM'}")
        return EXIT_LAUNCH_FAILED
    if cleanup:
        mark_failure(paths, FailureClass.CLEANUP_ERROR, "; ".join(cleanup))
        if code == 0:
            code = EXIT_CLEANUP_FAILED
    return code


def _run_child(run_child: ChildRunner, vm: AdmittedVm, token: str, lease: Lease, paths: RolloutPaths,
               log: LifecycleLog) -> int:
    """The child, replayed once on the same VM if its handoff failed before any model request."""
    environ = {BROKER_URL_ENV: vm.url, BROKER_TOKEN_ENV: token}
    code = 1
    for attempt in range(1, RESET_WRAPPER_ATTEMPTS + 1):
        code = run_child(environ)
        log(f"child exited with code {code} (attempt {attempt} of {RESET_WRAPPER_ATTEMPTS} on {lease.worker_id})")
        if not handoff_failed(paths) or attempt == RESET_WRAPPER_ATTEMPTS:
            break
        archive_attempt(paths, f"{lease.vm}-attempt{attempt}", keep=(USAGE_FILE,))
        log("the handoff failed before any model request; replaying the same lease and reset")
    return code


def _recover(request: RolloutLaunchRequest, settings: HyperVSettings, run_child: ChildRunner, *, pool: Pool,
             credential: GuestCredential, worker_id: str, log: LifecycleLog, paths: RolloutPaths) -> int:
    """Reconnect to ``worker_id`` and resume the child there (never a replacement); always return it clean."""
    found = pool.find(worker_id)
    if found is None:
        log(f"cannot reconnect to {worker_id}: not a VM of this pool")
        return EXIT_NOT_RECONNECTABLE
    host, vm_name = found
    client = pool.client(host)
    try:
        info = client.get_vm(vm_name)
    except (HostCommandError, ValueError) as error:
        log(f"cannot reconnect to {worker_id}: {error}")
        return EXIT_NOT_RECONNECTABLE
    mark = parse_mark(info.notes)
    if mark is None or mark.state != "leased" or not mark.owned_by(request.batch_id, request.rollout_id):
        log(f"cannot reconnect to {worker_id}: it is not leased to {request.batch_id}/{request.rollout_id}")
        return EXIT_NOT_RECONNECTABLE
    lease = Lease(host, client, vm_name, mark, info.notes)
    usage = UsageRecord(paths)
    code = EXIT_NOT_RECONNECTABLE
    cleanup: list[str] = []
    try:
        try:
            vm, token = _reconnect(lease, info.state, request, settings, credential)
        except AdmissionFailed as error:
            log(f"cannot reconnect to {worker_id}: {error}")
            return EXIT_NOT_RECONNECTABLE
        log(f"reconnected to {worker_id}; resuming rollout {request.rollout_id}")
        code = run_child({BROKER_URL_ENV: vm.url, BROKER_TOKEN_ENV: token})
        log(f"child exited with code {code} (resumed on {worker_id})")
        for line in asyncio.run(finish_session(vm.url, token, paths, log, EVIDENCE)):
            log(f"evidence/release: {line}")
    finally:
        problem = pool.give_back(lease, log)
        if problem:
            cleanup.append(problem)
        usage.add(lease, "resumed" if code != EXIT_NOT_RECONNECTABLE else "not_reconnectable")
    if cleanup:
        mark_failure(paths, FailureClass.CLEANUP_ERROR, "; ".join(cleanup))
        if code == 0:
            code = EXIT_CLEANUP_FAILED
    return code


def _reconnect(lease: Lease, state: str, request: RolloutLaunchRequest, settings: HyperVSettings,
               credential: GuestCredential) -> tuple[AdmittedVm, str]:
    if state != "Running":
        raise AdmissionFailed(f"the VM is {state}")
    try:
        heartbeat = lease.client.heartbeat(lease.vm)
        if heartbeat != HEARTBEAT_OK:
            raise AdmissionFailed(f"heartbeat {heartbeat}")
        armed = parse_one(ArmedRecord, lease.client.guest(
            lease.vm, "read the armed token", TOKEN_SCRIPT, (),
            username=credential.username, password=credential.password), "the armed record")
        report = read_readiness(lease, credential)
    except (HostCommandError, ValueError) as error:
        raise AdmissionFailed(str(error)) from None
    if armed is None or armed.rollout_id != request.rollout_id or armed.batch_id != request.batch_id:
        raise AdmissionFailed("the guest was not armed for this rollout")
    if report is None:
        raise AdmissionFailed("no readiness report")
    problems = readiness_problems(report, rollout_id=request.rollout_id, broker_version=request.spec.broker_version,
                                  broker_port=settings.guest_broker_port, console_user=settings.console_user)
    if problems:
        raise AdmissionFailed("; ".join(problems))
    assert report.readiness is not None
    url = broker_url(lease, settings, lambda _: None)
    verify_health(url, armed.token, report.readiness, settings.handoff_timeout_s)
    return AdmittedVm(url, report.readiness), armed.token
