"""Map one action of OpenAI's native computer-use tool onto the harness's wire actions.

In native mode an OpenAI model answers with ``computer_call`` output items. Each names one
``action`` (the ``computer_use_preview`` tool) or a list ``actions`` (the GA ``computer``
tool); every action has a ``type`` and that type's fields. :func:`map_computer_action`
checks one action and answers with a :class:`NativeStep`: wire actions for
``{"actions": [...]}``, "just take a screenshot", or "the broker cannot do this" with a
message for the model. Malformed input raises :class:`NativeActionError`, whose message is
also meant for the model.

Sources for every name used here (the pinned SDK, ``openai`` 3.57.0, checked 2026-12-02),
all under ``openai/types/responses/``:

- ``computer_tool_param.py``: :class:`ComputerToolParam`, the GA tool, only
  ``{"type": "computer"}`` (no size fields: the shown size is implied by the screenshots);
- ``computer_use_preview_tool_param.py``: :class:`ComputerUsePreviewToolParam` with
  ``display_width``, ``display_height``, ``environment`` (Literal ``"windows"``, ``"mac"``,
  ``"linux"``, ``"ubuntu"``, ``"browser"``) and ``type: "computer_use_preview"``;
- ``response_computer_tool_call.py`` / ``computer_action.py`` / ``computer_action_list.py``:
  the action types ``click`` (``button`` one of ``left``, ``right``, ``wheel``, ``back``,
  ``forward``; ``x``, ``y``; optional held ``keys``), ``double_click`` (``x``, ``y``,
  ``keys``), ``drag`` (``path`` of ``{x, y}``, ``keys``), ``keypress`` (``keys``), ``move``
  (``x``, ``y``, ``keys``), ``screenshot``, ``scroll`` (``x``, ``y``, ``scroll_x``,
  ``scroll_y``, ``keys``), ``type`` (``text``) and ``wait`` (no fields).

Conversions (decisions of this module):

- ``scroll_x``/``scroll_y`` are pixel distances (OpenAI's reference CUA sample passes them to
  ``window.scrollBy``: positive ``scroll_y`` scrolls down, positive ``scroll_x`` right). The
  wire counts wheel clicks with ``dy > 0`` up, so ``dy = -clicks(scroll_y)`` and
  ``dx = clicks(scroll_x)``, where ``clicks(v)`` is ``round(|v| / SCROLL_PIXELS_PER_CLICK)``,
  at least 1 when ``v`` is non-zero, at most :data:`MAX_SCROLL_CLICKS`, with ``v``'s sign.
- ``wait`` has no duration: it waits :data:`WAIT_SECONDS`.
- ``keypress`` keys are mapped one by one, case-insensitively, with the xdotool key table
  (:func:`autocad_bench.actions.xdotool.key_name`) plus :data:`EXTRA_KEYS` for the names
  OpenAI's sample uses that xdotool spells differently (``ARROWUP``, ``OPTION``...).
- ``click`` with ``button`` ``wheel`` is a middle click.

Not mapped, answered as :meth:`NativeStep.unsupported`: the ``back`` and ``forward`` mouse
buttons (the broker has left, right and middle only) and keys held during a click, drag,
move or scroll (a ``key`` action presses and releases its chord at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from openai.types.responses import ComputerToolParam, ComputerUsePreviewToolParam
from pydantic import ValidationError

from autocad_bench.actions.models import (
    Action,
    ClickAction,
    DragAction,
    KeyAction,
    MouseButton,
    MoveAction,
    ScrollAction,
    WaitAction,
    action_to_wire,
)
from autocad_bench.actions.native import is_strict_int as _is_int
from autocad_bench.actions.native import json_kind as _kind
from autocad_bench.actions.native import show_value, typed_actions
from autocad_bench.actions.xdotool import key_name

ComputerVariant: TypeAlias = Literal["computer", "computer_use_preview"]
"""The two native tools: GA ``computer`` and ``computer_use_preview``."""

PreviewEnvironment: TypeAlias = Literal["windows", "mac", "linux", "ubuntu", "browser"]
"""``ComputerUsePreviewToolParam.environment`` as the SDK's Literal allows it."""

