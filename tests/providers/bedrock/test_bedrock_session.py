"""Bedrock Converse through real boto3 against a local Converse server (and botocore's Stubber for
error codes): request shape, compact controller history, retry classes, catalog, pilot rollout."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from autocad_bench_bedrock.converse import TELEMETRY_FILE, ConverseSession
from autocad_bench_bedrock.errors import classify_botocore
from autocad_bench_bedrock.provider import BedrockProvider
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, computer_action_schema
from autocad_bench.models import ArtifactRef
from autocad_bench.providers.models import Credentials, ModelSpec, ModelTurn, ProviderErrorKind
from autocad_bench.retry import ModelCaller, RequestTooLarge
from tests.providers.bedrock.conftest import ACCESS_KEY, SECRET_KEY
from tests.providers.bedrock.wire_converse import ConverseWire
from tests.providers.fireworks.helpers import (
    DONE,
    MOVE,
    observation,
    reference,
    run_pilot,
    scan_for,
    scripted_default,
    session_request,
    small_frames,
)
from tests.providers.mantle.wires import verify_sigv4

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture
def wire() -> Iterator[ConverseWire]:
    foundation = [
        {"modelId": MODEL, "inputModalities": ["TEXT", "IMAGE"], "modelLifecycle": {"status": "ACTIVE"}},
        {"modelId": "amazon.titan-text-premier-v1:0", "inputModalities": ["TEXT"]},
        {"modelId": "old.vision-v1:0", "inputModalities": ["TEXT", "IMAGE"], "modelLifecycle": {"status": "LEGACY"}},
    ]
    profiles = {PROFILE: {"inferenceProfileId": PROFILE, "status": "ACTIVE", "models": [
        {"modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}"},
        {"modelArn": f"arn:aws:bedrock:us-west-2::foundation-model/{MODEL}"}]}}
    with ConverseWire(foundation=foundation, profiles=profiles) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "rollout"
    path.mkdir()
    return path


def spec(wire: ConverseWire, model: str = MODEL, **options: Any) -> ModelSpec:
    return ModelSpec(provider="bedrock", model=model, options={
        "endpoint_url": wire.url, "catalog_endpoint_url": wire.url, "region": "us-east-1", "timeout_s": 20,
        **options})


def open_session(model: ModelSpec, root: Path, resume_state: Any = None) -> ConverseSession:
    session = BedrockProvider().open_session(session_request(model, root, reference(root), resume_state),
                                             Credentials({}))
    assert isinstance(session, ConverseSession)
    return session


async def drive(session: ConverseSession, wire: ConverseWire, frames: list[ArtifactRef], turns: int,
                start: int = 0, previous: ModelTurn | None = None) -> list[ModelTurn]:
    out = []
    for i in range(start, start + turns):
        wire.push_tool_call(MOVE, call_id=f"tooluse_{i:03d}")
        previous = await session.next_turn(observation(frames[i % len(frames)], i, previous))
        assert previous.action_input == MOVE
        out.append(previous)
    return out


def telemetry(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / TELEMETRY_FILE).read_text().splitlines()]


def b64(root: Path, ref: ArtifactRef) -> str:
    return base64.b64encode((root / ref.path).read_bytes()).decode()


def test_request_shape_forced_tool_and_image_blocks(wire: ConverseWire, root: Path) -> None:
    frames = small_frames(root, 2)

    async def scenario() -> None:
        session = open_session(spec(wire), root)
        await drive(session, wire, frames, 2)
        await session.aclose()

    asyncio.run(scenario())
    first, second = wire.model_requests()
    assert first.path == f"/model/{MODEL}/converse"
    check = verify_sigv4(first, access_key=ACCESS_KEY, secret_key=SECRET_KEY, service="bedrock")
    assert check.ok, check.reason
    assert "amz-sdk-request" in first.headers and "max=1" in first.headers["amz-sdk-request"]
    body = first.json()
    assert body["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "computer_action", "description": COMPUTER_ACTION_DESCRIPTION,
                                "inputSchema": {"json": computer_action_schema()}}}],
        "toolChoice": {"tool": {"name": "computer_action"}},
    }
    assert "strict" not in json.dumps(body["toolConfig"]).replace('"strict"', "strict-key")
    assert body["inferenceConfig"] == {"maxTokens": 4096}
    (message,) = body["messages"]
    blocks = message["content"]
    assert blocks[2] == {"image": {"format": "png", "source": {"bytes": b64(root, reference(root))}}}
    assert blocks[-1] == {"image": {"format": "png", "source": {"bytes": b64(root, frames[0])}}}
    roles = [m["role"] for m in second.json()["messages"]]
    assert roles == ["user", "assistant", "user"]
    assistant, answer = second.json()["messages"][1:]
    assert assistant["content"] == [{"toolUse": {"toolUseId": "tooluse_000", "name": "computer_action",
                                                 "input": MOVE}}]
    assert answer["content"][0] == {"toolResult": {"toolUseId": "tooluse_000",
                                                   "content": [{"text": "Executed 1 action; turn 1."}]}}
    assert answer["content"][2] == {"image": {"format": "png", "source": {"bytes": b64(root, frames[1])}}}


def test_compact_history_keeps_two_images_and_bounded_bytes(wire: ConverseWire, root: Path) -> None:
    frames = small_frames(root, 8)

    async def scenario() -> None:
        session = open_session(spec(wire), root)
        await drive(session, wire, frames, 40)
        await session.aclose()

    asyncio.run(scenario())
    bodies = [r.json() for r in wire.model_requests()]
    counts = [len(b["messages"]) for b in bodies]
    assert counts[:10] == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19] and set(counts[9:]) == {19}
    images = [sum(1 for m in b["messages"] for block in m["content"] if "image" in block) for b in bodies]
    assert set(images) == {2}
    summary = bodies[-1]["messages"][0]["content"][3]["text"]
    assert summary.startswith("Earlier turns were removed") and summary.count("\n- turn ") == 16
    assert "- turn 14: computer_action" in summary and summary.rstrip().endswith("turn 30.")
    sizes = [r["request_bytes"] for r in telemetry(root)]
    assert sizes == [len(r.body) for r in wire.model_requests()]
    assert max(sizes[25:]) - min(sizes[25:]) < 200, "request bytes stay flat once the history is full"


def test_retry_classes_through_the_core_caller(wire: ConverseWire, root: Path) -> None:
    frames = small_frames(root, 3)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def scenario() -> Any:
        session = open_session(spec(wire), root)
        (first,) = await drive(session, wire, frames, 1)
        wire.push_error(429, "Too many requests", headers={"retry-after": "11"})
        wire.push(wire.error_reply(503, "unavailable"), wire.error_reply(500, "internal"))
        from autocad_bench.testing.wire import Reply

        wire.push(Reply.json({"message": "Model is not ready"}, status=429,
                             headers={"x-amzn-ErrorType": "ModelNotReadyException"}))
        wire.push_error(408, "model timeout")
        wire.push_reset()
        wire.push_tool_call(MOVE, call_id="after")
        caller = ModelCaller(sleep=sleep, rng=random.Random(0), instrument=False)
        result = await caller.request_turn(session, observation(frames[1], 1, first))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    kinds = [e.kind for e in result.retries]
    assert kinds == [ProviderErrorKind.RATE_LIMITED, ProviderErrorKind.SERVER_ERROR, ProviderErrorKind.SERVER_ERROR,
                     ProviderErrorKind.SERVER_ERROR, ProviderErrorKind.TRANSIENT, ProviderErrorKind.TRANSIENT]
    assert result.retries[0].retry_after_s == 11.0 and sleeps[0] == 11.0
    assert len({r.body for r in wire.model_requests()[1:]}) == 1, "every retry resends the same unconsumed turn"


def test_size_rejection_folds_the_history_then_refuses_to_resend(wire: ConverseWire, root: Path) -> None:
    frames = small_frames(root, 6)

    async def scenario() -> Any:
        session = open_session(spec(wire), root)
        turns = await drive(session, wire, frames, 4)
        wire.push_error(400, "Input is too long for requested model.")
        wire.push_tool_call(MOVE, call_id="after")
        caller = ModelCaller(sleep=lambda s: asyncio.sleep(0), rng=random.Random(0), instrument=False)
        result = await caller.request_turn(session, observation(frames[4], 4, turns[-1]))
        wire.push_error(400, "Input is too long for requested model.")
        wire.push_error(400, "Input is too long for requested model.")
        with pytest.raises(RequestTooLarge):
            await caller.request_turn(session, observation(frames[5], 5, result.turn))
        await session.aclose()
        return result

    result = asyncio.run(scenario())
    requests = [r.json() for r in wire.model_requests()]
    assert len(requests[4]["messages"]) == 9 and len(requests[5]["messages"]) == 3
    assert "- turn 2: computer_action" in requests[5]["messages"][0]["content"][3]["text"]
    assert result.counters.shrinks == 1
    assert len(requests[6]["messages"]) == 5 and len(requests[7]["messages"]) == 3, "each resend was smaller"
    assert len(requests) == 8


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("ThrottlingException", 429, ProviderErrorKind.RATE_LIMITED),
    ("ModelNotReadyException", 429, ProviderErrorKind.SERVER_ERROR),
    ("ServiceUnavailableException", 503, ProviderErrorKind.SERVER_ERROR),
    ("InternalServerException", 500, ProviderErrorKind.SERVER_ERROR),
    ("ModelTimeoutException", 408, ProviderErrorKind.TRANSIENT),
    ("ValidationException", 400, ProviderErrorKind.FATAL),
    ("AccessDeniedException", 403, ProviderErrorKind.FATAL),
    ("ResourceNotFoundException", 404, ProviderErrorKind.FATAL),
])
def test_client_error_codes_with_the_botocore_stubber(code: str, status: int, kind: ProviderErrorKind) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("converse", service_error_code=code, service_message="stubbed",
                              http_status_code=status)
        with pytest.raises(ClientError) as caught:
            client.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    error = classify_botocore(caught.value)
    assert error is not None and (error.kind, error.status) == (kind, status)
    too_long = ClientError({"Error": {"Code": "ValidationException", "Message": "Input is too long for requested "
                                      "model."}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "Converse")
    assert classify_botocore(too_long).kind is ProviderErrorKind.REQUEST_TOO_LARGE  # type: ignore[union-attr]


def test_catalog_checks_ids_image_input_and_inference_profiles(wire: ConverseWire) -> None:
    specs = [spec(wire, m) for m in (MODEL, PROFILE, "amazon.titan-text-premier-v1:0", "old.vision-v1:0",
                                      "meta.missing-v1:0", "eu.meta.missing-v1:0")]
    entries = {e.model: e for e in BedrockProvider().check_model_catalog(specs, Credentials({}))}
    assert entries[MODEL].available is True and entries[MODEL].image_input is True
    assert "credentials: AWS standard credential chain (default profile); no API key variable is used" in (
        entries[MODEL].reason)
    assert entries[PROFILE].available is True and "inference profile over" in entries[PROFILE].reason
    assert entries["amazon.titan-text-premier-v1:0"].available is False
    assert "does not list IMAGE" in entries["amazon.titan-text-premier-v1:0"].reason
    assert entries["old.vision-v1:0"].available is False and "LEGACY" in entries["old.vision-v1:0"].reason
    assert entries["meta.missing-v1:0"].available is False
    assert "not a foundation model or inference profile" in entries["eu.meta.missing-v1:0"].reason
    assert {r.method for r in wire.requests()} == {"GET"}
    assert BedrockProvider().credential_names(specs[0]) == []


def test_catalog_without_credentials_says_so(wire: ConverseWire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    (entry,) = BedrockProvider().check_model_catalog([spec(wire)], Credentials({}))
    assert entry.available is False
    assert entry.reason.startswith("not checked: no AWS credentials found in the standard chain; credentials: AWS")
    assert wire.requests() == []


def test_thirty_turn_rollout_through_the_core_pilot(tmp_path: Path) -> None:
    def script(n: int) -> object:
        return wire.tool_call_reply(DONE if n == 29 else MOVE, call_id=f"tooluse_{n}")

    with ConverseWire() as wire:
        wire.default = scripted_default(script)  # type: ignore[arg-type]
        result, rollout = run_pilot(tmp_path, spec(wire), {}, ())
        requests = wire.model_requests()
    assert (result["status"], result["stop_reason"], result["turns"]) == ("completed", "done", 30)
    assert len(requests) == 30 and result["usage"]["input_tokens"] == 30 * 1800
    state = json.loads((rollout / "resume-checkpoint.json").read_text())["provider_state"]
    assert state["responses"] == 30 and len(state["exchanges"]) == 8 and len(state["dropped"]) == 16
    assert scan_for(tmp_path, [SECRET_KEY]) == []


def test_resume_after_dropped_exchanges_sends_identical_bytes(wire: ConverseWire, root: Path) -> None:
    frames = small_frames(root, 8)

    async def scenario() -> None:
        original = open_session(spec(wire), root)
        turns = await drive(original, wire, frames, 12)
        state = json.loads(json.dumps(original.checkpoint(), sort_keys=True))
        assert len(state["dropped"]) == 3 and len(state["exchanges"]) == 8
        reply = wire.tool_call_reply({"actions": [{"type": "move", "y": 4, "x": 3}]}, call_id="same")
        wire.push(reply, reply)
        following = observation(frames[12 % 8], 12, turns[-1])
        await original.next_turn(following)
        resumed = open_session(spec(wire), root, resume_state=state)
        await resumed.next_turn(following)
        assert resumed.checkpoint() == original.checkpoint()
        await original.aclose()
        await resumed.aclose()

    asyncio.run(scenario())
    a, b = wire.model_requests()[-2:]
    assert a.body == b.body
