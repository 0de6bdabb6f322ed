"""Typed desktop actions: what one ``computer_action`` tool call may ask the broker to do.

Each action is a frozen pydantic model discriminated on ``type``. The models enforce every
rule that does not depend on context (integer pixels, button names, click counts, key
names, printable-ASCII text, wait bounds, a scroll that moves). Rules that need context —
coordinates inside the live display, ``done`` only last, the remaining action budget —
are checked by :func:`autocad_bench.actions.validation.validate_batch`, which also turns
every problem into a message the model can act on. The broker parses the same models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, TypeAdapter, model_validator

from autocad_bench.actions.keys import KEY_NAMES
from autocad_bench.models import StrictModel

MouseButton = Literal["left", "right", "middle"]
MOUSE_BUTTONS: tuple[MouseButton, ...] = ("left", "right", "middle")

MAX_CLICK_COUNT = 3
"""A click action presses the button at most this many times (triple click)."""

MAX_WAIT_SECONDS = 10.0
"""Longest single ``wait`` action; longer pauses need several actions."""

PRINTABLE_ASCII_PATTERN = r"^[\x20-\x7e]+$"
"""Text a ``type`` action may contain: space through tilde, nothing else (no tab/newline)."""

Coordinate = Annotated[int, Field(strict=True, ge=0)]
"""A pixel index (origin top-left); the upper bound is the live display size."""

Point = tuple[Coordinate, Coordinate]
"""An ``[x, y]`` pair on the wire."""

WheelClicks = Annotated[int, Field(strict=True)]


def _check_key_name(name: str) -> str:
    if name not in KEY_NAMES:
        raise ValueError(f"unknown key name {name!r}")
    return name


KeyName = Annotated[str, Field(strict=True), AfterValidator(_check_key_name)]


class MoveAction(StrictModel):
    """Move the pointer to ``(x, y)`` without pressing anything."""

    type: Literal["move"] = "move"
    x: Coordinate
    y: Coordinate


class ClickAction(StrictModel):
    """Move to ``(x, y)`` and press ``button`` ``count`` times (2 = double click)."""

    type: Literal["click"] = "click"
    x: Coordinate
    y: Coordinate
    button: MouseButton
    count: Annotated[int, Field(strict=True, ge=1, le=MAX_CLICK_COUNT)]


class DragAction(StrictModel):
    """Press ``button`` at the first point, move through the others, release at the last."""

    type: Literal["drag"] = "drag"
    path: Annotated[tuple[Point, ...], Field(min_length=2)]
    button: MouseButton


class ScrollAction(StrictModel):
    """Turn the wheel at ``(x, y)``: ``dy`` > 0 scrolls up, ``dx`` > 0 scrolls right.

    Amounts are wheel clicks; at least one of them is non-zero.
    """

    type: Literal["scroll"] = "scroll"
    x: Coordinate
    y: Coordinate
    dx: WheelClicks
    dy: WheelClicks

    @model_validator(mode="after")
    def _moves(self) -> ScrollAction:
        if self.dx == 0 and self.dy == 0:
            raise ValueError("dx and dy are both 0")
        return self


class TypeAction(StrictModel):
    """Type ``text`` character by character (printable ASCII only; Enter is a key action)."""

    type: Literal["type"] = "type"
    text: Annotated[str, Field(strict=True, min_length=1, pattern=PRINTABLE_ASCII_PATTERN)]


class KeyAction(StrictModel):
    """Press ``keys`` together as one chord, then release them in reverse order."""

    type: Literal["key"] = "key"
    keys: Annotated[tuple[KeyName, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _distinct(self) -> KeyAction:
        if len(set(self.keys)) != len(self.keys):
            raise ValueError("a key appears more than once in the chord")
        return self


class WaitAction(StrictModel):
    """Do nothing for ``seconds`` (0 < seconds <= 10)."""

    type: Literal["wait"] = "wait"
    seconds: Annotated[float, Field(strict=True, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)]


class MouseDownAction(StrictModel):
    """Move to ``(x, y)`` and press ``button`` without releasing it (native tool mode only).

    The button stays held after the batch ends, until a ``mouse_up`` releases it; the broker
    releases every held button before it saves the drawing and when the session ends.
    """

    type: Literal["mouse_down"] = "mouse_down"
    x: Coordinate
    y: Coordinate
    button: MouseButton


class MouseUpAction(StrictModel):
    """Move to ``(x, y)`` and release ``button`` (native tool mode only)."""

    type: Literal["mouse_up"] = "mouse_up"
    x: Coordinate
    y: Coordinate
    button: MouseButton


class HoldKeyAction(StrictModel):
    """Press ``keys`` as one chord, keep them down for ``seconds``, release in reverse order.

    Native tool mode only; 0 < seconds <= 10.
    """

    type: Literal["hold_key"] = "hold_key"
    keys: Annotated[tuple[KeyName, ...], Field(min_length=1)]
    seconds: Annotated[float, Field(strict=True, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)]

    @model_validator(mode="after")
    def _distinct(self) -> HoldKeyAction:
        if len(set(self.keys)) != len(self.keys):
            raise ValueError("a key appears more than once in the chord")
        return self


class DoneAction(StrictModel):
    """The model declares the task finished; allowed only as the last action of a batch."""

    type: Literal["done"] = "done"


Action = Annotated[
    MoveAction
    | ClickAction
    | DragAction
    | ScrollAction
    | TypeAction
    | KeyAction
    | WaitAction
    | DoneAction
    | MouseDownAction
    | MouseUpAction
    | HoldKeyAction,
    Field(discriminator="type"),
]
"""Any one action, selected by its ``type``."""

ACTION_MODELS: dict[str, type[StrictModel]] = {
    "move": MoveAction,
    "click": ClickAction,
    "drag": DragAction,
    "scroll": ScrollAction,
    "type": TypeAction,
    "key": KeyAction,
    "wait": WaitAction,
    "done": DoneAction,
    "mouse_down": MouseDownAction,
    "mouse_up": MouseUpAction,
    "hold_key": HoldKeyAction,
}
"""Action type name to model: the function-mode types in the order the schema and messages
list them, then the native-only types."""

NATIVE_ONLY_ACTION_TYPES: tuple[str, ...] = ("mouse_down", "mouse_up", "hold_key")
"""Types only a native computer tool produces (held buttons and keys). The ``computer_action``
schema does not advertise them and :func:`~autocad_bench.actions.validation.validate_batch`
accepts them only with ``native=True``."""

ALL_ACTION_TYPES: tuple[str, ...] = tuple(ACTION_MODELS)
"""Every type the broker can perform (function-mode types, then native-only ones)."""

ACTION_TYPES: tuple[str, ...] = tuple(t for t in ACTION_MODELS if t not in NATIVE_ONLY_ACTION_TYPES)
"""The function-mode types: exactly what the ``computer_action`` schema advertises."""

ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)
"""Parses one wire action (a JSON object) into its model; raises ``ValidationError``."""


def action_to_wire(action: Action) -> dict[str, object]:
    """The JSON object of ``action`` as it travels to the broker (points become lists)."""
    return action.model_dump(mode="json")
