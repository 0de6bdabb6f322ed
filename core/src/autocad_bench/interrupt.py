"""How a controller stops when the operator asks it to (SIGINT, SIGTERM).

The first signal is a *graceful* stop: no queued rollout starts, every running pilot stops
at its next turn boundary (an action batch already sent to the desktop finishes; a model
call in flight gets a short grace to return so its spend is recorded), saves the drawing,
releases its desktop and writes ``result.json`` as failed with ``interrupted``. Sandboxes
are torn down by their lifecycles as after any rollout, the batch state records the
interruption, and the process exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM).

A second signal is an *immediate* stop: every subprocess-mode child's process group is
killed, the backend's ``reap_batch`` removes every desktop of the batch, the batch state is
written, and the process exits at once. Rollouts caught in flight are left ``running`` in
the state; ``autocad-bench-resume`` closes them as ``interrupted`` with the spend their
checkpoints recorded.

:class:`StopRequest` is the one object passed down to everything that must notice a stop:
the batch runner, the in-process pilots (shared mode) and the subprocess launcher, which
forwards SIGTERM to each child's process group. A pilot running as its own process
(subprocess mode) makes its own with :func:`pilot_stop_on_signals`: there every SIGINT or
SIGTERM asks for the graceful stop, and SIGKILL (from the controller's second signal or a
wrapper's bounded wait) is the hard one. Nothing here is created at import.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from types import FrameType

from autocad_bench.models import StrictModel

GRACEFUL_STOP_BOUND_S = 30.0
"""What the operator is promised: a graceful stop exits within this many seconds."""


class Interruption(StrictModel):
    """How a batch was stopped by a signal (recorded in batch-state.json)."""

    signal: str
    exit_code: int
    at: datetime
    immediate: bool = False


class StopRequest:
    """A thread-safe, process-wide stop flag with the signal that raised it.

    ``is_set()`` is true from the first signal on (the graceful stop); ``immediate`` from
    the second. Subprocess children register their process groups so that a stop reaches
    them (``SIGTERM`` on the first signal, ``SIGKILL`` on the second).
    """

    def __init__(self) -> None:
        self._graceful = threading.Event()
        self._immediate = threading.Event()
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        # Event loops waiting in :meth:`wait_async`. Added and removed with single set
        # operations (atomic under the GIL), never under ``_lock``: ``request`` runs in a
        # signal handler, which may interrupt the main thread while it holds that lock.
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self.signum: int | None = None

    # --- state ----------------------------------------------------------------------------

    def is_set(self) -> bool:
        return self._graceful.is_set()

    @property
    def immediate(self) -> bool:
        return self._immediate.is_set()

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def wait(self, timeout: float | None = None) -> bool:
        return self._graceful.wait(timeout)

    async def wait_async(self) -> None:
        """Return once a stop is requested (at once if one was), on any event loop.

        The request wakes the waiting loop itself (``call_soon_threadsafe``), so a pilot
        waiting on a model call notices a stop without polling the flag: a thousand pilots
        polling ten times a second cost more CPU than their turns. Cancelling the wait
        unregisters it.
        """
        if self.is_set():
            return
        loop = asyncio.get_running_loop()
        entry = (loop, loop.create_future())
        self._waiters.add(entry)
        try:
            if not self.is_set():  # a request between the first check and the registration
                await entry[1]
        finally:
            self._waiters.discard(entry)

    def request(self, signum: int) -> bool:
        """Record a stop; True when this was the first (graceful) one."""
        with self._lock:
            first = not self._graceful.is_set()
            if first:
                self.signum = signum
                self._graceful.set()
            else:
                self._immediate.set()
            groups = tuple(self._groups)
        if first:
            for loop, future in tuple(self._waiters):
                with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                    loop.call_soon_threadsafe(_wake, future)
        # Subprocess children run in their own sessions: the terminal's SIGINT never reaches
        # them, so the stop is forwarded (SIGTERM asks for the graceful path, SIGKILL ends it).
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM if first else signal.SIGKILL)
        return first

    # --- children -------------------------------------------------------------------------

    def register_group(self, pgid: int) -> bool:
        """Track a child's process group; False (and it is signalled at once) after a stop."""
        with self._lock:
            self._groups.add(pgid)
            stopped, immediate = self._graceful.is_set(), self._immediate.is_set()
        if stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL if immediate else signal.SIGTERM)
        return not stopped

    def unregister_group(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@contextlib.contextmanager
def handle_stop_signals(stop: StopRequest, *, on_first: Callable[[], None],
                        on_second: Callable[[], None]) -> Iterator[StopRequest]:
    """Route SIGINT and SIGTERM to ``stop`` while the body runs (main thread only).

    ``on_first`` and ``on_second`` run in the signal handler after the flag is set; the
    second is expected not to return (it tears everything down and exits).
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.request(signum):
            on_first()
        else:
            on_second()

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def pilot_stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """In a pilot process: every SIGINT/SIGTERM sets ``stop`` (idempotent, never raises).

    The signal usually reaches the pilot twice (its process group, then its wrapper's
    bounded stop); both mean "stop at the next turn boundary".
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            stop.request(signum)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def say(message: str) -> None:
    """One line to the operator's terminal (stderr), never raising from a signal handler."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


__all__ = ["GRACEFUL_STOP_BOUND_S", "Interruption", "StopRequest", "handle_stop_signals", "pilot_stop_on_signals",
           "say"]
