"""The openrouter provider inside the real pilot: append-only bodies, caching markers, retries."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_openrouter.provider import OpenrouterProvider

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing.wire import RecordedRequest, Reply, ResponsesWire
from tests.providers.openai.pilot_support import (
    DONE,
    MOVE,
    SECRET,
    assert_retry_storm,
    push_retry_storm,
    run_interrupted_then_resumed,
    run_pilot,
)

CREDENTIAL = "OPENROUTER_API_KEY"
CLAUDE = "anthropic/claude-sonnet-4.5"
OTHER = "openai/gpt-5.5"


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server


def spec(wire: ResponsesWire, model: str = CLAUDE, **options: Any) -> ModelSpec:
    return ModelSpec(provider="openrouter", model=model,
                     options={"base_url": wire.url + "/api/v1", "timeout_s": 20, **options})


def input_bytes(request: RecordedRequest) -> bytes:
    """The body up to the end of its ``input`` array's last item (the append-only part)."""
    body = request.body
    # The constant fields after ``input`` are serialized with sorted keys; the first is one of these.
    for marker in (b'],"cache_control"', b'],"max_output_tokens"'):
        if marker in body:
            return body[: body.rindex(marker)]
    raise AssertionError("no input array end found")


def images(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if not isinstance(content, list):
        return []
    return [p["image_url"] for p in content if p.get("type") == "input_image"]


@pytest.mark.parametrize("model", [CLAUDE, OTHER])
def test_thirty_turn_rollout_is_append_only(tmp_path: Path, wire: ResponsesWire, model: str) -> None:
    for _ in range(29):
        wire.push_tool_call(MOVE)
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire, model), CREDENTIAL)
    assert (run.result["status"], run.result["turns"], run.result["model_responses"]) == ("completed", 30, 30)
    requests = wire.model_requests()
    assert len(requests) == 30
    bodies = [r.json() for r in requests]
    for n in range(29):
        # Byte-identical prefix: request n's whole input is the start of request n+1's.
        assert requests[n + 1].body.startswith(input_bytes(requests[n]) + b","), n
        assert bodies[n + 1]["input"][: len(bodies[n]["input"])] == bodies[n]["input"]
        assert len(bodies[n + 1]["input"]) == len(bodies[n]["input"]) + 3
    first = bodies[0]["input"][0]
    reference = (run.rollout / "reference.png").read_bytes()
    assert images(first)[0] == "data:image/png;base64," + base64.b64encode(reference).decode()
    last = bodies[-1]["input"]
    # Every screenshot stays in the history: reference + 30 desktops.
    assert sum(len(images(item)) for item in last) == 31
    kinds = [item.get("type") for item in last[1:]]
    assert kinds == ["function_call", "function_call_output", "message"] * 29
    calls = [i for i in last if i.get("type") == "function_call"]
    outputs = [i for i in last if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs]
    assert all(json.loads(c["arguments"]) == MOVE for c in calls)
    assert "Executed actions" in outputs[-1]["output"]
    keys = {(b["session_id"], b["prompt_cache_key"]) for b in bodies}
    assert len(keys) == 1
    session_id, cache_key = keys.pop()
    assert session_id == cache_key and len(session_id) <= 128
    for body, request in zip(bodies, requests, strict=True):
        assert body["tool_choice"] == {"type": "function", "name": "computer_action"}
        assert body["tools"][0]["strict"] is True and body["parallel_tool_calls"] is False
        if model == CLAUDE:
            assert body["cache_control"] == {"type": "ephemeral"}
            assert request.headers["x-anthropic-beta"] == "structured-outputs-2025-11-13"
        else:
            assert "cache_control" not in body and "x-anthropic-beta" not in request.headers
        assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert run.files_containing(SECRET) == []


def test_checkpoint_in_the_rollout_dir_keeps_artifact_references(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(4):
        wire.push_tool_call(MOVE)
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire), CREDENTIAL)
    checkpoint = json.loads((run.rollout / "resume-checkpoint.json").read_text())
    state = checkpoint["provider_state"]
    text = json.dumps(state)
    assert "base64" not in text, "images must be stored as artifact references, not data"
    refs = [p["artifact"] for item in state["items"] for p in item.get("content", [])
            if isinstance(p, dict) and p.get("type") == "input_image"]
    assert [r["path"] for r in refs] == ["reference.png"] + [f"frames/{i:06d}.png" for i in range(5)]


def test_retry_storm_is_accounted_by_the_core(tmp_path: Path, wire: ResponsesWire) -> None:
    push_retry_storm(wire)
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire, OTHER), CREDENTIAL)
    assert_retry_storm(run, wire.model_requests())
    requests = wire.model_requests()
    # After the malformed answers the history stays append-only.
    for before, after in itertools.pairwise(requests[9:]):
        assert after.body.startswith(input_bytes(before) + b",")
    assert run.files_containing(SECRET) == []


def test_ten_resets_exhaust_the_transient_budget(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(10):
        wire.push_reset()
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire), CREDENTIAL)
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "transport_exhausted")
    assert run.counters["transient"] == {"consecutive": 10, "lifetime": 10}


def test_upstream_failure_inside_a_200_is_retried(tmp_path: Path, wire: ResponsesWire) -> None:
    failed = wire.response_body([], status="failed")
    failed["error"] = {"code": "server_error", "message": "upstream provider error"}
    wire.push(Reply.json(failed))
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed"
    assert run.counters["server_error"]["lifetime"] == 1
    first, second = wire.model_requests()
    assert first.body == second.body


def test_request_too_large_elides_old_screenshots(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(6):
        wire.push_tool_call(MOVE)
    wire.push_error(413, "too large")
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenrouterProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed" and run.counters["shrinks"] == 1
    failed, retried = wire.model_requests()[-2:]
    assert len(retried.body) < len(failed.body)
    kept = sum(len(images(item)) for item in retried.json()["input"])
    assert kept < sum(len(images(item)) for item in failed.json()["input"])
    assert "screenshot omitted" in retried.body.decode()


@pytest.mark.parametrize("model", [CLAUDE, OTHER])
def test_pilot_killed_mid_request_resumes_byte_identically(tmp_path: Path, wire: ResponsesWire, model: str) -> None:
    run, made = run_interrupted_then_resumed(tmp_path, OpenrouterProvider, spec(wire, model), CREDENTIAL, wire,
                                             interrupt_at=7, total=12)
    assert (run.result["status"], run.result["turns"], run.result["attempts"]) == ("completed", 11, 2)
    requests = wire.model_requests()
    assert made == 8 and len(requests) == 12
    # The resumed pilot rehydrated every screenshot from its files and sent the exact bytes again.
    assert requests[7].body == requests[8].body
    for before, after in itertools.pairwise(requests[8:]):
        assert after.body.startswith(input_bytes(before) + b",")
    assert [i.index for i in run.broker.injected] == list(range(12))
    assert run.files_containing(SECRET) == []
