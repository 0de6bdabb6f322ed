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

Editing an existing drawing (same setup, each verified three times in a row and under CPU load):

* with no command active, a click on an entity's outline selects it and further clicks add
  to the selection; clicking a selected entity again deselects it, and a click on empty
  canvas starts a window selection that the next click completes. Clicks are spaced by
  :data:`SELECT_WAIT_S` so that two of them never form a double click;
* window selection by two clicks: from left to right it takes the entities entirely inside,
  from right to left (crossing) also those it crosses; it adds to the current selection;
* ``tn`` clears the selection. Escape on the canvas drops it as well;
* Delete only erases while the canvas has the keyboard focus (after ``sa`` the focus is in
  the command line and nothing happens), and the ``er`` command ignores the existing
  selection (it asks "Select to delete"). Edit > Delete selected (the menu at
  :data:`EDIT_MENU`) always works;
* ``mv``, ``ro``, ``sz`` and ``mi`` act on the selection and take typed points (move: base and
  target; rotate: centre, reference point and target point; scale: base point; mirror: two
  points of the axis). Each then opens a modal options dialog (Delete/Keep Original,
  Multiple Copies, OK) whose position is fixed; it remembers the last choice, so the radio
  button is clicked every time. The rotate dialog's angle field and the scale dialog's factor
  field ("Isotropic Scaling" is on by default) accept a typed value that overrides the points.
  A click sent before the dialog is on screen would reach the canvas underneath, hence
  :data:`MODIFY_DIALOG_WAIT_S` (1 s passed with four busy processes on the two cores);
