"""local-xvfb passes the backend conformance suite, also from its installed entry point."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Hashable
from pathlib import Path

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.plugins import PluginHost
from autocad_bench.testing import BackendConformance
from autocad_bench.testing.backend_conformance import ConformanceOptions
from autocad_bench_xvfb.plugin import LocalXvfbPlugin

from .conftest import TEMPLATE, VERSION, needs_desktop, processes_mentioning


@needs_desktop


class TestLocalXvfbConformance(BackendConformance):
    @pytest.fixture
    def backend(self) -> object:
        return LocalXvfbPlugin()

    @pytest.fixture
    def valid_spec(self, tmp_path: Path) -> InfrastructureSpec:
        return InfrastructureSpec(backend="local-xvfb", broker_version=VERSION,
                                  settings={"state_dir": str(tmp_path / "state")})

    @pytest.fixture
    def external_state(self, tmp_path: Path) -> Callable[[], Hashable]:
        """Files under tmp_path (the state dir's records included) and every process mentioning it.

        The state directory itself may stay once created; every worker record and process in it
        must go when a rollout ends and when its batch is reaped.
        """

        def snapshot() -> Hashable:
            files = tuple(sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir()))
            children = tuple(pid for pid, _ in processes_mentioning(str(tmp_path)))
            return files, children

        return snapshot

    @pytest.fixture
    def conformance_options(self) -> ConformanceOptions:
        """Every executed check, on a real Xvfb display with LibreCAD started on a template."""
        return ConformanceOptions(check_timeout_s=180.0, cancel_grace_s=20.0, task_template=TEMPLATE)


def test_the_installed_entry_point_is_this_plugin() -> None:
    host = PluginHost(environ={})
    handle = host.infrastructure("local-xvfb")
    assert handle.implements("run_shared") and handle.implements("terminate_worker")


def test_a_plan_mode_batch_admits_the_example_config(tmp_path: Path) -> None:
    env = {**os.environ, "AUTOCAD_BENCH_STATE_DIR": str(tmp_path / "state")}
    config = Path(__file__).resolve().parents[2] / "examples" / "local-librecad.json"
    result = subprocess.run(["autocad-bench-batch", "--config", str(config)], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["infrastructure_backend"] == "local-xvfb"
    assert not (tmp_path / "state").exists(), "plan mode must not create worker state"
