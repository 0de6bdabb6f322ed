"""Whole-batch action validation: every rule, its exact message, and robustness to any input."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from autocad_bench.actions import (
    ACTION_ADAPTER,
    KEY_NAMES,
    BatchRejection,
    ClickAction,
    DoneAction,
    DragAction,
    KeyAction,
    MoveAction,
    ScrollAction,
    TypeAction,
    ValidatedBatch,
    WaitAction,
    action_request_id,
    validate_batch,
)
from autocad_bench.actions.models import MOUSE_BUTTONS
from autocad_bench.providers.models import DisplaySize

HD = DisplaySize(width=1920, height=1080)
TYPES = "expected one of move, click, drag, scroll, type, key, wait, done"
ENTER = 'press Enter with a key action: {"type": "key", "keys": ["enter"]}'
TAB = 'press Tab with a key action: {"type": "key", "keys": ["tab"]}'

# Strategies (also used by the schema tests) ---------------------------------------------------


def valid_action_dicts(display: DisplaySize = HD) -> st.SearchStrategy[dict[str, Any]]:
    """Any single valid non-``done`` action as the model would send it."""
    x = st.integers(0, display.width - 1)
    y = st.integers(0, display.height - 1)
    button = st.sampled_from(MOUSE_BUTTONS)
    printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=30)
    wheel = st.tuples(st.integers(-15, 15), st.integers(-15, 15)).filter(lambda d: d != (0, 0))
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("move"), "x": x, "y": y}),
        st.fixed_dictionaries({"type": st.just("click"), "x": x, "y": y, "button": button, "count": st.integers(1, 3)}),
        st.fixed_dictionaries(
            {
                "type": st.just("drag"),
                "path": st.lists(st.tuples(x, y).map(list), min_size=2, max_size=6),
                "button": button,
            }
        ),
        st.builds(lambda x, y, d: {"type": "scroll", "x": x, "y": y, "dx": d[0], "dy": d[1]}, x, y, wheel),
        st.fixed_dictionaries({"type": st.just("type"), "text": printable}),
        st.fixed_dictionaries(
            {
                "type": st.just("key"),
                "keys": st.lists(st.sampled_from(sorted(KEY_NAMES)), min_size=1, max_size=4, unique=True),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("wait"),
                "seconds": st.floats(0, 10, exclude_min=True) | st.integers(1, 10),
            }
        ),
    )


def valid_batches(display: DisplaySize = HD, max_size: int = 8) -> st.SearchStrategy[dict[str, Any]]:
    """A valid ``{"actions": [...]}`` object, optionally ending with ``done``."""
    return st.tuples(st.lists(valid_action_dicts(display), max_size=max_size), st.booleans()).map(
        lambda pair: {"actions": pair[0] + ([{"type": "done"}] if pair[1] or not pair[0] else [])}
    )


def reject(raw: object, display: DisplaySize = HD, remaining: int = 5000) -> list[str]:
    result = validate_batch(raw, display, remaining)
    assert isinstance(result, BatchRejection), result
    assert result.problems, "a rejection must name at least one problem"
    return result.messages()


def accept(raw: object, display: DisplaySize = HD, remaining: int = 5000) -> ValidatedBatch:
    result = validate_batch(raw, display, remaining)
    assert isinstance(result, ValidatedBatch), result
    return result


def one(action: dict[str, Any], display: DisplaySize = HD) -> list[str]:
    return reject({"actions": [action]}, display)


# Valid batches -----------------------------------------------------------------------------------


def test_every_action_type_validates_into_its_model() -> None:
    batch = accept(
        {
            "actions": [
                {"type": "move", "x": 0, "y": 0},
                {"type": "click", "x": 1919, "y": 1079, "button": "right", "count": 2},
                {"type": "drag", "path": [[10, 10], [20, 30], [40, 50]], "button": "left"},
                {"type": "scroll", "x": 5, "y": 6, "dx": 0, "dy": -3},
                {"type": "type", "text": "LINE 0,0 100,100 ~!"},
                {"type": "key", "keys": ["ctrl", "shift", "s"]},
                {"type": "wait", "seconds": 0.5},
                {"type": "done"},
            ]
        }
    )
    assert [type(a) for a in batch.actions] == [
        MoveAction,
        ClickAction,
        DragAction,
        ScrollAction,
        TypeAction,
        KeyAction,
        WaitAction,
        DoneAction,
    ]
    assert len(batch) == 8
    assert batch.ends_with_done
    assert batch.wait_seconds == 0.5
    assert batch.to_wire()[2] == {"type": "drag", "path": [[10, 10], [20, 30], [40, 50]], "button": "left"}


def test_integer_seconds_and_chord_of_one_key_are_fine() -> None:
    batch = accept({"actions": [{"type": "wait", "seconds": 10}, {"type": "key", "keys": ["enter"]}]})
    assert not batch.ends_with_done


def test_batch_may_use_exactly_the_remaining_budget() -> None:
    assert len(accept({"actions": [{"type": "done"}]}, remaining=1)) == 1
    moves = [{"type": "move", "x": 1, "y": 1}] * 3
    assert len(accept({"actions": moves}, remaining=3)) == 3


def test_no_per_call_cap_beyond_the_budget() -> None:
    moves = [{"type": "move", "x": i % 1920, "y": 0} for i in range(5000)]
    assert len(accept({"actions": moves}, remaining=5000)) == 5000


# Rejections with exact messages -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "messages"),
    [
        (None, ['the tool input must be an object like {"actions": [...]}, got null']),
        ([], ['the tool input must be an object like {"actions": [...]}, got array']),
        ("click", ['the tool input must be an object like {"actions": [...]}, got string']),
        ({}, ["actions: required field is missing"]),
        ({"actions": {}}, ["actions: must be an array of actions, got object"]),
        ({"actions": []}, ["actions: must contain at least one action"]),
        (
            {"actions": [{"type": "done"}], "reason": "x"},
            ["reason: unknown field; the only field is actions"],
        ),
        (
            {"actions": [{"type": "done"}], "bad key": 1},
            ['["bad key"]: unknown field; the only field is actions'],
        ),
        ({"actions": [7]}, ["actions[0]: must be an action object, got integer"]),
        (
            {"actions": [{"x": 1}]},
            [f"actions[0].type: required field is missing; {TYPES}"],
        ),
        (
            {"actions": [{"type": "doubleclick"}]},
            [f'actions[0].type: unknown action type "doubleclick"; {TYPES}'],
        ),
        (
            {"actions": [{"type": 3}]},
            [f"actions[0].type: unknown action type 3; {TYPES}"],
        ),
    ],
)
def test_shape_problems(raw: object, messages: list[str]) -> None:
    assert reject(raw) == messages


def test_budget_overflow_is_reported_with_counts() -> None:
    moves = [{"type": "move", "x": 1, "y": 1}] * 3
    assert reject({"actions": moves}, remaining=2) == [
        "actions: the batch has 3 actions but only 2 remain in the rollout budget"
    ]
    assert reject({"actions": moves}, remaining=1) == [
        "actions: the batch has 3 actions but only 1 remains in the rollout budget"
    ]
    assert reject({"actions": [{"type": "done"}]}, remaining=0) == [
        "actions: the batch has 1 action but only 0 remain in the rollout budget"
    ]


def test_fields_are_exact_per_type() -> None:
    assert one({"type": "move", "x": 1, "y": 2, "button": "left"}) == [
        "actions[0].button: unknown field for a move action"
    ]
    assert one({"type": "click", "x": 1, "y": 2}) == [
        "actions[0].button: required field is missing",
        "actions[0].count: required field is missing",
    ]
    assert one({"type": "done", "reason": "finished"}) == ["actions[0].reason: unknown field for a done action"]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            {"type": "move", "x": 1920, "y": 0},
            "actions[0].x: 1920 is outside the 1920x1080 display; x must be between 0 and 1919",
        ),
        (
            {"type": "move", "x": 0, "y": 1080},
            "actions[0].y: 1080 is outside the 1920x1080 display; y must be between 0 and 1079",
        ),
        (
            {"type": "move", "x": -1, "y": 0},
            "actions[0].x: -1 is outside the 1920x1080 display; x must be between 0 and 1919",
        ),
        (
            {"type": "move", "x": 10**30, "y": 0},
            "actions[0].x: an out-of-range integer is outside the 1920x1080 display; x must be between 0 and 1919",
        ),
        ({"type": "move", "x": 1.5, "y": 0}, "actions[0].x: must be an integer pixel coordinate, got number"),
        ({"type": "move", "x": 1.0, "y": 0}, "actions[0].x: must be an integer pixel coordinate, got number"),
        ({"type": "move", "x": True, "y": 0}, "actions[0].x: must be an integer pixel coordinate, got boolean"),
        ({"type": "move", "x": "5", "y": 0}, "actions[0].x: must be an integer pixel coordinate, got string"),
        (
            {"type": "click", "x": 1, "y": 1, "button": "Left", "count": 1},
            'actions[0].button: must be one of "left", "right", "middle", got "Left"',
        ),
        (
            {"type": "click", "x": 1, "y": 1, "button": ["left"], "count": 1},
            'actions[0].button: must be one of "left", "right", "middle", got array',
        ),
        ({"type": "click", "x": 1, "y": 1, "button": "left", "count": 0}, "actions[0].count: must be 1, 2 or 3, got 0"),
        ({"type": "click", "x": 1, "y": 1, "button": "left", "count": 4}, "actions[0].count: must be 1, 2 or 3, got 4"),
        (
            {"type": "click", "x": 1, "y": 1, "button": "left", "count": 2.0},
            "actions[0].count: must be an integer, got number",
        ),
        ({"type": "drag", "path": [[1, 1]], "button": "left"}, "actions[0].path: needs at least 2 points, got 1"),
        (
            {"type": "drag", "path": "1,1 2,2", "button": "left"},
            "actions[0].path: must be an array of [x, y] points, got string",
        ),
        (
            {"type": "drag", "path": [[1, 1], [2, 2, 2]], "button": "left"},
            "actions[0].path[1]: must be an [x, y] pair, got an array of 3 items",
        ),
        (
            {"type": "drag", "path": [[1, 1], {"x": 2, "y": 2}], "button": "left"},
            "actions[0].path[1]: must be an [x, y] pair, got object",
        ),
        (
            {"type": "drag", "path": [[1, 1], [2000, 2]], "button": "left"},
            "actions[0].path[1][0]: 2000 is outside the 1920x1080 display; x must be between 0 and 1919",
        ),
        (
            {"type": "drag", "path": [[1, 1], [2, -2]], "button": "left"},
            "actions[0].path[1][1]: -2 is outside the 1920x1080 display; y must be between 0 and 1079",
        ),
        (
            {"type": "scroll", "x": 1, "y": 1, "dx": 0, "dy": 0},
            "actions[0]: dx and dy are both 0; scroll at least one wheel click",
        ),
        (
            {"type": "scroll", "x": 1, "y": 1, "dx": 0, "dy": 0.5},
            "actions[0].dy: must be an integer number of wheel clicks, got number",
        ),
        ({"type": "type", "text": ""}, "actions[0].text: must not be empty"),
        ({"type": "type", "text": 42}, "actions[0].text: must be a string, got integer"),
        ({"type": "type", "text": "caf\u00e9"}, "actions[0].text: character U+00E9 at offset 3 is not printable ASCII"),
        ({"type": "type", "text": "a\u007fb"}, "actions[0].text: character U+007F at offset 1 is not printable ASCII"),
        (
            {"type": "type", "text": "\U0001f600"},
            "actions[0].text: character U+1F600 at offset 0 is not printable ASCII",
        ),
        (
            {"type": "type", "text": "LINE\n"},
            f"actions[0].text: character U+000A at offset 4 is not printable ASCII; {ENTER}",
        ),
        (
            {"type": "type", "text": "a\rb"},
            f"actions[0].text: character U+000D at offset 1 is not printable ASCII; {ENTER}",
        ),
        (
            {"type": "type", "text": "a\tb"},
            f"actions[0].text: character U+0009 at offset 1 is not printable ASCII; {TAB}",
        ),
        ({"type": "key", "keys": []}, "actions[0].keys: must name at least one key"),
        ({"type": "key", "keys": "ctrl+s"}, "actions[0].keys: must be an array of key names, got string"),
        ({"type": "key", "keys": [None]}, "actions[0].keys[0]: must be a key name string, got null"),
        (
            {"type": "key", "keys": ["Enter"]},
            'actions[0].keys[0]: unknown key name "Enter"; key names are lowercase: use "enter"',
        ),
        ({"type": "key", "keys": ["control", "s"]}, 'actions[0].keys[0]: unknown key name "control"; use "ctrl"'),
        ({"type": "key", "keys": ["A"]}, 'actions[0].keys[0]: unknown key name "A"; key names are lowercase: use "a"'),
        (
            {"type": "key", "keys": ["\n"]},
            'actions[0].keys[0]: unknown key name "\\n"; use PyAutoGUI key names such as "enter", "ctrl", "f1"',
        ),
        (
            {"type": "key", "keys": ["sleep"]},
            'actions[0].keys[0]: unknown key name "sleep"; use PyAutoGUI key names such as "enter", "ctrl", "f1"',
        ),
        (
            {"type": "key", "keys": ["ctrl", "ctrl"]},
            'actions[0].keys[1]: key "ctrl" appears more than once in the chord',
        ),
        ({"type": "wait", "seconds": 0}, "actions[0].seconds: must be greater than 0 and at most 10, got 0"),
        ({"type": "wait", "seconds": -1.5}, "actions[0].seconds: must be greater than 0 and at most 10, got -1.5"),
        ({"type": "wait", "seconds": 10.01}, "actions[0].seconds: must be greater than 0 and at most 10, got 10.01"),
        ({"type": "wait", "seconds": math.inf}, "actions[0].seconds: must be greater than 0 and at most 10, got inf"),
        ({"type": "wait", "seconds": math.nan}, "actions[0].seconds: must be greater than 0 and at most 10, got nan"),
        ({"type": "wait", "seconds": "2"}, "actions[0].seconds: must be a number of seconds, got string"),
        ({"type": "wait", "seconds": False}, "actions[0].seconds: must be a number of seconds, got boolean"),
    ],
)
def test_field_rules(action: dict[str, Any], message: str) -> None:
    assert one(action) == [message]


def test_bounds_follow_the_live_display() -> None:
    small = DisplaySize(width=800, height=600)
    assert one({"type": "move", "x": 800, "y": 0}, small) == [
        "actions[0].x: 800 is outside the 800x600 display; x must be between 0 and 799"
    ]
    accept({"actions": [{"type": "move", "x": 799, "y": 599}]}, small)


def test_done_must_be_last() -> None:
    assert reject({"actions": [{"type": "done"}, {"type": "move", "x": 1, "y": 1}]}) == [
        "actions[0]: done must be the last action of the batch"
    ]
    assert reject({"actions": [{"type": "done"}, {"type": "done"}]}) == [
        "actions[0]: done must be the last action of the batch"
    ]


def test_every_problem_is_reported_in_document_order() -> None:
    messages = reject(
        {
            "actions": [
                {"type": "move", "x": 5000, "y": 5},
                {"type": "type", "text": "ok"},
                {"type": "type", "text": "\u00e9"},
                {"type": "key", "keys": ["Ctrl", "s"]},
            ]
        }
    )
    assert [m.split(":")[0] for m in messages] == ["actions[0].x", "actions[2].text", "actions[3].keys[0]"]


def test_feedback_is_bounded_and_says_nothing_ran() -> None:
    rejection = validate_batch({"actions": [{"type": "wait", "seconds": 0}] * 30}, HD, 5000)
    assert isinstance(rejection, BatchRejection)
    assert len(rejection.problems) == 30
    text = rejection.feedback(limit=5)
    assert text.startswith("The action batch was rejected; nothing was executed.")
    assert text.count("\n- actions[") == 5
    assert text.endswith("- ... and 25 more problems")


def test_messages_never_echo_long_or_non_ascii_input() -> None:
    (message,) = one({"type": "key", "keys": ["\u00e9" * 500]})
    assert message.isascii()
    assert len(message) < 200


# Robustness -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)

action_like = st.dictionaries(
    st.sampled_from(["type", "x", "y", "button", "count", "path", "dx", "dy", "text", "keys", "seconds", "extra"]),
    st.one_of(
        json_values,
        st.sampled_from(["move", "click", "drag", "scroll", "type", "key", "wait", "done", "left", "ctrl"]),
        st.integers(-3, 2000),
        st.lists(st.lists(st.integers(-1, 2000), max_size=3), max_size=3),
        st.lists(st.sampled_from(["ctrl", "s", "Enter", "enter", 1]), max_size=3),
    ),
    max_size=6,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(raw=json_values, remaining=st.integers(-2, 10))
def test_any_json_value_yields_a_result_never_an_exception(raw: object, remaining: int) -> None:
    result = validate_batch(raw, HD, remaining)
    assert isinstance(result, ValidatedBatch | BatchRejection)
    if isinstance(result, BatchRejection):
        assert result.problems


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(action_like, min_size=1, max_size=4), remaining=st.integers(0, 6))
def test_action_like_input_yields_a_result_and_agrees_with_the_models(
    actions: list[dict[str, Any]], remaining: int
) -> None:
    result = validate_batch({"actions": actions}, HD, remaining)
    assert isinstance(result, ValidatedBatch | BatchRejection)
    # The hand-written checks must never be stricter than the models plus the context rules.
    try:
        parsed = [ACTION_ADAPTER.validate_python(item) for item in actions]
    except ValidationError:
        assert isinstance(result, BatchRejection)
        return
    in_display = all(_inside(item, HD) for item in actions)
    done_last = all(a.type != "done" for a in parsed[:-1])
    expected_ok = in_display and done_last and len(actions) <= remaining
    assert isinstance(result, ValidatedBatch) == expected_ok, result


def _inside(item: dict[str, Any], display: DisplaySize) -> bool:
    points = item.get("path") or ([[item["x"], item["y"]]] if "x" in item else [])
    return all(0 <= x < display.width and 0 <= y < display.height for x, y in points)


@settings(max_examples=300)
@given(batch=valid_batches())
def test_every_generated_valid_batch_validates_and_round_trips(batch: dict[str, Any]) -> None:
    result = accept(batch)
    assert len(result) == len(batch["actions"])
    again = accept({"actions": json.loads(json.dumps(result.to_wire()))})
    assert again == result


@settings(max_examples=200)
@given(batch=valid_batches(DisplaySize(width=40, height=30)))
def test_valid_batches_on_a_small_display(batch: dict[str, Any]) -> None:
    accept(batch, DisplaySize(width=40, height=30))


# Request ids ------------------------------------------------------------------------------------


def test_action_request_id_is_sha256_of_a_json_array() -> None:
    rid = action_request_id("attempt-1", "toolu_01", 0)
    assert rid == hashlib.sha256(b'["attempt-1","toolu_01",0]').hexdigest()
    assert rid == action_request_id("attempt-1", "toolu_01", 0)
    assert len(rid) == 64 and set(rid) <= set("0123456789abcdef")


def test_action_request_id_is_unambiguous() -> None:
    ids = {
        action_request_id("a-b", "c", 0),
        action_request_id("a", "b-c", 0),
        action_request_id("a", "bc", 0),
        action_request_id("ab", "c", 0),
        action_request_id("a", "b", 10),
        action_request_id("a", "b1", 0),
        action_request_id("a", "b", 1),
    }
    assert len(ids) == 7


@given(a=st.text(), b=st.text(), n=st.integers(0, 10**6))
def test_action_request_id_is_total_over_strings(a: str, b: str, n: int) -> None:
    assert len(action_request_id(a, b, n)) == 64


@pytest.mark.parametrize(
    ("args", "error"), [(("a", "b", -1), ValueError), (("a", "b", True), TypeError), (("a", None, 0), TypeError)]
)
def test_action_request_id_rejects_bad_arguments(args: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        action_request_id(*args)
