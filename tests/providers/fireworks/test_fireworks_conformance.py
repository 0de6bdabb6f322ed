"""The fireworks provider passes the provider conformance suite against a Chat Completions fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autocad_bench_fireworks.options import PINNED_MODEL
from autocad_bench_fireworks.provider import FireworksProvider

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import WireServer
from tests.providers.fireworks.wire_chat import ChatCompletionsWire


class TestFireworksConformance(ProviderConformance):
    @pytest.fixture
    def provider(self) -> FireworksProvider:
        return FireworksProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with ChatCompletionsWire(catalog=[PINNED_MODEL], reasoning="I should click the LINE tool.") as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="fireworks", model=PINNED_MODEL,
                         options={"base_url": wire_server.url + "/inference/v1", "timeout_s": 20})
