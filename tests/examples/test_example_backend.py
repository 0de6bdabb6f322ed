"""The example third-party backend: installed through its entry point, conformant, selectable."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autocad_bench.broker.protocol import Route
from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.testing import BackendConformance
from autocad_bench.testing.backend_conformance import ConformanceOptions
from autocad_bench.testing.fake_broker import Fault, FaultKind
from example_autocad_backend import ExamplePoolPlugin
from tests.core.batch_configs import pool_config, write
from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import SECRETS, batch_config

REPO = Path(__file__).resolve().parents[2]


class TestExamplePoolConformance(BackendConformance):
    @pytest.fixture
    def backend(self) -> object:
        return ExamplePoolPlugin()

    @pytest.fixture
    def valid_spec(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InfrastructureSpec]:
        # A full fake broker, not only /health: the pool clears a dead holder's session on lease.
        with fake_brokers(1, token="example-pool-conformance-token-7") as brokers:
            monkeypatch.setenv("EXAMPLE_POOL_TOKEN", brokers[0].token)
            yield InfrastructureSpec(backend="example-pool", broker_version="windows-autocad-2019-v11",
                                     settings={"workers": [brokers[0].url], "token_env": "EXAMPLE_POOL_TOKEN",
                                               "lease_dir": str(tmp_path / "leases")})

    @pytest.fixture
    def conformance_options(self) -> ConformanceOptions:
        """The wrapper stops its child within 20 s of a SIGTERM, well inside this grace."""
        return ConformanceOptions(check_timeout_s=60.0, cancel_grace_s=25.0)


def _wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _execute(tmp_path: Path, config: dict[str, object], token: str) -> subprocess.Popen[str]:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(config))
    return subprocess.Popen(
        ["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(tmp_path / "out")],
        env={**os.environ, **SECRETS, "EXAMPLE_POOL_TOKEN": token}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.parametrize("mode", ["subprocess", "shared"])
def test_a_batch_executes_through_the_controller_and_frees_every_lease(tmp_path: Path, mode: str) -> None:
    """Two rollouts on a one-desktop pool: the second runs only once the first released the lease."""
    with fake_brokers(1, token="example-pool-broker-token-41") as brokers:
        config = {**batch_config(brokers, tmp_path / "leases", mode), "max_concurrency": 1}
        controller = _execute(tmp_path, config, brokers[0].token)
        out, err = controller.communicate(timeout=300)
        assert controller.returncode == 0, out + err
        assert [item.index for item in brokers[0].injected] == list(range(19)) * 2
    state = json.loads((tmp_path / "out" / "batch-state.json").read_text())
    assert [r["state"] for r in state["rollouts"]] == ["done", "done"]
    assert {r["infrastructure_backend"] for r in state["rollouts"]} == {"example-pool"}
    assert list((tmp_path / "leases").iterdir()) == []
    assert json.loads((tmp_path / "out" / "reconcile.json").read_text()) == {"cleaned": [], "errors": []}


@pytest.mark.parametrize("mode", ["subprocess", "shared"])
def test_stopping_the_controller_mid_rollout_still_releases_the_lease(tmp_path: Path, mode: str) -> None:
    """SIGTERM reaches the wrapper's process group: the lease must still be released (it was not)."""
    with fake_brokers(1, token="example-pool-broker-token-42") as brokers:
        broker = brokers[0]
        broker.add_faults(Fault(FaultKind.DELAY, Route.ACTIONS, delay_s=3.0))
        controller = _execute(tmp_path, batch_config(brokers, tmp_path / "leases", mode, rollouts=1),
                              broker.token)
        try:
            _wait_for(lambda: any(r.route == Route.ACTIONS.value for r in broker.requests)
                      or controller.poll() is not None)
            assert list((tmp_path / "leases").glob("*.lease")), "the rollout holds its desktop while it runs"
            controller.send_signal(signal.SIGTERM)
            out, err = controller.communicate(timeout=120)
        finally:
            if controller.poll() is None:
                os.killpg(controller.pid, signal.SIGKILL)
    assert controller.returncode == 128 + signal.SIGTERM, out + err
    assert list((tmp_path / "leases").iterdir()) == [], "the lease outlived the stopped rollout"
    # Released by the rollout's own cleanup, not by the batch-exit reap (which found nothing).
    assert json.loads((tmp_path / "out" / "reconcile.json").read_text()) == {"cleaned": [], "errors": []}
    state = json.loads((tmp_path / "out" / "batch-state.json").read_text())
    assert state["rollouts"][0]["state"] in ("done", "failed")


