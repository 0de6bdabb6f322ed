"""Native computer-tool inputs (computer_20250124 / computer_20251124) mapped to wire actions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, cast, get_args, get_origin

import pytest
from anthropic.types.anthropic_beta_param import AnthropicBetaParam
from anthropic.types.beta import (
    BetaComputerMemberName,
    BetaComputerScrollDirection,
    BetaComputerToolset20260801Param,
    BetaComputerToolsetConfigsParam,
    BetaToolComputerUse20250124Param,
    BetaToolComputerUse20251124Param,
)
from anthropic.types.beta.beta_computer_tool_use_block import BetaComputerToolUseBlock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import get_type_hints

from autocad_bench.actions.models import ACTION_ADAPTER
from autocad_bench_anthropic.native import (
    BETA_HEADERS,
    NativeActionError,
    NativeStep,
    map_computer_action,
    tool_definition,
)
from autocad_bench_anthropic.native.actions import (
    _FIELDS,
    _REQUIRED,
    ACTIONS_BY_VERSION,
    TOOL_VERSIONS,
    TOOLSET_VERSION,
    map_toolset_call,
)

VERSIONS = ("computer_20250124", "computer_20251124")


def double(x: int, y: int) -> tuple[int, int]:
    """Screenshot space at half the desktop size: every coordinate doubles."""
    return 2 * x, 2 * y


def mapped(tool_input: Mapping[str, object], version: str = "computer_20250124") -> NativeStep:
    step = map_computer_action(tool_input, version, double)
    for action in step.actions:
        ACTION_ADAPTER.validate_python(action)  # every wire action is one the broker accepts
    return step


def wire(tool_input: Mapping[str, object], version: str = "computer_20250124") -> list[dict[str, object]]:
    step = mapped(tool_input, version)
    assert step.kind == "actions", step
    assert step.tool_input() == {"actions": step.actions}
    return step.actions


# Every action both versions accept, with its exact wire translation. "zoom" is only in 20251124.
MAPPED_CASES: list[tuple[dict[str, object], list[dict[str, object]]]] = [
    (
        {"action": "left_mouse_down", "coordinate": [3, 4]},
        [{"type": "mouse_down", "x": 6, "y": 8, "button": "left"}],
    ),
    (
        {"action": "left_mouse_up", "coordinate": [5, 6]},
        [{"type": "mouse_up", "x": 10, "y": 12, "button": "left"}],
    ),
    ({"action": "hold_key", "text": "shift", "duration": 1}, [{"type": "hold_key", "keys": ["shift"], "seconds": 1.0}]),
    (
        {"action": "hold_key", "text": "ctrl+shift", "duration": 2.5},
        [{"type": "hold_key", "keys": ["ctrl", "shift"], "seconds": 2.5}],
    ),
    ({"action": "key", "text": "ctrl+s"}, [{"type": "key", "keys": ["ctrl", "s"]}]),
    ({"action": "key", "text": "Return"}, [{"type": "key", "keys": ["enter"]}]),
    (
        {"action": "key", "text": "Down", "repeat": 3},
        [{"type": "key", "keys": ["down"]}] * 3,
    ),
    (
        {"action": "key", "text": "ctrl+a BackSpace"},
        [{"type": "key", "keys": ["ctrl", "a"]}, {"type": "key", "keys": ["backspace"]}],
    ),
    ({"action": "type", "text": "LINE"}, [{"type": "type", "text": "LINE"}]),
    (
        {"action": "type", "text": "0,0\n10,10\r\n\n"},
        [
            {"type": "type", "text": "0,0"},
            {"type": "key", "keys": ["enter"]},
            {"type": "type", "text": "10,10"},
            {"type": "key", "keys": ["enter"]},
            {"type": "key", "keys": ["enter"]},
        ],
    ),
    (
        {"action": "type", "text": "a\tb"},
        [
            {"type": "type", "text": "a"},
            {"type": "key", "keys": ["tab"]},
            {"type": "type", "text": "b"},
        ],
    ),
    ({"action": "mouse_move", "coordinate": [10, 20]}, [{"type": "move", "x": 20, "y": 40}]),
    (
        {"action": "left_click", "coordinate": [10, 20]},
        [{"type": "click", "x": 20, "y": 40, "button": "left", "count": 1}],
    ),
    (
        {"action": "right_click", "coordinate": [1, 2]},
        [{"type": "click", "x": 2, "y": 4, "button": "right", "count": 1}],
    ),
    (
        {"action": "middle_click", "coordinate": [1, 2]},
        [{"type": "click", "x": 2, "y": 4, "button": "middle", "count": 1}],
    ),
    (
        {"action": "double_click", "coordinate": [1, 2]},
        [{"type": "click", "x": 2, "y": 4, "button": "left", "count": 2}],
    ),
    (
        {"action": "triple_click", "coordinate": [1, 2]},
        [{"type": "click", "x": 2, "y": 4, "button": "left", "count": 3}],
    ),
    (
        {"action": "left_click", "coordinate": [0, 0], "text": None},
        [{"type": "click", "x": 0, "y": 0, "button": "left", "count": 1}],
    ),
    (
        {"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [30, 40]},
        [{"type": "drag", "path": [[2, 4], [60, 80]], "button": "left"}],
    ),
    (
        {"action": "scroll", "coordinate": [5, 6], "scroll_direction": "up", "scroll_amount": 3},
        [{"type": "scroll", "x": 10, "y": 12, "dx": 0, "dy": 3}],
    ),
    (
        {"action": "scroll", "coordinate": [5, 6], "scroll_direction": "down", "scroll_amount": 2},
        [{"type": "scroll", "x": 10, "y": 12, "dx": 0, "dy": -2}],
    ),
    (
        {"action": "scroll", "coordinate": [5, 6], "scroll_direction": "left", "scroll_amount": 4},
        [{"type": "scroll", "x": 10, "y": 12, "dx": -4, "dy": 0}],
    ),
    (
        {"action": "scroll", "coordinate": [5, 6], "scroll_direction": "right", "scroll_amount": 1},
        [{"type": "scroll", "x": 10, "y": 12, "dx": 1, "dy": 0}],
    ),
    ({"action": "wait", "duration": 2}, [{"type": "wait", "seconds": 2.0}]),
    ({"action": "wait", "duration": 0.5}, [{"type": "wait", "seconds": 0.5}]),
    ({"action": "wait", "duration": 10}, [{"type": "wait", "seconds": 10.0}]),
    (
        {"action": "wait", "duration": 25},
        [{"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 5.0}],
    ),
    (
        {"action": "wait", "duration": 20.5},
        [{"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 0.5}],
    ),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("tool_input", "expected"), MAPPED_CASES)
def test_action_maps_to_wire(version: str, tool_input: dict[str, object], expected: list[dict[str, object]]) -> None:
    assert wire(tool_input, version) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_screenshot_takes_no_input(version: str) -> None:
    assert mapped({"action": "screenshot"}, version) == NativeStep("screenshot_only")
    assert mapped({"action": "wait", "duration": 0}, version).kind == "screenshot_only"


UNSUPPORTED_CASES: list[tuple[dict[str, object], str]] = [
    ({"action": "left_mouse_down"}, "not known yet"),
    ({"action": "left_mouse_up"}, "not known yet"),
    ({"action": "left_click"}, "send the coordinate"),
    ({"action": "double_click"}, "send the coordinate"),
    ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 3}, "send the coordinate"),
    ({"action": "left_click", "coordinate": [1, 1], "text": "shift"}, "without 'text'"),
    ({"action": "right_click", "coordinate": [1, 1], "key": "ctrl"}, "without 'key'"),
    (
        {"action": "left_click_drag", "start_coordinate": [1, 1], "coordinate": [2, 2], "text": "shift"},
        "modifier keys",
    ),
    (
        {"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 3, "text": "ctrl"},
        "modifier keys",
    ),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("tool_input", "fragment"), UNSUPPORTED_CASES)
def test_unsupported_actions_explain_themselves(version: str, tool_input: dict[str, object], fragment: str) -> None:
    step = mapped(tool_input, version)
    assert step.kind == "unsupported"
    assert step.actions == []
    assert step.message is not None
    assert fragment in step.message


def test_zoom_maps_on_20251124_and_is_unknown_on_20250124() -> None:
    step = mapped({"action": "zoom", "region": [0, 10, 100, 110]}, "computer_20251124")
    assert step == NativeStep("zoom", region=(0, 10, 100, 110))
    assert step.actions == [] and step.message is None
    with pytest.raises(NativeActionError, match="must be one of"):
        mapped({"action": "zoom", "region": [0, 0, 100, 100]}, "computer_20250124")


@pytest.mark.parametrize("region", [[0, 0, 100], [0, 0, 0, 10], [5, 0, 4, 10], [0, 9, 10, 9], [-1, 0, 10, 10],
                                    [0, 0, 10.5, 10], [0, True, 10, 10], "0,0,10,10", None])
def test_zoom_region_must_be_a_box(region: object) -> None:
    tool_input = {"action": "zoom", "region": region}
    if region is None:
        with pytest.raises(NativeActionError, match="needs 'region'"):
            mapped(tool_input, "computer_20251124")
        return
    with pytest.raises(NativeActionError, match=r"region must be \[x0, y0, x1, y1\]"):
        mapped(tool_input, "computer_20251124")


@pytest.mark.parametrize("version", VERSIONS)
def test_cursor_position_is_answered_by_the_session(version: str) -> None:
    assert mapped({"action": "cursor_position"}, version) == NativeStep("cursor_position")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("action", "wire_type"), [("left_mouse_down", "mouse_down"), ("left_mouse_up", "mouse_up")])
def test_mouse_down_and_up_without_coordinate_use_the_pointer(version: str, action: str, wire_type: str) -> None:
    step = map_computer_action({"action": action}, version, double, (300, 200))
    assert step.actions == [{"type": wire_type, "x": 300, "y": 200, "button": "left"}]
    # A coordinate wins over the pointer.
    step = map_computer_action({"action": action, "coordinate": [1, 2]}, version, double, (300, 200))
    assert step.actions == [{"type": wire_type, "x": 2, "y": 4, "button": "left"}]


MALFORMED_CASES: list[tuple[object, str]] = [
    ([], "must be an object"),
    ({}, "action is missing"),
    ({"action": 3}, "must be one of"),
    ({"action": "click"}, "must be one of"),
    ({"action": "left_click", "coordinate": [1, 2], "button": "left"}, "does not take 'button'"),
    ({"action": "screenshot", "coordinate": [1, 2]}, "does not take 'coordinate'"),
    ({"action": "mouse_move"}, "needs 'coordinate'"),
    ({"action": "mouse_move", "coordinate": None}, "needs 'coordinate'"),
    ({"action": "mouse_move", "coordinate": [1]}, "[x, y] pair"),
    ({"action": "mouse_move", "coordinate": [1, 2, 3]}, "[x, y] pair"),
    ({"action": "mouse_move", "coordinate": [1.5, 2]}, "[x, y] pair"),
    ({"action": "mouse_move", "coordinate": [True, 2]}, "[x, y] pair"),
    ({"action": "mouse_move", "coordinate": "1,2"}, "[x, y] pair"),
    ({"action": "mouse_move", "coordinate": [-1, 2]}, "must not be negative"),
    ({"action": "left_click_drag", "coordinate": [1, 2]}, "needs 'start_coordinate'"),
    ({"action": "key"}, "needs 'text'"),
    ({"action": "key", "text": 5}, "text must be a string"),
    ({"action": "key", "text": "Reurn"}, "did you mean 'return'"),
    ({"action": "key", "text": ""}, "empty"),
    ({"action": "key", "text": "a", "repeat": 0}, "between 1 and"),
    ({"action": "key", "text": "a", "repeat": 101}, "between 1 and"),
    ({"action": "key", "text": "a", "repeat": "2"}, "repeat must be an integer"),
    ({"action": "type", "text": ""}, "must not be empty"),
    ({"action": "type", "text": "caf\u00e9"}, "U+00E9 at offset 3"),
    ({"action": "type", "text": "a\x07"}, "U+0007"),
    (
        {"action": "scroll", "coordinate": [1, 1], "scroll_direction": "sideways", "scroll_amount": 1},
        "scroll_direction",
    ),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 0}, "between 1 and"),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 2.0}, "integer"),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up"}, "needs 'scroll_amount'"),
    ({"action": "wait"}, "needs 'duration'"),
    ({"action": "wait", "duration": -1}, "between 0 and"),
    ({"action": "wait", "duration": 101}, "between 0 and"),
    ({"action": "wait", "duration": float("nan")}, "between 0 and"),
    ({"action": "wait", "duration": True}, "number of seconds"),
    ({"action": "hold_key", "duration": 1}, "needs 'text'"),
    ({"action": "hold_key", "text": "shift"}, "needs 'duration'"),
    ({"action": "hold_key", "text": "shift", "duration": 11}, "at most 10 seconds"),
    ({"action": "hold_key", "text": "shift", "duration": 0}, "more than 0"),
    ({"action": "hold_key", "text": "shift", "duration": True}, "number of seconds"),
    ({"action": "hold_key", "text": "shift a", "duration": 1}, "one key or one combo"),
    ({"action": "hold_key", "text": "Shfit", "duration": 1}, "text:"),
    ({"action": "left_mouse_down", "coordinate": [1]}, "[x, y] pair"),
    ({"action": "left_mouse_up", "text": "shift"}, "does not take 'text'"),
    ({"action": "left_click", "coordinate": [1, 1], "text": 7}, "text must be a string"),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("tool_input", "fragment"), MALFORMED_CASES)
def test_malformed_input_raises_for_the_model(version: str, tool_input: Any, fragment: str) -> None:
    with pytest.raises(NativeActionError) as caught:
        map_computer_action(tool_input, version, double)
    assert fragment in str(caught.value)


def test_to_desktop_value_error_becomes_native_error() -> None:
    def bounded(x: int, y: int) -> tuple[int, int]:
        if x >= 1280:
            raise ValueError("outside the 1280x720 screenshot")
        return x, y

    with pytest.raises(NativeActionError, match="outside the 1280x720 screenshot"):
        map_computer_action({"action": "left_click", "coordinate": [1300, 5]}, "computer_20250124", bounded)


def test_unknown_version_is_a_harness_bug() -> None:
    with pytest.raises(ValueError) as caught:
        map_computer_action({"action": "screenshot"}, "computer_20241022", double)
    assert not isinstance(caught.value, NativeActionError)


def test_action_sets_match_the_sdk() -> None:
    # The SDK's member names (computer_toolset_20260801) are the 20251124 action set.
    assert set(ACTIONS_BY_VERSION["computer_20251124"]) == set(get_args(BetaComputerMemberName))
    assert set(ACTIONS_BY_VERSION["computer_20250124"]) == set(get_args(BetaComputerMemberName)) - {"zoom"}
    answered = {"screenshot", "zoom", "cursor_position"}
    covered = {str(case[0]["action"]) for case in MAPPED_CASES + UNSUPPORTED_CASES} | answered
    assert covered == set(ACTIONS_BY_VERSION["computer_20251124"])
    scroll_directions = {case[0]["scroll_direction"] for case in MAPPED_CASES if case[0]["action"] == "scroll"}
    assert scroll_directions == set(get_args(BetaComputerScrollDirection))


def test_beta_headers_are_sdk_beta_flags() -> None:
    known = set(get_args(get_args(AnthropicBetaParam)[1]))
    assert set(BETA_HEADERS) == set(VERSIONS)
    assert set(BETA_HEADERS.values()) <= known
    assert BETA_HEADERS == {
        "computer_20250124": "computer-use-2025-01-24",
        "computer_20251124": "computer-use-2025-11-24",
    }


def _required_keys(param: type[Any]) -> set[str]:
    # The SDK modules use postponed annotations, so __required_keys__ is empty; read Required[...].
    hints = get_type_hints(param, include_extras=True)
    return {name for name, hint in hints.items() if cast(object, get_origin(hint)) is Required}


@pytest.mark.parametrize(
    ("version", "param"),
    [("computer_20250124", BetaToolComputerUse20250124Param), ("computer_20251124", BetaToolComputerUse20251124Param)],
)
def test_tool_definition_uses_sdk_fields(version: str, param: type[Any]) -> None:
    definition = dict(tool_definition(version, 1280, 720))
    assert set(definition) == _required_keys(param)
    assert set(definition) <= set(param.__annotations__)
    assert definition == {
        "type": version,
        "name": "computer",
        "display_width_px": 1280,
        "display_height_px": 720,
    }


def test_tool_definition_zoom() -> None:
    definition = dict(tool_definition("computer_20251124", 1280, 720, enable_zoom=True))
    assert definition["enable_zoom"] is True
    assert set(definition) <= set(BetaToolComputerUse20251124Param.__annotations__)
    assert "enable_zoom" not in BetaToolComputerUse20250124Param.__annotations__
    with pytest.raises(ValueError, match="computer_20251124"):
        tool_definition("computer_20250124", 1280, 720, enable_zoom=True)


def test_toolset_definition_uses_sdk_fields_and_enables_every_mapped_member() -> None:
    definition = dict(tool_definition(TOOLSET_VERSION, 1280, 720))
    # The toolset entry has no name and no display size: only type, configs (and cache_control).
    assert set(definition) == {"type", "configs"}
    assert set(definition) <= set(BetaComputerToolset20260801Param.__annotations__)
    assert definition["type"] == "computer_toolset_20260801"
    configs = definition["configs"]
    assert isinstance(configs, dict)
    assert set(configs) == set(BetaComputerToolsetConfigsParam.__annotations__)
    assert {name for name, config in configs.items() if config == {"enabled": True}} == set(
        ACTIONS_BY_VERSION[TOOLSET_VERSION])
    assert all(config in ({"enabled": True}, {"enabled": False}) for config in configs.values())
    assert TOOLSET_VERSION not in BETA_HEADERS and TOOLSET_VERSION in TOOL_VERSIONS
    with pytest.raises(ValueError, match="configs"):
        tool_definition(TOOLSET_VERSION, 1280, 720, enable_zoom=True)
    with pytest.raises(ValueError):
        tool_definition(TOOLSET_VERSION, 0, 720)


def test_toolset_member_inputs_match_the_action_fields() -> None:
    # Every member tool_use block of the SDK: its name is the action, its input the action's fields.
    blocks = get_args(get_args(BetaComputerToolUseBlock)[0])
    names = set()
    for block in blocks:
        (name,) = get_args(block.model_fields["name"].annotation)
        names.add(name)
        fields = block.model_fields["input"].annotation.model_fields
        assert "action" not in fields
        assert set(fields) <= _FIELDS[name], name
        assert {f for f, info in fields.items() if info.is_required()} == _REQUIRED.get(name, frozenset()), name
    assert names == set(ACTIONS_BY_VERSION[TOOLSET_VERSION]) == set(get_args(BetaComputerMemberName))


def test_toolset_call_maps_like_the_single_tool() -> None:
    assert map_toolset_call("left_click", {"coordinate": [3, 4]}, double) == map_computer_action(
        {"action": "left_click", "coordinate": [3, 4]}, "computer_20251124", double)
    assert map_toolset_call("left_click", {"coordinate": [3, 4]}, double).actions == [
        {"type": "click", "x": 6, "y": 8, "button": "left", "count": 1}]
    assert map_toolset_call("zoom", {"region": [0, 0, 10, 10]}, double).region == (0, 0, 10, 10)
    assert map_toolset_call("screenshot", {}, double).kind == "screenshot_only"


@pytest.mark.parametrize(
    ("name", "tool_input", "message"),
    [
        ("computer", {"action": "left_click", "coordinate": [1, 1]}, "unknown tool 'computer'"),
        ("drag", {}, "the computer toolset's tools are: key, "),
        (None, {}, "unknown tool"),
        ("left_click", [1, 2], "must be an object"),
        ("left_click", {"action": "right_click", "coordinate": [1, 1]}, "does not take 'action'"),
        ("left_click", {"coordinate": [1, 1], "bogus": 1}, "does not take 'bogus'"),
    ],
)
def test_toolset_call_rejects_malformed_calls(name: object, tool_input: object, message: str) -> None:
    with pytest.raises(NativeActionError, match=message):
        map_toolset_call(name, tool_input, double)


@pytest.mark.parametrize(
    ("version", "width", "height"),
    [("computer_20241022", 1280, 720), ("computer_20250124", 0, 720), ("computer_20251124", 1280, -1)],
)
def test_tool_definition_rejects_bad_arguments(version: str, width: int, height: int) -> None:
    with pytest.raises(ValueError):
        tool_definition(version, width, height)


_json_scalars = st.none() | st.booleans() | st.integers(-5, 2000) | st.floats(allow_nan=True) | st.text(max_size=12)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_field_names = st.sampled_from(
    [
        "coordinate",
        "start_coordinate",
        "text",
        "repeat",
        "scroll_direction",
        "scroll_amount",
        "duration",
        "region",
        "key",
        "extra",
    ]
)
_field_values = (
    _json
    | st.lists(st.integers(-3, 3000), min_size=2, max_size=2)
    | st.sampled_from(["up", "down", "left", "right", "ctrl+s", "Return", "hello\nworld", "shift"])
)
_tool_inputs = st.builds(
    lambda action, fields: {"action": action, **fields},
    st.sampled_from([*ACTIONS_BY_VERSION["computer_20251124"], "bogus"]) | _json,
    st.dictionaries(_field_names, _field_values, max_size=4),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(tool_input=_tool_inputs | _json, version=st.sampled_from(VERSIONS))
def test_arbitrary_input_only_raises_native_action_error(tool_input: Any, version: str) -> None:
    try:
        step = map_computer_action(tool_input, version, double)
    except NativeActionError as error:
        assert str(error)
        return
    if step.kind == "actions":
        assert step.actions
        for action in step.actions:
            ACTION_ADAPTER.validate_python(action)
    else:
        assert step.actions == []
        assert (step.message is not None) == (step.kind == "unsupported")
