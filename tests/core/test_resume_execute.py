"""Executing a resume plan (issue 23, mutation module ``core.resume``): ``execute_resume`` in
this process on batches that really ran (example pool, fake brokers, shared mode), then shaped
the way a dead controller or an operator's stop leaves them.

Each test states one rule of what resume does with a rollout and checks it through the batch
state, the rollout's files and the exit code: a finished but unscored rollout is scored against
its own task's gold; a failed one is recorded once and never scored; a rollout that finished
after its controller died keeps the time its files show and the cost it recorded; an
interrupted attempt is archived once, numbered after the earlier ones, with the spend the batch
recorded; workers still held for rollouts that will not run on them again are released; a
resume that admission refuses says which checks failed and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.gold_cache import build_entry
from autocad_bench_evaluator.spec import ScoringSpec
from ezdxf.filemanagement import new

from autocad_bench import register_infrastructure_plugin, run_batch
from autocad_bench.controller.resume import ResumePlan, execute_resume, plan_resume
from autocad_bench.errors import ConfigError, UserError
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest, SharedChild
from autocad_bench.plugins import PluginHost, default_registry
from autocad_bench.testing.fake_broker import FakeBroker
from example_autocad_backend.plugin import ExamplePoolPlugin, PoolSettings, lease_worker
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "scripts" / "line-and-circle.jsonl"
EVALUATOR_VERSION = "resume-execute-v1"
LINE_AND_CIRCLE, CIRCLE_ONLY = "line-and-circle", "circle-only"


@dataclass
class Pool:
    """Two live fake brokers and everything a batch on them needs."""

    root: Path
    brokers: list[FakeBroker]
    tasks: Path
    cache: Path

    @property
    def leases(self) -> Path:
        return self.root / "leases"


def _drawing(path: Path, *, line: bool) -> bytes:
    doc = new("R2010", setup=True)
    if line:
        doc.modelspace().add_line((0, 0), (100, 0))
    doc.modelspace().add_circle((50, 50), 25)
    doc.saveas(path)
    return path.read_bytes()


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pool]:
    # Two tasks with different golds, so that scoring one rollout against another's task shows.
    tasks = tmp_path / "tasks"
    shutil.copytree(REPO / "examples" / "tasks" / LINE_AND_CIRCLE, tasks / LINE_AND_CIRCLE)
    shutil.copytree(REPO / "examples" / "tasks" / LINE_AND_CIRCLE, tasks / CIRCLE_ONLY)
    spec = json.loads((tasks / CIRCLE_ONLY / "task.json").read_text())
    (tasks / CIRCLE_ONLY / "task.json").write_text(json.dumps({**spec, "task_id": CIRCLE_ONLY}))
    cache = tmp_path / "gold-cache"
    drawn = _drawing(tmp_path / "line-and-circle.dxf", line=True)
    _drawing(tmp_path / "circle-only.dxf", line=False)
    build_entry(cache, EVALUATOR_VERSION, tmp_path / "line-and-circle.dxf", ScoringSpec(task_id=LINE_AND_CIRCLE))
    build_entry(cache, EVALUATOR_VERSION, tmp_path / "circle-only.dxf", ScoringSpec(task_id=CIRCLE_ONLY))
    # Every desktop ends with the line-and-circle drawing: a perfect attempt at that task only.
    monkeypatch.setattr(FakeBroker, "_drawing", lambda self, session: drawn)
    with fake_brokers(2, token="resume-execute-broker-token") as brokers:
        # The example pool reads its token from the process environment (as a real backend would).
        for name, value in {**SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token}.items():
            monkeypatch.setenv(name, value)
        yield Pool(tmp_path, brokers, tasks, cache)


def run(pool: Pool, rollouts: list[tuple[str, str]], *, evaluation: bool = False, trials: int = 1,
        backend: str = "example-pool", exit_code: int = 0) -> Path:
    """Run a batch of ``(rollout_id, task_id)`` in config order to its end; its output directory."""
    config = {
        "name": "resume-execute", "expected_rollouts": len(rollouts) * trials, "trials": trials,
        "max_concurrency": 2, "execution_mode": "shared", "tasks_dir": str(pool.tasks),
        "infrastructure": {
            "backend": backend, "broker_version": "windows-autocad-2019-v11",
            "settings": {"workers": [b.url for b in pool.brokers], "token_env": "EXAMPLE_POOL_TOKEN",
                         "lease_dir": str(pool.leases)},
        },
        "evaluation": {"enabled": True, "gold_cache": str(pool.cache), "evaluator_version": EVALUATOR_VERSION}
        if evaluation else {"enabled": False},
        "rollouts": [{"rollout_id": rid, "task_id": task, "provider": "scripted", "model": f"replay-{rid}",
                      "provider_options": {"script": str(SCRIPT)}} for rid, task in rollouts],
    }
    path = pool.root / "batch.json"
    path.write_text(json.dumps(config))
    outcome = run_batch(path, pool.root / "run", environ=dict(os.environ))
    assert outcome.exit_code == exit_code
    return outcome.output_dir


def resume(out: Path) -> tuple[ResumePlan, int]:
    """Plan and execute the resume of ``out`` as ``autocad-bench-resume --execute`` does."""
    environ = dict(os.environ)
    host = PluginHost(environ=environ)
    plan = plan_resume(out, host)
    return plan, execute_resume(plan, host, environ)


def state(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "batch-state.json").read_text()))


def row(out: Path, rollout_id: str) -> dict[str, Any]:
    return next(dict(r) for r in state(out)["rollouts"] if r["rollout_id"] == rollout_id)


def edit_state(out: Path, rollout_id: str | None = None, **fields: Any) -> None:
    """Change the batch state as a controller that died mid-batch leaves it."""
    data = state(out)
    data["status"] = "running"
    for entry in data["rollouts"]:
        if entry["rollout_id"] == rollout_id:
            entry.update(fields)
    (out / "batch-state.json").write_text(json.dumps(data))


def edit_result(out: Path, rollout_id: str, **fields: Any) -> None:
    path = out / "rollouts" / rollout_id / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def log(out: Path, rollout_id: str) -> str:
    return (out / "logs" / f"{rollout_id}.log").read_text()


def _per_second(out: Path, rollout_id: str) -> float:
    """The batch's own price of one second of this pool's desktop (from a rollout it priced)."""
    priced = row(out, rollout_id)
    rate = float(priced["infrastructure_cost_usd"]) / float(priced["infrastructure_seconds"])
    assert rate > 0
    return rate


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --- finished rollouts ------------------------------------------------------------------------


def test_finished_unscored_rollouts_are_scored_each_against_its_own_task(pool: Pool) -> None:
    # Config order is not id order, and the tasks alternate: scoring a rollout with another
    # rollout's assignment (its neighbour, the first id below or above it) gives it the other
    # task's gold, which its drawing does not match.
    rollouts = [("r-c", CIRCLE_ONLY), ("r-b", LINE_AND_CIRCLE), ("r-a", CIRCLE_ONLY), ("r-d", LINE_AND_CIRCLE)]
    out = run(pool, rollouts, evaluation=True)
    scored = {rid: row(out, rid)["score"] for rid, _ in rollouts}  # by the pool's own lifecycle
    for rid, _ in rollouts:
        # The controller died while the evaluation ran: nothing of it was kept.
        shutil.rmtree(out / "rollouts" / rid / "evaluation")
        edit_state(out, rid, state="evaluating", finished_at=None, score=None, passed=None)

    plan, code = resume(out)

    assert [(e.rollout_id, e.action) for e in plan.entries] == [(rid, "evaluate") for rid, _ in rollouts]
    rows = {rid: row(out, rid) for rid, _ in rollouts}
    assert {rid: r["state"] for rid, r in rows.items()} == dict.fromkeys(rows, "done")
    assert rows["r-b"]["score"] == rows["r-d"]["score"] == 1.0
    assert rows["r-a"]["score"] is not None and rows["r-a"]["score"] < 1.0
    assert rows["r-c"]["score"] == rows["r-a"]["score"]
    assert {rid: r["score"] for rid, r in rows.items()} == scored  # as the lifecycle scored them
    assert "resume: evaluation of the finished rollout exited with code 0" in log(out, "r-b")
    assert code == 0


class SkipsEvaluation(ExamplePoolPlugin):
    """The example pool with its lifecycle's evaluation left out (a broken third-party backend)."""

    name = "example-pool-skips-evaluation"

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings: PoolSettings = self.parse_settings(request.spec)
        with lease_worker(settings, request.batch_id, request.rollout_id) as url:
            return asyncio.run(child.run({BROKER_URL_ENV: url, BROKER_TOKEN_ENV: os.environ[settings.token_env]}))


