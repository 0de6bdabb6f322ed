"""Observers get ``model_turn_recorded`` for every turn, in shared and in subprocess mode."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from autocad_bench import Observer
from autocad_bench.cli.batch import batch_command
from autocad_bench.controller import batch as batch_module
from autocad_bench.events import ModelTurnEvent, RolloutStateEvent
from autocad_bench.plugins import default_registry, register_observer
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config

pytestmark = pytest.mark.integration


class Recorder(Observer):
    name: ClassVar[str] = "turn-recorder"
    seen: ClassVar[list[object]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def model_turn_recorded(self, event: ModelTurnEvent) -> None:
        with self.lock:
            Recorder.seen.append(event)

    def rollout_state_changed(self, event: RolloutStateEvent) -> None:
        with self.lock:
            Recorder.seen.append(event)


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_every_turn_reaches_observers_once_in_order_before_the_rollout_ends(
        tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Recorder.seen = []
    # The monitor never polls: each rollout's turns must still arrive, and before its end.
    monkeypatch.setattr(batch_module, "POLL_S", 3600.0)
    register_observer(Recorder)
    try:
        with fake_brokers(2, token="turn-events-broker-token-3") as brokers:
            for name, value in {**SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}.items():
                monkeypatch.setenv(name, value)
            config = tmp_path / "batch.json"
            config.write_text(json.dumps(batch_config(brokers, tmp_path / "leases", mode)))
            out = tmp_path / "out"
            result = CliRunner().invoke(batch_command, ["--config", str(config), "--execute",
                                                        "--output-dir", str(out)])
    finally:
        default_registry().unregister("observers", "turn-recorder")
    assert result.exit_code == 0, result.output
    for rollout in ("scripted-0", "scripted-1"):
        lines = [json.loads(line) for line in
                 (out / "rollouts" / rollout / "model_turn_summaries.jsonl").read_text().splitlines()]
        assert lines, "the scripted rollout recorded no turns"
        events = [e for e in Recorder.seen if e.rollout_id == rollout]  # type: ignore[attr-defined]
        turns = [e for e in events if isinstance(e, ModelTurnEvent)]
        assert [(t.turn_index, t.valid, t.actions, t.cost_usd) for t in turns] == [
            (r["turn_index"], r["valid"], r["actions"], r["cost_usd"]) for r in lines]
        assert all(t.batch_id == turns[0].batch_id for t in turns)
        end = next(i for i, e in enumerate(events) if isinstance(e, RolloutStateEvent) and e.state == "done")
        assert all(events.index(t) < end for t in turns), "a turn arrived after the rollout ended"
