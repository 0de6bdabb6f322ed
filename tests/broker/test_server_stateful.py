"""Exactly-once input through the real broker server while responses get lost.

A Hypothesis state machine plays a rollout against :class:`BrokerServer` (real HTTP, the
recording input driver, in-memory desktop fakes) through the core
:class:`~autocad_bench.broker.BrokerClient`. Before each operation it queues faults in a
middleware placed in front of the server: a request is dropped before it is handled, or —
the dangerous case — handled and then its response is lost, so the client retries the same
bytes on a new connection. Whatever the schedule, the driver's input log must hold every
action of every batch exactly once and in order, and the broker's index must agree.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from autocad_bench.actions import ACTION_ADAPTER, Action, action_request_id
from autocad_bench.broker import BrokerClient, BrokerConflict
from autocad_bench_broker.drivers.input import RecordedCall

from .server_fakes import SIZE, Rig, running_rig

DROP_REQUEST = "drop_request"
DROP_RESPONSE = "drop_response"
PASS = "pass"


class FaultQueue:
    """Applies one queued fault per incoming request, in arrival order."""

    def __init__(self) -> None:
        self.queue: list[str] = []
        self.applied: dict[str, int] = {DROP_REQUEST: 0, DROP_RESPONSE: 0}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        kind = self.queue.pop(0) if self.queue else PASS
        if kind == DROP_REQUEST:
            self.applied[kind] += 1
            return _abort(request)
        response = await handler(request)
        if kind == DROP_RESPONSE:
            # The handler ran (the input happened); the client never hears about it.
            self.applied[kind] += 1
            return _abort(request)
        return response


def _abort(request: web.Request) -> web.Response:
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=204)


@dataclass
class Env:
    runner: asyncio.Runner
    rig: Rig
    faults: FaultQueue
    client: BrokerClient
    attempts: Iterator[int]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    runner = asyncio.Runner()
    faults = FaultQueue()
    context: AbstractAsyncContextManager[Rig] = running_rig(
        tmp_path_factory.mktemp("stateful"), middlewares=(faults.middleware,)
    )
    rig = runner.run(context.__aenter__())
    client = rig.client(operation_deadline_s=10.0, connect_timeout_s=2.0)
    try:
        yield Env(runner, rig, faults, client, itertools.count())
    finally:
        runner.run(context.__aexit__(None, None, None))
        runner.close()


X = st.integers(0, SIZE[0] - 1)
Y = st.integers(0, SIZE[1] - 1)
actions = st.one_of(
    st.builds(lambda x, y: {"type": "move", "x": x, "y": y}, X, Y),
    st.builds(
        lambda x, y, b, n: {"type": "click", "x": x, "y": y, "button": b, "count": n},
        X,
        Y,
        st.sampled_from(["left", "right", "middle"]),
        st.integers(1, 3),
    ),
    st.builds(lambda t: {"type": "type", "text": t}, st.text("LINE0123,@ <>", min_size=1, max_size=6)),
    st.sampled_from([{"type": "key", "keys": ["enter"]}, {"type": "key", "keys": ["ctrl", "z"]}]),
    st.builds(lambda x, y, dy: {"type": "scroll", "x": x, "y": y, "dx": 0, "dy": dy}, X, Y, st.sampled_from([-2, 1])),
    st.builds(
        lambda a, b: {"type": "drag", "path": [list(a), list(b)], "button": "left"}, st.tuples(X, Y), st.tuples(X, Y)
    ),
)
batches = st.lists(actions, min_size=1, max_size=4)
# At most three faults per operation: with eight attempts, every operation still completes,
# so the expected input log is exact (the abandoned-operation case is the client's test).
fault_schedules = st.lists(st.sampled_from([DROP_REQUEST, DROP_RESPONSE, DROP_RESPONSE, PASS]), max_size=3)


def expected_call(action: Action) -> RecordedCall | None:
    """The driver call one action must produce (``wait``/``done`` inject nothing)."""
    wire: dict[str, Any] = action.model_dump(mode="json")
    match wire["type"]:
        case "move":
            return RecordedCall("move", (wire["x"], wire["y"]))
        case "click":
            return RecordedCall("click", (wire["x"], wire["y"], wire["button"], wire["count"]))
        case "drag":
            return RecordedCall("drag", (tuple(tuple(point) for point in wire["path"]), wire["button"]))
        case "scroll":
            return RecordedCall("scroll", (wire["x"], wire["y"], wire["dx"], wire["dy"]))
        case "type":
            return RecordedCall("type_text", (wire["text"],))
        case "key":
            return RecordedCall("hotkey", (tuple(wire["keys"]),))
    return None


class BrokerRollout(RuleBasedStateMachine):
    """One rollout (lease, reset, batches, replays, checkpoints) under lost messages."""

    def __init__(self, env: Env) -> None:
        super().__init__()
        self.env = env
        self.rig = env.rig
        self.client = env.client
        self.attempt = f"attempt-{next(env.attempts)}"
        self.session = ""
        self.start = len(self.rig.driver.calls)
        self.expected: list[RecordedCall] = []
        self.next_index = 0
        self.turn = 0
        self.last: tuple[str, int, tuple[Action, ...]] | None = None
        self.frame: tuple[int, str] | None = None

    def run(self, coroutine: Any, faults: Sequence[str] = ()) -> Any:
        self.env.faults.queue[:] = list(faults)
        try:
            return self.env.runner.run(coroutine)
        finally:
            self.env.faults.queue.clear()

    def new_request_id(self) -> str:
        self.turn += 1
        return action_request_id(self.attempt, f"toolu_{self.turn}", 0)

    @initialize(faults=fault_schedules)
    def lease_and_reset(self, faults: list[str]) -> None:
        lease = self.run(self.client.lease("task-stateful", self.attempt), faults)
        self.session = lease.session_id
        reset = self.run(self.client.reset(self.session), faults)
        assert reset.frame.sequence == 0 and reset.next_index == 0
        self.frame = (0, reset.frame.sha256)
        again = self.run(self.client.reset(self.session))
        assert again.replayed and again.frame == reset.frame

    @rule(batch=batches, faults=fault_schedules)
    def send_batch(self, batch: list[dict[str, Any]], faults: list[str]) -> None:
        parsed = tuple(ACTION_ADAPTER.validate_python(item) for item in batch)
        request_id = self.new_request_id()
        result = self.run(self.client.actions(self.session, request_id, self.next_index, parsed), faults)
        assert result.first_index == self.next_index
        assert result.next_index == self.next_index + len(parsed)
        assert all(receipt.ok for receipt in result.receipts)
        self.expected.extend(call for call in map(expected_call, parsed) if call is not None)
        self.last = (request_id, self.next_index, parsed)
        self.next_index = result.next_index
        self.frame = (result.frame.sequence, result.frame.sha256)

    @precondition(lambda self: self.last is not None)
    @rule(faults=fault_schedules)
    def replay_last_batch(self, faults: list[str]) -> None:
        assert self.last is not None
        request_id, index, parsed = self.last
        result = self.run(self.client.actions(self.session, request_id, index, parsed), faults)
        assert result.replayed and result.first_index == index

    @precondition(lambda self: self.next_index > 0)
    @rule(batch=batches, faults=fault_schedules)
    def stale_index_conflicts(self, batch: list[dict[str, Any]], faults: list[str]) -> None:
        parsed = tuple(ACTION_ADAPTER.validate_python(item) for item in batch)
        try:
            self.run(self.client.actions(self.session, self.new_request_id(), self.next_index - 1, parsed), faults)
        except BrokerConflict as conflict:
            assert conflict.code == "index_conflict" and conflict.next_index == self.next_index
        else:
            raise AssertionError("a stale expected_index was executed")

    @rule(batch=batches, copies=st.integers(2, 4), faults=st.lists(st.sampled_from([DROP_RESPONSE, PASS]), max_size=3))
    def concurrent_duplicates(self, batch: list[dict[str, Any]], copies: int, faults: list[str]) -> None:
        parsed = tuple(ACTION_ADAPTER.validate_python(item) for item in batch)
        request_id = self.new_request_id()

        async def storm() -> list[Any]:
            calls = [self.client.actions(self.session, request_id, self.next_index, parsed) for _ in range(copies)]
            return await asyncio.gather(*calls)

        answers = self.run(storm(), faults)
        assert len({answer.model_copy(update={"replayed": False}) for answer in answers}) == 1
        self.expected.extend(call for call in map(expected_call, parsed) if call is not None)
        self.last = (request_id, self.next_index, parsed)
        self.next_index = answers[0].next_index
        self.frame = (answers[0].frame.sequence, answers[0].frame.sha256)

    @rule(faults=fault_schedules)
    def fetch_frame(self, faults: list[str]) -> None:
        assert self.frame is not None
        sequence, sha256 = self.frame
        png = self.run(self.client.frame(sequence, expected_sha256=sha256), faults)
        assert png.startswith(b"\x89PNG")

    @rule(faults=fault_schedules, replay=st.booleans())
    def checkpoint(self, faults: list[str], replay: bool) -> None:
        request_id = f"checkpoint-{self.next_index}"
        saved = self.run(self.client.checkpoint(self.session, request_id), faults)
        assert saved.next_index == self.next_index
        if replay:
            assert self.run(self.client.checkpoint(self.session, request_id)).replayed
        drawing = self.run(self.client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256), faults)
        assert drawing.count(b"\n") - 1 == len(self.rig.driver.calls)

    @invariant()
    def every_action_exactly_once_in_order(self) -> None:
        assert self.rig.driver.calls[self.start :] == self.expected

    def teardown(self) -> None:
        if self.session:
            status = self.run(self.client.status())
            assert status.next_index == self.next_index
            self.run(self.client.release(self.session))


def test_every_action_exactly_once_while_responses_are_lost(env: Env) -> None:
    run_state_machine_as_test(
        lambda: BrokerRollout(env),
        settings=settings(
            max_examples=60,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    # The schedules really did lose requests and responses.
    assert env.faults.applied[DROP_REQUEST] > 0 and env.faults.applied[DROP_RESPONSE] > 0
