"""Native-tool-only actions (mouse_down, mouse_up, hold_key): models, validation, schema, fake broker."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from autocad_bench.actions import (
    ACTION_ADAPTER,
    ACTION_TYPES,
    ALL_ACTION_TYPES,
    NATIVE_ONLY_ACTION_TYPES,
    BatchRejection,
    HoldKeyAction,
    MouseDownAction,
    MouseUpAction,
    ValidatedBatch,
    action_request_id,
    action_to_wire,
    computer_action_schema,
    validate_batch,
)
from autocad_bench.actions.models import ACTION_MODELS
from autocad_bench.broker.client import BrokerClient
from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing.fake_broker import FakeBroker

HD = DisplaySize(width=1920, height=1080)
FUNCTION_TYPES = ("move", "click", "drag", "scroll", "type", "key", "wait", "done")
DOWN = {"type": "mouse_down", "x": 10, "y": 20, "button": "left"}
UP = {"type": "mouse_up", "x": 30, "y": 40, "button": "left"}
HOLD = {"type": "hold_key", "keys": ["ctrl", "shift"], "seconds": 2.5}


def test_models_parse_and_round_trip() -> None:
    assert ACTION_ADAPTER.validate_python(DOWN) == MouseDownAction(x=10, y=20, button="left")
    assert ACTION_ADAPTER.validate_python(UP) == MouseUpAction(x=30, y=40, button="left")
    hold = ACTION_ADAPTER.validate_python(HOLD)
    assert hold == HoldKeyAction(keys=("ctrl", "shift"), seconds=2.5)
    for raw in (DOWN, UP, HOLD):
        assert action_to_wire(ACTION_ADAPTER.validate_python(raw)) == raw


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "mouse_down", "x": 1, "y": 2, "button": "side"},
        {"type": "mouse_up", "x": -1, "y": 2, "button": "left"},
        {"type": "mouse_down", "x": 1, "y": 2},
        {"type": "hold_key", "keys": [], "seconds": 1.0},
        {"type": "hold_key", "keys": ["shift", "shift"], "seconds": 1.0},
        {"type": "hold_key", "keys": ["hyper"], "seconds": 1.0},
        {"type": "hold_key", "keys": ["shift"], "seconds": 0.0},
        {"type": "hold_key", "keys": ["shift"], "seconds": 10.5},
    ],
)
def test_models_refuse_bad_values(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ACTION_ADAPTER.validate_python(raw)


def test_type_tables() -> None:
    assert ACTION_TYPES == FUNCTION_TYPES
    assert NATIVE_ONLY_ACTION_TYPES == ("mouse_down", "mouse_up", "hold_key")
    assert ALL_ACTION_TYPES == FUNCTION_TYPES + NATIVE_ONLY_ACTION_TYPES == tuple(ACTION_MODELS)


def test_the_function_mode_schema_is_unchanged() -> None:
    branches = computer_action_schema()["properties"]["actions"]["items"]["anyOf"]
    assert [b["properties"]["type"]["enum"] for b in branches] == [[t] for t in FUNCTION_TYPES]
    text = str(computer_action_schema())
    for kind in NATIVE_ONLY_ACTION_TYPES:
        assert kind not in text


@pytest.mark.parametrize("action", [DOWN, UP, HOLD])
def test_function_mode_rejects_native_only_types(action: dict[str, Any]) -> None:
    result = validate_batch({"actions": [action]}, HD, 10)
    assert isinstance(result, BatchRejection)
    (message,) = result.messages()
    assert message == (
        f"actions[0].type: {action['type']} is only available in native tool mode; "
        "expected one of move, click, drag, scroll, type, key, wait, done"
    )
    assert isinstance(validate_batch({"actions": [action]}, HD, 10, native=False), BatchRejection)


def test_native_mode_accepts_them_and_still_checks_fields() -> None:
    result = validate_batch({"actions": [DOWN, {"type": "move", "x": 5, "y": 5}, UP, HOLD]}, HD, 10, native=True)
    assert isinstance(result, ValidatedBatch)
    assert [a.type for a in result.actions] == ["mouse_down", "move", "mouse_up", "hold_key"]
    assert result.wait_seconds == 2.5  # hold_key time counts toward the broker deadline
    # A batch may end with the button still held.
    assert isinstance(validate_batch({"actions": [DOWN]}, HD, 10, native=True), ValidatedBatch)
    bad = [
        {"type": "mouse_down", "x": 1920, "y": 0, "button": "left"},
        {"type": "mouse_up", "x": 1, "y": 1, "button": "side", "count": 1},
        {"type": "hold_key", "keys": ["Shift"], "seconds": 11},
        {"type": "warp"},
    ]
    rejection = validate_batch({"actions": bad}, HD, 10, native=True)
    assert isinstance(rejection, BatchRejection)
    messages = rejection.messages()
    assert messages[0].startswith("actions[0].x: 1920 is outside the 1920x1080 display")
    assert any(m.startswith("actions[1].button: must be one of") for m in messages)
    assert "actions[1].count: unknown field for a mouse_up action" in messages
    assert any(m.startswith('actions[2].keys[0]: unknown key name "Shift"') for m in messages)
    assert any(m.startswith("actions[2].seconds: must be greater than 0 and at most 10") for m in messages)
    assert messages[-1] == (
        'actions[3].type: unknown action type "warp"; expected one of move, click, drag, scroll, type, key, '
        "wait, done, mouse_down, mouse_up, hold_key"
    )


async def test_the_fake_broker_injects_native_actions() -> None:
    display = DisplaySize(width=64, height=48)
    async with FakeBroker(display=display) as broker:
        client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0, wait_max_s=0.0, wait_jitter_s=0.0)
        lease = await client.lease("task-1", "attempt-1")
        await client.reset(lease.session_id)
        batch = validate_batch({"actions": [DOWN, UP, {**HOLD, "seconds": 0.01}]}, display, 10, native=True)
        assert isinstance(batch, ValidatedBatch)
        result = await client.actions(lease.session_id, action_request_id("attempt-1", "toolu_0", 0), 0, batch)
        assert result.next_index == 3
        assert [item.action.type for item in broker.injected] == ["mouse_down", "mouse_up", "hold_key"]
