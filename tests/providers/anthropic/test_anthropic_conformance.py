"""The anthropic provider passes the provider conformance suite against a Messages wire fake.

Two configurations run the whole suite: a model on the official server-compaction path
(beta endpoint, ``compact-2026-01-12``) and Claude Fable 5 on the client-compaction path
(plain Messages endpoint).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import WireServer
from autocad_bench_anthropic.provider import AnthropicProvider
from tests.providers.anthropic.messages_wire import MessagesWire


class TestAnthropicServerCompactionConformance(ProviderConformance):
    model = "claude-opus-4-7"

    @pytest.fixture
    def provider(self) -> AnthropicProvider:
        return AnthropicProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with MessagesWire(catalog=[self.model]) as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="anthropic", model=self.model,
                         options={"base_url": wire_server.url, "timeout_s": 20})


class TestAnthropicFableConformance(TestAnthropicServerCompactionConformance):
    model = "claude-fable-5"
