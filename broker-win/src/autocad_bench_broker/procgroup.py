"""POSIX process-group helpers: list a group's members, find processes by environment, and
kill a group within a bounded time.

Every program the broker starts on Linux (Xvfb, the CAD application) runs in its own session
and therefore its own process group, so "kill the application" means "kill the group" and
"no process left" can be proven by scanning ``/proc`` for that group id. These helpers read
``/proc`` and never raise for processes that vanish while they look.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

_PROC = Path("/proc")

SignalName = Literal["none", "SIGTERM", "SIGKILL"]
SIGNAL_ORDER: tuple[SignalName, ...] = ("none", "SIGTERM", "SIGKILL")
"""Signals in increasing strength, to report the strongest one a kill needed."""


@dataclass(frozen=True, slots=True)
class GroupKillOutcome:
    """What :func:`kill_process_group` did: the strongest signal sent and what survived."""

    signal_sent: SignalName  # "none" when the group was already gone
    elapsed_s: float
    remaining_pids: tuple[int, ...]

    @property
    def gone(self) -> bool:
        return not self.remaining_pids


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name, or None if the process is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    return raw[raw.rfind(")") + 2 :].split()


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]


def process_state(pid: int) -> str | None:
    """The one-letter ``/proc`` state of ``pid`` (``Z`` for a zombie), None when it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    state = process_state(pid)
    return state is not None and state != "Z"


def group_members(pgid: int) -> tuple[int, ...]:
    """PIDs (zombies excluded) whose process group is ``pgid``."""
    members = []
    for pid in _all_pids():
        fields = _stat_fields(pid)
        # fields: state, ppid, pgrp, session, ...
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(pid)
    return tuple(sorted(members))


def process_environ(pid: int) -> dict[str, str]:
    """The initial environment of ``pid``; empty if it is gone or belongs to another user."""
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def process_exe_name(pid: int) -> str | None:
    """Basename of the executable of ``pid`` (from ``/proc/PID/exe``, else ``comm``)."""
    try:
        return Path(os.readlink(_PROC / str(pid) / "exe")).name
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def find_processes(exe_name: str, env_match: Mapping[str, str]) -> tuple[int, ...]:
    """Running PIDs named ``exe_name`` whose initial environment contains every ``env_match`` pair.

    Used to find stale application instances of one rollout: the rollout's private DISPLAY and
    HOME identify them without touching any other user's or rollout's processes.
    """
    found = []
    for pid in _all_pids():
        if pid == os.getpid() or process_exe_name(pid) != exe_name or not is_running(pid):
            continue
        env = process_environ(pid)
        if all(env.get(key) == value for key, value in env_match.items()):
            found.append(pid)
    return tuple(sorted(found))


def _wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def kill_process_group(
    pgid: int,
    *,
    leader: subprocess.Popen[Any] | None = None,
    term_timeout_s: float = 5.0,
    kill_timeout_s: float = 3.0,
) -> GroupKillOutcome:
    """SIGTERM the group, wait up to ``term_timeout_s``, then SIGKILL and wait ``kill_timeout_s``.

    ``leader`` (our own child, when we started the group) is reaped so that it does not linger
    as a zombie. Returns the PIDs still alive afterwards (empty on success); never raises for
    processes that are already gone. Total time is bounded by the two timeouts.
    """
    started = time.monotonic()

    def alive() -> bool:
        if leader is not None:
            leader.poll()
        return bool(group_members(pgid))

    if not alive():
        return GroupKillOutcome("none", time.monotonic() - started, ())
    sent: SignalName = "SIGTERM"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    if not _wait_until(lambda: not alive(), term_timeout_s):
        sent = "SIGKILL"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        _wait_until(lambda: not alive(), kill_timeout_s)
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=0.5)
    return GroupKillOutcome(sent, time.monotonic() - started, group_members(pgid))
