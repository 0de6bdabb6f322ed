"""Worker records, token files, reap_batch and the recovery hooks, with real processes (no display needed)."""

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

from autocad_bench.harness.records import RolloutResult
from autocad_bench.infrastructure import ActiveWorkersRequest, ReapRequest, RecoveryLaunchRequest
from autocad_bench_xvfb.lifecycle import EXIT_NOT_RECONNECTABLE
from autocad_bench_xvfb.plugin import LocalXvfbPlugin
from autocad_bench_xvfb.procs import WORKER_MARKER_ENV, ProcessRef, boot_id, start_time
from autocad_bench_xvfb.registry import (
    TokenFileError,
    WorkerRecord,
    WorkerRegistry,
    batch_key,
    new_worker_id,
    utcnow,
)

from .conftest import FAKE_BROKER, VERSION, launch_request, spec

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


def test_recovery_reports_an_unverifiable_live_desktop_as_not_reconnectable(tmp_path: Path,
                                                                           spawned: Spawned) -> None:
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
    # A broker that never reached the verified handoff cannot prove who it is.
    assert "verified handoff" in status.detail and "terminate_worker" in status.detail
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


# --- the stored broker token ---------------------------------------------------------------

TOKEN = "tok-" + "x" * 40


def test_the_token_file_is_private_from_its_creation_and_goes_with_the_record(tmp_path: Path) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    record = _record(tmp_path, "b", "r1")
    path = registry.write(record)
    previous = os.umask(0)  # even a permissive umask must not widen the file
    try:
        token_path = registry.write_token(record, TOKEN)
    finally:
        os.umask(previous)
    assert token_path == path.with_suffix(".token") and token_path.parent == path.parent
    assert oct(token_path.stat().st_mode & 0o777) == "0o600"
    assert oct(token_path.parent.stat().st_mode & 0o777) == "0o700"
    assert registry.read_token(record) == TOKEN
    assert TOKEN not in path.read_text(), "the record must never hold the token"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == [], "no temporary file is left"
    assert [r.worker_id for _, r in registry.batch("b") if r] == [record.worker_id], "a token is not a record"
    registry.remove(record)
    assert not token_path.exists() and not path.exists() and not path.parent.exists()


def test_an_unsafe_or_foreign_token_file_is_refused(tmp_path: Path) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    record = _record(tmp_path, "b", "r1")
    registry.write(record)
    with pytest.raises(TokenFileError, match="no token file"):
        registry.read_token(record)
    token_path = registry.write_token(record, TOKEN)
    os.chmod(token_path, 0o644)
    with pytest.raises(TokenFileError, match="mode is 0644, not 0600"):
        registry.read_token(record)
    os.chmod(token_path, 0o600)
    if os.getuid() == 0:  # only root can give the file away
        os.chown(token_path, 4242, -1)
        with pytest.raises(TokenFileError, match="owned by uid 4242"):
            registry.read_token(record)
        os.chown(token_path, 0, -1)
    real = token_path.with_name("elsewhere")
    token_path.rename(real)
    token_path.symlink_to(real)
    with pytest.raises(TokenFileError, match="symbolic link"):
        registry.read_token(record)
    token_path.unlink()
    real.rename(token_path)
    other = record.model_copy(update={"worker_id": new_worker_id()})
    with pytest.raises(TokenFileError, match="another worker"):
        registry.read_token(other)
    assert registry.read_token(record) == TOKEN


def _broker(tmp_path: Path, spawned: Spawned, token: str = TOKEN) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """The fake broker (real interface: token from the environment, authenticated /health)."""
    ready = tmp_path / f"ready-{len(spawned)}.json"
    process = subprocess.Popen(
        [sys.executable, str(FAKE_BROKER), "ok", "serve", "--host", "127.0.0.1", "--port", "0", "--app", "librecad",
         "--display", ":99", "--workdir", str(tmp_path / "broker-work"), "--ready-file", str(ready),
         "--broker-version", VERSION],
        env={"PATH": os.environ["PATH"], "AUTOCAD_BENCH_BROKER_TOKEN": token}, start_new_session=True)
    spawned.append(process)
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return process, json.loads(ready.read_text())


