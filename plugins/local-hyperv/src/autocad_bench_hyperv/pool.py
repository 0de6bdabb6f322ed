"""Leasing a free VM of the pool, and returning it clean.

A lease is a compare-and-set of the VM's Notes from the exact free mark the controller read
to a leased mark naming the batch, rollout and attempt (:mod:`autocad_bench_hyperv.marks`).
The licence-seat count is checked against the leased marks of the whole pool (read under
each host's pool lock) before the swap and again after it: a lease that pushed the pool over
its seats is given back at once. Returning a VM is one exclusive script per VM: if the Notes
still hold our mark, turn it off, restore the clean checkpoint and write the new mark (free
or quarantined).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench_hyperv.bounds import CLEANUP_ATTEMPTS, CLEANUP_PAUSE_S, LEASE_POLL_S, RESTORE_ATTEMPTS, scaled
from autocad_bench_hyperv.hyperv import HostClient, VmInfo
from autocad_bench_hyperv.marks import VmMark, free_mark, lease_mark, parse_mark, quarantine_mark
from autocad_bench_hyperv.runner import HostCommandError, RunnerFactory
from autocad_bench_hyperv.settings import HostSettings, HyperVSettings, split_worker_id, worker_id

Log = Callable[[str], None]


class NoVmAvailable(Exception):
    """No free VM (or no licence seat) became available within ``lease_wait_s``."""


@dataclass
class Lease:
    """A VM this process holds; ``notes`` is the exact mark text written to it."""

    host: HostSettings
    client: HostClient
    vm: str
    mark: VmMark
    notes: str
    leased_at: float = field(default_factory=time.monotonic)
    leased_at_utc: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def worker_id(self) -> str:
        return worker_id(self.host.name, self.vm)


@dataclass(frozen=True, slots=True)
class PoolVm:
    """A configured pool VM and what its host listed for it (``info`` is ``None`` when the host
    has no VM of that name); ``mark`` is ``None`` when its Notes are not a mark.
    """

    host: HostSettings
    info: VmInfo | None
    name: str

    @property
    def mark(self) -> VmMark | None:
        return parse_mark(self.info.notes) if self.info is not None else None

    @property
    def worker_id(self) -> str:
        return worker_id(self.host.name, self.name)


@dataclass
class PoolView:
    """One read of every host: the pool VMs (``info`` None when the VM does not exist) and host errors."""

    vms: list[PoolVm]
    errors: dict[str, str]

    def seats_in_use(self) -> int:
        return sum(1 for vm in self.vms if vm.mark is not None and vm.mark.state == "leased")


class Pool:
    """The configured hosts, with one :class:`HostClient` per host (opened lazily, closed by :meth:`close`)."""

    def __init__(self, settings: HyperVSettings, runners: RunnerFactory) -> None:
        self.settings = settings
        self._runners = runners
        self._clients: dict[str, HostClient] = {}

    def client(self, host: HostSettings) -> HostClient:
        if host.name not in self._clients:
            self._clients[host.name] = HostClient(self._runners(host))
        return self._clients[host.name]

    def find(self, worker: str) -> tuple[HostSettings, str] | None:
        parts = split_worker_id(worker)
        if parts is None:
            return None
        try:
            host = self.settings.host(parts[0])
        except KeyError:
            return None
        return (host, parts[1]) if parts[1] in host.vms else None

    def view(self, *, exclusive: bool = False) -> PoolView:
        """Every pool VM of every host; ``exclusive`` reads each host under its pool lock."""
        vms: list[PoolVm] = []
        errors: dict[str, str] = {}
        for host in self.settings.hosts:
            try:
                listed = self.client(host).list_vms(exclusive=exclusive)
            except (HostCommandError, ValueError) as error:
                errors[host.name] = str(error)
                continue
            vms += [PoolVm(host, listed.get(name), name) for name in host.vms]
        return PoolView(vms, errors)

    def try_lease(self, request: RolloutLaunchRequest, exclude: set[str], log: Log) -> Lease | None:
        """Lease one free VM now, or None (no free VM, or every licence seat in use)."""
        view = self.view(exclusive=True)
        for host, error in view.errors.items():
            log(f"host {host} unreadable while leasing: {error}")
        if view.seats_in_use() >= self.settings.licence_seats:
            return None
        for vm in view.vms:
            mark = vm.mark
            if vm.info is None or mark is None or vm.worker_id in exclude:
                continue
            if mark.broker_version != request.spec.broker_version:
                continue
            if not (mark.state == "free" or (mark.state == "leased" and mark.expired())):
                continue
            if mark.state == "leased":
                log(f"{vm.worker_id}: taking over the expired lease of {mark.batch_id}/{mark.rollout_id}")
            desired = lease_mark(mark.broker_version, batch_id=request.batch_id, rollout_id=request.rollout_id,
                                 attempt_id=request.attempt_id, ttl_minutes=self.settings.lease_ttl_minutes)
            text = desired.render()
            client = self.client(vm.host)
            try:
                swapped = client.swap_notes(vm.name, vm.info.notes, text)
            except HostCommandError as error:
                log(f"{vm.worker_id}: lease attempt failed: {error}")
                continue
            if not swapped:
                continue
            # Seats are checked again after the write: of two controllers that raced for the last
            # seat, at least the later one sees both leases and gives its own back (VM untouched).
            if self.view(exclusive=True).seats_in_use() > self.settings.licence_seats:
                log(f"{vm.worker_id}: every licence seat is in use; giving the lease back")
                try:
                    client.swap_notes(vm.name, text, vm.info.notes)
                except HostCommandError as error:
                    log(f"{vm.worker_id}: giving the lease back failed ({error}); reap_batch will")
                return None
            log(f"leased {vm.worker_id} for rollout {request.rollout_id} of batch {request.batch_id}")
            return Lease(vm.host, client, vm.name, desired, text)
        return None

    def lease(self, request: RolloutLaunchRequest, exclude: set[str], wait_s: float, log: Log) -> Lease:
        """:meth:`try_lease` until ``wait_s`` has passed; raises :class:`NoVmAvailable`."""
        deadline = time.monotonic() + wait_s
        waited = False
        while True:
            lease = self.try_lease(request, exclude, log)
            if lease is not None:
                return lease
            if time.monotonic() >= deadline:
                raise NoVmAvailable(f"no free VM with broker {request.spec.broker_version} and a licence seat "
                                    f"within {wait_s:.0f} s")
            if not waited:
                log("no free VM or licence seat; waiting")
                waited = True
            time.sleep(min(scaled(LEASE_POLL_S), max(0.0, deadline - time.monotonic())))

    def reset(self, host: HostSettings, vm: str, expected: str, desired: VmMark) -> bool:
        """Turn off, restore and re-mark ``vm`` if its Notes are still ``expected`` (bounded retries).

        Returns False when the VM is no longer ours; raises :class:`HostCommandError` when every
        attempt failed.
        """
        checkpoint = self.settings.checkpoint_of(host)
        last: HostCommandError | None = None
        for attempt in range(1, RESTORE_ATTEMPTS + 1):
            try:
                return self.client(host).reset_vm(vm, checkpoint, expected, desired.render())
            except HostCommandError as error:
                last = error
                if attempt < RESTORE_ATTEMPTS:
                    time.sleep(scaled(CLEANUP_PAUSE_S))
        assert last is not None
        raise last

    def give_back(self, lease: Lease, log: Log, *, quarantine: str | None = None) -> str | None:
        """Return a leased VM clean (free, or quarantined with a reason); returns a problem or None."""
        desired = quarantine_mark(lease.mark, quarantine) if quarantine else free_mark(lease.mark.broker_version)
        problem = None
        for attempt in range(1, CLEANUP_ATTEMPTS + 1):
            try:
                if self.reset(lease.host, lease.vm, lease.notes, desired):
                    log(f"{lease.worker_id} turned off, restored to {self.settings.checkpoint_of(lease.host)} and "
                        + ("quarantined: " + quarantine if quarantine else "marked free"))
                else:
                    log(f"{lease.worker_id} no longer carries this rollout's mark; left as it is")
                return None
            except HostCommandError as error:
                problem = f"{lease.worker_id}: {error}"
                log(f"returning {lease.worker_id} failed (attempt {attempt} of {CLEANUP_ATTEMPTS}): {error}")
                if attempt < CLEANUP_ATTEMPTS:
                    time.sleep(scaled(CLEANUP_PAUSE_S))
        return problem

    def marked(self, batch_id: str) -> Iterator[PoolVm]:
        """Every readable pool VM whose mark names ``batch_id`` (leased or quarantined)."""
        for vm in self.view().vms:
            mark = vm.mark
            if mark is not None and mark.batch_id == batch_id:
                yield vm

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
