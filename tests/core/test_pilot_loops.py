"""The shared pilot loops of a shared-mode batch (``autocad_bench.controller.loops``)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from autocad_bench.controller.loops import DEFAULT_LOOPS, PILOT_LOOPS_ENV, SharedLoops, pilot_loops
from autocad_bench.errors import ConfigError


async def _thread_name() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def _sleeper(started: threading.Event, cancelled: threading.Event) -> Callable[[], Coroutine[Any, Any, None]]:
    """A pilot stand-in that says when it runs and when it is cancelled."""

    async def pilot() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return pilot


def test_coroutines_run_on_the_shared_loops_in_turn() -> None:
    with SharedLoops(3, name="t-loop") as loops:
        names = [loops.submit(_thread_name()).result(timeout=5) for _ in range(6)]
    assert names == ["t-loop-0", "t-loop-1", "t-loop-2"] * 2


def test_a_result_and_an_error_reach_the_awaiting_loop() -> None:
    async def fail() -> int:
        raise KeyError("broken pilot")

    async def main(loops: SharedLoops) -> tuple[str, BaseException]:
        name = await loops.run(_thread_name())
        with pytest.raises(KeyError, match="broken pilot") as caught:
            await loops.run(fail())
        return name, caught.value

    with SharedLoops(1, name="t-loop") as loops:
        name, error = asyncio.run(main(loops))
    assert name == "t-loop-0" and threading.current_thread().name != name
    assert isinstance(error, KeyError)


def test_cancelling_the_waiter_cancels_the_pilot_on_its_shared_loop() -> None:
    started, cancelled = threading.Event(), threading.Event()
    pilot = _sleeper(started, cancelled)

    async def main(loops: SharedLoops) -> None:
        waiter = asyncio.ensure_future(loops.run(pilot()))
        while not started.is_set():
            await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    with SharedLoops(1) as loops:
        asyncio.run(main(loops))
        assert cancelled.wait(5)


def test_close_cancels_what_still_runs_joins_the_threads_and_refuses_more() -> None:
    started, cancelled = threading.Event(), threading.Event()
    pilot = _sleeper(started, cancelled)

    loops = SharedLoops(2, name="t-close")
    future = loops.submit(pilot())
    assert started.wait(5)
    loops.close()
    assert cancelled.is_set() and future.cancelled()
    assert not [t for t in threading.enumerate() if t.name.startswith("t-close")]
    coroutine = _thread_name()
    with pytest.raises(RuntimeError, match="closed"):
        loops.submit(coroutine)
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED  # so never "never awaited"
    loops.close()  # idempotent


def test_the_number_of_loops_comes_from_the_environment() -> None:
    assert DEFAULT_LOOPS == 0 and pilot_loops({}) is None  # opt-in: see the module docstring
    assert pilot_loops({PILOT_LOOPS_ENV: "0"}) is None
    one = pilot_loops({PILOT_LOOPS_ENV: " 1 "})
    assert one is not None
    names = {one.submit(_thread_name()).result(timeout=5) for _ in range(4)}
    one.close()
    assert len(names) == 1
    for bad in ("two", "-1", "65", "1.5"):
        with pytest.raises(ConfigError, match=f"^{PILOT_LOOPS_ENV}: '{bad}' is not a whole number from 0 to 64$"):
            pilot_loops({PILOT_LOOPS_ENV: bad})
    with pytest.raises(ValueError, match="at least one loop"):
        SharedLoops(0)
