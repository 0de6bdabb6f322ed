"""The action-grammar plugin contract for models that answer in text instead of tool calls.

Open-weight models served by vLLM, SGLang or Ollama often speak their own action language
(UI-TARS ``click(start_box='(x,y)')``, Qwen-VL ``computer_use`` tool calls, pyautogui code).
An :class:`ActionGrammar` turns one such reply into a :class:`ParsedTurn`: the wire
``{"actions": [...]}`` object of the ``computer_action`` tool, in desktop pixels, already
validated action by action with :data:`~autocad_bench.actions.models.ACTION_ADAPTER`.
Anything outside the grammar raises :class:`GrammarError`, which keeps the raw text so the
harness can record the model error and show it to the model.

Grammars are plugins: a distribution lists them under the entry-point group
:data:`GRAMMAR_GROUP`, and :func:`load_grammar` finds one by name.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import ClassVar

from pydantic import ValidationError

from autocad_bench.actions.keys import KEY_ALIASES, KEY_NAMES
from autocad_bench.actions.models import ACTION_ADAPTER, action_to_wire
from autocad_bench.errors import PluginError
from autocad_bench.providers.geometry import ScreenGeometry

GRAMMAR_GROUP = "autocad_bench.grammars"
"""Entry-point group under which distributions register :class:`ActionGrammar` classes."""

WireAction = dict[str, object]
"""One action as a JSON object, e.g. ``{"type": "click", "x": 5, "y": 7, ...}``."""


class CoordinateConvention(enum.StrEnum):
    """What the numbers in a model's coordinates mean."""

    ABSOLUTE = "absolute"
    """Desktop pixels, whatever image the model was shown."""
    RESIZED = "resized"
    """Pixels of the (possibly scaled) screenshot the model was shown."""
    NORMALIZED_1000 = "normalized_1000"
    """0..1000 across each axis of the screen, whatever its size."""