def test_a_lease_whose_holder_died_is_not_counted_as_free_capacity(tmp_path: Path,
                                                                   health_server: tuple[str, str]) -> None:
    """Preflight and the lease code agree: a stale lease blocks its desktop until it is reaped."""
    url, token = health_server
    leases = tmp_path / "leases"
    leases.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (leases / "0.lease").write_text(json.dumps({"batch_id": "crashed", "rollout_id": "r9", "pid": gone.pid}))
    config = write(tmp_path, pool_config([url], leases))
    env = {**os.environ, "EXAMPLE_POOL_TOKEN": token}
    result = subprocess.run(["autocad-bench-batch", "--config", str(config)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode != 0, result.stdout
    assert "held by a lease whose process is gone" in result.stdout + result.stderr
    from autocad_bench.infrastructure import ReapRequest

    plugin = ExamplePoolPlugin()
    spec = InfrastructureSpec.model_validate(json.loads(config.read_text())["infrastructure"])
    assert plugin.reap_batch(ReapRequest(batch_id="crashed", spec=spec)).cleaned == (f"lease 0 ({url})",)
    result = subprocess.run(["autocad-bench-batch", "--config", str(config)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_installed_entry_point_is_selected_by_name_from_a_config_file(
        tmp_path: Path, health_server: tuple[str, str]) -> None:
    url, token = health_server
    config = write(tmp_path, pool_config([url], tmp_path / "leases"))
    result = subprocess.run(["autocad-bench-batch", "--config", str(config)], capture_output=True, text=True,
                            env={**os.environ, "EXAMPLE_POOL_TOKEN": token}, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["infrastructure_backend"] == "example-pool"
    assert report["passed"] is True


def test_broken_unselected_entry_point_does_not_break_the_batch(
        tmp_path: Path, health_server: tuple[str, str]) -> None:
    """A really installed (dist-info on sys.path) but broken backend is never imported."""
    url, token = health_server
    site = tmp_path / "site"
    dist = site / "broken_backend-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[autocad_bench.infrastructure]\nbroken = broken_backend_missing_module:Plugin\n")
    env = {**os.environ, "EXAMPLE_POOL_TOKEN": token, "PYTHONPATH": str(site)}
    config = write(tmp_path, pool_config([url], tmp_path / "leases"))
    result = subprocess.run(["autocad-bench-batch", "--config", str(config)], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    listing = subprocess.run(["autocad-bench", "plugins"], capture_output=True, text=True, env=env, timeout=60)
    assert "broken" in json.loads(listing.stdout)["infrastructure"]
    broken = json.loads(json.dumps(pool_config([url], tmp_path / "leases")))
    broken["infrastructure"]["backend"] = "broken"
    broken["infrastructure"]["settings"] = {}
    result = subprocess.run(["autocad-bench-batch", "--config", str(write(tmp_path, broken, "b.json"))],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    assert "backend 'broken' (broken_backend_missing_module:Plugin, from broken-backend) failed to load: " \
           "ModuleNotFoundError" in result.stderr
    assert "Traceback" not in result.stderr


def test_embedding_example_registers_in_process(health_server: tuple[str, str], tmp_path: Path) -> None:
    """Copied alone into an empty directory, the example plans through the public API only."""
    url, token = health_server
    copy = tmp_path / "embed_controller.py"
    shutil.copy(REPO / "examples" / "embed_controller.py", copy)
    source = copy.read_text()
    assert "autocad_bench.admission" not in source and "autocad_bench.config" not in source
    result = subprocess.run([sys.executable, str(copy), url, "EMBED_TOKEN"], cwd=tmp_path,
                            capture_output=True, text=True, env={**os.environ, "EMBED_TOKEN": token}, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["infrastructure_backend"] == "my-app-desktop"
    assert report["passed"] is True and report["enabled_rollouts"] == 3
    missing = subprocess.run([sys.executable, str(copy), url, "EMBED_TOKEN"], cwd=tmp_path,
                             capture_output=True, text=True, env={**os.environ, "EMBED_TOKEN": ""}, timeout=120)
    assert missing.returncode == 1 and json.loads(missing.stdout)["passed"] is False
    assert "Traceback" not in missing.stderr


def test_subprocess_lifecycle_runs_the_exact_child_with_the_broker(tmp_path: Path,
                                                                   health_server: tuple[str, str]) -> None:
    from autocad_bench.infrastructure import EvaluationArguments, RolloutLaunchRequest

    url, token = health_server
    plugin = ExamplePoolPlugin()
    spec = InfrastructureSpec(backend="example-pool", broker_version="windows-autocad-2019-v11",
                              settings={"workers": [url], "token_env": "EXAMPLE_POOL_TOKEN",
                                        "lease_dir": str(tmp_path / "leases")})
    out = tmp_path / "child.json"
    child = (sys.executable, "-c",
             "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
             "('AUTOCAD_BENCH_BROKER_URL', 'AUTOCAD_BENCH_BROKER_TOKEN')}, open(sys.argv[1], 'w')); sys.exit(7)",
             str(out))
    request = RolloutLaunchRequest(batch_id="b", rollout_id="r", attempt_id="a", task_id="t", spec=spec,
                                   child_command=child, output_dir=tmp_path, log_path=tmp_path / "log",
                                   evaluation=EvaluationArguments(enabled=False, task_id="t"))
    command = plugin.build_rollout_command(request)
    env = {name: os.environ[name] for name in ("PATH",)}
    env["EXAMPLE_POOL_TOKEN"] = token
    result = subprocess.run(command.argv, env=env, timeout=60)
    assert result.returncode == 7
    assert json.loads(out.read_text()) == {"AUTOCAD_BENCH_BROKER_URL": url, "AUTOCAD_BENCH_BROKER_TOKEN": token}
    assert not list((tmp_path / "leases").iterdir()), "the lease must be released"


def test_the_shipped_example_pool_config_executes_on_its_pool(tmp_path: Path) -> None:
    """examples/example-pool.json runs as written, only its worker URLs pointed at live brokers."""
    config = json.loads((REPO / "examples" / "example-pool.json").read_text())
    with fake_brokers(2, token="example-pool-broker-token-42") as brokers:
        config["infrastructure"]["settings"].update(workers=[b.url for b in brokers],
                                                    lease_dir=str(tmp_path / "leases"))
        config["tasks_dir"] = str(REPO / "examples" / config["tasks_dir"])
        for rollout in config["rollouts"]:
            rollout["provider_options"]["script"] = str(REPO / "examples" / rollout["provider_options"]["script"])
        controller = _execute(tmp_path, config, brokers[0].token)
        out, err = controller.communicate(timeout=300)
        assert controller.returncode == 0, out + err
        assert sum(len(b.injected) for b in brokers) == 19 * 2
    state = json.loads((tmp_path / "out" / "batch-state.json").read_text())
    assert [(r["rollout_id"], r["state"]) for r in state["rollouts"]] == [
        ("scripted-line.t1", "done"), ("scripted-line.t2", "done")]
    assert list((tmp_path / "leases").iterdir()) == []
