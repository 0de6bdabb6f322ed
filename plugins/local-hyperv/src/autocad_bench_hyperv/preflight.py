"""Read-only admission checks of a Hyper-V pool.

Only ``Get-VM`` and ``Get-VMCheckpoint`` run on the hosts: nothing is started, restored or
marked. Checked: the credentials the settings name are set; each host answers; every
configured VM exists with exactly one checkpoint of the configured name; every VM carries a
pool mark whose broker version label is the batch's; which VMs are leased by a batch whose
lease is still live (busy) or quarantined (skipped); licence seats. ``admitted_wave`` is the
smallest of the batch's concurrency, its assignments, the free VMs and the free seats.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from autocad_bench.infrastructure import CheckResult, PreflightReport, PreflightRequest
from autocad_bench_hyperv.pool import Pool, PoolVm
from autocad_bench_hyperv.runner import HostCommandError
from autocad_bench_hyperv.settings import HyperVSettings, PsrpConnection

PRICING_KEY = "local-hyperv"
"""The key the controller prices this backend's sandbox seconds with (``infrastructure_hourly_usd``)."""


def run_preflight(request: PreflightRequest, settings: HyperVSettings, pool: Pool,
                  environ: Mapping[str, str] | None = None) -> PreflightReport:
    """Check the credential variables, that every host answers (an unreadable host is a failed
    check), the VMs, their checkpoints and marks, the licence seats and pricing. The admitted
    wave is 0 unless every check passed; the pool is closed afterwards.
    """
    env = os.environ if environ is None else environ
    checks: list[CheckResult] = [_credentials(settings, env)]
    try:
        view = pool.view()
        for host in settings.hosts:
            error = view.errors.get(host.name)
            checks.append(CheckResult(
                name=f"host {host.name}", passed=error is None,
                reason=error or f"reachable ({_how(host.connection)}); {len(host.vms)} pool VMs configured"))
        present = [vm for vm in view.vms if vm.info is not None]
        missing = [vm.worker_id for vm in view.vms if vm.info is None]
        checks.append(CheckResult(
            name="VMs exist", passed=not missing,
            reason=f"missing: {', '.join(missing)}" if missing else f"all {len(present)} VMs found",
            details={"missing": missing}))
        checks.append(_checkpoints(settings, pool, present))
        usable, label_check = _labels(request, present)
        checks.append(label_check)
        free = [vm for vm in usable if vm.mark is not None and (vm.mark.state == "free" or vm.mark.expired())]
        busy = [f"{vm.worker_id} ({vm.mark.batch_id}/{vm.mark.rollout_id})" for vm in usable
                if vm.mark is not None and vm.mark.state == "leased" and not vm.mark.expired()]
        quarantined = [f"{vm.worker_id}: {vm.mark.reason}" for vm in present
                       if vm.mark is not None and vm.mark.state == "quarantined"]
        checks.append(CheckResult(
            name="VMs not leased by a live batch", passed=bool(free),
            reason=f"{len(free)} free, {len(busy)} leased by live batches, {len(quarantined)} quarantined",
            details={"free": [vm.worker_id for vm in free], "leased": busy, "quarantined": quarantined}))
        seats = max(0, settings.licence_seats - view.seats_in_use())
        checks.append(CheckResult(
            name="licence seats", passed=seats > 0,
            reason=f"{seats} of {settings.licence_seats} seats free ({view.seats_in_use()} leased VMs)"))
        wave = min(request.max_concurrency, len(request.assignments), len(free), seats)
        checks.append(CheckResult(
            name="capacity", passed=wave > 0,
            reason=f"admitting {wave} at once (concurrency {request.max_concurrency}, {len(free)} free VMs, "
                   f"{seats} free seats)"))
        checks.append(_pricing(settings))
    finally:
        pool.close()
    return PreflightReport(checks=tuple(checks), admitted_wave=wave if all(c.passed for c in checks) else 0)


def _how(connection: object) -> str:
    if isinstance(connection, PsrpConnection):
        return f"PSRP to {connection.server}:{connection.resolved_port}"
    return "local powershell.exe"


def _credentials(settings: HyperVSettings, env: Mapping[str, str]) -> CheckResult:
    missing = [name for name in settings.environment_names() if not env.get(name)]
    return CheckResult(name="credentials", passed=not missing,
                       reason=f"not set: {', '.join(missing)}" if missing
                       else f"{', '.join(settings.environment_names())} set")


def _checkpoints(settings: HyperVSettings, pool: Pool, present: list[PoolVm]) -> CheckResult:
    problems: list[str] = []
    for host in settings.hosts:
        names = [vm.name for vm in present if vm.host.name == host.name]
        if not names:
            continue
        wanted = settings.checkpoint_of(host)
        try:
            found = pool.client(host).checkpoints(names)
        except (HostCommandError, ValueError) as error:
            problems.append(f"host {host.name}: {error}")
            continue
        for name in names:
            count = found.get(name, []).count(wanted)
            if count != 1:
                problems.append(f"{host.name}/{name} has {count} checkpoints named {wanted!r} (needs exactly one)")
    return CheckResult(name="clean checkpoints", passed=not problems,
                       reason="; ".join(problems) if problems else "every VM has exactly one clean checkpoint")


def _labels(request: PreflightRequest, present: list[PoolVm]) -> tuple[list[PoolVm], CheckResult]:
    wanted = request.spec.broker_version
    unmarked = [vm.worker_id for vm in present if vm.mark is None]
    other = [f"{vm.worker_id} ({vm.mark.broker_version})" for vm in present
             if vm.mark is not None and vm.mark.broker_version != wanted]
    usable = [vm for vm in present if vm.mark is not None and vm.mark.broker_version == wanted]
    reason = (f"{len(usable)} VMs labelled {wanted}"
              + (f"; unmarked (not in the pool): {', '.join(unmarked)}" if unmarked else "")
              + (f"; other broker versions: {', '.join(other)}" if other else ""))
    return usable, CheckResult(name="broker version label", passed=not unmarked and not other, reason=reason)


def _pricing(settings: HyperVSettings) -> CheckResult:
    rates = {host.name: host.hourly_usd for host in settings.hosts}
    return CheckResult(
        name="infrastructure rate", passed=True,
        reason=(f"per-host rates {rates} are recorded per rollout in infrastructure.json; the controller prices "
                f"sandbox seconds with infrastructure_hourly_usd[{PRICING_KEY!r}] (pin it to "
                f"{max(rates.values()):g} or override it with AUTOCAD_BENCH_PRICING_JSON)"),
        details={"pricing_key": PRICING_KEY, "host_hourly_usd": rates, "suggested_hourly_usd": max(rates.values())})
