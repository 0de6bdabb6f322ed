"""HTTP 413: one retry, only after a byte-reducing rewrite; never an identical resend."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from autocad_bench.providers.models import ModelTurn, ProviderErrorKind
from autocad_bench.retry import ModelCaller, RequestTooLarge
from autocad_bench_anthropic.session import AnthropicSession
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import (
    FABLE_MODEL,
    MOVE,
    SERVER_MODEL,
    Rollout,
    assert_pairs_complete,
    message_kinds,
    observation,
    open_session,
)


async def no_sleep(_: float) -> None:
    return None


def caller() -> ModelCaller:
    return ModelCaller(sleep=no_sleep, rng=random.Random(3), instrument=False)


async def warm(session: AnthropicSession, wire: MessagesWire, rollout: Rollout, turns: int) -> ModelTurn | None:
    previous = None
    for index in range(turns):
        wire.push_tool_call(MOVE, call_id=f"toolu_{index}")
        previous = await session.next_turn(observation(rollout, index, previous))
    return previous


@pytest.mark.parametrize("model", [SERVER_MODEL, FABLE_MODEL])
async def test_413_retries_once_after_a_smaller_rewrite(tmp_path: Path, model: str) -> None:
    rollout = Rollout(tmp_path, frame_bytes=50_000)
    with MessagesWire() as wire:
        session = open_session(rollout, model, wire)
        try:
            previous = await warm(session, wire, rollout, 5)
            wire.too_large_above = len(wire.model_requests()[-1].body) + 10_000
            wire.push_tool_call(MOVE, call_id="toolu_after")
            result = await caller().request_turn(session, observation(rollout, 5, previous))
            wire.too_large_above = None
            wire.push_tool_call(MOVE)
            await session.next_turn(observation(rollout, 6, result.turn))
        finally:
            await session.aclose()
        requests = wire.model_requests()
    rejected, retried, following = requests[5], requests[6], requests[7]
    assert len(rejected.body) > len(retried.body), "the retry must be smaller than the rejected request"
    assert rejected.body != retried.body
    assert [(r.kind, r.shrunk, r.delay_s) for r in result.retries] == [(ProviderErrorKind.REQUEST_TOO_LARGE, True, 0)]
    assert result.counters.shrinks == 1 and result.counters.request_too_large.lifetime == 1
    assert result.counters.request_too_large.consecutive == 0
    body = retried.json()
    assert_pairs_complete(body)
    if model == FABLE_MODEL:
        # Fable: the deterministic client checkpoint, still without beta header or context edit.
        assert message_kinds(body) == ["user:text,image,text,text,image"]
        assert "anthropic-beta" not in retried.headers and "context_management" not in body
    else:
        # Others: historical screenshots removed; tool calls, results, reference and newest desktop kept.
        assert len(body["messages"]) == len(rejected.json()["messages"])
        text = json.dumps(body)
        for index in range(5):
            assert f"Earlier screenshot removed to keep the request small: frames/{index:06d}.png" in text
        newest = body["messages"][-1]["content"][0]["content"][-1]
        assert newest["type"] == "image"
        assert body["messages"][0]["content"][1]["type"] == "image"  # the fixed reference
        assert retried.headers["anthropic-beta"] == "compact-2026-01-12"
        # The rewrite is permanent: the next request builds on the smaller history.
        assert following.json()["messages"][:-2] == body["messages"]


async def test_second_413_after_a_shrink_fails_without_identical_resend(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, frame_bytes=50_000)
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire)
        try:
            previous = await warm(session, wire, rollout, 4)
            wire.too_large_above = 1_000
            with pytest.raises(RequestTooLarge):
                await caller().request_turn(session, observation(rollout, 4, previous))
        finally:
            await session.aclose()
        requests = wire.model_requests()[4:]
    assert len(requests) == 2
    assert len(requests[0].body) > len(requests[1].body)


@pytest.mark.parametrize("model", [SERVER_MODEL, FABLE_MODEL])
async def test_413_without_a_possible_rewrite_is_not_resent(tmp_path: Path, model: str) -> None:
    rollout = Rollout(tmp_path, frame_bytes=50_000)
    with MessagesWire(too_large_above=10_000) as wire:
        session = open_session(rollout, model, wire)
        try:
            with pytest.raises(RequestTooLarge) as caught:
                await caller().request_turn(session, observation(rollout, 0))
        finally:
            await session.aclose()
        assert len(wire.model_requests()) == 1, "an identical oversized payload must never be resent"
    assert caught.value.counters.shrinks == 0


async def test_413_after_server_screenshots_are_gone_drops_oldest_pairs(tmp_path: Path) -> None:
    from autocad_bench.providers.models import ProviderRequestError

    rollout = Rollout(tmp_path)
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire)
        try:
            previous = await warm(session, wire, rollout, 9)
            pending = observation(rollout, 9, previous)
            wire.push_error(413, "too large")
            with pytest.raises(ProviderRequestError):
                await session.next_turn(pending)
            assert session.shrink() is True  # first: the historical screenshots go
            wire.push_error(413, "too large")
            with pytest.raises(ProviderRequestError):
                await session.next_turn(pending)
            assert session.shrink() is True  # then: the oldest complete pairs go
            wire.push_tool_call(MOVE)
            await session.next_turn(pending)
            counters = session.checkpoint()["state"]["counters"]
        finally:
            await session.aclose()
        requests = wire.model_requests()
    original, stripped, dropped = (r.json() for r in requests[9:12])
    assert len(requests[9].body) > len(requests[10].body) > len(requests[11].body)
    assert len(original["messages"]) == len(stripped["messages"]) == 19
    assert "Earlier screenshot removed" in json.dumps(stripped)
    assert len(dropped["messages"]) == 11  # 4 of the 8 complete pairs dropped
    assert_pairs_complete(dropped)
    assert dropped["messages"][0] == stripped["messages"][0]
    assert dropped["messages"][1]["content"][0]["id"] == "toolu_4"
    assert counters["pairs_dropped"] == 4 and counters["screenshots_removed"] == 9


async def test_413_on_a_guard_stripped_request_still_shrinks(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, frame_bytes=40_000)
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire, request_guard_bytes=300_000)
        try:
            previous = await warm(session, wire, rollout, 8)
            wire.push_error(413, "too large")
            wire.push_tool_call(MOVE)
            result = await caller().request_turn(session, observation(rollout, 8, previous))
        finally:
            await session.aclose()
        requests = wire.model_requests()
    rejected, retried = requests[8], requests[9]
    assert "Earlier screenshot removed" in rejected.body.decode(), "the guard had already stripped screenshots"
    assert len(retried.body) < len(rejected.body)
    body = retried.json()
    assert_pairs_complete(body)
    assert json.dumps(body).count('"type": "image"') == 2  # the reference and the newest desktop
    assert result.counters.shrinks == 1


async def test_guard_drops_pairs_but_keeps_the_newest_desktop(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, frame_bytes=35_000)
    guard = 64 * 1024
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire, request_guard_bytes=guard)
        try:
            await warm(session, wire, rollout, 60)
            counters = session.checkpoint()["state"]["counters"]
        finally:
            await session.aclose()
        requests = wire.model_requests()
    assert counters["pairs_dropped"] > 0
    for index, request in enumerate(requests):
        body = request.json()
        assert len(request.body) <= guard
        assert_pairs_complete(body)
        assert body["messages"][0]["content"][0]["text"].startswith("Task:")
        last = body["messages"][-1]["content"]
        newest = last[0]["content"][-1] if index else last[-1]
        assert newest["type"] == "image"
