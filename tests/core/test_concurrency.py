"""Concurrency caps: the in-process limiter and the cross-process lease registry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from autocad_bench.costs import ActiveRolloutRegistry, ConcurrencyLimiter, ConcurrencyLimitReached

REPO = Path(__file__).resolve().parents[2]

# -- in-process limiter ----------------------------------------------------------------------


def test_limiter_fails_fast_when_full() -> None:
    limiter = ConcurrencyLimiter(2)
    assert limiter.acquire() and limiter.acquire()
    refused = limiter.acquire()
    assert not refused
    assert (refused.active, refused.limit) == (2, 2)
    assert "2 of 2" in refused.reason
    limiter.release()
    assert limiter.acquire().admitted
    assert limiter.available == 0


def test_limiter_rejects_double_release_and_bad_caps() -> None:
    limiter = ConcurrencyLimiter(1)
    with pytest.raises(RuntimeError):
        limiter.release()
    with pytest.raises(ValueError):
        ConcurrencyLimiter(0)


def test_limiter_hold_releases_on_exit_and_raises_when_full() -> None:
    limiter = ConcurrencyLimiter(1)
    with limiter.hold():
        assert limiter.active == 1
        with pytest.raises(ConcurrencyLimitReached), limiter.hold():
            pass
    assert limiter.active == 0


def test_limiter_never_exceeds_cap_under_thread_contention() -> None:
    limiter = ConcurrencyLimiter(3)
    peak = 0
    peak_lock = threading.Lock()
    admitted = 0

    def worker() -> None:
        nonlocal peak, admitted
        for _ in range(2_000):
            if limiter.acquire():
                with peak_lock:
                    peak = max(peak, limiter.active)
                    admitted += 1
                limiter.release()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak <= 3
    assert admitted > 0
    assert limiter.active == 0


# -- cross-process registry ------------------------------------------------------------------


def test_registry_caps_and_releases(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=2)
    assert registry.try_acquire("r1")
    assert registry.try_acquire("r2")
    refused = registry.try_acquire("r3")
    assert not refused and "2 of 2" in refused.reason
    assert [lease.rollout_id for lease in registry.active_leases()] == ["r1", "r2"]
    assert registry.release("r1")
    assert not registry.release("r1")  # already released
    assert registry.try_acquire("r3")
    assert registry.active_count() == 2


def test_registry_refuses_a_rollout_that_is_already_active(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=5)
    assert registry.try_acquire("same")
    second = ActiveRolloutRegistry(tmp_path, max_active=5).try_acquire("same")
    assert not second and "already active" in second.reason


def test_registry_rejects_unsafe_ids(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=1)
    for bad in ("../escape", "", "a/b", ".hidden"):
        with pytest.raises(ValueError):
            registry.try_acquire(bad)


def test_registry_hold_context_manager(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=1)
    with registry.hold("r1") as admission:
        assert admission.lease is not None and admission.lease.pid == os.getpid()
        with pytest.raises(ConcurrencyLimitReached), registry.hold("r2"):
            pass
    assert registry.active_count() == 0


def _write_lease(directory: Path, rollout_id: str, **fields: object) -> Path:
    import socket

    data: dict[str, object] = {
        "rollout_id": rollout_id,
        "pid": os.getpid(),
        "pid_start": "",
        "host": socket.gethostname(),
        "nonce": "x",
        "acquired_at": "2026-01-01T00:00:00+00:00",
    }
    data.update(fields)
    path = directory / f"{rollout_id}.lease"
    path.write_text(json.dumps(data))
    return path


def test_stale_leases_of_dead_processes_are_ignored_and_removed(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)
    stale = _write_lease(tmp_path, "crashed", pid=dead_pid)
    registry = ActiveRolloutRegistry(tmp_path, max_active=1)
    assert registry.try_acquire("fresh")
    assert not stale.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc start times")
def test_a_recycled_pid_does_not_keep_a_stale_lease_alive(tmp_path: Path) -> None:
    # Same pid as a live process (ours) but a different start time: the owner is gone.
    _write_lease(tmp_path, "old-owner", pid=os.getpid(), pid_start="1")
    registry = ActiveRolloutRegistry(tmp_path, max_active=1)
    assert registry.try_acquire("new")


def test_leases_from_other_hosts_always_count(tmp_path: Path) -> None:
    _write_lease(tmp_path, "remote", pid=1, host="some-other-host")
    registry = ActiveRolloutRegistry(tmp_path, max_active=1)
    refused = registry.try_acquire("local")
    assert not refused


_CONTENDER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from autocad_bench.costs import ActiveRolloutRegistry

    state_dir, name, cap, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    registry = ActiveRolloutRegistry(Path(state_dir), max_active=cap)
    sys.stdin.readline()  # barrier: start together
    if mode == "churn":
        # Acquire and release as fast as possible; count lease files without the lock
        # right after each admission: a racy registry would sometimes see cap + 1.
        peak, wins = 0, 0
        for attempt in range(400):
            rollout = f"{name}-{attempt}"
            if registry.try_acquire(rollout):
                wins += 1
                peak = max(peak, len(list(Path(state_dir).glob("*.lease"))))
                registry.release(rollout)
        print(json.dumps({"peak": peak, "wins": wins}), flush=True)
        sys.exit(0)
    admitted = []
    for attempt in range(200):
        rollout = f"{name}-{attempt}"
        if registry.try_acquire(rollout):
            admitted.append(rollout)
    print(json.dumps(admitted), flush=True)
    sys.stdin.readline()  # hold the leases until told to release
    for rollout in admitted:
        registry.release(rollout)
    print("released", flush=True)
    """
)


