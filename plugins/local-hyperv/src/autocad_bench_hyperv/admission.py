"""Admitting one leased VM: from its clean checkpoint to a verified broker, before any model call.

In order (every wait bounded, see :mod:`autocad_bench_hyperv.bounds`):

1. turn off, restore the clean checkpoint and re-mark, under the pool lock (2 attempts);
2. ``Start-VM``, then the Heartbeat integration service reports OK;
3. arm the broker: the per-rollout token goes into the guest by PowerShell Direct;
4. the current-boot readiness record of a broker armed for this rollout;
5. the broker's address (host port proxy, or the routed address with the VM's IP);
6. authenticated ``/health`` identifies the exact process and session of the readiness record.

Any failure raises :class:`AdmissionFailed`; the lifecycle then quarantines the VM.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.errors import BrokerError, BrokerHTTPError
from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.readiness import health_identity
from autocad_bench_hyperv.bounds import (
    ARM_ATTEMPTS,
    HEALTH_REQUEST_S,
    HEALTH_RETRY_PAUSE_S,
    HEARTBEAT_POLL_S,
    READINESS_POLL_S,
    scaled,
)
from autocad_bench_hyperv.commands import Secret
from autocad_bench_hyperv.guest import (
    ARM_SCRIPT,
    READINESS_SCRIPT,
    BrokerReadiness,
    ReadinessReport,
    readiness_problems,
)
from autocad_bench_hyperv.hyperv import HEARTBEAT_OK, parse_one
from autocad_bench_hyperv.pool import Lease, Pool
from autocad_bench_hyperv.runner import HostCommandError
from autocad_bench_hyperv.settings import HostSettings, HyperVSettings, PortProxyReach

Log = Callable[[str], None]


class AdmissionFailed(Exception):
    """The VM failed a handoff check before any model request."""


@dataclass(frozen=True)
class GuestCredential:
    """The guest account used for PowerShell Direct (the password is kept out of ``repr``)."""

    username: str
    password: str = ""

    def __repr__(self) -> str:
        return f"GuestCredential(username={self.username!r})"


def guest_credential(settings: HyperVSettings, environ: Mapping[str, str]) -> GuestCredential:
    """The guest account from the variables the settings name; raises :class:`AdmissionFailed`
    naming whichever is unset or empty.
    """
    username = environ.get(settings.guest_username_env, "")
    password = environ.get(settings.guest_password_env, "")
    if not username or not password:
        missing = [n for n in (settings.guest_username_env, settings.guest_password_env) if not environ.get(n)]
        raise AdmissionFailed(f"guest credentials not set: {', '.join(missing)}")
    return GuestCredential(username, password)


@dataclass(frozen=True)
class AdmittedVm:
    """An admitted VM: the broker URL the child uses and the readiness record it was verified against."""

    url: str
    readiness: BrokerReadiness


def admit(pool: Pool, lease: Lease, token: str, request: RolloutLaunchRequest, settings: HyperVSettings,
          credential: GuestCredential, log: Log) -> AdmittedVm:
    """Steps 1 to 6 of the module docstring for a freshly leased VM; raises :class:`AdmissionFailed`."""
    name = lease.worker_id
    try:
        if not pool.reset(lease.host, lease.vm, lease.notes, lease.mark):
            raise AdmissionFailed(f"{name} lost its lease mark before it was restored")
    except HostCommandError as error:
        raise AdmissionFailed(f"{name} could not be restored to its clean checkpoint: {error}") from None
    log(f"{name} restored to {settings.checkpoint_of(lease.host)}")
    try:
        lease.client.start(lease.vm)
    except HostCommandError as error:
        raise AdmissionFailed(f"{name} did not start: {error}") from None
    started = time.monotonic()
    wait_heartbeat(lease, settings.boot_timeout_s, log)
    log(f"{name} heartbeat OK after {time.monotonic() - started:.1f} s")
    arm(lease, token, request, credential, log)
    ready = wait_readiness(lease, request, settings, credential, log)
    log(f"{name} ready in boot {ready.boot_id}: broker pid {ready.pid} in session {ready.interactive_session_id}, "
        f"startup {ready.startup_id}")
    url = broker_url(lease, settings, log)
    verify_health(url, token, ready, settings.handoff_timeout_s)
    log(f"{name} broker at {url} answers authenticated /health as pid {ready.pid} in session "
        f"{ready.interactive_session_id}")
    return AdmittedVm(url, ready)


def wait_heartbeat(lease: Lease, timeout_s: float, log: Log) -> None:
    """Step 2: poll the Heartbeat integration service until it reports OK; raises
    :class:`AdmissionFailed` with the last status after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    status = "unknown"
    while True:
        try:
            status = lease.client.heartbeat(lease.vm)
        except HostCommandError as error:
            status = f"unreadable ({error.message})"
        if status == HEARTBEAT_OK:
            return
        if time.monotonic() >= deadline:
            raise AdmissionFailed(f"{lease.worker_id} reported no heartbeat within {timeout_s:.0f} s "
                                  f"(last: {status})")
        time.sleep(min(scaled(HEARTBEAT_POLL_S), max(0.0, deadline - time.monotonic())))


