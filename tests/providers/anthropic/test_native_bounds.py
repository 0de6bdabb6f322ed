"""Native Anthropic sessions: bounded history, the 413 rewrite, zoom sizes and the observed pointer.

Every response body is built from the pinned SDK's types (``BetaMessage``, ``BetaToolUseBlock``)
through the helpers of :mod:`tests.providers.anthropic.test_native_session`, and every request
goes through the SDK to the local Messages wire fake.
"""

from __future__ import annotations

import base64
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from autocad_bench.models import JsonObject
from autocad_bench.providers.models import DisplaySize, Observation, ProviderErrorKind, ProviderRequestError
from autocad_bench.retry import ModelCaller, RequestTooLarge
from autocad_bench_anthropic.caching import MAX_BREAKPOINTS, count_breakpoints
from autocad_bench_anthropic.native.session import NativeAnthropicSession, zoom_size
from autocad_bench_anthropic.options import AnthropicOptions
from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import SECRET, assert_pairs_complete
from tests.providers.anthropic.test_native_session import (
    DESKTOP,
    NEW_MODEL,
    OLD_MODEL,
    DesktopRollout,
    bodies,
    call,
    image_size,
    open_native,
    reply,
    request_for,
)

PLACEHOLDER = "Earlier screenshot removed to keep the request small"


@pytest.fixture
def desk(tmp_path: Path) -> DesktopRollout:
    root = tmp_path / "rollout"
    root.mkdir()
    return DesktopRollout(root)


def native(desk: DesktopRollout, wire: MessagesWire, *, history_turns: int = 16, model: str = OLD_MODEL,
           resume_state: JsonObject | None = None, **options: Any) -> NativeAnthropicSession:
    request = request_for(desk, wire, model, resume_state=resume_state)
    merged = {**request.model.options, **options}
    request = request.model_copy(update={"model": request.model.model_copy(update={"options": merged})})
    return NativeAnthropicSession(request, AnthropicOptions.model_validate(merged), SECRET,
                                  tool_version="computer_20250124", history_turns=history_turns)


def screenshots(body: dict[str, Any]) -> int:
    """Images of a request besides the fixed reference (the first message's second block)."""
    count = 0
    for message in body["messages"]:
        for block in message["content"]:
            inner = block.get("content") if block["type"] == "tool_result" else [block]
            count += sum(1 for b in inner or [] if isinstance(b, dict) and b.get("type") == "image")
    return count - 1


