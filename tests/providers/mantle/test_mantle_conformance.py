"""The mantle provider passes the provider conformance suite against a SigV4-verifying Chat fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autocad_bench_mantle.options import PINNED_MODEL
from autocad_bench_mantle.provider import MantleProvider

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import WireServer
from tests.providers.mantle.wires import SECRET_KEY, MantleChatWire


class TestMantleConformance(ProviderConformance):
    @pytest.fixture
    def provider(self) -> MantleProvider:
        return MantleProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with MantleChatWire(catalog=[PINNED_MODEL]) as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="mantle", model=PINNED_MODEL,
                         options={"base_url": wire_server.url + "/v1", "region": "us-east-1", "timeout_s": 20})

    @pytest.fixture
    def secret_values(self) -> list[str]:
        # No credential variable is handed to the session: the AWS chain's secret must not leak either.
        return [SECRET_KEY]
