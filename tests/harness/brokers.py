"""Fake brokers served from a background event loop, reachable from threads and subprocesses."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from autocad_bench.testing.fake_broker import FakeBroker


class BrokerThread:
    """Runs fake brokers on one private event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def start(self, **kwargs: Any) -> FakeBroker:
        async def make() -> FakeBroker:
            broker = FakeBroker(**kwargs)
            await broker.start()
            return broker

        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(timeout=30)

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self, *brokers: FakeBroker) -> None:
        for broker in brokers:
            self.call(broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@contextmanager
def fake_brokers(count: int, **kwargs: Any) -> Iterator[list[FakeBroker]]:
    runner = BrokerThread()
    brokers = [runner.start(**kwargs) for _ in range(count)]
    try:
        yield brokers
    finally:
        runner.close(*brokers)
