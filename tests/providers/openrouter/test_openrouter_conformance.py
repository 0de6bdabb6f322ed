"""The openrouter provider passes the provider conformance suite (plain and Claude routes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autocad_bench_openrouter.provider import OpenrouterProvider

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import ResponsesWire, WireServer


class TestOpenrouterConformance(ProviderConformance):
    model_id = "openai/gpt-5.5"

    @pytest.fixture
    def provider(self) -> OpenrouterProvider:
        return OpenrouterProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with ResponsesWire(catalog=[self.model_id]) as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="openrouter", model=self.model_id,
                         options={"base_url": wire_server.url + "/api/v1", "timeout_s": 20})


class TestOpenrouterClaudeConformance(TestOpenrouterConformance):
    model_id = "anthropic/claude-sonnet-4.5"
