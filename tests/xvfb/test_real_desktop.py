"""End to end on real desktops: Xvfb + LibreCAD + the broker + the pilot with the scripted provider.

These run the batch CLI exactly as an operator does and check the drawing LibreCAD saved,
that simultaneous sandboxes share nothing, and that no process of a rollout survives a
success, a failure, or a SIGKILLed controller followed by ``reap_batch``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
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
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.sandbox import LocalSandbox
from autocad_bench_xvfb.settings import LocalXvfbSettings

from .conftest import EXAMPLES, SCRIPT, launch_request, needs_desktop, processes_mentioning, spec, write_config

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
            for root in (sandbox.runtime_dir, tmp_path / "state", tmp_path / "batch"):
                for path in root.rglob("*"):
                    if path.is_file():
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


@pytest.mark.parametrize("mode", ["shared", "subprocess"])
def test_reap_after_a_sigkilled_controller_leaves_nothing(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    config = _config(tmp_path, mode, latency_s=120)
    controller = subprocess.Popen(["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir",
                                   str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
    registry = WorkerRegistry(tmp_path / "state")
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
    records = [record for _, record in registry.batch(batch_id)]
    assert len(records) == 1 and records[0] is not None
    record = records[0]
    survivors = processes_mentioning(str(out))
    assert any(ref.is_alive() for ref in record.processes), "the desktop outlives its controller"
    assert survivors

    plan = subprocess.run(["autocad-bench-resume", str(out)], capture_output=True, text=True, timeout=120)
    # The desktop cannot be re-attached yet (its broker token died with the controller), but
    # a lost rollout no longer blocks the plan: execute gives it its end.
    assert plan.returncode == 0, plan.stdout + plan.stderr
    entry = json.loads(plan.stdout)["entries"][0]
    assert entry["action"] == "lost" and entry["worker_id"] == record.worker_id
    assert "token" in entry["reason"] and "infrastructure_lost" in entry["reason"]

    executed = subprocess.run(["autocad-bench-resume", str(out), "--execute"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "CI": "1"})
    assert executed.returncode == 1, executed.stdout + executed.stderr  # one rollout, and it failed
    (row,) = json.loads((out / "batch-state.json").read_text())["rollouts"]
    assert (row["state"], row["failure_class"]) == ("failed", "infrastructure_lost")
    assert row["infrastructure_seconds"] > 0 and row["finished_at"] is not None
    result = json.loads((out / "rollouts" / "line-0" / "result.json").read_text())
    assert result["failure_class"] == "infrastructure_lost" and result["model_responses"] >= 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rollouts"][0]["failure_class"] == "infrastructure_lost"
    assert summary["models"][0]["metrics"]["failure_classes"] == {"infrastructure_lost": 1}
    # The resume's own reconcile reaped the desktop the dead controller left behind.
    _assert_nothing_left(out, tmp_path / "state")
    assert all(not ref.is_alive() for ref in record.processes)
    assert not Path(record.runtime_dir).exists()
    plugin = LocalXvfbPlugin()
    again = plugin.reap_batch(ReapRequest(batch_id=batch_id, spec=spec(tmp_path / "state"), output_dir=out))
    assert again.cleaned == () and again.errors == ()
    rerun = subprocess.run(["autocad-bench-batch", "--config", str(config), "--rerun-failed-from", str(out),
                            "--failure-class", "infrastructure_lost"], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert [a["rollout_id"] for a in json.loads(rerun.stdout)["assignments"] if a["enabled"]] == ["line-0"]
