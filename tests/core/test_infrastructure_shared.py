"""The pieces every infrastructure backend shares (bounds, wrapper plumbing, evidence, processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.bounds import Bound, EvidenceBounds, TimeScale, bounds_table
from autocad_bench.infrastructure.evidence import archive_attempt
from autocad_bench.infrastructure.processes import pid_alive, pid_exists
from autocad_bench.infrastructure.wrapper import child_environment, run_child_process, run_terminable


def test_time_scale_only_shrinks() -> None:
    scale = TimeScale("EXAMPLE_TIME_SCALE")
    assert scale.factor({}) == 1.0
    assert scale.factor({"EXAMPLE_TIME_SCALE": "0.25"}) == 0.25
    for invalid in ("2", "0", "-1", "fast"):
        assert scale.factor({"EXAMPLE_TIME_SCALE": invalid}) == 1.0


def test_the_table_renders_every_row_and_the_evidence_rows() -> None:
    rows = (Bound("Child after SIGTERM", 10.0, "seconds", "then SIGKILL"), *EvidenceBounds().rows("the end"))
    assert bounds_table(rows).splitlines() == [
        "| Boundary | Bound | Behaviour |",
        "|---|---:|---|",
        "| Child after SIGTERM | 10 seconds | then SIGKILL |",
        "| Evidence retrieval | 300 seconds | total; sub-caps: status 30 s, events and frame events 60 s each, "
        "drawing artifact 150 s |",
        "| Session release | 60 seconds | the end |",
    ]


def test_the_child_sees_neither_backend_nor_evaluation_credentials() -> None:
    # Only the two name lists matter here.
    request = cast(RolloutLaunchRequest, SimpleNamespace(
        child_environment_names=("SHARED_KEY",),
        evaluation=SimpleNamespace(environment_names=("JUDGE_KEY", "SHARED_KEY"))))
    environ = {"PATH": "/bin", "JUDGE_KEY": "j", "SHARED_KEY": "s", "CLOUD_KEY": "c", "SECRET_X": "x"}
    broker = {"AUTOCAD_BENCH_BROKER_URL": "http://broker"}
    assert child_environment(environ, request, broker) == {
        "PATH": "/bin", "SHARED_KEY": "s", "CLOUD_KEY": "c", "SECRET_X": "x", **broker}
    assert child_environment(environ, request, broker, backend_names=("CLOUD_KEY",), secret_prefix="SECRET_") == {
        "PATH": "/bin", "SHARED_KEY": "s", **broker}


def test_a_signal_stops_the_child_and_exits_128_plus_signum() -> None:
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    started: list[float] = []

    def body() -> int:
        started.append(time.monotonic())
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        return run_child_process([sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), 5.0)

    def on_alarm(signum: int, frame: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    try:
        assert run_terminable(body) == 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGALRM, old_alarm)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert time.monotonic() - started[0] < 10


def test_archive_attempt_keeps_the_inputs_and_the_named_records(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    for name in ("assignment.json", "reference.png", "infrastructure.json", "result.json", "events.json"):
        (tmp_path / name).write_text("{}")
    target = archive_attempt(paths, "vm1-attempt1", keep=("infrastructure.json",))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "admission-attempts", "assignment.json", "infrastructure.json", "reference.png"]
    assert sorted(p.name for p in target.iterdir()) == ["events.json", "result.json"]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are told apart through /proc")
def test_a_zombie_exists_but_is_not_alive() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while pid_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pid_exists(process.pid) and not pid_alive(process.pid)
    finally:
        process.wait()
    assert not pid_exists(process.pid) and not pid_alive(0)
