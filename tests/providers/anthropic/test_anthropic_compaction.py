"""Compaction crossings: official server compaction, and the deterministic Fable client checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.providers.models import ModelTurn
from autocad_bench_anthropic.caching import count_breakpoints
from autocad_bench_anthropic.session import COMPACTED_PLACEHOLDER, AnthropicSession
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

COMPACTION = {"type": "compaction", "content": "Summary: the circle command was started at the origin.",
              "encrypted_content": "opaque-7b1d"}
COMPACTION_USAGE = {"iterations": [
    {"type": "compaction", "input_tokens": 151_000, "output_tokens": 900, "cache_read_input_tokens": 0,
     "cache_creation_input_tokens": 0},
    {"type": "message", "input_tokens": 2_500, "output_tokens": 50, "cache_read_input_tokens": 0,
     "cache_creation_input_tokens": 0},
]}


async def run_turns(session: AnthropicSession, wire: MessagesWire, rollout: Rollout, count: int, *,
                    start: int = 0, previous: ModelTurn | None = None,
                    usage: dict[int, dict[str, Any]] | None = None) -> ModelTurn | None:
    for index in range(start, start + count):
        wire.push(wire.tool_call_reply(
            {"actions": [{"type": "move", "x": index % 60, "y": 4}]}, call_id=f"toolu_{index:03d}",
            usage=(usage or {}).get(index)))
        previous = await session.next_turn(observation(rollout, index, previous))
    return previous


# --- server compaction -----------------------------------------------------------------------


async def test_server_compaction_block_is_replayed_and_older_turns_dropped(
    wire: MessagesWire, rollout: Rollout
) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        previous = await run_turns(session, wire, rollout, 3)
        wire.push(wire.tool_call_reply(MOVE, call_id="toolu_c", before=[COMPACTION], usage=COMPACTION_USAGE))
        compacted = await session.next_turn(observation(rollout, 3, previous))
        after = await run_turns(session, wire, rollout, 2, start=4, previous=compacted)
        assert after is not None
        state = session.checkpoint()
    finally:
        await session.aclose()
    # The compaction run is billed: its iteration is not in the top-level usage fields.
    assert compacted.usage.input_tokens == 1200 + 151_000 and compacted.usage.output_tokens == 50 + 900
    requests = wire.model_requests()
    for request in requests:
        assert request.headers["anthropic-beta"] == "compact-2026-01-12"
        assert request.json()["context_management"]["edits"][0]["type"] == "compact_20260112"
    before_compaction, first_after, second_after = (r.json() for r in requests[3:6])
    assert len(before_compaction["messages"]) == 7
    # The API ignores everything before the compaction block, so the client sends only an opener.
    assert message_kinds(first_after) == ["user:text", "assistant:compaction,tool_use", "user:tool_result,text,image"]
    assert first_after["messages"][0]["content"][0]["text"] == COMPACTED_PLACEHOLDER
    block = first_after["messages"][1]["content"][0]
    assert json.dumps(block, sort_keys=True) == json.dumps(COMPACTION, sort_keys=True)  # unchanged
    reattached = first_after["messages"][2]["content"]
    assert "Draw a circle of radius 50" in reattached[1]["text"]
    assert reattached[2]["source"]["data"] == before_compaction["messages"][0]["content"][1]["source"]["data"]
    # Replayed again on the next request, byte for byte; the re-attachment happens once.
    assert second_after["messages"][:3] == first_after["messages"]
    assert message_kinds(second_after)[3:] == ["assistant:tool_use", "user:tool_result"]
    for body in (first_after, second_after):
        assert_pairs_complete(body)
        assert count_breakpoints(body) <= 4
    assert state["state"]["counters"]["server_compactions"] == 1


async def test_failed_server_compaction_is_a_no_op(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    failed = {"type": "compaction", "content": None}
    try:
        previous = await run_turns(session, wire, rollout, 3)
        wire.push(wire.tool_call_reply(MOVE, call_id="toolu_f", before=[failed]))
        turn = await session.next_turn(observation(rollout, 3, previous))
        await run_turns(session, wire, rollout, 1, start=4, previous=turn)
        counters = session.checkpoint()["state"]["counters"]
    finally:
        await session.aclose()
    sent, following = (r.json() for r in wire.model_requests()[3:5])
    assert following["messages"][:7] == sent["messages"]
    assert message_kinds(following)[7:] == ["assistant:tool_use", "user:tool_result"]
    assert "compaction" not in json.dumps(following["messages"])
    assert counters["failed_compactions"] == 1 and counters["server_compactions"] == 0


# --- Fable client compaction -----------------------------------------------------------------


def assert_fresh_checkpoint(body: dict[str, Any], rollout: Rollout, frame_index: int) -> str:
    """A checkpoint request: one user message with task, reference, text and current desktop."""
    assert message_kinds(body) == ["user:text,image,text,text,image"]
    task, reference, text, desktop, frame = body["messages"][0]["content"]
    assert "Draw a circle of radius 50" in task["text"]
    assert reference["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert reference["source"]["data"] == _b64(rollout.root / "reference.png")
    assert frame["source"]["data"] == _b64(rollout.root / f"frames/{frame_index:06d}.png")
    assert "Current desktop" in desktop["text"]
    assert "tool_use" not in json.dumps(body["messages"]) and "tool_result" not in json.dumps(body["messages"])
    assert "context_management" not in body
    return str(text["text"])


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()


async def test_fable_checkpoint_after_24_completed_turns(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        await run_turns(session, wire, rollout, 50)
        counters = session.checkpoint()["state"]["counters"]
    finally:
        await session.aclose()
    requests = wire.model_requests()
    sizes = [len(r.json()["messages"]) for r in requests]
    # 23 complete pairs at most; the 24th completed turn is folded into the checkpoint.
    assert sizes[:25] == [1 + 2 * k for k in range(24)] + [1]
    assert sizes[25:48] == [1 + 2 * k for k in range(1, 24)]
    assert sizes[48] == 1 and sizes[49] == 3
    for request in requests:
        assert "anthropic-beta" not in request.headers
        assert "context_management" not in request.json()
        assert_pairs_complete(request.json())
    text = assert_fresh_checkpoint(requests[24].json(), rollout, 24)
    assert text.startswith("Context summary 1. ")
    assert "(24 completed computer_action calls and their results)" in text
    assert "Completed computer_action calls in this rollout so far: 24." in text
    assert "The 16 most recent controller outcomes, oldest first:" in text
    lines = [line for line in text.splitlines() if line[:1].isdigit()]
    assert len(lines) == 16
    assert lines[0].startswith("1. Turn 8 (toolu_008): move(8,4) => Executed move; turn 9.")
    assert lines[-1].startswith("16. Turn 23 (toolu_023): move(23,4) => Executed move; turn 24.")
    text2 = assert_fresh_checkpoint(requests[48].json(), rollout, 48)
    assert text2.startswith("Context summary 2. ") and "so far: 48." in text2
    assert (counters["client_checkpoints"], counters["completed_turns"]) == (2, 49)
    # The cached prefix (system, tools, task, reference) is the same before and after.
    before, after = requests[23].json(), requests[24].json()
    assert before["system"] == after["system"] and before["tools"] == after["tools"]
    assert before["messages"][0]["content"][:2] == after["messages"][0]["content"][:2]


async def test_fable_checkpoint_text_is_deterministic(rollout: Rollout, tmp_path: Path) -> None:
    captured = []
    for _ in range(2):
        with MessagesWire() as wire:
            session = open_session(rollout, FABLE_MODEL, wire)
            try:
                await run_turns(session, wire, rollout, 26)
            finally:
                await session.aclose()
            captured.append([r.body for r in wire.model_requests()])
    assert captured[0] == captured[1]


@pytest.mark.parametrize(("effective", "expect_checkpoint"), [(89_999, False), (90_000, True)])
async def test_fable_checkpoint_at_90000_effective_input_tokens(
    wire: MessagesWire, rollout: Rollout, effective: int, expect_checkpoint: bool
) -> None:
    usage = {4: {"input_tokens": 1_000, "cache_read_input_tokens": 80_000,
                 "cache_creation_input_tokens": effective - 81_000}}
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        await run_turns(session, wire, rollout, 7, usage=usage)
    finally:
        await session.aclose()
    requests = [r.json() for r in wire.model_requests()]
    if expect_checkpoint:
        text = assert_fresh_checkpoint(requests[5], rollout, 5)
        assert "(5 completed computer_action calls and their results)" in text
        assert len([line for line in text.splitlines() if line[:1].isdigit()]) == 5
        assert message_kinds(requests[6]) == ["user:text,image,text,text,image", "assistant:tool_use",
                                              "user:tool_result"]
        assert requests[6]["messages"][0] == requests[5]["messages"][0]
    else:
        assert [len(r["messages"]) for r in requests] == [1, 3, 5, 7, 9, 11, 13]


async def test_fable_checkpoint_keeps_a_pending_format_repair(wire: MessagesWire, rollout: Rollout) -> None:
    from autocad_bench.retry import ModelCaller

    async def no_sleep(_: float) -> None:
        return None

    session = open_session(rollout, FABLE_MODEL, wire, client_compaction_turns=3)
    try:
        previous = await run_turns(session, wire, rollout, 3)
        wire.push_text("hmm")
        wire.push_tool_call(MOVE, call_id="toolu_ok")
        result = await ModelCaller(sleep=no_sleep, instrument=False).request_turn(
            session, observation(rollout, 3, previous))
    finally:
        await session.aclose()
    assert result.turn.tool_use_id == "toolu_ok"
    checkpoint_request, repaired = (r.json() for r in wire.model_requests()[3:5])
    assert message_kinds(checkpoint_request) == ["user:text,image,text,text,image"]
    assert message_kinds(repaired) == ["user:text,image,text,text,image,text"]
    assert repaired["messages"][0]["content"][2] == checkpoint_request["messages"][0]["content"][2]
    assert repaired["max_tokens"] == 8192


# --- the 24 MiB guard (scaled down) ----------------------------------------------------------


async def test_guard_removes_historical_screenshots_for_server_models(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, frame_bytes=60_000)
    guard = 400_000
    with MessagesWire() as wire:
        session = open_session(rollout, SERVER_MODEL, wire, request_guard_bytes=guard)
        try:
            await run_turns(session, wire, rollout, 12)
            counters = session.checkpoint()["state"]["counters"]
        finally:
            await session.aclose()
        requests = wire.model_requests()
    sizes = [len(r.body) for r in requests]
    assert max(sizes) <= guard and counters["screenshots_removed"] > 0
    for request in requests:
        body = request.json()
        assert_pairs_complete(body)
        images = [b for m in body["messages"] for b in _blocks(m) if b["type"] == "image"]
        # the reference and the newest desktop always survive
        assert images[0]["source"]["data"] == _b64(rollout.root / "reference.png")
        assert images[-1] is _blocks(body["messages"][-1])[-1]
    stripped = requests[-1].json()
    assert "Earlier screenshot removed to keep the request small: frames/000000.png" in json.dumps(stripped)
    assert len(stripped["messages"]) == 23  # no pair was dropped: only screenshots


async def test_guard_forces_the_fable_checkpoint(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, frame_bytes=60_000)
    with MessagesWire() as wire:
        session = open_session(rollout, FABLE_MODEL, wire, request_guard_bytes=400_000)
        try:
            await run_turns(session, wire, rollout, 10)
        finally:
            await session.aclose()
        requests = wire.model_requests()
    sizes = [len(r.json()["messages"]) for r in requests]
    assert max(len(r.body) for r in requests) <= 400_000
    assert 1 in sizes[1:], "the guard must have forced a checkpoint"
    first = sizes.index(1, 1)
    assert_fresh_checkpoint(requests[first].json(), rollout, first)
    assert "Earlier screenshot removed" not in b"".join(r.body for r in requests).decode()


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for block in message["content"]:
        out.append(block)
        if block["type"] == "tool_result":
            out.extend(block["content"])
    return out
