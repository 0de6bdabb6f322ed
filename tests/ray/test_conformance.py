"""The ray backend passes the backend conformance suite on a real two-node Ray cluster."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.plugins import PluginHost
from autocad_bench.testing import BackendConformance
from autocad_bench.testing.backend_conformance import ConformanceOptions
from autocad_bench_ray.plugin import RayPlugin
from tests.xvfb.conftest import TEMPLATE, processes_mentioning

from .conftest import VERSION, RayCluster, needs_desktop


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.timeout(1200)  # includes waiting for the other module's Ray cluster (see test_cluster.py)
@needs_desktop
class TestRayConformance(BackendConformance):
    @pytest.fixture
    def backend(self) -> object:
        return RayPlugin()

    @pytest.fixture
    def valid_spec(self, tmp_path: Path, ray_cluster: RayCluster) -> InfrastructureSpec:
        return InfrastructureSpec(backend="ray", broker_version=VERSION,
                                  settings={"address": ray_cluster.address, "node_work_dir": str(tmp_path / "node"),
                                            "heartbeat_s": 1, "desktop_ttl_s": 60})

    @pytest.fixture
    def external_state(self, tmp_path: Path) -> Callable[[], Hashable]:
        """Files under tmp_path (the node work directory included) and every process mentioning it."""

        def snapshot() -> Hashable:
            files = tuple(sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir()))
            children = tuple(pid for pid, _ in processes_mentioning(str(tmp_path)))
            return files, children

        return snapshot

    @pytest.fixture
    def conformance_options(self) -> ConformanceOptions:
        return ConformanceOptions(check_timeout_s=180.0, cancel_grace_s=20.0, settle_s=15.0, task_template=TEMPLATE)


def test_the_installed_entry_point_is_this_plugin() -> None:
    handle = PluginHost(environ={}).infrastructure("ray")
    assert handle.implements("run_shared") and handle.implements("terminate_worker")