def test_a_rollout_whose_backend_skipped_the_evaluation_is_failed_and_resume_scores_it(pool: Pool) -> None:
    register_infrastructure_plugin(SkipsEvaluation())
    try:
        out = run(pool, [("r-a", LINE_AND_CIRCLE)], evaluation=True, backend=SkipsEvaluation.name, exit_code=1)
        skipped = row(out, "r-a")
        # A completed rollout that measured nothing is not "done": the batch says so and why.
        assert (skipped["state"], skipped["score"]) == ("failed", None)
        assert ("evaluation is enabled but backend example-pool-skips-evaluation left no score: its lifecycle "
                "did not evaluate the rollout (autocad-bench-resume evaluates it)") in log(out, "r-a")

        plan, code = resume(out)
    finally:
        default_registry().unregister("infrastructure", SkipsEvaluation.name)
    assert [e.action for e in plan.entries] == ["evaluate"]
    assert (row(out, "r-a")["state"], row(out, "r-a")["score"], code) == ("done", 1.0, 0)


@pytest.mark.parametrize("evaluation", [False, True], ids=["unevaluated", "evaluated"])
def test_a_rollout_that_failed_after_its_controller_died_is_recorded_failed_and_never_scored(
        pool: Pool, evaluation: bool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE), ("r-c", LINE_AND_CIRCLE)],
              evaluation=evaluation)
    for rid in ("r-a", "r-c"):
        edit_result(out, rid, status="failed", failure_class="model_contract_error",
                    failure_detail="the model broke the action contract")
        # A failed rollout whose (optional) evaluation never ran: resume must not run it.
        shutil.rmtree(out / "rollouts" / rid / "evaluation", ignore_errors=True)
    # r-b was scored by its lifecycle before the controller died: resume must not score it again.
    evaluated = {p.name: p.stat().st_mtime_ns for p in (out / "rollouts" / "r-b" / "evaluation").glob("*")}
    assert ("score.json" in evaluated) is evaluation
    edit_state(out, "r-a", state="running", finished_at=None, exit_code=None, failure_class=None)
    # r-c failed while the controller lived: it recorded it (finishing time its own, not the pilot's).
    edit_state(out, "r-c", state="failed", exit_code=0, failure_class="model_contract_error",
               finished_at="2026-12-01T00:00:00Z")
    recorded, scored = row(out, "r-c"), row(out, "r-b")

    plan, code = resume(out)

    assert [(e.rollout_id, e.action) for e in plan.entries] == [
        ("r-a", "failed"), ("r-b", "complete"), ("r-c", "failed")]
    failed = row(out, "r-a")
    assert (failed["state"], failed["failure_class"], failed["score"], failed["passed"]) == (
        "failed", "model_contract_error", None, None)
    # What the controller recorded stays as it recorded it; nothing finished is scored again.
    assert (row(out, "r-c"), row(out, "r-b")) == (recorded, scored)
    if evaluation:
        assert not (out / "rollouts" / "r-a" / "evaluation").exists()
        assert not (out / "rollouts" / "r-c" / "evaluation").exists()
        assert {p.name: p.stat().st_mtime_ns for p in (out / "rollouts" / "r-b" / "evaluation").glob("*")} == evaluated
    assert code == 1