DEFAULT_ENVIRONMENT: PreviewEnvironment = "linux"
"""The desktop the preview tool is told about (LibreCAD on Linux)."""

SCROLL_PIXELS_PER_CLICK = 100
"""Pixels of ``scroll_x``/``scroll_y`` per wheel click (see the module docstring)."""

MAX_SCROLL_CLICKS = 50
"""Most wheel clicks one scroll turns into, per axis; bounds a runaway scroll distance."""

WAIT_SECONDS = 1.0
"""The length of a ``wait`` action, which carries no duration."""

MAX_DRAG_POINTS = 100
"""Most points of one drag path."""

EXTRA_KEYS: dict[str, str] = {
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "option": "alt",
    "meta": "win",
    "cmd": "ctrl",
    "super": "win",
    "del": "delete",
}
"""Lower-case OpenAI key names the xdotool table does not know, to broker key names."""

StepKind: TypeAlias = Literal["actions", "screenshot_only", "unsupported"]


class NativeActionError(ValueError):
    """A computer action that is malformed: wrong or missing fields, bad values.

    The message names the field and what it should be; it goes back to the model.
    """


@dataclass(frozen=True, slots=True)
class NativeStep:
    """What one native computer action asks the harness to do.

    ``kind`` is ``"actions"`` (send ``actions`` to the broker), ``"screenshot_only"`` (answer
    with a fresh frame) or ``"unsupported"`` (well-formed, but the broker cannot do it;
    ``message`` explains why and goes back to the model).
    """

    kind: StepKind
    actions: list[dict[str, object]] = field(default_factory=list)
    message: str | None = None

    @classmethod
    def run(cls, actions: list[dict[str, object]]) -> NativeStep:
        """A step that sends ``actions`` (wire dicts, at least one) to the broker."""
        if not actions:
            raise ValueError("a step that runs actions needs at least one")
        return cls("actions", actions=actions)

    @classmethod
    def screenshot(cls) -> NativeStep:
        """A step that only takes a fresh screenshot."""
        return cls("screenshot_only")

    @classmethod
    def unsupported(cls, message: str) -> NativeStep:
        """A step the broker cannot perform; ``message`` is shown to the model."""
        return cls("unsupported", message=message)


ToDesktop: TypeAlias = Callable[[int, int], tuple[int, int]]

_FIELDS: dict[str, frozenset[str]] = {
    "click": frozenset({"button", "x", "y", "keys"}),
    "double_click": frozenset({"x", "y", "keys"}),
    "drag": frozenset({"path", "keys"}),
    "keypress": frozenset({"keys"}),
    "move": frozenset({"x", "y", "keys"}),
    "screenshot": frozenset(),
    "scroll": frozenset({"x", "y", "scroll_x", "scroll_y", "keys"}),
    "type": frozenset({"text"}),
    "wait": frozenset(),
}
_REQUIRED: dict[str, frozenset[str]] = {
    "click": frozenset({"button", "x", "y"}),
    "double_click": frozenset({"x", "y"}),
    "drag": frozenset({"path"}),
    "keypress": frozenset({"keys"}),
    "move": frozenset({"x", "y"}),
    "scroll": frozenset({"x", "y", "scroll_x", "scroll_y"}),
    "type": frozenset({"text"}),
}
ACTION_TYPES: tuple[str, ...] = tuple(_FIELDS)
"""Every action ``type`` of the SDK's ``ComputerAction`` union."""

_BUTTONS: dict[str, MouseButton | None] = {
    "left": "left", "right": "right", "wheel": "middle", "back": None, "forward": None,
}


