"""Run the real core pilot against a FakeBroker with a Responses-speaking wire fake.

Shared by the openai and openrouter provider tests: the provider under test is registered
in-process, its SDK talks to :class:`~autocad_bench.testing.wire.ResponsesWire` over real
HTTP, and the pilot runs its normal loop (ModelCaller retry accounting, validation, broker
execution, traces). Backoff waits are skipped with stamina's test mode; the waits the
policy asked for are still recorded in the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stamina

from autocad_bench.broker.client import BrokerClient
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import DisplaySize, ModelSpec
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker

REPO = Path(__file__).resolve().parents[3]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=64, height=48)
SECRET = "sk-pilot-test-7c1e0b9a4d2f86e35a"

MOVE: dict[str, Any] = {"actions": [{"type": "move", "x": 5, "y": 6}]}
DONE: dict[str, Any] = {"actions": [{"type": "move", "x": 7, "y": 8}, {"type": "done"}]}


@dataclass
class PilotRun:
    result: dict[str, Any]
    rollout: Path
    broker: FakeBroker

    @property
    def run_state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.rollout / "run-state.json").read_text())
        return state

    @property
    def counters(self) -> dict[str, Any]:
        counters: dict[str, Any] = self.run_state["counters"]
        return counters

    def model_turns(self) -> list[dict[str, Any]]:
        path = self.rollout / "model_turns.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def retries(self) -> list[dict[str, Any]]:
        return [r for turn in self.model_turns() for r in turn.get("retries", [])]

    def files_containing(self, needle: str) -> list[Path]:
        data = needle.encode()
        return [p for p in self.rollout.rglob("*") if p.is_file() and data in p.read_bytes()]


def run_pilot(
    tmp: Path,
    provider: ModelProvider,
    model: ModelSpec,
    credential: str,
    *,
    budgets: BudgetConfig | None = None,
    environment: dict[str, str] | None = None,
) -> PilotRun:
    """Run one rollout to its end; returns result.json, the rollout directory and the broker.

    ``environment`` adds variables the child sees (and names them to the pilot, as admission
    names a provider's optional variables that are set).
    """
    extra = dict(environment or {})

    async def scenario() -> PilotRun:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = tmp / "rollout"
            rollout.mkdir()
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r-provider", attempt_id="b.r-provider.1", task_id="t",
                task_prompt="Draw a line and a circle.", reference_png=str(REFERENCE), model=model,
                budgets=budgets or BudgetConfig(), display=DISPLAY, credential_names=(credential, *extra),
                infrastructure_backend="test",
            )
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
            client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001,
                                  wait_jitter_s=0.0, operation_deadline_s=10)
            registry = PluginRegistry()
            registry.register("providers", provider)
            host = PluginHost(registry=registry, environ={}, entry_point_source=lambda group: ())
            pilot = Pilot(rollout, {credential: SECRET, **extra}, host=host, broker=client)
            code = await pilot.run()
            result = json.loads((rollout / "result.json").read_text())
            assert result["exit_code"] == code
            return PilotRun(result=result, rollout=rollout, broker=broker)

    with stamina.set_testing(True, attempts=5):
        return asyncio.run(scenario())


# --- shared scenarios ---------------------------------------------------------------------

def push_retry_storm(wire: Any) -> int:
    """Queue every retryable failure before one valid turn, then finish; returns the failures queued.

    Order: 429 with retry-after 7, bare 429, a 5xx burst (500, 502, 503, 504), a connection
    reset, 408, 409, a text-only response, a call with broken arguments, then MOVE and DONE.
    """
    wire.push_error(429, "slow down", headers={"retry-after": "7"})
    wire.push_error(429, "slow down")
    for status in (500, 502, 503, 504):
        wire.push_error(status, "upstream trouble")
    wire.push_reset()
    wire.push_error(408, "timeout")
    wire.push_error(409, "conflict")
    wire.push_text("I should look first.")
    wire.push_malformed_arguments('{"actions": [{"type": "mo')
    wire.push_tool_call(MOVE)
    wire.push_tool_call(DONE)
    return 9


def assert_retry_storm(run: PilotRun, requests: list[Any]) -> None:
    """The core counters and the trace after :func:`push_retry_storm`."""
    result, counters = run.result, run.counters
    assert (result["status"], result["stop_reason"]) == ("completed", "done"), result
    assert result["model_responses"] == 4  # text-only, malformed, MOVE, DONE
    assert counters["rate_limited"] == {"consecutive": 0, "lifetime": 2}
    assert counters["server_error"] == {"consecutive": 0, "lifetime": 4}
    assert counters["transient"] == {"consecutive": 0, "lifetime": 3}
    assert counters["malformed"] == {"consecutive": 0, "lifetime": 2}
    assert counters["fatal"]["lifetime"] == 0 and counters["responses"] == 4
    retries = run.retries()
    assert [r["kind"] for r in retries] == (
        ["rate_limited"] * 2 + ["server_error"] * 4 + ["transient"] * 3)
    assert retries[0]["retry_after_s"] == 7.0 and retries[0]["delay_s"] == 7.0
    # The second 429 in a row: plain exponential backoff (2 s, minus jitter), no hint.
    assert retries[1]["retry_after_s"] is None and 1.0 <= retries[1]["delay_s"] <= 2.0
    assert [r["status"] for r in retries] == [429, 429, 500, 502, 503, 504, None, 408, 409]
    assert [r["streak"] for r in retries] == [1, 2, 1, 2, 3, 4, 1, 2, 3]
    # Nine failed requests and the text-only answer were the same unconsumed turn: identical bytes.
    first_turn = {r.body for r in requests[:10]}
    assert len(first_turn) == 1, "a failed request changed the next request body"
    assert len(requests) == 13
    turns = run.model_turns()
    assert [t["malformed"] is not None for t in turns] == [True, True, False, False]


def run_interrupted_then_resumed(
    tmp: Path, provider_factory: Any, model: ModelSpec, credential: str, wire: Any, interrupt_at: int, total: int,
) -> tuple[PilotRun, int]:
    """Kill the pilot while model request ``interrupt_at`` (0-based) is in flight, then resume it.

    The wire has ``total`` replies queued (the last one ``DONE``); the reply to request
    ``interrupt_at`` is held until the pilot task is cancelled, like a controller dying
    mid-request, and is lost with it. A second pilot
    on the same directory (fresh provider, fresh session, same broker) finishes the rollout.
    Returns the resumed run and how many model requests the first pilot made.
    """
    from autocad_bench.testing.wire import Reply

    for index in range(total - 1):
        reply = wire.tool_call_reply(MOVE, call_id=f"call_{index:04d}")
        if index == interrupt_at:
            held = wire.tool_call_reply(MOVE, call_id="call_never_seen")
            reply = Reply(status=held.status, body=held.body, headers=held.headers, delay_s=3.0)
        wire.push(reply)
    wire.push_tool_call(DONE)

    async def scenario() -> tuple[PilotRun, int]:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = tmp / "rollout"
            rollout.mkdir()
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r-provider", attempt_id="b.r-provider.1", task_id="t",
                task_prompt="Draw a line and a circle.", reference_png=str(REFERENCE), model=model,
                budgets=BudgetConfig(), display=DISPLAY, credential_names=(credential,),
                infrastructure_backend="test",
            )
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))

            def pilot() -> Pilot:
                client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001,
                                      wait_jitter_s=0.0, operation_deadline_s=10)
                registry = PluginRegistry()
                registry.register("providers", provider_factory())
                host = PluginHost(registry=registry, environ={}, entry_point_source=lambda group: ())
                return Pilot(rollout, {credential: SECRET}, host=host, broker=client)

            first = asyncio.create_task(pilot().run())
            while len(wire.model_requests()) <= interrupt_at:
                assert not first.done(), "the first pilot ended before the interruption"
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first
            assert not (rollout / "result.json").exists()
            made = len(wire.model_requests())
            code = await pilot().run()
            result = json.loads((rollout / "result.json").read_text())
            assert result["exit_code"] == code
            return PilotRun(result=result, rollout=rollout, broker=broker), made

    with stamina.set_testing(True, attempts=5):
        return asyncio.run(scenario())