def test_a_rollout_that_finished_after_its_controller_died_keeps_its_file_time_and_recorded_cost(
        pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE)])
    started = datetime.fromisoformat(row(out, "r-a")["started_at"].replace("Z", "+00:00"))
    per_second = _per_second(out, "r-a")
    for rid in ("r-a", "r-b"):
        edit_state(out, rid, state="running", finished_at=None, exit_code=None, infrastructure_seconds=None,
                   infrastructure_cost_usd=None, started_at=started.isoformat())
        paths = out / "rollouts" / rid
        for name in ("run-state.json", "resume-checkpoint.json"):
            os.utime(paths / name, (started.timestamp() + 42.1234, started.timestamp() + 42.1234))
    # r-a: the pilot wrote its result, the dead controller never added the sandbox's time or cost.
    edit_result(out, "r-a", infrastructure_seconds=None, infrastructure_cost_usd=None, wall_seconds=0.5)
    # r-b: a live process timed it and priced it before the controller died.
    edit_result(out, "r-b", infrastructure_seconds=7.0, infrastructure_cost_usd=0.5, wall_seconds=0.5)

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["complete", "complete"]
    timed_by_files, timed_live = row(out, "r-a"), row(out, "r-b")
    assert timed_by_files["state"] == "done" and timed_by_files["infrastructure_seconds"] == 42.123
    # Priced at the rate the batch priced its own run at (the pool's fallback hourly rate).
    assert timed_by_files["infrastructure_cost_usd"] == pytest.approx(42.123 * per_second, rel=0.02)
    assert (timed_live["state"], timed_live["infrastructure_seconds"], timed_live["infrastructure_cost_usd"]) == (
        "done", 7.0, 0.5)
    assert code == 0


