"""Fake brokers served from a background event loop, for synchronous tests and subprocesses.

:class:`~autocad_bench.testing.fake_broker.FakeBroker` is an asyncio server. A backend's
conformance tests are plain synchronous functions and the kit's child runs in another
process, so the brokers must keep answering while the test thread blocks: this module runs
them on a private loop in a daemon thread. ``with serve_fake_brokers(2) as brokers:`` gives
live brokers on ``127.0.0.1`` (``broker.url``, ``broker.token``) for the ``valid_spec``
fixture and stops them on exit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from autocad_bench.testing.fake_broker import FakeBroker

T = TypeVar("T")

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0


class BrokerThread:
    """Runs fake brokers on one private event loop in a daemon thread.

    :meth:`start` raises ``TimeoutError`` when a broker does not come up within
    :data:`START_TIMEOUT_S` (and whatever the broker's own start raised).
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake brokers", daemon=True)
        self.thread.start()

    def start(self, **kwargs: Any) -> FakeBroker:
        """A started :class:`FakeBroker` built with ``kwargs`` (token, display, app...)."""

        async def make() -> FakeBroker:
            broker = FakeBroker(**kwargs)
            await broker.start()
            return broker

        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(timeout=START_TIMEOUT_S)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the brokers' loop and return its result (at most :data:`CALL_TIMEOUT_S`)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=CALL_TIMEOUT_S)

    def close(self, *brokers: FakeBroker) -> None:
        """Stop ``brokers``, then the loop and its thread."""
        for broker in brokers:
            self.call(broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@contextmanager
def serve_fake_brokers(count: int, **kwargs: Any) -> Iterator[list[FakeBroker]]:
    """``count`` live fake brokers (each built with ``kwargs``), stopped when the block ends."""
    runner = BrokerThread()
    brokers: list[FakeBroker] = []
    try:
        brokers += [runner.start(**kwargs) for _ in range(count)]
        yield brokers
    finally:
        runner.close(*brokers)
