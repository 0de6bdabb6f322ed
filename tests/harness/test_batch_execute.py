"""Execute mode end to end: scripted rollouts against fake brokers, in both execution modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench.testing.layout import check_batch_layout
from tests.harness.brokers import fake_brokers

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "scripts" / "line-and-circle.jsonl"
TASKS = REPO / "examples" / "tasks"
CHECK_LAYOUT = REPO.parent / "shared" / "tools" / "check-batch-layout"
SECRETS = {"OPENAI_API_KEY": "sk-test-openai-secret-0001", "ANTHROPIC_API_KEY": "sk-ant-test-secret-0002"}


def batch_config(brokers: list[FakeBroker], lease_dir: Path, mode: str, rollouts: int = 2) -> dict[str, Any]:
    return {
        "name": f"fake-{mode}",
        "expected_rollouts": rollouts,
        "max_concurrency": len(brokers),
        "execution_mode": mode,
        "tasks_dir": str(TASKS),
        "infrastructure": {
            "backend": "example-pool",
            "broker_version": "windows-autocad-2019-v11",
            "settings": {"workers": [b.url for b in brokers], "token_env": "EXAMPLE_POOL_TOKEN",
                         "lease_dir": str(lease_dir)},
        },
        "evaluation": {"enabled": False},
        "rollouts": [
            {"rollout_id": f"scripted-{i}", "task_id": "line-and-circle", "provider": "scripted",
             "model": f"replay-{i}", "provider_options": {"script": str(SCRIPT)}}
            for i in range(rollouts)
        ],
    }


def run_batch(
    tmp_path: Path, brokers: list[FakeBroker], mode: str, name: str, **extra_env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps(batch_config(brokers, tmp_path / f"{name}-leases", mode)))
    out = tmp_path / name
    env = {**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": brokers[0].token, **extra_env}
    result = subprocess.run(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir", str(out)],
                            capture_output=True, text=True, env=env, timeout=300)
    return result, out


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_scripted_batch_produces_the_full_layout(tmp_path: Path, mode: str) -> None:
    with fake_brokers(2, token="shared-broker-token-for-tests-9x") as brokers:
        result, out = run_batch(tmp_path, brokers, mode, mode)
        assert result.returncode == 0, result.stdout + result.stderr
        for broker in brokers:
            # The script's two drawing batches: 9 + 9 inputs, then done: 19 actions, each once, in order.
            assert [i.index for i in broker.injected] == list(range(19))
    state = json.loads((out / "batch-state.json").read_text())
    assert state["counts"] == {"queued": 0, "starting": 0, "running": 0, "evaluating": 0, "done": 2, "failed": 0}
    assert {r["infrastructure_backend"] for r in state["rollouts"]} == {"example-pool"}
    for rollout in ("scripted-0", "scripted-1"):
        result_json = json.loads((out / "rollouts" / rollout / "result.json").read_text())
        assert result_json["status"] == "completed"
        assert result_json["stop_reason"] == "done"
        assert result_json["actions"] == 19
        assert (out / "rollouts" / rollout / "attempt.dxf").exists()
    summary = json.loads((out / "summary.json").read_text())
    # Evaluation is off here: both rollouts completed but neither is a capability sample.
    assert [(m["provider"], m["metrics"]["rollouts"], m["metrics"]["unscored"]) for m in summary["models"]] == [
        ("scripted", 1, 1), ("scripted", 1, 1)]
    assert (out / "summary.csv").read_text().splitlines()[0].startswith("rollout_id,task_id,provider,model")
    secrets = [a for v in SECRETS.values() for a in ("--secret", v)] + ["--secret", brokers[0].token]
    assert check_batch_layout(out, secrets=[*SECRETS.values(), brokers[0].token], evaluation=False) == []
    if CHECK_LAYOUT.exists():  # the shared checker, where this checkout sits next to it
        check = subprocess.run([sys.executable, str(CHECK_LAYOUT), str(out), "--no-evaluation", *secrets],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout


def test_both_modes_produce_identical_trees(tmp_path: Path) -> None:
    trees = {}
    # Shared mode with the pilots on the batch's shared loops (the default) and on their own
    # lifecycle threads' loops (AUTOCAD_BENCH_PILOT_LOOPS=0).
    runs = (("shared", "shared", "2"), ("own-loops", "shared", "0"), ("subprocess", "subprocess", ""))
    for name, mode, loops in runs:
        with fake_brokers(2, token="shared-broker-token-for-tests-9x") as brokers:
            result, out = run_batch(tmp_path, brokers, mode, name, AUTOCAD_BENCH_PILOT_LOOPS=loops)
            assert result.returncode == 0, result.stderr
            trees[name] = tree(out)
    assert trees["shared"] == trees["own-loops"] == trees["subprocess"]


def test_a_bad_pilot_loop_count_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    with fake_brokers(2, token="shared-broker-token-for-tests-9x") as brokers:
        result, out = run_batch(tmp_path, brokers, "shared", "bad-loops", AUTOCAD_BENCH_PILOT_LOOPS="many")
    assert result.returncode == 2, result.stderr
    assert "AUTOCAD_BENCH_PILOT_LOOPS: 'many' is not a whole number from 0 to 64" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_rerun_only_named_failure_classes(tmp_path: Path) -> None:
    previous = tmp_path / "previous"
    (previous).mkdir()
    (previous / "batch-state.json").write_text(json.dumps({"rollouts": [
        {"rollout_id": "scripted-0", "failure_class": "transport_exhausted"},
        {"rollout_id": "scripted-1", "failure_class": None}]}))
    with fake_brokers(2, token="shared-broker-token-for-tests-9x") as brokers:
        config = tmp_path / "c.json"
        config.write_text(json.dumps(batch_config(brokers, tmp_path / "leases", "shared")))
        env = {**os.environ, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        base = ["autocad-bench-batch", "--config", str(config), "--rerun-failed-from", str(previous)]
        plan = subprocess.run([*base, "--failure-class", "transport_exhausted"], capture_output=True, text=True,
                              env=env, timeout=120)
        assert plan.returncode == 0, plan.stderr
        report = json.loads(plan.stdout)
        assert [a["rollout_id"] for a in report["assignments"] if a["enabled"]] == ["scripted-0"]
        none = subprocess.run([*base, "--failure-class", "cleanup_error"], capture_output=True, text=True,
                              env=env, timeout=120)
        assert none.returncode == 2
        assert none.stderr.strip() == f"error: {previous}/batch-state.json: no rollout failed with cleanup_error"
