"""Failures through the core retry accounting: 429, 5xx/529 bursts, resets, 408/409, malformed calls.

Each scenario drives the real session with the core :class:`ModelCaller` (sleep injected)
against the wire fake, and checks the core counters and the request bodies.
"""

from __future__ import annotations

import json
import random

import pytest

from autocad_bench.providers.models import ModelTurn, ProviderErrorKind
from autocad_bench.retry import (
    MalformedResponsesExhausted,
    ModelCaller,
    TransientRetriesExhausted,
)
from autocad_bench.testing.wire import Reply
from autocad_bench_anthropic.session import AnthropicSession
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import (
    FABLE_MODEL,
    MOVE,
    SERVER_MODEL,
    Rollout,
    message_kinds,
    observation,
    open_session,
)


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def caller(sleeps: Sleeps) -> ModelCaller:
    return ModelCaller(sleep=sleeps, rng=random.Random(1), instrument=False)


async def warm(session: AnthropicSession, wire: MessagesWire, rollout: Rollout) -> ModelTurn:
    """Two committed turns, so retries resend a non-trivial history."""
    wire.push_tool_call(MOVE)
    first = await session.next_turn(observation(rollout, 0))
    wire.push_tool_call(MOVE)
    return await session.next_turn(observation(rollout, 1, first))


@pytest.mark.parametrize("model", [SERVER_MODEL, FABLE_MODEL])
async def test_429_with_and_without_retry_after(wire: MessagesWire, rollout: Rollout, model: str) -> None:
    session = open_session(rollout, model, wire)
    sleeps = Sleeps()
    try:
        previous = await warm(session, wire, rollout)
        wire.push_error(429, "rate limited", headers={"retry-after": "17"})
        wire.push_error(429, "rate limited")
        wire.push_error(429, "rate limited", headers={"retry-after-ms": "2500"})
        wire.push_tool_call(MOVE)
        model_caller = caller(sleeps)
        result = await model_caller.request_turn(session, observation(rollout, 2, previous))
    finally:
        await session.aclose()
    assert result.turn.action_input == MOVE
    kinds = [(r.kind, r.status, r.retry_after_s) for r in result.retries]
    assert kinds == [(ProviderErrorKind.RATE_LIMITED, 429, 17.0), (ProviderErrorKind.RATE_LIMITED, 429, None),
                     (ProviderErrorKind.RATE_LIMITED, 429, 2.5)]
    assert sleeps.calls[0] >= 17.0  # a longer retry-after is honoured
    assert sleeps.calls[1] <= 2.0  # otherwise exponential backoff (streak 2, jittered)
    counters = result.counters
    assert (counters.rate_limited.consecutive, counters.rate_limited.lifetime) == (0, 3)
    assert counters.transient.lifetime == 0 and counters.responses == 1
    # The failed requests and the successful one carry identical bodies: nothing was committed.
    sent = [r.body for r in wire.model_requests()[2:]]
    assert len(sent) == 4 and len(set(sent)) == 1


