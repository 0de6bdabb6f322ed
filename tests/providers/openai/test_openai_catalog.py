"""Admission's live catalog check for openai, against the wire fake's ``GET /v1/models/{id}``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autocad_bench.providers.models import Credentials, ModelSpec
from autocad_bench.testing.wire import ResponsesWire
from autocad_bench_openai.provider import OpenaiProvider


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire(catalog=["gpt-5.5"]) as server:
        yield server


def test_known_and_unknown_ids(wire: ResponsesWire) -> None:
    options = {"base_url": wire.url + "/v1"}
    models = [ModelSpec(provider="openai", model="gpt-5.5", options=options),
              ModelSpec(provider="openai", model="gpt-nope", options=options)]
    entries = OpenaiProvider().check_model_catalog(models, Credentials({"OPENAI_API_KEY": "k"}))
    assert [(e.model, e.available) for e in entries] == [("gpt-5.5", True), ("gpt-nope", False)]
    assert all(r.method == "GET" for r in wire.requests())
    assert wire.model_requests() == []


def test_without_a_key_nothing_is_sent(wire: ResponsesWire) -> None:
    models = [ModelSpec(provider="openai", model="gpt-5.5", options={"base_url": wire.url + "/v1"})]
    (entry,) = OpenaiProvider().check_model_catalog(models, Credentials({}))
    assert entry.available and "not checked" in entry.reason
    assert wire.requests() == []


@pytest.mark.parametrize(("status", "available", "reason"), [
    (401, False, "rejected (HTTP 401)"),
    (403, False, "HTTP 403"),
    (500, True, "not checked: catalog answered HTTP 500"),
])
def test_catalog_failures_are_reported(wire: ResponsesWire, status: int, available: bool, reason: str) -> None:
    wire.catalog_error = status
    models = [ModelSpec(provider="openai", model="gpt-5.5", options={"base_url": wire.url + "/v1"})]
    (entry,) = OpenaiProvider().check_model_catalog(models, Credentials({"OPENAI_API_KEY": "k"}))
    assert entry.available is available and reason in entry.reason


def test_options_are_validated_with_locations() -> None:
    spec = ModelSpec(provider="openai", model="gpt-5.5",
                     options={"reasoning_effort": "extreme", "base_url": "ftp://x", "history_turns": 0})
    problems = OpenaiProvider().validate_model_spec(spec, "cfg.json: $.rollouts[0]")
    locations = sorted(p.location for p in problems)
    assert locations == [f"cfg.json: $.rollouts[0].provider_options.{k}"
                         for k in ("base_url", "history_turns", "reasoning_effort")]
