"""Resume gives every rollout an end and keeps every cent: rollouts that finished after the
controller died are recorded from what they wrote, and rollouts whose desktop is gone are
closed as ``infrastructure_lost`` with the spend their checkpoint recorded."""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path

from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, run_batch


def _state(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "batch-state.json").read_text())


def _crash(out: Path, rollout_id: str, *, keep_result: bool, spend: str) -> None:
    """Make ``rollout_id`` look as a SIGKILL of the controller leaves it: still running in the
    batch state, with (or without) the result its pilot wrote, and ``spend`` in its ledger."""
    state = _state(out)
    for row in state["rollouts"]:
        if row["rollout_id"] == rollout_id:
            row.update(state="evaluating" if keep_result else "running", finished_at=None, exit_code=None,
                       failure_class=None, token_cost_usd=None, infrastructure_seconds=None,
                       infrastructure_cost_usd=None, turns=None, actions=None)
    state["status"] = "running"
    (out / "batch-state.json").write_text(json.dumps(state))
    paths = RolloutPaths(out / "rollouts" / rollout_id)
    checkpoint = load_checkpoint(paths)
    assert checkpoint is not None
    ledger = checkpoint.budget.ledger.model_copy(update={"total_usd": Decimal(spend)})
    budget = checkpoint.budget.model_copy(update={"ledger": ledger})
    paths.checkpoint.write_text(checkpoint.model_copy(update={"budget": budget, "done": False}).model_dump_json())
    if paths.checkpoint_journal.exists():
        paths.checkpoint_journal.unlink()
    if keep_result:
        result = json.loads(paths.result.read_text())
        result.update(token_cost_usd=float(spend), infrastructure_seconds=None, infrastructure_cost_usd=None)
        paths.result.write_text(json.dumps(result))
    else:
        paths.result.unlink()


def test_resume_records_finished_rollouts_and_closes_lost_ones(tmp_path: Path) -> None:
    with fake_brokers(1) as brokers:
        result, out = run_batch(tmp_path, brokers, "subprocess", "run")
        assert result.returncode == 0, result.stderr
        _crash(out, "scripted-0", keep_result=True, spend="0.0404")
        _crash(out, "scripted-1", keep_result=False, spend="0.0202")
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, env=env,
                              timeout=120)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        actions = {e["rollout_id"]: e["action"] for e in json.loads(plan.stdout)["entries"]}
        assert actions == {"scripted-0": "complete", "scripted-1": "lost"}
        executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                                  env=env, timeout=300)
    assert executed.returncode == 1, executed.stdout + executed.stderr  # scripted-1 ended failed
    rows = {r["rollout_id"]: r for r in _state(out)["rollouts"]}
    finished, lost = rows["scripted-0"], rows["scripted-1"]
    assert (finished["state"], finished["failure_class"], finished["token_cost_usd"]) == ("done", None, 0.0404)
    assert finished["infrastructure_seconds"] is not None and finished["turns"] > 0
    assert (lost["state"], lost["failure_class"], lost["token_cost_usd"]) == ("failed", "infrastructure_lost", 0.0202)
    lost_result = json.loads((out / "rollouts" / "scripted-1" / "result.json").read_text())
    assert (lost_result["status"], lost_result["failure_class"]) == ("failed", "infrastructure_lost")
    assert lost_result["token_cost_usd"] == 0.0202
    # Every cent is in the totals: the summary's spend is the sum of the rollouts' spend.
    summary = json.loads((out / "summary.json").read_text())
    assert sum(r["token_cost_usd"] for r in summary["rollouts"]) == 0.0404 + 0.0202
    assert sum(m["metrics"]["token_cost_usd"] for m in summary["models"]) == round(0.0404 + 0.0202, 6)
    assert all(r["state"] in ("done", "failed") for r in _state(out)["rollouts"])


def test_resume_restarts_an_interrupted_rollout_as_a_new_attempt_and_archives_the_old(tmp_path: Path) -> None:
    with fake_brokers(1) as brokers:
        result, out = run_batch(tmp_path, brokers, "subprocess", "run")
        assert result.returncode == 0, result.stderr
        state = _state(out)
        first = next(r for r in state["rollouts"] if r["rollout_id"] == "scripted-0")
        old_attempt = first["attempt_id"]
        for row in state["rollouts"]:
            if row["rollout_id"] == "scripted-0":
                row.update(state="running", finished_at=None, exit_code=None, failure_class=None)
        state["status"] = "running"
        (out / "batch-state.json").write_text(json.dumps(state))
        result_path = out / "rollouts" / "scripted-0" / "result.json"
        stopped = {**json.loads(result_path.read_text()), "status": "failed", "failure_class": "interrupted",
                   "failure_detail": "SIGINT"}
        result_path.write_text(json.dumps(stopped))
        env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                                  env=env, timeout=300)
    assert executed.returncode == 0, executed.stdout + executed.stderr
    row = next(r for r in _state(out)["rollouts"] if r["rollout_id"] == "scripted-0")
    assert row["state"] == "done"
    assert row["attempt_id"] == f"{_state(out)['batch_id']}.scripted-0.2"
    (earlier,) = row["earlier_attempts"]
    assert (earlier["attempt_id"], earlier["failure_class"]) == (old_attempt, "interrupted")
    assert earlier["archived_to"] == "interrupted/scripted-0/attempt-1"
    assert json.loads((out / "interrupted" / "scripted-0" / "attempt-1" / "result.json").read_text())[
        "failure_class"] == "interrupted"
    assert json.loads(result_path.read_text())["status"] == "completed"
