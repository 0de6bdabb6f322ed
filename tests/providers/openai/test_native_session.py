"""Native tool mode: NativeOpenAISession against the local Responses wire fake, through the SDK.

Every response body is built from the pinned SDK's own types and dumped to JSON.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses import (
    ComputerToolParam,
    ComputerUsePreviewToolParam,
    Response,
    ResponseComputerToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response import IncompleteDetails
from openai.types.responses.response_computer_tool_call import PendingSafetyCheck
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from PIL import Image

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.testing.fake_broker import png_frame
from autocad_bench.testing.wire import Reply, ResponsesWire
from autocad_bench_openai.native.session import (
    INCLUDE,
    NativeOpenAISession,
    default_variant,
    openai_geometry,
)
from autocad_bench_openai.provider import OpenaiProvider

DESKTOP = DisplaySize(width=1920, height=1080)
SECRET = "sk-native-test-5d1c8e7f0a9b"
GA_MODEL = "gpt-5.5"
PREVIEW_MODEL = "computer-use-preview-2025-03-11"
TASK = "Draw a circle of radius 50 at the origin and save the drawing."
USAGE = ResponseUsage(input_tokens=1500,
                      input_tokens_details=InputTokensDetails(cached_tokens=1000, cache_write_tokens=0),
                      output_tokens=60, output_tokens_details=OutputTokensDetails(reasoning_tokens=20),
                      total_tokens=1560)


class DesktopRollout:
    """A rollout directory with desktop-sized (1920x1080) reference and frames."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reference = self._write("reference.png", png_frame(DESKTOP.width, DESKTOP.height, 99, 7))
        self.frames: dict[int, ArtifactRef] = {}

    def _write(self, relative: str, data: bytes) -> ArtifactRef:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(),
                           width=DESKTOP.width, height=DESKTOP.height)

    def frame(self, index: int) -> ArtifactRef:
        if index not in self.frames:
            self.frames[index] = self._write(f"frames/{index:06d}.png",
                                             png_frame(DESKTOP.width, DESKTOP.height, index, index))
        return self.frames[index]

    def observation(self, index: int, previous: ModelTurn | None = None, feedback: str = "") -> Observation:
        return Observation(turn_index=index, frame=self.frame(index), feedback=feedback,
                           tool_use_id=None if previous is None else previous.tool_use_id,
                           remaining_actions=500 - index)


@pytest.fixture
def desk(tmp_path: Path) -> DesktopRollout:
    root = tmp_path / "rollout"
    root.mkdir()
    return DesktopRollout(root)


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire() as server:
        yield server


def spec(wire: ResponsesWire, model: str = GA_MODEL, **options: Any) -> ModelSpec:
    return ModelSpec(provider="openai", model=model, tool_mode="native",
                     options={"base_url": wire.url + "/v1", "timeout_s": 20, **options})


def open_native(desk: DesktopRollout, wire: ResponsesWire, model: str = GA_MODEL, *,
                resume_state: JsonObject | None = None, **options: Any) -> NativeOpenAISession:
    request = SessionRequest(
        rollout_id="r1", attempt_id="b.r1.1", model=spec(wire, model, **options), task_prompt=TASK,
        reference=desk.reference, rollout_dir=desk.root, display=DESKTOP,
        action_schema=computer_action_schema(), action_budget=500, resume_state=resume_state,
    )
    session = OpenaiProvider().open_session(request, Credentials({"OPENAI_API_KEY": SECRET}))
    assert isinstance(session, NativeOpenAISession)
    return session


def reply(*output: Any, status: Any = "completed", reason: Any = None, response_id: str = "resp_1") -> Reply:
    response = Response(
        id=response_id, object="response", created_at=1_700_000_000, model="wire-fake-model", output=list(output),
        parallel_tool_calls=True, tool_choice="auto", tools=[], status=status,
        incomplete_details=IncompleteDetails(reason=reason) if reason else None,
        usage=USAGE,
    )
    return Reply.json(response.model_dump(mode="json"))


def ga_call(call_id: str, *actions: dict[str, Any], checks: list[PendingSafetyCheck] | None = None,
            ) -> ResponseComputerToolCall:
    return ResponseComputerToolCall.model_validate({
        "id": f"cu_{call_id}", "call_id": call_id, "type": "computer_call", "status": "completed",
        "pending_safety_checks": [c.model_dump() for c in checks or []], "actions": list(actions)})


def preview_call(call_id: str, action: dict[str, Any]) -> ResponseComputerToolCall:
    return ResponseComputerToolCall.model_validate({
        "id": f"cu_{call_id}", "call_id": call_id, "type": "computer_call", "status": "completed",
        "pending_safety_checks": [], "action": action})


