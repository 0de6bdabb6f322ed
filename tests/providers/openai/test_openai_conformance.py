"""The openai provider passes the provider conformance suite against a Responses wire fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import ResponsesWire, WireServer
from autocad_bench_openai.provider import OpenaiProvider


class TestOpenaiConformance(ProviderConformance):
    @pytest.fixture
    def provider(self) -> OpenaiProvider:
        return OpenaiProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with ResponsesWire(catalog=["gpt-5.5"]) as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="openai", model="gpt-5.5",
                         options={"base_url": wire_server.url + "/v1", "timeout_s": 20})
