"""Worker records, reap_batch and the recovery hooks, with real processes (no display needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autocad_bench.infrastructure import ActiveWorkersRequest, ReapRequest, RecoveryLaunchRequest
from autocad_bench_xvfb.lifecycle import EXIT_NOT_RECONNECTABLE
from autocad_bench_xvfb.plugin import LocalXvfbPlugin
from autocad_bench_xvfb.procs import WORKER_MARKER_ENV, ProcessRef, boot_id, start_time
from autocad_bench_xvfb.registry import WorkerRecord, WorkerRegistry, batch_key, new_worker_id, utcnow

from .conftest import launch_request, spec

Spawned = list[subprocess.Popen[bytes]]
SLEEPER = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"]


@pytest.fixture
def spawned() -> Iterator[Spawned]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL) if os.getpgid(process.pid) == process.pid else process.kill()
        process.wait()


def _spawn(spawned: Spawned, env: dict[str, str] | None = None,
           new_session: bool = True) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(SLEEPER, env={"PATH": os.environ["PATH"], **(env or {})},
                               start_new_session=new_session)
    spawned.append(process)
    deadline = time.monotonic() + 5
    while start_time(process.pid) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return process


def _dead_owner(role: str = "controller") -> ProcessRef:
    process = subprocess.Popen(["sleep", "0.01"])
    ref = ProcessRef.of(role, process.pid)
    process.wait()
    return ref


def _record(tmp_path: Path, batch_id: str, rollout_id: str, processes: tuple[ProcessRef, ...] = (),
            owner: ProcessRef | None = None) -> WorkerRecord:
    runtime = tmp_path / "runtime" / f"{rollout_id}-x"
    runtime.mkdir(parents=True, exist_ok=True)
    return WorkerRecord(batch_id=batch_id, rollout_id=rollout_id, attempt_id="a", worker_id=new_worker_id(),
                        mode="shared", created_at=utcnow(), hostname="h", owner=owner or _dead_owner(),
                        runtime_dir=str(runtime), processes=processes, display=":99",
                        broker_url="http://127.0.0.1:9")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_batch_keys_are_safe_directory_names() -> None:
    assert "/" not in batch_key("../../etc/passwd") and not batch_key("..").startswith(".")
    assert batch_key("a b") != batch_key("a_b")


def test_reap_kills_recorded_groups_and_strays_but_never_a_reused_pid(tmp_path: Path, spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    broker = _spawn(spawned)
    record = _record(tmp_path, "batch-1", "r1")
    stray = _spawn(spawned, env={"HOME": str(Path(record.runtime_dir) / "broker" / "app" / "home")})
    marked = _spawn(spawned, env={WORKER_MARKER_ENV: record.worker_id})
    # A live process whose PID is recorded with another start time is somebody else's.
    innocent = _spawn(spawned)
    impostor = ProcessRef(role="xvfb", pid=innocent.pid, pgid=innocent.pid,
                          start_time=(start_time(innocent.pid) or 0) + 1, boot_id=boot_id())
    record = record.model_copy(update={"processes": (ProcessRef.of("broker", broker.pid), impostor)})
    registry.write(record)
    other_batch = _spawn(spawned)
    registry.write(_record(tmp_path, "batch-2", "r1", (ProcessRef.of("broker", other_batch.pid),)))

    plugin = LocalXvfbPlugin()
    infrastructure = spec(tmp_path / "state", settle_s=2, broker_shutdown_s=0.2)
    report = plugin.reap_batch(ReapRequest(batch_id="batch-1", spec=infrastructure))
    assert report.errors == ()
    assert len(report.cleaned) == 1 and record.worker_id in report.cleaned[0]
    for process in (broker, stray, marked):
        assert not _alive(process.pid), process.args
    assert _alive(innocent.pid) and _alive(other_batch.pid)
    assert not Path(record.runtime_dir).exists()
    assert registry.batch("batch-1") == []
    assert len(registry.batch("batch-2")) == 1
    again = plugin.reap_batch(ReapRequest(batch_id="batch-1", spec=infrastructure))
    assert again.cleaned == () and again.errors == ()


def test_reap_kills_the_orphans_of_a_recorded_group_whose_leader_died(tmp_path: Path, spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    pid_file = tmp_path / "orphan.pid"
    leader = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                     f"time.sleep(300)' & echo $! > {pid_file}; sleep 0.3"],
        start_new_session=True)
    spawned.append(leader)
    deadline = time.monotonic() + 5
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ref = ProcessRef.of("broker", leader.pid)
    orphan = int(pid_file.read_text())
    leader.wait(timeout=10)  # the leader is gone (reaped); its group lives on in the orphan
    assert _alive(orphan) and os.getpgid(orphan) == leader.pid
    registry.write(_record(tmp_path, "b", "r1", (ref,)))
    infrastructure = spec(tmp_path / "state", broker_shutdown_s=0.2)
    report = LocalXvfbPlugin().reap_batch(ReapRequest(batch_id="b", spec=infrastructure))
    assert report.errors == ()
    assert not _alive(orphan)


def test_recovery_reports_a_live_local_desktop_as_not_reconnectable(tmp_path: Path, spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    broker = _spawn(spawned)
    live = _record(tmp_path, "batch-1", "r1", (ProcessRef.of("broker", broker.pid),))
    gone = _record(tmp_path, "batch-1", "r2", (_dead_owner("broker"),))
    registry.write(live)
    registry.write(gone)
    plugin = LocalXvfbPlugin()
    infrastructure = spec(tmp_path / "state", broker_shutdown_s=0.2)
    session = plugin.create_recovery_session(infrastructure)
    workers = plugin.list_active_workers(session, ActiveWorkersRequest(
        batch_id="batch-1", spec=infrastructure, output_dir=tmp_path))
    assert workers == {"r1": live.worker_id, "r2": gone.worker_id}

    status = plugin.worker_status(session, live.worker_id)
    assert status.state == "running" and not status.reconnectable
    assert "token" in status.detail and "terminate_worker" in status.detail
    status = plugin.worker_status(session, gone.worker_id)
    assert status.state == "terminated" and not status.reconnectable
    assert plugin.worker_status(session, "local-xvfb-0000000000000000").state == "terminated"

    assert plugin.terminate_worker(session, live.worker_id) is True
    assert not _alive(broker.pid)
    assert plugin.terminate_worker(session, live.worker_id) is True  # idempotent
    assert plugin.list_active_workers(session, ActiveWorkersRequest(
        batch_id="batch-1", spec=infrastructure, output_dir=tmp_path)) == {"r2": gone.worker_id}


def test_a_worker_still_run_by_its_live_owner_is_not_reconnectable(tmp_path: Path) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    record = _record(tmp_path, "b", "r1", owner=ProcessRef.of("controller", os.getpid()))
    registry.write(record)
    plugin = LocalXvfbPlugin()
    session = plugin.create_recovery_session(spec(tmp_path / "state"))
    status = plugin.worker_status(session, record.worker_id)
    assert status.state == "running" and not status.reconnectable and str(os.getpid()) in status.detail
    # reap never signals a controller, even when it is recorded as the owner.
    plugin.reap_batch(ReapRequest(batch_id="b", spec=spec(tmp_path / "state")))
    assert registry.batch("b") == []


def test_worker_ids_are_found_in_logs() -> None:
    plugin = LocalXvfbPlugin()
    first, second = new_worker_id(), new_worker_id()
    log = f"x local-xvfb: worker {first} ready\ny local-xvfb: worker {second} ready\n"
    assert plugin.worker_id_from_log(log) == second
    assert plugin.worker_id_from_log("no worker here") is None


def test_the_recovery_command_removes_the_stale_worker_and_says_why(tmp_path: Path, spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    broker = _spawn(spawned)
    infrastructure = spec(tmp_path / "state", broker_shutdown_s=0.2)
    request = launch_request(tmp_path, infrastructure)
    record = _record(tmp_path, request.batch_id, request.rollout_id, (ProcessRef.of("broker", broker.pid),))
    registry.write(record)
    command = LocalXvfbPlugin().build_recovery_command(RecoveryLaunchRequest(
        launch=request, worker_id=record.worker_id, resume_command=request.child_command))
    assert not any("token" in arg.lower() and "=" in arg for arg in command.argv)
    result = subprocess.run(command.argv, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert result.returncode == EXIT_NOT_RECONNECTABLE
    assert not _alive(broker.pid)
    assert registry.batch(request.batch_id) == []
    assert "cannot be reconnected" in request.log_path.read_text()


def test_records_hold_no_token_and_are_private(tmp_path: Path) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    path = registry.write(_record(tmp_path, "b", "r1"))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert "token" not in json.loads(path.read_text())
