"""Ctrl-C and SIGTERM on real desktops: a stopped batch exits in time, leaves nothing running,
keeps every cent it spent and resumes to completion.

The batch runs three rollouts two at a time on real Xvfb + LibreCAD desktops with the scripted
provider slowed down (each model turn takes seconds), so the signal lands while two pilots
wait for the model and the third rollout is still queued.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import EXAMPLES, SCRIPT, needs_desktop, processes_mentioning, write_config

pytestmark = [pytest.mark.integration, needs_desktop]

STOP_BOUND_S = 30.0


def _config(tmp_path: Path, mode: str, *, latency_s: float) -> Path:
    options: dict[str, Any] = {"script": str(SCRIPT), "latency_s": latency_s}
    return write_config(tmp_path / "batch.json", {
        "name": f"stop-{mode}",
        "expected_rollouts": 3,
        "max_concurrency": 2,
        "execution_mode": mode,
        "tasks_dir": str(EXAMPLES / "tasks"),
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"state_dir": str(tmp_path / "state")}},
        "evaluation": {"enabled": False},
        "rollouts": [{"rollout_id": f"r{i}", "task_id": "line-and-circle", "provider": "scripted",
                      "model": f"replay-{i}", "provider_options": options} for i in range(3)],
    })


def _at_the_model(out: Path) -> list[str]:
    """Rollouts whose pilot holds its desktop (frame 0 checkpointed)."""
    found = []
    for checkpoint in sorted(out.glob("rollouts/*/resume-checkpoint.json")):
        try:
            if json.loads(checkpoint.read_text()).get("frame"):
                found.append(checkpoint.parent.name)
        except ValueError:
            continue
    return found


def _start(config: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "CI": "1"})


def _wait_until_two_at_the_model(controller: subprocess.Popen[str], out: Path) -> None:
    deadline = time.monotonic() + 120
    while len(_at_the_model(out)) < 2:
        assert controller.poll() is None, controller.communicate()
        assert time.monotonic() < deadline, "two rollouts never reached the model"
        time.sleep(0.1)


def _assert_nothing_left(tmp_path: Path, out: Path) -> None:
    deadline = time.monotonic() + 5
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(out)) == []
    state_dir = tmp_path / "state"
    assert not state_dir.exists() or not any(state_dir.rglob("*.json"))


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    return {row["rollout_id"]: row for row in json.loads((out / "batch-state.json").read_text())["rollouts"]}


def _spend(out: Path) -> float:
    """Token spend on record: every attempt of every rollout."""
    total = 0.0
    for row in _rows(out).values():
        total += row.get("token_cost_usd") or 0.0
        total += sum(a.get("token_cost_usd") or 0.0 for a in row.get("earlier_attempts", []))
    return total


def _resume_to_completion(out: Path) -> subprocess.CompletedProcess[str]:
    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    actions = {e["rollout_id"]: e["action"] for e in json.loads(plan.stdout)["entries"]}
    assert set(actions.values()) <= {"complete", "restart", "start"}, actions
    assert "start" in actions.values(), "the queued rollout must be started by resume"
    executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "CI": "1"})
    assert executed.returncode == 0, executed.stdout + executed.stderr
    rows = _rows(out)
    assert {row["state"] for row in rows.values()} == {"done"}, rows
    for rollout_id in rows:
        result = json.loads((out / "rollouts" / rollout_id / "result.json").read_text())
        assert result["status"] == "completed" and result["actions"] > 0
        assert (out / "rollouts" / rollout_id / "attempt.dxf").exists()
    return executed


@pytest.mark.parametrize(("mode", "signum"), [
    ("shared", signal.SIGINT),
    # Subprocess-mode forwarding also runs by default: on AWS, Hyper-V and in the double-signal test.
    pytest.param("subprocess", signal.SIGTERM, marks=pytest.mark.slow)])
def test_one_signal_stops_within_bounds_and_the_batch_resumes_to_completion(
        tmp_path: Path, mode: str, signum: int) -> None:
    out = tmp_path / "out"
    controller = _start(_config(tmp_path, mode, latency_s=4.0), out)
    try:
        _wait_until_two_at_the_model(controller, out)
        sent = time.monotonic()
        os.kill(controller.pid, signum)
        stdout, stderr = controller.communicate(timeout=STOP_BOUND_S + 30)
        took = time.monotonic() - sent
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    assert controller.returncode == 128 + signum, stdout + stderr
    assert took < STOP_BOUND_S, f"the stop took {took:.1f} s"
    assert f"autocad-bench-resume {out} --execute" in stderr
    _assert_nothing_left(tmp_path, out)
    state = json.loads((out / "batch-state.json").read_text())
    assert state["status"] == "interrupted"
    assert state["interruption"]["signal"] == signal.Signals(signum).name
    assert state["interruption"]["immediate"] is False
    rows = _rows(out)
    stopped = [r for r in rows.values() if r["state"] == "failed"]
    assert len(stopped) == 2 and {r["failure_class"] for r in stopped} == {"interrupted"}
    assert [r["state"] for r in rows.values() if r not in stopped] == ["queued"]
    for row in stopped:
        result = json.loads((out / "rollouts" / row["rollout_id"] / "result.json").read_text())
        assert result["failure_class"] == "interrupted" and "stopped by SIG" in result["failure_detail"]
        assert result["token_cost_usd"] == row["token_cost_usd"]
    spent_before = _spend(out)

    _resume_to_completion(out)
    rows = _rows(out)
    restarted = [rows[r["rollout_id"]] for r in stopped]
    assert all(len(r["earlier_attempts"]) == 1 for r in restarted)
    assert all(r["earlier_attempts"][0]["failure_class"] == "interrupted" for r in restarted)
    assert _spend(out) >= spent_before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["done"] == 3
    _assert_nothing_left(tmp_path, out)


def test_a_second_sigint_tears_everything_down_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    controller = _start(_config(tmp_path, "subprocess", latency_s=4.0), out)
    try:
        _wait_until_two_at_the_model(controller, out)
        sent = time.monotonic()
        os.kill(controller.pid, signal.SIGINT)
        time.sleep(0.5)
        os.kill(controller.pid, signal.SIGINT)
        stdout, stderr = controller.communicate(timeout=STOP_BOUND_S)
        took = time.monotonic() - sent
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    assert controller.returncode == 130, stdout + stderr
    assert took < STOP_BOUND_S
    _assert_nothing_left(tmp_path, out)
    state = json.loads((out / "batch-state.json").read_text())
    assert state["status"] == "interrupted" and state["interruption"]["immediate"] is True

    # Caught in flight by the teardown: closed as interrupted from their checkpoints, by the
    # controller when its worker threads got there before it exited, else by resume.
    caught = [r["rollout_id"] for r in _rows(out).values()
              if r["state"] in ("starting", "running") or r["failure_class"] == "interrupted"]
    assert len(caught) == 2, _rows(out)
    # Resume keeps each caught attempt's spend and runs the rollout again.
    _resume_to_completion(out)
    rows = _rows(out)
    for rollout_id in caught:
        (earlier,) = rows[rollout_id]["earlier_attempts"]
        assert earlier["failure_class"] == "interrupted"
        archived = out / earlier["archived_to"]
        assert json.loads((archived / "result.json").read_text())["failure_class"] == "interrupted"
    _assert_nothing_left(tmp_path, out)
