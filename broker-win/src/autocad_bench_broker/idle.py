"""Whether the application has finished reacting to input: its processes idle on Linux.

A ``wait`` action says "give the application time"; a fixed sleep gives an idle machine and a
loaded one different amounts of it, so the same actions could open a dialog in time on one and
type into nothing on the other. After the requested seconds the broker therefore also waits
(bounded) until the application is idle: every process sleeping with its CPU time unchanged
for a short window. Read from ``/proc``; where there is none (Windows) nothing is added.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from autocad_bench.broker.protocol import WAIT_IDLE_LIMIT_S

IDLE_WINDOW_S = 0.15
"""How long a process must sleep without using CPU to count as idle."""
IDLE_LIMIT_S = WAIT_IDLE_LIMIT_S
"""The longest :func:`wait_until_idle` waits by default."""


def cpu_state(pid: int) -> tuple[str, int] | None:
    """(state letter, utime + stime ticks) of ``pid`` from ``/proc``; ``None`` when it is gone
    (or there is no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0], int(fields[11]) + int(fields[12])


def idle_supported() -> bool:
    """Whether process states can be read here (Linux ``/proc``)."""
    return Path("/proc/self/stat").exists()


def wait_until_idle(
    pids: Sequence[int],
    *,
    window_s: float = IDLE_WINDOW_S,
    limit_s: float = IDLE_LIMIT_S,
    poll_s: float = 0.05,
    stop: threading.Event | None = None,
) -> bool:
    """Wait until every live process of ``pids`` is sleeping with unchanged CPU time for
    ``window_s``; ``False`` when ``limit_s`` passed first or ``stop`` was set. Gone processes
    count as idle."""
    deadline = time.monotonic() + limit_s
    last = {pid: cpu_state(pid) for pid in pids}
    quiet_since = time.monotonic()
    while True:
        if stop is not None:
            if stop.wait(poll_s):
                return False
        else:
            time.sleep(poll_s)
        now = {pid: cpu_state(pid) for pid in pids}
        busy = any(state is not None and (state[0] == "R" or state != last[pid]) for pid, state in now.items())
        last = now
        moment = time.monotonic()
        if busy:
            quiet_since = moment
        elif moment - quiet_since >= window_s:
            return True
        if moment >= deadline:
            return False