def reasoning(item_id: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=item_id, type="reasoning", summary=[Summary(type="summary_text", text="plan")],
                                 encrypted_content=f"gAAAA-encrypted-{item_id}")


def message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def bodies(wire: ResponsesWire) -> list[dict[str, Any]]:
    return [r.json() for r in wire.model_requests()]


def data_url_size(url: str) -> tuple[int, int]:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(url[len(prefix):]))) as image:
        return image.size


def tool_keys(param: Any) -> set[str]:
    return set(param.__required_keys__ | param.__optional_keys__)


async def test_ga_request_shape_and_click_mapping(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    geometry = openai_geometry(DESKTOP)
    assert (geometry.shown.width, geometry.shown.height) == (1366, 768) and session.geometry == geometry
    assert session.variant == "computer" and default_variant(GA_MODEL) == "computer"
    wire.push(reply(ga_call("call_1", {"type": "click", "button": "left", "x": 700, "y": 400})))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    (body,) = bodies(wire)
    (tool,) = body["tools"]
    assert tool == {"type": "computer"} and set(tool) == tool_keys(ComputerToolParam)
    assert body["store"] is False and body["include"] == INCLUDE == ["reasoning.encrypted_content"]
    assert "truncation" not in body and "tool_choice" not in body
    assert body["model"] == GA_MODEL
    (first,) = body["input"]
    images = [p["image_url"] for p in first["content"] if p["type"] == "input_image"]
    assert [data_url_size(url) for url in images] == [(1366, 768), (1366, 768)]  # reference, screenshot
    x, y = geometry.to_desktop(700, 400)
    assert turn.action_input == {"actions": [{"type": "click", "x": x, "y": y, "button": "left", "count": 1}]}
    assert turn.tool_use_id == "call_1" and turn.malformed is None
    assert turn.usage == TokenUsage(input_tokens=500, cached_input_tokens=1000, output_tokens=60, reasoning_tokens=20)


async def test_preview_request_shape(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, PREVIEW_MODEL)
    assert session.variant == "computer_use_preview"
    wire.push(reply(preview_call("call_p", {"type": "double_click", "x": 10, "y": 20})))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    (body,) = bodies(wire)
    (tool,) = body["tools"]
    assert tool == {"type": "computer_use_preview", "display_width": 1366, "display_height": 768,
                    "environment": "linux"}
    assert set(tool) == tool_keys(ComputerUsePreviewToolParam)
    assert body["truncation"] == "auto" and body["store"] is False and body["include"] == INCLUDE
    x, y = session.geometry.to_desktop(10, 20)
    assert turn.action_input == {"actions": [{"type": "click", "x": x, "y": y, "button": "left", "count": 2}]}


async def test_option_overrides_the_variant(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, GA_MODEL, computer_tool="computer_use_preview")
    assert session.variant == "computer_use_preview"
    await session.aclose()


async def test_batch_reasoning_replay_and_screenshot_outputs(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    thought = reasoning("rs_1")
    call = ga_call("call_1", {"type": "keypress", "keys": ["CTRL", "S"]}, {"type": "screenshot"},
                   {"type": "type", "text": "LINE"}, {"type": "scroll", "x": 5, "y": 5, "scroll_x": 0, "scroll_y": 250})
    wire.push(reply(thought, call))
    wire.push(reply(message("The drawing is complete and saved."), response_id="resp_2"))
    try:
        first = await session.next_turn(desk.observation(0))
        second = await session.next_turn(desk.observation(1, first, feedback="4 actions ran."))
    finally:
        await session.aclose()
    sx, sy = session.geometry.to_desktop(5, 5)
    assert first.action_input == {"actions": [
        {"type": "key", "keys": ["ctrl", "s"]}, {"type": "wait", "seconds": 0.1}, {"type": "type", "text": "LINE"},
        {"type": "scroll", "x": sx, "y": sy, "dx": 0, "dy": -2}]}
    # The model's own finish: a message and no computer call.
    assert second.action_input == {"actions": [{"type": "done"}]}
    assert second.text == "The drawing is complete and saved." and second.malformed is None
    _, body = bodies(wire)
    items = body["input"]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user", "reasoning", "computer_call", "computer_call_output", "user"]
    # Replayed exactly as returned, before the call it preceded.
    assert items[1] == thought.model_dump(mode="json")
    assert items[2] == call.model_dump(mode="json")
    output = items[3]
    assert output["call_id"] == "call_1" and output["output"]["type"] == "computer_screenshot"
    assert "acknowledged_safety_checks" not in output
    assert data_url_size(output["output"]["image_url"]) == (1366, 768)
    assert "4 actions ran." in items[4]["content"][0]["text"]


async def test_several_calls_each_get_an_output(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply(ga_call("c1", {"type": "move", "x": 1, "y": 1}), ga_call("c2", {"type": "wait"})))
    wire.push(reply(message("done")))
    try:
        first = await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(1, first))
    finally:
        await session.aclose()
    assert first.tool_use_id == "c2"
    x, y = session.geometry.to_desktop(1, 1)
    assert first.action_input == {"actions": [{"type": "move", "x": x, "y": y}, {"type": "wait", "seconds": 1.0}]}
    items = bodies(wire)[1]["input"]
    outputs = [i for i in items if i.get("type") == "computer_call_output"]
    assert [o["call_id"] for o in outputs] == ["c1", "c2"]
    assert outputs[0]["output"] == outputs[1]["output"]


async def test_unsupported_action_is_invalid_then_answered_with_the_error(
        wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply(ga_call("call_1", {"type": "move", "x": 1, "y": 1},
                            {"type": "click", "button": "back", "x": 3, "y": 4})))
    wire.push(reply(message("ok")))
    try:
        first = await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(1, first, feedback="the turn was invalid"))
    finally:
        await session.aclose()
    assert first.action_input is None and first.tool_use_id == "call_1"
    assert first.malformed is not None and "'back' mouse button" in first.malformed
    items = bodies(wire)[1]["input"]
    assert items[-2]["type"] == "computer_call_output" and items[-2]["call_id"] == "call_1"
    note = items[-1]["content"][0]["text"]
    assert "action 2 (click)" in note and "'back' mouse button is not available" in note
    assert session.checkpoint()["malformed_turns"] == 1


