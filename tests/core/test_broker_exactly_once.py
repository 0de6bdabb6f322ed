"""Exactly-once desktop input under randomly lost requests and responses.

Hypothesis generates a rollout (action batches) and a fault schedule that drops requests
before they are handled, drops or truncates responses after they were handled, or corrupts
response bodies, at every endpoint and in arrival order. A harness-like driver runs the
whole broker session with :class:`BrokerClient`; whatever the faults, the fake broker's
input log must hold every action of every completed batch exactly once and in order, and
a batch whose operation was abandoned must be either wholly injected or not at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autocad_bench.actions import ACTION_ADAPTER, Action, action_request_id
from autocad_bench.broker import BrokerClient, BrokerTransportExhausted
from autocad_bench.broker.protocol import ErrorCode, ErrorResponse, FrameInfo, ReleaseResponse
from autocad_bench.broker.service import CachedAnswer, Session
from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind

TINY = DisplaySize(width=8, height=6)
LOSSY = [
    FaultKind.DROP_REQUEST,
    FaultKind.DROP_RESPONSE,
    FaultKind.TRUNCATE_RESPONSE,
    FaultKind.CORRUPT_RESPONSE,
]


@dataclass
class Env:
    runner: asyncio.Runner
    fake: FakeBroker
    client: BrokerClient
    ids: Iterator[int]


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    runner = asyncio.Runner()
    fake = FakeBroker(display=TINY)
    runner.run(fake.start())
    client = BrokerClient(
        fake.url,
        fake.token,
        operation_deadline_s=20.0,
        wait_initial_s=0.0,
        wait_max_s=0.0,
        wait_jitter_s=0.0,
    )
    try:
        yield Env(runner, fake, client, itertools.count())
    finally:
        runner.run(fake.stop())
        runner.close()


# The session state the replay caches live in (fast, deterministic; they run first) ---------


def test_a_cached_answer_says_whether_it_repeats_an_error() -> None:
    error = CachedAnswer("fp", ErrorResponse(code=ErrorCode.INTERNAL_ERROR, message="no frame after the input"))
    answer = CachedAnswer("fp", ReleaseResponse(session_id="s1", replayed=False))
    assert error.is_error is True
    assert answer.is_error is False


def test_a_cached_answer_cannot_be_changed_once_stored() -> None:
    answer = CachedAnswer("fp", ReleaseResponse(session_id="s1", replayed=False))
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.fingerprint = "another body"  # type: ignore[misc]
    # Slotted: an answer carries exactly its two fields, no per-instance dict.
    assert not hasattr(answer, "__dict__")
    with pytest.raises((AttributeError, TypeError)):
        object.__setattr__(answer, "extra", 1)
    assert (answer.fingerprint, answer.response) == ("fp", ReleaseResponse(session_id="s1", replayed=False))


def test_a_new_session_starts_at_index_zero_without_frames() -> None:
    session = Session("s1", "task", "attempt", desktop=None)
    assert session.state == "leased" and session.next_index == 0
    assert session.last_frame_sequence is None
    assert session.identity == ("task", "attempt")
    lease = session.lease_response(replayed=True)
    assert (lease.session_id, lease.task_id, lease.attempt_id, lease.replayed) == ("s1", "task", "attempt", True)


def test_the_last_frame_sequence_is_the_index_of_the_newest_frame() -> None:
    session = Session("s1", "task", "attempt", desktop=None)
    for count in range(1, 5):
        session.frames.append(FrameInfo(sequence=count - 1, sha256="0" * 64, width=8, height=6, size=1))
        assert session.last_frame_sequence == count - 1


def test_two_leases_are_two_sessions_even_with_equal_fields() -> None:
    lock = asyncio.Lock()
    first = Session("s1", "task", "attempt", desktop=None, lock=lock)
    second = Session("s1", "task", "attempt", desktop=None, lock=lock)
    assert first != second and first == first
    assert len({first, second}) == 2  # hashable by identity: usable as a key


def test_status_follows_the_session_frame_by_frame(env: Env) -> None:
    async def play() -> list[tuple[int, int | None]]:
        client = env.client
        lease = await client.lease("task-z", f"attempt-{next(env.ids)}")
        seen = [await client.status()]
        reset = await client.reset(lease.session_id)
        seen.append(await client.status())
        expected = reset.next_index
        for turn in range(3):
            batch = (ACTION_ADAPTER.validate_python({"type": "move", "x": turn, "y": 1}),)
            request_id = action_request_id(lease.attempt_id, f"toolu_{turn}", 0)
            result = await client.actions(lease.session_id, request_id, expected, batch)
            expected = result.next_index
            seen.append(await client.status())
        await client.release(lease.session_id)
        return [(s.next_index, s.last_frame_sequence) for s in seen]

    env.fake.clear()
    assert env.runner.run(play()) == [(0, None), (0, 0), (1, 1), (2, 2), (3, 3)]


actions = st.one_of(
    st.builds(lambda x, y: {"type": "move", "x": x, "y": y}, st.integers(0, 7), st.integers(0, 5)),
    st.builds(
        lambda x, y, n: {"type": "click", "x": x, "y": y, "button": "left", "count": n},
        st.integers(0, 7),
        st.integers(0, 5),
        st.integers(1, 3),
    ),
    st.builds(lambda t: {"type": "type", "text": t}, st.text("LINE0123,@ ", min_size=1, max_size=6)),
    st.sampled_from([{"type": "key", "keys": ["enter"]}, {"type": "key", "keys": ["ctrl", "z"]}]),
)
batches = st.lists(st.lists(actions, min_size=1, max_size=3), min_size=1, max_size=4)
lossy = st.sampled_from(LOSSY)
# A schedule is consumed in arrival order, one entry per request, across every endpoint.
# Its density varies per example; an optional burst of eight consecutive losses exhausts
# whichever operation it lands on.
faults = st.builds(
    lambda density, prefix, burst, suffix: (
        [kind if density >= keep else FaultKind.PASS for kind, keep in prefix] + burst + suffix
    ),
    st.sampled_from([0.15, 0.35, 0.6]),
    st.lists(st.tuples(lossy, st.floats(0, 1)), max_size=40),
    st.one_of(st.just([]), st.lists(lossy, min_size=8, max_size=8)),
    st.lists(lossy, max_size=3),
)


def parse(batch: list[dict[str, Any]]) -> tuple[Action, ...]:
    return tuple(ACTION_ADAPTER.validate_python(item) for item in batch)


@dataclass
class Outcome:
    completed: int = 0
    """Batches whose ``POST /actions`` operation returned."""
    abandoned: bool = False
    """Whether an ``actions`` operation itself was exhausted (its batch is in doubt)."""
    finished: bool = False


async def drive(env: Env, attempt_id: str, plan: list[tuple[Action, ...]]) -> Outcome:
    """Run one rollout like the harness does, stopping at the first exhausted operation."""
    client = env.client
    outcome = Outcome()
    try:
        lease = await client.lease("task-x", attempt_id)
        session = lease.session_id
        reset = await client.reset(session)
        await client.frame(reset.frame.sequence, expected_sha256=reset.frame.sha256)
        expected = reset.next_index
        for turn, batch in enumerate(plan):
            request_id = action_request_id(attempt_id, f"toolu_{turn}", 0)
            outcome.abandoned = True
            result = await client.actions(session, request_id, expected, batch)
            outcome.abandoned = False
            assert result.first_index == expected
            assert result.next_index == expected + len(batch)
            assert all(receipt.ok for receipt in result.receipts)
            expected = result.next_index
            outcome.completed += 1
            await client.frame(result.frame.sequence, expected_sha256=result.frame.sha256)
        saved = await client.checkpoint(session, f"checkpoint-{expected}")
        assert saved.next_index == expected
        await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
        await client.events()
        await client.frame_events()
        status = await client.status()
        assert status.next_index == expected
        await client.release(session)
    except BrokerTransportExhausted:
        return outcome
    outcome.finished = True
    return outcome


def check_input_log(env: Env, attempt_id: str, plan: list[tuple[Action, ...]], outcome: Outcome) -> None:
    log = env.fake.injected
    assert [item.index for item in log] == list(range(len(log))), "indices are gapless and in order"
    done = [action for batch in plan[: outcome.completed] for action in batch]
    injected = [item.action for item in log]
    if outcome.abandoned:
        # The abandoned batch ran wholly (one of its attempts got through) or not at all.
        assert injected in (done, done + list(plan[outcome.completed]))
    else:
        assert injected == done
    expected_ids = [action_request_id(attempt_id, f"toolu_{turn}", 0) for turn, batch in enumerate(plan) for _ in batch]
    assert [item.request_id for item in log] == expected_ids[: len(log)]


@settings(
    max_examples=1400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=batches, schedule=faults)
def test_every_action_exactly_once_under_lost_messages(
    env: Env, plan: list[list[dict[str, Any]]], schedule: list[FaultKind]
) -> None:
    env.fake.clear()
    env.fake.add_faults(*[Fault(kind) for kind in schedule])
    attempt_id = f"attempt-{next(env.ids)}"
    parsed = [parse(batch) for batch in plan]
    outcome = env.runner.run(drive(env, attempt_id, parsed))
    event("finished" if outcome.finished else "abandoned actions" if outcome.abandoned else "exhausted elsewhere")
    event(f"faults applied: {min(sum(r.fault not in (None, FaultKind.PASS) for r in env.fake.requests), 8)}+")
    check_input_log(env, attempt_id, parsed, outcome)
    if outcome.finished:
        assert outcome.completed == len(plan)
        assert env.fake.injected[-1].index == sum(map(len, plan)) - 1


async def duplicate_storm(env: Env, attempt_id: str, batch: tuple[Action, ...], copies: int) -> list[Any]:
    client = env.client
    lease = await client.lease("task-y", attempt_id)
    await client.reset(lease.session_id)
    request_id = action_request_id(attempt_id, "toolu_0", 0)
    calls = [client.actions(lease.session_id, request_id, 0, batch) for _ in range(copies)]
    return await asyncio.gather(*calls, return_exceptions=True)


@settings(
    max_examples=700,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    batch=st.lists(actions, min_size=1, max_size=3),
    copies=st.integers(2, 4),
    schedule=st.lists(st.sampled_from([FaultKind.PASS, *LOSSY]), max_size=12),
)
def test_concurrent_duplicates_execute_once(
    env: Env, batch: list[dict[str, Any]], copies: int, schedule: list[FaultKind]
) -> None:
    env.fake.clear()
    attempt_id = f"attempt-{next(env.ids)}"
    parsed = parse(batch)
    # Lease and reset first without faults, then let the duplicates race through the faults.
    env.fake.add_faults(*[Fault(FaultKind.PASS)] * 2, *[Fault(kind) for kind in schedule])
    results = env.runner.run(duplicate_storm(env, attempt_id, parsed, copies))
    answered = [r for r in results if not isinstance(r, BaseException)]
    event(f"{len(answered)} of {copies} duplicates answered")
    for failure in results:
        if isinstance(failure, BaseException):
            assert isinstance(failure, BrokerTransportExhausted), failure
    log = env.fake.injected
    assert [item.action for item in log] in ([], list(parsed))
    if answered:
        assert [item.action for item in log] == list(parsed)
        assert len({r.model_copy(update={"replayed": False}) for r in answered}) == 1
        assert sum(not r.replayed for r in answered) <= 1
