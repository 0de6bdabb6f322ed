"""The example third-party backend: installed through its entry point, conformant, selectable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.testing import BackendConformance
from example_autocad_backend import ExamplePoolPlugin
from tests.core.batch_configs import pool_config, write

REPO = Path(__file__).resolve().parents[2]


class TestExamplePoolConformance(BackendConformance):
    @pytest.fixture
    def backend(self) -> object:
        return ExamplePoolPlugin()

    @pytest.fixture
    def valid_spec(self, tmp_path: Path, health_server: tuple[str, str],
                   monkeypatch: pytest.MonkeyPatch) -> InfrastructureSpec:
        url, token = health_server
        monkeypatch.setenv("EXAMPLE_POOL_TOKEN", token)
        return InfrastructureSpec(backend="example-pool", broker_version="windows-autocad-2019-v11",
                                  settings={"workers": [url], "token_env": "EXAMPLE_POOL_TOKEN",
                                            "lease_dir": str(tmp_path / "leases")})



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


def test_embedding_example_registers_in_process(health_server: tuple[str, str]) -> None:
    url, token = health_server
    result = subprocess.run([sys.executable, str(REPO / "examples" / "embed_controller.py"), url, "EMBED_TOKEN"],
                            capture_output=True, text=True, env={**os.environ, "EMBED_TOKEN": token}, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["infrastructure_backend"] == "my-app-desktop"
    assert report["passed"] is True


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
