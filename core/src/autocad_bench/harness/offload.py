"""Blocking file work of a pilot, run off its event loop when that loop is shared.

A pilot on its own event loop (the default) may block it: nobody else is waiting there. A
pilot on one of a batch's shared loops (:mod:`autocad_bench.controller.loops`) must not: an
fsync of its checkpoint journal (milliseconds on a virtual disk) or a 1920x1080 frame
written to disk would hold up every other pilot of that loop, hundreds of them at scale.
:func:`off_loop` runs such work on a thread pool when it is given one and inline when not.

The work is never abandoned half-way: if the awaiting task is cancelled while the work runs,
the cancellation is delivered only once the work has returned. The pilot's cancellation
handling (recording the rollout as interrupted, compacting its checkpoint) then never runs
concurrently with a checkpoint write it started, and whatever that write made durable is
also in the pilot's memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def off_loop(executor: concurrent.futures.Executor | None, fn: Callable[..., T], /,
                   *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``: on ``executor`` (awaited without blocking the loop) or, with
    ``None``, right here on the loop's thread.

    Raises what ``fn`` raises; ``asyncio.CancelledError`` if the awaiting task was cancelled,
    but only after ``fn`` has returned (its result or error is then dropped).
    """
    if executor is None:
        return fn(*args, **kwargs)
    future = asyncio.get_running_loop().run_in_executor(executor, functools.partial(fn, *args, **kwargs))
    cancelled = False
    while not future.done():
        try:
            # asyncio.wait never cancels what it waits for: the work runs to its end.
            await asyncio.wait([future])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not future.cancelled():
            future.exception()  # retrieved, so asyncio does not log it as never retrieved
        raise asyncio.CancelledError
    return future.result()
