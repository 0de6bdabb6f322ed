"""Blocking pilot work off a shared loop (``autocad_bench.harness.offload``) and its use by
shared pilot loops."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from autocad_bench.controller.loops import SharedLoops
from autocad_bench.harness.offload import off_loop


def test_without_an_executor_the_work_runs_inline_on_the_loop_thread() -> None:
    async def main() -> str:
        return await off_loop(None, lambda: threading.current_thread().name)

    assert asyncio.run(main()) == threading.current_thread().name


def test_the_loop_serves_others_while_the_work_blocks() -> None:
    release = threading.Event()
    ticks: list[float] = []

    async def ticker() -> None:
        while not release.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    def blocking_write() -> str:
        # Holds its thread until the loop has ticked: would deadlock if run on the loop.
        assert release.wait(10), "the loop never ran while the write blocked"
        return threading.current_thread().name

    async def main(executor: concurrent.futures.Executor) -> str:
        tick = asyncio.ensure_future(ticker())
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, release.set)
        name = await off_loop(executor, blocking_write)
        await tick
        return name

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="io") as executor:
        name = asyncio.run(main(executor))
    assert name.startswith("io")
    assert len(ticks) >= 5


def test_arguments_results_and_errors_pass_through() -> None:
    def add(a: int, /, b: int) -> int:
        if a < 0:
            raise ValueError("negative")
        return a + b

    async def main(executor: concurrent.futures.Executor) -> int:
        with pytest.raises(ValueError, match="negative"):
            await off_loop(executor, add, -1, b=2)
        return await off_loop(executor, add, 1, b=2)

    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        assert asyncio.run(main(executor)) == 3


def test_a_cancelled_pilot_waits_for_the_write_it_started() -> None:
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    def checkpoint_write() -> None:
        started.set()
        release.wait(10)
        events.append("write finished")

    async def pilot(executor: concurrent.futures.Executor) -> None:
        try:
            await off_loop(executor, checkpoint_write)
        except asyncio.CancelledError:
            events.append("cancellation delivered")
            raise

    async def main(executor: concurrent.futures.Executor) -> None:
        task = asyncio.ensure_future(pilot(executor))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done(), "the cancellation was delivered while the write still ran"
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        asyncio.run(main(executor))
    assert events == ["write finished", "cancellation delivered"]


def test_a_cancelled_pilot_on_a_timeout_sees_a_timeout_after_its_write() -> None:
    def slow_write() -> str:
        time.sleep(0.2)
        return "written"

    async def main(executor: concurrent.futures.Executor) -> float:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await off_loop(executor, slow_write)
        return time.monotonic() - start

    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        assert asyncio.run(main(executor)) >= 0.2


def test_shared_loops_hand_their_executor_to_pilots_and_shut_it_down_last() -> None:
    async def on_the_executor(loops: SharedLoops) -> str:
        return await off_loop(loops.executor, lambda: threading.current_thread().name)

    loops = SharedLoops(1, name="s-loop")
    try:
        name = loops.submit(on_the_executor(loops)).result(timeout=5)
    finally:
        loops.close()
    assert name.startswith("s-loop-io")
    with pytest.raises(RuntimeError):
        loops.executor.submit(lambda: None)
