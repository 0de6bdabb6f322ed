"""kill -9 of the controller at each critical point of a real, scored LibreCAD rollout.

The controller runs in shared mode, so the pilot dies with it while Xvfb, the broker and
LibreCAD live on. For each point (holding the desktop before the first turn, with an action
batch pending at the broker, while the drawing is saved, after the pilot finished but
before the score exists) the test kills it, resumes, and checks: the rollout is done and
scored 1.0, the broker executed every action request once (its event log), the recorded
spend never went down and the summary's equals the rollout's, nothing of the desktop is
left running and no worker record or token file stays behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import RolloutPaths

from .conftest import needs_desktop, processes_mentioning, write_config

pytestmark = [pytest.mark.integration, needs_desktop]

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "suite"
TASK = "part-plate-four-holes"


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "batch.json", {
        "name": "kill-points",
        "expected_rollouts": 1,
        "max_concurrency": 1,
        "execution_mode": "shared",
        "tasks_dir": str(SUITE / "tasks"),
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"state_dir": str(tmp_path / "state")}},
        "evaluation": {"enabled": True, "evaluator_version": "2026.12.3",
                       "gold_cache": str(REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "gold-cache")},
        "rollouts": [{"rollout_id": "plate", "task_id": TASK, "provider": "scripted", "model": "reference",
                      "provider_options": {"script": str(SUITE / "tasks" / TASK / "solution.librecad.jsonl"),
                                           "latency_s": 0.5}}],
    })


def _checkpoint(paths: RolloutPaths) -> Any:
    try:
        return load_checkpoint(paths)
    except (OSError, ValueError):
        return None


def _before_first_turn(paths: RolloutPaths) -> bool:
    checkpoint = _checkpoint(paths)
    return checkpoint is not None and checkpoint.frame is not None and checkpoint.turn_index == 0 \
        and checkpoint.pending is None


def _mid_action_batch(paths: RolloutPaths) -> bool:
    checkpoint = _checkpoint(paths)
    return checkpoint is not None and checkpoint.pending is not None and checkpoint.turn_index >= 1


def _during_save(paths: RolloutPaths) -> bool:
    try:
        return json.loads(paths.run_state.read_text())["phase"] == "checkpointing"
    except (OSError, ValueError, KeyError):
        return False


def _before_the_score(paths: RolloutPaths) -> bool:
    return paths.result.exists() and not (paths.evaluation / "score.json").exists()


KILL_POINTS: dict[str, Callable[[RolloutPaths], bool]] = {
    "before the first turn": _before_first_turn,
    "mid action batch": _mid_action_batch,
    "during the save": _during_save,
    "after the pilot, before the score": _before_the_score,
}


def _spend(out: Path) -> float:
    paths = RolloutPaths(out / "rollouts" / "plate")
    try:
        return float(json.loads(paths.result.read_text())["token_cost_usd"])
    except (OSError, ValueError, KeyError):
        checkpoint = _checkpoint(paths)
        return float(checkpoint.budget.ledger.total_usd) if checkpoint is not None else 0.0


@pytest.mark.parametrize("point", [
    # The default run keeps the point where exactly-once is hardest; -m slow runs the rest.
    pytest.param(name, marks=() if name == "mid action batch" else pytest.mark.slow) for name in KILL_POINTS])
def test_kill_9_at_each_point_resumes_to_one_scored_rollout(tmp_path: Path, point: str) -> None:
    out = tmp_path / "out"
    paths = RolloutPaths(out / "rollouts" / "plate")
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(_config(tmp_path)), "--execute",
                                   "--output-dir", str(out)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True,
                                  env={**os.environ, "CI": "1"})
    try:
        deadline = time.monotonic() + 180
        while not KILL_POINTS[point](paths):
            assert controller.poll() is None, f"the batch ended before {point}"
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.01)
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait(timeout=10)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    spent = _spend(out)
    (before,) = json.loads((out / "batch-state.json").read_text())["rollouts"]

    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    (entry,) = json.loads(plan.stdout)["entries"]
    assert entry["action"] in ("resume", "evaluate", "complete"), entry
    executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "CI": "1"})
    assert executed.returncode == 0, executed.stdout + executed.stderr

    (row,) = json.loads((out / "batch-state.json").read_text())["rollouts"]
    assert row["state"] == "done" and row["score"] == pytest.approx(1.0), row
    if entry["action"] == "resume":
        # The re-attached desktop ran (and cost) from its first start, through the crash.
        assert row["started_at"] == before["started_at"]
        lifetime = (datetime.fromisoformat(row["finished_at"]) - datetime.fromisoformat(row["started_at"]))
        assert row["infrastructure_seconds"] >= lifetime.total_seconds() - 1.0
    assert json.loads((paths.evaluation / "score.json").read_text())["score"] == pytest.approx(1.0)
    events = json.loads(paths.events.read_text())["events"]
    executions = Counter(e["detail"]["request_id"] for e in events if e["kind"] == "actions")
    assert executions and set(executions.values()) == {1}, f"an action request ran twice: {executions}"
    receipts = [json.loads(line)["index"] for line in paths.input_receipts.read_text().splitlines()]
    assert receipts == list(range(len(receipts)))
    result = json.loads(paths.result.read_text())
    assert result["token_cost_usd"] >= spent
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"][0]["token_cost_usd"] == pytest.approx(result["token_cost_usd"])

    deadline = time.monotonic() + 10
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(out)) == []
    state_dir = tmp_path / "state"
    assert not state_dir.exists() or not [p for p in state_dir.rglob("*") if p.is_file()]