async def test_5xx_and_529_bursts_retry_as_server_errors(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    sleeps = Sleeps()
    try:
        previous = await warm(session, wire, rollout)
        for status in (500, 502, 503, 504, 529, 529, 529, 529, 529, 529, 529, 529):
            wire.push_error(status, "overloaded" if status == 529 else "server error")
        wire.push_tool_call(MOVE)
        result = await caller(sleeps).request_turn(session, observation(rollout, 2, previous))
    finally:
        await session.aclose()
    assert {r.kind for r in result.retries} == {ProviderErrorKind.SERVER_ERROR}
    assert [r.status for r in result.retries][-1] == 529
    assert result.counters.server_error.lifetime == 12 and result.counters.server_error.consecutive == 0
    assert result.counters.transient.lifetime == 0  # 12 > 10: server errors never exhaust the transient budget
    assert max(sleeps.calls) <= 60.0
    assert len({r.body for r in wire.model_requests()[2:]}) == 1


async def test_resets_408_and_409_are_transient(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    sleeps = Sleeps()
    try:
        previous = await warm(session, wire, rollout)
        wire.push_reset()
        wire.push_error(408, "request timeout")
        wire.push_error(409, "conflict")
        wire.push_reset()
        wire.push_tool_call(MOVE)
        result = await caller(sleeps).request_turn(session, observation(rollout, 2, previous))
    finally:
        await session.aclose()
    assert [r.kind for r in result.retries] == [ProviderErrorKind.TRANSIENT] * 4
    assert [r.status for r in result.retries] == [None, 408, 409, None]
    assert result.counters.transient.lifetime == 4 and result.counters.transient.consecutive == 0


async def test_ten_consecutive_transient_failures_exhaust(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        for _ in range(10):
            wire.push_reset()
        with pytest.raises(TransientRetriesExhausted) as caught:
            await caller(Sleeps()).request_turn(session, observation(rollout, 0))
    finally:
        await session.aclose()
    assert caught.value.counters.transient.consecutive == 10
    assert len(wire.model_requests()) == 10


async def test_read_timeout_is_transient(rollout: Rollout) -> None:
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire, timeout_s=0.3)
        try:
            wire.push(Reply(status=200, body=b"{}", delay_s=2.0))
            wire.push_tool_call(MOVE)
            result = await caller(Sleeps()).request_turn(session, observation(rollout, 0))
        finally:
            await session.aclose()
    assert [r.kind for r in result.retries] == [ProviderErrorKind.TRANSIENT]
    assert result.turn.action_input == MOVE


def _wrong_tool(wire: MessagesWire) -> Reply:
    block = wire.tool_use_block(MOVE, call_id=wire.next_id("toolu"), name="bash")
    return Reply.json(wire.message_body([block]))


def _string_input(wire: MessagesWire) -> Reply:
    block = wire.tool_use_block('{"actions": [', call_id=wire.next_id("toolu"))
    return Reply.json(wire.message_body([block]))


def _two_calls(wire: MessagesWire) -> Reply:
    blocks = [wire.tool_use_block(MOVE, call_id=wire.next_id("toolu")) for _ in range(2)]
    return Reply.json(wire.message_body(blocks))


@pytest.mark.parametrize("model", [SERVER_MODEL, FABLE_MODEL])
async def test_malformed_and_missing_calls_are_repaired(wire: MessagesWire, rollout: Rollout, model: str) -> None:
    session = open_session(rollout, model, wire)
    try:
        previous = await warm(session, wire, rollout)
        wire.push_text("I should look closer.")
        wire.push(_wrong_tool(wire), _string_input(wire), _two_calls(wire))
        wire.push_malformed_arguments('{"actions": [{"type": "mo')
        wire.push_tool_call(MOVE, call_id="toolu_good")
        result = await caller(Sleeps()).request_turn(
            session, observation(rollout, 2, previous, feedback="Executed actions 1..1. Actions left: 4998."))
        wire.push_tool_call(MOVE)
        await session.next_turn(observation(rollout, 8, result.turn))
    finally:
        await session.aclose()
    problems = [r.malformed for r in result.responses[:-1]]
    assert [p is not None for p in problems] == [True] * 5
    assert "did not call computer_action" in str(problems[0])
    assert "'bash'" in str(problems[1])
    assert "not a JSON object" in str(problems[2])
    assert "2 tool calls" in str(problems[3])
    assert "max_tokens" in str(problems[4])
    assert result.turn.tool_use_id == "toolu_good" and result.turn.action_input == MOVE
    counters = result.counters
    assert (counters.malformed.consecutive, counters.malformed.lifetime, counters.responses) == (0, 5, 6)
    # Usage of every malformed response is billed.
    assert result.usage.output_tokens == 6 * 50
    *requests, following = [r.json() for r in wire.model_requests()[2:]]
    assert requests[0]["max_tokens"] == 4096
    for body in requests[1:]:
        # A larger output allowance and an explicit format repair; the tool result is unchanged.
        assert body["max_tokens"] == 8192
        last = body["messages"][-1]["content"]
        assert last[0]["type"] == "tool_result" and last[0]["content"][0]["text"].startswith("Executed actions 1..1.")
        assert last[-1]["type"] == "text" and last[-1]["text"].startswith("Format repair: No action was executed")
    # Malformed replies never enter the history; the repaired result message is kept as sent.
    assert message_kinds(following) == ["user:text,image,text,image", "assistant:tool_use", "user:tool_result",
                                        "assistant:tool_use", "user:tool_result,text", "assistant:tool_use",
                                        "user:tool_result"]
    assert following["messages"][4] == requests[-1]["messages"][4]
    assert following["messages"][5]["content"][0]["id"] == "toolu_good"
    assert following["max_tokens"] == 4096


async def test_first_turn_repair_and_history_after_it(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        wire.push_text("Hello")
        wire.push_tool_call(MOVE, call_id="toolu_1")
        result = await caller(Sleeps()).request_turn(session, observation(rollout, 0))
        wire.push_tool_call(MOVE, call_id="toolu_2")
        await session.next_turn(observation(rollout, 2, result.turn))
    finally:
        await session.aclose()
    first, repaired, after = (r.json() for r in wire.model_requests())
    assert message_kinds(first) == ["user:text,image,text,image"]
    assert message_kinds(repaired) == ["user:text,image,text,image,text"]
    assert message_kinds(after) == ["user:text,image,text,image,text", "assistant:tool_use", "user:tool_result"]
    assert after["messages"][0] == repaired["messages"][0]


async def test_ten_malformed_responses_exhaust(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        for _ in range(10):
            wire.push_text("no tool")
        with pytest.raises(MalformedResponsesExhausted) as caught:
            await caller(Sleeps()).request_turn(session, observation(rollout, 0))
    finally:
        await session.aclose()
    assert caught.value.counters.malformed.consecutive == 10
    assert caught.value.usage.output_tokens == 500


async def test_malformed_streak_and_transient_streak_are_independent(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        wire.push_reset()
        wire.push_text("thinking")
        wire.push_error(529, "overloaded")
        wire.push_error(429, "slow", headers={"retry-after": "1"})
        wire.push_text("still thinking")
        wire.push_tool_call(MOVE)
        result = await caller(Sleeps()).request_turn(session, observation(rollout, 0))
    finally:
        await session.aclose()
    c = result.counters
    lifetimes = (c.transient.lifetime, c.server_error.lifetime, c.rate_limited.lifetime, c.malformed.lifetime)
    assert lifetimes == (1, 1, 1, 2)
    assert c.responses == 3 and c.malformed.consecutive == 0


async def test_unauthorized_is_fatal_and_hides_the_key(wire: MessagesWire, rollout: Rollout) -> None:
    from autocad_bench.retry import FatalProviderError

    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        wire.push_error(401, "invalid x-api-key")
        with pytest.raises(FatalProviderError) as caught:
            await caller(Sleeps()).request_turn(session, observation(rollout, 0))
    finally:
        await session.aclose()
    assert "401" in str(caught.value)
    assert "sk-ant" not in json.dumps(str(caught.value.__cause__))


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"content": 5}', b"[]"])
async def test_unparseable_200_is_a_malformed_turn(wire: MessagesWire, rollout: Rollout, body: bytes) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        wire.push(Reply(status=200, body=body))
        wire.push_tool_call(MOVE)
        result = await caller(Sleeps()).request_turn(session, observation(rollout, 0))
    finally:
        await session.aclose()
    bad, good = result.responses
    assert bad.action_input is None and bad.malformed and bad.tool_use_id.startswith("unparsed-")
    assert good.action_input == MOVE
    assert result.counters.malformed.lifetime == 1 and result.counters.fatal.lifetime == 0