# --- interrupted attempts ------------------------------------------------------------------------


def _interrupt(out: Path, rollout_id: str, earlier: int, **spend: Any) -> str:
    """Make the current attempt of ``rollout_id`` the ``earlier + 1``-th, stopped by the operator
    after ``earlier`` interrupted attempts; its attempt id."""
    batch_id = state(out)["batch_id"]
    previous = [{"attempt_id": f"{batch_id}.{rollout_id}.{n}", "failure_class": "interrupted", "turns": 1,
                 "actions": 1, "token_cost_usd": 0.01, "infrastructure_seconds": 1.0,
                 "infrastructure_cost_usd": 0.001, "finished_at": "2026-01-01T00:00:00Z",
                 "archived_to": f"interrupted/{rollout_id}/attempt-{n}"} for n in range(1, earlier + 1)]
    for entry in previous:  # each earlier restart moved its attempt's files there
        (out / str(entry["archived_to"])).mkdir(parents=True)
    current = f"{batch_id}.{rollout_id}.{earlier + 1}"
    edit_state(out, rollout_id, state="running", finished_at=None, exit_code=None, attempt_id=current,
               earlier_attempts=previous, **spend)
    edit_result(out, rollout_id, attempt_id=current, status="failed", failure_class="interrupted",
                failure_detail="SIGINT", infrastructure_seconds=3.0, infrastructure_cost_usd=None)
    return current


@pytest.mark.parametrize("earlier", [0, 1, 9])
def test_an_interrupted_attempt_is_archived_after_the_earlier_ones_with_the_spend_the_batch_recorded(
        pool: Pool, earlier: int) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    batch_id, per_second = state(out)["batch_id"], _per_second(out, "r-a")
    # Neither the batch nor the result priced the attempt's 12.5 s: resume prices them.
    stopped = _interrupt(out, "r-a", earlier, token_cost_usd=0.25, infrastructure_seconds=12.5,
                         infrastructure_cost_usd=None)

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["restart"]
    entry = row(out, "r-a")
    assert entry["state"] == "done" and entry["attempt_id"] == f"{batch_id}.r-a.{earlier + 2}"
    assert len(entry["earlier_attempts"]) == earlier + 1
    archived = entry["earlier_attempts"][-1]
    assert {k: archived[k] for k in ("attempt_id", "failure_class", "token_cost_usd", "infrastructure_seconds",
                                     "archived_to")} == {
        "attempt_id": stopped, "failure_class": "interrupted", "token_cost_usd": 0.25,
        "infrastructure_seconds": 12.5, "archived_to": f"interrupted/r-a/attempt-{earlier + 1}"}
    assert archived["infrastructure_cost_usd"] == pytest.approx(12.5 * per_second, rel=0.02)
    moved = json.loads((out / "interrupted" / "r-a" / f"attempt-{earlier + 1}" / "result.json").read_text())
    assert (moved["attempt_id"], moved["failure_class"]) == (stopped, "interrupted")
    assert json.loads((out / "rollouts" / "r-a" / "result.json").read_text())["status"] == "completed"
    assert code == 0


