"""Request shape: strict forced tool, images, cache breakpoints, beta header, measured bytes."""

from __future__ import annotations

import base64

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, computer_action_schema
from autocad_bench.providers.models import ModelSpec
from autocad_bench_anthropic.caching import count_breakpoints
from autocad_bench_anthropic.provider import AnthropicProvider
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import (
    FABLE_MODEL,
    MOVE,
    SECRET,
    SERVER_MODEL,
    Rollout,
    assert_pairs_complete,
    message_kinds,
    observation,
    open_session,
)

CC_5M = {"type": "ephemeral", "ttl": "5m"}


def b64(rollout: Rollout, path: str) -> str:
    return base64.b64encode((rollout.root / path).read_bytes()).decode()


async def test_server_model_request_shape(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        wire.push_tool_call(MOVE, call_id="toolu_1")
        turn = await session.next_turn(observation(rollout, 0))
    finally:
        await session.aclose()
    assert turn.action_input == MOVE and turn.tool_use_id == "toolu_1"
    (request,) = wire.model_requests()
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-beta"] == "compact-2026-01-12"
    # SDK 2.14 sends the key as a bearer token; older SDKs used x-api-key.
    sent_key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
    assert sent_key == SECRET
    assert request.headers.get("x-stainless-retry-count") == "0"
    body = request.json()
    assert body["model"] == SERVER_MODEL and body["max_tokens"] == 4096
    assert body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150000}}]}
    assert body["tools"] == [{"name": "computer_action", "description": COMPUTER_ACTION_DESCRIPTION,
                              "input_schema": computer_action_schema(), "strict": True}]
    assert body["tool_choice"] == {"type": "tool", "name": "computer_action", "disable_parallel_tool_use": True}
    # Explicit 5-minute breakpoints on the system prompt and the task/reference prefix, plus
    # top-level automatic caching.
    assert body["cache_control"] == CC_5M
    assert [b["cache_control"] for b in body["system"]] == [CC_5M]
    first = body["messages"][0]
    assert first["role"] == "user"
    assert [b["type"] for b in first["content"]] == ["text", "image", "text", "image"]
    task, reference, desktop, frame = first["content"]
    assert "Draw a circle of radius 50" in task["text"]
    assert reference["cache_control"] == CC_5M
    assert reference["source"] == {"type": "base64", "media_type": "image/png",
                                   "data": b64(rollout, "reference.png")}
    assert "cache_control" not in frame and "cache_control" not in task
    assert frame["source"]["data"] == b64(rollout, "frames/000000.png")
    assert "Actions left in this rollout: 5000" in desktop["text"]
    assert count_breakpoints(body) == 3
    # The size the session measured is the size the SDK sent.
    assert session.stats.request_bytes == len(request.body)


async def test_fable_requests_omit_beta_and_context_management(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        wire.push_tool_call(MOVE)
        first = await session.next_turn(observation(rollout, 0))
        wire.push_tool_call(MOVE)
        await session.next_turn(observation(rollout, 1, first))
    finally:
        await session.aclose()
    for request in wire.model_requests():
        assert request.path == "/v1/messages" and request.query == ""
        assert "anthropic-beta" not in request.headers
        body = request.json()
        assert "context_management" not in body and "betas" not in body
        assert body["cache_control"] == CC_5M and body["tools"][0]["strict"] is True


async def test_history_keeps_exact_assistant_and_tool_result_messages(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    thinking_text = {"type": "text", "text": "I will move the pointer.", "citations": None}
    try:
        wire.push(wire.tool_call_reply(MOVE, call_id="toolu_a", before=[thinking_text]))
        first = await session.next_turn(observation(rollout, 0))
        wire.push_tool_call(MOVE, call_id="toolu_b")
        second = await session.next_turn(observation(rollout, 1, first, feedback="Executed actions 0..0."))
        wire.push_tool_call(MOVE, call_id="toolu_c")
        await session.next_turn(observation(rollout, 2, second, feedback="Executed actions 1..1."))
    finally:
        await session.aclose()
    third = wire.model_requests()[2].json()
    assert message_kinds(third) == ["user:text,image,text,image", "assistant:text,tool_use", "user:tool_result",
                                    "assistant:tool_use", "user:tool_result"]
    assert third["messages"][1]["content"] == [
        thinking_text, {"type": "tool_use", "id": "toolu_a", "name": "computer_action", "input": MOVE}]
    result = third["messages"][2]["content"][0]
    assert result["tool_use_id"] == "toolu_a"
    assert result["content"][0] == {"type": "text", "text": "Executed actions 0..0."}
    assert result["content"][1]["source"]["data"] == b64(rollout, "frames/000001.png")
    assert_pairs_complete(third)
    # Every earlier message is sent again byte for byte (a stable prefix for caching).
    second_body = wire.model_requests()[1].json()
    assert third["messages"][:3] == second_body["messages"]
    assert count_breakpoints(third) == 3


async def test_each_image_is_encoded_once_per_session(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    previous = None
    try:
        for index in range(6):
            wire.push_tool_call(MOVE)
            previous = await session.next_turn(observation(rollout, index, previous))
        # the reference and six frames: seven encodings, however many times they were sent
        assert session._store.encodings == 7
    finally:
        await session.aclose()


async def test_trigger_and_output_limits_are_options(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire, server_compaction_trigger_tokens=60_000, max_tokens=2048)
    try:
        wire.push_tool_call(MOVE)
        await session.next_turn(observation(rollout, 0))
    finally:
        await session.aclose()
    body = wire.model_requests()[0].json()
    assert body["context_management"]["edits"][0]["trigger"]["value"] == 60_000
    assert body["max_tokens"] == 2048


def test_option_validation_locates_problems() -> None:
    provider = AnthropicProvider()
    spec = ModelSpec(provider="anthropic", model="claude-opus-4-7",
                     options={"server_compaction_trigger_tokens": 49_999, "request_guard_bytes": 40 * 2**20})
    problems = provider.validate_model_spec(spec, "cfg.json: $.rollouts[0]")
    assert sorted(p.location for p in problems) == [
        "cfg.json: $.rollouts[0].provider_options.request_guard_bytes",
        "cfg.json: $.rollouts[0].provider_options.server_compaction_trigger_tokens",
    ]
    ok = ModelSpec(provider="anthropic", model="claude-fable-5-20260301",
                   options={"client_compaction_models": ["claude-fable-5*"], "server_compaction": False})
    assert provider.validate_model_spec(ok, "$") == []


def test_compaction_mode_per_model() -> None:
    from autocad_bench_anthropic.options import AnthropicOptions

    options = AnthropicOptions()
    assert options.compaction_mode("claude-fable-5") == "client"
    assert options.compaction_mode("claude-fable-5-20260301") == "client"
    assert options.compaction_mode("claude-fable-50") == "server"
    assert options.compaction_mode("claude-opus-4-7") == "server"
    assert AnthropicOptions(server_compaction=False).compaction_mode("claude-opus-4-7") == "none"
    assert AnthropicOptions(client_compaction_models=("claude-opus-*",)).compaction_mode("claude-opus-4-7") == "client"