async def test_out_of_screen_coordinate_is_malformed(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply(ga_call("call_1", {"type": "move", "x": 1366, "y": 10})))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    assert turn.action_input is None and "outside the 1366x768 screenshot" in (turn.malformed or "")


CHECK = PendingSafetyCheck(id="sc_1", code="malicious_instructions", message="Instructions on screen look suspicious.")


async def test_safety_check_stop_policy(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    assert session.safety_checks == "stop"
    wire.push(reply(ga_call("call_1", {"type": "move", "x": 1, "y": 1}, checks=[CHECK])))
    wire.push(reply(message("stopping")))
    try:
        turn = await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(1, turn, feedback="invalid"))
    finally:
        await session.aclose()
    assert turn.action_input is None and turn.stop_reason == "safety_check"
    assert "malicious_instructions" in (turn.malformed or "") and "look suspicious" in (turn.malformed or "")
    assert "sc_1" in turn.text and "malicious_instructions" in turn.text
    # Nothing was committed: the next request does not replay the unacknowledged call.
    items = bodies(wire)[1]["input"]
    assert [i.get("type") for i in items if "type" in i] == []


async def test_safety_check_acknowledge_policy(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, safety_checks="acknowledge")
    wire.push(reply(ga_call("call_1", {"type": "move", "x": 1, "y": 1}, checks=[CHECK])))
    wire.push(reply(message("done")))
    try:
        turn = await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(1, turn))
    finally:
        await session.aclose()
    assert turn.malformed is None and turn.action_input is not None
    assert "acknowledged" in turn.text and "sc_1" in turn.text
    (output,) = [i for i in bodies(wire)[1]["input"] if i.get("type") == "computer_call_output"]
    assert output["acknowledged_safety_checks"] == [CHECK.model_dump(mode="json")]