class GrammarError(ValueError):
    """A reply the grammar cannot turn into actions; ``raw`` is the whole reply text."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.message = message
        self.raw = raw


@dataclass(frozen=True, slots=True)
class ParsedTurn:
    """One parsed reply: the ``computer_action`` input in desktop pixels, and the model's text.

    ``action_input`` is ``{"actions": [...]}`` with every action valid on its own; the
    harness still runs ``validate_batch`` on it (budget, ``done`` position). ``finished``
    is true when the batch ends with ``{"type": "done"}``.
    """

    action_input: dict[str, list[WireAction]]
    thought: str = ""
    finished: bool = field(init=False)

    def __post_init__(self) -> None:
        actions = self.action_input["actions"]
        object.__setattr__(self, "finished", bool(actions) and actions[-1] == {"type": "done"})

    @property
    def actions(self) -> list[WireAction]:
        """The wire actions, in order."""
        return self.action_input["actions"]


def make_turn(actions: Sequence[WireAction], *, raw: str, geometry: ScreenGeometry, thought: str = "") -> ParsedTurn:
    """Validate ``actions`` (desktop pixels) and wrap them as a :class:`ParsedTurn`.

    Raises :class:`GrammarError` when there is no action, an action does not validate, a
    point lies outside the desktop, or ``done`` is not last.
    """
    if not actions:
        raise GrammarError("the reply contains no action", raw)
    wire: list[WireAction] = []
    for index, action in enumerate(actions):
        try:
            model = ACTION_ADAPTER.validate_python(action)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise GrammarError(f"action {index + 1} is invalid: {where}: {first['msg']}", raw) from None
        dumped = action_to_wire(model)
        for x, y in _points(dumped):
            assert isinstance(x, int) and isinstance(y, int)
            if not (0 <= x < geometry.desktop.width and 0 <= y < geometry.desktop.height):
                raise GrammarError(
                    f"action {index + 1} point ({x}, {y}) is outside the "
                    f"{geometry.desktop.width}x{geometry.desktop.height} desktop",
                    raw,
                )
        if dumped["type"] == "done" and index != len(actions) - 1:
            raise GrammarError("the finishing action must be the last action of the reply", raw)
        wire.append(dumped)
    return ParsedTurn({"actions": wire}, thought=thought.strip())


def _points(action: Mapping[str, object]) -> list[tuple[object, object]]:
    # Called on a validated action's wire form, so the points are integer pairs.
    if "x" in action and "y" in action:
        return [(action["x"], action["y"])]
    path = action.get("path")
    return [(point[0], point[1]) for point in path] if isinstance(path, list) else []


def to_desktop_point(
    x: object, y: object, convention: CoordinateConvention, geometry: ScreenGeometry, raw: str
) -> tuple[int, int]:
    """Map a model coordinate to a desktop pixel under ``convention``.

    The coordinate must be a finite number inside the convention's frame: the desktop
    (absolute), the shown image (resized) or ``0..1000`` inclusive (normalized); otherwise
    :class:`GrammarError`. Fractions round by the pixel-centre rule of
    :class:`~autocad_bench.providers.geometry.ScreenGeometry`.
    """
    for value in (x, y):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise GrammarError(f"coordinate {value!r} is not a finite number", raw)
    assert isinstance(x, int | float) and isinstance(y, int | float)
    if convention is CoordinateConvention.NORMALIZED_1000:
        if not (0 <= x <= 1000 and 0 <= y <= 1000):
            raise GrammarError(f"point ({x}, {y}) is outside the 0..1000 normalized range", raw)
        return geometry.from_normalized(x, y, 1000)
    frame = geometry.desktop if convention is CoordinateConvention.ABSOLUTE else geometry.shown
    if not (0 <= x < frame.width and 0 <= y < frame.height):
        what = "screen" if convention is CoordinateConvention.ABSOLUTE else "screenshot"
        raise GrammarError(f"point ({x}, {y}) is outside the {frame.width}x{frame.height} {what}", raw)
    if convention is CoordinateConvention.ABSOLUTE:
        return ScreenGeometry.identity(geometry.desktop).to_desktop(x, y)
    return geometry.to_desktop(x, y)


_EXTRA_KEY_NAMES: dict[str, str] = {
    # X11 keysyms (xdotool), lowercased.
    "control_l": "ctrlleft",
    "control_r": "ctrlright",
    "shift_l": "shiftleft",
    "shift_r": "shiftright",
    "alt_l": "altleft",
    "alt_r": "altright",
    "super_l": "winleft",
    "super_r": "winright",
    "meta_l": "winleft",
    "meta_r": "winright",
    "return": "enter",
    "kp_enter": "enter",
    "escape": "esc",
    "next": "pagedown",
    "prior": "pageup",
    "caps_lock": "capslock",
    "num_lock": "numlock",
    "scroll_lock": "scrolllock",
    "print_screen": "printscreen",
    "iso_left_tab": "tab",
    "kp_add": "add",
    "kp_subtract": "subtract",
    "kp_multiply": "multiply",
    "kp_divide": "divide",
    "kp_decimal": "decimal",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "apostrophe": "'",
    "quotedbl": '"',
    "grave": "`",
    "equal": "=",
    "bracketleft": "[",
    "bracketright": "]",
    "braceleft": "{",
    "braceright": "}",
    "parenleft": "(",
    "parenright": ")",
    "underscore": "_",
    "asterisk": "*",
    "exclam": "!",
    "at": "@",
    "numbersign": "#",
    "dollar": "$",
    "percent": "%",
    "ampersand": "&",
    "colon": ":",
    "question": "?",
    "less": "<",
    "greater": ">",
    "bar": "|",
    "asciitilde": "~",
    "asciicircum": "^",
    # Other spellings seen in model output.
    "ctrl_l": "ctrlleft",
    "ctrl_r": "ctrlright",
    "delete_key": "delete",
    "back_space": "backspace",
    "pgdown": "pagedown",
    "page down": "pagedown",
    "page up": "pageup",
    "arrow_up": "up",
    "arrow_down": "down",
    "arrow_left": "left",
    "arrow_right": "right",
    **{f"kp_{digit}": f"num{digit}" for digit in range(10)},
}


def map_key(name: object, raw: str) -> str:
    """The ``KEY_NAMES`` spelling of a grammar's key name (case-insensitive).

    Accepts the whitelist itself, its :data:`~autocad_bench.actions.keys.KEY_ALIASES` and
    X11/xdotool keysym names (``Control_L``, ``Return``, ``Next``...). An uppercase single
    letter means that letter's key. Anything else raises :class:`GrammarError`.
    """
    if not isinstance(name, str) or not name.strip():
        raise GrammarError(f"key name {name!r} is not a non-empty string", raw)
    text = name.strip()
    lower = text.lower() if len(text) > 1 or text.isalpha() else text
    for candidate in (_EXTRA_KEY_NAMES.get(lower), lower, KEY_ALIASES.get(lower)):
        if candidate is not None and candidate in KEY_NAMES:
            return candidate
    raise GrammarError(f"unknown key name {name!r}", raw)


class ActionGrammar(ABC):
    """Parses one model's reply text into desktop actions; one subclass per action language.

    ``convention`` says how coordinates are read; a subclass declares its default and may
    be constructed with another (for example a model family that changed conventions).
    Subclasses are registered as entry points in :data:`GRAMMAR_GROUP`.
    """

    name: ClassVar[str]
    """The grammar's entry-point name."""
    default_convention: ClassVar[CoordinateConvention]

    def __init__(self, convention: CoordinateConvention | None = None) -> None:
        self.convention = convention if convention is not None else self.default_convention

    @abstractmethod
    def instructions(self, geometry: ScreenGeometry) -> str:
        """System-prompt text teaching the model this grammar for a screen of ``geometry``."""

    @abstractmethod
    def parse(self, text: str, geometry: ScreenGeometry) -> ParsedTurn:
        """The actions of one reply, in desktop pixels; raises :class:`GrammarError` only."""

    def point(self, x: object, y: object, geometry: ScreenGeometry, raw: str) -> tuple[int, int]:
        """A model coordinate mapped to the desktop under this grammar's convention."""
        return to_desktop_point(x, y, self.convention, geometry, raw)

    def coordinate_frame(self, geometry: ScreenGeometry) -> str:
        """Words for the prompt describing the frame the model's coordinates are in."""
        if self.convention is CoordinateConvention.NORMALIZED_1000:
            return "coordinates normalized to 0..1000 on both axes (0 = left/top edge, 1000 = right/bottom edge)"
        frame = geometry.desktop if self.convention is CoordinateConvention.ABSOLUTE else geometry.shown
        return (
            f"pixel coordinates of the {frame.width}x{frame.height} screenshot "
            f"(x from 0 to {frame.width - 1} left to right, y from 0 to {frame.height - 1} top to bottom)"
        )


def grammar_names() -> list[str]:
    """Names of the installed grammars, sorted."""
    return sorted({entry.name for entry in entry_points(group=GRAMMAR_GROUP)})


def load_grammar(name: str, convention: CoordinateConvention | None = None) -> ActionGrammar:
    """The installed grammar called ``name``, constructed with ``convention`` if given.

    Raises :class:`~autocad_bench.errors.PluginError` naming the installed grammars when
    ``name`` is unknown, or when the entry point is not an :class:`ActionGrammar` subclass.
    """
    matches = [entry for entry in entry_points(group=GRAMMAR_GROUP) if entry.name == name]
    if not matches:
        known = ", ".join(grammar_names()) or "none"
        raise PluginError(f"unknown action grammar {name!r} (installed: {known})")
    loaded = matches[0].load()
    if not (isinstance(loaded, type) and issubclass(loaded, ActionGrammar)):
        raise PluginError(f"action grammar {name!r} ({matches[0].value}) is not an ActionGrammar subclass")
    return loaded(convention)
