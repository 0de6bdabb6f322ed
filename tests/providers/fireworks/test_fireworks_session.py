"""Fireworks through the real OpenAI SDK against a local Chat Completions server: exact bodies,
append-only history, reasoning echo, affinity, compaction crossings, retry classes, telemetry."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_fireworks.options import PINNED_MODEL
from autocad_bench_fireworks.provider import FireworksProvider

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, computer_action_schema
from autocad_bench.models import ArtifactRef
from autocad_bench.providers.chat.session import TELEMETRY_FILE, ChatCompletionsSession
from autocad_bench.providers.models import Credentials, ModelSpec, ModelTurn, ProviderErrorKind
from autocad_bench.retry import (
    MalformedResponsesExhausted,
    ModelCaller,
    RequestTooLarge,
    TransientRetriesExhausted,
)
from tests.providers.fireworks.helpers import (
    MOVE,
    assert_append_only,
    noise_png,
    observation,
    reference,
    scan_for,
    session_request,
    small_frames,
    write_image,
)
from tests.providers.fireworks.wire_chat import ChatCompletionsWire

SECRET = "fw-test-key-6f1d2c9a8b7e55"
MiB = 1024 * 1024
MOVE_ARGUMENTS = json.dumps(MOVE, separators=(",", ":"))
KIMI_CALL_ID = "functions.computer_action:0"  # Kimi reuses this id on every turn
FIREWORKS_HEADERS = {
    "fireworks-prompt-tokens": "1500",
    "fireworks-cached-prompt-tokens": "1000",
    "fireworks-server-time-to-first-token": "0.211",
    "x-ratelimit-remaining-requests": "599",
    "x-ratelimit-limit-requests": "600",
    "set-cookie": "session=must-not-be-recorded",
}


@pytest.fixture
def wire() -> Iterator[ChatCompletionsWire]:
    with ChatCompletionsWire(catalog=[PINNED_MODEL], reply_headers=FIREWORKS_HEADERS) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "rollout"
    path.mkdir()
    return path


def spec(wire: ChatCompletionsWire, **options: Any) -> ModelSpec:
    return ModelSpec(provider="fireworks", model=PINNED_MODEL,
                     options={"base_url": wire.url + "/inference/v1", "timeout_s": 20, **options})


def open_session(model: ModelSpec, root: Path, resume_state: Any = None) -> ChatCompletionsSession:
    session = FireworksProvider().open_session(session_request(model, root, reference(root), resume_state),
                                               Credentials({"FIREWORKS_API_KEY": SECRET}))
    assert isinstance(session, ChatCompletionsSession)
    return session


async def drive(session: ChatCompletionsSession, wire: ChatCompletionsWire, frames: list[ArtifactRef],
                turns: int, start: int = 0, previous: ModelTurn | None = None) -> list[ModelTurn]:
    out: list[ModelTurn] = []
    for i in range(start, start + turns):
        wire.push(wire.tool_call_reply(MOVE, call_id=KIMI_CALL_ID, reasoning=f"thinking {i}"))
        previous = await session.next_turn(observation(frames[i % len(frames)], i, previous))
        assert previous.action_input == MOVE
        out.append(previous)
    return out


def bodies(wire: ChatCompletionsWire) -> list[dict[str, Any]]:
    return [r.json() for r in wire.model_requests()]


def telemetry(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / TELEMETRY_FILE).read_text().splitlines()]


def b64(root: Path, ref: ArtifactRef) -> str:
    return base64.b64encode((root / ref.path).read_bytes()).decode()


def test_first_request_is_the_pinned_profile(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 2)

    async def scenario() -> ChatCompletionsSession:
        session = open_session(spec(wire), root)
        await drive(session, wire, frames, 1)
        await session.aclose()
        return session

    session = asyncio.run(scenario())
    (request,) = wire.model_requests()
    body = request.json()
    key = session.session_key
    assert request.path == "/inference/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["x-session-affinity"] == key == request.headers["x-multi-turn-session-id"]
    assert body["prompt_cache_key"] == key and key.startswith("acb-") and len(key) == 36
    assert body["model"] == "accounts/fireworks/routers/kimi-k2p6-fast"
    assert "service_tier" not in body
    assert body["max_tokens"] == 2048
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "computer_action", "description": COMPUTER_ACTION_DESCRIPTION,
        "parameters": computer_action_schema(), "strict": True}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "computer_action"}}
    (message,) = body["messages"]
    assert message["role"] == "user"
    kinds = [part["type"] for part in message["content"]]
    assert kinds == ["text", "text", "image_url", "text", "image_url"]
    assert "Draw a 100 mm line." in message["content"][0]["text"]
    ref = message["content"][2]["image_url"]["url"]
    assert ref == "data:image/png;base64," + b64(root, reference(root))
    assert message["content"][4]["image_url"]["url"] == "data:image/png;base64," + b64(root, frames[0])
    assert "Actions left in this rollout: 5000." in message["content"][3]["text"]
    assert session.last_request is not None and session.last_request.size == len(request.body)


def test_history_is_append_only_and_echoes_reasoning(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 8)

    turns: list[ModelTurn] = []

    async def run() -> ChatCompletionsSession:
        session = open_session(spec(wire), root)
        previous: ModelTurn | None = None
        for i in range(8):
            (previous,) = await drive(session, wire, frames, 1, start=i, previous=previous)
            turns.append(previous)
            assert session.last_request is not None
            assert session.last_request.size == len(wire.model_requests()[-1].body), "size accounting is exact"
        await session.aclose()
        return session

    session = asyncio.run(run())
    requests = wire.model_requests()
    assert [len(r.json()["messages"]) for r in requests] == [1, 4, 7, 10, 13, 16, 19, 22]
    assert_append_only([r.body for r in requests])
    assert len({r.headers["x-session-affinity"] for r in requests}) == 1
    assert {r.json()["prompt_cache_key"] for r in requests} == {session.session_key}
    assert len({t.tool_use_id for t in turns}) == 8, "tool_use_id is unique even though Kimi reuses call ids"
    for k, body in enumerate(bodies(wire)[1:], start=1):
        assistant, tool, user = body["messages"][-3:]
        assert assistant == {
            "role": "assistant", "content": None, "reasoning_content": f"thinking {k - 1}",
            "tool_calls": [{"id": KIMI_CALL_ID, "type": "function",
                            "function": {"name": "computer_action", "arguments": MOVE_ARGUMENTS}}],
        }
        assert tool == {"role": "tool", "tool_call_id": KIMI_CALL_ID, "content": f"Executed 1 action; turn {k}."}
        assert user["role"] == "user"
        assert user["content"][1]["image_url"]["url"] == "data:image/png;base64," + b64(root, frames[k])


def test_compaction_at_24_messages_keeps_a_bounded_outcome_summary(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 8)

    async def scenario() -> None:
        session = open_session(spec(wire), root)
        await drive(session, wire, frames, 40)
        await session.aclose()

    asyncio.run(scenario())
    requests = wire.model_requests()
    counts = [len(r.json()["messages"]) for r in requests]
    assert counts[:17] == [1, 4, 7, 10, 13, 16, 19, 22, 1, 4, 7, 10, 13, 16, 19, 22, 1]
    assert max(counts) <= 24
    assert_append_only([r.body for r in requests[:8]])
    assert_append_only([r.body for r in requests[8:16]])
    (checkpoint,) = requests[8].json()["messages"]
    parts = checkpoint["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url", "text", "text", "image_url"]
    assert parts[2]["image_url"]["url"] == "data:image/png;base64," + b64(root, reference(root))
    assert parts[5]["image_url"]["url"] == "data:image/png;base64," + b64(root, frames[8 % 8])
    summary = parts[3]["text"]
    assert "compacted after 8 model responses" in summary
    assert f"- turn 7: computer_action {MOVE_ARGUMENTS} -> Executed 1 action; turn 8." in summary
    late = requests[32].json()["messages"][0]["content"][3]["text"]
    assert late.count("\n- turn ") == 16, "the summary keeps only the 16 most recent outcomes"
    records = telemetry(root)
    assert [r["compacted"] for r in records[:9]] == [False] * 8 + [True]
    assert records[8]["compaction_reason"] == "25 messages > 24"


def test_compaction_before_8_mib_serialized(wire: ChatCompletionsWire, root: Path) -> None:
    frames = [write_image(root, f"frames/{i:06d}.png", noise_png(1_200_000, i)) for i in range(6)]

    async def scenario() -> None:
        session = open_session(spec(wire), root)
        await drive(session, wire, frames, 12)
        await session.aclose()

    asyncio.run(scenario())
    sizes = [len(r.body) for r in wire.model_requests()]
    records = telemetry(root)
    assert max(sizes) <= 8 * MiB
    assert [r["request_bytes"] for r in records] == sizes
    crossings = [i for i, r in enumerate(records) if r["compacted"]]
    assert crossings and all("request bytes > 8388608" in records[i]["compaction_reason"] for i in crossings)
    first = crossings[0]
    assert len(wire.model_requests()[first].json()["messages"]) == 1
    frame_b64 = len(b64(root, frames[0]))
    assert sizes[first - 1] + frame_b64 > 8 * MiB - 4096, "compaction happened only when the next turn would not fit"


def test_image_count_and_base64_budget_force_compaction(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 40)

    async def many_images() -> None:
        session = open_session(spec(wire, max_messages=400), root)
        await drive(session, wire, frames, 31)
        await session.aclose()

    asyncio.run(many_images())
    records = telemetry(root)
    assert max(r["images"] for r in records) <= 30
    assert records[29]["compaction_reason"] == "31 images > 30"

    wire.clear()
    big_root = root.parent / "big"
    big_root.mkdir()
    big = [write_image(big_root, f"frames/{i:06d}.png", noise_png(2_400_000, i)) for i in range(5)]

    async def big_images() -> None:
        session = open_session(spec(wire, max_request_bytes=64 * MiB), big_root)
        await drive(session, wire, big, 5)
        await session.aclose()

    asyncio.run(big_images())
    big_records = telemetry(big_root)
    assert max(r["image_base64_bytes"] for r in big_records) <= 10_000_000
    assert any("base64 image bytes > 10000000" in (r["compaction_reason"] or "") for r in big_records)


def _caller(sleeps: list[float]) -> ModelCaller:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return ModelCaller(sleep=sleep, rng=random.Random(0), instrument=False)


def test_425_and_5xx_bursts_are_retried_with_the_same_body(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 4)
    sleeps: list[float] = []

    async def scenario() -> Any:
        session = open_session(spec(wire), root)
        (first,) = await drive(session, wire, frames, 1)
        for status in (425, 425, 500, 502, 503, 503, 504, 500, 500, 500, 500, 500):
            wire.push_error(status, "checkpoint swap in progress" if status == 425 else "overloaded")
        wire.push_tool_call(MOVE)
        result = await _caller(sleeps).request_turn(session, observation(frames[1], 1, first))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    retried = wire.model_requests()[1:]
    assert len(retried) == 13 and len({r.body for r in retried}) == 1
    assert [e.kind for e in result.retries] == [ProviderErrorKind.SERVER_ERROR] * 12
    assert [e.status for e in result.retries][:2] == [425, 425]
    assert result.counters.server_error.lifetime == 12 and result.counters.server_error.consecutive == 0
    assert result.counters.transient.lifetime == 0 and max(sleeps) <= 60


def test_429_with_and_without_retry_after(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 2)
    sleeps: list[float] = []

    async def scenario() -> Any:
        session = open_session(spec(wire), root)
        wire.push_error(429, "slow down", headers={"retry-after": "42", "x-ratelimit-remaining-requests": "0"})
        wire.push_error(429, "slow down")
        wire.push_tool_call(MOVE)
        result = await _caller(sleeps).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    first, second = result.retries
    assert (first.kind, first.retry_after_s, first.delay_s) == (ProviderErrorKind.RATE_LIMITED, 42.0, 42.0)
    assert second.retry_after_s is None and 0 < second.delay_s <= 2.0
    assert result.counters.rate_limited.lifetime == 2
    records = telemetry(root)
    assert records[0]["error"] == "rate_limited" and records[0]["headers"]["x-ratelimit-remaining-requests"] == "0"


def test_transient_failures_have_a_budget_of_ten(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 2)
    sleeps: list[float] = []

    async def recovers() -> Any:
        session = open_session(spec(wire), root)
        for _ in range(3):
            wire.push_error(408, "timeout")
            wire.push_error(409, "conflict")
            wire.push_reset()
        wire.push_tool_call(MOVE)
        result = await _caller(sleeps).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()
        return result

    result = asyncio.run(recovers())
    assert result.counters.transient.lifetime == 9 and result.counters.transient.consecutive == 0
    assert len({r.body for r in wire.model_requests()}) == 1

    wire.clear()

    async def exhausts() -> None:
        session = open_session(spec(wire), root)
        for _ in range(10):
            wire.push_reset()
        with pytest.raises(TransientRetriesExhausted):
            await _caller(sleeps).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()

    asyncio.run(exhausts())
    assert len(wire.model_requests()) == 10


def test_malformed_and_missing_calls_are_fed_back_and_counted(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 2)

    async def recovers() -> Any:
        session = open_session(spec(wire), root)
        wire.push_text("Let me look first.")
        wire.push_malformed_arguments('{"actions": [{"type": "mo')
        wire.push(wire.tool_call_reply({"actions": "not-a-list"}, call_id="c3"))
        wire.push(wire.tool_call_reply(MOVE, call_id="c4"))
        result = await _caller([]).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()
        return result

    result = asyncio.run(recovers())
    assert result.counters.malformed.lifetime == 2, "a wrong but well-formed object is for core validation"
    assert result.turn.action_input == {"actions": "not-a-list"}
    requests = bodies(wire)
    second = requests[1]["messages"]
    assert second[1] == {"role": "assistant", "content": "Let me look first."}
    assert second[2]["role"] == "user" and "did not call computer_action" in second[2]["content"][0]["text"]
    assert len(second[2]["content"]) == 1, "the unchanged desktop is not sent again"
    third = requests[2]["messages"]
    assert third[3]["tool_calls"][0]["function"]["arguments"] == '{"actions": [{"type": "mo'
    assert third[4]["role"] == "tool" and "not valid JSON" in third[4]["content"]
    assert_append_only([r.body for r in wire.model_requests()])

    wire.clear()

    async def exhausts() -> None:
        session = open_session(spec(wire), root)
        for _ in range(10):
            wire.push_text("thinking out loud")
        with pytest.raises(MalformedResponsesExhausted):
            await _caller([]).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()

    asyncio.run(exhausts())


def test_413_compacts_then_retries_the_same_turn(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 6)

    async def scenario() -> Any:
        session = open_session(spec(wire), root)
        turns = await drive(session, wire, frames, 4)
        wire.push_error(413, "request entity too large")
        wire.push(wire.tool_call_reply(MOVE, call_id="after-shrink"))
        result = await _caller([]).request_turn(session, observation(frames[4], 4, turns[-1]))
        wire.push_tool_call(MOVE)
        await session.next_turn(observation(frames[5], 5, result.turn))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    requests = wire.model_requests()
    rejected, retried, following = (r.json()["messages"] for r in requests[4:7])
    assert len(rejected) == 13 and len(retried) == 1
    assert retried[0]["content"][5]["image_url"]["url"] == "data:image/png;base64," + b64(root, frames[4])
    summary = retried[0]["content"][3]["text"]
    assert "turn 3" in summary and "Executed 1 action; turn 4." in summary
    assert result.counters.shrinks == 1 and result.retries[0].shrunk
    assert len(following) == 4, "the compacted history is then appended to"
    assert_append_only([requests[5].body, requests[6].body])


def test_413_on_a_bare_first_request_cannot_shrink(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 1)

    async def scenario() -> None:
        session = open_session(spec(wire), root)
        wire.push_error(413, "too large")
        with pytest.raises(RequestTooLarge):
            await _caller([]).request_turn(session, observation(frames[0], 0, None))
        await session.aclose()

    asyncio.run(scenario())
    assert len(wire.model_requests()) == 1, "an identical oversized payload is never resent"


def test_telemetry_records_cache_performance_and_rate_limits_without_secrets(
    wire: ChatCompletionsWire, root: Path
) -> None:
    frames = small_frames(root, 3)
    wire.usage = {"prompt_tokens": 1500, "cached_tokens": 0, "completion_tokens": 60, "reasoning_tokens": 20}

    async def scenario() -> list[ModelTurn]:
        session = open_session(spec(wire), root)
        turns = await drive(session, wire, frames, 2)
        await session.aclose()
        return turns

    turns = asyncio.run(scenario())
    # No cached_tokens in usage: the fireworks-cached-prompt-tokens header fills it in.
    assert turns[0].usage.cached_input_tokens == 1000 and turns[0].usage.input_tokens == 500
    records = telemetry(root)
    assert len(records) == 2
    first = records[0]
    assert first["usage"]["cached_tokens"] == 1000 and first["cache_hit_ratio"] == pytest.approx(0.6667, abs=1e-3)
    assert first["headers"]["fireworks-server-time-to-first-token"] == "0.211"
    assert first["headers"]["x-ratelimit-limit-requests"] == "600"
    assert "set-cookie" not in first["headers"]
    assert first["profile"] == "fireworks-kimi-k2p6-fast-chat" and first["reasoning_chars"] > 0
    assert scan_for(root, [SECRET]) == []


def test_resume_after_compaction_sends_identical_bytes(wire: ChatCompletionsWire, root: Path) -> None:
    frames = small_frames(root, 8)

    async def scenario() -> None:
        original = open_session(spec(wire), root)
        turns = await drive(original, wire, frames, 10)
        state = json.loads(json.dumps(original.checkpoint(), sort_keys=True))
        reply = wire.tool_call_reply(MOVE, call_id=KIMI_CALL_ID, reasoning="same")
        wire.push(reply, reply)
        next_observation = observation(frames[10 % 8], 10, turns[-1])
        await original.next_turn(next_observation)
        resumed = open_session(spec(wire), root, resume_state=state)
        assert resumed.session_key == original.session_key
        await resumed.next_turn(next_observation)
        assert resumed.checkpoint() == original.checkpoint()
        await original.aclose()
        await resumed.aclose()

    asyncio.run(scenario())
    a, b = wire.model_requests()[-2:]
    assert a.body == b.body and a.headers["x-session-affinity"] == b.headers["x-session-affinity"]