def test_a_resume_prices_with_the_table_the_batch_recorded_not_the_resuming_shells(
        pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    per_second = _per_second(out, "r-a")
    _interrupt(out, "r-a", 0, token_cost_usd=0.25, infrastructure_seconds=12.5, infrastructure_cost_usd=None)
    # The shell that resumes has another price list: every desktop hour (listed or fallback) at $1,000.
    dearer = pool.root / "dearer-prices.json"
    dearer.write_text(json.dumps({"infrastructure_hourly_usd": {"example-pool": 1000, "any-other": 1000}}))
    monkeypatch.setenv("AUTOCAD_BENCH_PRICING_JSON", str(dearer))
    recorded = state(out)["pricing"]

    resume(out)

    entry = row(out, "r-a")
    (archived,) = entry["earlier_attempts"]
    assert archived["infrastructure_cost_usd"] == pytest.approx(12.5 * per_second, rel=0.02)
    assert entry["state"] == "done"
    assert _per_second(out, "r-a") == pytest.approx(per_second, rel=0.02)
    assert state(out)["pricing"] == recorded


@pytest.mark.parametrize(("batch_cost", "result_seconds", "result_cost", "seconds", "cost"), [
    (0.0, 3.0, 0.9, 3.0, 0.0),  # the batch's 0.0 is a price, not a missing one
    (None, 3.0, 0.9, 3.0, 0.9),  # nothing recorded by the batch: the result's own
    (None, None, None, None, 0.0),  # no time known anywhere: nothing to price
], ids=["batch-priced", "result-priced", "untimed"])
def test_an_archived_attempt_keeps_the_spend_recorded_first_by_the_batch_then_by_its_result(
        pool: Pool, batch_cost: float | None, result_seconds: float | None, result_cost: float | None,
        seconds: float | None, cost: float) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    _interrupt(out, "r-a", 0, token_cost_usd=None, infrastructure_seconds=None, infrastructure_cost_usd=batch_cost)
    edit_result(out, "r-a", token_cost_usd=0.125, infrastructure_seconds=result_seconds,
                infrastructure_cost_usd=result_cost)

    resume(out)

    (archived,) = row(out, "r-a")["earlier_attempts"]
    assert (archived["token_cost_usd"], archived["infrastructure_seconds"], archived["infrastructure_cost_usd"]) == (
        0.125, seconds, cost)


# Ids past 64 characters are not shared objects of pydantic's string cache: an identity test
# in place of equality shows there.
@pytest.mark.parametrize("rollout_id", ["r-a", "r-a-whose-rollout-id-is-long-enough-to-make-its-attempt-ids-unique"])
def test_a_restart_repeated_after_a_crash_records_the_attempt_once(pool: Pool, rollout_id: str) -> None:
    out = run(pool, [(rollout_id, LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    stopped = _interrupt(out, rollout_id, 0)
    # The previous resume recorded the attempt and died before it moved the attempt's files.
    recorded = {"attempt_id": stopped, "failure_class": "interrupted", "turns": 3, "actions": 19,
                "token_cost_usd": 0.0, "infrastructure_seconds": 3.0, "infrastructure_cost_usd": 0.0,
                "finished_at": "2026-01-01T00:00:00Z", "archived_to": f"interrupted/{rollout_id}/attempt-1"}
    edit_state(out, rollout_id, state="queued", attempt_id=f"{batch_id}.{rollout_id}.2", earlier_attempts=[recorded])

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["restart"]
    entry = row(out, rollout_id)
    assert entry["earlier_attempts"] == [recorded]
    assert (entry["state"], entry["attempt_id"]) == ("done", f"{batch_id}.{rollout_id}.2")
    assert json.loads((out / "interrupted" / rollout_id / "attempt-1" / "result.json").read_text())[
        "attempt_id"] == stopped
    assert code == 0


def _launched_never_reached_the_model(out: Path, rollout_id: str) -> None:
    """Shape ``rollout_id`` as a controller that died under it leaves a rollout whose desktop
    was launched but whose pilot never reached the model: its directory, no checkpoint, no result."""
    edit_state(out, rollout_id, state="starting", finished_at=None, exit_code=None, failure_class=None,
               turns=None, actions=None, token_cost_usd=None, infrastructure_seconds=None,
               infrastructure_cost_usd=None)
    for name in ("result.json", "resume-checkpoint.json"):
        (out / "rollouts" / rollout_id / name).unlink()


def test_a_restart_that_dies_before_it_moves_a_closed_attempt_restarts_it_and_counts_it_once(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    _launched_never_reached_the_model(out, "r-a")
    # The first resume closes the attempt (infrastructure_lost: no signal stopped the batch),
    # records it as an earlier attempt, and dies before it moves the attempt's files away (the
    # archive cannot be created).
    (out / "interrupted").write_text("in the way")
    with pytest.raises(OSError):
        resume(out)
    (out / "interrupted").unlink()
    (recorded,) = row(out, "r-a")["earlier_attempts"]
    assert recorded["attempt_id"] == f"{batch_id}.r-a.1"
    assert json.loads((out / "rollouts" / "r-a" / "result.json").read_text())["attempt_id"] == f"{batch_id}.r-a.1"

    plan, code = resume(out)

    # Its closed attempt is already on record: the move is finished and attempt 2 runs. Planned as
    # "failed", the closed attempt would be recorded again as the rollout's own outcome.
    assert [e.action for e in plan.entries] == ["restart"]
    entry = row(out, "r-a")
    assert entry["earlier_attempts"] == [recorded]
    assert (entry["state"], entry["attempt_id"], entry["failure_class"]) == ("done", f"{batch_id}.r-a.2", None)
    moved = json.loads((out / "interrupted" / "r-a" / "attempt-1" / "result.json").read_text())
    assert (moved["attempt_id"], moved["failure_class"]) == (f"{batch_id}.r-a.1", "infrastructure_lost")
    assert code == 0


def test_a_restart_that_dies_right_after_closing_the_attempt_still_restarts_it_and_counts_it_once(
        pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    import autocad_bench.controller.resume as resume_module

    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    _launched_never_reached_the_model(out, "r-a")
    close = resume_module.close_from_checkpoint

    def close_then_die(*args: Any, **kwargs: Any) -> None:
        close(*args, **kwargs)
        raise SystemExit("killed after the attempt was closed, before its restart was recorded")

    # The first resume closes the attempt (its result written, the rollout recorded failed with
    # its spend) and dies before it records the attempt as an earlier one and queues the next.
    with monkeypatch.context() as patch, pytest.raises(SystemExit):
        patch.setattr(resume_module, "close_from_checkpoint", close_then_die)
        resume(out)
    closed = row(out, "r-a")
    assert (closed["state"], closed["failure_class"]) == ("failed", "infrastructure_lost")
    assert closed["earlier_attempts"] == []

    plan, code = resume(out)

    # The restart is still owed: planned as "failed", a rollout that never reached the model
    # would end failed for a crash of the controller that was restarting it.
    assert [(e.action, e.reason.split(";")[0]) for e in plan.entries] == [
        ("restart", "closed by an earlier resume that died before it could restart it")]
    entry = row(out, "r-a")
    (recorded,) = entry["earlier_attempts"]
    assert (recorded["attempt_id"], recorded["failure_class"]) == (f"{batch_id}.r-a.1", "infrastructure_lost")
    assert recorded["infrastructure_cost_usd"] == closed["infrastructure_cost_usd"]
    assert (entry["state"], entry["attempt_id"], entry["failure_class"]) == ("done", f"{batch_id}.r-a.2", None)
    assert code == 0


def test_a_rollout_recorded_failed_whose_pilot_then_completed_is_recorded_done(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    # The stop closed it as failed; its pilot outlived the stop and wrote its own (completed) result.
    edit_state(out, "r-a", state="failed", failure_class="interrupted")

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["complete"]
    assert (row(out, "r-a")["state"], row(out, "r-a")["failure_class"], code) == ("done", None, 0)


def _caught_in_flight(out: Path, rollout_id: str) -> None:
    """Shape ``rollout_id`` as a SIGTERM leaves a rollout it caught mid-turn whose desktop went
    down with the batch: a checkpoint, no result, no worker; the batch interrupted."""
    data = state(out)
    data.update(status="interrupted", interruption={"signal": "SIGTERM", "exit_code": 143,
                                                    "at": "2026-12-01T00:00:00Z"})
    (out / "batch-state.json").write_text(json.dumps(data))
    edit_state(out, rollout_id, state="running", finished_at=None, exit_code=None)
    (out / "rollouts" / rollout_id / "result.json").unlink()


def test_a_rollout_the_signal_caught_in_flight_restarts_with_its_attempt_closed_as_interrupted(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    _caught_in_flight(out, "r-a")

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["restart"]
    entry = row(out, "r-a")
    (archived,) = entry["earlier_attempts"]
    assert archived["failure_class"] == "interrupted"
    moved = json.loads((out / "interrupted" / "r-a" / "attempt-1" / "result.json").read_text())
    assert moved["failure_detail"].startswith("caught in flight by the SIGTERM that stopped the batch")
    assert entry["state"] == "done" and state(out)["interruption"] is None
    assert code == 0


def test_a_resume_that_dies_before_it_queued_everything_is_planned_again_from_the_same_facts(
        pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE)])
    _caught_in_flight(out, "r-a")
    _caught_in_flight(out, "r-b")
    # The first resume dies at r-a, while it archives the attempt (the archive cannot be
    # created), before it reached r-b.
    (out / "interrupted").write_text("in the way")
    with pytest.raises(OSError):
        resume(out)
    (out / "interrupted").unlink()

    plan, code = resume(out)

    # r-a's attempt was recorded before the resume died: only its move is left. r-b is still the
    # signal's rollout, restarted: not "lost" (closed as an infrastructure failure).
    batch_id = state(out)["batch_id"]
    assert [(e.rollout_id, e.action, e.reason.split(" (")[0].split(";")[0]) for e in plan.entries] == [
        ("r-a", "restart", f"attempt {batch_id}.r-a.1 is already recorded as an earlier attempt, but its files "
                           "were never moved to interrupted/r-a/attempt-1"),
        ("r-b", "restart", "caught in flight by the SIGTERM that stopped the batch")]
    for rid in ("r-a", "r-b"):
        entry = row(out, rid)
        assert [a["failure_class"] for a in entry["earlier_attempts"]] == ["interrupted"]
        assert entry["state"] == "done"
    assert state(out)["interruption"] is None and code == 0


# --- workers, admission, configuration --------------------------------------------------------------


def test_workers_still_held_for_finished_rollouts_are_released(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    # The controller died before it released r-b's desktop (r-a's was released).
    (pool.leases / "1.lease").write_text(json.dumps({"batch_id": batch_id, "rollout_id": "r-b",
                                                     "pid": dead_pid()}))
    recorded = [row(out, "r-a"), row(out, "r-b")]

    plan, code = resume(out)

    assert [e.action for e in plan.entries] == ["complete", "complete"]
    # (The lease file itself says nothing: the batch's closing reap removes it anyway.)
    assert "resume: released worker 1 of this complete rollout\n" in log(out, "r-b")
    assert "released worker" not in log(out, "r-a")
    assert [row(out, "r-a"), row(out, "r-b")] == recorded  # finished and recorded: left as they were
    assert code == 0


def test_the_worker_of_a_lost_rollout_is_released(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    # The controller died mid-rollout; the rollout's desktop is still listed (its lease), but
    # the backend cannot reconnect it (here: the plan is told so, as a broken desktop would).
    edit_state(out, "r-a", state="running", finished_at=None, exit_code=None)
    (out / "rollouts" / "r-a" / "result.json").unlink()
    (pool.leases / "1.lease").write_text(json.dumps({"batch_id": batch_id, "rollout_id": "r-a", "pid": dead_pid()}))
    environ = dict(os.environ)
    host = PluginHost(environ=environ)
    planned = plan_resume(out, host)
    assert [(e.action, e.worker_id) for e in planned.entries] == [("resume", "1")]
    lost = planned.model_copy(update={"entries": [planned.entries[0].model_copy(update={
        "action": "lost", "reconnectable": False, "reason": "worker 1 cannot be reconnected: its desktop is broken"})]})

    code = execute_resume(lost, host, environ)

    assert (row(out, "r-a")["state"], row(out, "r-a")["failure_class"]) == ("failed", "infrastructure_lost")
    assert "resume: released worker 1 of this lost rollout\n" in log(out, "r-a")
    assert code == 1


@pytest.mark.parametrize(("planned", "stale"), [("1", "0"), ("0", "1")])
def test_a_resumed_rollout_keeps_its_planned_worker_and_another_one_listed_for_it_is_released(
        pool: Pool, planned: str, stale: str) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    batch_id = state(out)["batch_id"]
    edit_state(out, "r-a", state="running", finished_at=None, exit_code=None)
    (out / "rollouts" / "r-a" / "result.json").unlink()
    (pool.leases / f"{planned}.lease").write_text(
        json.dumps({"batch_id": batch_id, "rollout_id": "r-a", "pid": dead_pid()}))
    environ = dict(os.environ)
    host = PluginHost(environ=environ)
    plan = plan_resume(out, host)
    assert [(e.action, e.worker_id) for e in plan.entries] == [("resume", planned)]
    # Between the plan and its execution the backend came to list another desktop for the
    # rollout (here: a stale lease of the other worker): the rollout resumes on its planned
    # worker, and the other one is released rather than left held.
    (pool.leases / f"{stale}.lease").write_text(
        json.dumps({"batch_id": batch_id, "rollout_id": "r-a", "pid": dead_pid()}))
    (pool.leases / f"{planned}.lease").unlink()

    execute_resume(plan, host, environ)

    assert f"resume: released worker {stale} of this resume rollout\n" in log(out, "r-a")
    assert not (pool.leases / f"{stale}.lease").exists()


def test_a_resume_that_runs_to_its_end_neither_says_interrupted_nor_hides_a_failed_rollout(
        pool: Pool, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE)])
    _interrupt(out, "r-a", 0)
    # r-b failed before the controller died: it stays failed (failures are never rerun in
    # place), so the resumed batch ends with exit code 1 although its own work succeeded.
    edit_state(out, "r-b", state="failed", failure_class="infrastructure_lost")
    result = json.loads((out / "rollouts" / "r-b" / "result.json").read_text())
    (out / "rollouts" / "r-b" / "result.json").write_text(json.dumps(
        {**result, "status": "failed", "failure_class": "infrastructure_lost"}))
    capsys.readouterr()

    plan, code = resume(out)

    assert [(e.rollout_id, e.action) for e in plan.entries] == [("r-a", "restart"), ("r-b", "failed")]
    assert [(r["rollout_id"], r["state"]) for r in state(out)["rollouts"]] == [("r-a", "done"), ("r-b", "failed")]
    assert code == 1
    assert "batch interrupted" not in capsys.readouterr().err


def test_a_resume_admission_refuses_names_only_the_failed_checks_and_changes_nothing(
        pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)])
    _interrupt(out, "r-a", 0)
    before = (out / "batch-state.json").read_bytes()
    monkeypatch.delenv("EXAMPLE_POOL_TOKEN")

    with pytest.raises(UserError) as refused:
        resume(out)

    lines = [p.message for p in refused.value.problems]
    assert "preflight.token: EXAMPLE_POOL_TOKEN is not set" in lines
    # Only failed checks: every worker answers 401 without the token, no capacity is admitted.
    assert all("401" in message or "not set" in message or "admitting 0" in message for message in lines), lines
    assert (out / "batch-state.json").read_bytes() == before
    assert (out / "rollouts" / "r-a" / "result.json").exists() and not (out / "interrupted").exists()


def test_a_rerun_batch_holding_fewer_rollouts_than_the_configuration_expects_resumes(pool: Pool) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE), ("r-b", LINE_AND_CIRCLE)])
    # A --rerun-failed-from batch of r-a alone: its state holds that one rollout of the two.
    data = state(out)
    data["rollouts"] = [r for r in data["rollouts"] if r["rollout_id"] == "r-a"]
    (out / "batch-state.json").write_text(json.dumps(data))
    shutil.rmtree(out / "rollouts" / "r-b")
    _interrupt(out, "r-a", 0)

    plan, code = resume(out)

    assert [(e.rollout_id, e.action) for e in plan.entries] == [("r-a", "restart")]
    assert [(r["rollout_id"], r["state"]) for r in state(out)["rollouts"]] == [("r-a", "done")]
    assert code == 0


@pytest.mark.parametrize(("before", "after"), [(1, 2), (2, 1)])
def test_a_configuration_whose_trials_changed_is_refused(pool: Pool, before: int, after: int) -> None:
    out = run(pool, [("r-a", LINE_AND_CIRCLE)], trials=before)
    config = pool.root / "batch.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "trials": after, "expected_rollouts": after}))
    batch_id = state(out)["batch_id"]

    with pytest.raises(ConfigError) as refused:
        resume(out)

    assert [(p.location, p.message) for p in refused.value.problems] == [
        (f"{config}: $.trials", f"is {after} but batch {batch_id} started with trials = {before}")]