def assert_cache_prefix_intact(body: dict[str, Any], desk: DesktopRollout) -> None:
    """The reference keeps its breakpoint in the first message; at most four breakpoints in all."""
    first = body["messages"][0]["content"]
    assert first[1]["type"] == "image" and first[1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    reference = base64.b64decode(first[1]["source"]["data"])
    with Image.open(io.BytesIO(reference)) as image:
        assert image.size == (1430, 804)
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert count_breakpoints(body) <= MAX_BREAKPOINTS


async def run_clicks(session: NativeAnthropicSession, wire: MessagesWire, desk: DesktopRollout,
                     turns: int, start: int = 0) -> Any:
    previous = None
    for index in range(start, start + turns):
        wire.push(reply([call(f"toolu_{index}", action="left_click", coordinate=[10 + index, 20])],
                        message_id=f"msg_{index}"))
        previous = await session.next_turn(desk.observation(index, previous, feedback=f"Executed {index}."))
        assert previous.malformed is None
    return previous


# --- bounded history ---------------------------------------------------------------------------


async def test_history_keeps_the_images_of_the_recent_turns_only(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = native(desk, wire, history_turns=2)
    try:
        previous = await run_clicks(session, wire, desk, 8)
        saved = json.loads(json.dumps(session.checkpoint(), sort_keys=True))
    finally:
        await session.aclose()
    sent = bodies(wire)
    # Between 2 and 4 historical screenshots, plus the current one: cut from 4 to 2 at once.
    assert [screenshots(b) for b in sent] == [1, 2, 3, 4, 5, 3, 4, 5]
    for body in sent:
        assert_pairs_complete(body)
        assert_cache_prefix_intact(body, desk)
    # Between two cuts the earlier request is a byte-identical prefix of the next one.
    for before, after in ((sent[5], sent[6]), (sent[6], sent[7]), (sent[1], sent[2])):
        assert after["messages"][:len(before["messages"]) - 1] == before["messages"][:-1]
    # After the cut the calls and results are all still there; only images became text.
    text = json.dumps(sent[5])
    assert text.count(PLACEHOLDER) == 3 and all(f"toolu_{i}" in text for i in range(5))
    assert saved["state"]["screenshots_removed"] == 6
    # Resume after a cut: the restored session sends the identical next request.
    following = desk.observation(8, previous, feedback="Executed 8.")
    restored = native(desk, wire, history_turns=2, resume_state=saved)
    assert restored.checkpoint() == saved
    original = session
    try:
        for _ in range(2):
            wire.push(reply([call("toolu_8", action="screenshot")], message_id="msg_8"))
        await original.next_turn(following)
        await restored.next_turn(following)
    finally:
        await original.aclose()
        await restored.aclose()
    last, resumed = wire.model_requests()[-2:]
    assert last.body == resumed.body
    assert original.checkpoint() == restored.checkpoint()
    assert screenshots(resumed.json()) == 3
    assert json.loads(json.dumps(original.checkpoint()))["state"]["screenshots_removed"] == 6


def noisy_frames(desk: DesktopRollout, count: int, patch: int = 150) -> None:
    """Desktop frames with an incompressible patch (about 50 KB of PNG each after scaling)."""
    rng = random.Random(5)
    for index in range(count):
        image = Image.new("RGB", (DESKTOP.width, DESKTOP.height), (240, 240, 240))
        noise = Image.frombytes("RGB", (patch, patch), rng.randbytes(patch * patch * 3))
        image.paste(noise, (100 + index, 100))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        desk.frames[index] = desk._write(f"frames/{index:06d}.png", buffer.getvalue())


async def test_the_byte_guard_strips_historical_images(wire: MessagesWire, desk: DesktopRollout) -> None:
    noisy_frames(desk, 6)
    guard = 200 * 1024
    session = native(desk, wire, request_guard_bytes=guard)
    try:
        await run_clicks(session, wire, desk, 6)
    finally:
        await session.aclose()
    requests = wire.model_requests()
    assert all(len(r.body) <= guard for r in requests), [len(r.body) for r in requests]
    sent = [r.json() for r in requests]
    assert screenshots(sent[0]) == 1 and screenshots(sent[-1]) < 6
    assert PLACEHOLDER in json.dumps(sent[-1])
    for body in sent:
        assert_pairs_complete(body)
        assert_cache_prefix_intact(body, desk)


# --- 413 ---------------------------------------------------------------------------------------


async def no_sleep(_: float) -> None:
    return None


def caller() -> ModelCaller:
    return ModelCaller(sleep=no_sleep, rng=random.Random(3), instrument=False)


async def test_413_retries_once_with_a_smaller_request_and_resumes(wire: MessagesWire, desk: DesktopRollout) -> None:
    noisy_frames(desk, 7)
    session = open_native(desk, wire)
    try:
        previous = await run_clicks(session, wire, desk, 5)
        wire.too_large_above = len(wire.model_requests()[-1].body) + 10_000
        wire.push(reply([call("toolu_after", action="left_click", coordinate=[3, 3])], message_id="msg_after"))
        result = await caller().request_turn(session, desk.observation(5, previous, feedback="Executed 5."))
        wire.too_large_above = None
        saved = json.loads(json.dumps(session.checkpoint(), sort_keys=True))
        following = desk.observation(6, result.turn, feedback="Executed.")
        wire.push(reply([call("toolu_end", action="screenshot")], message_id="msg_end"))
        await session.next_turn(following)
    finally:
        await session.aclose()
    requests = wire.model_requests()
    rejected, retried = requests[5], requests[6]
    assert len(retried.body) < len(rejected.body)
    assert [(r.kind, r.shrunk) for r in result.retries] == [(ProviderErrorKind.REQUEST_TOO_LARGE, True)]
    assert result.counters.shrinks == 1 and result.turn.tool_use_id == "toolu_after"
    body = retried.json()
    assert_pairs_complete(body)
    assert_cache_prefix_intact(body, desk)
    # Historical screenshots went; every call, its result and the current desktop stayed.
    assert len(body["messages"]) == len(rejected.json()["messages"])
    assert screenshots(body) == 1 and json.dumps(body).count(PLACEHOLDER) == 5
    newest = body["messages"][-1]["content"][-1]["content"][-1]
    assert newest["type"] == "image"
    assert saved["state"]["screenshots_removed"] == 5
    # The shrunk history round-trips through the checkpoint: identical next request.
    restored = native(desk, wire, resume_state=saved, history_turns=16)
    wire.push(reply([call("toolu_end", action="screenshot")], message_id="msg_end"))
    try:
        await restored.next_turn(following)
    finally:
        await restored.aclose()
    again = wire.model_requests()
    assert again[-1].body == again[-2].body


async def test_shrink_is_strictly_smaller_until_nothing_is_left(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    assert session.shrink() is False  # no request made yet
    try:
        previous = await run_clicks(session, wire, desk, 3)
        wire.too_large_above = 1_000
        pending = desk.observation(3, previous, feedback="Executed 3.")
        sizes = []
        shrinks = []
        while True:
            with pytest.raises(ProviderRequestError) as refused:
                await session.next_turn(pending)
            assert refused.value.kind is ProviderErrorKind.REQUEST_TOO_LARGE
            sizes.append(len(wire.model_requests()[-1].body))
            assert_pairs_complete(wire.model_requests()[-1].json())
            before = session.checkpoint()
            shrunk = session.shrink()
            shrinks.append(shrunk)
            if not shrunk:
                assert session.checkpoint() == before  # a refused rewrite changes nothing
                break
    finally:
        await session.aclose()
    # Strip the images, then drop the older half of the pairs, then the last droppable pair.
    assert shrinks == [True, True, True, False]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    final = wire.model_requests()[-1].json()
    assert [m["role"] for m in final["messages"]] == ["user", "assistant", "user"]
    assert json.loads(json.dumps(session.checkpoint()))["state"]["pairs_dropped"] == 2


async def test_413_on_the_first_turn_cannot_shrink(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.too_large_above = 1_000
    try:
        with pytest.raises(RequestTooLarge, match="cannot shrink"):
            await caller().request_turn(session, desk.observation(0))
    finally:
        await session.aclose()
    assert len(wire.model_requests()) == 1


# --- zoom ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("region", "crop", "shown"), [
    # A small 2:1 region (68x34 desktop pixels) is scaled up to fill the image budget.
    ([100, 100, 150, 125], (68, 34), (1516, 758)),
    ([200, 300, 260, 330], (82, 42), (1498, 767)),
    # The whole screen (1920x1080) is scaled down to the limits.
    ([0, 0, 1430, 804], (1920, 1080), (1430, 804)),
    # Extreme aspect ratios: the long edge reaches 1568, the short one keeps the ratio.
    ([0, 0, 1430, 1], (1920, 2), (1568, 2)),
    ([0, 0, 1, 804], (2, 1080), (3, 1568)),
])
async def test_zoom_is_the_crop_resized_to_the_image_budget(
        wire: MessagesWire, desk: DesktopRollout, region: list[int], crop: tuple[int, int],
        shown: tuple[int, int]) -> None:
    assert zoom_size(*crop) == DisplaySize(width=shown[0], height=shown[1])
    # Frame 1 (after the zoom): a red desktop with a blue square at the small region's top left.
    image = Image.new("RGB", (DESKTOP.width, DESKTOP.height), (255, 0, 0))
    image.paste((0, 0, 255), (134, 134, 168, 151))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    desk.frames[1] = desk._write("frames/000001.png", buffer.getvalue())
    session = open_native(desk, wire, NEW_MODEL)
    assert (session.geometry.shown.width, session.geometry.shown.height) == (1430, 804)
    wire.push(reply([call("toolu_z", action="zoom", region=region)]))
    wire.push(reply([call("toolu_w", action="screenshot")], message_id="msg_2"))
    try:
        turn = await session.next_turn(desk.observation(0))
        await session.next_turn(desk.observation(1, turn, feedback="Executed."))
    finally:
        await session.aclose()
    (result,) = bodies(wire)[1]["messages"][-1]["content"]
    zoomed = result["content"][1]
    assert zoomed["type"] == "image" and image_size(zoomed) == shown
    if region == [100, 100, 150, 125]:
        # The blue square is the crop's top-left quarter (34x17 of 68x34): scaled, it stays there.
        with Image.open(io.BytesIO(base64.b64decode(zoomed["source"]["data"]))) as picture:
            rgb = picture.convert("RGB")
            assert rgb.getpixel((shown[0] // 4, shown[1] // 4)) == (0, 0, 255)
            assert rgb.getpixel((3 * shown[0] // 4, 3 * shown[1] // 4)) == (255, 0, 0)
    stored = list((desk.root / "native-zoom").iterdir())
    assert len(stored) == 1
    with Image.open(stored[0]) as file:
        assert file.size == shown


# --- the observed pointer ------------------------------------------------------------------------


def with_pointer(observation: Observation, pointer: tuple[int, int] | None) -> Observation:
    return observation.model_copy(update={"pointer": pointer})


@pytest.mark.parametrize("next_pointer", [(1500, 900), None])
async def test_cursor_position_and_relative_actions_follow_the_observed_pointer(
        wire: MessagesWire, desk: DesktopRollout, next_pointer: tuple[int, int] | None) -> None:
    session = open_native(desk, wire)
    geometry = session.geometry
    sent_point = geometry.to_desktop(100, 50)
    moved_by_app = (640, 360)  # the application moved the pointer after the harness's move
    assert moved_by_app != sent_point
    wire.push(reply([call("toolu_m", action="mouse_move", coordinate=[100, 50])]))
    wire.push(reply([call("toolu_p", action="cursor_position"), call("toolu_d", action="left_mouse_down"),
                     call("toolu_u", action="left_mouse_up")], message_id="msg_2"))
    wire.push(reply([call("toolu_c", action="left_click"),
                     call("toolu_s", action="scroll", scroll_direction="down", scroll_amount=2)],
                    message_id="msg_3"))
    wire.push(reply([call("toolu_w", action="screenshot")], message_id="msg_4"))
    try:
        first = await session.next_turn(desk.observation(0))
        second = await session.next_turn(with_pointer(desk.observation(1, first, feedback="Moved."), moved_by_app))
        saved = json.loads(json.dumps(session.checkpoint(), sort_keys=True))
        third_observation = with_pointer(desk.observation(2, second, feedback="Pressed."), next_pointer)
        third = await session.next_turn(third_observation)
        await session.next_turn(desk.observation(3, third, feedback="Clicked."))
    finally:
        await session.aclose()
    assert first.action_input == {"actions": [{"type": "move", "x": sent_point[0], "y": sent_point[1]}]}
    # mouse_down/up without a coordinate act where the broker saw the pointer, not where it was sent.
    x, y = moved_by_app
    assert second.action_input == {"actions": [
        {"type": "wait", "seconds": 0.1},
        {"type": "mouse_down", "x": x, "y": y, "button": "left"},
        {"type": "mouse_up", "x": x, "y": y, "button": "left"},
    ]}
    assert saved["state"]["pointer"] == [x, y]
    # cursor_position: the next observation's pointer when it has one, else the observed start.
    answer = next_pointer if next_pointer is not None else moved_by_app
    results = bodies(wire)[2]["messages"][-1]["content"]
    assert results[0]["tool_use_id"] == "toolu_p"
    assert results[0]["content"][0]["text"] == "X={}, Y={}".format(*geometry.to_shown(*answer))
    assert geometry.to_shown(*answer) != geometry.to_shown(*sent_point)
    # A click and a scroll without a coordinate act at the current (observed) pointer.
    cx, cy = answer
    assert third.action_input == {"actions": [
        {"type": "click", "x": cx, "y": cy, "button": "left", "count": 1},
        {"type": "scroll", "x": cx, "y": cy, "dx": 0, "dy": -2},
    ]}
    # The pending cursor answer round-trips through the checkpoint.
    restored = open_native(desk, wire, resume_state=saved)
    wire.push(reply([call("toolu_w", action="screenshot")], message_id="msg_4"))
    try:
        await restored.next_turn(third_observation)
    finally:
        await restored.aclose()
    requests = wire.model_requests()
    assert requests[-1].body == requests[2].body


async def test_cursor_position_before_a_later_move_reports_the_position_at_the_call(
        wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    geometry = session.geometry
    wire.push(reply([call("toolu_a", action="mouse_move", coordinate=[100, 50]),
                     call("toolu_p", action="cursor_position"),
                     call("toolu_b", action="mouse_move", coordinate=[300, 200])]))
    wire.push(reply([call("toolu_w", action="screenshot")], message_id="msg_2"))
    try:
        turn = await session.next_turn(with_pointer(desk.observation(0), (5, 5)))
        await session.next_turn(with_pointer(desk.observation(1, turn, feedback="Moved."),
                                             geometry.to_desktop(300, 200)))
    finally:
        await session.aclose()
    results = bodies(wire)[1]["messages"][-1]["content"]
    assert results[1]["tool_use_id"] == "toolu_p"
    assert results[1]["content"][0]["text"] == "X=100, Y=50"


async def test_an_unknown_pointer_is_still_an_error(wire: MessagesWire, desk: DesktopRollout) -> None:
    session = open_native(desk, wire)
    wire.push(reply([call("toolu_c", action="left_click")]))
    wire.push(reply([call("toolu_p", action="cursor_position")], message_id="msg_2"))
    try:
        click = await session.next_turn(desk.observation(0))
        position = await session.next_turn(desk.observation(1, click, feedback=f"invalid: {click.malformed}"))
    finally:
        await session.aclose()
    assert click.action_input is None and "not known yet" in (click.malformed or "")
    assert position.action_input is None and "not known yet" in (position.malformed or "")


def test_zoom_size_rejects_an_empty_crop() -> None:
    with pytest.raises(ValueError, match="at least 1x1"):
        zoom_size(0, 5)


def test_history_turns_must_be_positive(desk: DesktopRollout, tmp_path: Path) -> None:
    with MessagesWire() as wire, pytest.raises(ValueError, match="history_turns"):
        native(desk, wire, history_turns=0)



async def test_the_history_bound_is_the_native_history_turns_option(wire: MessagesWire, desk: DesktopRollout) -> None:
    """The option reaches the session the provider opens (not only the constructor's default)."""
    from autocad_bench.providers.models import Credentials
    from autocad_bench_anthropic.provider import AnthropicProvider

    request = request_for(desk, wire, OLD_MODEL)
    options = {**request.model.options, "native_history_turns": 2, "computer_tool": "computer_20250124"}
    request = request.model_copy(update={"model": request.model.model_copy(update={"options": options,
                                                                                      "tool_mode": "native"})})
    session = AnthropicProvider().open_session(
        request, Credentials.from_environ(("ANTHROPIC_API_KEY",), {"ANTHROPIC_API_KEY": SECRET}))
    assert isinstance(session, NativeAnthropicSession)
    try:
        await run_clicks(session, wire, desk, 8)
    finally:
        await session.aclose()
    assert [screenshots(b) for b in bodies(wire)] == [1, 2, 3, 4, 5, 3, 4, 5]
    problems = AnthropicProvider().validate_model_spec(
        request.model.model_copy(update={"options": {**options, "native_history_turns": 0}}), "$.rollouts[0]")
    assert [p.location for p in problems] == ["$.rollouts[0].provider_options.native_history_turns"]
