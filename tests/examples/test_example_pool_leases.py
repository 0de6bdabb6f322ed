"""The example pool's worker leases: one holder per worker, a wave spreads, stale leases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from example_autocad_backend.plugin import PoolSettings, lease_worker
from tests.harness.brokers import fake_brokers

TOKEN = "example-pool-lease-test-token-0001"


def _settings(urls: list[str], lease_dir: Path) -> PoolSettings:
    return PoolSettings(workers=urls, token_env="EXAMPLE_POOL_LEASE_TOKEN", lease_dir=str(lease_dir))


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_POOL_LEASE_TOKEN", TOKEN)


def test_a_wave_of_rollouts_holds_distinct_workers_and_releases_them(tmp_path: Path) -> None:
    with fake_brokers(8, token=TOKEN) as brokers:
        settings = _settings([b.url for b in brokers], tmp_path / "leases")
        held: list[str] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(8)
        release = threading.Event()
        lock = threading.Lock()

        def rollout(index: int) -> None:
            try:
                barrier.wait()
                with lease_worker(settings, "b1", f"r{index}") as url:
                    with lock:
                        held.append(url)
                    release.wait(10)
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=rollout, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        while len(held) + len(errors) < 8:
            release.wait(0.01)
        # Every worker is held now: a ninth rollout finds none.
        with pytest.raises(RuntimeError, match="no free worker"), lease_worker(settings, "b1", "r-late"):
            pass
        release.set()
        for thread in threads:
            thread.join()
        assert not errors
        assert sorted(held) == sorted(b.url for b in brokers)
        assert list((tmp_path / "leases").iterdir()) == []


def test_a_stale_lease_is_taken_back_by_its_own_rollout_only(tmp_path: Path) -> None:
    with fake_brokers(1, token=TOKEN) as brokers:
        settings = _settings([brokers[0].url], tmp_path / "leases")
        (tmp_path / "leases").mkdir()
        lease = tmp_path / "leases" / "0.lease"
        lease.write_text(json.dumps({"batch_id": "b1", "rollout_id": "r1", "pid": _dead_pid()}))
        # Another rollout leaves it: resume may reconnect r1 to that worker.
        with pytest.raises(RuntimeError, match="no free worker"), lease_worker(settings, "b1", "r2"):
            pass
        assert json.loads(lease.read_text())["rollout_id"] == "r1"
        # r1's own earlier attempt died holding it: r1 takes it back.
        with lease_worker(settings, "b1", "r1") as url:
            assert url == brokers[0].url
            assert json.loads(lease.read_text()) == {"batch_id": "b1", "rollout_id": "r1", "pid": os.getpid()}
        assert not lease.exists()


def test_a_live_holder_keeps_its_worker_even_from_its_own_rollout(tmp_path: Path) -> None:
    with fake_brokers(1, token=TOKEN) as brokers:
        settings = _settings([brokers[0].url], tmp_path / "leases")
        (tmp_path / "leases").mkdir()
        lease = tmp_path / "leases" / "0.lease"
        lease.write_text(json.dumps({"batch_id": "b1", "rollout_id": "r1", "pid": os.getpid()}))
        with pytest.raises(RuntimeError, match="no free worker"), lease_worker(settings, "b1", "r1"):
            pass
        assert lease.exists()
