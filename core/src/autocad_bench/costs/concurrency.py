"""Caps on how many rollouts run at once: in one process, and across controllers.

Both layers fail fast. A request over the cap gets a refused :class:`Admission` at once and
nothing waits in a hidden queue: the scheduler keeps its own visible queue of assignments
and tries again when a rollout ends, so a full fleet is always visible to the operator.

* :class:`ConcurrencyLimiter` counts slots inside one controller process (thread-safe).
* :class:`ActiveRolloutRegistry` counts rollouts of every controller that shares a state
  directory: one lease file per active rollout, written under an exclusive ``fcntl`` lock,
  naming the owning process. Leases of processes that died are ignored and removed, so a
  crashed controller does not hold slots forever. POSIX only (the controller never runs on
  Windows) and meant for a local filesystem; a lease written by another host cannot be
  checked and is always counted as active.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import secrets
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autocad_bench.models import IDENTIFIER_RE
from autocad_bench.storage import atomic_write_json

if sys.platform != "win32":
    import fcntl


@dataclass(frozen=True, slots=True)
class Admission:
    """Outcome of a fail-fast acquire: truthy when a slot was granted.

    ``active`` is the number of slots in use after the decision and ``limit`` the cap;
    ``reason`` explains a refusal. ``lease`` is set when a registry lease was written.
    """

    admitted: bool
    active: int
    limit: int
    reason: str = ""
    lease: Lease | None = None

    def __bool__(self) -> bool:
        return self.admitted


class ConcurrencyLimitReached(RuntimeError):
    """Raised by the ``hold`` context managers when no slot is free."""

    def __init__(self, admission: Admission) -> None:
        super().__init__(admission.reason)
        self.admission = admission


class ConcurrencyLimiter:
    """A counting semaphore that never blocks: :meth:`acquire` grants a slot or refuses at once.

    Thread-safe, for the sandbox workers of one controller. Raises :class:`ValueError` for
    a cap below 1.
    """

    def __init__(self, max_active: int) -> None:
        if max_active < 1:
            raise ValueError(f"max_active must be >= 1, got {max_active}")
        self.max_active = max_active
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    @property
    def available(self) -> int:
        return self.max_active - self._active

    def acquire(self) -> Admission:
        """Take a slot if one is free; otherwise a refused :class:`Admission` (nothing queued)."""
        with self._lock:
            if self._active >= self.max_active:
                return Admission(
                    admitted=False,
                    active=self._active,
                    limit=self.max_active,
                    reason=f"{self._active} of {self.max_active} rollout slots in use",
                )
            self._active += 1
            return Admission(admitted=True, active=self._active, limit=self.max_active)

    def release(self) -> None:
        """Return one slot; raises :class:`RuntimeError` if none is held (a double release)."""
        with self._lock:
            if self._active == 0:
                raise RuntimeError("release() without a matching acquire()")
            self._active -= 1

    @contextlib.contextmanager
    def hold(self) -> Iterator[Admission]:
        """Hold a slot for the ``with`` block; raises :class:`ConcurrencyLimitReached` if full."""
        admission = self.acquire()
        if not admission:
            raise ConcurrencyLimitReached(admission)
        try:
            yield admission
        finally:
            self.release()


@dataclass(frozen=True, slots=True)
class Lease:
    """One active rollout as recorded in the registry directory."""

    rollout_id: str
    pid: int
    pid_start: str
    host: str
    nonce: str
    acquired_at: str

    def to_json(self) -> dict[str, str | int]:
        return {
            "rollout_id": self.rollout_id,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "host": self.host,
            "nonce": self.nonce,
            "acquired_at": self.acquired_at,
        }

    @classmethod
    def from_json(cls, data: object) -> Lease:
        if not isinstance(data, dict):
            raise ValueError("lease is not a JSON object")
        return cls(
            rollout_id=str(data["rollout_id"]),
            pid=int(data["pid"]),
            pid_start=str(data.get("pid_start", "")),
            host=str(data.get("host", "")),
            nonce=str(data.get("nonce", "")),
            acquired_at=str(data.get("acquired_at", "")),
        )


_LEASE_SUFFIX = ".lease"
_LOCK_NAME = ".registry.lock"
_HAS_PROC = Path("/proc/self/stat").exists()


class ActiveRolloutRegistry:
    """Counts active rollouts of all controllers sharing ``state_dir`` and caps them.

    :meth:`try_acquire` takes an exclusive lock on ``state_dir/.registry.lock``, drops leases
    whose process is gone, counts the rest and writes a new lease only if the count is below
    ``max_active``; two controllers therefore never exceed the cap together. The lease names
    this process (pid and its start time, so a recycled pid is not mistaken for the owner).
    :meth:`release` removes it. Raises :class:`ValueError` for a cap below 1 and
    :class:`NotImplementedError` on Windows.
    """

    def __init__(self, state_dir: Path, max_active: int) -> None:
        if sys.platform == "win32":  # pragma: no cover - the controller is POSIX-only
            raise NotImplementedError("ActiveRolloutRegistry needs fcntl (POSIX)")
        if max_active < 1:
            raise ValueError(f"max_active must be >= 1, got {max_active}")
        self.state_dir = Path(state_dir)
        self.max_active = max_active
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._host = socket.gethostname()
        self._held: dict[str, Lease] = {}

    def try_acquire(self, rollout_id: str) -> Admission:
        """Write a lease for ``rollout_id`` if a slot is free; never waits for one.

        Refused (with a reason) when the cap is reached or the rollout already holds a live
        lease. Raises :class:`ValueError` for an id that is not a safe file name.
        """
        _check_id(rollout_id)
        with self._locked():
            live = self._live_leases()
            existing = next((lease for lease in live if lease.rollout_id == rollout_id), None)
            if existing is not None:
                return Admission(
                    admitted=False,
                    active=len(live),
                    limit=self.max_active,
                    reason=f"rollout {rollout_id!r} is already active (pid {existing.pid} on {existing.host})",
                )
            if len(live) >= self.max_active:
                return Admission(
                    admitted=False,
                    active=len(live),
                    limit=self.max_active,
                    reason=f"{len(live)} of {self.max_active} rollout slots in use across controllers",
                )
            lease = Lease(
                rollout_id=rollout_id,
                pid=os.getpid(),
                pid_start=_process_start(os.getpid()) or "",
                host=self._host,
                nonce=secrets.token_hex(8),
                acquired_at=datetime.datetime.now(datetime.UTC).isoformat(),
            )
            atomic_write_json(self._lease_path(rollout_id), lease.to_json())
            self._held[rollout_id] = lease
            return Admission(admitted=True, active=len(live) + 1, limit=self.max_active, lease=lease)

    def release(self, rollout_id: str) -> bool:
        """Remove this registry's lease for ``rollout_id``; ``False`` if it held none.

        A lease written by another process (or a later acquire of the same id) is left alone.
        """
        _check_id(rollout_id)
        held = self._held.pop(rollout_id, None)
        if held is None:
            return False
        with self._locked():
            path = self._lease_path(rollout_id)
            current = self._read(path)
            if current is None or current.nonce != held.nonce:
                return False
            path.unlink(missing_ok=True)
            return True

    def active_leases(self) -> list[Lease]:
        """Leases of live processes, sorted by rollout id (stale ones are removed)."""
        with self._locked():
            return self._live_leases()

    def active_count(self) -> int:
        return len(self.active_leases())

    @contextlib.contextmanager
    def hold(self, rollout_id: str) -> Iterator[Admission]:
        """Hold a lease for the ``with`` block; raises :class:`ConcurrencyLimitReached` if refused."""
        admission = self.try_acquire(rollout_id)
        if not admission:
            raise ConcurrencyLimitReached(admission)
        try:
            yield admission
        finally:
            self.release(rollout_id)

    # -- internals -----------------------------------------------------------------------

    def _lease_path(self, rollout_id: str) -> Path:
        return self.state_dir / f"{rollout_id}{_LEASE_SUFFIX}"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # flock locks belong to the open file description, so this also serializes threads
        # of one process that each open the lock file.
        fd = os.open(self.state_dir / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _live_leases(self) -> list[Lease]:
        live: list[Lease] = []
        for path in sorted(self.state_dir.glob(f"*{_LEASE_SUFFIX}")):
            lease = self._read(path)
            if lease is None:
                # atomic_write_json never leaves a torn lease; an unreadable one was written by
                # something else. Count it (refusing a slot is the safe error) but keep it.
                live.append(_unknown_lease(path))
                continue
            if self._is_stale(lease):
                path.unlink(missing_ok=True)
                continue
            live.append(lease)
        return live

    def _is_stale(self, lease: Lease) -> bool:
        if lease.host != self._host:
            return False  # cannot check another machine's processes: assume it is alive
        start = _process_start(lease.pid)
        if start is None:
            return True
        return bool(lease.pid_start) and bool(start) and start != lease.pid_start

    @staticmethod
    def _read(path: Path) -> Lease | None:
        try:
            return Lease.from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _unknown_lease(path: Path) -> Lease:
    return Lease(
        rollout_id=path.name.removesuffix(_LEASE_SUFFIX),
        pid=0,
        pid_start="",
        host="unknown",
        nonce="",
        acquired_at="",
    )


def _check_id(rollout_id: str) -> None:
    if not IDENTIFIER_RE.fullmatch(rollout_id):
        raise ValueError(f"rollout id {rollout_id!r} is not a safe identifier")


def _process_start(pid: int) -> str | None:
    """An identity of the live process ``pid`` (its start time), or ``None`` if it is gone.

    On Linux the start time comes from ``/proc`` and zombies count as gone; elsewhere only
    existence is checked and the identity is an empty string.
    """
    if pid <= 0:
        return None
    text = ""
    if _HAS_PROC:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return None
        except OSError:
            text = ""
    if text:
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = text.rsplit(")", 1)[-1].split()
        state, start = fields[0], fields[19]
        return None if state in ("Z", "X") else start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ""  # exists, owned by someone else
    return ""
