"""StopRequest.wait_async: pilots on any event loop learn of a stop without polling the flag."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from autocad_bench.interrupt import StopRequest, handle_stop_signals


def _waiting_loop(stop: StopRequest, woke: list[float], ready: threading.Barrier) -> threading.Thread:
    async def wait() -> None:
        ready.wait()
        await stop.wait_async()
        woke.append(time.monotonic())

    thread = threading.Thread(target=asyncio.run, args=(wait(),), daemon=True)
    thread.start()
    return thread


def test_a_request_from_another_thread_wakes_every_waiting_loop_at_once() -> None:
    stop = StopRequest()
    woke: list[float] = []
    ready = threading.Barrier(5)
    threads = [_waiting_loop(stop, woke, ready) for _ in range(4)]
    ready.wait()
    time.sleep(0.3)  # every loop is parked in wait_async (nothing wakes it but the request)
    assert woke == []
    requested = time.monotonic()
    assert stop.request(signal.SIGTERM) is True
    for thread in threads:
        thread.join(5)
    assert len(woke) == 4 and max(woke) - requested < 0.5


async def test_a_stop_already_requested_returns_at_once() -> None:
    stop = StopRequest()
    stop.request(signal.SIGINT)
    await asyncio.wait_for(stop.wait_async(), 0.5)


async def test_a_cancelled_wait_leaves_nothing_for_the_request_to_wake() -> None:
    stop = StopRequest()
    waits = [asyncio.ensure_future(stop.wait_async()) for _ in range(3)]
    await asyncio.sleep(0.01)
    for wait in waits:
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    late = asyncio.ensure_future(stop.wait_async())
    await asyncio.sleep(0.01)
    stop.request(signal.SIGTERM)
    await asyncio.wait_for(late, 0.5)
    assert all(wait.cancelled() for wait in waits)


async def test_a_second_request_does_not_disturb_a_loop_that_already_woke() -> None:
    stop = StopRequest()
    wait = asyncio.ensure_future(stop.wait_async())
    await asyncio.sleep(0.01)
    assert stop.request(signal.SIGINT) is True
    await asyncio.wait_for(wait, 0.5)
    assert stop.request(signal.SIGINT) is False and stop.immediate


def test_a_signal_delivered_to_the_main_thread_wakes_a_loop_on_a_worker_thread() -> None:
    """The shape of shared mode: the handler runs on the main thread, the pilots' loops elsewhere."""
    stop = StopRequest()
    woke: list[float] = []
    ready = threading.Barrier(2)
    firsts: list[bool] = []
    with handle_stop_signals(stop, on_first=lambda: firsts.append(True), on_second=lambda: None):
        thread = _waiting_loop(stop, woke, ready)
        ready.wait()
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)
        thread.join(5)
    assert firsts == [True] and len(woke) == 1 and stop.signal_name == "SIGTERM"


def test_a_request_after_a_waiting_loop_closed_does_not_raise() -> None:
    stop = StopRequest()

    async def abandon() -> None:
        # The loop ends (asyncio.run cancels the wait) while the wait is registered.
        pending = asyncio.ensure_future(stop.wait_async())
        await asyncio.sleep(0.01)
        assert not pending.done()

    asyncio.run(abandon())
    assert stop.request(signal.SIGTERM) is True
    assert stop.is_set()
