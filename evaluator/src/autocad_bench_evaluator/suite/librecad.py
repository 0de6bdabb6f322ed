"""Reference solutions for LibreCAD 2.2 as action batches, written with a small builder.

A :class:`LibreCADScript` turns drafting steps (a command typed into the command line, a new
layer, a text, a hatch, a block) into the action batches of
:mod:`autocad_bench.actions`: one batch per step, the last batch ``done``. The builder only
emits what a model could send; the broker replays it with real input.

Facts the builder relies on (measured on LibreCAD 2.2 under Xvfb at 1920x1080 with the
broker's seeded layout; see ``docs/tasks.md``):

* the command line input ("Command:") is at :data:`COMMAND_INPUT`; it must be clicked before
  each command because two Escapes move the keyboard focus away from it;
* ``line``, ``circle``, ``circle3``, ``arc`` (three points), ``rect``, ``polyline`` (``c``
  closes), ``dh``/``dv``/``da`` (linear dimensions) take typed coordinates;
* ``dimradius``/``dimdiameter`` need the circle picked with the mouse, then take the typed
  dimension line location;
* ``text`` opens a dialog (text, height, OK) and then needs one pointer move over the drawing
  before the typed insertion point is accepted (LibreCAD only triggers with a valid preview
  position);
* ``hatch`` acts on the current selection (a click on the boundary) and opens a dialog with a
  "Solid Fill" check box; LibreCAD finds no hatch patterns here, so only solid fills work;
* layers and blocks have no commands: the Layer List "add" button opens a name/colour dialog
  and the new layer becomes the current one; the Block List "create block" button asks for a
  reference point and a name, then replaces the selection by an insert of the new block;
  "insert" places the block selected in the Block List at typed points.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from autocad_bench.actions import validate_batch
from autocad_bench.providers.models import DisplaySize
from autocad_bench_evaluator.suite.drawing import STANDARD_VIEW, View

DISPLAY = DisplaySize(width=1920, height=1080)
COMMAND_INPUT = (1750, 932)
"""The "Command:" input of the command line dock."""

CANVAS_HOVER = ((820, 500), (830, 510))
"""Two points inside the drawing area: moving the pointer there gives LibreCAD a preview position."""

# Layer List dock (tab "Layer List").
LAYER_TAB = (1874, 832)
LAYER_ADD_BUTTON = (1807, 661)
LAYER_FIRST_ROW = (1800, 691)
LAYER_ROW_PITCH = 21.1
LAYER_DIALOG_COLOR = (985, 477)
LAYER_DIALOG_OK = (952, 585)
LAYER_COLOR_CURRENT_Y = 479
"""The colour popup opens with the current entry ("Black / White") over the combo box."""
COLOR_ROW_PITCH = 25.05
LAYER_COLORS: tuple[str, ...] = (
    "Custom",
    "Red",
    "Dark Red",
    "Yellow",
    "Dark Yellow",
    "Green",
    "Dark Green",
    "Cyan",
    "Dark Cyan",
    "Blue",
    "Dark Blue",
    "Magenta",
    "Dark Magenta",
    "Black / White",
    "Gray",
    "Dark Gray",
    "Light Gray",
)
COLOR_ACI: dict[str, int] = {
    "Red": 1,
    "Yellow": 2,
    "Green": 3,
    "Cyan": 4,
    "Blue": 5,
    "Magenta": 6,
    "Black / White": 7,
}
"""The AutoCAD colour index LibreCAD writes for the pure colours of its colour box."""

# Text dialog.
TEXT_HEIGHT_FIELD = (887, 409)
TEXT_OK = (1091, 682)

# Hatch dialog.
HATCH_SOLID_CHECKBOX = (762, 409)
HATCH_OK = (1031, 608)

# Block List dock (tab "Block List").
BLOCK_TAB = (1787, 832)
BLOCK_CREATE_BUTTON = (1764, 654)
BLOCK_INSERT_BUTTON = (1862, 682)
BLOCK_FIRST_ROW = (1664, 708)
BLOCK_NAME_OK = (939, 500)

DIALOG_WAIT_S = 0.6
"""Pause after an action that opens a dialog or popup, before typing into it."""

Action = dict[str, object]


def fmt(value: float) -> str:
    """A coordinate as typed: at most 4 decimals, no trailing zeros, never ``-0``."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def point(x: float, y: float) -> str:
    """``x,y`` as typed into LibreCAD's (and AutoCAD's) command line."""
    return f"{fmt(x)},{fmt(y)}"


