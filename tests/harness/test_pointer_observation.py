"""The provider sees the pointer the broker read with each frame, also after a resume.

A pilot runs against the fake broker with a provider that records every observation. The
fake desktop's pointer follows the pointer actions, and once it is moved behind the
harness's back (an application-made move): the observation must carry the broker's
position, not the last point the harness sent. The pilot is then killed while it waits for
the model and started again on the same directory: the resumed observation of the same
frame must show the same pointer, even though the desktop's pointer has moved since.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

from autocad_bench.broker.client import BrokerClient
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.pilot import Pilot
from autocad_bench.harness.records import ResumeCheckpoint
from autocad_bench.models import JsonObject
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import Credentials, DisplaySize, ModelSpec, ModelTurn, Observation, SessionRequest
from autocad_bench.providers.scripted import ScriptedProvider
from autocad_bench.providers.session import ProviderSession
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=40, height=30)
APP_MOVE = (21, 13)
"""Where "the application" puts the pointer before turn 1's batch runs."""
SCRIPT: list[Any] = [
    {"actions": [{"type": "move", "x": 5, "y": 6}]},
    {"actions": [{"type": "key", "keys": ["escape"]}]},
    {"actions": [{"type": "done"}, {"type": "move", "x": 1, "y": 1}]},  # invalid: a durable checkpoint
    {"actions": [{"type": "done"}]},
]


class PointerProbe(ScriptedProvider):
    """Replays :data:`SCRIPT`, recording each observation; hooks play the desktop and the crash."""

    name = "pointer-probe"
    observations: ClassVar[list[Observation]] = []
    broker: ClassVar[FakeBroker | None] = None
    block_at: ClassVar[int | None] = None

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        inner = super().open_session(request, credentials)
        probe = type(self)

        class Session(ProviderSession):
            async def next_turn(self, observation: Observation) -> ModelTurn:
                probe.observations.append(observation)
                if observation.turn_index == probe.block_at:
                    await asyncio.Event().wait()  # the model never answers: the pilot is killed here
                if observation.turn_index == 1 and probe.broker is not None:
                    probe.broker.pointer = APP_MOVE
                return await inner.next_turn(observation)

            def checkpoint(self) -> JsonObject:
                return inner.checkpoint()

        return Session()


def _pilot(rollout: Path, broker: FakeBroker) -> Pilot:
    registry = PluginRegistry()
    registry.register("providers", PointerProbe())
    client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001, wait_jitter_s=0.0,
                          operation_deadline_s=10)
    return Pilot(rollout, {}, host=PluginHost(registry=registry, environ={}), broker=client)


def test_observations_carry_the_broker_pointer_and_keep_it_across_a_resume(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[Observation], list[Observation], ResumeCheckpoint | None, dict[str, Any]]:
        async with FakeBroker(display=DISPLAY, pointer=(7, 7)) as broker:
            rollout = tmp_path / "rollout"
            rollout.mkdir()
            script = tmp_path / "script.jsonl"
            script.write_text("".join(json.dumps(line) + "\n" for line in SCRIPT))
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r", attempt_id="b.r.1", task_id="t", task_prompt="draw",
                reference_png=str(REFERENCE),
                model=ModelSpec(provider="pointer-probe", model="replay", options={"script": str(script)}),
                budgets=BudgetConfig(), display=DISPLAY, infrastructure_backend="test")
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
            PointerProbe.observations, PointerProbe.broker, PointerProbe.block_at = [], broker, 3

            first_run = asyncio.create_task(_pilot(rollout, broker).run())
            while len(PointerProbe.observations) < 4:
                assert not first_run.done(), "the pilot ended before the crash point"
                await asyncio.sleep(0.01)
            first_run.cancel()
            await asyncio.gather(first_run, return_exceptions=True)
            first = list(PointerProbe.observations)
            saved = load_checkpoint(RolloutPaths(rollout))

            broker.pointer = (0, 0)  # the desktop's pointer moved while the controller was down
            PointerProbe.observations, PointerProbe.block_at = [], None
            code = await _pilot(rollout, broker).run()
            assert code == 0, (rollout / "result.json").read_text()
            return first, list(PointerProbe.observations), saved, json.loads((rollout / "result.json").read_text())

    first, resumed, saved, result = asyncio.run(scenario())
    # Frame 0 at the reset pointer, frame 1 after the move, frame 2 after the application's
    # move (the batch was a key press), the rejected turn keeps frame 2.
    assert [(o.turn_index, o.pointer) for o in first] == [(0, (7, 7)), (1, (5, 6)), (2, APP_MOVE), (3, APP_MOVE)]
    assert saved is not None and saved.pending is None and saved.turn_index == 3
    assert saved.pointer == APP_MOVE
    assert [(o.turn_index, o.frame, o.pointer) for o in resumed[:1]] == [(3, first[3].frame, APP_MOVE)]
    assert result["status"] == "completed" and result["attempts"] == 2


def test_a_checkpoint_written_before_the_pointer_field_loads_without_a_pointer(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    old = {"version": 1, "revision": 4, "rollout_id": "r", "attempt_id": "b.r.1", "session_id": "session-1-ab",
           "next_index": 2, "turn_index": 2, "frame": {"path": "frames/000001.png", "sha256": "ab" * 32},
           "frame_sequence": 1, "feedback": "ok"}
    paths.checkpoint.write_text(json.dumps(old))
    loaded = load_checkpoint(paths)
    assert loaded is not None and loaded.pointer is None and loaded.frame_sequence == 1
