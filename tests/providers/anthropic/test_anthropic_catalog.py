"""The live catalog check (``GET /v1/models/{id}``) against the wire fake."""

from __future__ import annotations

from autocad_bench.providers.models import Credentials, ModelSpec
from autocad_bench_anthropic.provider import AnthropicProvider
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import SECRET


def spec(wire: MessagesWire, model: str, **options: object) -> ModelSpec:
    return ModelSpec(provider="anthropic", model=model, options={"base_url": wire.url, **options})


def test_catalog_entries() -> None:
    catalog = {
        "claude-opus-4-7": {},
        "claude-fable-5": {"compaction": False},
        "claude-haiku-4-5": {"compaction": False},
        "claude-old": {"lifecycle": "retired"},
    }
    with MessagesWire(catalog=catalog) as wire:
        entries = AnthropicProvider().check_model_catalog(
            [spec(wire, "claude-opus-4-7"), spec(wire, "claude-fable-5"), spec(wire, "claude-haiku-4-5"),
             spec(wire, "claude-haiku-4-5", server_compaction=False), spec(wire, "claude-old"),
             spec(wire, "claude-nope")],
            Credentials({"ANTHROPIC_API_KEY": SECRET}),
        )
        requests = wire.requests()
    by = [(e.model, e.available) for e in entries]
    assert by == [("claude-opus-4-7", True), ("claude-fable-5", True), ("claude-haiku-4-5", False),
                  ("claude-haiku-4-5", True), ("claude-old", False), ("claude-nope", False)]
    assert entries[0].reason.startswith("available (server compaction)") and entries[0].image_input is True
    assert entries[1].reason.startswith("available (client compaction)")
    assert "compact_20260112" in entries[2].reason
    assert entries[3].reason.startswith("available (none compaction)")
    assert entries[4].reason == "the model is retired"
    assert entries[5].reason == "not in the Anthropic model catalog"
    assert all(r.method == "GET" and r.path.startswith("/v1/models/") for r in requests)
    assert all(SECRET not in e.model_dump_json() for e in entries)


def test_catalog_without_key_is_not_checked() -> None:
    entries = AnthropicProvider().check_model_catalog(
        [ModelSpec(provider="anthropic", model="claude-opus-4-7")], Credentials({}))
    assert [(e.available, e.reason) for e in entries] == [(False, "not checked: ANTHROPIC_API_KEY is not set")]


def test_catalog_unreachable_is_reported() -> None:
    with MessagesWire() as wire:
        url = wire.url
    entries = AnthropicProvider().check_model_catalog(
        [ModelSpec(provider="anthropic", model="claude-opus-4-7", options={"base_url": url})],
        Credentials({"ANTHROPIC_API_KEY": SECRET}))
    assert entries[0].available is False and entries[0].reason.startswith("catalog lookup failed")
