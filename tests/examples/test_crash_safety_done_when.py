"""Issue 17's acceptance run: a scored local-xvfb batch with an OpenAI-compatible model server
survives kill -9 and Ctrl-C and resumes to completion, losing nothing and running nothing twice.

Six rollouts (three reference-solution tasks, two trials each) run on real Xvfb + LibreCAD
desktops; the model is the ``openai`` provider (the official SDK) talking to a loopback
server that speaks the Responses API and answers each task's reference solution turn by
turn. The batch is killed with SIGKILL mid-run, resumed (plan exit 0, then execute), stopped
with SIGINT mid-resume (exit 130 within 30 s, nothing left running), and resumed again to
completion: every rollout done and scored, spend never lower than before a crash, the
summary's spend equal to the sum of the rollouts', each desktop action executed once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.testing.layout import check_batch_layout
from autocad_bench.testing.wire import RecordedRequest, Reply, ResponsesWire
from tests.xvfb.conftest import needs_desktop, processes_mentioning

pytestmark = [pytest.mark.integration, needs_desktop]

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "suite"
TASKS = ("prim-rectangle", "prim-circle-concentric", "part-plate-four-holes")
SECRET = "sk-done-when-4f9a1c7e2b8d6035"
MODEL = "gpt-done-when"
STOP_BOUND_S = 30.0


class SolutionServer(ResponsesWire):
    """Answers every request with the next turn of its task's reference solution.

    The task is recognised by its prompt in the request; the turn is the number of tool
    results the request already carries (the provider resends its whole short history).
    """

    def __init__(self) -> None:
        super().__init__(catalog=[MODEL], default=self._answer)
        self.solutions = {}
        for task in TASKS:
            prompt = json.loads((SUITE / "tasks" / task / "task.json").read_text())["prompt"]
            lines = (SUITE / "tasks" / task / "solution.librecad.jsonl").read_text().splitlines()
            self.solutions[prompt] = [json.loads(line) for line in lines if line.strip()]

    def _answer(self, recorded: RecordedRequest) -> Reply:
        body = recorded.json()
        text = json.dumps(body)
        script = next((turns for prompt, turns in self.solutions.items() if json.dumps(prompt)[1:-1] in text), None)
        if script is None:
            return self.error_reply(400, "no task prompt recognised")
        turn = sum(1 for item in body.get("input", []) if isinstance(item, dict)
                   and item.get("type") == "function_call_output")
        time.sleep(0.3)  # a model takes a moment: the signals land between and during calls
        return self.tool_call_reply(script[min(turn, len(script) - 1)], call_id=self.next_id("call"))


@pytest.fixture
def server() -> Iterator[SolutionServer]:
    with SolutionServer() as wire:
        yield wire


def _config(tmp_path: Path, url: str) -> Path:
    config = {
        "name": "crash-safety",
        "expected_rollouts": 6,
        "trials": 2,
        "max_concurrency": 3,
        "execution_mode": "shared",
        "task_suite": str(SUITE / "suites" / "smoke.json"),
        "tasks_dir": str(SUITE / "tasks"),
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"state_dir": str(tmp_path / "state")}},
        "evaluation": {"enabled": True, "evaluator_version": "2026.12.3",
                       "gold_cache": str(REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "gold-cache")},
        "rollouts": [{"rollout_id": task, "task_id": task, "provider": "openai", "model": MODEL,
                      "provider_options": {"base_url": url}} for task in TASKS],
    }
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(config))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": SECRET, "CI": "1"}


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    return {r["rollout_id"]: r for r in json.loads((out / "batch-state.json").read_text())["rollouts"]}


def _recorded_spend(out: Path) -> float:
    """Token spend on disk: every rollout's result, else its checkpoint, plus earlier attempts."""
    total = 0.0
    for rollout_id, row in _rows(out).items():
        total += sum(a["token_cost_usd"] for a in row.get("earlier_attempts", []))
        root = out / "rollouts" / rollout_id
        try:
            total += json.loads((root / "result.json").read_text())["token_cost_usd"]
            continue
        except (OSError, ValueError):
            pass
        try:
            ledger = json.loads((root / "resume-checkpoint.json").read_text())["budget"]["ledger"]
            total += float(ledger["total_usd"])
        except (OSError, ValueError, KeyError):
            pass
    return total


