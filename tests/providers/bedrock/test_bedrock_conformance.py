"""The bedrock provider passes the provider conformance suite through boto3 and a Converse fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autocad_bench_bedrock.provider import BedrockProvider

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import WireServer
from tests.providers.bedrock.conftest import SECRET_KEY
from tests.providers.bedrock.wire_converse import ConverseWire

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"


class TestBedrockConformance(ProviderConformance):
    @pytest.fixture
    def provider(self) -> BedrockProvider:
        return BedrockProvider()

    @pytest.fixture
    def wire_server(self) -> Iterator[WireServer]:
        with ConverseWire() as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server: WireServer) -> ModelSpec:
        return ModelSpec(provider="bedrock", model=MODEL,
                         options={"endpoint_url": wire_server.url, "region": "us-east-1", "timeout_s": 20})

    @pytest.fixture
    def secret_values(self) -> list[str]:
        return [SECRET_KEY]
