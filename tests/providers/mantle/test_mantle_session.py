"""Mantle through the real OpenAI SDK and botocore SigV4 against local signed endpoints: signatures,
append-only Chat history, 24-message and 3 MiB compaction, body-length 400 recovery, cache audit,
Responses for models that advertise it, and a 30-turn rollout through the core pilot."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_mantle.options import PINNED_MODEL
from autocad_bench_mantle.provider import AutoApiSession, MantleProvider

from autocad_bench.models import ArtifactRef
from autocad_bench.providers.chat.session import TELEMETRY_FILE, HistorySession
from autocad_bench.providers.models import Credentials, ModelSpec, ModelTurn, ProviderErrorKind
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry import ModelCaller
from tests.providers.fireworks.helpers import (
    DONE,
    MOVE,
    assert_append_only,
    aws_environment,
    noise_png,
    observation,
    reference,
    run_pilot,
    scan_for,
    scripted_default,
    session_request,
    small_frames,
    write_image,
)
from tests.providers.mantle.wires import (
    ACCESS_KEY,
    SECRET_KEY,
    SESSION_TOKEN,
    MantleChatWire,
    MantleResponsesWire,
    verify_sigv4,
)

MiB = 1024 * 1024
KIMI_IMAGE_ENTRY = {"id": PINNED_MODEL, "input_modalities": ["text", "image"]}
BODY_LENGTH_400 = "Validation error: request body length 3145800 exceeds the maximum request size of 3145728 bytes"


@pytest.fixture
def wire() -> Iterator[MantleChatWire]:
    with MantleChatWire(catalog=[KIMI_IMAGE_ENTRY], reasoning="kimi reasoning",
                        reply_headers={"x-amzn-requestid": "req-1", "x-amzn-bedrock-invocation-latency": "812"}) as w:
        yield w


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "rollout"
    path.mkdir()
    return path


def spec(url: str, model: str = PINNED_MODEL, **options: Any) -> ModelSpec:
    return ModelSpec(provider="mantle", model=model,
                     options={"base_url": url + "/v1", "region": "us-east-1", "timeout_s": 20, **options})


def open_session(model: ModelSpec, root: Path, resume_state: Any = None) -> ProviderSession:
    return MantleProvider().open_session(session_request(model, root, reference(root), resume_state), Credentials({}))


async def drive(session: ProviderSession, wire: Any, frames: list[ArtifactRef], turns: int,
                previous: ModelTurn | None = None, start: int = 0) -> list[ModelTurn]:
    out = []
    for i in range(start, start + turns):
        wire.push_tool_call(MOVE)
        previous = await session.next_turn(observation(frames[i % len(frames)], i, previous))
        assert previous.action_input == MOVE, previous
        out.append(previous)
    return out


def telemetry(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / TELEMETRY_FILE).read_text().splitlines()]


def test_every_request_is_sigv4_signed_for_bedrock_mantle(wire: MantleChatWire, root: Path) -> None:
    frames = small_frames(root, 3)

    async def scenario() -> None:
        session = open_session(spec(wire.url), root)
        await drive(session, wire, frames, 3)
        await session.aclose()

    asyncio.run(scenario())
    requests = wire.model_requests()
    assert len(requests) == 3
    for request in requests:
        check = verify_sigv4(request)
        assert check.ok, check.reason
        assert (check.service, check.region) == ("bedrock-mantle", "us-east-1")
        assert set(check.signed_headers) >= {"host", "content-type", "x-amz-date"}
        assert request.path == "/v1/chat/completions"
        assert "x-session-affinity" not in request.headers
    body = requests[0].json()
    assert body["model"] == "moonshotai.kimi-k2.5" and body["max_tokens"] == 4096
    assert body["tools"][0]["function"]["strict"] is True
    assert body["tool_choice"] == {"type": "function", "function": {"name": "computer_action"}}
    assert "thinking" not in body and "service_tier" not in body


def test_session_token_and_named_profile(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = small_frames(root, 1)
    aws_environment(monkeypatch, tmp_path, ACCESS_KEY, SECRET_KEY, token=SESSION_TOKEN)
    with MantleChatWire(token=SESSION_TOKEN) as signed:

        async def with_token() -> None:
            session = open_session(spec(signed.url), root)
            await drive(session, signed, frames, 1)
            await session.aclose()

        asyncio.run(with_token())
        assert signed.model_requests()[0].headers["x-amz-security-token"] == SESSION_TOKEN

    credentials = tmp_path / "credentials"
    credentials.write_text(f"[bench]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGDEFAULT0000")
    with MantleChatWire() as profiled:

        async def with_profile() -> None:
            session = open_session(spec(profiled.url, aws_profile="bench"), root)
            await drive(session, profiled, frames, 1)
            await session.aclose()

        asyncio.run(with_profile())
        assert verify_sigv4(profiled.model_requests()[0]).ok


def test_append_only_then_compaction_at_24_messages(wire: MantleChatWire, root: Path) -> None:
    frames = small_frames(root, 8)

    async def scenario() -> None:
        session = open_session(spec(wire.url), root)
        await drive(session, wire, frames, 10)
        await session.aclose()

    asyncio.run(scenario())
    requests = wire.model_requests()
    assert [len(r.json()["messages"]) for r in requests] == [1, 4, 7, 10, 13, 16, 19, 22, 1, 4]
    assert_append_only([r.body for r in requests[:8]])
    assert_append_only([r.body for r in requests[8:]])
    assistant = requests[1].json()["messages"][1]
    assert assistant["reasoning_content"] == "kimi reasoning" and assistant["tool_calls"][0]["function"]["name"] == (
        "computer_action")
    records = telemetry(root)
    assert records[8]["compaction_reason"] == "25 messages > 24"
    assert records[0]["headers"] == {"x-amzn-requestid": "req-1", "x-amzn-bedrock-invocation-latency": "812"}


def test_compaction_before_3_mib(wire: MantleChatWire, root: Path) -> None:
    frames = [write_image(root, f"frames/{i:06d}.png", noise_png(500_000, i)) for i in range(5)]

    async def scenario() -> None:
        session = open_session(spec(wire.url), root)
        await drive(session, wire, frames, 12)
        await session.aclose()

    asyncio.run(scenario())
    sizes = [len(r.body) for r in wire.model_requests()]
    records = telemetry(root)
    assert [r["request_bytes"] for r in records] == sizes
    assert max(sizes) <= 3 * MiB
    crossings = [r for r in records if r["compacted"]]
    assert len(crossings) >= 2 and all("request bytes > 3145728" in r["compaction_reason"] for r in crossings)


def test_body_length_400_compacts_and_retries_the_unconsumed_turn(wire: MantleChatWire, root: Path) -> None:
    frames = small_frames(root, 6)

    async def scenario() -> Any:
        session = open_session(spec(wire.url), root)
        turns = await drive(session, wire, frames, 3)
        wire.push_error(400, BODY_LENGTH_400)
        wire.push_tool_call(MOVE)

        async def no_sleep(_: float) -> None:
            return None

        caller = ModelCaller(sleep=no_sleep, rng=random.Random(0), instrument=False)
        result = await caller.request_turn(session, observation(frames[3], 3, turns[-1]))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    rejected, retried = (r.json()["messages"] for r in wire.model_requests()[3:5])
    assert len(rejected) == 10 and len(retried) == 1
    event = result.retries[0]
    assert (event.kind, event.status, event.shrunk) == (ProviderErrorKind.REQUEST_TOO_LARGE, 400, True)
    assert result.counters.shrinks == 1 and result.turn.action_input == MOVE
    text = retried[0]["content"][3]["text"]
    assert "- turn 2: computer_action" in text and "Executed 1 action; turn 3." in text
    assert telemetry(root)[3]["error"] == "request_too_large"


def test_other_400s_are_fatal(wire: MantleChatWire, root: Path) -> None:
    frames = small_frames(root, 1)

    async def scenario() -> Any:
        session = open_session(spec(wire.url), root)
        wire.push_error(400, "tool_choice is not supported for this model")
        try:
            return await session.next_turn(observation(frames[0], 0, None))
        except Exception as error:
            return error
        finally:
            await session.aclose()

    error = asyncio.run(scenario())
    assert getattr(error, "kind", None) is ProviderErrorKind.FATAL


def test_cached_tokens_are_audited(wire: MantleChatWire, root: Path) -> None:
    frames = small_frames(root, 3)
    wire.usage = {"prompt_tokens": 4000, "cached_tokens": 3500, "completion_tokens": 90, "reasoning_tokens": 0}

    async def scenario() -> list[ModelTurn]:
        session = open_session(spec(wire.url), root)
        turns = await drive(session, wire, frames, 2)
        await session.aclose()
        return turns

    turns = asyncio.run(scenario())
    assert (turns[1].usage.input_tokens, turns[1].usage.cached_input_tokens) == (500, 3500)
    assert telemetry(root)[1]["cache_hit_ratio"] == 0.875


def test_responses_api_for_models_that_advertise_it(root: Path) -> None:
    frames = small_frames(root, 4)
    entry = {"id": "openai.gpt-oss-120b", "supported_endpoints": ["/v1/chat/completions", "/v1/responses"],
             "input_modalities": ["text", "image"]}
    with MantleResponsesWire(entries=[entry]) as responses:

        async def scenario() -> ProviderSession:
            session = open_session(spec(responses.url, model="openai.gpt-oss-120b"), root)
            assert isinstance(session, AutoApiSession)
            await drive(session, responses, frames, 3)
            await session.aclose()
            return session

        session = asyncio.run(scenario())
        requests = responses.model_requests()
        assert all(verify_sigv4(r).ok for r in responses.requests())
        assert next(r.method + " " + r.path for r in responses.requests()) == "GET /v1/models"
    assert isinstance(session, AutoApiSession) and session.api == "responses"
    body = requests[0].json()
    assert body["store"] is False and body["max_output_tokens"] == 4096
    assert body["tools"] == [{**body["tools"][0], "type": "function", "name": "computer_action", "strict": False}]
    assert body["tool_choice"] == {"type": "function", "name": "computer_action"}
    items = requests[1].json()["input"]
    assert [i.get("type", i.get("role")) for i in items] == ["user", "function_call", "function_call_output", "user"]
    assert items[0]["content"][2]["type"] == "input_image"
    assert items[2]["output"] == "Executed 1 action; turn 1."
    assert_append_only([r.body for r in requests], key="input")
    assert session.checkpoint()["api"] == "responses"


def test_auto_falls_back_to_chat_when_responses_is_not_advertised(root: Path) -> None:
    frames = small_frames(root, 2)
    with MantleChatWire(catalog=[{"id": "google.gemma-4-31b", "input_modalities": ["image", "text"]}]) as chat:

        async def scenario() -> ProviderSession:
            session = open_session(spec(chat.url, model="google.gemma-4-31b"), root)
            await drive(session, chat, frames, 2)
            await session.aclose()
            return session

        session = asyncio.run(scenario())
        assert [r.path for r in chat.requests()] == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
        assert chat.model_requests()[0].json()["tools"][0]["function"].get("strict") is None
    state = session.checkpoint()
    assert state["api"] == "chat"

    with MantleChatWire() as again:

        async def resumed() -> None:
            session = open_session(spec(again.url, model="google.gemma-4-31b"), root, resume_state=state)
            assert isinstance(session, AutoApiSession) and isinstance(session.inner, HistorySession)
            again.push_tool_call(MOVE)
            await session.next_turn(observation(frames[0], 2, None, feedback="Executed 1 action; turn 2."))
            await session.aclose()

        asyncio.run(resumed())
        assert [r.path for r in again.requests()] == ["/v1/chat/completions"], "a resumed rollout never re-decides"


def test_thirty_turn_rollout_through_the_core_pilot(tmp_path: Path) -> None:
    def script(n: int) -> object:
        return wire.tool_call_reply(DONE if n == 29 else MOVE, call_id=f"call_{n}", reasoning=f"step {n}")

    with MantleChatWire(catalog=[KIMI_IMAGE_ENTRY]) as wire:
        wire.default = scripted_default(script)  # type: ignore[arg-type]
        result, _rollout = run_pilot(tmp_path, spec(wire.url), {}, ())
        requests = wire.model_requests()
    assert (result["status"], result["stop_reason"], result["turns"]) == ("completed", "done", 30)
    assert len(requests) == 30 and all(verify_sigv4(r).ok for r in requests)
    assert max(len(r.json()["messages"]) for r in requests) <= 24
    assert scan_for(tmp_path, [SECRET_KEY]) == []