def _spawn(tmp_path: Path, name: str, cap: int, mode: str = "fill") -> subprocess.Popen[str]:
    script = tmp_path / "contender.py"
    script.write_text(_CONTENDER)
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "registry"), name, str(cap), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


@pytest.mark.integration
def test_two_processes_never_exceed_the_cap_together(tmp_path: Path) -> None:
    cap = 5
    procs = [_spawn(tmp_path, name, cap) for name in ("alpha", "beta")]
    try:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            assert proc.stdout is not None
            results.append(json.loads(proc.stdout.readline()))
        assert sum(len(r) for r in results) == cap  # exactly the cap, shared between them
        registry = ActiveRolloutRegistry(tmp_path / "registry", max_active=cap)
        leases = registry.active_leases()
        assert len(leases) == cap
        assert {lease.pid for lease in leases} <= {proc.pid for proc in procs}
        assert not registry.try_acquire("parent")

        # A controller dies without releasing: its leases stop counting.
        victim = procs[0] if results[0] else procs[1]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        survivors = registry.active_leases()
        assert all(lease.pid != victim.pid for lease in survivors)
        assert len(survivors) == cap - len(results[procs.index(victim)])
        assert registry.try_acquire("parent")

        # The survivor releases cleanly.
        survivor = procs[1] if victim is procs[0] else procs[0]
        assert survivor.stdin is not None and survivor.stdout is not None
        survivor.stdin.write("release\n")
        survivor.stdin.flush()
        assert survivor.stdout.readline().strip() == "released"
        assert [lease.rollout_id for lease in registry.active_leases()] == ["parent"]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.mark.integration
def test_two_processes_churning_leases_never_overshoot(tmp_path: Path) -> None:
    cap = 2
    procs = [_spawn(tmp_path, name, cap, mode="churn") for name in ("alpha", "beta", "gamma")]
    try:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            assert proc.stdout is not None
            reports.append(json.loads(proc.stdout.readline()))
            assert proc.wait(timeout=60) == 0
        assert all(1 <= report["peak"] <= cap for report in reports)
        assert sum(report["wins"] for report in reports) > 0
        assert ActiveRolloutRegistry(tmp_path / "registry", max_active=cap).active_count() == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