def _recoverable(tmp_path: Path, spawned: Spawned, registry: WorkerRegistry, *, batch_id: str = "b",
                 rollout_id: str = "r1", token: str = TOKEN, owner: ProcessRef | None = None,
                 controller: ProcessRef | None = None) -> tuple[WorkerRecord, subprocess.Popen[bytes]]:
    """A worker as a SIGKILLed controller leaves it: record, token file and a live broker."""
    broker, ready = _broker(tmp_path, spawned)
    record = _record(tmp_path, batch_id, rollout_id, (ProcessRef.of("broker", broker.pid),), owner=owner)
    record = record.model_copy(update={"broker_url": ready["url"], "broker_startup_id": ready["startup_id"],
                                       "controller": controller})
    registry.write(record)
    registry.write_token(record, token)
    return record, broker


def test_worker_status_reconnects_a_verified_broker_whose_controller_died(tmp_path: Path, spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    plugin = LocalXvfbPlugin()
    session = plugin.create_recovery_session(spec(tmp_path / "state"))
    good, _ = _recoverable(tmp_path, spawned, registry, rollout_id="good")
    status = plugin.worker_status(session, good.worker_id)
    assert (status.state, status.reconnectable) == ("running", True), status.detail
    assert "takes the desktop over" in status.detail and TOKEN not in status.detail

    wrong, _ = _recoverable(tmp_path, spawned, registry, rollout_id="wrong", token="not-the-brokers-token-0123")
    status = plugin.worker_status(session, wrong.worker_id)
    assert (status.state, status.reconnectable) == ("running", False)
    assert "authenticated /health" in status.detail and "401" in status.detail
    assert "not-the-brokers-token" not in status.detail

    exposed, _ = _recoverable(tmp_path, spawned, registry, rollout_id="exposed")
    os.chmod(registry.token_path(exposed), 0o644)
    status = plugin.worker_status(session, exposed.worker_id)
    assert not status.reconnectable and "0644" in status.detail

    # Another controller still runs it: never taken from under it.
    busy, _ = _recoverable(tmp_path, spawned, registry, rollout_id="busy",
                           owner=ProcessRef.of("controller", os.getpid()))
    status = plugin.worker_status(session, busy.worker_id)
    assert (status.state, status.reconnectable) == ("running", False) and "another controller" in status.detail

    # Subprocess mode: the wrapper carries on without its dead controller and is adopted.
    wrapper = _spawn(spawned)
    orphaned, _ = _recoverable(tmp_path, spawned, registry, rollout_id="orphaned",
                               owner=ProcessRef.of("wrapper", wrapper.pid), controller=_dead_owner())
    status = plugin.worker_status(session, orphaned.worker_id)
    assert (status.state, status.reconnectable) == ("running", True)
    assert "still running" in status.detail and "adopts it" in status.detail
    supervised, _ = _recoverable(tmp_path, spawned, registry, rollout_id="supervised",
                                 owner=ProcessRef.of("wrapper", wrapper.pid),
                                 controller=ProcessRef.of("controller", os.getpid()))
    assert not plugin.worker_status(session, supervised.worker_id).reconnectable

    # Broker gone: as before, nothing to re-attach to.
    os.killpg(spawned[0].pid, signal.SIGKILL)
    spawned[0].wait()
    status = plugin.worker_status(session, good.worker_id)
    assert (status.state, status.reconnectable) == ("terminated", False) and "gone" in status.detail


CHILD = ("import json, os, sys; "
         "json.dump({'url': os.environ.get('AUTOCAD_BENCH_BROKER_URL'), "
         "'token': bool(os.environ.get('AUTOCAD_BENCH_BROKER_TOKEN'))}, open(sys.argv[1], 'w'))")


def test_the_recovery_command_takes_over_a_verified_desktop_and_tears_it_down(tmp_path: Path,
                                                                             spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    infrastructure = spec(tmp_path / "state", broker_shutdown_s=0.2)
    seen = tmp_path / "child-saw.json"
    request = launch_request(tmp_path, infrastructure, child=(sys.executable, "-c", CHILD, str(seen)))
    record, broker = _recoverable(tmp_path, spawned, registry, batch_id=request.batch_id,
                                  rollout_id=request.rollout_id)
    command = LocalXvfbPlugin().build_recovery_command(RecoveryLaunchRequest(
        launch=request, worker_id=record.worker_id, resume_command=request.child_command))
    assert TOKEN not in " ".join(command.argv)
    result = subprocess.run(command.argv, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert result.returncode == 0, request.log_path.read_text()
    child = json.loads(seen.read_text())
    assert child == {"url": record.broker_url, "token": True}, "the child runs against the re-attached broker"
    broker.wait(timeout=10)  # torn down by the recovery command
    assert registry.batch(request.batch_id) == [] and not registry.token_path(record).exists()
    log = request.log_path.read_text()
    assert "re-attached to the broker" in log and "nothing of it remains" in log and TOKEN not in log


def _completed_result(request_output: Path, rollout_id: str) -> None:
    now = utcnow()
    result = RolloutResult(
        rollout_id=rollout_id, attempt_id="a", task_id="line-and-circle", provider="scripted", model="m",
        infrastructure_backend="local-xvfb", status="completed", failure_class=None, stop_reason="done", turns=3,
        actions=19, invalid_turns=0, model_responses=3, usage={}, token_cost_usd=0.0, wall_seconds=1.0,
        drawing=None, attempts=1, started_at=now, finished_at=now, exit_code=0)
    (request_output / "result.json").write_text(result.model_dump_json())


def test_the_recovery_command_adopts_a_wrapper_that_outlived_its_controller(tmp_path: Path,
                                                                           spawned: Spawned) -> None:
    registry = WorkerRegistry(tmp_path / "state")
    infrastructure = spec(tmp_path / "state", broker_shutdown_s=0.2)
    never = tmp_path / "never-run"
    request = launch_request(tmp_path, infrastructure, child=("touch", str(never)))
    wrapper = _spawn(spawned)
    record, broker = _recoverable(tmp_path, spawned, registry, batch_id=request.batch_id,
                                  rollout_id=request.rollout_id, owner=ProcessRef.of("wrapper", wrapper.pid),
                                  controller=_dead_owner())
    command = LocalXvfbPlugin().build_recovery_command(RecoveryLaunchRequest(
        launch=request, worker_id=record.worker_id, resume_command=request.child_command))
    recovering = subprocess.Popen(command.argv, env={"PATH": os.environ["PATH"]})
    try:
        deadline = time.monotonic() + 30
        while "adopts it and waits" not in (request.log_path.read_text() if request.log_path.exists() else ""):
            assert recovering.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)
        assert recovering.poll() is None, "recover must wait while the adopted wrapper runs"
        assert broker.poll() is None, "nothing of a running rollout is touched"
        # The wrapper finishes the rollout (its pilot wrote result.json) and exits.
        _completed_result(request.output_dir, request.rollout_id)
        os.kill(wrapper.pid, signal.SIGKILL)
        assert recovering.wait(timeout=60) == 0, request.log_path.read_text()
    finally:
        if recovering.poll() is None:
            recovering.kill()
    assert not never.exists(), "an adopted rollout is never run a second time"
    assert registry.batch(request.batch_id) == [] and not registry.token_path(record).exists()
    # The wrapper died without its teardown: recover removed the desktop, without rerunning the child.
    assert "only its teardown was missing" in request.log_path.read_text()
