"""Fireworks options, live catalog lookup and a 30-turn rollout through the real core pilot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from autocad_bench_fireworks.options import PINNED_MODEL
from autocad_bench_fireworks.provider import FireworksProvider

from autocad_bench.providers.chat.session import TELEMETRY_FILE
from autocad_bench.providers.models import Credentials, ModelSpec
from tests.providers.fireworks.helpers import DONE, MOVE, run_pilot, scan_for, scripted_default
from tests.providers.fireworks.wire_chat import ChatCompletionsWire

SECRET = "fw-pilot-key-0c4b7a1e93d2"


def problems(options: dict[str, object], model: str = PINNED_MODEL) -> list[str]:
    spec = ModelSpec(provider="fireworks", model=model, options=options)
    return [str(p) for p in FireworksProvider().validate_model_spec(spec, "cfg: $.rollouts[0]")]


def test_options_are_validated_with_locations() -> None:
    assert problems({}) == []
    assert problems({"profile": "fireworks-kimi-k2p6-fast-chat"}) == []
    assert problems({"service_tier": "priority"}) == [
        "cfg: $.rollouts[0].provider_options.service_tier: not supported: the Fast tier is selected by the "
        "router model id and excludes Priority service_tier"]
    assert problems({"profile": "fireworks-kimi-k2p6-fast-chat"}, model="accounts/fireworks/models/other") == [
        "cfg: $.rollouts[0].model: profile 'fireworks-kimi-k2p6-fast-chat' pins model "
        "'accounts/fireworks/routers/kimi-k2p6-fast', not 'accounts/fireworks/models/other'"]
    (bad_budget,) = problems({"thinking_budget_tokens": 4096})
    assert "must be below max_tokens (2048)" in bad_budget
    (both,) = problems({"thinking_budget_tokens": 100, "reasoning_effort": "low"})
    assert "not both" in both
    assert problems({"max_images": 31}) == [
        "cfg: $.rollouts[0].provider_options.max_images: Input should be less than or equal to 30"]
    assert FireworksProvider().credential_names(ModelSpec(provider="fireworks", model=PINNED_MODEL)) == [
        "FIREWORKS_API_KEY"]


@pytest.fixture
def catalog_wire() -> Iterator[ChatCompletionsWire]:
    entries = [
        {"id": "accounts/fireworks/models/kimi-k2p6", "supports_image_input": True},
        {"id": "accounts/fireworks/models/text-only", "supports_image_input": False},
    ]
    with ChatCompletionsWire(catalog=entries) as wire:
        yield wire


def test_catalog_lists_retrieves_and_refuses(catalog_wire: ChatCompletionsWire) -> None:
    base = {"base_url": catalog_wire.url + "/inference/v1"}
    catalog_wire.catalog.append({"id": PINNED_MODEL})
    catalog_wire.unlisted.add(PINNED_MODEL)  # routers may be retrievable without being listed
    specs = [ModelSpec(provider="fireworks", model=m, options=base) for m in
             ("accounts/fireworks/models/kimi-k2p6", PINNED_MODEL, "accounts/fireworks/models/text-only",
              "accounts/fireworks/models/missing")]
    entries = FireworksProvider().check_model_catalog(specs, Credentials({"FIREWORKS_API_KEY": SECRET}))
    by_model = {e.model: e for e in entries}
    assert by_model["accounts/fireworks/models/kimi-k2p6"].available is True
    assert by_model["accounts/fireworks/models/kimi-k2p6"].image_input is True
    assert by_model[PINNED_MODEL].available is True and "retrieved by id" in by_model[PINNED_MODEL].reason
    assert by_model["accounts/fireworks/models/text-only"].available is False
    assert by_model["accounts/fireworks/models/missing"].available is False
    paths = [r.path for r in catalog_wire.requests()]
    assert "/inference/v1/models" in paths and f"/inference/v1/models/{PINNED_MODEL}" in paths
    assert all(r.method == "GET" for r in catalog_wire.requests()), "the catalog check is read-only"
    assert {r.headers["authorization"] for r in catalog_wire.requests()} == {f"Bearer {SECRET}"}


def test_catalog_reports_auth_failures_and_missing_keys(catalog_wire: ChatCompletionsWire) -> None:
    spec = ModelSpec(provider="fireworks", model=PINNED_MODEL,
                     options={"base_url": catalog_wire.url + "/inference/v1"})
    (missing,) = FireworksProvider().check_model_catalog([spec], Credentials({}))
    assert missing.available is False and "FIREWORKS_API_KEY is not set" in missing.reason
    catalog_wire.catalog_error = catalog_wire.error_reply(401, "bad key")
    (entry,) = FireworksProvider().check_model_catalog([spec], Credentials({"FIREWORKS_API_KEY": SECRET}))
    assert entry.available is False and "HTTP 401" in entry.reason and SECRET not in entry.reason


def test_thirty_turn_rollout_through_the_core_pilot(tmp_path: Path) -> None:
    def script(n: int) -> object:
        arguments = DONE if n == 29 else MOVE
        return wire.tool_call_reply(arguments, call_id="functions.computer_action:0", reasoning=f"step {n}")

    with ChatCompletionsWire(reasoning="r") as wire:
        wire.default = scripted_default(script)  # type: ignore[arg-type]
        model = ModelSpec(provider="fireworks", model=PINNED_MODEL,
                          options={"base_url": wire.url + "/inference/v1", "timeout_s": 20})
        result, rollout = run_pilot(tmp_path, model, {"FIREWORKS_API_KEY": SECRET}, ("FIREWORKS_API_KEY",))
        requests = wire.model_requests()
    assert (result["status"], result["stop_reason"], result["turns"], result["actions"]) == (
        "completed", "done", 30, 30)
    assert result["model_responses"] == 30 and len(requests) == 30
    assert result["usage"]["cached_input_tokens"] == 30 * 1000
    counts = [len(r.json()["messages"]) for r in requests]
    assert max(counts) <= 24 and counts.count(1) == 4, counts
    turns = [json.loads(line) for line in (rollout / "model_turns.jsonl").read_text().splitlines()]
    assert len({t["tool_use_id"] for t in turns}) == 30
    assert len((rollout / TELEMETRY_FILE).read_text().splitlines()) == 30
    state = json.loads((rollout / "resume-checkpoint.json").read_text())
    assert state["provider_state"]["conversation"]["responses"] == 30
    assert scan_for(rollout, [SECRET]) == []
    assert scan_for(tmp_path, [SECRET]) == []
