"""Processes the tests start: find them, whoever their parent is now, and kill their groups.

A test that starts desktops or servers (Xvfb, a broker, LibreCAD, a batch controller, a
wrapper, a tunnel) may fail half-way; its processes, often in sessions of their own, are then
re-parented to init and outlive it. Two marks find them without their ancestry:

* a token: the root ``conftest`` sets :data:`SESSION_TOKEN_ENV` to a fresh value in every
  pytest process (each xdist worker has its own), so every process a test starts with the
  inherited environment carries ``AUTOCAD_BENCH_TEST_SESSION=<token>``;
* a path: what is started with a scrubbed environment (a sandbox's Xvfb, broker and LibreCAD
  get only PATH, HOME and their marker) still names a path under the test's ``tmp_path`` (its
  HOME, its runtime directory, its config) in its command line or environment.

:func:`kill_groups` SIGKILLs each found process's group (never this process's own group) and
waits until they are gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SESSION_TOKEN_ENV = "AUTOCAD_BENCH_TEST_SESSION"
"""Set by the root conftest in every pytest process; inherited by what its tests start."""
LEAK_CHECK_ENV = "AUTOCAD_BENCH_LEAK_CHECK"
"""``0`` switches the per-test and session checks off (to look at a leak by hand)."""


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    pgid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} (group {self.pgid}): {self.command}"


def enabled() -> bool:
    return os.environ.get(LEAK_CHECK_ENV, "1") != "0"


def _ancestors() -> set[int]:
    found = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
        found.add(pid)
    return found


def _path_pattern(paths: Iterable[Path | str]) -> re.Pattern[bytes] | None:
    # A path ends at a separator, a NUL, a PATH list separator or the end: /tmp/pytest-1 must
    # not match /tmp/pytest-12.
    alternatives = [re.escape(str(path).rstrip("/").encode()) for path in paths]
    if not alternatives:
        return None
    return re.compile(rb"(?:" + rb"|".join(alternatives) + rb")(?=/|\x00|:|$)")


def find(*, token: str | None = None, paths: Iterable[Path | str] = ()) -> list[Proc]:
    """Live (not zombie) processes carrying ``token`` in their environment or naming one of
    ``paths`` in their command line or environment; never this process or its ancestors."""
    pattern = _path_pattern(paths)
    mark = f"{SESSION_TOKEN_ENV}={token}\0".encode() if token else None
    skip = _ancestors()
    found: list[Proc] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[0] in ("Z", "X"):
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes() + b"\0"
        except (OSError, IndexError):
            continue
        if (mark is not None and (environ.startswith(mark) or b"\0" + mark in environ)) or (
                pattern is not None and (pattern.search(cmdline + b"\0") or pattern.search(environ))):
            command = cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:300]
            name = stat[stat.find("(") + 1:stat.rfind(")")]
            if int(fields[1]) == os.getpid() and b"multiprocessing.resource_tracker" in cmdline:
                # This process's own resource tracker: it lives as long as this process does
                # and ends with it (a tracker whose owner died is re-parented and still found).
                continue
            found.append(Proc(int(entry.name), int(fields[2]), command or f"[{name}]"))
    return found


def kill_groups(processes: list[Proc], *, wait_s: float = 10.0) -> list[Proc]:
    """SIGKILL each process's group (its own pid only when it shares this process's group);
    return those still alive after ``wait_s`` (normally none)."""
    own = os.getpgrp()
    for proc in processes:
        if proc.pgid > 1 and proc.pgid != own:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pgid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while True:
        alive = [proc for proc in processes if _alive(proc.pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")


def settle(*, token: str | None = None, paths: Iterable[Path | str] = (), wait_s: float = 5.0) -> list[Proc]:
    """What is still running after up to ``wait_s`` for processes that are on their way out."""
    deadline = time.monotonic() + wait_s
    while True:
        left = find(token=token, paths=paths)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)
