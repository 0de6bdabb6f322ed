"""Map one input of Anthropic's native ``computer`` tool onto the harness's wire actions.

In native mode an Anthropic model calls its built-in computer-use tool (``type``
``computer_20250124`` or ``computer_20251124``, ``name`` ``"computer"``), or the members of
the ``computer_toolset_20260801`` toolset (one tool per action, see :func:`map_toolset_call`).
Each ``tool_use`` input names one ``action`` plus that action's fields; :func:`map_computer_action` checks the
fields and answers with a :class:`NativeStep`: wire actions for ``{"actions": [...]}``, "just
take a screenshot", or "the broker cannot do this" with a message for the model. Malformed
input raises :class:`NativeActionError`, whose message is also meant for the model.

Sources for every name used here (all checked on 2026-12-02):

- The pinned SDK, ``anthropic`` 2.14.0:
  ``types/beta/beta_tool_computer_use_20250124_param.py`` and
  ``beta_tool_computer_use_20251124_param.py`` (the ``tools[]`` entry: ``name``, ``type``,
  ``display_width_px``, ``display_height_px``; ``enable_zoom`` only on 20251124);
  ``types/anthropic_beta_param.py`` (beta flags ``computer-use-2025-01-24`` and
  ``computer-use-2025-11-24``); ``types/beta/beta_computer_member_name.py`` (the 17 action
  names) and ``beta_computer_*_input.py`` (per-action fields: ``coordinate``,
  ``start_coordinate``, ``text``, ``repeat``, ``scroll_direction``, ``scroll_amount``,
  ``duration``, ``region``). Those input models belong to the SDK's
  ``computer_toolset_20260801``, whose members carry the same names and fields as the
  single tool's actions; the SDK types the single tool's input only as a plain dict.
- Anthropic's docs, https://platform.claude.com/docs/en/agents-and-tools/tool-use/computer-use-tool
  (which beta flag goes with which tool version).
- Anthropic's reference implementation, ``anthropics/claude-quickstarts``
  ``computer-use-demo/computer_use_demo/tools/computer.py``: the action sets per version
  (20250124 adds ``left_mouse_down``, ``left_mouse_up``, ``scroll``, ``hold_key``, ``wait`` and
  ``triple_click`` to 20241022; 20251124 adds ``zoom``), scroll directions as wheel buttons,
  and ``key`` as an alternative name for click modifiers.

``left_mouse_down``/``left_mouse_up`` become the native-only broker actions ``mouse_down``/
``mouse_up`` (at ``coordinate`` if given, else at the current pointer position the session
passes in; a button may stay held between turns, the broker releases it before saving).
Clicks and ``scroll`` without a ``coordinate`` act at that current position too, as the
SDK's ``BetaComputerLeftClickInput``/``BetaComputerScrollInput`` describe. ``hold_key``
becomes ``hold_key`` (one chord, ``duration`` 0-10 s). ``cursor_position`` and ``zoom`` are
answered by the session without broker input (:meth:`NativeStep.cursor` and
:meth:`NativeStep.zoom_region`).

Not mapped, answered as :meth:`NativeStep.unsupported`: clicks, scrolls and
``left_mouse_down``/``up`` without a ``coordinate`` while the pointer position is unknown,
and modifier keys held during a click, drag or scroll (a ``key`` action presses and
releases its chord at once, so it cannot wrap a click).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

from anthropic.types.beta import (
    BetaComputerToolset20260801Param,
    BetaComputerToolsetConfigsParam,
    BetaToolComputerUse20250124Param,
    BetaToolComputerUse20251124Param,
)
from anthropic.types.beta.beta_computer_member_name import BETA_COMPUTER_MEMBER_NAME_VALUES
from pydantic import ValidationError

from autocad_bench.actions.models import (
    MAX_WAIT_SECONDS,
    Action,
    ClickAction,
    DragAction,
    HoldKeyAction,
    KeyAction,
    MouseButton,
    MouseDownAction,
    MouseUpAction,
    MoveAction,
    ScrollAction,
    WaitAction,
    action_to_wire,
)
from autocad_bench.actions.native import is_strict_int as _is_int
from autocad_bench.actions.native import json_kind as _kind
from autocad_bench.actions.native import show_value, typed_actions
from autocad_bench.actions.xdotool import parse_key_sequence

TOOL_NAME: Literal["computer"] = "computer"
"""The ``name`` both tool versions require (a ``Literal`` in the SDK param types)."""

BETA_HEADERS: dict[str, str] = {
    "computer_20250124": "computer-use-2025-01-24",
    "computer_20251124": "computer-use-2025-11-24",
}
"""Tool version to the ``anthropic-beta`` flag a request using it must send.

