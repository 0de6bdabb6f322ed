"""Which processes and in-process resources a rollout created, read from ``/proc`` (Linux).

The backend conformance kit uses these to prove that nothing of a rollout is left once it
ended: :class:`ProcessWatch` follows a process tree while it runs (descendants by parent
pid, and every member of the rollout's process group or session), so a helper that a
backend started in a new session is still known when its parent has gone;
:func:`own_resources` lists the listening sockets and open regular files of this process,
for the shared mode, where the backend runs inside the test process.

A process is identified by pid *and* start time, so a recycled pid is never mistaken for a
leftover. Where ``/proc`` does not exist every scan is empty (nothing can be proved there,
and the kit says so instead of passing silently: see :func:`proc_available`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def proc_available() -> bool:
    """Whether this system has a Linux-style ``/proc`` to read processes from."""
    return (PROC / "self" / "stat").exists()


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process as ``/proc/<pid>/stat`` and ``cmdline`` describe it."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    state: str
    command: str

    @property
    def key(self) -> tuple[int, int]:
        return self.pid, self.start


def read_process(pid: int) -> ProcessInfo | None:
    """The process ``pid`` now, or None if it is gone (or unreadable)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        fields = stat.rsplit(")", 1)[1].split()
        try:
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            raw = b""
        command = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        return ProcessInfo(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]),
                           start=int(fields[19]), state=fields[0], command=command[:300])
    except (OSError, IndexError, ValueError):
        return None


def scan() -> dict[int, ProcessInfo]:
    """Every process this user can see."""
    found: dict[int, ProcessInfo] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                info = read_process(int(entry.name))
                if info is not None:
                    found[info.pid] = info
    return found


def is_running(info: ProcessInfo) -> bool:
    """Whether that very process (same pid and start time) still runs (a zombie does not)."""
    now = read_process(info.pid)
    return now is not None and now.start == info.start and now.state not in ("Z", "X")


class ProcessWatch:
    """The processes of one rollout, collected by repeated :meth:`poll` while it runs.

    ``root`` is the lifecycle command's pid (subprocess mode: it leads a session and a
    process group of its own) or this process (shared mode: ``group=False``, and processes
    that existed before are excluded). Every descendant of ``root`` seen by a poll is kept,
    as is every process in ``root``'s group or session when ``group`` is true.
    """

    def __init__(self, root: int, *, group: bool) -> None:
        self.root = root
        self.group = group
        self.seen: dict[tuple[int, int], ProcessInfo] = {}
        self._before = set() if group else {info.key for info in scan().values()}

    def poll(self) -> None:
        """Add every process of the rollout that exists now."""
        processes = scan()
        tracked_pids = {self.root} | {pid for pid, _ in self.seen}
        for info in processes.values():
            if info.key in self._before or info.pid == os.getpid():
                continue
            member = self.group and self.root in (info.pgid, info.sid)
            ancestor, hops = info.ppid, 0
            while not member and ancestor > 1 and hops < 64:
                if ancestor in tracked_pids:
                    member = True
                    break
                parent = processes.get(ancestor)
                ancestor = parent.ppid if parent is not None else 0
                hops += 1
            if member:
                self.seen.setdefault(info.key, info)

    def running(self) -> list[ProcessInfo]:
        """The processes seen so far that still run."""
        return [info for info in self.seen.values() if is_running(info)]

    def settle(self, seconds: float) -> list[ProcessInfo]:
        """Poll until none of the rollout's processes runs or ``seconds`` passed; those still running."""
        deadline = time.monotonic() + seconds
        while True:
            self.poll()
            alive = self.running()
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.1)

    def kill_all(self) -> None:
        """SIGKILL what still runs (the kit's own clean-up after a broken backend)."""
        for info in self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.pid, signal.SIGKILL)


def describe(processes: list[ProcessInfo]) -> str:
    """``pid 12 (pgid 12): python -m ...`` for each, for failure messages."""
    return "; ".join(f"pid {p.pid} (pgid {p.pgid}, sid {p.sid}): {p.command or '?'}" for p in processes)


@dataclass(frozen=True, slots=True)
class OwnResources:
    """What this process holds: listening TCP ports and open regular files."""

    ports: frozenset[int]
    files: frozenset[str]


def _socket_inodes() -> dict[str, int]:
    """Socket inode to the port it listens on, from ``/proc/self/net/tcp*``."""
    listening: dict[str, int] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (PROC / "self" / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
                listening[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return listening


def own_resources() -> OwnResources:
    """The listening ports and regular files this process has open now."""
    listening = _socket_inodes()
    ports: set[int] = set()
    files: set[str] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC / "self" / "fd"):
            try:
                target = os.readlink(entry.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                port = listening.get(target[8:-1])
                if port is not None:
                    ports.add(port)
            elif target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
                files.add(target)
    return OwnResources(ports=frozenset(ports), files=frozenset(files))


def resources_leaked(before: OwnResources, *, settle_s: float = 2.0) -> OwnResources:
    """What this process opened since ``before`` and still holds after up to ``settle_s``."""
    deadline = time.monotonic() + settle_s
    while True:
        now = own_resources()
        leaked = OwnResources(ports=now.ports - before.ports, files=now.files - before.files)
        if not (leaked.ports or leaked.files) or time.monotonic() >= deadline:
            return leaked
        time.sleep(0.1)
