"""Native OpenAI sessions: the ``history_turns`` bound and the 413 rewrite.

Response bodies are built from the pinned SDK's types through the helpers of
:mod:`tests.providers.openai.test_native_session`; requests go through the SDK to the local
Responses wire fake.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.providers.models import ModelTurn, ProviderErrorKind, ProviderRequestError
from autocad_bench.retry import ModelCaller, RequestTooLarge
from autocad_bench.testing.wire import ResponsesWire
from autocad_bench_openai.native.session import NativeOpenAISession
from tests.providers.openai.test_native_session import (
    DesktopRollout,
    bodies,
    ga_call,
    open_native,
    reasoning,
    reply,
)


@pytest.fixture
def desk(tmp_path: Path) -> DesktopRollout:
    root = tmp_path / "rollout"
    root.mkdir()
    return DesktopRollout(root)


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server


def assert_well_formed(items: list[dict[str, Any]]) -> None:
    """Every reasoning item is directly followed by the call it preceded, every computer_call
    is answered by a later computer_call_output, and every output answers an earlier call."""
    calls: list[str] = []
    answered: list[str] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            assert items[index + 1].get("type") == "computer_call", "a reasoning item lost its call"
        elif kind == "computer_call":
            calls.append(item["call_id"])
        elif kind == "computer_call_output":
            assert item["call_id"] in calls, f"output {item['call_id']} answers no call in the request"
            assert item["output"]["type"] == "computer_screenshot"
            answered.append(item["call_id"])
    assert sorted(answered) == sorted(calls), "a computer_call without its output"


def images(items: list[dict[str, Any]]) -> int:
    count = 0
    for item in items:
        if item.get("type") == "computer_call_output":
            count += 1
        content = item.get("content")
        if isinstance(content, list):
            count += sum(1 for part in content if part.get("type") == "input_image")
    return count


async def moves(session: NativeOpenAISession, wire: ResponsesWire, desk: DesktopRollout, turns: int,
                start: int = 0, previous: ModelTurn | None = None) -> ModelTurn | None:
    for index in range(start, start + turns):
        wire.push(reply(reasoning(f"rs_{index}"), ga_call(f"call_{index}", {"type": "move", "x": index, "y": 7}),
                        response_id=f"resp_{index}"))
        previous = await session.next_turn(desk.observation(index, previous, feedback=f"ran {index}"))
        assert previous.malformed is None
    return previous


async def test_history_turns_drop_whole_steps(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, history_turns=2)
    try:
        previous = await moves(session, wire, desk, 8)
        saved = json.loads(json.dumps(session.checkpoint()))
    finally:
        await session.aclose()
    sent = [b["input"] for b in bodies(wire)]
    # Steps kept before each request: 0..4, cut to 2 when a commit passes 4, then 3, 4, cut again.
    calls = [[i["call_id"] for i in items if i.get("type") == "computer_call"] for items in sent]
    assert [len(c) for c in calls] == [0, 1, 2, 3, 4, 2, 3, 4]
    assert calls[5] == ["call_3", "call_4"]
    for items in sent:
        assert_well_formed(items)
        # reference + one screenshot per kept step + the current one
        assert images(items) == 2 + len([i for i in items if i.get("type") == "computer_call"])
    # The oldest kept step opens the conversation with its own screenshot and a note.
    opening = sent[5][0]["content"]
    assert [p["type"] for p in opening] == ["input_text", "input_text", "input_image", "input_text",
                                            "input_text", "input_image"]
    assert opening[3]["text"].startswith("(3 earlier turns are omitted")
    assert "ran 3" in opening[4]["text"]
    assert sent[5][1] == reasoning("rs_3").model_dump(mode="json")
    # Between two cuts each request's input is a prefix of the next one's.
    for before, after in ((sent[5], sent[6]), (sent[6], sent[7]), (sent[1], sent[2])):
        assert after[:len(before)] == before
    assert saved["omitted"] == 6 and len(saved["steps"]) == 2
    # Resume after a cut: the restored session sends the identical next request.
    following = desk.observation(8, previous, feedback="ran 8")
    restored = open_native(desk, wire, history_turns=2, resume_state=saved)
    try:
        for session_ in (session, restored):
            wire.push(reply(reasoning("rs_8"), ga_call("call_8", {"type": "screenshot"})))
            await session_.next_turn(following)
    finally:
        await session.aclose()
        await restored.aclose()
    last, resumed = wire.model_requests()[-2:]
    assert last.body == resumed.body
    assert session.checkpoint() == restored.checkpoint()


async def no_sleep(_: float) -> None:
    return None


def caller() -> ModelCaller:
    return ModelCaller(sleep=no_sleep, rng=random.Random(3), instrument=False)


async def test_413_drops_the_older_half_and_retries_smaller(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    try:
        previous = await moves(session, wire, desk, 5)
        wire.too_large_above = len(wire.model_requests()[-1].body) + 100
        wire.push(reply(reasoning("rs_5"), ga_call("call_5", {"type": "wait"}), response_id="resp_5"))
        result = await caller().request_turn(session, desk.observation(5, previous, feedback="ran 5"))
        wire.too_large_above = None
        saved = json.loads(json.dumps(session.checkpoint()))
        following = desk.observation(6, result.turn, feedback="ran 6")
        wire.push(reply(reasoning("rs_6"), ga_call("call_6", {"type": "wait"})))
        await session.next_turn(following)
    finally:
        await session.aclose()
    requests = wire.model_requests()
    rejected, retried = requests[5], requests[6]
    assert len(retried.body) < len(rejected.body)
    assert [(r.kind, r.shrunk) for r in result.retries] == [(ProviderErrorKind.REQUEST_TOO_LARGE, True)]
    assert result.counters.shrinks == 1 and result.turn.tool_use_id == "call_5"
    items = retried.json()["input"]
    assert_well_formed(items)
    # 5 steps: the older half of the 4 droppable ones went; the last (answered now) stayed.
    assert [i["call_id"] for i in items if i.get("type") == "computer_call"] == ["call_2", "call_3", "call_4"]
    assert items[0]["content"][3]["text"].startswith("(2 earlier turns are omitted")
    assert saved["omitted"] == 2
    # The shrunk state round-trips through the checkpoint.
    restored = open_native(desk, wire, resume_state=saved)
    wire.push(reply(reasoning("rs_6"), ga_call("call_6", {"type": "wait"})))
    try:
        await restored.next_turn(following)
    finally:
        await restored.aclose()
    again = wire.model_requests()
    assert again[-1].body == again[-2].body


async def test_shrink_stops_at_the_last_step(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    assert session.shrink() is False  # no request made yet
    try:
        previous = await moves(session, wire, desk, 3)
        wire.too_large_above = 1_000
        pending = desk.observation(3, previous, feedback="ran 3")
        sizes = []
        shrinks = []
        while True:
            with pytest.raises(ProviderRequestError) as refused:
                await session.next_turn(pending)
            assert refused.value.kind is ProviderErrorKind.REQUEST_TOO_LARGE
            sizes.append(len(wire.model_requests()[-1].body))
            assert_well_formed(wire.model_requests()[-1].json()["input"])
            before = session.checkpoint()
            shrunk = session.shrink()
            shrinks.append(shrunk)
            if not shrunk:
                assert session.checkpoint() == before
                break
    finally:
        await session.aclose()
    assert shrinks == [True, True, False]  # 3 steps: drop 1, then 1, then only the last is left
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    assert session.checkpoint()["omitted"] == 2


async def test_413_on_the_first_turn_cannot_shrink(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.too_large_above = 1_000
    try:
        with pytest.raises(RequestTooLarge, match="cannot shrink"):
            await caller().request_turn(session, desk.observation(0))
    finally:
        await session.aclose()
    assert len(wire.model_requests()) == 1


async def test_the_observed_pointer_changes_nothing(wire: ResponsesWire, desk: DesktopRollout) -> None:
    """Every OpenAI pointer action carries its coordinates: an observed pointer is not needed."""
    plain = open_native(desk, wire)
    observed = open_native(desk, wire)
    try:
        for _ in (plain, observed):
            wire.push(reply(ga_call("call_1", {"type": "click", "button": "left", "x": 5, "y": 6})))
        first = await plain.next_turn(desk.observation(0))
        second = await observed.next_turn(desk.observation(0).model_copy(update={"pointer": (900, 500)}))
    finally:
        await plain.aclose()
        await observed.aclose()
    assert first.action_input == second.action_input
    a, b = wire.model_requests()
    assert a.body == b.body
