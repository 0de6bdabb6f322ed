"""How a rollout ends: done, each budget stop, invalid batches, malformed turns, broker failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.protocol import Route
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.models import JsonObject
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import Credentials, DisplaySize, ModelSpec, ModelTurn, Observation, SessionRequest
from autocad_bench.providers.scripted import ScriptedProvider
from autocad_bench.providers.session import ProviderSession
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=40, height=30)
MOVE = {"type": "move", "x": 1, "y": 2}


class StoppingProvider(ScriptedProvider):
    """Replays a script whose ``{"stop_reason": R}`` lines are turns without a call that stop for R."""

    name = "stopping"
    tool_modes = frozenset({"function", "native"})

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        inner = super().open_session(request, credentials)

        class Session(ProviderSession):
            async def next_turn(self, observation: Observation) -> ModelTurn:
                turn = await inner.next_turn(observation)
                line = turn.action_input
                if isinstance(line, dict) and "stop_reason" in line:
                    return turn.model_copy(update={"action_input": None, "stop_reason": line["stop_reason"],
                                                   "malformed": f"no call ({line['stop_reason']})",
                                                   "text": "I can't help with that."})
                return turn

            def checkpoint(self) -> JsonObject:
                return inner.checkpoint()

        return Session()


def run(tmp: Path, lines: list[Any], budgets: BudgetConfig | None = None, faults: list[Fault] | None = None,
        provider: str = "scripted", tool_mode: str = "function") -> tuple[dict[str, Any], FakeBroker, Path]:
    async def scenario() -> tuple[dict[str, Any], FakeBroker]:
        async with FakeBroker(display=DISPLAY) as broker:
            broker.add_faults(*(faults or []))
            rollout = tmp / "rollout"
            rollout.mkdir()
            script = tmp / "script.jsonl"
            script.write_text("".join(json.dumps(line) + "\n" for line in lines))
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r", attempt_id="b.r.1", task_id="t", task_prompt="draw",
                reference_png=str(REFERENCE),
                model=ModelSpec(provider=provider, model="replay", options={"script": str(script)},
                                tool_mode=tool_mode),
                budgets=budgets or BudgetConfig(), display=DISPLAY, infrastructure_backend="test")
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
            client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001,
                                  wait_jitter_s=0.0, operation_deadline_s=10)
            registry = PluginRegistry()
            registry.register("providers", StoppingProvider())
            pilot = Pilot(rollout, {}, host=PluginHost(registry=registry, environ={}), broker=client)
            code = await pilot.run()
            result = json.loads((rollout / "result.json").read_text())
            assert result["exit_code"] == code
            return result, broker

    result, broker = asyncio.run(scenario())
    return result, broker, tmp / "rollout"


def turns(rollout: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (rollout / "model_turns.jsonl").read_text().splitlines()]


def test_done_completes_and_checkpoints(tmp_path: Path) -> None:
    result, _, rollout = run(tmp_path, [{"actions": [MOVE, {"type": "done"}]}])
    assert (result["status"], result["stop_reason"], result["actions"]) == ("completed", "done", 2)
    assert result["drawing"]["path"] == "attempt.dxf"
    assert (rollout / "attempt.dxf").read_bytes()


def test_invalid_batch_is_fed_back_and_counted(tmp_path: Path) -> None:
    bad = {"actions": [{"type": "type", "text": "caf\u00e9"}, {"type": "click", "x": 99, "y": 1,
                                                            "button": "left", "count": 1}]}
    result, broker, rollout = run(tmp_path, [bad, {"actions": [MOVE, {"type": "done"}]}])
    assert result["status"] == "completed" and result["invalid_turns"] == 1
    assert [i.index for i in broker.injected] == [0, 1]
    first, second = turns(rollout)
    assert first["validation"]["valid"] is False
    problems = first["validation"]["problems"]
    assert len(problems) == 2
    assert problems[0] == "actions[0].text: character U+00E9 at offset 3 is not printable ASCII"
    assert problems[1].startswith("actions[1].x: ") and "39" in problems[1]
    assert "rejected before any input reached the desktop" in second["observation"]["feedback"]
    assert "Invalid batches in a row: 1 of 10 allowed." in second["observation"]["feedback"]


def test_ten_consecutive_invalid_batches_fail_without_input(tmp_path: Path) -> None:
    bad = {"actions": [{"type": "done"}, MOVE]}
    result, broker, rollout = run(tmp_path, [bad] * 10 + [{"actions": [{"type": "done"}]}])
    assert result["status"] == "failed" and result["failure_class"] == "action_rejected"
    assert result["invalid_turns"] == 10
    assert broker.injected == []
    assert (rollout / "attempt.dxf").exists(), "the drawing is still checkpointed for evaluation"


def test_valid_batch_resets_the_invalid_streak(tmp_path: Path) -> None:
    bad = {"actions": [{"type": "done"}, MOVE]}
    lines = ([bad] * 9 + [{"actions": [MOVE]}]) * 2 + [{"actions": [{"type": "done"}]}]
    result, _, _ = run(tmp_path, lines)
    assert result["status"] == "completed" and result["invalid_turns"] == 18


def test_turn_budget_stops_then_checkpoints(tmp_path: Path) -> None:
    result, broker, rollout = run(tmp_path, [{"actions": [MOVE]}] * 5, BudgetConfig(max_turns=2))
    assert (result["status"], result["stop_reason"], result["actions"], result["turns"]) == (
        "completed", "turns", 2, 2)
    assert len(broker.injected) == 2 and (rollout / "attempt.dxf").exists()


def test_action_budget_stops_exactly_at_the_limit(tmp_path: Path) -> None:
    result, broker, _ = run(tmp_path, [{"actions": [MOVE, MOVE, MOVE]}] * 5, BudgetConfig(max_actions=6))
    assert (result["status"], result["stop_reason"], result["actions"]) == ("completed", "actions", 6)
    assert len(broker.injected) == 6


def test_batch_larger_than_the_remaining_budget_is_rejected(tmp_path: Path) -> None:
    lines = [{"actions": [MOVE, MOVE, MOVE]}, {"actions": [MOVE, MOVE, MOVE]}, {"actions": [MOVE]}]
    result, broker, rollout = run(tmp_path, lines, BudgetConfig(max_actions=4))
    assert result["stop_reason"] == "actions" and len(broker.injected) == 4
    assert turns(rollout)[1]["validation"]["problems"] == [
        "actions: the batch has 3 actions but only 1 remains in the rollout budget"]


def test_malformed_turns_fail_as_model_contract_error(tmp_path: Path) -> None:
    result, broker, _ = run(tmp_path, [None] * 10 + [{"actions": [{"type": "done"}]}])
    assert (result["status"], result["failure_class"]) == ("failed", "model_contract_error")
    assert result["model_responses"] == 10 and broker.injected == []


def test_lost_lease_is_admission_failed(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"actions": [{"type": "done"}]}],
                       faults=[Fault(FaultKind.HTTP_ERROR, Route.LEASE, status=500)])
    assert (result["status"], result["failure_class"], result["turns"]) == ("failed", "admission_failed", 0)


def test_unreachable_broker_is_transport_exhausted(tmp_path: Path) -> None:
    faults = [Fault(FaultKind.DROP_REQUEST, Route.ACTIONS)] * 8
    result, broker, _ = run(tmp_path, [{"actions": [MOVE, {"type": "done"}]}], faults=faults)
    assert (result["status"], result["failure_class"]) == ("failed", "transport_exhausted")
    assert broker.injected == []


def test_broker_error_after_request_fails_closed(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"actions": [MOVE, {"type": "done"}]}],
                       faults=[Fault(FaultKind.HTTP_ERROR, Route.ACTIONS, status=500)])
    assert (result["status"], result["failure_class"]) == ("failed", "action_rejected")


def test_failed_checkpoint_is_artifact_unavailable(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"actions": [{"type": "done"}]}],
                       faults=[Fault(FaultKind.HTTP_ERROR, Route.CHECKPOINT, status=500)])
    assert (result["status"], result["failure_class"], result["drawing"]) == (
        "failed", "artifact_unavailable", None)


def test_failed_release_is_cleanup_error(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"actions": [{"type": "done"}]}],
                       faults=[Fault(FaultKind.HTTP_ERROR, Route.RELEASE, status=500)])
    assert (result["status"], result["failure_class"]) == ("failed", "cleanup_error")


def test_a_refusal_fails_the_rollout_at_once_with_its_own_class(tmp_path: Path) -> None:
    lines = [{"actions": [MOVE]}, {"stop_reason": "refusal"}, {"actions": [{"type": "done"}]}]
    result, broker, rollout = run(tmp_path, lines, provider="stopping")
    assert (result["status"], result["failure_class"]) == ("failed", "model_refused")
    assert "the model stopped the rollout (refusal)" in result["failure_detail"]
    assert len(broker.injected) == 1, "nothing after the refusal ran"
    assert (rollout / "attempt.dxf").exists(), "the drawing is still saved"


def test_a_safety_check_stop_fails_with_its_own_class(tmp_path: Path) -> None:
    result, broker, _ = run(tmp_path, [{"stop_reason": "safety_check"}], provider="stopping")
    assert (result["status"], result["failure_class"]) == ("failed", "safety_check_stopped")
    assert broker.injected == []


def test_a_truncated_turn_is_asked_again(tmp_path: Path) -> None:
    lines = [{"stop_reason": "max_tokens"}, {"actions": [MOVE, {"type": "done"}]}]
    result, _, _ = run(tmp_path, lines, provider="stopping")
    assert (result["status"], result["stop_reason"]) == ("completed", "done")


def test_a_malformed_native_turn_is_answered_in_native_words(tmp_path: Path) -> None:
    lines = [{"stop_reason": "max_tokens"}, {"actions": [{"type": "done"}]}]
    _, _, rollout = run(tmp_path, lines, provider="stopping", tool_mode="native")
    assert json.loads((rollout / "result.json").read_text())["tool_mode"] == "native"
    feedback = [t["observation"]["feedback"] for t in turns(rollout) if t["observation"]["feedback"]]
    assert feedback and "computer_action" not in feedback[0] and "your computer-use tool" in feedback[0]
    (tmp_path / "f").mkdir()
    _, _, function_rollout = run(tmp_path / "f", lines, provider="stopping")
    assert "computer_action" in [t["observation"]["feedback"] for t in turns(function_rollout)][1]
