"""openrouter: catalog check, option validation, and checksum-verified rehydration on resume."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from autocad_bench_openrouter.provider import OpenrouterProvider

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import Credentials, ModelSpec, ModelTurn, SessionRequest
from autocad_bench.providers.support.images import ArtifactIntegrityError
from autocad_bench.testing.fake_broker import png_frame
from autocad_bench.testing.provider_conformance import (
    CONFORMANCE_DISPLAY,
    VALID_ACTIONS,
    ProviderConformance,
    write_png,
)
from autocad_bench.testing.wire import Reply, ResponsesWire

KEY = Credentials({"OPENROUTER_API_KEY": "sk-or-test-key-123456"})


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire(catalog=["anthropic/claude-sonnet-4.5", "openai/gpt-5.5", "text/only"]) as server:
        yield server


def test_catalog_lists_once_and_checks_image_input(wire: ResponsesWire) -> None:
    listing = {"object": "list", "data": [
        {"id": "anthropic/claude-sonnet-4.5", "object": "model", "created": 1, "owned_by": "x",
         "architecture": {"input_modalities": ["text", "image"]}},
        {"id": "text/only", "object": "model", "created": 1, "owned_by": "x",
         "architecture": {"input_modalities": ["text"]}},
    ]}
    wire.extra_routes = lambda: {("GET", "/models"): lambda request: Reply.json(listing)}  # type: ignore[method-assign]
    options = {"base_url": wire.url + "/api/v1"}
    models = [ModelSpec(provider="openrouter", model=m, options=options)
              for m in ("anthropic/claude-sonnet-4.5", "text/only", "missing/model")]
    entries = OpenrouterProvider().check_model_catalog(models, KEY)
    assert [(e.model, e.available, e.image_input) for e in entries] == [
        ("anthropic/claude-sonnet-4.5", True, True), ("text/only", False, False), ("missing/model", False, None)]
    assert len(wire.requests()) == 1


def test_catalog_unreachable_is_not_checked(wire: ResponsesWire) -> None:
    wire.catalog_error = 503
    models = [ModelSpec(provider="openrouter", model="openai/gpt-5.5", options={"base_url": wire.url + "/api/v1"})]
    (entry,) = OpenrouterProvider().check_model_catalog(models, KEY)
    assert entry.available and entry.reason.startswith("not checked")


def test_options_are_validated_with_locations() -> None:
    spec = ModelSpec(provider="openrouter", model="claude", options={
        "anthropic_beta_header": "bad header", "anthropic_cache_control": "yes", "timeout_s": -1})
    problems = OpenrouterProvider().validate_model_spec(spec, "$.r")
    assert sorted(p.location for p in problems) == [
        "$.r.model", "$.r.provider_options.anthropic_beta_header",
        "$.r.provider_options.anthropic_cache_control", "$.r.provider_options.timeout_s"]


def _request(wire: ResponsesWire, root: Path, resume: JsonObject | None = None) -> SessionRequest:
    reference = write_png(root, "reference.png", png_frame(8, 8, 1, 1), 8, 8)
    return SessionRequest(
        rollout_id="r", attempt_id="b.r.1",
        model=ModelSpec(provider="openrouter", model="anthropic/claude-sonnet-4.5",
                        options={"base_url": wire.url + "/api/v1"}),
        task_prompt="draw", reference=reference, rollout_dir=root, display=CONFORMANCE_DISPLAY,
        action_schema=computer_action_schema(), action_budget=100, resume_state=resume)


def _checkpoint_after_three_turns(wire: ResponsesWire, root: Path) -> JsonObject:
    frames = [write_png(root, f"frames/{i:06d}.png", png_frame(8, 8, i, i), 8, 8) for i in range(4)]

    async def scenario() -> JsonObject:
        session = OpenrouterProvider().open_session(_request(wire, root), KEY)
        previous: ModelTurn | None = None
        for i in range(3):
            wire.push_tool_call(VALID_ACTIONS)
            previous = await session.next_turn(ProviderConformance.observation(frames, i, previous))
        state = session.checkpoint()
        await session.aclose()
        return state

    state = asyncio.run(scenario())
    return json.loads(json.dumps(state, sort_keys=True))  # type: ignore[no-any-return]


def test_resume_rehydrates_every_screenshot(wire: ResponsesWire, tmp_path: Path) -> None:
    state = _checkpoint_after_three_turns(wire, tmp_path)
    session = OpenrouterProvider().open_session(_request(wire, tmp_path, state), KEY)
    assert session.encodings == 4  # type: ignore[attr-defined]  # reference + three desktops


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_resume_refuses_a_damaged_screenshot(wire: ResponsesWire, tmp_path: Path, damage: str) -> None:
    state = _checkpoint_after_three_turns(wire, tmp_path)
    frame = tmp_path / "frames" / "000001.png"
    if damage == "changed":
        frame.write_bytes(png_frame(8, 8, 50, 50))
    else:
        frame.unlink()
    with pytest.raises(ArtifactIntegrityError, match=r"frames/000001\.png"):
        OpenrouterProvider().open_session(_request(wire, tmp_path, state), KEY)
