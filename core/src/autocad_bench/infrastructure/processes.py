"""Whether a process recorded by pid (a lease holder, a watcher) is still there."""

from __future__ import annotations

import os


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0; one owned by another user counts, a zombie too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but is not reaped yet (``/proc``; ``False`` where it cannot tell)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a killed process whose parent died too may
    linger as one until it is reaped)."""
    return pid_exists(pid) and not is_zombie(pid)