async def test_refusal_and_truncation_are_invalid_with_stop_reason(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    refusal = ResponseOutputMessage(id="msg_r", type="message", role="assistant", status="completed",
                                    content=[ResponseOutputRefusal(type="refusal", refusal="I can't help with that.")])
    wire.push(reply(refusal))
    wire.push(reply(reasoning("rs_cut"), status="incomplete", reason="max_output_tokens"))
    wire.push(reply(message("done")))
    try:
        refused = await session.next_turn(desk.observation(0))
        cut = await session.next_turn(desk.observation(0, refused, feedback="refused"))
        await session.next_turn(desk.observation(0, cut, feedback="cut"))
    finally:
        await session.aclose()
    assert refused.action_input is None and refused.stop_reason == "refusal"
    assert "I can't help with that." in (refused.malformed or "") and refused.text == "I can't help with that."
    assert cut.action_input is None and cut.stop_reason == "max_output_tokens"
    assert "max_output_tokens" in (cut.malformed or "")
    # Neither reply was committed: the third request holds only the first user message.
    assert len(bodies(wire)[2]["input"]) == 1


async def test_checkpoint_resume_sends_identical_next_request(
        wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply(reasoning("rs_1"), ga_call("call_1", {"type": "move", "x": 3, "y": 4}, checks=[CHECK])))
    wire.push(reply(message("done"), response_id="resp_a"))
    wire.push(reply(message("done"), response_id="resp_b"))
    try:
        first = await session.next_turn(desk.observation(0))  # stop policy: uncommitted
        second = await session.next_turn(desk.observation(1, first, feedback="safety"))
        saved = session.checkpoint()
        # A fresh session from the checkpoint (same observation) sends the identical body.
        await session.next_turn(desk.observation(1, first, feedback="safety"))
    finally:
        await session.aclose()
    assert second.action_input == {"actions": [{"type": "done"}]}
    resumed = open_native(desk, wire, resume_state=saved)
    wire.push(reply(message("done")))
    try:
        await resumed.next_turn(desk.observation(1, first, feedback="safety"))
    finally:
        await resumed.aclose()
    requests = wire.model_requests()
    assert requests[-1].body == requests[-2].body


async def test_resume_after_a_committed_turn_is_byte_identical(wire: ResponsesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, PREVIEW_MODEL, safety_checks="acknowledge")
    wire.push(reply(reasoning("rs_1"), preview_call("call_1", {"type": "move", "x": 3, "y": 4})))
    wire.push(reply(message("done")))
    try:
        first = await session.next_turn(desk.observation(0))
        saved = session.checkpoint()
        await session.next_turn(desk.observation(1, first, feedback="1 action ran."))
    finally:
        await session.aclose()
    resumed = open_native(desk, wire, PREVIEW_MODEL, resume_state=saved)
    assert resumed.variant == "computer_use_preview" and resumed.safety_checks == "acknowledge"
    wire.push(reply(message("done")))
    try:
        await resumed.next_turn(desk.observation(1, first, feedback="1 action ran."))
    finally:
        await resumed.aclose()
    requests = wire.model_requests()
    assert len(requests) == 3 and requests[2].body == requests[1].body
    assert "computer_call_output" in requests[2].body.decode()


async def test_errors_are_classified_and_commit_nothing(wire: ResponsesWire, desk: DesktopRollout) -> None:
    from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError

    session = open_native(desk, wire)
    wire.push_error(429, "slow down", headers={"retry-after": "3"})
    wire.push(reply(message("done")))
    try:
        with pytest.raises(ProviderRequestError) as caught:
            await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    assert caught.value.kind is ProviderErrorKind.RATE_LIMITED and caught.value.retry_after_s == 3.0
    assert SECRET not in str(caught.value)
    first, second = wire.model_requests()
    assert first.body == second.body


def test_provider_accepts_native_mode_and_options() -> None:
    provider = OpenaiProvider()
    assert provider.tool_modes == frozenset({"function", "native"})
    assert provider.validate_model_spec(ModelSpec(provider="openai", model="gpt-5.5", tool_mode="native"), "x") == []
    options = {"computer_tool": "computer_use_preview", "safety_checks": "acknowledge"}
    assert provider.validate_model_spec(
        ModelSpec(provider="openai", model="gpt-5.5", tool_mode="native", options=options), "x") == []
    problems = provider.validate_model_spec(
        ModelSpec(provider="openai", model="gpt-5.5", tool_mode="native", options={"safety_checks": "ignore"}), "x")
    assert problems and problems[0].location.startswith("x.provider_options")


# --- through the real pilot ------------------------------------------------------------------


def test_pilot_rollout_in_native_mode(tmp_path: Path, wire: ResponsesWire) -> None:
    from tests.providers.openai.pilot_support import run_pilot

    wire.push(reply(reasoning("rs_1"), ga_call("call_1", {"type": "click", "button": "left", "x": 5, "y": 6},
                                               {"type": "screenshot"})))
    wire.push(reply(message("The drawing is complete and saved."), response_id="resp_2"))
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), "OPENAI_API_KEY")
    assert (run.result["status"], run.result["stop_reason"]) == ("completed", "done"), run.result
    first, second = bodies(wire)
    assert first["tools"] == [{"type": "computer"}]
    assert [i.get("type") for i in second["input"][1:4]] == ["reasoning", "computer_call", "computer_call_output"]


def test_pilot_stops_at_a_safety_check(tmp_path: Path, wire: ResponsesWire) -> None:
    from tests.providers.openai.pilot_support import run_pilot

    wire.push(reply(ga_call("call_1", {"type": "move", "x": 1, "y": 1}, checks=[CHECK])))
    run = run_pilot(tmp_path, OpenaiProvider(), spec(wire), "OPENAI_API_KEY")
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "safety_check_stopped"), run.result
    assert "malicious_instructions" in run.result["failure_detail"] and run.result["actions"] == 0
    assert len(wire.model_requests()) == 1
