"""Exact resume: checkpoints hold artifact references, resumed sessions send byte-identical requests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from autocad_bench.providers.models import ModelTurn, ProviderErrorKind, ProviderRequestError
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import (
    FABLE_MODEL,
    MOVE,
    SECRET,
    SERVER_MODEL,
    Rollout,
    observation,
    open_session,
)
from tests.providers.anthropic.test_anthropic_compaction import COMPACTION, run_turns


async def resume_and_compare(wire: MessagesWire, rollout: Rollout, model: str, state: dict[str, Any],
                             pending: Any, original: Any, **options: Any) -> None:
    """Send ``pending`` from the original session and from one resumed from ``state``; compare."""
    text = json.dumps(state, sort_keys=True)
    assert "base64" not in text and SECRET not in text
    resumed = open_session(rollout, model, wire, resume_state=json.loads(text), **options)
    try:
        assert json.dumps(resumed.checkpoint(), sort_keys=True) == text
        reply = wire.tool_call_reply(MOVE, call_id="toolu_resume")
        wire.push(reply, reply)
        await original.next_turn(pending)
        await resumed.next_turn(pending)
        assert json.dumps(resumed.checkpoint(), sort_keys=True) == json.dumps(original.checkpoint(), sort_keys=True)
    finally:
        await resumed.aclose()
    first, second = wire.model_requests()[-2:]
    assert first.body == second.body
    assert first.headers.get("anthropic-beta") == second.headers.get("anthropic-beta")


@pytest.mark.parametrize("turns", [3, 23, 24, 30])
async def test_fable_resume_around_the_checkpoint(wire: MessagesWire, rollout: Rollout, turns: int) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        previous = await run_turns(session, wire, rollout, turns)
        state = session.checkpoint()
        await resume_and_compare(wire, rollout, FABLE_MODEL, state, observation(rollout, turns, previous), session)
    finally:
        await session.aclose()
    assert state["state"]["outcomes"] or turns < 2
    assert all(m["role"] in ("user", "assistant") for m in state["messages"])


async def test_fable_resume_with_pending_forced_checkpoint_and_repair(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, FABLE_MODEL, wire)
    try:
        previous = await run_turns(session, wire, rollout, 4)
        pending = observation(rollout, 4, previous)
        wire.push_error(413, "too large")
        with pytest.raises(ProviderRequestError):
            await session.next_turn(pending)
        assert session.shrink()
        wire.push_text("no call")
        bad = await session.next_turn(pending)
        from autocad_bench.retry import malformed_feedback

        repair = malformed_feedback(pending, bad)
        state = session.checkpoint()
        assert state["state"]["force_checkpoint"] is True and state["state"]["repair"] is not None
        await resume_and_compare(wire, rollout, FABLE_MODEL, state, repair, session)
    finally:
        await session.aclose()


async def test_server_resume_after_compaction(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        previous = await run_turns(session, wire, rollout, 3)
        wire.push(wire.tool_call_reply(MOVE, call_id="toolu_c", before=[COMPACTION]))
        compacted: ModelTurn = await session.next_turn(observation(rollout, 3, previous))
        state = session.checkpoint()
        assert state["messages"][1]["content"][0] == dict(sorted(COMPACTION.items()))
        await resume_and_compare(wire, rollout, SERVER_MODEL, state, observation(rollout, 4, compacted), session)
    finally:
        await session.aclose()


async def test_resume_verifies_every_referenced_image(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        previous = await run_turns(session, wire, rollout, 3)
        state = session.checkpoint()
    finally:
        await session.aclose()
    refs = [b["source"] for m in state["messages"] for b in m["content"] if b.get("type") == "image"]
    assert refs[0]["path"] == "reference.png" and all(len(r["sha256"]) == 64 for r in refs)
    (rollout.root / "frames/000001.png").write_bytes(b"tampered")
    resumed = open_session(rollout, SERVER_MODEL, wire, resume_state=state)
    try:
        wire.push_tool_call(MOVE)
        with pytest.raises(ProviderRequestError) as caught:
            await resumed.next_turn(observation(rollout, 3, previous))
    finally:
        await resumed.aclose()
    assert "checksum" in str(caught.value) and "frames/000001.png" in str(caught.value)
    assert len(wire.model_requests()) == 3, "nothing may be sent with an unverified image"


async def test_unverifiable_image_is_fatal_kind(wire: MessagesWire, rollout: Rollout) -> None:
    session = open_session(rollout, SERVER_MODEL, wire)
    try:
        obs = observation(rollout, 0)
        (rollout.root / obs.frame.path).unlink()
        with pytest.raises(ProviderRequestError) as caught:
            await session.next_turn(obs)
    finally:
        await session.aclose()
    assert caught.value.kind is ProviderErrorKind.FATAL
    assert wire.model_requests() == []
