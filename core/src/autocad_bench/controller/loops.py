"""A few event loops that the shared-mode pilots of a batch can share (opt-in).

In shared mode each rollout's lifecycle (``run_shared``) runs on a worker thread of its own,
with its own event loop, and by default its pilot runs on that loop too: up to one busy event
loop per rollout, each turn paying several loop iterations and a GIL hand-off between
hundreds of threads. With ``AUTOCAD_BENCH_PILOT_LOOPS=N`` the pilots run on :class:`SharedLoops`
instead: N event loops, each on its own thread, created when the batch starts and closed when
it ends. The backend's lifecycle thread then only waits for its pilot's result, so the backend
contract (``run_shared`` on a worker thread) is unchanged.

The trade, measured by ``benchmarks/shared_mode_scale.py --compare-loops`` (see
docs/performance.md): about 30 % less controller CPU per turn at 200 rollouts, but a pilot's
blocking file work (the fsynced checkpoint journal, the frame written to disk) now delays the
other pilots of its loop, so the added turn latency's tail grows. That is why it is not the
default.

What can fail: :meth:`SharedLoops.submit` after :meth:`SharedLoops.close` raises
``RuntimeError``; a pilot that is still running at close is cancelled (the pilot records
itself as interrupted, as on any cancellation); :func:`pilot_loop_count` raises
:class:`~autocad_bench.errors.ConfigError` for a bad value of the variable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from autocad_bench.errors import ConfigError, Problem

T = TypeVar("T")

PILOT_LOOPS_ENV = "AUTOCAD_BENCH_PILOT_LOOPS"
"""Number of shared pilot loops of a shared-mode batch; ``0`` (the default) runs each pilot
on its lifecycle thread's own loop."""
DEFAULT_LOOPS = 0
"""Loops per batch without :data:`PILOT_LOOPS_ENV`: none (see the module docstring)."""


class SharedLoops:
    """``count`` event loops on daemon threads; coroutines are spread over them in turn."""

    def __init__(self, count: int = 2, *, name: str = "pilot-loop") -> None:
        if count < 1:
            raise ValueError("SharedLoops needs at least one loop")
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._threads: list[threading.Thread] = []
        self._next = itertools.cycle(range(count))
        self._lock = threading.Lock()
        self._closed = False
        for index in range(count):
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(target=self._serve, args=(loop, ready), name=f"{name}-{index}", daemon=True)
            thread.start()
            ready.wait()
            self._loops.append(loop)
            self._threads.append(thread)

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the next loop; cancelling the future cancels it there."""
        with self._lock:
            if self._closed:
                coroutine.close()
                raise RuntimeError("the shared pilot loops are closed")
            loop = self._loops[next(self._next)]
            return asyncio.run_coroutine_threadsafe(coroutine, loop)

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` on a shared loop from any other loop (cancellation follows)."""
        return await asyncio.wrap_future(self.submit(coroutine))

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs, stop the loops and join their threads (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for loop in self._loops:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_cancel_all_then_stop, loop)
        for thread in self._threads:
            thread.join(timeout_s)

    def __enter__(self) -> SharedLoops:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pilot_loop_count(environ: Mapping[str, str]) -> int:
    """The number of shared pilot loops :data:`PILOT_LOOPS_ENV` asks for (0: none).

    Raises :class:`~autocad_bench.errors.ConfigError` naming the variable when its value is
    not a whole number from 0 to 64.
    """
    raw = environ.get(PILOT_LOOPS_ENV, "").strip()
    if not raw:
        return DEFAULT_LOOPS
    try:
        count = int(raw)
    except ValueError:
        count = -1
    if not 0 <= count <= 64:
        raise ConfigError([Problem(PILOT_LOOPS_ENV, f"{raw!r} is not a whole number from 0 to 64")])
    return count


def pilot_loops(environ: Mapping[str, str]) -> SharedLoops | None:
    """The shared loops of a batch as :data:`PILOT_LOOPS_ENV` asks (``None`` for ``0``)."""
    count = pilot_loop_count(environ)
    return SharedLoops(count) if count else None


def _cancel_all_then_stop(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if not tasks:
        loop.stop()
        return
    gathered = asyncio.gather(*tasks, return_exceptions=True)
    gathered.add_done_callback(lambda _: loop.stop())
