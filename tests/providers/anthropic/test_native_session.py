"""Native tool mode: NativeAnthropicSession against the local fake Messages API."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.beta import (
    BetaComputerToolset20260801Param,
    BetaComputerToolsetConfigsParam,
    BetaMessage,
    BetaTextBlock,
    BetaToolComputerUse20250124Param,
    BetaToolUseBlock,
    BetaUsage,
)
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
from autocad_bench.testing.wire import Reply
from autocad_bench_anthropic.native.actions import ACTIONS_BY_VERSION
from autocad_bench_anthropic.native.session import (
    CUT_OFF,
    NOT_PERFORMED,
    NativeAnthropicSession,
    anthropic_geometry,
    computer_tool_version,
)
from autocad_bench_anthropic.options import AnthropicOptions
from autocad_bench_anthropic.provider import AnthropicProvider
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import SECRET

DESKTOP = DisplaySize(width=1920, height=1080)
OLD_MODEL = "claude-test-model"
NEW_MODEL = "claude-opus-4-7"
TASK = "Draw a circle of radius 50 at the origin and save the drawing."
USAGE = BetaUsage(input_tokens=1200, cache_read_input_tokens=300, cache_creation_input_tokens=40, output_tokens=55)


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


def request_for(desk: DesktopRollout, wire: MessagesWire, model: str = OLD_MODEL, *,
                resume_state: JsonObject | None = None) -> SessionRequest:
    return SessionRequest(
        rollout_id="r1", attempt_id="b.r1.1",
        model=ModelSpec(provider="anthropic", model=model, tool_mode="native",
                        options={"base_url": wire.url, "timeout_s": 20}),
        task_prompt=TASK, reference=desk.reference, rollout_dir=desk.root, display=DESKTOP,
        action_schema=computer_action_schema(), action_budget=500, resume_state=resume_state,
    )


def open_native(desk: DesktopRollout, wire: MessagesWire, model: str = OLD_MODEL, *,
                resume_state: JsonObject | None = None) -> NativeAnthropicSession:
    session = AnthropicProvider().open_session(request_for(desk, wire, model, resume_state=resume_state),
                                               Credentials({"ANTHROPIC_API_KEY": SECRET}))
    assert isinstance(session, NativeAnthropicSession)
    return session


def reply(content: list[Any], stop_reason: str = "tool_use", message_id: str = "msg_1") -> Reply:
    message = BetaMessage(id=message_id, type="message", role="assistant", model="claude-fake", content=content,
                          stop_reason=stop_reason, stop_sequence=None, usage=USAGE)  # type: ignore[arg-type]
    return Reply.json(message.model_dump(mode="json"))


def call(call_id: str, **tool_input: Any) -> BetaToolUseBlock:
    return BetaToolUseBlock(type="tool_use", id=call_id, name="computer", input=tool_input)


def text(value: str) -> BetaTextBlock:
    return BetaTextBlock(type="text", text=value, citations=None)


def bodies(wire: MessagesWire) -> list[dict[str, Any]]:
    return [r.json() for r in wire.model_requests()]


def image_size(block: dict[str, Any]) -> tuple[int, int]:
    data = base64.b64decode(block["source"]["data"])
    with Image.open(io.BytesIO(data)) as image:
        return image.size


async def test_request_shape_scaling_and_click_mapping(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    geometry = anthropic_geometry(DESKTOP)
    shown = geometry.shown
    assert not geometry.is_identity and session.geometry == geometry
    x, y = 700, 400
    wire.push(reply([text("Clicking the circle tool."), call("toolu_1", action="left_click", coordinate=[x, y])]))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    (request,) = wire.model_requests()
    assert request.headers["anthropic-beta"] == "computer-use-2025-01-24"
    body = request.json()
    (tool,) = body["tools"]
    allowed = BetaToolComputerUse20250124Param.__required_keys__ | BetaToolComputerUse20250124Param.__optional_keys__
    assert set(tool) <= allowed
    assert tool == {"type": "computer_20250124", "name": "computer",
                    "display_width_px": shown.width, "display_height_px": shown.height}
    assert "tool_choice" not in body
    system = body["system"][0]["text"]
    assert TASK in system and "without a tool call" in system
    (first,) = body["messages"]
    assert [b["type"] for b in first["content"]] == ["text", "image", "text", "image"]
    assert TASK in first["content"][0]["text"]
    assert image_size(first["content"][3]) == (shown.width, shown.height)
    # The desktop-sized reference is scaled too.
    assert image_size(first["content"][1]) == (shown.width, shown.height)
    dx, dy = geometry.to_desktop(x, y)
    assert (dx, dy) != (x, y)
    assert turn.action_input == {"actions": [{"type": "click", "x": dx, "y": dy, "button": "left", "count": 1}]}
    assert turn.malformed is None and turn.tool_use_id == "toolu_1" and turn.stop_reason == "tool_use"
    assert turn.text == "Clicking the circle tool."
    assert turn.usage == TokenUsage(input_tokens=1200, cached_input_tokens=300, cache_write_tokens=40,
                                    output_tokens=55)


async def test_new_models_get_the_20251124_tool(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire, NEW_MODEL)
    wire.push(reply([call("toolu_1", action="screenshot")]))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    (request,) = wire.model_requests()
    assert request.headers["anthropic-beta"] == "computer-use-2025-11-24"
    assert request.json()["tools"][0]["type"] == "computer_20251124"
    assert turn.action_input == {"actions": [{"type": "wait", "seconds": 0.1}]}


async def test_the_computer_tool_option_overrides_the_model_table(wire: MessagesWire, desk: DesktopRollout) -> None:
    request = request_for(desk, wire, NEW_MODEL)
    request = request.model_copy(update={"model": request.model.model_copy(
        update={"options": {**request.model.options, "computer_tool": "computer_20250124"}})})
    session = AnthropicProvider().open_session(request, Credentials({"ANTHROPIC_API_KEY": "k"}))
    wire.push(reply([call("toolu_1", action="screenshot")]))
    try:
        await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    (sent,) = wire.model_requests()
    assert sent.headers["anthropic-beta"] == "computer-use-2025-01-24"
    assert sent.json()["tools"][0]["type"] == "computer_20250124"


async def test_two_calls_make_one_batch_and_two_results(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    geometry = session.geometry
    wire.push(reply([call("toolu_a", action="left_click", coordinate=[10, 20]),
                     call("toolu_b", action="type", text="CIRCLE")]))
    wire.push(reply([text("All done.")], stop_reason="end_turn", message_id="msg_2"))
    try:
        first = await session.next_turn(desk.observation(0))
        second = await session.next_turn(desk.observation(1, first, feedback="Executed 2 actions."))
    finally:
        await session.aclose()
    assert first.tool_use_id == "toolu_b"
    assert isinstance(first.action_input, dict)
    actions = first.action_input["actions"]
    assert isinstance(actions, list) and actions[0] == {
        "type": "click", "x": geometry.to_desktop(10, 20)[0], "y": geometry.to_desktop(10, 20)[1],
        "button": "left", "count": 1}
    assert [a["type"] for a in actions if isinstance(a, dict)][1:] == ["type"]
    body = bodies(wire)[1]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["id"] for b in body["messages"][1]["content"]] == ["toolu_a", "toolu_b"]
    results = body["messages"][2]["content"]
    assert [(r["type"], r["tool_use_id"]) for r in results] == [("tool_result", "toolu_a"),
                                                                 ("tool_result", "toolu_b")]
    assert [b["type"] for b in results[0]["content"]] == ["text"]
    assert [b["type"] for b in results[1]["content"]] == ["text", "image"]
    assert "Executed 2 actions." in results[1]["content"][0]["text"]
    assert image_size(results[1]["content"][1]) == (geometry.shown.width, geometry.shown.height)
    assert not any(r.get("is_error") for r in results)
    # Item 5: end_turn without a tool call ends the episode.
    assert second.action_input == {"actions": [{"type": "done"}]}
    assert second.malformed is None and second.text == "All done." and second.stop_reason == "end_turn"


async def test_unsupported_action_is_malformed_then_an_error_result(wire: MessagesWire,
                                                                    desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply([call("toolu_ok", action="mouse_move", coordinate=[5, 5]),
                     call("toolu_hold", action="left_click", text="shift", coordinate=[5, 5])]))
    wire.push(reply([call("toolu_2", action="key", text="Escape")], message_id="msg_2"))
    try:
        bad = await session.next_turn(desk.observation(0))
        good = await session.next_turn(desk.observation(1, bad, feedback=f"invalid turn: {bad.malformed}"))
    finally:
        await session.aclose()
    assert bad.action_input is None and bad.malformed is not None
    assert bad.malformed.startswith("holding modifier keys")
    assert bad.tool_use_id == "toolu_hold"
    results = bodies(wire)[1]["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_ok", "toolu_hold"]
    assert results[0]["is_error"] is True and results[0]["content"][0]["text"] == NOT_PERFORMED
    assert results[1]["is_error"] is True
    assert bad.malformed in results[1]["content"][0]["text"]
    assert good.malformed is None and good.tool_use_id == "toolu_2"


async def test_malformed_input_and_out_of_screen_point(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    shown = session.geometry.shown
    wire.push(reply([call("toolu_1", action="left_click", coordinate=[shown.width, 3])]))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    assert turn.action_input is None and turn.malformed is not None
    assert "outside" in turn.malformed


@pytest.mark.parametrize(("stop_reason", "expected"), [("refusal", "the model refused: I won't do that."),
                                                       ("max_tokens", CUT_OFF)])
async def test_refusal_and_max_tokens(wire: MessagesWire, desk: DesktopRollout, stop_reason: str,
                                      expected: str) -> None:
    session = open_native(desk, wire)
    wire.push(reply([text("I won't do that.")], stop_reason=stop_reason))
    wire.push(reply([call("toolu_2", action="wait", duration=1)], message_id="msg_2"))
    try:
        turn = await session.next_turn(desk.observation(0))
        after = await session.next_turn(desk.observation(1, turn, feedback=f"invalid turn: {turn.malformed}"))
    finally:
        await session.aclose()
    assert turn.action_input is None and turn.malformed == expected and turn.stop_reason == stop_reason
    assert after.action_input == {"actions": [{"type": "wait", "seconds": 1.0}]}
    # Nothing was committed: the next request starts over from the task message, with the new frame.
    second = bodies(wire)[1]
    assert [m["role"] for m in second["messages"]] == ["user"]
    assert f"invalid turn: {expected}" in second["messages"][0]["content"][2]["text"]


async def test_checkpoint_resume_sends_identical_next_request(wire: MessagesWire, desk: DesktopRollout) -> None:
    original = open_native(desk, wire)
    wire.push(reply([text("Zoom first."), call("toolu_1", action="scroll", coordinate=[100, 100],
                                               scroll_direction="down", scroll_amount=3)]))
    first = await original.next_turn(desk.observation(0))
    wire.push(reply([call("toolu_x", action="hold_key", text="a", duration=11)], message_id="msg_2"))
    second = await original.next_turn(desk.observation(1, first, feedback="Executed scroll."))
    assert second.malformed is not None
    saved = json.loads(json.dumps(original.checkpoint(), sort_keys=True))
    assert "base64" not in json.dumps(saved)
    restored = open_native(desk, wire, resume_state=saved)
    third = desk.observation(2, second, feedback=f"invalid turn: {second.malformed}")
    try:
        wire.push(reply([call("toolu_3", action="left_click", coordinate=[1, 1])], message_id="msg_3"))
        wire.push(reply([call("toolu_3", action="left_click", coordinate=[1, 1])], message_id="msg_3"))
        a = await original.next_turn(third)
        b = await restored.next_turn(third)
    finally:
        await original.aclose()
        await restored.aclose()
    requests = wire.model_requests()
    assert requests[-1].body == requests[-2].body
    assert requests[-1].headers["anthropic-beta"] == requests[-2].headers["anthropic-beta"]
    assert a == b
    assert restored.checkpoint() == original.checkpoint()
    last_results = requests[-1].json()["messages"][-1]["content"]
    assert last_results[0]["tool_use_id"] == "toolu_x" and last_results[0]["is_error"] is True


def test_provider_admits_native_mode() -> None:
    provider = AnthropicProvider()
    assert provider.validate_model_spec(
        ModelSpec(provider="anthropic", model="claude-opus-4-5", tool_mode="native"), "x") == []
    assert "native" in provider.tool_modes and "function" in provider.tool_modes


async def test_failed_request_is_classified_and_commits_nothing(wire: MessagesWire, desk: DesktopRollout) -> None:
    from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError

    session = open_native(desk, wire)
    wire.push(wire.error_reply(429, "slow down", headers={"retry-after": "3"}))
    wire.push(reply([call("toolu_1", action="left_click", coordinate=[1, 1])]))
    try:
        with pytest.raises(ProviderRequestError) as raised:
            await session.next_turn(desk.observation(0))
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    assert raised.value.kind == ProviderErrorKind.RATE_LIMITED and raised.value.retry_after_s == 3.0
    assert turn.malformed is None
    first, second = wire.model_requests()
    assert first.body == second.body


def test_tool_version_table() -> None:
    assert computer_tool_version("claude-opus-4-5-20251101") == "computer_20251124"
    assert computer_tool_version("claude-sonnet-4-5") == "computer_20250124"
    assert computer_tool_version("claude-opus-4-5", table=()) == "computer_20250124"


async def test_cursor_position_and_mouse_down_up_follow_the_sent_pointer(wire: MessagesWire,
                                                                        desk: DesktopRollout) -> None:
    from autocad_bench.actions import ValidatedBatch, validate_batch

    session = open_native(desk, wire)
    geometry = session.geometry
    wire.push(reply([call("toolu_c", action="cursor_position")]))
    wire.push(reply([call("toolu_m", action="mouse_move", coordinate=[100, 50]),
                     call("toolu_p", action="cursor_position")], message_id="msg_2"))
    wire.push(reply([call("toolu_d", action="left_mouse_down"),
                     call("toolu_v", action="mouse_move", coordinate=[200, 60]),
                     call("toolu_u", action="left_mouse_up"),
                     call("toolu_q", action="cursor_position")], message_id="msg_3"))
    wire.push(reply([text("Done.")], stop_reason="end_turn", message_id="msg_4"))
    try:
        unknown = await session.next_turn(desk.observation(0))
        first = await session.next_turn(desk.observation(1, unknown, feedback=f"invalid turn: {unknown.malformed}"))
        second = await session.next_turn(desk.observation(2, first, feedback="Executed."))
        saved = session.checkpoint()
        await session.next_turn(desk.observation(3, second, feedback="Executed."))
    finally:
        await session.aclose()
    assert unknown.action_input is None and unknown.malformed is not None
    assert "pointer position is not known yet" in unknown.malformed
    start = geometry.to_desktop(100, 50)
    end = geometry.to_desktop(200, 60)
    assert first.action_input == {"actions": [{"type": "move", "x": start[0], "y": start[1]},
                                              {"type": "wait", "seconds": 0.1}]}
    assert second.action_input == {"actions": [
        {"type": "mouse_down", "x": start[0], "y": start[1], "button": "left"},
        {"type": "move", "x": end[0], "y": end[1]},
        {"type": "mouse_up", "x": end[0], "y": end[1], "button": "left"},
        {"type": "wait", "seconds": 0.1},
    ]}
    # Native mode validates them; function mode refuses the native-only types.
    assert isinstance(validate_batch(second.action_input, DESKTOP, 100, native=True), ValidatedBatch)
    assert not isinstance(validate_batch(second.action_input, DESKTOP, 100), ValidatedBatch)
    state = saved["state"]
    assert isinstance(state, dict) and state["pointer"] == list(end)
    sent = bodies(wire)
    results = sent[2]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_m", "toolu_p"]
    assert results[1]["content"][0]["text"] == "X={}, Y={}".format(*geometry.to_shown(*start))
    assert not any(r.get("is_error") for r in results)
    results = sent[3]["messages"][-1]["content"]
    assert results[3]["tool_use_id"] == "toolu_q"
    assert results[3]["content"][0]["text"] == "X={}, Y={}".format(*geometry.to_shown(*end))
    assert [b["type"] for b in results[3]["content"]] == ["text", "text", "image"]


async def test_zoom_answers_with_a_crop_of_the_next_frame(wire: MessagesWire, desk: DesktopRollout) -> None:
    import math

    # Frame 1 (the one after the zoom batch): left half red, right half blue.
    image = Image.new("RGB", (DESKTOP.width, DESKTOP.height), (255, 0, 0))
    image.paste((0, 0, 255), (DESKTOP.width // 2, 0, DESKTOP.width, DESKTOP.height))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    desk.frames[1] = desk._write("frames/000001.png", buffer.getvalue())

    session = open_native(desk, wire, NEW_MODEL)
    shown = session.geometry.shown
    half = shown.width // 2 + 2
    wire.push(reply([call("toolu_z1", action="zoom", region=[half, 0, half + 200, 100]),
                     call("toolu_z2", action="zoom", region=[0, 0, shown.width, shown.height])]))
    wire.push(reply([call("toolu_bad", action="zoom", region=[0, 0, shown.width + 1, 10])], message_id="msg_2"))
    try:
        turn = await session.next_turn(desk.observation(0))
        bad = await session.next_turn(desk.observation(1, turn, feedback="Executed."))
    finally:
        await session.aclose()
    sent = bodies(wire)
    assert sent[0]["tools"][0]["enable_zoom"] is True
    assert turn.action_input == {"actions": [{"type": "wait", "seconds": 0.1}] * 2}
    results = sent[1]["messages"][-1]["content"]
    assert [b["type"] for b in results[0]["content"]] == ["text", "image"]
    assert [b["type"] for b in results[1]["content"]] == ["text", "image", "text", "image"]
    crop = results[0]["content"][1]
    width = math.ceil((half + 200) * DESKTOP.width / shown.width) - math.floor(half * DESKTOP.width / shown.width)
    height = math.ceil(100 * DESKTOP.height / shown.height)
    # The small crop is scaled up to fill the image budget, keeping its aspect ratio
    # (exact sizes: tests/providers/anthropic/test_native_bounds.py).
    zoomed_width, zoomed_height = image_size(crop)
    assert zoomed_width > width and zoomed_height > height
    assert abs(zoomed_width / zoomed_height - width / height) < 0.01
    with Image.open(io.BytesIO(base64.b64decode(crop["source"]["data"]))) as zoomed:
        colors = zoomed.convert("RGB").getcolors(maxcolors=1 << 24)
        assert colors is not None and {color for _, color in colors} == {(0, 0, 255)}
    # The whole screen at desktop resolution exceeds Anthropic's limits: scaled down to them.
    assert image_size(results[1]["content"][1]) == (shown.width, shown.height)
    assert len(list((desk.root / "native-zoom").iterdir())) == 2
    assert bad.action_input is None and bad.malformed is not None and "outside" in bad.malformed


# --- computer_toolset_20260801 ---------------------------------------------------------------

TOOLSET = "computer_toolset_20260801"


def open_toolset(desk: DesktopRollout, wire: MessagesWire, *,
                 resume_state: JsonObject | None = None) -> NativeAnthropicSession:
    request = request_for(desk, wire, NEW_MODEL, resume_state=resume_state)
    request = request.model_copy(update={"model": request.model.model_copy(
        update={"options": {**request.model.options, "computer_tool": TOOLSET}})})
    session = AnthropicProvider().open_session(request, Credentials({"ANTHROPIC_API_KEY": SECRET}))
    assert isinstance(session, NativeAnthropicSession) and session.tool_version == TOOLSET
    return session


def member(call_id: str, name: str, **tool_input: Any) -> BetaToolUseBlock:
    """A ``tool_use`` of a toolset member: the action is the name, the input has no ``action``."""
    return BetaToolUseBlock(type="tool_use", id=call_id, name=name, input=tool_input, toolset_name="computer")


def test_the_toolset_is_never_the_default() -> None:
    assert AnthropicOptions().computer_tool is None
    for model in (OLD_MODEL, NEW_MODEL, "claude-opus-5", "claude-sonnet-4-5", "claude-fable-5"):
        assert computer_tool_version(model) != TOOLSET
    assert AnthropicOptions(computer_tool=TOOLSET).computer_tool == TOOLSET


async def test_toolset_request_shape_and_member_click(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_toolset(desk, wire)
    geometry = session.geometry
    x, y = 700, 400
    wire.push(reply([text("Clicking."), member("toolu_1", "left_click", coordinate=[x, y])]))
    wire.push(reply([member("toolu_2", "screenshot")], message_id="msg_2"))
    try:
        turn = await session.next_turn(desk.observation(0))
        second = await session.next_turn(desk.observation(1, turn, feedback="Executed 1 action."))
    finally:
        await session.aclose()
    first_request, second_request = wire.model_requests()
    # The SDK names no beta flag for the toolset: none is sent.
    assert "anthropic-beta" not in first_request.headers
    body = first_request.json()
    (tool,) = body["tools"]
    assert set(tool) <= set(BetaComputerToolset20260801Param.__annotations__)
    assert set(tool) == {"type", "configs"}  # no name, no display size
    assert tool["type"] == TOOLSET
    configs = tool["configs"]
    assert set(configs) == set(BetaComputerToolsetConfigsParam.__annotations__)
    assert {name for name, c in configs.items() if c == {"enabled": True}} == set(ACTIONS_BY_VERSION[TOOLSET])
    assert all(c in ({"enabled": True}, {"enabled": False}) for c in configs.values())
    # The coordinate is in the shown screenshot, mapped to desktop pixels as with the single tool.
    dx, dy = geometry.to_desktop(x, y)
    assert (dx, dy) != (x, y)
    assert turn.malformed is None and turn.tool_use_id == "toolu_1"
    assert turn.action_input == {"actions": [{"type": "click", "x": dx, "y": dy, "button": "left", "count": 1}]}
    # The member call goes back exactly as returned and is answered by id.
    messages = second_request.json()["messages"]
    (echo,) = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert echo["name"] == "left_click" and echo["input"] == {"coordinate": [x, y]}
    assert echo["toolset_name"] == "computer"
    (result,) = messages[2]["content"]
    assert result["tool_use_id"] == "toolu_1" and "is_error" not in result
    assert second.action_input == {"actions": [{"type": "wait", "seconds": 0.1}]}


async def test_toolset_unknown_member_is_a_malformed_turn(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_toolset(desk, wire)
    wire.push(reply([member("toolu_ok", "mouse_move", coordinate=[5, 5]),
                     member("toolu_bad", "computer", action="left_click", coordinate=[5, 5])]))
    wire.push(reply([member("toolu_2", "key", text="Escape")], message_id="msg_2"))
    try:
        bad = await session.next_turn(desk.observation(0))
        good = await session.next_turn(desk.observation(1, bad, feedback=f"invalid turn: {bad.malformed}"))
    finally:
        await session.aclose()
    assert bad.action_input is None and bad.malformed is not None
    assert bad.malformed.startswith("unknown tool 'computer'; the computer toolset's tools are: key, ")
    assert "left_click" in bad.malformed and bad.tool_use_id == "toolu_bad"
    results = bodies(wire)[1]["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_ok", "toolu_bad"]
    assert results[0]["is_error"] is True and results[0]["content"][0]["text"] == NOT_PERFORMED
    assert results[1]["is_error"] is True and bad.malformed in results[1]["content"][0]["text"]
    assert good.malformed is None and good.action_input == {"actions": [{"type": "key", "keys": ["esc"]}]}


async def test_toolset_member_input_with_an_action_key_is_malformed(wire: MessagesWire,
                                                                    desk: DesktopRollout) -> None:
    session = open_toolset(desk, wire)
    wire.push(reply([member("toolu_1", "left_click", action="right_click", coordinate=[5, 5])]))
    try:
        turn = await session.next_turn(desk.observation(0))
    finally:
        await session.aclose()
    assert turn.action_input is None and turn.malformed == (
        "left_click does not take 'action'; the tool's name is the action")


async def test_toolset_checkpoint_resumes_with_the_toolset(wire: MessagesWire, desk: DesktopRollout) -> None:
    original = open_toolset(desk, wire)
    wire.push(reply([member("toolu_1", "double_click", coordinate=[10, 10])]))
    try:
        first = await original.next_turn(desk.observation(0))
    finally:
        await original.aclose()
    saved = json.loads(json.dumps(original.checkpoint(), sort_keys=True))
    assert saved["tool_version"] == TOOLSET
    restored = open_toolset(desk, wire, resume_state=saved)
    assert restored.checkpoint() == original.checkpoint()
    await restored.aclose()
    assert first.malformed is None
