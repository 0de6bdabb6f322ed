"""Boundaries of validate_batch: every limit on both sides, native mode, and the exact wording of each message.

Complements tests/core/test_actions.py; deterministic and fast (the mutation run of
``core.actions-validation`` runs this file once per mutant).
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest

from autocad_bench.actions import (
    BatchRejection,
    HoldKeyAction,
    MouseDownAction,
    MouseUpAction,
    MoveAction,
    ValidatedBatch,
    validate_batch,
)
from autocad_bench.errors import Problem
from autocad_bench.providers.models import DisplaySize

HD = DisplaySize(width=1920, height=1080)
TALL = DisplaySize(width=300, height=700)
TYPES = "expected one of move, click, drag, scroll, type, key, wait, done"
NATIVE_TYPES = f"{TYPES}, mouse_down, mouse_up, hold_key"
TOP = 'the tool input must be an object like {"actions": [...]}, got '
HINT = '; use PyAutoGUI key names such as "enter", "ctrl", "f1"'


def run(raw: object, display: DisplaySize = HD, remaining: int = 5000, *, native: bool = False) -> object:
    return validate_batch(raw, display, remaining, native=native)


def reject(raw: object, display: DisplaySize = HD, remaining: int = 5000, *, native: bool = False) -> list[str]:
    result = run(raw, display, remaining, native=native)
    assert isinstance(result, BatchRejection), result
    return result.messages()


def accept(raw: object, display: DisplaySize = HD, remaining: int = 5000, *, native: bool = False) -> ValidatedBatch:
    result = run(raw, display, remaining, native=native)
    assert isinstance(result, ValidatedBatch), result
    return result


def one(action: object, display: DisplaySize = HD, *, native: bool = False) -> list[str]:
    return reject({"actions": [action]}, display, native=native)


def ok(action: dict[str, Any], display: DisplaySize = HD, *, native: bool = False) -> ValidatedBatch:
    return accept({"actions": [action]}, display, native=native)


def outside(path: str, value: str, axis: str, display: DisplaySize = HD) -> str:
    size = display.width if axis == "x" else display.height
    return (
        f"{path}: {value} is outside the {display.width}x{display.height} display; "
        f"{axis} must be between 0 and {size - 1}"
    )


# Coordinates: 0 <= x < width and 0 <= y < height, each axis against its own size -----------------


@pytest.mark.parametrize(("x", "y"), [(0, 0), (299, 0), (0, 699), (299, 699), (150, 350)])
def test_every_point_inside_the_display_is_accepted(x: int, y: int) -> None:
    batch = ok({"type": "move", "x": x, "y": y}, TALL)
    assert batch.actions == (MoveAction(x=x, y=y),)


@pytest.mark.parametrize(
    ("x", "y", "messages"),
    [
        (300, 0, [outside("actions[0].x", "300", "x", TALL)]),
        (-1, 0, [outside("actions[0].x", "-1", "x", TALL)]),
        (0, 700, [outside("actions[0].y", "700", "y", TALL)]),
        (0, -1, [outside("actions[0].y", "-1", "y", TALL)]),
        (699, 0, [outside("actions[0].x", "699", "x", TALL)]),
        (300, 700, [outside("actions[0].x", "300", "x", TALL), outside("actions[0].y", "700", "y", TALL)]),
    ],
)
def test_points_outside_the_display_name_their_axis_and_its_range(x: int, y: int, messages: list[str]) -> None:
    assert one({"type": "move", "x": x, "y": y}, TALL) == messages


def test_a_one_pixel_display_admits_only_the_origin() -> None:
    pixel = DisplaySize(width=1, height=1)
    ok({"type": "move", "x": 0, "y": 0}, pixel)
    assert one({"type": "move", "x": 1, "y": 1}, pixel) == [
        "actions[0].x: 1 is outside the 1x1 display; x must be between 0 and 0",
        "actions[0].y: 1 is outside the 1x1 display; y must be between 0 and 0",
    ]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2**63, str(2**63)),
        (2**64 - 1, str(2**64 - 1)),
        (-(2**64 - 1), str(-(2**64 - 1))),
        (2**64, "an out-of-range integer"),
        (-(2**64), "an out-of-range integer"),
    ],
)
def test_integers_are_shown_up_to_64_bits(value: int, shown: str) -> None:
    assert one({"type": "move", "x": value, "y": 0}) == [outside("actions[0].x", shown, "x")]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "null"),
        (True, "boolean"),
        (False, "boolean"),
        (2.0, "number"),
        ("1", "string"),
        ([1], "array"),
        ((1,), "array"),
        ({"x": 1}, "object"),
        (b"1", "bytes"),
        ({1}, "set"),
    ],
)
def test_a_coordinate_of_the_wrong_type_names_the_json_type(value: object, kind: str) -> None:
    assert one({"type": "move", "x": 1, "y": value}) == [
        f"actions[0].y: must be an integer pixel coordinate, got {kind}"
    ]


# Buttons, click counts, wheel clicks -------------------------------------------------------------


@pytest.mark.parametrize("button", ["left", "right", "middle"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_every_button_and_click_count_is_accepted(button: str, count: int) -> None:
    batch = ok({"type": "click", "x": 1, "y": 2, "button": button, "count": count})
    assert batch.to_wire() == [{"type": "click", "x": 1, "y": 2, "button": button, "count": count}]


@pytest.mark.parametrize(
    ("button", "shown"),
    [("", '""'), ("LEFT", '"LEFT"'), (None, "null"), (True, "true"), (1, "1"), (0.5, "0.5"), ({}, "object")],
)
def test_a_bad_button_lists_the_three_buttons(button: object, shown: str) -> None:
    assert one({"type": "click", "x": 1, "y": 1, "button": button, "count": 1}) == [
        f'actions[0].button: must be one of "left", "right", "middle", got {shown}'
    ]


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (-1, "must be 1, 2 or 3, got -1"),
        (0, "must be 1, 2 or 3, got 0"),
        (4, "must be 1, 2 or 3, got 4"),
        (True, "must be an integer, got boolean"),
        ("2", "must be an integer, got string"),
        (None, "must be an integer, got null"),
    ],
)
def test_click_count_bounds(count: object, message: str) -> None:
    assert one({"type": "click", "x": 1, "y": 1, "button": "left", "count": count}) == [f"actions[0].count: {message}"]


@pytest.mark.parametrize(("dx", "dy"), [(1, 0), (0, 1), (-1, 0), (0, -1), (-20, 20), (10**30, 0)])
def test_any_nonzero_wheel_movement_is_accepted(dx: int, dy: int) -> None:
    batch = ok({"type": "scroll", "x": 0, "y": 0, "dx": dx, "dy": dy})
    assert batch.to_wire() == [{"type": "scroll", "x": 0, "y": 0, "dx": dx, "dy": dy}]


@pytest.mark.parametrize(("value", "kind"), [(True, "boolean"), (1.0, "number"), ("1", "string"), (None, "null")])
def test_wheel_clicks_must_be_integers(value: object, kind: str) -> None:
    assert one({"type": "scroll", "x": 0, "y": 0, "dx": value, "dy": 1}) == [
        f"actions[0].dx: must be an integer number of wheel clicks, got {kind}"
    ]


def test_a_still_scroll_is_reported_only_when_its_fields_are_valid() -> None:
    assert one({"type": "scroll", "x": 1920, "y": 0, "dx": 0, "dy": 0}) == [outside("actions[0].x", "1920", "x")]
    assert one({"type": "scroll", "x": 0, "y": 0, "dx": 0}) == ["actions[0].dy: required field is missing"]
    assert one({"type": "scroll", "x": 0, "y": 0, "dx": 0, "dy": 0, "z": 1}) == [
        "actions[0].z: unknown field for a scroll action"
    ]


# Drag paths ------------------------------------------------------------------------------------


def test_a_two_point_path_of_lists_or_tuples_is_accepted() -> None:
    batch = ok({"type": "drag", "path": [[0, 0], [1919, 1079]], "button": "middle"})
    assert batch.to_wire() == [{"type": "drag", "path": [[0, 0], [1919, 1079]], "button": "middle"}]
    batch = ok({"type": "drag", "path": ((5, 6), (7, 8), (9, 10)), "button": "left"})
    assert batch.to_wire()[0]["path"] == [[5, 6], [7, 8], [9, 10]]


def test_a_path_reports_its_length_and_every_bad_point() -> None:
    assert one({"type": "drag", "path": [[1]], "button": "left"}) == [
        "actions[0].path: needs at least 2 points, got 1",
        "actions[0].path[0]: must be an [x, y] pair, got an array of 1 item",
    ]
    assert one({"type": "drag", "path": [], "button": "left"}) == ["actions[0].path: needs at least 2 points, got 0"]
    assert one({"type": "drag", "path": [7, [], [1, 2], [3.5, 1080], "ab"], "button": "left"}) == [
        "actions[0].path[0]: must be an [x, y] pair, got integer",
        "actions[0].path[1]: must be an [x, y] pair, got an array of 0 items",
        "actions[0].path[3][0]: must be an integer pixel coordinate, got number",
        outside("actions[0].path[3][1]", "1080", "y"),
        "actions[0].path[4]: must be an [x, y] pair, got string",
    ]


def test_path_points_are_checked_against_their_own_axis() -> None:
    ok({"type": "drag", "path": [[0, 0], [299, 699]], "button": "left"}, TALL)
    assert one({"type": "drag", "path": [[0, 0], [699, 299]], "button": "left"}, TALL) == [
        outside("actions[0].path[1][0]", "699", "x", TALL)
    ]
    assert one({"type": "drag", "path": [[300, 0], [0, 700]], "button": "left"}, TALL) == [
        outside("actions[0].path[0][0]", "300", "x", TALL),
        outside("actions[0].path[1][1]", "700", "y", TALL),
    ]


def test_a_path_of_the_wrong_type() -> None:
    assert one({"type": "drag", "path": None, "button": "left"}) == [
        "actions[0].path: must be an array of [x, y] points, got null"
    ]
    assert one({"type": "drag", "path": {"0": [1, 1]}, "button": "left"}) == [
        "actions[0].path: must be an array of [x, y] points, got object"
    ]


# Text ------------------------------------------------------------------------------------------


def test_all_printable_ascii_is_accepted() -> None:
    printable = "".join(chr(code) for code in range(0x20, 0x7F))
    assert ok({"type": "type", "text": printable}).to_wire() == [{"type": "type", "text": printable}]
    ok({"type": "type", "text": " "})
    ok({"type": "type", "text": "~"})
    ok({"type": "type", "text": "x" * 10_000})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\x1f", "character U+001F at offset 0 is not printable ASCII"),
        ("\x00", "character U+0000 at offset 0 is not printable ASCII"),
        ("ok\x7f", "character U+007F at offset 2 is not printable ASCII"),
        ("a\x01\x02", "character U+0001 at offset 1 is not printable ASCII"),
        ("\u00e9\n", "character U+00E9 at offset 0 is not printable ASCII"),
        (
            "\r\n",
            "character U+000D at offset 0 is not printable ASCII; press Enter with a key action: "
            '{"type": "key", "keys": ["enter"]}',
        ),
        ("\u2028", "character U+2028 at offset 0 is not printable ASCII"),
        ("\U0010ffff", "character U+10FFFF at offset 0 is not printable ASCII"),
    ],
)
def test_the_first_unprintable_character_is_named(text: str, message: str) -> None:
    assert one({"type": "type", "text": text}) == [f"actions[0].text: {message}"]


@pytest.mark.parametrize(("text", "kind"), [(None, "null"), (["a"], "array"), (True, "boolean"), (1.5, "number")])
def test_text_must_be_a_string(text: object, kind: str) -> None:
    assert one({"type": "type", "text": text}) == [f"actions[0].text: must be a string, got {kind}"]


# Keys ------------------------------------------------------------------------------------------


def test_a_chord_of_distinct_keys_in_a_list_or_tuple_is_accepted() -> None:
    assert ok({"type": "key", "keys": ("ctrl", "shift", "alt", "~")}).to_wire() == [
        {"type": "key", "keys": ["ctrl", "shift", "alt", "~"]}
    ]


def test_every_key_problem_of_a_chord_is_reported() -> None:
    assert one({"type": "key", "keys": ["a", 1, "a", "Enter", "a", "b", "b"]}) == [
        "actions[0].keys[1]: must be a key name string, got integer",
        'actions[0].keys[2]: key "a" appears more than once in the chord',
        'actions[0].keys[3]: unknown key name "Enter"; key names are lowercase: use "enter"',
        'actions[0].keys[4]: key "a" appears more than once in the chord',
        'actions[0].keys[6]: key "b" appears more than once in the chord',
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("CTRL", 'unknown key name "CTRL"; key names are lowercase: use "ctrl"'),
        ("Control", 'unknown key name "Control"; use "ctrl"'),
        ("cmd", 'unknown key name "cmd"; use "ctrl"'),
        ("ArrowUp", 'unknown key name "ArrowUp"; use "up"'),
        ("plus", 'unknown key name "plus"; use "+"'),
        (" ", 'unknown key name " "; type characters such as this with a type action'),
        ("", f'unknown key name ""{HINT}'),
        ("\x1f", f'unknown key name "\\u001f"{HINT}'),
        ("\x7f", f'unknown key name "\\u007f"{HINT}'),
        ("\u00e9", f'unknown key name "\\u00e9"{HINT}'),
        ("  ", f'unknown key name "  "{HINT}'),
        ("ab", f'unknown key name "ab"{HINT}'),
    ],
)
def test_unknown_key_names_get_the_closest_hint(name: str, message: str) -> None:
    assert one({"type": "key", "keys": [name]}) == [f"actions[0].keys[0]: {message}"]


def test_keys_of_the_wrong_type() -> None:
    assert one({"type": "key", "keys": None}) == ["actions[0].keys: must be an array of key names, got null"]
    assert one({"type": "key", "keys": ()}) == ["actions[0].keys: must name at least one key"]


# Long input is shown cut to 40 characters -------------------------------------------------------


def test_shown_strings_are_cut_after_40_characters() -> None:
    assert one({"type": "key", "keys": ["q" * 40]}) == [f'actions[0].keys[0]: unknown key name "{"q" * 40}"{HINT}']
    assert one({"type": "key", "keys": ["q" * 41]}) == [f'actions[0].keys[0]: unknown key name "{"q" * 40}..."{HINT}']
    # An escape counts with its full length: 19 letters, the two characters of \n and 19 letters make 40.
    assert one({"type": "key", "keys": ["q" * 19 + "\n" + "q" * 19]}) == [
        f'actions[0].keys[0]: unknown key name "{"q" * 19}\\n{"q" * 19}"{HINT}'
    ]
    assert one({"type": "key", "keys": ["q" * 39 + "\n"]}) == [
        f'actions[0].keys[0]: unknown key name "{"q" * 39}..."{HINT}'
    ]


# Wait seconds: 0 < seconds <= 10 -----------------------------------------------------------------


@pytest.mark.parametrize("seconds", [10, 10.0, 5e-324, 1e-9, 1, 9.999999])
def test_wait_seconds_inside_the_bounds_are_accepted(seconds: float) -> None:
    batch = ok({"type": "wait", "seconds": seconds})
    assert batch.wait_seconds == seconds


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (-5e-324, "-5e-324"),
        (10.000000000000002, "10.000000000000002"),
        (11, "11"),
        (-(10**400), "an out-of-range integer"),
        (10**400, "an out-of-range integer"),
        (float("-inf"), "-inf"),
    ],
)
def test_wait_seconds_outside_the_bounds_are_refused(seconds: float, shown: str) -> None:
    assert one({"type": "wait", "seconds": seconds}) == [
        f"actions[0].seconds: must be greater than 0 and at most 10, got {shown}"
    ]


def test_a_huge_integer_from_json_is_refused_not_raised() -> None:
    raw = json.loads('{"actions": [{"type": "wait", "seconds": 1' + "0" * 400 + "}]}")
    assert reject(raw) == ["actions[0].seconds: must be greater than 0 and at most 10, got an out-of-range integer"]


@pytest.mark.parametrize(("seconds", "kind"), [(None, "null"), (True, "boolean"), ([1], "array")])
def test_wait_seconds_must_be_a_number(seconds: object, kind: str) -> None:
    assert one({"type": "wait", "seconds": seconds}) == [f"actions[0].seconds: must be a number of seconds, got {kind}"]


# Batch shape, budget and done ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "kind"),
    [(0, "integer"), (1.5, "number"), (True, "boolean"), ((), "array"), (b"{}", "bytes"), (frozenset(), "frozenset")],
)
def test_the_tool_input_must_be_an_object(raw: object, kind: str) -> None:
    result = run(raw)
    assert isinstance(result, BatchRejection)
    assert result.problems == (Problem("", TOP + kind),)
    assert result.messages() == [TOP + kind]


def test_any_mapping_and_a_tuple_of_actions_are_accepted() -> None:
    move = {"type": "move", "x": 1, "y": 2}
    for raw in (
        MappingProxyType({"actions": [move]}),
        {"actions": (move,)},
        {"actions": [OrderedDict(move)]},
        {"actions": [MappingProxyType(move)]},
    ):
        assert accept(raw).actions == (MoveAction(x=1, y=2),)


def test_top_level_problems_are_all_reported_together() -> None:
    assert reject({"note": 1, 7: 2, "\u00e9": 3}) == [
        "note: unknown field; the only field is actions",
        '["7"]: unknown field; the only field is actions',
        '["\\u00e9"]: unknown field; the only field is actions',
        "actions: required field is missing",
    ]
    assert reject({"why": 1, "actions": "move"}) == [
        "why: unknown field; the only field is actions",
        "actions: must be an array of actions, got string",
    ]
    assert reject({"why": 1, "actions": ()}) == [
        "why: unknown field; the only field is actions",
        "actions: must contain at least one action",
    ]
    assert reject({"actions": [{"type": "done"}], "_x": 1, "x1": 2}) == [
        "_x: unknown field; the only field is actions",
        "x1: unknown field; the only field is actions",
    ]


def test_nested_unknown_fields_are_named_inside_their_action() -> None:
    assert one({"type": "move", "x": 1, "y": 1, "bad key": 1, 3: 4, "type2": 0}) == [
        'actions[0]["bad key"]: unknown field for a move action',
        'actions[0]["3"]: unknown field for a move action',
        "actions[0].type2: unknown field for a move action",
    ]


def test_every_problem_of_every_action_is_reported_in_order() -> None:
    assert reject(
        {
            "actions": [
                {"type": "move", "y": 5000, "q": 1},
                "move",
                {"type": "done", "why": "x"},
                {"type": "done"},
                {"type": "wait", "seconds": 1},
            ]
        },
        remaining=4,
    ) == [
        "actions: the batch has 5 actions but only 4 remain in the rollout budget",
        "actions[0].q: unknown field for a move action",
        "actions[0].x: required field is missing",
        outside("actions[0].y", "5000", "y"),
        "actions[1]: must be an action object, got string",
        "actions[2].why: unknown field for a done action",
        "actions[2]: done must be the last action of the batch",
        "actions[3]: done must be the last action of the batch",
    ]


@pytest.mark.parametrize(
    ("count", "remaining", "message"),
    [
        (2, 1, "the batch has 2 actions but only 1 remains in the rollout budget"),
        (1, 0, "the batch has 1 action but only 0 remain in the rollout budget"),
        (1, -1, "the batch has 1 action but only 0 remain in the rollout budget"),
        (2, -7, "the batch has 2 actions but only 0 remain in the rollout budget"),
        (4, 3, "the batch has 4 actions but only 3 remain in the rollout budget"),
    ],
)
def test_the_budget_caps_the_batch(count: int, remaining: int, message: str) -> None:
    assert reject({"actions": [{"type": "wait", "seconds": 1}] * count}, remaining=remaining) == [f"actions: {message}"]


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_the_whole_budget_may_be_spent_in_one_batch(count: int) -> None:
    assert len(accept({"actions": [{"type": "move", "x": 0, "y": 0}] * count}, remaining=count)) == count
    assert len(accept({"actions": [{"type": "move", "x": 0, "y": 0}] * count}, remaining=count + 1)) == count


def test_done_is_allowed_last_only() -> None:
    batch = accept({"actions": [{"type": "move", "x": 0, "y": 0}, {"type": "done"}]})
    assert batch.ends_with_done
    batch = accept({"actions": [{"type": "done"}]})
    assert batch.ends_with_done
    for last in (
        {"type": "move", "x": 0, "y": 0},
        {"type": "click", "x": 0, "y": 0, "button": "left", "count": 1},
        {"type": "drag", "path": [[0, 0], [1, 1]], "button": "left"},
    ):
        assert not accept({"actions": [{"type": "wait", "seconds": 2}, last]}).ends_with_done
    assert reject({"actions": [{"type": "move", "x": 0, "y": 0}, {"type": "done"}, {"type": "done"}]}) == [
        "actions[1]: done must be the last action of the batch"
    ]


def test_a_batch_counts_its_waits() -> None:
    batch = accept(
        {
            "actions": [
                {"type": "wait", "seconds": 1.5},
                {"type": "move", "x": 0, "y": 0},
                {"type": "key", "keys": ["a"]},
                {"type": "wait", "seconds": 2},
            ]
        }
    )
    assert batch.wait_seconds == 3.5
    assert accept({"actions": [{"type": "move", "x": 0, "y": 0}]}).wait_seconds == 0.0


@pytest.mark.parametrize(
    ("kind", "shown"),
    [(None, "null"), (True, "true"), (1.5, "1.5"), (["move"], "array"), ({"a": 1}, "object"), ("Move", '"Move"')],
)
def test_an_unknown_type_is_shown(kind: object, shown: str) -> None:
    assert one({"type": kind}) == [f"actions[0].type: unknown action type {shown}; {TYPES}"]
    assert one({"type": kind}, native=True) == [f"actions[0].type: unknown action type {shown}; {NATIVE_TYPES}"]


# Native tool mode ------------------------------------------------------------------------------


NATIVE_BATCH: dict[str, Any] = {
    "actions": [
        {"type": "mouse_down", "x": 0, "y": 0, "button": "left"},
        {"type": "mouse_up", "x": 1919, "y": 1079, "button": "right"},
        {"type": "hold_key", "keys": ["shift", "a"], "seconds": 10},
        {"type": "wait", "seconds": 0.25},
        {"type": "done"},
    ]
}


def test_native_mode_admits_held_buttons_and_keys() -> None:
    batch = accept(NATIVE_BATCH, native=True)
    assert batch.actions[:3] == (
        MouseDownAction(x=0, y=0, button="left"),
        MouseUpAction(x=1919, y=1079, button="right"),
        HoldKeyAction(keys=("shift", "a"), seconds=10.0),
    )
    assert batch.wait_seconds == 10.25
    assert batch.ends_with_done
    assert batch.to_wire()[2] == {"type": "hold_key", "keys": ["shift", "a"], "seconds": 10.0}


def test_function_mode_refuses_the_native_only_types() -> None:
    assert reject(NATIVE_BATCH) == [
        f"actions[{index}].type: {kind} is only available in native tool mode; {TYPES}"
        for index, kind in enumerate(["mouse_down", "mouse_up", "hold_key"])
    ]


def test_native_mode_lists_every_type_and_checks_the_native_fields() -> None:
    assert one({"x": 1}, native=True) == [f"actions[0].type: required field is missing; {NATIVE_TYPES}"]
    assert one({"x": 1}) == [f"actions[0].type: required field is missing; {TYPES}"]
    assert one({"type": "mouse_down", "x": 1920, "y": 0, "button": "up"}, native=True) == [
        outside("actions[0].x", "1920", "x"),
        'actions[0].button: must be one of "left", "right", "middle", got "up"',
    ]
    assert one({"type": "mouse_up", "x": 0, "y": 1080}, native=True) == [
        outside("actions[0].y", "1080", "y"),
        "actions[0].button: required field is missing",
    ]
    assert one({"type": "hold_key", "keys": ["a", "a"], "seconds": 0}, native=True) == [
        'actions[0].keys[1]: key "a" appears more than once in the chord',
        "actions[0].seconds: must be greater than 0 and at most 10, got 0",
    ]
    assert one({"type": "hold_key", "keys": ["a"], "seconds": 1, "button": "left"}, native=True) == [
        "actions[0].button: unknown field for a hold_key action"
    ]
    assert reject(
        {"actions": [{"type": "done"}, {"type": "mouse_up", "x": 0, "y": 0, "button": "left"}]}, native=True
    ) == ["actions[0]: done must be the last action of the batch"]


# Feedback --------------------------------------------------------------------------------------


def _waits(count: int) -> BatchRejection:
    result = run({"actions": [{"type": "wait", "seconds": 0}] * count})
    assert isinstance(result, BatchRejection)
    assert len(result.problems) == count
    return result


def test_feedback_spells_out_twenty_problems_by_default() -> None:
    header = "The action batch was rejected; nothing was executed. Problems:"
    line = "- actions[{}].seconds: must be greater than 0 and at most 10, got 0"
    assert _waits(20).feedback() == "\n".join([header, *(line.format(i) for i in range(20))])
    assert _waits(21).feedback() == "\n".join(
        [header, *(line.format(i) for i in range(20)), "- ... and 1 more problems"]
    )


@pytest.mark.parametrize(("count", "limit", "listed", "more"), [(3, 3, 3, 0), (4, 3, 3, 1), (2, 3, 2, 0), (5, 0, 0, 5)])
def test_feedback_cuts_at_the_limit(count: int, limit: int, listed: int, more: int) -> None:
    lines = _waits(count).feedback(limit).split("\n")
    assert lines[0] == "The action batch was rejected; nothing was executed. Problems:"
    assert [entry.startswith("- actions[") for entry in lines[1:]] == [True] * listed + [False] * bool(more)
    if more:
        assert lines[-1] == f"- ... and {more} more problems"


# Names and values are compared by value, whatever object carries them --------------------------


class Clicks(int):
    """An integer subclass: a distinct object even for small values."""


def test_json_decoded_names_are_compared_by_value() -> None:
    # json.loads builds fresh strings, never the interned constants of the validator.
    raw = json.loads('{"actions": [{"type": "scroll", "x": 1, "y": 1, "dx": 0, "dy": 0}, {"type": "done"}]}')
    assert reject(raw) == ["actions[0]: dx and dy are both 0; scroll at least one wheel click"]
    raw = json.loads('{"actions": [{"type": "done"}, {"type": "key", "keys": ["ctrl", "s"]}]}')
    assert reject(raw) == ["actions[0]: done must be the last action of the batch"]
    raw = json.loads('{"actions": [{"type": "move", "x": 1, "y": 1}, {"type": "done"}]}')
    assert accept(raw).ends_with_done


def test_integer_subclasses_are_compared_by_value() -> None:
    still = "actions[0]: dx and dy are both 0; scroll at least one wheel click"
    assert one({"type": "scroll", "x": 1, "y": 1, "dx": Clicks(0), "dy": 0}) == [still]
    assert one({"type": "scroll", "x": 1, "y": 1, "dx": 0, "dy": Clicks(0)}) == [still]
    assert reject({"actions": [{"type": "done"}] * 2}, remaining=Clicks(1)) == [
        "actions: the batch has 2 actions but only 1 remains in the rollout budget",
        "actions[0]: done must be the last action of the batch",
    ]


class Name(str):
    """A string subclass: a distinct object even for one character."""


def test_string_subclasses_are_compared_by_value() -> None:
    assert one({"type": "key", "keys": [Name(" ")]}) == [
        'actions[0].keys[0]: unknown key name " "; type characters such as this with a type action'
    ]
    assert ok({"type": Name("key"), Name("keys"): [Name("a")]}).to_wire() == [{"type": "key", "keys": ["a"]}]


def test_done_may_close_a_long_batch() -> None:
    moves = [{"type": "move", "x": index, "y": 0} for index in range(300)]
    batch = accept({"actions": [*moves, {"type": "done"}]})
    assert len(batch) == 301
    assert batch.ends_with_done
    assert reject({"actions": [*moves[:299], {"type": "done"}, moves[299]]}) == [
        "actions[299]: done must be the last action of the batch"
    ]


def test_results_are_immutable_values() -> None:
    batch = accept({"actions": [{"type": "move", "x": 1, "y": 1}]})
    rejection = run({"actions": []})
    assert isinstance(rejection, BatchRejection)
    assert not hasattr(batch, "__dict__")
    assert not hasattr(rejection, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.actions = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rejection.problems = ()  # type: ignore[misc]
    assert hash(batch) == hash(accept({"actions": [{"type": "move", "x": 1, "y": 1}]}))
    assert hash(rejection) == hash(run({"actions": []}))


def test_native_is_keyword_only_and_the_rest_may_be_named() -> None:
    raw = {"actions": [{"type": "mouse_up", "x": 0, "y": 0, "button": "left"}]}
    with pytest.raises(TypeError):
        validate_batch(raw, HD, 5, True)  # type: ignore[call-arg]
    result = validate_batch(raw=raw, display=HD, remaining_actions=5, native=True)
    assert isinstance(result, ValidatedBatch)
