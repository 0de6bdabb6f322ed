"""OpenAI native computer actions (GA ``computer`` / ``computer_use_preview``) mapped to wire actions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

import pytest
from openai.types.responses import ComputerToolParam, ComputerUsePreviewToolParam
from openai.types.responses.computer_action import ComputerAction
from openai.types.responses.response_computer_tool_call import ActionClick

from autocad_bench.actions.models import ACTION_ADAPTER
from autocad_bench_openai.native import NativeActionError, NativeStep, map_computer_action, tool_definition
from autocad_bench_openai.native.actions import (
    ACTION_TYPES,
    MAX_SCROLL_CLICKS,
    WAIT_SECONDS,
    keypress_chord,
    scroll_clicks,
)


def double(x: int, y: int) -> tuple[int, int]:
    """Screenshot space at half the desktop size: every coordinate doubles."""
    return 2 * x, 2 * y


def mapped(action: Mapping[str, object]) -> NativeStep:
    step = map_computer_action(action, double)
    for wire in step.actions:
        ACTION_ADAPTER.validate_python(wire)  # every produced action is a valid wire action
    return step


def test_action_types_are_the_sdk_union() -> None:
    members = get_args(get_args(ComputerAction)[0])
    sdk_types = {get_args(member.model_fields["type"].annotation)[0] for member in members}
    assert set(ACTION_TYPES) == sdk_types


def test_clicks_by_button_and_double_click() -> None:
    assert mapped({"type": "click", "button": "left", "x": 10, "y": 20}).actions == [
        {"type": "click", "x": 20, "y": 40, "button": "left", "count": 1}]
    assert mapped({"type": "click", "button": "right", "x": 1, "y": 2}).actions[0]["button"] == "right"
    assert mapped({"type": "click", "button": "wheel", "x": 1, "y": 2}).actions[0]["button"] == "middle"
    assert mapped({"type": "double_click", "x": 3, "y": 4}).actions == [
        {"type": "click", "x": 6, "y": 8, "button": "left", "count": 2}]
    # The SDK's own model dumps (keys: null) are accepted.
    sdk = ActionClick(type="click", button="left", x=5, y=6).model_dump(mode="json")
    assert mapped(sdk).actions[0]["x"] == 10


@pytest.mark.parametrize("button", ["back", "forward"])
def test_back_and_forward_buttons_are_unsupported(button: str) -> None:
    step = mapped({"type": "click", "button": button, "x": 1, "y": 2})
    assert step.kind == "unsupported" and button in (step.message or "")


def test_held_keys_are_unsupported_but_bad_keys_are_malformed() -> None:
    step = mapped({"type": "click", "button": "left", "x": 1, "y": 2, "keys": ["SHIFT"]})
    assert step.kind == "unsupported" and "SHIFT" in (step.message or "")
    assert mapped({"type": "move", "x": 1, "y": 2, "keys": []}).actions == [{"type": "move", "x": 2, "y": 4}]
    with pytest.raises(NativeActionError, match="unknown key"):
        mapped({"type": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 100, "keys": ["HYPERKEY"]})


def test_drag_move_type_wait_screenshot() -> None:
    assert mapped({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 5, "y": 6}, {"x": 9, "y": 9}]}).actions == [
        {"type": "drag", "path": [[2, 2], [10, 12], [18, 18]], "button": "left"}]
    assert mapped({"type": "move", "x": 7, "y": 8}).actions == [{"type": "move", "x": 14, "y": 16}]
    assert mapped({"type": "type", "text": "LINE\n0,0\tx"}).actions == [
        {"type": "type", "text": "LINE"}, {"type": "key", "keys": ["enter"]}, {"type": "type", "text": "0,0"},
        {"type": "key", "keys": ["tab"]}, {"type": "type", "text": "x"}]
    assert mapped({"type": "wait"}).actions == [{"type": "wait", "seconds": WAIT_SECONDS}]
    assert mapped({"type": "screenshot"}).kind == "screenshot_only"


def test_keypress_maps_openai_names_case_insensitively() -> None:
    assert mapped({"type": "keypress", "keys": ["CTRL", "S"]}).actions == [{"type": "key", "keys": ["ctrl", "s"]}]
    assert keypress_chord(["ENTER"]) == ("enter",)
    assert keypress_chord(["ESC"]) == ("esc",)
    assert keypress_chord(["ArrowUp"]) == ("up",)
    assert keypress_chord(["shift", "TAB"]) == ("shift", "tab")
    assert keypress_chord(["SPACE"]) == ("space",)
    with pytest.raises(NativeActionError, match="pressed twice"):
        keypress_chord(["CTRL", "ctrl"])
    with pytest.raises(NativeActionError, match="non-empty array"):
        keypress_chord([])


def test_scroll_pixels_become_wheel_clicks() -> None:
    # scroll_y > 0 scrolls down (the wire's dy < 0); 100 px per click, at least one.
    assert mapped({"type": "scroll", "x": 10, "y": 10, "scroll_x": 0, "scroll_y": 300}).actions == [
        {"type": "scroll", "x": 20, "y": 20, "dx": 0, "dy": -3}]
    assert mapped({"type": "scroll", "x": 10, "y": 10, "scroll_x": -20, "scroll_y": -1}).actions == [
        {"type": "scroll", "x": 20, "y": 20, "dx": -1, "dy": 1}]
    assert scroll_clicks(10**9, "scroll_y") == MAX_SCROLL_CLICKS
    assert scroll_clicks(149, "scroll_y") == 1 and scroll_clicks(151, "scroll_y") == 2
    with pytest.raises(NativeActionError, match="both 0"):
        mapped({"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 0})


@pytest.mark.parametrize(("action", "message"), [
    ("click", "must be an object"),
    ({"type": "teleport"}, "must be one of"),
    ({"button": "left"}, "type is missing"),
    ({"type": "click", "x": 1, "y": 2}, "needs 'button'"),
    ({"type": "move", "x": 1, "y": 2, "z": 3}, "does not take 'z'"),
    ({"type": "move", "x": 1.5, "y": 2}, "must be integers"),
    ({"type": "move", "x": True, "y": 2}, "must be integers"),
    ({"type": "move", "x": -1, "y": 2}, "must not be negative"),
    ({"type": "click", "button": "middle", "x": 1, "y": 2}, "button must be one of"),
    ({"type": "drag", "path": [{"x": 1, "y": 1}]}, "path must be an array"),
    ({"type": "drag", "path": [{"x": 1}, {"x": 2, "y": 2}]}, "with x and y"),
    ({"type": "type", "text": ""}, "must not be empty"),
    ({"type": "type", "text": "café"}, "U\\+00E9"),
    ({"type": "scroll", "x": 1, "y": 1, "scroll_x": "a", "scroll_y": 1}, "scroll_x must be an integer"),
])
def test_malformed_actions(action: Any, message: str) -> None:
    with pytest.raises(NativeActionError, match=message):
        map_computer_action(action, double)


def test_to_desktop_errors_become_action_errors() -> None:
    def bounded(x: int, y: int) -> tuple[int, int]:
        raise ValueError("is outside the 10x10 screenshot")

    with pytest.raises(NativeActionError, match=r"point \(50, 60\) is outside"):
        map_computer_action({"type": "move", "x": 50, "y": 60}, bounded)


def test_tool_definitions_use_the_sdk_typeddict_keys() -> None:
    ga = tool_definition("computer", 1365, 768)
    assert ga == {"type": "computer"}
    assert set(ga) == ComputerToolParam.__required_keys__ | ComputerToolParam.__optional_keys__
    preview = tool_definition("computer_use_preview", 1365, 768)
    assert preview == {"type": "computer_use_preview", "display_width": 1365, "display_height": 768,
                       "environment": "linux"}
    keys = ComputerUsePreviewToolParam.__required_keys__ | ComputerUsePreviewToolParam.__optional_keys__
    assert set(preview) == keys
    with pytest.raises(ValueError, match="unknown computer tool"):
        tool_definition("computer_2026", 10, 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        tool_definition("computer_use_preview", 0, 10)
