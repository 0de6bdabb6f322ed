"""A controller SIGKILLed while it scores a finished rollout: resume scores it, once.

In shared mode the evaluation runs in the controller after the desktop is torn down, so a
kill -9 at that moment leaves ``result.json`` (completed) without ``evaluation/score.json``
and the rollout still ``evaluating`` in the batch state. The plan must call that
``evaluate`` (not ``complete``), and ``--execute`` must run the evaluation and record the
score. The batch runs on fake brokers (no desktop needed; the example backend never
evaluates, which leaves exactly that state) and is then scored against the evaluator's
gold cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from autocad_bench.harness.layout import RolloutPaths
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evaluator" / "src" / "autocad_bench_evaluator"
TASK = "prim-rectangle"


def _state(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "batch-state.json").read_text())
    return data


def test_a_rollout_whose_scoring_was_killed_is_scored_on_resume(tmp_path: Path) -> None:
    with fake_brokers(1) as brokers:
        config = batch_config(brokers, tmp_path / "leases", "shared", rollouts=1)
        config["tasks_dir"] = str(SUITE / "suite" / "tasks")
        config["evaluation"] = {"enabled": True, "evaluator_version": "2026.12.3",
                                "gold_cache": str(SUITE / "gold-cache")}
        config["rollouts"][0].update(task_id=TASK, provider_options={
            "script": str(SUITE / "suite" / "tasks" / TASK / "solution.librecad.jsonl")})
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config))
        out = tmp_path / "out"
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        ran = subprocess.run(["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        rollout_id = "scripted-0"
        paths = RolloutPaths(out / "rollouts" / rollout_id)
        # What kill -9 during scoring leaves: the pilot's result, no score, the row mid-evaluation.
        shutil.rmtree(paths.evaluation, ignore_errors=True)
        state = _state(out)
        state["status"] = "running"
        state["finished_at"] = None
        state["rollouts"][0].update(state="evaluating", finished_at=None, exit_code=None, score=None, passed=None)
        (out / "batch-state.json").write_text(json.dumps(state))
        (out / "summary.json").unlink()

        plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, env=env,
                              timeout=120)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        (entry,) = json.loads(plan.stdout)["entries"]
        assert entry["action"] == "evaluate" and "never scored" in entry["reason"], entry
        executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                                  env=env, timeout=300)
        assert executed.returncode == 0, executed.stdout + executed.stderr
        injected = len(brokers[0].injected)
    scored = json.loads((paths.evaluation / "score.json").read_text())
    assert isinstance(scored["score"], (int, float)) and isinstance(scored["passed"], bool)
    (row,) = _state(out)["rollouts"]
    assert (row["state"], row["score"], row["passed"]) == ("done", scored["score"], scored["passed"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"][0]["score"] == scored["score"]
    assert injected > 0 and json.loads(paths.result.read_text())["status"] == "completed"
    # A scored rollout is complete: planning again has nothing left to do.
    again = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert [e["action"] for e in json.loads(again.stdout)["entries"]] == ["complete"]
