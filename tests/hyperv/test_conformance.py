"""The backend passes the core conformance suite against the fake pool."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.testing import BackendConformance
from autocad_bench.testing.backend_conformance import ConformanceOptions
from autocad_bench_hyperv.plugin import HyperVPlugin
from tests.harness.brokers import BrokerThread
from tests.hyperv.conftest import Lab


class TestHyperVConformance(BackendConformance):
    @pytest.fixture
    def pool_lab(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
        lab = Lab(tmp_path_factory.mktemp("lab"), BrokerThread())
        lab.add_host("hv1", ["acad-01", "acad-02"])
        lab.add_host("hv2", ["acad-03"])
        try:
            yield lab
        finally:
            lab.close()

    @pytest.fixture
    def backend(self, pool_lab: Lab) -> HyperVPlugin:
        return pool_lab.plugin()

    @pytest.fixture
    def valid_spec(self, pool_lab: Lab) -> InfrastructureSpec:
        """Each host is reached through a fake ``powershell.exe``, so the subprocess wrapper works too."""
        return pool_lab.spec(subprocess=True)

    @pytest.fixture
    def external_state(self, pool_lab: Lab) -> Callable[[], Hashable]:
        return lambda: tuple(host.snapshot() for host in pool_lab.hosts.values())

    @pytest.fixture
    def conformance_options(self) -> ConformanceOptions:
        """The wrapper passes its (non-secret) time scale on to the child; everything else is the contract's."""
        return ConformanceOptions(check_timeout_s=120.0, cancel_grace_s=20.0,
                                  child_environment_extra=frozenset({"AUTOCAD_BENCH_HYPERV_TIME_SCALE"}))
