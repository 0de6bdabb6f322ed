"""The lifecycle's failure paths with a real Xvfb and a misbehaving stand-in broker.

Each test proves the outcome (exit code, log line) and that nothing of the rollout is left:
no process mentioning the rollout's files, no runtime directory, no worker record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV
from autocad_bench_xvfb.lifecycle import EXIT_LAUNCH_FAILED, run_lifecycle
from autocad_bench_xvfb.plugin import LocalXvfbPlugin
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.settings import LocalXvfbSettings

from .conftest import fake_broker, launch_request, needs_xvfb, processes_mentioning, spec

pytestmark = [pytest.mark.integration, needs_xvfb]


class RecordingChild:
    """A shared-mode child that records the environment it was given."""

    def __init__(self, code: int = 0, error: Exception | None = None) -> None:
        self.code = code
        self.error = error
        self.environ: dict[str, str] | None = None

    async def run(self, environ: Mapping[str, str]) -> int:
        self.environ = dict(environ)
        if self.error is not None:
            raise self.error
        return self.code


def _assert_nothing_left(tmp_path: Path, state_dir: Path) -> None:
    assert processes_mentioning(str(tmp_path)) == []
    runtime = tmp_path / "batch" / "runtime"
    assert not runtime.exists() or not any(runtime.iterdir())
    assert not state_dir.exists() or not any(state_dir.rglob("*.json"))


def test_shared_lifecycle_hands_the_child_a_verified_broker(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir))
    child = RecordingChild(code=5)
    assert LocalXvfbPlugin(broker_command=fake_broker("ok")).run_shared(request, child) == 5
    assert child.environ is not None and set(child.environ) == {BROKER_URL_ENV, BROKER_TOKEN_ENV}
    assert child.environ[BROKER_URL_ENV].startswith("http://127.0.0.1:")
    token = child.environ[BROKER_TOKEN_ENV]
    assert len(token) >= 32
    log = request.log_path.read_text()
    assert "ready: display :" in log and "child exited with code 5" in log and "nothing of it remains" in log
    assert token not in log
    _assert_nothing_left(tmp_path, state_dir)


def test_a_child_that_raises_still_gets_its_desktop_torn_down(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir))
    with pytest.raises(RuntimeError, match="pilot crashed"):
        LocalXvfbPlugin(broker_command=fake_broker("ok")).run_shared(request, RecordingChild(
            error=RuntimeError("pilot crashed")))
    _assert_nothing_left(tmp_path, state_dir)


@pytest.mark.parametrize(("mode", "message"), [
    ("exit", "exited with status 3 before it was ready"),
    ("silent", "did not write its ready file within 1.0 s"),
    ("wrong-pid", "but the backend started PID"),
    ("open", "the broker is not protected"),
])
def test_a_broker_that_fails_handoff_is_replaced_once_then_the_rollout_fails(
        tmp_path: Path, state_dir: Path, mode: str, message: str) -> None:
    request = launch_request(tmp_path, spec(state_dir, launch_timeout_s=1.0))
    child = RecordingChild()
    code = LocalXvfbPlugin(broker_command=fake_broker(mode)).run_shared(request, child)
    assert code == EXIT_LAUNCH_FAILED
    assert child.environ is None, "the child must never start without a verified desktop"
    log = request.log_path.read_text()
    assert log.count("launch attempt") == 2 and "attempt 2 of 2 failed" in log
    assert message in log and "failed before handoff" in log
    _assert_nothing_left(tmp_path, state_dir)


def test_a_broker_that_ignores_sigterm_is_killed_and_its_strays_too(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir, broker_shutdown_s=0.5))
    assert LocalXvfbPlugin(broker_command=fake_broker("ignore-term")).run_shared(request, RecordingChild()) == 0
    assert "broker pid" in request.log_path.read_text()
    _assert_nothing_left(tmp_path, state_dir)
    request = launch_request(tmp_path, spec(state_dir), rollout_id="r2")
    assert LocalXvfbPlugin(broker_command=fake_broker("stray")).run_shared(request, RecordingChild()) == 0
    _assert_nothing_left(tmp_path, state_dir)


def test_a_failing_evaluation_makes_the_sandbox_exit_nonzero(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir), evaluation=True)
    child = RecordingChild()
    code = LocalXvfbPlugin(broker_command=fake_broker("ok")).run_shared(request, child)
    assert child.environ is not None, "the child runs; evaluation comes after it"
    assert code == 1
    status = json.loads((request.output_dir / "evaluation" / "status.json").read_text())
    assert status["state"] == "failed"
    assert "gold_cache" in status["error"]
    _assert_nothing_left(tmp_path, state_dir)


def test_an_interrupted_child_still_gets_its_desktop_torn_down(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir))
    settings = LocalXvfbSettings(state_dir=str(state_dir))
    seen: list[str] = []

    def crash(environ: Mapping[str, str]) -> int:
        record = WorkerRegistry(state_dir).get(request.batch_id, request.rollout_id)
        assert record is not None
        seen.append(record.worker_id)
        raise KeyboardInterrupt  # as if the controller were interrupted right here

    with pytest.raises(KeyboardInterrupt):
        run_lifecycle(request, settings, crash, state_dir=state_dir, mode="shared",
                      broker_command=fake_broker("ok"))
    _assert_nothing_left(tmp_path, state_dir)
    assert seen


def test_a_leftover_worker_of_the_same_rollout_is_removed_first(tmp_path: Path, state_dir: Path) -> None:
    request = launch_request(tmp_path, spec(state_dir))
    plugin = LocalXvfbPlugin(broker_command=fake_broker("ok"))
    settings = LocalXvfbSettings(state_dir=str(state_dir))
    registry = WorkerRegistry(state_dir)
    # Launch a desktop and keep its record as if its controller had died mid-rollout.
    from autocad_bench_xvfb.lifecycle import launch_sandbox
    from autocad_bench_xvfb.logs import LifecycleLog

    stale = launch_sandbox(request, settings, state_dir=state_dir, mode="shared", log=LifecycleLog(request.log_path),
                           broker_command=fake_broker("ok"))
    stale_record = registry.get(request.batch_id, request.rollout_id)
    assert stale_record is not None and stale_record.worker_id == stale.worker_id
    assert plugin.run_shared(request, RecordingChild()) == 0
    log = request.log_path.read_text()
    assert f"worker {stale.worker_id} of an earlier attempt of this rollout is still recorded" in log
    assert all(not ref.is_alive() for ref in stale_record.processes)
    stale.teardown()
    _assert_nothing_left(tmp_path, state_dir)


def test_subprocess_wrapper_runs_the_exact_child_with_only_the_passed_environment(
        tmp_path: Path, state_dir: Path) -> None:
    dump = tmp_path / "child.json"
    child = (sys.executable, "-c",
             "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w')); sys.exit(7)", str(dump))
    request = launch_request(tmp_path, spec(state_dir), child=child).model_copy(update={
        "child_environment_names": ("MODEL_KEY",),
        "evaluation": launch_request(tmp_path, spec(state_dir)).evaluation.model_copy(
            update={"environment_names": ("JUDGE_KEY",)}),
    })
    command = LocalXvfbPlugin(broker_command=fake_broker("ok")).build_rollout_command(request)
    assert set(command.environment_names) == {"MODEL_KEY", "JUDGE_KEY"}
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MODEL_KEY": "model-secret-1234",
           "JUDGE_KEY": "judge-secret-5678"}
    with open(request.log_path, "ab") as log:
        result = subprocess.run(command.argv, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=120)
    assert result.returncode == 7, request.log_path.read_text()
    seen = json.loads(dump.read_text())
    assert seen["MODEL_KEY"] == "model-secret-1234"
    assert "JUDGE_KEY" not in seen, "evaluation-only credentials must not reach the child"
    assert seen[BROKER_URL_ENV].startswith("http://127.0.0.1:") and len(seen[BROKER_TOKEN_ENV]) >= 32
    assert "DISPLAY" not in seen
    text = request.log_path.read_text()
    assert seen[BROKER_TOKEN_ENV] not in text and "model-secret-1234" not in text
    _assert_nothing_left(tmp_path, state_dir)


def test_sigterm_to_the_wrapper_stops_the_child_and_tears_down(tmp_path: Path, state_dir: Path) -> None:
    marker = tmp_path / "child-started"
    child = (sys.executable, "-c", "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(120)",
             str(marker))
    request = launch_request(tmp_path, spec(state_dir), child=child)
    command = LocalXvfbPlugin(broker_command=fake_broker("ok")).build_rollout_command(request)
    with open(request.log_path, "ab") as log:
        process = subprocess.Popen(command.argv, env={"PATH": os.environ["PATH"]}, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        import time

        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline and process.poll() is None, request.log_path.read_text()
            time.sleep(0.05)
        process.terminate()  # the wrapper alone: it must stop its child itself
        assert process.wait(timeout=60) == 128 + 15
    finally:
        if process.poll() is None:
            process.kill()
    _assert_nothing_left(tmp_path, state_dir)