def _wait(controller: subprocess.Popen[str], predicate: Any, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert controller.poll() is None, f"exited before {what}: {controller.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _mid_run(out: Path) -> bool:
    """Some rollout finished and another holds a desktop mid-rollout."""
    results = list(out.glob("rollouts/*/result.json"))
    live = [c for c in out.glob("rollouts/*/resume-checkpoint.json") if not (c.parent / "result.json").exists()]
    return bool(results) and bool(live)


def _nothing_left(tmp_path: Path, out: Path) -> None:
    deadline = time.monotonic() + 10
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(out)) == []
    assert not any((tmp_path / "state").rglob("*.json")) if (tmp_path / "state").exists() else True


def test_kill_9_and_ctrl_c_resume_to_a_complete_scored_batch(tmp_path: Path, server: SolutionServer) -> None:
    out = tmp_path / "out"
    config = _config(tmp_path, server.url + "/v1")
    plan = subprocess.run(["autocad-bench-batch", "--config", str(config)], env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr

    # 1. kill -9 mid-run.
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute",
                                   "--output-dir", str(out)], env=_env(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        _wait(controller, lambda: _mid_run(out), "the middle of the batch")
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait(timeout=10)
    finally:
        if controller.poll() is None:
            controller.kill()
    spent_at_crash = _recorded_spend(out)
    assert spent_at_crash > 0

    plan = subprocess.run(["autocad-bench-resume", str(out)], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    actions = {e["rollout_id"]: e["action"] for e in json.loads(plan.stdout)["entries"]}
    assert "lost" not in actions.values(), actions  # live desktops are re-attached, not given up

    # 2. Ctrl-C in the middle of the resume.
    began = datetime.now(UTC)
    resumed = subprocess.Popen(["autocad-bench-resume", str(out), "--execute"], env=_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def resume_running() -> bool:
        return any(r["state"] in ("starting", "running") and r["started_at"]
                   and datetime.fromisoformat(r["started_at"]) > began for r in _rows(out).values())

    try:
        _wait(resumed, resume_running, "the resume to run a rollout")
        spent_before_stop = _recorded_spend(out)
        sent = time.monotonic()
        os.kill(resumed.pid, signal.SIGINT)
        stdout, stderr = resumed.communicate(timeout=STOP_BOUND_S + 30)
        took = time.monotonic() - sent
    finally:
        if resumed.poll() is None:
            os.killpg(resumed.pid, signal.SIGKILL)
    assert resumed.returncode == 130, stdout + stderr
    assert took < STOP_BOUND_S, f"Ctrl-C took {took:.1f} s"
    _nothing_left(tmp_path, out)
    assert _recorded_spend(out) >= spent_before_stop >= spent_at_crash

    # 3. Resume to completion.
    plan = subprocess.run(["autocad-bench-resume", str(out)], env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    final = subprocess.run(["autocad-bench-resume", str(out), "--execute"], env=_env(), capture_output=True,
                           text=True, timeout=900)
    assert final.returncode == 0, final.stdout + final.stderr
    _nothing_left(tmp_path, out)

    rows = _rows(out)
    assert len(rows) == 6 and {r["state"] for r in rows.values()} == {"done"}, rows
    for rollout_id, row in rows.items():
        root = out / "rollouts" / rollout_id
        score = json.loads((root / "evaluation" / "score.json").read_text())
        assert score["score"] == pytest.approx(1.0), (rollout_id, score)
        indices = [json.loads(line)["index"] for line in (root / "input_receipts.jsonl").read_text().splitlines()]
        assert indices == list(range(len(indices))), f"{rollout_id}: an action index recorded twice or skipped"
        assert row["score"] == score["score"]
    assert _recorded_spend(out) >= spent_before_stop
    summary = json.loads((out / "summary.json").read_text())
    assert sum(r["token_cost_usd"] for r in summary["rollouts"]) == pytest.approx(
        sum(r["token_cost_usd"] or 0.0 for r in rows.values())
        + sum(a["token_cost_usd"] for r in rows.values() for a in r["earlier_attempts"]))
    assert check_batch_layout(out, secrets=[SECRET]) == []