The toolset (:data:`TOOLSET_VERSION`) has no entry: the pinned SDK's ``AnthropicBetaParam``
names no flag for it and its docstrings ask for none (it is also a non-beta param type,
``anthropic.types.ComputerToolset20260801Param``)."""

TOOLSET_VERSION: Literal["computer_toolset_20260801"] = "computer_toolset_20260801"
"""The computer toolset: one ``tools[]`` entry (no ``name``, no display size: the size is the
screenshot's) whose members are separate tools, one per action. A member's ``tool_use`` block
carries the action as its ``name`` (and ``toolset_name`` ``"computer"``) and the action's fields
as its ``input``, without an ``action`` key; see :func:`map_toolset_call`."""

TOOL_VERSIONS: tuple[str, ...] = (*BETA_HEADERS, TOOLSET_VERSION)
"""Every tool ``type`` the native session can declare."""

MAX_KEY_REPEAT = 100
"""Largest ``repeat`` of a ``key`` action; a bound so one call cannot flood the batch."""

MAX_NATIVE_WAIT_SECONDS = 100.0
"""Longest ``wait`` accepted (the reference implementation's bound); split into 10 s waits."""

MAX_SCROLL_AMOUNT = 100
"""Largest ``scroll_amount`` in wheel clicks; far beyond any useful single scroll."""

StepKind: TypeAlias = Literal["actions", "screenshot_only", "unsupported", "cursor_position", "zoom"]

Region: TypeAlias = tuple[int, int, int, int]
"""``(x0, y0, x1, y1)`` with ``x0 < x1`` and ``y0 < y1``."""


class NativeActionError(ValueError):
    """A ``computer`` tool input that is malformed: wrong or missing fields, bad values.

    The message names the field and what it should be, and goes back to the model as the
    text of an ``is_error`` tool result.
    """


@dataclass(frozen=True, slots=True)
class NativeStep:
    """What one native ``computer`` call asks the harness to do.

    ``kind`` is ``"actions"`` (send ``actions`` to the broker, then screenshot),
    ``"screenshot_only"`` (no input; answer with a fresh frame), ``"cursor_position"``
    (answer with the current pointer position), ``"zoom"`` (answer with the
    next frame cropped to ``region``, in screenshot coordinates, not yet checked against
    the screenshot size) or ``"unsupported"`` (the input is well-formed but the broker
    cannot perform it; ``message`` explains why and goes back to the model as an
    ``is_error`` tool result).
    """

    kind: StepKind
    actions: list[dict[str, object]] = field(default_factory=list)
    message: str | None = None
    region: Region | None = None

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
    def cursor(cls) -> NativeStep:
        """A step that reports the pointer position (no input)."""
        return cls("cursor_position")

    @classmethod
    def zoom_region(cls, region: Region) -> NativeStep:
        """A step that answers with the next frame cropped to ``region`` (screenshot pixels)."""
        return cls("zoom", region=region)

    @classmethod
    def unsupported(cls, message: str) -> NativeStep:
        """A step the broker cannot perform; ``message`` is shown to the model."""
        return cls("unsupported", message=message)

    def tool_input(self) -> dict[str, object]:
        """The ``{"actions": [...]}`` object for ``validate_batch`` (only for ``"actions"``)."""
        if self.kind != "actions":
            raise ValueError(f"a {self.kind} step has no actions")
        return {"actions": list(self.actions)}


ToDesktop: TypeAlias = Callable[[int, int], tuple[int, int]]

_CLICKS: dict[str, tuple[MouseButton, int]] = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}

# Fields each action accepts besides "action"; required ones are listed in _REQUIRED.
# ``key`` on clicks is the reference implementation's spelling of the modifier field.
_FIELDS: dict[str, frozenset[str]] = {
    "key": frozenset({"text", "repeat"}),
    "hold_key": frozenset({"text", "duration"}),
    "type": frozenset({"text"}),
    "cursor_position": frozenset(),
    "mouse_move": frozenset({"coordinate"}),
    "left_mouse_down": frozenset({"coordinate"}),
    "left_mouse_up": frozenset({"coordinate"}),
    **{name: frozenset({"coordinate", "text", "key"}) for name in _CLICKS},
    "left_click_drag": frozenset({"start_coordinate", "coordinate", "text"}),
    "scroll": frozenset({"coordinate", "scroll_direction", "scroll_amount", "text"}),
    "wait": frozenset({"duration"}),
    "screenshot": frozenset(),
    "zoom": frozenset({"region"}),
}

_REQUIRED: dict[str, frozenset[str]] = {
    "key": frozenset({"text"}),
    "hold_key": frozenset({"text", "duration"}),
    "type": frozenset({"text"}),
    "mouse_move": frozenset({"coordinate"}),
    "left_click_drag": frozenset({"start_coordinate", "coordinate"}),
    "scroll": frozenset({"scroll_direction", "scroll_amount"}),
    "wait": frozenset({"duration"}),
    "zoom": frozenset({"region"}),
}

ACTIONS_BY_VERSION: dict[str, tuple[str, ...]] = {
    "computer_20250124": (
        "key", "hold_key", "type", "cursor_position", "mouse_move", "left_mouse_down",
        "left_mouse_up", "left_click", "left_click_drag", "right_click", "middle_click",
        "double_click", "triple_click", "scroll", "wait", "screenshot",
    ),
    "computer_20251124": (
        "key", "hold_key", "type", "cursor_position", "mouse_move", "left_mouse_down",
        "left_mouse_up", "left_click", "left_click_drag", "right_click", "middle_click",
        "double_click", "triple_click", "scroll", "wait", "screenshot", "zoom",
    ),
    TOOLSET_VERSION: (
        "key", "hold_key", "type", "cursor_position", "mouse_move", "left_mouse_down",
        "left_mouse_up", "left_click", "left_click_drag", "right_click", "middle_click",
        "double_click", "triple_click", "scroll", "wait", "screenshot", "zoom",
    ),
}  # fmt: skip
"""Every action name the model may send with each tool version (for the toolset: the member
tool names the request enables)."""

_SCROLL_DIRECTIONS: dict[str, tuple[int, int]] = {
    # (dx, dy) per wheel click; the wire's dy > 0 scrolls up and dx > 0 scrolls right.
    "up": (0, 1),
    "down": (0, -1),
    "left": (-1, 0),
    "right": (1, 0),
}


def map_computer_action(
    tool_input: Mapping[str, object],
    version: str,
    to_desktop: ToDesktop,
    pointer: tuple[int, int] | None = None,
) -> NativeStep:
    """Map one ``computer`` tool input to the step the harness should take.

    ``version`` is the tool ``type`` the request declared (one of :data:`TOOL_VERSIONS`).
    Coordinates arrive in the screenshot space the model sees and are converted with
    ``to_desktop(x, y)``, which returns desktop pixels; a :class:`ValueError` it raises
    (for a point outside the screenshot, say) becomes a :class:`NativeActionError`.
    ``pointer`` is the current pointer position, in desktop pixels (None while unknown);
    clicks, ``scroll`` and ``left_mouse_down``/``left_mouse_up`` without a coordinate act there.

    Returns a :class:`NativeStep`. Raises :class:`NativeActionError` for a malformed input:
    not an object, an unknown action, missing, extra or mistyped fields, out-of-range
    values, unknown key names or non-ASCII text. Raises :class:`ValueError` (not
    :class:`NativeActionError`) for an unknown ``version``: that is the harness's bug.
    """
    if version not in ACTIONS_BY_VERSION:
        raise ValueError(f"unknown computer tool version {version!r}; expected one of {sorted(ACTIONS_BY_VERSION)}")
    if not isinstance(tool_input, Mapping):
        raise NativeActionError(f"the computer tool input must be an object, got {_kind(tool_input)}")
    action = tool_input.get("action")
    allowed = ACTIONS_BY_VERSION[version]
    if not isinstance(action, str) or action not in allowed:
        shown = "missing" if action is None else repr(action) if isinstance(action, str) else _kind(action)
        raise NativeActionError(f"action is {shown}; it must be one of: {', '.join(allowed)}")
    fields = _check_fields(action, tool_input)
    if action == "screenshot":
        return NativeStep.screenshot()
    if action == "cursor_position":
        return NativeStep.cursor()
    if action == "zoom":
        return NativeStep.zoom_region(_region(fields["region"]))
    try:
        return _map(action, fields, to_desktop, pointer)
    except ValidationError as error:
        # The checks above should make this unreachable; keep the promise of one error type.
        raise NativeActionError(f"{action}: {error.errors()[0]['msg']}") from None


def _check_fields(action: str, tool_input: Mapping[str, object]) -> dict[str, object]:
    # A field sent as null counts as absent: the SDK declares the optional ones Optional.
    given = {str(key): value for key, value in tool_input.items() if key != "action" and value is not None}
    accepted = _FIELDS[action]
    extra = sorted(name for name in given if name not in accepted)
    if extra:
        takes = ", ".join(sorted(accepted)) if accepted else "no other fields"
        raise NativeActionError(
            f"{action} does not take {', '.join(repr(name) for name in extra)}; it accepts: {takes}"
        )
    missing = sorted(_REQUIRED.get(action, frozenset()) - set(given))
    if missing:
        raise NativeActionError(f"{action} needs {', '.join(repr(name) for name in missing)}")
    return given


def _map(
    action: str, fields: dict[str, object], to_desktop: ToDesktop, pointer: tuple[int, int] | None
) -> NativeStep:
    if action == "key":
        return _key(fields)
    if action == "hold_key":
        return _hold_key(fields)
    if action in ("left_mouse_down", "left_mouse_up"):
        if "coordinate" in fields:
            x, y = _point(fields["coordinate"], "coordinate", to_desktop)
        elif pointer is not None:
            x, y = pointer
        else:
            return NativeStep.unsupported(
                f"{action} without a coordinate acts at the current pointer position, which is not "
                "known yet; move the pointer with mouse_move first or send the coordinate"
            )
        if action == "left_mouse_down":
            return _run(MouseDownAction(x=x, y=y, button="left"))
        return _run(MouseUpAction(x=x, y=y, button="left"))
    if action == "type":
        return NativeStep.run(_type(_text(fields["text"], "text")))
    if action == "wait":
        return _wait(fields["duration"])
    if action == "mouse_move":
        x, y = _point(fields["coordinate"], "coordinate", to_desktop)
        return _run(MoveAction(x=x, y=y))
    if action in _CLICKS:
        return _click(action, fields, to_desktop, pointer)
    if action == "left_click_drag":
        if "text" in fields:
            return _modifiers_unsupported(action, fields["text"], "text")
        start = _point(fields["start_coordinate"], "start_coordinate", to_desktop)
        end = _point(fields["coordinate"], "coordinate", to_desktop)
        return _run(DragAction(path=(start, end), button="left"))
    if action == "scroll":
        return _scroll(fields, to_desktop, pointer)
    raise AssertionError(f"no mapping for {action}")  # pragma: no cover - tables out of sync


def _run(*actions: Action) -> NativeStep:
    return NativeStep.run([action_to_wire(action) for action in actions])


def _key(fields: dict[str, object]) -> NativeStep:
    text = _text(fields["text"], "text")
    repeat = fields.get("repeat", 1)
    if not _is_int(repeat):
        raise NativeActionError(f"repeat must be an integer, got {_kind(repeat)}")
    assert isinstance(repeat, int)
    if not 1 <= repeat <= MAX_KEY_REPEAT:
        raise NativeActionError(f"repeat must be between 1 and {MAX_KEY_REPEAT}, got {repeat}")
    try:
        chords = parse_key_sequence(text)
    except ValueError as error:
        raise NativeActionError(f"text: {error}") from None
    return _run(*(KeyAction(keys=chord) for _ in range(repeat) for chord in chords))


def _hold_key(fields: dict[str, object]) -> NativeStep:
    text = _text(fields["text"], "text")
    duration = fields["duration"]
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        raise NativeActionError(f"duration must be a number of seconds, got {_kind(duration)}")
    if not math.isfinite(duration) or not 0 < duration <= MAX_WAIT_SECONDS:
        raise NativeActionError(
            f"duration must be more than 0 and at most {MAX_WAIT_SECONDS:g} seconds, got {duration!r}"
        )
    try:
        chords = parse_key_sequence(text)
    except ValueError as error:
        raise NativeActionError(f"text: {error}") from None
    if len(chords) != 1:
        raise NativeActionError(f"text must name one key or one combo such as 'shift' or 'ctrl+shift', got {text!r}")
    return _run(HoldKeyAction(keys=chords[0], seconds=float(duration)))


def _region(value: object) -> Region:
    shape = "region must be [x0, y0, x1, y1]: four non-negative integers with x0 < x1 and y0 < y1"
    if not isinstance(value, list | tuple) or len(value) != 4:
        raise NativeActionError(f"{shape}, got {_show(value)}")
    items = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    if len(items) != 4:
        raise NativeActionError(f"{shape}, got {_show(value)}")
    x0, y0, x1, y1 = items
    if min(x0, y0) < 0 or x0 >= x1 or y0 >= y1:
        raise NativeActionError(f"{shape}, got {_show(value)}")
    return (x0, y0, x1, y1)


def _type(text: str) -> list[dict[str, object]]:
    try:
        return [action_to_wire(action) for action in typed_actions(text)]
    except ValueError as error:
        raise NativeActionError(f"text: {error}") from None


def _wait(duration: object) -> NativeStep:
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        raise NativeActionError(f"duration must be a number of seconds, got {_kind(duration)}")
    if not math.isfinite(duration) or not 0 <= duration <= MAX_NATIVE_WAIT_SECONDS:
        raise NativeActionError(f"duration must be between 0 and {MAX_NATIVE_WAIT_SECONDS:g} seconds, got {duration!r}")
    if duration == 0:
        # A zero wait is just "show me the screen now".
        return NativeStep.screenshot()
    # Whole 10 s waits, then the remainder; subtracting once keeps float residue out.
    full = math.ceil(duration / MAX_WAIT_SECONDS) - 1
    rest = float(duration) - full * MAX_WAIT_SECONDS
    seconds = [MAX_WAIT_SECONDS] * full + [rest]
    return _run(*(WaitAction(seconds=value) for value in seconds))


def _click(action: str, fields: dict[str, object], to_desktop: ToDesktop,
           pointer: tuple[int, int] | None) -> NativeStep:
    for name in ("text", "key"):
        if name in fields:
            return _modifiers_unsupported(action, fields[name], name)
    if "coordinate" in fields:
        x, y = _point(fields["coordinate"], "coordinate", to_desktop)
    elif pointer is not None:
        x, y = pointer
    else:
        return NativeStep.unsupported(
            f"{action} without a coordinate acts at the current pointer position, which is not "
            "known yet; send the coordinate to click at"
        )
    button, count = _CLICKS[action]
    return _run(ClickAction(x=x, y=y, button=button, count=count))


def _scroll(fields: dict[str, object], to_desktop: ToDesktop, pointer: tuple[int, int] | None) -> NativeStep:
    direction = fields["scroll_direction"]
    if not isinstance(direction, str) or direction not in _SCROLL_DIRECTIONS:
        raise NativeActionError(
            f"scroll_direction must be one of {', '.join(map(repr, _SCROLL_DIRECTIONS))}, got {_show(direction)}"
        )
    amount = fields["scroll_amount"]
    if not _is_int(amount):
        raise NativeActionError(f"scroll_amount must be an integer number of wheel clicks, got {_kind(amount)}")
    assert isinstance(amount, int)
    if not 1 <= amount <= MAX_SCROLL_AMOUNT:
        raise NativeActionError(f"scroll_amount must be between 1 and {MAX_SCROLL_AMOUNT}, got {amount}")
    if "text" in fields:
        return _modifiers_unsupported("scroll", fields["text"], "text")
    if "coordinate" in fields:
        x, y = _point(fields["coordinate"], "coordinate", to_desktop)
    elif pointer is not None:
        x, y = pointer
    else:
        return NativeStep.unsupported(
            "scroll without a coordinate acts at the current pointer position, which is not "
            "known yet; send the coordinate to scroll at"
        )
    unit_x, unit_y = _SCROLL_DIRECTIONS[direction]
    return _run(ScrollAction(x=x, y=y, dx=unit_x * amount, dy=unit_y * amount))


def _modifiers_unsupported(action: str, value: object, name: str) -> NativeStep:
    _text(value, name)  # a mistyped modifier is malformed input, not an unsupported request
    return NativeStep.unsupported(
        f"holding modifier keys ({name}={value!r}) during {action} is not available on this "
        f"desktop; send {action} without {name!r}"
    )


def _point(value: object, name: str, to_desktop: ToDesktop) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise NativeActionError(f"{name} must be an [x, y] pair of integers, got {_show(value)}")
    x, y = value
    if not (_is_int(x) and _is_int(y)):
        raise NativeActionError(f"{name} must be an [x, y] pair of integers, got {_show(value)}")
    assert isinstance(x, int) and isinstance(y, int)
    if x < 0 or y < 0:
        raise NativeActionError(f"{name} must not be negative, got {_show(value)}")
    try:
        return to_desktop(x, y)
    except ValueError as error:
        raise NativeActionError(f"{name} {_show(value)}: {error}") from None


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise NativeActionError(f"{name} must be a string, got {_kind(value)}")
    return value








def map_toolset_call(
    name: object,
    tool_input: object,
    to_desktop: ToDesktop,
    pointer: tuple[int, int] | None = None,
) -> NativeStep:
    """Map one ``tool_use`` of a ``computer_toolset_20260801`` member to a step.

    ``name`` is the block's ``name`` (the member, i.e. the action) and ``tool_input`` its
    ``input`` (the action's fields, the same names as the single tool's; no ``action`` key).
    The call is mapped as :func:`map_computer_action` maps ``{"action": name, **input}``.
    Raises :class:`NativeActionError` for a name that is not an enabled member, an input that
    is not an object or that carries an ``action`` key, and whatever that function rejects.
    """
    members = ACTIONS_BY_VERSION[TOOLSET_VERSION]
    if not isinstance(name, str) or name not in members:
        raise NativeActionError(
            f"unknown tool {_show(name)}; the computer toolset's tools are: {', '.join(members)}"
        )
    if not isinstance(tool_input, Mapping):
        raise NativeActionError(f"the {name} tool input must be an object, got {_kind(tool_input)}")
    if "action" in tool_input:
        raise NativeActionError(f"{name} does not take 'action'; the tool's name is the action")
    return map_computer_action({"action": name, **tool_input}, TOOLSET_VERSION, to_desktop, pointer)


def toolset_configs() -> BetaComputerToolsetConfigsParam:
    """Per-member ``configs`` of the toolset: every member the harness maps enabled, the rest disabled.

    Every member the SDK knows gets an explicit ``enabled`` (``defer_loading`` is left to its
    default), so a member added by a newer toolset schema is never offered by accident.
    """
    mapped = ACTIONS_BY_VERSION[TOOLSET_VERSION]
    configs: dict[str, dict[str, bool]] = {
        name: {"enabled": name in mapped} for name in BETA_COMPUTER_MEMBER_NAME_VALUES
    }
    return cast(BetaComputerToolsetConfigsParam, configs)


ComputerToolParam: TypeAlias = (
    BetaToolComputerUse20250124Param | BetaToolComputerUse20251124Param | BetaComputerToolset20260801Param
)


def tool_definition(
    version: str, display_width: int, display_height: int, enable_zoom: bool = False
) -> ComputerToolParam:
    """The ``tools[]`` entry declaring the native computer tool of ``version``.

    ``display_width``/``display_height`` are the size of the screenshots the model will see
    (the space its coordinates are in). ``enable_zoom`` exists only on ``computer_20251124``
    and is sent only when true. :data:`TOOLSET_VERSION` declares no size (checked all the
    same) and takes no ``enable_zoom``: its ``configs`` (:func:`toolset_configs`) enable
    ``zoom`` with every other mapped member. Raises :class:`ValueError` for an unknown
    version, non-positive dimensions, or ``enable_zoom`` with ``computer_20250124`` or the
    toolset. Remember to send the matching :data:`BETA_HEADERS` flag, if any.
    """
    for label, size in (("display_width", display_width), ("display_height", display_height)):
        if not _is_int(size) or size <= 0:
            raise ValueError(f"{label} must be a positive integer, got {size!r}")
    if version == TOOLSET_VERSION:
        if enable_zoom:
            raise ValueError("enable_zoom is a single-tool option; the toolset enables zoom through its configs")
        toolset: BetaComputerToolset20260801Param = {"type": TOOLSET_VERSION, "configs": toolset_configs()}
        return toolset
    if version == "computer_20250124":
        if enable_zoom:
            raise ValueError("enable_zoom needs computer_20251124; computer_20250124 has no zoom action")
        old: BetaToolComputerUse20250124Param = {
            "type": "computer_20250124",
            "name": TOOL_NAME,
            "display_width_px": display_width,
            "display_height_px": display_height,
        }
        return old
    if version == "computer_20251124":
        new: BetaToolComputerUse20251124Param = {
            "type": "computer_20251124",
            "name": TOOL_NAME,
            "display_width_px": display_width,
            "display_height_px": display_height,
        }
        if enable_zoom:
            new["enable_zoom"] = True
        return new
    raise ValueError(f"unknown computer tool version {version!r}; expected one of {sorted(TOOL_VERSIONS)}")


def _show(value: object) -> str:
    return show_value(value, 40)
