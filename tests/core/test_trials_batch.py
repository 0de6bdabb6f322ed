"""Repeated trials executed end to end: scripted rollouts against fake brokers.

Each trial is its own rollout (directory, attempt id, trace, state row); the scripted
provider replays ``scripts`` by trial; resume and ``--rerun-failed-from`` work per trial.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocad_bench.broker.protocol import Route
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind
from tests.harness.brokers import fake_brokers

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "scripts" / "line-and-circle.jsonl"  # 19 actions, then done
TASKS = REPO / "examples" / "tasks"
TOKEN = "trials-broker-token-for-tests-4q"


def config(brokers: list[FakeBroker], tmp_path: Path, *, trials: int, assignments: int = 1,
           options: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "trials",
        "expected_rollouts": assignments * trials,
        "trials": trials,
        "max_concurrency": len(brokers),
        "execution_mode": "shared",
        "tasks_dir": str(TASKS),
        "infrastructure": {
            "backend": "example-pool",
            "broker_version": "windows-autocad-2019-v11",
            "settings": {"workers": [b.url for b in brokers], "token_env": "EXAMPLE_POOL_TOKEN",
                         "lease_dir": str(tmp_path / "leases")},
        },
        "evaluation": {"enabled": False},
        "rollouts": [
            {"rollout_id": f"a{i}", "task_id": "line-and-circle", "provider": "scripted", "model": f"replay-{i}",
             "provider_options": options or {"script": str(SCRIPT)}}
            for i in range(assignments)
        ],
    }
    data.update(overrides)
    return data


def cli(command: str, *args: str | Path, broker: FakeBroker) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXAMPLE_POOL_TOKEN": broker.token}
    return subprocess.run([command, *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


def execute(config_path: Path, out: Path, broker: FakeBroker, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return cli("autocad-bench-batch", "--config", config_path, "--execute", "--output-dir", out, *extra,
               broker=broker)


def state(out: Path) -> dict[str, Any]:
    return json.loads((out / "batch-state.json").read_text())


def rollout_dirs(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "rollouts").iterdir())


def receipts(rollout: Path) -> list[int]:
    return [json.loads(line)["index"] for line in (rollout / "input_receipts.jsonl").read_text().splitlines()]


def model_inputs(rollout: Path) -> list[Any]:
    return [json.loads(line).get("action_input") for line in (rollout / "model_turns.jsonl").read_text().splitlines()]


def write_script(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(turn) + "\n" for turn in turns))
    return path


def test_three_trials_run_as_three_rollouts_each(tmp_path: Path) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"name": "trials-suite", "tasks": ["line-and-circle"]}))
    with fake_brokers(2, token=TOKEN) as brokers:
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config(brokers, tmp_path, trials=3, assignments=2, task_suite="suite.json",
                                          budgets={"max_turns": 40})))
        result = execute(path, tmp_path / "out", brokers[0])
        assert result.returncode == 0, result.stdout + result.stderr
        assert sum(len(b.injected) for b in brokers) == 6 * 19
    out = tmp_path / "out"
    ids = [f"a{i}.t{t}" for t in (1, 2, 3) for i in (0, 1)]
    assert rollout_dirs(out) == sorted(ids)
    batch = state(out)
    assert batch["counts"]["done"] == 6
    assert [(r["rollout_id"], r["assignment_id"], r["trial"], r["tool_mode"]) for r in batch["rollouts"]] == [
        (rid, rid.split(".")[0], int(rid[-1]), "function") for rid in ids]
    assert batch["conditions"] == {
        "suite": "trials-suite", "suite_sha256": hashlib.sha256(suite.read_bytes()).hexdigest(),
        "evaluator_version": None, "step_budget": 40, "max_actions": 5000, "trials": 3, "recorded": True}
    attempts = {r["attempt_id"] for r in batch["rollouts"]}
    assert len(attempts) == 6
    for rid in ids:
        rollout = out / "rollouts" / rid
        assignment = json.loads((rollout / "assignment.json").read_text())
        result_json = json.loads((rollout / "result.json").read_text())
        assert (assignment["rollout_id"], assignment["trial"]) == (rid, int(rid[-1]))
        assert result_json["attempt_id"] == assignment["attempt_id"] and result_json["status"] == "completed"
        assert receipts(rollout) == list(range(19))
        assert (out / "logs" / f"{rid}.log").is_file()
    assert {json.loads((out / "rollouts" / rid / "result.json").read_text())["attempt_id"] for rid in ids} == attempts
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["rollout_id"], r["assignment_id"], r["trial"], r["tool_mode"]) for r in summary["rollouts"]] == [
        (rid, rid.split(".")[0], int(rid[-1]), "function") for rid in ids]


def test_single_trial_batch_keeps_ids_and_writes_conditions(tmp_path: Path) -> None:
    with fake_brokers(1, token=TOKEN) as (broker,):
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config([broker], tmp_path, trials=1)))
        result = execute(path, tmp_path / "out", broker)
        assert result.returncode == 0, result.stdout + result.stderr
    batch = state(tmp_path / "out")
    assert rollout_dirs(tmp_path / "out") == ["a0"]
    assert [(r["rollout_id"], r["assignment_id"], r["trial"]) for r in batch["rollouts"]] == [("a0", "a0", 1)]
    assert batch["conditions"] == {"suite": None, "suite_sha256": None, "evaluator_version": None,
                                   "step_budget": None, "max_actions": 5000, "trials": 1, "recorded": True}


def test_scripted_scripts_rotate_by_trial(tmp_path: Path) -> None:
    short = write_script(tmp_path / "short.jsonl", [
        {"actions": [{"type": "key", "keys": ["escape"]}]},
        {"actions": [{"type": "done"}]}])
    with fake_brokers(1, token=TOKEN) as (broker,):
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config([broker], tmp_path, trials=3,
                                          options={"scripts": [str(SCRIPT), "short.jsonl"]})))
        result = execute(path, tmp_path / "out", broker)
        assert result.returncode == 0, result.stdout + result.stderr
    rollouts = tmp_path / "out" / "rollouts"
    long_inputs = [json.loads(line) for line in SCRIPT.read_text().splitlines()]
    short_inputs = [json.loads(line) for line in short.read_text().splitlines()]
    # Trial n replays scripts[(n - 1) % 2]: the long script, the short one, the long one again.
    assert model_inputs(rollouts / "a0.t1") == long_inputs
    assert model_inputs(rollouts / "a0.t2") == short_inputs
    assert model_inputs(rollouts / "a0.t3") == long_inputs
    assert [len(receipts(rollouts / f"a0.t{t}")) for t in (1, 2, 3)] == [19, 2, 19]


def test_rerun_failed_from_runs_only_the_failed_trial(tmp_path: Path) -> None:
    # Trial 2 replays a script the harness rejects ten times in a row: action_rejected.
    write_script(tmp_path / "bad.jsonl", [{"actions": [{"type": "teleport"}]}] * 10)
    with fake_brokers(1, token=TOKEN) as (broker,):
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config([broker], tmp_path, trials=3, assignments=2,
                                          options={"scripts": [str(SCRIPT), "bad.jsonl"]})))
        first = execute(path, tmp_path / "first", broker)
        assert first.returncode == 1, first.stdout + first.stderr
        rows = {r["rollout_id"]: r for r in state(tmp_path / "first")["rollouts"]}
        assert {rid: r["failure_class"] for rid, r in rows.items()} == {
            "a0.t1": None, "a1.t1": None, "a0.t2": "action_rejected", "a1.t2": "action_rejected",
            "a0.t3": None, "a1.t3": None}
        # Make one failure of another class, so the selection is by class and by trial.
        previous_state = state(tmp_path / "first")
        for row in previous_state["rollouts"]:
            if row["rollout_id"] == "a1.t2":
                row["failure_class"] = "transport_exhausted"
        (tmp_path / "first" / "batch-state.json").write_text(json.dumps(previous_state))

        rerun = ("--rerun-failed-from", tmp_path / "first", "--failure-class", "action_rejected")
        planned = cli("autocad-bench-batch", "--config", path, *rerun, broker=broker)
        assert planned.returncode == 0, planned.stderr
        report = json.loads(planned.stdout)
        assert [a["rollout_id"] for a in report["assignments"] if a["enabled"]] == ["a0.t2"]
        assert report["enabled_rollouts"] == 1 and report["allow_partial"] is True
        second = execute(path, tmp_path / "second", broker, *rerun)
        assert second.returncode == 1, second.stdout + second.stderr
    out = tmp_path / "second"
    assert rollout_dirs(out) == ["a0.t2"]
    batch = state(out)
    assert [(r["rollout_id"], r["assignment_id"], r["trial"], r["failure_class"]) for r in batch["rollouts"]] == [
        ("a0.t2", "a0", 2, "action_rejected")]  # trial 2 again, so the second script again
    assert batch["rollouts"][0]["attempt_id"] != rows["a0.t2"]["attempt_id"]
    assert sorted(batch["disabled_rollouts"]) == ["a0.t1", "a0.t3", "a1.t1", "a1.t2", "a1.t3"]
    assert json.loads((out / "rollouts" / "a0.t2" / "assignment.json").read_text())["trial"] == 2
    # The new batch names the one it reran, so pooling both counts trial a0.t2 once: the
    # original model failure stands and the rerun is ignored.
    assert batch["rerun_of"] == previous_state["batch_id"]
    from autocad_bench.metrics import model_rows, read_run

    rows, notes = model_rows([read_run(tmp_path / "first"), read_run(out)])
    assert [r.metrics.rollouts for r in rows if r.model == "replay-0"] == [3]
    assert any("1 rerun rollout(s) were ignored" in note for note in notes)


def test_rerun_refuses_trial_ids_the_config_does_not_plan(tmp_path: Path) -> None:
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "batch-state.json").write_text(json.dumps({"rollouts": [
        {"rollout_id": "a0.t2", "failure_class": "transport_exhausted"}]}))
    with fake_brokers(1, token=TOKEN) as (broker,):
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config([broker], tmp_path, trials=1)))
        result = cli("autocad-bench-batch", "--config", path, "--rerun-failed-from", previous,
                     "--failure-class", "transport_exhausted", broker=broker)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {path}: $.rollouts: rollouts of the earlier batch are missing here: a0.t2 (this configuration "
        "has trials = 1; trial rollouts are named <rollout_id>.t<n> only when trials > 1)")


def _wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_resume_continues_per_trial(tmp_path: Path) -> None:
    with fake_brokers(1, token=TOKEN) as (broker,):
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config([broker], tmp_path, trials=3, execution_mode="subprocess")))
        out = tmp_path / "out"
        env = {**os.environ, "EXAMPLE_POOL_TOKEN": broker.token}
        # One desktop, one rollout at a time: trial 1 (three action requests), then trial 2,
        # whose second batch is held on the wire so the kill lands in the middle of it.
        broker.add_faults(*[Fault(FaultKind.PASS, Route.ACTIONS)] * 4, Fault(FaultKind.DELAY, Route.ACTIONS,
                                                                              delay_s=1.5))
        controller = subprocess.Popen(
            ["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        _wait_for(lambda: len([r for r in broker.requests if r.route == Route.ACTIONS.value]) >= 5)
        wrapper_pid = json.loads((tmp_path / "leases" / "0.lease").read_text())["pid"]
        os.killpg(controller.pid, signal.SIGKILL)
        os.killpg(wrapper_pid, signal.SIGKILL)
        controller.wait(timeout=10)
        first_attempts = {r["rollout_id"]: r["attempt_id"] for r in state(out)["rollouts"]}

        planned = cli("autocad-bench-resume", out, broker=broker)
        assert planned.returncode == 0, planned.stderr
        assert [(e["rollout_id"], e["assignment_id"], e["trial"], e["action"])
                for e in json.loads(planned.stdout)["entries"]] == [
            ("a0.t1", "a0", 1, "complete"), ("a0.t2", "a0", 2, "resume"), ("a0.t3", "a0", 3, "start")]

        # A configuration whose trials changed since the batch started is refused.
        path.write_text(json.dumps(config([broker], tmp_path, trials=2, execution_mode="subprocess")))
        refused = cli("autocad-bench-resume", out, "--execute", broker=broker)
        assert refused.returncode == 2
        assert f"error: {path}: $.trials: is 2 but batch " in refused.stderr
        assert "started with trials = 3" in refused.stderr
        assert not (out / "rollouts" / "a0.t3").exists()

        path.write_text(json.dumps(config([broker], tmp_path, trials=3, execution_mode="subprocess")))
        resumed = cli("autocad-bench-resume", out, "--execute", broker=broker)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        time.sleep(1.6)  # the delayed original request lands too: it must replay, not re-inject
        # Every trial's 19 actions reached the desktop exactly once, trial after trial.
        assert [i.index for i in broker.injected] == list(range(19)) * 3
    batch = state(out)
    assert [(r["rollout_id"], r["trial"], r["state"]) for r in batch["rollouts"]] == [
        ("a0.t1", 1, "done"), ("a0.t2", 2, "done"), ("a0.t3", 3, "done")]
    assert {r["rollout_id"]: r["attempt_id"] for r in batch["rollouts"]} == first_attempts
    for trial, attempts in ((1, 1), (2, 2), (3, 1)):
        rollout = out / "rollouts" / f"a0.t{trial}"
        assignment = json.loads((rollout / "assignment.json").read_text())
        assert (assignment["rollout_id"], assignment["trial"]) == (f"a0.t{trial}", trial)
        result = json.loads((rollout / "result.json").read_text())
        assert (result["status"], result["actions"], result["attempts"]) == ("completed", 19, attempts)
        assert receipts(rollout) == list(range(19))