* ``attr`` opens the Attributes dialog for the selection: its layer combo accepts the typed
  layer name (Qt's keyboard search) followed by Enter;
* after a modify command or ``attr`` the selection is empty: select again before the next edit.
"""

from __future__ import annotations

import itertools
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
HOVER_WAIT_S = 0.2
"""Pause after the hover moves, before the pointer leaves the canvas for the command input.

LibreCAD's text and block-insert actions create nothing for a typed point until the canvas has
seen the pointer (the preview position must be valid). Qt merges motion events that are queued
together, so when LibreCAD is not scheduled between the hover moves and the click's own move to
the command input (a loaded machine), only the last position, over the command dock, arrives and
the typed point is silently dropped (measured: 6 of 80 text replays beside a ``-n 4`` test run).
The pause ends only once LibreCAD and Xvfb are idle, so the canvas has handled the hover."""

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
TEXT_DIALOG_WAIT_S = 1.2
"""The text dialog is slower to take keyboard input and to close: with 0.6 s, one oracle in 957
validity runs on a loaded 2-core machine lost a text (measured); twice that has not failed."""

# Selection (no command active).
SELECT_WAIT_S = 0.5
"""Pause after each selection click: longer than the double-click interval (a double click on
an entity opens its properties dialog) and enough for LibreCAD to redraw the highlight."""

# Edit menu (focus-independent "Delete selected").
EDIT_MENU = (138, 10)
EDIT_DELETE_SELECTED = (201, 198)

# Options dialogs of the modify commands (centred over the main window at 1920x1080).
MODIFY_DIALOG_WAIT_S = 1.0
"""Pause between the last typed point of a modify command and the first click into its dialog."""
MOVE_DELETE_ORIGINAL = (783, 434)
MOVE_KEEP_ORIGINAL = (783, 458)
MOVE_OK = (1012, 566)
ROTATE_DELETE_ORIGINAL = (781, 413)
ROTATE_KEEP_ORIGINAL = (781, 437)
ROTATE_ANGLE_FIELD = (1075, 483)
ROTATE_OK = (1015, 587)
SCALE_DELETE_ORIGINAL = (769, 400)
SCALE_KEEP_ORIGINAL = (769, 426)
SCALE_FACTOR_FIELD = (984, 507)
SCALE_OK = (1024, 609)
MIRROR_DELETE_ORIGINAL = (804, 444)
MIRROR_KEEP_ORIGINAL = (804, 473)
MIRROR_OK = (992, 559)

# Attributes dialog (command ``attr``).
ATTRIBUTES_LAYER_COMBO = (1020, 384)
ATTRIBUTES_OK = (963, 586)

Action = dict[str, object]


def fmt(value: float) -> str:
    """A coordinate as typed: at most 4 decimals, no trailing zeros, never ``-0``."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def point(x: float, y: float) -> str:
    """``x,y`` as typed into LibreCAD's (and AutoCAD's) command line."""
    return f"{fmt(x)},{fmt(y)}"


def click(xy: tuple[int, int], count: int = 1) -> Action:
    """A left click on screen pixel ``xy``; ``count`` 2 or 3 makes it a double or triple click."""
    return {"type": "click", "x": int(xy[0]), "y": int(xy[1]), "button": "left", "count": count}


def move(xy: tuple[int, int]) -> Action:
    """A pointer move to screen pixel ``xy``, without a click."""
    return {"type": "move", "x": int(xy[0]), "y": int(xy[1])}


def type_text(text: str) -> Action:
    """Typing ``text`` (printable ASCII only: Enter and Tab are :func:`key` actions)."""
    return {"type": "type", "text": text}


def key(*keys: str) -> Action:
    """Pressing ``keys`` together as one chord, by PyAutoGUI name (``"enter"``, ``"escape"``)."""
    return {"type": "key", "keys": list(keys)}


def wait(seconds: float) -> Action:
    """A pause of ``seconds`` inside a batch (the batch check rejects non-positive or too long waits)."""
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
            wait(TEXT_DIALOG_WAIT_S),
            type_text(content),
            click(TEXT_HEIGHT_FIELD, count=3),
            type_text(fmt(height)),
            click(TEXT_OK),
            wait(TEXT_DIALOG_WAIT_S),
            move(CANVAS_HOVER[0]),
            move(CANVAS_HOVER[1]),
            wait(HOVER_WAIT_S),
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
            wait(HOVER_WAIT_S),
            click(COMMAND_INPUT),
            *self.entries(*(point(*p) for p in points)),
            ESCAPE,
            ESCAPE,
        )

    # -- editing an existing drawing -----------------------------------------------------

    def select_at(self, *points: tuple[float, float]) -> LibreCADScript:
        """Click the entity through each drawing point (no command active); clicks add up.

        A click on an already selected entity deselects it, and a click that misses every
        entity starts a window selection, so every point must lie on exactly one outline
        (away from other entities) and each entity must be picked once.
        """
        actions: list[Action] = []
        for p in points:
            actions += [click(self.screen(*p)), wait(SELECT_WAIT_S)]
        return self.step(*actions)

    def select_window(
        self, corner_a: tuple[float, float], corner_b: tuple[float, float], crossing: bool = False
    ) -> LibreCADScript:
        """Window selection by two clicks on empty points; adds to the current selection.

        LibreCAD decides by direction: from left to right it selects the entities lying
        entirely inside the window, from right to left (``crossing``) also those it crosses.
        Neither corner may lie on an entity (the click would pick it instead).
        """
        left, right = sorted((corner_a, corner_b), key=lambda c: c[0])
        first, second = (right, left) if crossing else (left, right)
        return self.step(
            click(self.screen(*first)),
            wait(SELECT_WAIT_S),
            click(self.screen(*second)),
            wait(SELECT_WAIT_S),
        )

    def deselect_all(self) -> LibreCADScript:
        """Clear the selection (command ``tn``)."""
        return self.command("tn")

    def erase_selection(self) -> LibreCADScript:
        """Delete the selected entities through Edit > Delete selected (works whatever has focus)."""
        return self.step(
            click(EDIT_MENU),
            wait(DIALOG_WAIT_S),
            click(EDIT_DELETE_SELECTED),
            wait(DIALOG_WAIT_S),
        )

    def _modify(self, entries: Sequence[str], dialog: Sequence[Action], ok: tuple[int, int]) -> LibreCADScript:
        """Type a modify command and its points, fill its options dialog, press OK, end it."""
        return self.step(
            click(COMMAND_INPUT),
            *self.entries(*entries),
            wait(MODIFY_DIALOG_WAIT_S),
            *dialog,
            click(ok),
            wait(DIALOG_WAIT_S),
            ESCAPE,
            ESCAPE,
        )

    def move_selection(
        self, base: tuple[float, float], target: tuple[float, float], copy: bool = False
    ) -> LibreCADScript:
        """Move the selection by ``target - base`` (``copy`` keeps the original: one copy)."""
        radio = MOVE_KEEP_ORIGINAL if copy else MOVE_DELETE_ORIGINAL
        return self._modify(("mv", point(*base), point(*target)), [click(radio)], MOVE_OK)

    def rotate_selection(self, center: tuple[float, float], angle_deg: float, copy: bool = False) -> LibreCADScript:
        """Rotate the selection about ``center`` by ``angle_deg`` (counter-clockwise positive).

        ``rotate`` asks for the centre, a reference point and a target point; the dialog's angle
        field (pre-filled from those points) is then overwritten with the exact angle.
        """
        reference = point(center[0] + 10.0, center[1])
        target = point(center[0], center[1] + 10.0)
        radio = ROTATE_KEEP_ORIGINAL if copy else ROTATE_DELETE_ORIGINAL
        dialog = [click(radio), click(ROTATE_ANGLE_FIELD, count=3), type_text(fmt(angle_deg))]
        return self._modify(("ro", point(*center), reference, target), dialog, ROTATE_OK)

    def scale_selection(self, base: tuple[float, float], factor: float, copy: bool = False) -> LibreCADScript:
        """Scale the selection uniformly about ``base`` by ``factor``."""
        radio = SCALE_KEEP_ORIGINAL if copy else SCALE_DELETE_ORIGINAL
        dialog = [click(radio), click(SCALE_FACTOR_FIELD, count=3), type_text(fmt(factor))]
        return self._modify(("sz", point(*base)), dialog, SCALE_OK)

    def mirror_selection(
        self, p1: tuple[float, float], p2: tuple[float, float], keep_original: bool = False
    ) -> LibreCADScript:
        """Mirror the selection about the line through ``p1`` and ``p2``."""
        radio = MIRROR_KEEP_ORIGINAL if keep_original else MIRROR_DELETE_ORIGINAL
        return self._modify(("mi", point(*p1), point(*p2)), [click(radio)], MIRROR_OK)

    def move_selection_to_layer(self, layer: str) -> LibreCADScript:
        """Put the selected entities on the existing layer ``layer`` (Attributes dialog, ``attr``).

        The layer combo is opened and the name typed: Qt's keyboard search picks the first
        entry whose name starts with the typed text, ignoring case, so no layer listed before
        ``layer`` may start with it (names differing only in case are ambiguous).
        """
        return self.step(
            click(COMMAND_INPUT),
            *self.entries("attr"),
            wait(MODIFY_DIALOG_WAIT_S),
            click(ATTRIBUTES_LAYER_COMBO),
            wait(DIALOG_WAIT_S),
            type_text(layer),
            ENTER,
            wait(DIALOG_WAIT_S),
            click(ATTRIBUTES_OK),
            wait(DIALOG_WAIT_S),
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
    """Problems with a solution file: every line must pass ``validate_batch``; the last ends with done;
    a hover (``move``) is followed by a ``wait`` before the next pointer action (:data:`HOVER_WAIT_S`)."""
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
        actions = raw["actions"]
        for index, (action, following) in enumerate(itertools.pairwise(actions)):
            if action.get("type") == "move" and following.get("type") not in ("move", "wait"):
                problems.append(
                    f"line {number}, action {index}: a move is followed by a {following.get('type')} without a "
                    "wait; LibreCAD may merge the hover with the next pointer move and never see it"
                )
        ends = actions[-1].get("type") == "done"
        if ends != (number == len(lines)):
            problems.append(f"line {number}: done must end the last batch and only the last")
    return problems
