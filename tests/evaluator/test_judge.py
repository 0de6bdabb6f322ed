"""Vision judge against a local fake of the Responses API, with the real openai SDK."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from autocad_bench_evaluator.judge import (
    JUDGE_TOOL_NAME,
    JudgeError,
    JudgeSettings,
    VisionJudge,
)

from autocad_bench.retry import RetryPolicy
from autocad_bench.testing.wire import Reply, ResponsesWire
from tests.evaluator.support import SECRET, all_bytes

GOLD_PNG = b"\x89PNG\r\n\x1a\n" + b"gold-image-bytes" * 10
CAND_PNG = b"\x89PNG\r\n\x1a\n" + b"candidate-image-bytes" * 10


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server  # type: ignore[misc]


def verdict(wire: ResponsesWire, arguments: str) -> Reply:
    item = wire.function_call_item(arguments, call_id=wire.next_id("call"), name=JUDGE_TOOL_NAME)
    return Reply.json(wire.response_body([item]))


def good(wire: ResponsesWire, score: float = 0.8, passed: bool = True) -> Reply:
    return verdict(wire, json.dumps({"score": score, "pass": passed, "rationale": "close enough"}))


def make_judge(wire: ResponsesWire, sleeps: list[float], **policy: object) -> VisionJudge:
    settings = JudgeSettings(model="judge-model", base_url=wire.url + "/v1", policy=RetryPolicy(**policy))  # type: ignore[arg-type]
    return VisionJudge(settings, SECRET, sleep=sleeps.append, rng=random.Random(7))


def assert_no_secret(directory: Path) -> None:
    for name, data in all_bytes(directory).items():
        assert SECRET.encode() not in data, name
        assert b"authorization" not in data.lower(), name


def test_verdict_after_rate_limit_and_server_error(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push(wire.error_reply(429, "slow down", headers={"retry-after": "7"}))
    wire.push(wire.error_reply(500, "boom"))
    wire.push(good(wire))
    sleeps: list[float] = []
    score = make_judge(wire, sleeps).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG, task_prompt="Draw it")
    assert score.score == 0.8 and score.passed and score.rationale == "close enough"
    assert score.attempts == 3
    assert score.counters.rate_limited.lifetime == 1 and score.counters.server_error.lifetime == 1
    assert sleeps[0] >= 7.0  # retry-after honoured
    assert 0 < sleeps[1] <= 60.0
    assert score.usage["input_tokens"] == 1500
    # max_retries=0: exactly one HTTP request per attempt
    requests = wire.model_requests()
    assert len(requests) == 3
    body = requests[0].json()
    assert body["tool_choice"] == {"type": "function", "name": JUDGE_TOOL_NAME}
    tool = body["tools"][0]
    assert tool["strict"] is True and tool["parameters"]["additionalProperties"] is False
    assert sorted(tool["parameters"]["required"]) == ["pass", "rationale", "score"]
    images = [c for c in body["input"][0]["content"] if c["type"] == "input_image"]
    assert images[0]["image_url"] == "data:image/png;base64," + base64.b64encode(GOLD_PNG).decode()
    assert requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert requests[0].headers.get("x-stainless-retry-count") == "0"
    judge_dir = tmp_path / "vision-judge"
    recorded = json.loads((judge_dir / "request.json").read_text())
    refs = [c["image_url"] for c in recorded["body"]["input"][0]["content"] if c["type"] == "input_image"]
    assert refs[0]["sha256"] == hashlib.sha256(GOLD_PNG).hexdigest()
    assert refs[1]["sha256"] == hashlib.sha256(CAND_PNG).hexdigest()
    assert "base64" not in (judge_dir / "request.json").read_text()
    responses = json.loads((judge_dir / "responses.json").read_text())["attempts"]
    assert [a.get("status") for a in responses] == [429, 500, 200]
    assert responses[0]["kind"] == "rate_limited" and responses[0]["retry_after_s"] == 7.0
    written = json.loads((judge_dir / "score.json").read_text())
    assert written["kind"] == "vision-judge" and written["score"] == 0.8
    assert_no_secret(tmp_path)


def test_fatal_error_fails_at_once(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push(wire.error_reply(401, f"bad key {SECRET}"))
    with pytest.raises(JudgeError, match="fatal, HTTP 401") as caught:
        make_judge(wire, []).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)
    assert SECRET not in str(caught.value)
    assert len(wire.model_requests()) == 1
    assert not (tmp_path / "vision-judge" / "score.json").exists()
    assert json.loads((tmp_path / "vision-judge" / "responses.json").read_text())["attempts"][0]["status"] == 401
    assert_no_secret(tmp_path)


def test_transient_failures_are_bounded(tmp_path: Path, wire: ResponsesWire) -> None:
    for _ in range(3):
        wire.push(wire.error_reply(408, "timeout"))
    sleeps: list[float] = []
    with pytest.raises(JudgeError, match="3 consecutive transient failures"):
        make_judge(wire, sleeps, max_consecutive_transient=3).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)
    assert len(sleeps) == 2 and len(wire.model_requests()) == 3


def test_connection_resets_count_as_transient(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push(Reply.connection_reset(), good(wire, 0.25, False))
    score = make_judge(wire, []).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)
    assert score.score == 0.25 and not score.passed and score.counters.transient.lifetime == 1


def test_malformed_verdicts_are_retried_then_fail(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push(wire.text_reply("looks fine"), verdict(wire, '{"score": 2, "pass": true, "rationale": "x"}'), good(wire))
    score = make_judge(wire, []).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)
    assert score.attempts == 3 and score.counters.malformed.lifetime == 2
    wire.clear()
    for _ in range(2):
        wire.push(verdict(wire, '{"score": 0.5'))
    with pytest.raises(JudgeError, match="2 consecutive responses without a valid judge_verdict"):
        make_judge(wire, [], max_consecutive_malformed=2).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)


def test_total_wait_is_bounded(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push(wire.error_reply(429, "slow", headers={"retry-after": "100"}))
    settings = JudgeSettings(model="m", base_url=wire.url + "/v1", max_total_wait_s=10)
    with pytest.raises(JudgeError, match="wait budget"):
        VisionJudge(settings, SECRET, sleep=lambda s: None).run(tmp_path, gold_png=GOLD_PNG, candidate_png=CAND_PNG)


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(JudgeError, match="API key"):
        VisionJudge(JudgeSettings(), "")


def test_reasoning_effort_is_sent_only_when_configured() -> None:
    plain = VisionJudge(JudgeSettings(), SECRET).build_body(GOLD_PNG, CAND_PNG, None)
    assert "reasoning" not in plain and plain["max_output_tokens"] == 8192
    tuned = VisionJudge(JudgeSettings(reasoning_effort="low"), SECRET).build_body(GOLD_PNG, CAND_PNG, None)
    assert tuned["reasoning"] == {"effort": "low"}
