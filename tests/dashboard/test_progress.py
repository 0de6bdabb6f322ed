"""The CLI progress display: live on a terminal, plain log lines otherwise, driven by the controller."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from autocad_bench.events import RolloutStateEvent
from autocad_bench.progress import BatchProgress, choose_mode
from tests.dashboard.builders import batch_state, entry, rollout_dir, write_batch
from tests.harness.brokers import fake_brokers

REPO = Path(__file__).resolve().parents[2]


def console(terminal: bool = False) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=160, color_system=None), buffer


def event(rollout: str, previous: str, state: str) -> RolloutStateEvent:
    return RolloutStateEvent(batch_id="b", rollout_id=rollout, previous=previous, state=state,  # type: ignore[arg-type]
                             at=datetime.now(UTC))


def test_mode_follows_the_terminal_and_ci() -> None:
    terminal, _ = console(terminal=True)
    plain, _ = console(terminal=False)
    assert choose_mode({}, stdout_isatty=True, console=terminal) == "live"
    assert choose_mode({"CI": "true"}, stdout_isatty=True, console=terminal) == "plain"
    assert choose_mode({}, stdout_isatty=False, console=terminal) == "plain"
    assert choose_mode({}, stdout_isatty=True, console=plain) == "plain"
    assert choose_mode({"AUTOCAD_BENCH_PROGRESS": "off"}, stdout_isatty=True, console=terminal) == "off"
    assert choose_mode({"CI": "1", "AUTOCAD_BENCH_PROGRESS": "live"}, stdout_isatty=False, console=plain) == "live"


def test_plain_lines_for_state_changes_with_counts_and_outcomes(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r0", "starting"), entry("r1", "queued")]))
    out, buffer = console()
    progress = BatchProgress(batch, console=out, mode="plain")
    progress.rollout_state_changed(event("r0", "queued", "starting"))
    progress.rollout_state_changed(event("r0", "queued", "starting"))  # repeated: one line
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "r0: queued -> starting [queued 1 starting 1 running 0 evaluating 0 done 0 failed 0]")
    state = batch_state([entry("r0", "done", turns=3, actions=12, token_cost_usd=0.25, score=0.9, passed=True),
                         entry("r1", "failed", failure_class="transport_exhausted")])
    (batch / "batch-state.json").write_text(json.dumps(state))
    progress.poll()
    progress.rollout_state_changed(event("r0", "running", "evaluating"))  # late event: never go back
    text = buffer.getvalue()
    assert "r0: starting -> done turns=3 actions=12 cost=$0.2500 score=0.900 pass" in text
    assert "r1: queued -> failed" in text and "failure=transport_exhausted" in text
    assert "-> evaluating" not in text


def test_a_wave_of_first_events_reads_the_batch_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every rollout of a wave reports "starting" at once, each from its own thread: one whole
    # read of the batch must serve them all (one per rollout made the start quadratic).
    from autocad_bench.dashboard.reader import RunsRoot

    rollouts = [f"r{i:03d}" for i in range(40)]
    batch = write_batch(tmp_path / "b", batch_state([entry(r, "queued") for r in rollouts]))
    reads: list[int] = []
    original = RunsRoot.read_batch

    def counted(self: RunsRoot, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        time.sleep(0.05)  # a large batch takes a while to read: the other threads arrive meanwhile
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RunsRoot, "read_batch", counted)
    out, buffer = console()
    progress = BatchProgress(batch, console=out, mode="plain")
    barrier = threading.Barrier(len(rollouts))

    def first_event(rollout: str) -> None:
        barrier.wait()
        progress.rollout_state_changed(event(rollout, "queued", "starting"))

    threads = [threading.Thread(target=first_event, args=(r,)) for r in rollouts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reads) == 1
    assert progress.counts["starting"] == len(rollouts)
    assert len(buffer.getvalue().splitlines()) == len(rollouts)


def test_live_display_shows_counts_and_per_rollout_progress(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r0", "running"), entry("r1", "queued"),
                                                     entry("r2", "done", score=0.5, passed=False)]))
    rollout_dir(batch, "r0", turns=7)
    out, buffer = console(terminal=True)
    progress = BatchProgress(batch, console=out, mode="live")
    out.print(progress.render())
    text = buffer.getvalue()
    assert "queued 1" in text and "running 1" in text and "done 1" in text
    row = next(line for line in text.splitlines() if line.startswith("r0"))
    assert "running" in row and " 7 " in row and " 28 " in row and "$0.0700" in row
    assert "0.500 fail" in text


def test_heartbeat_lines_while_rollouts_run(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r0", "running")]))
    rollout_dir(batch, "r0", turns=2)
    out, buffer = console()
    with BatchProgress(batch, console=out, mode="plain", interval_s=0.02, heartbeat_s=0.05):
        time.sleep(0.3)
    assert "r0 running turns=2 actions=8 elapsed=1.0s cost=$0.0200" in buffer.getvalue()


def test_execute_mode_prints_plain_progress_and_keeps_the_summary(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"actions": [{"type": "key", "keys": ["escape"]}]}) + "\n")
    with fake_brokers(2, token="progress-broker-token-for-tests-77") as brokers:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({
            "name": "progress", "expected_rollouts": 2, "max_concurrency": 2, "execution_mode": "shared",
            "tasks_dir": str(REPO / "examples" / "tasks"),
            "infrastructure": {"backend": "example-pool", "broker_version": "windows-autocad-2019-v11",
                               "settings": {"workers": [b.url for b in brokers], "token_env": "EXAMPLE_POOL_TOKEN",
                                            "lease_dir": str(tmp_path / "leases")}},
            "evaluation": {"enabled": False},
            "rollouts": [{"rollout_id": f"p-{i}", "task_id": "line-and-circle", "provider": "scripted",
                          "model": f"m-{i}", "provider_options": {"script": str(script)}} for i in range(2)]}))
        env = {**os.environ, "EXAMPLE_POOL_TOKEN": brokers[0].token}
        env.pop("AUTOCAD_BENCH_PROGRESS", None)
        result = subprocess.run([str(Path(sys.executable).parent / "autocad-bench-batch"), "--config", str(config),
                                 "--execute", "--output-dir", str(tmp_path / "out")], capture_output=True, text=True,
                                env=env, timeout=240)
    assert result.returncode == 0, result.stderr
    for rollout in ("p-0", "p-1"):
        assert f"{rollout}: queued -> starting" in result.stderr
        assert re.search(rf"{rollout}: (starting|running) -> done turns=2 actions=2", result.stderr)
    assert "finished: queued 0 starting 0 running 0 evaluating 0 done 2 failed 0" in result.stderr
    assert "mean score" in result.stderr and "scripted/m-1" in result.stderr  # the final table is printed
    assert json.loads(result.stdout.strip().splitlines()[-1])["counts"]["done"] == 2
    assert (tmp_path / "out" / "summary.json").exists() and (tmp_path / "out" / "summary.csv").exists()
