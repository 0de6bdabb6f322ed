"""End to end on real desktops: Xvfb + LibreCAD + the broker + the pilot with the scripted provider.

These run the batch CLI exactly as an operator does and check the drawing LibreCAD saved,
that simultaneous sandboxes share nothing, that no process of a rollout survives a success
or a failure, and that a SIGKILLed controller's rollout is resumed on its still-running
desktop exactly once (and then leaves nothing behind).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ezdxf.filemanagement import readfile

from autocad_bench.broker.client import BrokerClient
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, ReapRequest
from autocad_bench.testing.layout import check_batch_layout
from autocad_bench_xvfb.health import http_get
from autocad_bench_xvfb.lifecycle import launch_sandbox
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.plugin import LocalXvfbPlugin
from autocad_bench_xvfb.procs import rollout_processes
from autocad_bench_xvfb.registry import WorkerRecord, WorkerRegistry
from autocad_bench_xvfb.sandbox import LocalSandbox
from autocad_bench_xvfb.settings import LocalXvfbSettings
from tests import processes

from .conftest import (
    EXAMPLES,
    REPO,
    SCRIPT,
    launch_request,
    needs_desktop,
    processes_mentioning,
    spec,
    write_config,
)

pytestmark = [pytest.mark.integration, needs_desktop]

CHECK_LAYOUT = Path(__file__).resolve().parents[3] / "shared" / "tools" / "check-batch-layout"


def _config(tmp_path: Path, mode: str, *, rollouts: int = 1, latency_s: float = 0.0) -> Path:
    options: dict[str, Any] = {"script": str(SCRIPT)}
    if latency_s:
        options["latency_s"] = latency_s
    return write_config(tmp_path / "batch.json", {
        "name": f"xvfb-{mode}",
        "expected_rollouts": rollouts,
        "max_concurrency": rollouts,
        "execution_mode": mode,
        "tasks_dir": str(EXAMPLES / "tasks"),
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"state_dir": str(tmp_path / "state")}},
        "evaluation": {"enabled": False},
        "rollouts": [{"rollout_id": f"line-{i}", "task_id": "line-and-circle", "provider": "scripted",
                      "model": f"replay-{i}", "provider_options": options} for i in range(rollouts)],
    })


def _entities(path: Path) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for entity in readfile(path).modelspace():
        if entity.dxftype() == "LINE":
            found.append(("LINE", (tuple(entity.dxf.start)[:2], tuple(entity.dxf.end)[:2])))
        elif entity.dxftype() == "CIRCLE":
            found.append(("CIRCLE", (tuple(entity.dxf.center)[:2], entity.dxf.radius)))
    return found


def _assert_nothing_left(root: Path, state_dir: Path) -> None:
    deadline = time.monotonic() + 5
    while processes_mentioning(str(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(root)) == []
    assert not state_dir.exists() or not any(state_dir.rglob("*.json"))


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_a_real_batch_draws_the_line_and_the_circle(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    result = subprocess.run(["autocad-bench-batch", "--config", str(_config(tmp_path, mode)), "--execute",
                             "--output-dir", str(out)], capture_output=True, text=True, timeout=240)
    log = (out / "logs" / "line-0.log").read_text() if (out / "logs" / "line-0.log").exists() else ""
    assert result.returncode == 0, result.stdout + result.stderr + log
    rollout = out / "rollouts" / "line-0"
    outcome = json.loads((rollout / "result.json").read_text())
    assert outcome["status"] == "completed" and outcome["infrastructure_backend"] == "local-xvfb"
    assert outcome["stop_reason"] == "done" and outcome["actions"] == 19
    entities = _entities(rollout / "attempt.dxf")
    assert ("LINE", ((0.0, 0.0), (100.0, 0.0))) in entities
    assert ("CIRCLE", ((50.0, 50.0), 20.0)) in entities
    frames = sorted((rollout / "frames").glob("*.png"))
    assert len(frames) == 4 and frames[0].read_bytes() != frames[-1].read_bytes()
    assert "nothing of it remains" in log and f"({mode} mode)" in log
    assert json.loads((out / "reconcile.json").read_text()) == {"cleaned": [], "errors": []}
    assert not (out / "runtime").exists(), "the runtime area must be removed with its last rollout"
    assert check_batch_layout(out, evaluation=False) == []
    if CHECK_LAYOUT.exists():  # the shared checker, where this checkout sits next to it
        check = subprocess.run([str(CHECK_LAYOUT), str(out), "--no-evaluation"], capture_output=True, text=True,
                               timeout=60)
        assert check.returncode == 0, check.stdout
    _assert_nothing_left(tmp_path, tmp_path / "state")


def _launch_pair(tmp_path: Path) -> list[LocalSandbox]:
    settings = LocalXvfbSettings(state_dir=str(tmp_path / "state"))
    sandboxes: list[LocalSandbox] = []
    errors: list[BaseException] = []

    def one(rollout_id: str) -> None:
        request = launch_request(tmp_path, spec(tmp_path / "state"), rollout_id=rollout_id)
        try:
            sandboxes.append(launch_sandbox(request, settings, state_dir=tmp_path / "state", mode="shared",
                                            log=LifecycleLog(request.log_path)))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=one, args=(f"r{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for sandbox in sandboxes:
            sandbox.teardown()
        raise errors[0]
    return sorted(sandboxes, key=lambda s: s.identity.rollout_id)


def test_two_simultaneous_sandboxes_share_nothing(tmp_path: Path) -> None:
    sandboxes = _launch_pair(tmp_path)
    try:
        a, b = sandboxes
        assert a.display != b.display and a.url != b.url and a.token != b.token
        assert a.runtime_dir != b.runtime_dir and a.worker_id != b.worker_id
        assert a.url and b.url
        # Each broker accepts only its own token.
        assert http_get(b.url, "/health", a.token, 5)[0] == 401
        assert http_get(a.url, "/health", b.token, 5)[0] == 401

        async def start(sandbox: LocalSandbox) -> None:
            assert sandbox.url
            client = BrokerClient(sandbox.url, sandbox.token)
            lease = await client.lease("line-and-circle", f"attempt-{sandbox.identity.rollout_id}")
            await client.reset(lease.session_id)

        async def both() -> None:
            await asyncio.gather(start(a), start(b))

        asyncio.run(both())
        for sandbox in (a, b):
            assert sandbox.health is not None and sandbox.runtime_dir is not None
            cmdline = Path(f"/proc/{sandbox.health.pid}/cmdline").read_bytes()
            assert sandbox.token.encode() not in cmdline, "the token must never be in argv"
            # The one copy on disk is the 0600 token file next to the record (for recovery).
            token_file = sandbox.registry.token_path(sandbox.record) if sandbox.record else None
            assert token_file is not None and oct(token_file.stat().st_mode & 0o777) == "0o600"
            for root in (sandbox.runtime_dir, tmp_path / "state", tmp_path / "batch"):
                for path in root.rglob("*"):
                    if path.is_file() and path != token_file:
                        assert sandbox.token.encode() not in path.read_bytes(), f"token written to {path}"
        for mine, other in ((a, b), (b, a)):
            assert mine.runtime_dir and other.runtime_dir
            pids = rollout_processes(mine.runtime_dir, mine.worker_id)
            apps = [pid for pid in pids if Path(f"/proc/{pid}/exe").resolve().name == "librecad"]
            assert len(apps) == 1, pids
            env = dict(item.split("=", 1) for item in
                       Path(f"/proc/{apps[0]}/environ").read_bytes().decode().split("\0") if "=" in item)
            assert env["DISPLAY"] == mine.display
            assert env["HOME"].startswith(str(mine.runtime_dir))
            assert BROKER_TOKEN_ENV not in env, "the application must not see the broker token"
            assert not set(pids) & set(rollout_processes(other.runtime_dir, other.worker_id))
    finally:
        reports = [sandbox.teardown() for sandbox in sandboxes]
    assert all(report.ok for report in reports), reports
    _assert_nothing_left(tmp_path, tmp_path / "state")


class FailingChild:
    """A shared-mode child that takes the desktop (LibreCAD starts) and then fails."""

    def __init__(self) -> None:
        self.url: str | None = None

    async def run(self, environ: Mapping[str, str]) -> int:
        client = BrokerClient(environ[BROKER_URL_ENV], environ[BROKER_TOKEN_ENV])
        lease = await client.lease("line-and-circle", "attempt-failing")
        await client.reset(lease.session_id)
        self.url = environ[BROKER_URL_ENV]
        return 1


def test_teardown_after_a_failed_rollout_leaves_nothing(tmp_path: Path) -> None:
    request = launch_request(tmp_path, spec(tmp_path / "state"))
    child = FailingChild()
    assert LocalXvfbPlugin().run_shared(request, child) == 1
    assert child.url is not None, "the child must have reached the desktop"
    assert "child exited with code 1" in request.log_path.read_text()
    _assert_nothing_left(tmp_path, tmp_path / "state")


def _kill_controller_mid_rollout(tmp_path: Path, mode: str, latency_s: float) -> tuple[Path, WorkerRecord]:
    """Run a one-rollout batch and SIGKILL its controller while the pilot waits for the model."""
    out = tmp_path / "out"
    config = _config(tmp_path, mode, latency_s=latency_s)
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir",
                                   str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        checkpoint = out / "rollouts" / "line-0" / "resume-checkpoint.json"
        # Wait until the pilot holds the desktop (frame 0 checkpointed) and waits for the model.
        while not (checkpoint.exists() and '"frame"' in checkpoint.read_text()
                   and json.loads(checkpoint.read_text()).get("frame")):
            assert controller.poll() is None, (out / "logs" / "line-0.log").read_text()
            assert time.monotonic() < deadline, "the rollout never reached the model"
            time.sleep(0.2)
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait(timeout=10)
    finally:
        if controller.poll() is None:
            controller.kill()
    batch_id = json.loads((out / "batch-state.json").read_text())["batch_id"]
    records = [record for _, record in WorkerRegistry(tmp_path / "state").batch(batch_id)]
    assert len(records) == 1 and records[0] is not None
    record = records[0]
    assert any(ref.is_alive() for ref in record.processes), "the desktop outlives its controller"
    return out, record


def _resume(out: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "CI": "1"})
    return plan, executed


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_a_sigkilled_controller_is_resumed_on_its_live_desktop_exactly_once(tmp_path: Path, mode: str) -> None:
    # Subprocess mode: the wrapper carries on without its controller, so the plan must run
    # while it still does: three model turns of 15 s each remain, room for a resume plan that
    # starts slowly on a loaded machine (6 s turns were not always enough in CI).
    out, record = _kill_controller_mid_rollout(tmp_path, mode, latency_s=6 if mode == "shared" else 15)
    assert record.mode == mode
    plan, executed = _resume(out)
    entry = json.loads(plan.stdout)["entries"][0]
    assert (entry["action"], entry["reconnectable"], entry["worker_id"]) == ("resume", True, record.worker_id), entry
    assert entry["worker_state"] == "running"
    assert executed.returncode == 0, executed.stdout + executed.stderr + (out / "logs" / "line-0.log").read_text()
    (row,) = json.loads((out / "batch-state.json").read_text())["rollouts"]
    assert (row["state"], row["failure_class"]) == ("done", None)
    rollout = out / "rollouts" / "line-0"
    result = json.loads((rollout / "result.json").read_text())
    assert (result["status"], result["stop_reason"], result["actions"]) == ("completed", "done", 19)
    # Exactly once: every action index was executed (receipted) once, and the drawing holds
    # each entity once (a batch executed twice would draw it twice).
    receipts = [json.loads(line) for line in (rollout / "input_receipts.jsonl").open()]
    assert [r["index"] for r in receipts] == list(range(19))
    by_request: dict[str, set[bool]] = {}
    for receipt in receipts:
        by_request.setdefault(receipt["request_id"], set()).add(receipt["replayed"])
    assert all(len(flags) == 1 for flags in by_request.values()), by_request
    entities = _entities(rollout / "attempt.dxf")
    assert sorted(entities) == [("CIRCLE", ((50.0, 50.0), 20.0)), ("LINE", ((0.0, 0.0), (100.0, 0.0)))]
    log = (out / "logs" / "line-0.log").read_text()
    if mode == "shared":
        assert "re-attached to the broker" in log, log  # the recovery command took the desktop over
    else:
        assert "adopts it and waits" in log, log  # the wrapper finished the rollout on its own
    # The desktop was torn down exactly once and nothing of the rollout is left.
    _assert_nothing_left(out, tmp_path / "state")
    assert all(not ref.is_alive() for ref in record.processes)
    assert not Path(record.runtime_dir).exists()
    assert not any((tmp_path / "state").rglob("*.token")) if (tmp_path / "state").exists() else True
    batch_id = json.loads((out / "batch-state.json").read_text())["batch_id"]
    again = LocalXvfbPlugin().reap_batch(ReapRequest(batch_id=batch_id, spec=spec(tmp_path / "state"), output_dir=out))
    assert again.cleaned == () and again.errors == ()


def test_the_stored_token_never_reaches_output_logs_or_the_plan(tmp_path: Path) -> None:
    out, record = _kill_controller_mid_rollout(tmp_path, "shared", latency_s=2)
    registry = WorkerRegistry(tmp_path / "state")
    token_path = registry.token_path(record)
    assert oct(token_path.stat().st_mode & 0o777) == "0o600"
    assert oct(token_path.parent.stat().st_mode & 0o777) == "0o700"
    token = registry.read_token(record).encode()
    plan, executed = _resume(out)
    assert executed.returncode == 0, executed.stdout + executed.stderr
    for text in (plan.stdout, plan.stderr, executed.stdout, executed.stderr):
        assert token.decode() not in text
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.name == "line-0.log" for path in files) and any(path.name == "trace.jsonl" or
                                                                   path.suffix == ".jsonl" for path in files)
    for path in files:
        assert token not in path.read_bytes(), f"the broker token was written to {path}"
    assert not token_path.exists(), "the token file goes with the worker record"


DELIBERATE = "AUTOCAD_BENCH_DELIBERATE_FAILURE"


@pytest.mark.skipif(not os.environ.get(DELIBERATE), reason=f"run on demand ({DELIBERATE}=1), by the next test")
def test_deliberately_fails_with_a_sigkilled_controllers_desktop_running(tmp_path: Path) -> None:
    _, record = _kill_controller_mid_rollout(tmp_path, "shared", latency_s=6)
    running = processes_mentioning(str(tmp_path))
    print("DESKTOP-PIDS", *(pid for pid, _ in running))
    print("DESKTOP-ROLES", *(ref.role for ref in record.processes if ref.is_alive()))
    pytest.fail("deliberate failure with the desktop of a SIGKILLed controller running")


def test_a_failing_test_leaves_no_desktop_behind(tmp_path: Path) -> None:
    """The SIGKILLed controller's Xvfb, broker and LibreCAD (re-parented to init) die with the
    failing test that started them: its fixture kills their process groups."""
    inner = tmp_path / "inner"
    test = "test_deliberately_fails_with_a_sigkilled_controllers_desktop_running"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", f"{__file__}::{test}", "-p", "no:cacheprovider", "-rA", f"--basetemp={inner}"],
        capture_output=True, text=True, timeout=280, cwd=REPO, env={**os.environ, DELIBERATE: "1"})
    text = result.stdout + result.stderr
    assert result.returncode == 1 and "deliberate failure with the desktop" in text, text
    pids = [int(pid) for line in re.findall(r"^DESKTOP-PIDS ([\d ]+)$", text, re.M) for pid in line.split()]
    roles = {role for line in re.findall(r"^DESKTOP-ROLES (.+)$", text, re.M) for role in line.split()}
    assert len(pids) >= 3 and {"xvfb", "broker"} <= roles, text
    assert "were still running and were killed" in text, text
    assert not any(processes._alive(pid) for pid in pids), text
    assert processes_mentioning(str(inner)) == []