def arm(lease: Lease, token: str, request: RolloutLaunchRequest, credential: GuestCredential, log: Log) -> None:
    """Deliver the broker token and the rollout identity into the guest (PowerShell Direct)."""
    last = ""
    for attempt in range(1, ARM_ATTEMPTS + 1):
        try:
            lease.client.guest(lease.vm, "arm the broker", ARM_SCRIPT,
                               (Secret(1), request.batch_id, request.rollout_id, request.attempt_id,
                                request.spec.broker_version),
                               username=credential.username, password=credential.password, secrets=(token,))
            log(f"{lease.worker_id} broker armed for rollout {request.rollout_id} (token delivered by PowerShell "
                "Direct)")
            return
        except HostCommandError as error:
            last = error.message
            log(f"{lease.worker_id} arming attempt {attempt} of {ARM_ATTEMPTS} failed: {error.message}")
            if attempt < ARM_ATTEMPTS:
                time.sleep(scaled(READINESS_POLL_S))
    raise AdmissionFailed(f"{lease.worker_id} could not be armed by PowerShell Direct: {last}")


def read_readiness(lease: Lease, credential: GuestCredential) -> ReadinessReport | None:
    """The guest's readiness report read through PowerShell Direct, or ``None`` when the script
    printed nothing; raises ``HostCommandError`` or ``ValueError`` (malformed report).
    """
    items = lease.client.guest(lease.vm, "read readiness", READINESS_SCRIPT, (),
                               username=credential.username, password=credential.password)
    return parse_one(ReadinessReport, items, "the readiness report")


def wait_readiness(lease: Lease, request: RolloutLaunchRequest, settings: HyperVSettings,
                   credential: GuestCredential, log: Log) -> BrokerReadiness:
    """Step 4: poll until the current boot's readiness record is for this rollout, broker
    version, port and console user; raises :class:`AdmissionFailed` with the last problems
    after ``readiness_timeout_s``.
    """
    deadline = time.monotonic() + settings.readiness_timeout_s
    problems: list[str] = ["no readiness report yet"]
    while True:
        try:
            report = read_readiness(lease, credential)
            if report is None:
                problems = ["the readiness script printed nothing"]
            else:
                problems = readiness_problems(report, rollout_id=request.rollout_id,
                                              broker_version=request.spec.broker_version,
                                              broker_port=settings.guest_broker_port,
                                              console_user=settings.console_user)
                if not problems:
                    assert report.readiness is not None
                    return report.readiness
        except HostCommandError as error:
            problems = [error.message]
        except ValueError as error:
            problems = [str(error)]
        if time.monotonic() >= deadline:
            raise AdmissionFailed(f"{lease.worker_id} is not ready in its current boot within "
                                  f"{settings.readiness_timeout_s:.0f} s: {'; '.join(problems)}")
        time.sleep(min(scaled(READINESS_POLL_S), max(0.0, deadline - time.monotonic())))


def broker_url(lease: Lease, settings: HyperVSettings, log: Log) -> str:
    """Where the controller reaches this VM's broker."""
    host: HostSettings = lease.host
    reach = host.broker
    if isinstance(reach, PortProxyReach):
        return f"http://{_bracket(reach.address)}:{reach.ports[lease.vm]}"
    address = reach.address_template
    if "{ip}" in address:
        try:
            ips = [a for a in lease.client.addresses(lease.vm) if _ipv4(a)]
        except HostCommandError as error:
            raise AdmissionFailed(f"{lease.worker_id} addresses unreadable: {error.message}") from None
        if not ips:
            raise AdmissionFailed(f"{lease.worker_id} reports no IPv4 address (integration services not running?)")
        address = address.replace("{ip}", ips[0])
    address = address.replace("{vm}", lease.vm).replace("{host}", host.name)
    return f"http://{_bracket(address)}:{reach.port}"


def verify_health(url: str, token: str, ready: BrokerReadiness, timeout_s: float) -> None:
    """Authenticated ``/health`` must identify the exact broker process of ``ready``."""
    problem = asyncio.run(_health(url, token, health_identity(ready), timeout_s))
    if problem is not None:
        raise AdmissionFailed(problem)


async def _health(url: str, token: str, expected: dict[str, object], timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        remaining = deadline - time.monotonic()
        try:
            client = BrokerClient(url, token, operation_deadline_s=max(0.1, min(HEALTH_REQUEST_S, remaining)),
                                  max_attempts=1, connect_timeout_s=max(0.1, min(HEALTH_REQUEST_S, remaining)))
            health = await client.health()
        except BrokerHTTPError as error:
            return f"the broker at {url} refused authenticated /health: {error}"
        except (BrokerError, OSError, TimeoutError) as error:
            last = str(error) or type(error).__name__
        else:
            observed = health.model_dump()
            wrong = {k: (observed.get(k), v) for k, v in expected.items() if observed.get(k) != v}
            if not wrong:
                return None
            return ("/health does not identify the broker that passed readiness: "
                    + ", ".join(f"{k} {got!r} != {want!r}" for k, (got, want) in sorted(wrong.items())))
        if time.monotonic() >= deadline:
            return f"the broker at {url} did not answer authenticated /health within {timeout_s:.0f} s: {last}"
        await asyncio.sleep(min(scaled(HEALTH_RETRY_PAUSE_S), max(0.0, deadline - time.monotonic())))


def _ipv4(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False


def _bracket(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address