def click(xy: tuple[int, int], count: int = 1) -> Action:
    return {"type": "click", "x": int(xy[0]), "y": int(xy[1]), "button": "left", "count": count}


def move(xy: tuple[int, int]) -> Action:
    return {"type": "move", "x": int(xy[0]), "y": int(xy[1])}


def type_text(text: str) -> Action:
    return {"type": "type", "text": text}


def key(*keys: str) -> Action:
    return {"type": "key", "keys": list(keys)}


def wait(seconds: float) -> Action:
    return {"type": "wait", "seconds": seconds}


ENTER = key("enter")
ESCAPE = key("escape")


@dataclass
class LibreCADScript:
    """Builds the batches of one solution; ``view`` is the template's initial view."""

    view: View = STANDARD_VIEW
    batches: list[list[Action]] = field(default_factory=list)

    # -- primitives ----------------------------------------------------------------------

    def screen(self, x: float, y: float) -> tuple[int, int]:
        """Where the drawing point ``(x, y)`` is on screen (the view never changes in a solution)."""
        return self.view.librecad_screen(x, y)

    def step(self, *actions: Action) -> LibreCADScript:
        """Append one batch."""
        self.batches.append(list(actions))
        return self

    @staticmethod
    def entries(*entries: str) -> list[Action]:
        actions: list[Action] = []
        for entry in entries:
            actions += [type_text(entry), ENTER]
        return actions

    def command(self, *entries: str, finish: bool = True) -> LibreCADScript:
        """Click the command input, type every entry followed by Enter, then Escape twice."""
        actions = [click(COMMAND_INPUT), *self.entries(*entries)]
        if finish:
            actions += [ESCAPE, ESCAPE]
        return self.step(*actions)

    # -- drafting steps ------------------------------------------------------------------

    def lines(self, *points: tuple[float, float]) -> LibreCADScript:
        """A chain of LINE entities through ``points``."""
        return self.command("line", *(point(*p) for p in points))

    def circle(self, center: tuple[float, float], radius: float) -> LibreCADScript:
        return self.command("circle", point(*center), fmt(radius))

    def circle3(self, *points: tuple[float, float]) -> LibreCADScript:
        return self.command("circle3", *(point(*p) for p in points))

    def arc3(self, start: tuple[float, float], middle: tuple[float, float], end: tuple[float, float]) -> LibreCADScript:
        """An arc through three points."""
        return self.command("arc", point(*start), point(*middle), point(*end))

    def rectangle(self, corner: tuple[float, float], opposite: tuple[float, float]) -> LibreCADScript:
        """A closed 4-vertex polyline."""
        return self.command("rect", point(*corner), point(*opposite))

    def polyline(self, points: Sequence[tuple[float, float]], closed: bool = True) -> LibreCADScript:
        entries = [point(*p) for p in points]
        if closed:
            entries.append("c")
        return self.command("polyline", *entries)

    def dim_linear(
        self, kind: str, p1: tuple[float, float], p2: tuple[float, float], location: tuple[float, float]
    ) -> LibreCADScript:
        """``kind`` is ``dh`` (horizontal), ``dv`` (vertical) or ``da`` (aligned)."""
        return self.command(kind, point(*p1), point(*p2), point(*location))

    def dim_circle(self, kind: str, pick: tuple[float, float], location: tuple[float, float]) -> LibreCADScript:
        """``kind`` is ``dimradius`` or ``dimdiameter``; ``pick`` is a point on the circle."""
        return self.step(
            click(COMMAND_INPUT),
            *self.entries(kind),
            click(self.screen(*pick)),
            click(COMMAND_INPUT),
            *self.entries(point(*location)),
            ESCAPE,
            ESCAPE,
        )

    def text(self, content: str, height: float, insert: tuple[float, float]) -> LibreCADScript:
        """A single-line TEXT (left baseline alignment) through the text dialog."""
        return self.step(
            click(COMMAND_INPUT),
            *self.entries("text"),
            wait(DIALOG_WAIT_S),
            type_text(content),
            click(TEXT_HEIGHT_FIELD, count=3),
            type_text(fmt(height)),
            click(TEXT_OK),
            wait(DIALOG_WAIT_S),
            move(CANVAS_HOVER[0]),
            move(CANVAS_HOVER[1]),
            click(COMMAND_INPUT),
            *self.entries(point(*insert)),
            ESCAPE,
            ESCAPE,
        )

    def hatch_solid(self, pick: tuple[float, float]) -> LibreCADScript:
        """Select the boundary through the point ``pick`` on it and fill it solid."""
        return self.step(
            click(self.screen(*pick)),
            wait(0.3),
            click(COMMAND_INPUT),
            *self.entries("hatch"),
            wait(DIALOG_WAIT_S),
            click(HATCH_SOLID_CHECKBOX),
            click(HATCH_OK),
            wait(DIALOG_WAIT_S),
            ESCAPE,
            ESCAPE,
        )

    def add_layer(self, name: str, color: str = "Black / White") -> LibreCADScript:
        """Create layer ``name`` with one of :data:`LAYER_COLORS`; it becomes the current layer."""
        actions = [
            click(LAYER_TAB),
            click(LAYER_ADD_BUTTON),
            wait(DIALOG_WAIT_S),
            type_text(name),  # the name field opens with "noname" selected
        ]
        if color != "Black / White":
            index = LAYER_COLORS.index(color)
            current = LAYER_COLORS.index("Black / White")
            y = round(LAYER_COLOR_CURRENT_Y + (index - current) * COLOR_ROW_PITCH)
            # the popup must be gone before OK is clicked, or the click only closes the popup
            actions += [
                click(LAYER_DIALOG_COLOR),
                wait(DIALOG_WAIT_S),
                click((LAYER_DIALOG_COLOR[0] - 30, y)),
                wait(DIALOG_WAIT_S),
            ]
        actions += [click(LAYER_DIALOG_OK), wait(DIALOG_WAIT_S)]
        return self.step(*actions)

    def activate_layer(self, row: int) -> LibreCADScript:
        """Make the layer in row ``row`` (0-based, as listed) of the Layer List current."""
        y = round(LAYER_FIRST_ROW[1] + row * LAYER_ROW_PITCH)
        return self.step(click(LAYER_TAB), click((LAYER_FIRST_ROW[0], y)), wait(DIALOG_WAIT_S))

    def create_block(self, name: str, base: tuple[float, float]) -> LibreCADScript:
        """Select everything drawn so far and turn it into block ``name`` with base point ``base``."""
        return self.step(
            click(COMMAND_INPUT),
            *self.entries("sa"),
            click(BLOCK_TAB),
            click(BLOCK_CREATE_BUTTON),
            wait(DIALOG_WAIT_S),
            click(COMMAND_INPUT),
            *self.entries(point(*base)),
            wait(DIALOG_WAIT_S),
            type_text(name),
            click(BLOCK_NAME_OK),
            wait(DIALOG_WAIT_S),
        )

    def insert_block(self, row: int, points: Sequence[tuple[float, float]]) -> LibreCADScript:
        """Insert the block in row ``row`` of the Block List at each of ``points``."""
        y = round(BLOCK_FIRST_ROW[1] + row * LAYER_ROW_PITCH)
        return self.step(
            click(BLOCK_TAB),
            click((BLOCK_FIRST_ROW[0], y)),
            wait(0.3),
            click(BLOCK_INSERT_BUTTON),
            wait(DIALOG_WAIT_S),
            move(CANVAS_HOVER[0]),
            move(CANVAS_HOVER[1]),
            click(COMMAND_INPUT),
            *self.entries(*(point(*p) for p in points)),
            ESCAPE,
            ESCAPE,
        )

    # -- output --------------------------------------------------------------------------

    def finished(self) -> list[list[Action]]:
        """Every batch plus the final ``done`` batch."""
        return [*self.batches, [{"type": "done"}]]

    def to_jsonl(self) -> str:
        """One ``{"actions": [...]}`` object per line, ending with the ``done`` batch."""
        return "".join(json.dumps({"actions": batch}) + "\n" for batch in self.finished())


def noop_jsonl() -> str:
    """The do-nothing solution: a single ``done`` batch."""
    return json.dumps({"actions": [{"type": "done"}]}) + "\n"


def check_jsonl(text: str, display: DisplaySize = DISPLAY) -> list[str]:
    """Problems with a solution file: every line must pass ``validate_batch``; the last ends with done."""
    problems: list[str] = []
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ["the solution is empty"]
    for number, line in enumerate(lines, start=1):
        try:
            raw = json.loads(line)
        except ValueError as error:
            problems.append(f"line {number}: invalid JSON: {error}")
            continue
        result = validate_batch(raw, display, remaining_actions=10_000)
        if not hasattr(result, "actions"):
            problems.append(f"line {number}: {result}")
            continue
        ends = raw["actions"][-1].get("type") == "done"
        if ends != (number == len(lines)):
            problems.append(f"line {number}: done must end the last batch and only the last")
    return problems