def map_computer_action(action: Mapping[str, object], to_desktop: ToDesktop) -> NativeStep:
    """Map one computer action (a JSON object with ``type``) to the step the harness should take.

    Coordinates are in the screenshot the model sees; ``to_desktop(x, y)`` returns desktop
    pixels, and a :class:`ValueError` it raises (a point outside the screenshot) becomes a
    :class:`NativeActionError`. Raises :class:`NativeActionError` for a malformed action:
    not an object, an unknown type, missing, extra or mistyped fields, unknown key names,
    text that cannot be typed, a zero scroll.
    """
    if not isinstance(action, Mapping):
        raise NativeActionError(f"a computer action must be an object, got {_kind(action)}")
    kind = action.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        shown = "missing" if kind is None else repr(kind) if isinstance(kind, str) else _kind(kind)
        raise NativeActionError(f"action type is {shown}; it must be one of: {', '.join(ACTION_TYPES)}")
    given = {str(k): v for k, v in action.items() if k != "type" and v is not None}
    extra = sorted(name for name in given if name not in _FIELDS[kind])
    if extra:
        takes = ", ".join(sorted(_FIELDS[kind])) or "no other fields"
        raise NativeActionError(f"{kind} does not take {', '.join(map(repr, extra))}; it accepts: {takes}")
    missing = sorted(_REQUIRED.get(kind, frozenset()) - set(given))
    if missing:
        raise NativeActionError(f"{kind} needs {', '.join(map(repr, missing))}")
    try:
        return _map(kind, given, to_desktop)
    except ValidationError as error:  # the checks above should make this unreachable
        raise NativeActionError(f"{kind}: {error.errors()[0]['msg']}") from None


def _map(kind: str, fields: dict[str, object], to_desktop: ToDesktop) -> NativeStep:
    if kind == "screenshot":
        return NativeStep.screenshot()
    if kind == "wait":
        return _run(WaitAction(seconds=WAIT_SECONDS))
    if kind == "keypress":
        return _run(KeyAction(keys=keypress_chord(fields["keys"])))
    if kind == "type":
        return NativeStep.run(_type(fields["text"]))
    held = _held_keys(kind, fields.get("keys"))
    if held is not None:
        return held
    if kind == "drag":
        return _run(DragAction(path=_path(fields["path"], to_desktop), button="left"))
    x, y = _point(fields["x"], fields["y"], to_desktop)
    if kind == "move":
        return _run(MoveAction(x=x, y=y))
    if kind == "double_click":
        return _run(ClickAction(x=x, y=y, button="left", count=2))
    if kind == "click":
        button = fields["button"]
        if not isinstance(button, str) or button not in _BUTTONS:
            raise NativeActionError(f"button must be one of {', '.join(map(repr, _BUTTONS))}, got {_show(button)}")
        mapped = _BUTTONS[button]
        if mapped is None:
            return NativeStep.unsupported(
                f"the {button!r} mouse button is not available on this desktop; use left, right or wheel")
        return _run(ClickAction(x=x, y=y, button=mapped, count=1))
    if kind == "scroll":
        dx = scroll_clicks(fields["scroll_x"], "scroll_x")
        dy = -scroll_clicks(fields["scroll_y"], "scroll_y")
        if dx == 0 and dy == 0:
            raise NativeActionError("scroll_x and scroll_y are both 0; give a non-zero scroll distance in pixels")
        return _run(ScrollAction(x=x, y=y, dx=dx, dy=dy))
    raise AssertionError(f"no mapping for {kind}")  # pragma: no cover - tables out of sync


def scroll_clicks(pixels: object, name: str) -> int:
    """Signed wheel clicks for a scroll distance in pixels (see the module docstring)."""
    if not _is_int(pixels):
        raise NativeActionError(f"{name} must be an integer number of pixels, got {_kind(pixels)}")
    assert isinstance(pixels, int)
    if pixels == 0:
        return 0
    clicks = min(MAX_SCROLL_CLICKS, max(1, round(abs(pixels) / SCROLL_PIXELS_PER_CLICK)))
    return clicks if pixels > 0 else -clicks


