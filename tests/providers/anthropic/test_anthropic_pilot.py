"""Full rollouts: the real core pilot, the fake broker, the installed provider and the real SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stamina

from autocad_bench.broker.client import BrokerClient
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import DisplaySize, ModelSpec
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench.testing.wire import RecordedRequest, Reply
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import FABLE_MODEL, SECRET, SERVER_MODEL, files_contain, message_kinds

REPO = Path(__file__).resolve().parents[3]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=40, height=30)
TURNS = 30


@pytest.fixture(autouse=True)
def no_backoff_sleep() -> Iterator[None]:
    stamina.set_testing(True)
    try:
        yield
    finally:
        stamina.set_testing(False)


def scripted_model(turns: int) -> tuple[list[int], Any]:
    """A default reply: ``turns`` tool calls, the last one ``done``; counts the calls it made."""
    made = [0]

    def build(wire: MessagesWire, request: RecordedRequest) -> Reply:
        index = made[0]
        made[0] += 1
        actions: list[dict[str, Any]] = [{"type": "move", "x": index % 40, "y": 2}]
        if index == turns - 1:
            actions.append({"type": "done"})
        return wire.tool_call_reply({"actions": actions}, call_id=f"toolu_{index:03d}",
                                    usage={"input_tokens": 900, "cache_read_input_tokens": 3000,
                                           "cache_creation_input_tokens": 200, "output_tokens": 40})

    return made, build


def run_rollout(tmp: Path, model: str, *, queued: list[Reply] | None = None,
                options: dict[str, Any] | None = None) -> tuple[dict[str, Any], MessagesWire, Path, FakeBroker]:
    made, build = scripted_model(TURNS)

    async def scenario() -> tuple[dict[str, Any], FakeBroker]:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = tmp / "rollout"
            rollout.mkdir()
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r", attempt_id="b.r.1", task_id="line-and-circle",
                task_prompt="Draw a line and a circle like the reference.", reference_png=str(REFERENCE),
                model=ModelSpec(provider="anthropic", model=model,
                                options={"base_url": wire.url, "timeout_s": 20, **(options or {})}),
                budgets=BudgetConfig(), display=DISPLAY, credential_names=("ANTHROPIC_API_KEY",),
                infrastructure_backend="test")
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
            client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001,
                                  wait_jitter_s=0.0, operation_deadline_s=10)
            environ = {"ANTHROPIC_API_KEY": SECRET}
            # The provider is discovered through its installed entry point, as in production.
            host = PluginHost(registry=PluginRegistry(), environ=environ)
            code = await Pilot(rollout, environ, host=host, broker=client).run()
            result = json.loads((rollout / "result.json").read_text())
            assert result["exit_code"] == code
            return result, broker

    with MessagesWire(default=lambda request: build(wire, request)) as wire:
        wire.push(*(queued or []))
        result, broker = asyncio.run(scenario())
    assert made[0] == TURNS
    return result, wire, tmp / "rollout", broker


@pytest.mark.parametrize("model", [SERVER_MODEL, FABLE_MODEL])
def test_thirty_turn_rollout_completes(tmp_path: Path, model: str) -> None:
    result, wire, rollout, broker = run_rollout(tmp_path, model)
    assert (result["status"], result["stop_reason"], result["turns"]) == ("completed", "done", TURNS)
    assert result["actions"] == TURNS + 1 and len(broker.injected) == TURNS + 1
    assert result["model_responses"] == TURNS
    assert result["usage"]["cached_input_tokens"] == 3000 * TURNS
    requests = wire.model_requests()
    assert len(requests) == TURNS
    bodies = [r.json() for r in requests]
    # The pilot's own controller feedback reaches the model inside the tool result.
    second = bodies[1]["messages"][-1]["content"][0]
    assert second["type"] == "tool_result" and second["tool_use_id"] == "toolu_000"
    assert second["content"][0]["text"].startswith("Executed actions 0..0")
    if model == FABLE_MODEL:
        assert [len(b["messages"]) for b in bodies].count(1) == 2  # turn 0 and the 24-turn checkpoint
        assert message_kinds(bodies[24]) == ["user:text,image,text,text,image"]
        assert all("anthropic-beta" not in r.headers for r in requests)
    else:
        assert len(bodies[-1]["messages"]) == 2 * TURNS - 1
        assert all(r.headers["anthropic-beta"] == "compact-2026-01-12" for r in requests)
    # The resume checkpoint holds the provider state with artifact references, no image bytes.
    checkpoint = json.loads((rollout / "resume-checkpoint.json").read_text())
    state = checkpoint["provider_state"]
    assert state["format"] == "autocad-bench-anthropic/1"
    assert "base64" not in json.dumps(state)
    # The key never lands in any file of the rollout (or anywhere under the test directory).
    assert files_contain(tmp_path, SECRET) == []


def test_rollout_survives_provider_failures(tmp_path: Path) -> None:
    wire_for_errors = MessagesWire()  # only used to build replies in the API's error format
    queued = [
        Reply.connection_reset(),
        wire_for_errors.error_reply(529, "Overloaded"),
        wire_for_errors.error_reply(429, "rate limited", headers={"retry-after": "3"}),
        wire_for_errors.error_reply(500, "internal"),
        wire_for_errors.error_reply(408, "timeout"),
        wire_for_errors.text_reply("Let me look first."),
    ]
    result, wire, rollout, _ = run_rollout(tmp_path, SERVER_MODEL, queued=queued)
    # The core budget counts the malformed response as a model turn too.
    assert (result["status"], result["stop_reason"], result["turns"]) == ("completed", "done", TURNS + 1)
    assert result["model_responses"] == TURNS + 1  # one malformed response, fed back and billed
    run_state = json.loads((rollout / "run-state.json").read_text())
    counters = run_state["counters"]
    assert counters["transient"]["lifetime"] == 2
    assert counters["server_error"]["lifetime"] == 2
    assert counters["rate_limited"]["lifetime"] == 1
    assert counters["malformed"]["lifetime"] == 1
    assert len(wire.model_requests()) == TURNS + 6
    assert files_contain(tmp_path, SECRET) == []
