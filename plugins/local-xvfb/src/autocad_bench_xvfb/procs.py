"""Process identity for local workers: is this PID still *our* process, and what is left of a rollout.

A PID alone can be reused by an unrelated program after ours died, so every process a
worker record names carries its ``/proc`` start time (clock ticks since boot) and the boot
id: a PID is ours only while both match. A process group id is safe to signal while its
leader is ours, and also after the leader died while members remain (Linux never hands out
a PID that is still in use as a process group id). Processes that escaped into their own
group (the CAD application) are recognised by their environment: ``HOME`` inside the
rollout's private runtime directory, or the worker marker variable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from autocad_bench_broker.procgroup import group_members, kill_process_group, process_environ

_PROC = Path("/proc")

WORKER_MARKER_ENV = "AUTOCAD_BENCH_XVFB_WORKER"
"""Set in the broker's environment to the worker id, so its processes can be recognised."""


def boot_id() -> str:
    """This boot's id; records from an earlier boot name no live process."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _stat(pid: int) -> list[str] | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def start_time(pid: int) -> int | None:
    """``/proc/PID/stat`` start time in clock ticks since boot; None if the process is gone."""
    fields = _stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


class ProcessRef(BaseModel):
    """One process a worker started: enough to prove later that a PID is still that process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    pid: int
    pgid: int
    start_time: int
    boot_id: str

    @classmethod
    def of(cls, role: str, pid: int) -> ProcessRef:
        """Describe the running process ``pid`` (raises ProcessLookupError if it is gone)."""
        started = start_time(pid)
        if started is None:
            raise ProcessLookupError(f"process {pid} ({role}) is gone")
        pgid = os.getpgid(pid)
        return cls(role=role, pid=pid, pgid=pgid, start_time=started, boot_id=boot_id())

    def is_alive(self) -> bool:
        """True while the very process this reference names runs (zombies count as gone)."""
        if self.boot_id != boot_id():
            return False
        fields = _stat(self.pid)
        return fields is not None and fields[0] != "Z" and len(fields) > 19 and int(fields[19]) == self.start_time

    def leads_group(self) -> bool:
        return self.pgid == self.pid

    def group_is_ours(self) -> bool:
        """Whether signalling ``pgid`` can only hit processes of this rollout."""
        if not self.leads_group() or self.boot_id != boot_id():
            return False
        started = start_time(self.pid)
        if started is not None:
            # The leader itself (perhaps a zombie), or a stranger that got the PID after our
            # whole group was gone.
            return started == self.start_time
        # The leader is gone: the id stays reserved exactly as long as members remain.
        return bool(group_members(self.pgid))

    def remaining(self) -> tuple[int, ...]:
        """PIDs of this process (or, when it leads its group, of its group) still running."""
        if self.group_is_ours():
            return group_members(self.pgid)
        return (self.pid,) if self.is_alive() else ()


def kill_ref(ref: ProcessRef, term_timeout_s: float, kill_timeout_s: float) -> tuple[int, ...]:
    """SIGTERM, bounded wait, SIGKILL the process (its whole group when it leads one).

    Never signals a PID that is no longer the recorded process. Returns what survived.
    """
    if ref.group_is_ours():
        return kill_process_group(ref.pgid, term_timeout_s=term_timeout_s, kill_timeout_s=kill_timeout_s).remaining_pids
    if not ref.is_alive():
        return ()
    with contextlib.suppress(ProcessLookupError):
        os.kill(ref.pid, signal.SIGTERM)
    if _wait_gone(ref.is_alive, term_timeout_s):
        return ()
    with contextlib.suppress(ProcessLookupError):
        os.kill(ref.pid, signal.SIGKILL)
    _wait_gone(ref.is_alive, kill_timeout_s)
    return (ref.pid,) if ref.is_alive() else ()


def _wait_gone(alive: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _all_pids() -> Iterable[int]:
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def rollout_processes(runtime_dir: Path, worker_id: str) -> tuple[int, ...]:
    """Running PIDs that belong to one rollout by their environment (never this process).

    A process belongs to the rollout when its initial ``HOME`` lies inside the rollout's
    private ``runtime_dir`` (the application and the broker get one there) or when it
    carries the worker marker variable set to ``worker_id``.
    """
    root = str(runtime_dir.absolute())
    found = []
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        env = process_environ(pid)
        if not env:
            continue
        home = env.get("HOME", "")
        ours = env.get(WORKER_MARKER_ENV) == worker_id or home == root or home.startswith(root + os.sep)
        if ours and _running(pid):
            found.append(pid)
    return tuple(sorted(found))


def kill_pids(pids: Iterable[int], term_timeout_s: float, kill_timeout_s: float) -> tuple[int, ...]:
    """SIGTERM these PIDs (just found by :func:`rollout_processes`), wait once, SIGKILL the rest.

    A stray that leads its own process group (the application does) is signalled as a group,
    so helpers it started go with it; otherwise only the PID is signalled.
    """
    refs = []
    for pid in pids:
        started = start_time(pid)
        if started is None:
            continue
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            continue
        refs.append(ProcessRef(role="stray", pid=pid, pgid=pgid, start_time=started, boot_id=boot_id()))

    def survivors() -> list[ProcessRef]:
        return [ref for ref in refs if ref.remaining()]

    for sig, timeout in ((signal.SIGTERM, term_timeout_s), (signal.SIGKILL, kill_timeout_s)):
        for ref in survivors():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if ref.group_is_ours():
                    os.killpg(ref.pgid, sig)
                elif ref.is_alive():
                    os.kill(ref.pid, sig)
        if _wait_gone(lambda: bool(survivors()), timeout):
            return ()
    return tuple(sorted(pid for ref in survivors() for pid in ref.remaining()))
