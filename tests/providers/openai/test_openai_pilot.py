"""The openai provider inside the real pilot: a normal rollout, retries, exact request bodies."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing.wire import ResponsesWire
from autocad_bench_openai.provider import OpenaiProvider
from tests.providers.openai.pilot_support import (
    DONE,
    MOVE,
    SECRET,
    assert_retry_storm,
    push_retry_storm,
    run_interrupted_then_resumed,
    run_pilot,
)

CREDENTIAL = "OPENAI_API_KEY"


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server


def spec(wire: ResponsesWire, **options: Any) -> ModelSpec:
    return ModelSpec(provider="openai", model="gpt-5.5",
                     options={"base_url": wire.url + "/v1", "timeout_s": 20, **options})


def images(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if not isinstance(content, list):
        return []
    return [p["image_url"] for p in content if p.get("type") == "input_image"]


def test_thirty_turn_rollout_sends_compact_history(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(29):
        wire.push_tool_call(MOVE)
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire, history_turns=8), CREDENTIAL)
    result = run.result
    assert (result["status"], result["stop_reason"], result["turns"], result["actions"]) == (
        "completed", "done", 30, 31)
    assert result["model_responses"] == 30
    assert result["usage"]["cached_input_tokens"] == 30 * 1000
    assert result["usage"]["input_tokens"] == 30 * 500
    requests = [r.json() for r in wire.model_requests()]
    assert len(requests) == 30
    reference_url = "data:image/png;base64," + base64.b64encode((run.rollout / "reference.png").read_bytes()).decode()
    keys = {r["prompt_cache_key"] for r in requests}
    assert len(keys) == 1 and len(keys.pop()) <= 64
    for n, body in enumerate(requests):
        assert body["model"] == "gpt-5.5" and body["store"] is False
        assert body["tool_choice"] == {"type": "function", "name": "computer_action"}
        assert body["tools"] == [{"type": "function", "name": "computer_action", "description": body["tools"][0][
            "description"], "parameters": computer_action_schema(), "strict": True}]
        assert body["parallel_tool_calls"] is False
        first, current = body["input"][0], body["input"][-1]
        assert first == requests[0]["input"][0], "the task/reference prefix must never change"
        assert images(first) == [reference_url]
        # Only the reference and the current desktop: no historical screenshot is resent.
        assert sum(len(images(item)) for item in body["input"]) == 2
        frame = run.rollout / "frames" / f"{n:06d}.png"
        assert images(current) == ["data:image/png;base64," + base64.b64encode(frame.read_bytes()).decode()]
        calls = [i for i in body["input"] if i.get("type") == "function_call"]
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs]
        # history_turns=8 keeps between 8 and 16 past calls, cut in one step.
        assert len(calls) == (n if n <= 16 else 8 + (n - 17) % 9)
    last = requests[-1]["input"]
    assert any("earlier turns are omitted" in str(i.get("content")) for i in last)
    assert "Executed actions" in [i for i in last if i.get("type") == "function_call_output"][-1]["output"]
    assert run.files_containing(SECRET) == []


def test_retry_storm_is_accounted_by_the_core(tmp_path: Path, wire: ResponsesWire) -> None:
    push_retry_storm(wire)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert_retry_storm(run, wire.model_requests())
    assert run.files_containing(SECRET) == []


def test_retry_after_ms_is_preferred(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push_error(429, "slow down", headers={"retry-after-ms": "2500", "retry-after": "9"})
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed"
    (retry,) = run.retries()
    assert retry["retry_after_s"] == 2.5 and retry["delay_s"] >= 2.5


def test_server_errors_never_exhaust(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(25):
        wire.push_error(503, "overloaded")
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed"
    assert run.counters["server_error"] == {"consecutive": 0, "lifetime": 25}
    delays = [r["delay_s"] for r in run.retries()]
    assert max(delays) <= 60.0 and delays[-1] > 30.0


def test_ten_resets_exhaust_the_transient_budget(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(5):
        wire.push_reset()
        wire.push_error(408, "timeout")
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "transport_exhausted")
    assert run.counters["transient"] == {"consecutive": 10, "lifetime": 10}
    assert len(wire.model_requests()) == 10 and run.broker.injected == []


def test_rate_limits_do_not_consume_the_transient_budget(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(9):
        wire.push_reset()
    wire.push_error(429, "slow down")
    wire.push_tool_call(MOVE)  # a response resets the transient streak
    for _ in range(9):
        wire.push_error(409, "conflict")
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed"
    assert run.counters["transient"] == {"consecutive": 0, "lifetime": 18}
    assert run.counters["rate_limited"] == {"consecutive": 0, "lifetime": 1}


def test_ten_missing_calls_are_a_model_contract_error(tmp_path: Path, wire: ResponsesWire) -> None:
    for i in range(10):
        if i % 2:
            wire.push_text("thinking")
        else:
            wire.push_malformed_arguments("{not json")
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "model_contract_error")
    assert run.result["model_responses"] == 10 and run.broker.injected == []
    assert run.counters["malformed"] == {"consecutive": 10, "lifetime": 10}
    # Each malformed answer is fed back: the history grows by that turn and its explanation.
    bodies = [r.json() for r in wire.model_requests()]
    assert [len(b["input"]) for b in bodies] == [2 + 2 * i for i in range(10)]
    assert "No action was executed" in str(bodies[1]["input"][2]["content"])


def test_unauthorized_is_fatal_and_never_retried(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push_error(401, f"Incorrect API key provided: {SECRET}")
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "model_contract_error")
    assert len(wire.model_requests()) == 1
    assert run.files_containing(SECRET) == [], "an API error echoing the key must be redacted"


def test_request_too_large_shrinks_the_history_once(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(6):
        wire.push_tool_call(MOVE)
    wire.push_error(413, "too large")
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert run.result["status"] == "completed"
    assert run.counters["shrinks"] == 1
    failed, retried = wire.model_requests()[-2:]
    assert len(retried.body) < len(failed.body)
    assert any("earlier turns are omitted" in str(i.get("content")) for i in retried.json()["input"])


def test_request_too_large_on_the_first_turn_cannot_shrink(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push_error(413, "too large")
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), CREDENTIAL)
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "model_contract_error")
    assert "cannot shrink" in run.result["failure_detail"]
    assert len(wire.model_requests()) == 1


def test_pilot_killed_mid_request_resumes_with_the_same_request(tmp_path: Path, wire: ResponsesWire) -> None:
    run, made = run_interrupted_then_resumed(tmp_path, OpenaiProvider, spec(wire), CREDENTIAL, wire,
                                             interrupt_at=7, total=12)
    assert (run.result["status"], run.result["turns"], run.result["attempts"]) == ("completed", 11, 2)
    requests = wire.model_requests()
    assert made == 8 and len(requests) == 12
    # The interrupted request and the first request of the resumed pilot are the same bytes.
    assert requests[7].body == requests[8].body
    assert [i.index for i in run.broker.injected] == list(range(12))
    assert run.files_containing(SECRET) == []
