"""Mantle's live catalog check: signed GET /v1/models, exact ids, advertised image input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autocad_bench_mantle.options import PINNED_MODEL
from autocad_bench_mantle.provider import MantleProvider

from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec
from tests.providers.mantle.wires import SECRET_KEY, MantleChatWire, verify_sigv4

ENTRIES = [
    {"id": PINNED_MODEL, "input_modalities": ["text", "image"]},
    {"id": "qwen.qwen3-32b", "input_modalities": ["text"]},
    {"id": "openai.gpt-oss-120b"},
    {"id": "google.gemma-4-31b", "input_modalities": ["text", "image"], "supported_endpoints": ["/v1/responses"]},
]


@pytest.fixture
def wire() -> Iterator[MantleChatWire]:
    with MantleChatWire(catalog=ENTRIES) as server:
        yield server


def check(wire: MantleChatWire, *models: str, **options: object) -> dict[str, CatalogEntry]:
    specs = [ModelSpec(provider="mantle", model=m,
                       options={"base_url": wire.url + "/v1", "region": "us-east-1", **options}) for m in models]
    return {e.model: e for e in MantleProvider().check_model_catalog(specs, Credentials({}))}


def test_exact_ids_and_advertised_image_input(wire: MantleChatWire) -> None:
    entries = check(wire, PINNED_MODEL, "qwen.qwen3-32b", "openai.gpt-oss-120b", "google.gemma-4-31b",
                    "moonshotai.kimi-k2")
    kimi = entries[PINNED_MODEL]
    assert kimi.available is True and kimi.image_input is True
    assert "us-east-1: listed; advertises image input; api chat" in kimi.reason
    assert "credentials: AWS standard credential chain (default profile); no API key variable is used" in kimi.reason
    assert entries["qwen.qwen3-32b"].available is False
    unadvertised = entries["openai.gpt-oss-120b"]
    assert unadvertised.available is False and unadvertised.image_input is None
    assert "api responses" in entries["google.gemma-4-31b"].reason
    missing = entries["moonshotai.kimi-k2"]
    assert missing.available is False and "not in the Mantle catalog (4 models)" in missing.reason
    requests = wire.requests()
    assert len(requests) == 1 and requests[0].method == "GET" and requests[0].path == "/v1/models"
    assert verify_sigv4(requests[0]).ok
    assert MantleProvider().credential_names(ModelSpec(provider="mantle", model=PINNED_MODEL)) == []


def test_unadvertised_image_input_can_be_accepted_explicitly(wire: MantleChatWire) -> None:
    entry = check(wire, "openai.gpt-oss-120b", require_advertised_image_input=False)["openai.gpt-oss-120b"]
    assert entry.available is True and "image input not advertised (accepted)" in entry.reason


def test_missing_and_rejected_credentials(wire: MantleChatWire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-key-for-this-test")
    rejected = check(wire, PINNED_MODEL)[PINNED_MODEL]
    assert rejected.available is False and "HTTP 403" in rejected.reason
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    before = len(wire.requests())
    missing = check(wire, PINNED_MODEL)[PINNED_MODEL]
    assert missing.available is False
    assert "not checked: no AWS credentials found in the AWS standard credential chain" in missing.reason
    assert len(wire.requests()) == before
    assert SECRET_KEY not in rejected.reason + missing.reason


def test_options_are_validated() -> None:
    def problems(model: str, **options: object) -> list[str]:
        spec = ModelSpec(provider="mantle", model=model, options=dict(options))
        return [str(p) for p in MantleProvider().validate_model_spec(spec, "cfg: $.rollouts[1]")]

    assert problems(PINNED_MODEL, region="eu-west-1", profile="mantle-kimi-k2.5-chat") == []
    assert problems(PINNED_MODEL, api="responses") == [
        "cfg: $.rollouts[1].provider_options.api: moonshotai.kimi-k2.5 does not support Mantle Responses; use 'chat'"]
    assert problems("other.model", profile="mantle-kimi-k2.5-chat") == [
        "cfg: $.rollouts[1].model: profile 'mantle-kimi-k2.5-chat' pins model 'moonshotai.kimi-k2.5', "
        "not 'other.model'"]
    (region,) = problems(PINNED_MODEL, region="Not A Region")
    assert region.startswith("cfg: $.rollouts[1].provider_options.region:")