def keypress_chord(keys: object) -> tuple[str, ...]:
    """The broker chord of a ``keypress`` ``keys`` list such as ``["CTRL", "S"]``."""
    if not isinstance(keys, list | tuple) or not keys:
        raise NativeActionError(f"keys must be a non-empty array of key names, got {_show(keys)}")
    chord: list[str] = []
    for key in keys:
        if not isinstance(key, str):
            raise NativeActionError(f"keys must hold strings, got {_kind(key)}")
        token = key if len(key) == 1 else key.strip()
        try:
            name = EXTRA_KEYS.get(token.lower()) or key_name("space" if token == " " else token)
        except ValueError as error:
            raise NativeActionError(f"keys: {error}") from None
        if name in chord:
            raise NativeActionError(f"keys: {key!r} is pressed twice")
        chord.append(name)
    return tuple(chord)


def _held_keys(kind: str, keys: object) -> NativeStep | None:
    if keys is None or (isinstance(keys, list | tuple) and not keys):
        return None
    keypress_chord(keys)  # mistyped keys are malformed, not unsupported
    return NativeStep.unsupported(
        f"holding keys ({_show(keys)}) during {kind} is not available on this desktop; send {kind} without keys")


def _run(*actions: Action) -> NativeStep:
    return NativeStep.run([action_to_wire(action) for action in actions])


def _type(text: object) -> list[dict[str, object]]:
    if not isinstance(text, str):
        raise NativeActionError(f"text must be a string, got {_kind(text)}")
    try:
        return [action_to_wire(action) for action in typed_actions(text)]
    except ValueError as error:
        raise NativeActionError(f"text: {error}") from None


def _path(value: object, to_desktop: ToDesktop) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list | tuple) or not 2 <= len(value) <= MAX_DRAG_POINTS:
        raise NativeActionError(
            f"path must be an array of 2 to {MAX_DRAG_POINTS} points {{\"x\": ..., \"y\": ...}}, got {_show(value)}")
    points: list[tuple[int, int]] = []
    for point in value:
        if not isinstance(point, Mapping) or set(point) != {"x", "y"}:
            raise NativeActionError(f"every path point must be an object with x and y, got {_show(point)}")
        points.append(_point(point["x"], point["y"], to_desktop))
    return tuple(points)


def _point(x: object, y: object, to_desktop: ToDesktop) -> tuple[int, int]:
    if not (_is_int(x) and _is_int(y)):
        raise NativeActionError(f"x and y must be integers, got {_show(x)} and {_show(y)}")
    assert isinstance(x, int) and isinstance(y, int)
    if x < 0 or y < 0:
        raise NativeActionError(f"x and y must not be negative, got ({x}, {y})")
    try:
        return to_desktop(x, y)
    except ValueError as error:
        raise NativeActionError(f"point ({x}, {y}) {error}") from None








ComputerToolDefinition: TypeAlias = ComputerToolParam | ComputerUsePreviewToolParam


def tool_definition(variant: ComputerVariant, display_width: int, display_height: int,
                    environment: PreviewEnvironment = DEFAULT_ENVIRONMENT) -> ComputerToolDefinition:
    """The ``tools[]`` entry of ``variant``.

    The GA ``computer`` tool has no size fields (the SDK's :class:`ComputerToolParam` is only
    ``type``); ``display_width``/``display_height`` (the shown screenshot size) and
    ``environment`` go into :class:`ComputerUsePreviewToolParam`. Raises :class:`ValueError`
    for an unknown variant or non-positive sizes.
    """
    for label, size in (("display_width", display_width), ("display_height", display_height)):
        if not _is_int(size) or size <= 0:
            raise ValueError(f"{label} must be a positive integer, got {size!r}")
    if variant == "computer":
        ga: ComputerToolParam = {"type": "computer"}
        return ga
    if variant == "computer_use_preview":
        preview: ComputerUsePreviewToolParam = {
            "type": "computer_use_preview",
            "display_width": display_width,
            "display_height": display_height,
            "environment": environment,
        }
        return preview
    raise ValueError(f"unknown computer tool {variant!r}; expected 'computer' or 'computer_use_preview'")



def _show(value: object) -> str:
    return show_value(value, 60)
