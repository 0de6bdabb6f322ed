"""The UI-TARS action language: ``Thought: ...`` then ``Action: click(start_box='(x,y)')``.

Accepted calls (keyword arguments with literal strings only):
``click``/``left_single``, ``left_double``, ``left_triple``, ``right_single``, ``hover``,
``drag``/``select`` (``start_box``/``end_box`` or ``start_point``/``end_point``),
``hotkey(key='ctrl c')``, ``press(key=...)``, ``type(content=...)``,
``scroll(start_box=..., direction='up|down|left|right')``, ``wait()`` and
``finished(content=...)``. A point is written ``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'``,
``'<point>x y</point>'`` or a four-number box (its centre is used). Several calls may follow
one ``Action:`` line, one per line. ``keydown``/``keyup``/``call_user`` are refused.

Coordinates default to :attr:`CoordinateConvention.RESIZED`: UI-TARS-1.5 (Qwen2.5-VL based)
answers in pixels of the image its server fed it, i.e. the ``smart_resize`` frame (use
``ScreenGeometry.smart_resize``). UI-TARS-1.0 answered in 0..1000 normalized coordinates:
construct the grammar with :attr:`CoordinateConvention.NORMALIZED_1000` for it.
"""

from __future__ import annotations

import ast
import re

from autocad_bench.providers.geometry import ScreenGeometry
from autocad_bench.providers.grammar import (
    ActionGrammar,
    CoordinateConvention,
    GrammarError,
    ParsedTurn,
    WireAction,
    make_turn,
)
from autocad_bench_openweight.grammars._common import (
    chord,
    click,
    done,
    drag,
    literal,
    move,
    parse_python,
    scroll,
    snippet,
    text_actions,
    wait_actions,
)

SCROLL_CLICKS = 5
"""Wheel clicks per ``scroll`` call, as UI-TARS's reference pyautogui translation scrolls."""

WAIT_SECONDS = 5.0
"""``wait()`` pauses 5 s, as the UI-TARS prompt describes it."""

_BOX_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")
_NUMBER = r"-?\d+(?:\.\d+)?"
_POINT_TEXT = re.compile(rf"[\s(\[]*({_NUMBER})(?:[\s,]+({_NUMBER})){{1,3}}[\s)\]]*")

_CLICKS = {
    "click": ("left", 1),
    "left_single": ("left", 1),
    "left_double": ("left", 2),
    "left_triple": ("left", 3),
    "right_single": ("right", 1),
}
_SCROLLS = {
    "up": (0, SCROLL_CLICKS),
    "down": (0, -SCROLL_CLICKS),
    "left": (-SCROLL_CLICKS, 0),
    "right": (SCROLL_CLICKS, 0),
}
_START = ("start_box", "point", "start_point")
_END = ("end_box", "end_point")


class UITarsGrammar(ActionGrammar):
    """UI-TARS ``Thought:``/``Action:`` replies; coordinates in the resized-image frame by default."""

    name = "uitars"
    default_convention = CoordinateConvention.RESIZED

    def instructions(self, geometry: ScreenGeometry) -> str:
        """The UI-TARS output format and action space, in this grammar's coordinate frame."""
        return (
            "## Output Format\nThought: ...\nAction: ...\n\n"
            "## Action Space\n"
            "click(start_box='(x,y)')\n"
            "left_double(start_box='(x,y)')\n"
            "right_single(start_box='(x,y)')\n"
            "drag(start_box='(x1,y1)', end_box='(x2,y2)')\n"
            "hotkey(key='ctrl c')  # keys separated by spaces, lowercase\n"
            "type(content='xxx')  # escape quotes and newlines; end with \\n to submit\n"
            "scroll(start_box='(x,y)', direction='down or up or right or left')\n"
            "wait()  # sleep 5 s and look again\n"
            "finished(content='xxx')  # the task is complete\n\n"
            f"Points are {self.coordinate_frame(geometry)}."
        )

    def parse(self, text: str, geometry: ScreenGeometry) -> ParsedTurn:
        """The actions after the last ``Action:`` label; the text before it is the thought."""
        marker = text.rfind("Action:")
        if marker < 0:
            raise GrammarError("no 'Action:' line in the reply", text)
        thought = text[:marker]
        label = thought.find("Thought:")
        if label >= 0:
            thought = thought[label + len("Thought:") :]
        statements = parse_python(text[marker + len("Action:") :].strip(), text)
        actions: list[WireAction] = []
        for statement in statements:
            name, args = self._call(statement, text)
            new, note = self._action(name, args, geometry, text)
            actions.extend(new)
            if note:
                thought = f"{thought.rstrip()}\n{note}"
        return make_turn(actions, raw=text, geometry=geometry, thought=thought)

    @staticmethod
    def _call(statement: ast.stmt, raw: str) -> tuple[str, dict[str, str]]:
        if not (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Name)
        ):
            raise GrammarError(f"expected an action call such as click(...), got {snippet(statement)!r}", raw)
        call = statement.value
        assert isinstance(call.func, ast.Name)
        if call.args:
            raise GrammarError(f"{call.func.id}() takes keyword arguments only", raw)
        args: dict[str, str] = {}
        for keyword in call.keywords:
            value = literal(keyword.value, raw)
            if keyword.arg is None or not isinstance(value, str):
                raise GrammarError(f"{call.func.id}() arguments must be name='string'", raw)
            args[keyword.arg] = value
        return call.func.id, args

    def _action(
        self, name: str, args: dict[str, str], geometry: ScreenGeometry, raw: str
    ) -> tuple[list[WireAction], str]:
        def take(*names: str) -> str:
            found = [args.pop(key) for key in names if key in args]
            if len(found) != 1:
                raise GrammarError(f"{name}() needs exactly one of {', '.join(names)}", raw)
            return found[0]

        def point(*names: str) -> tuple[int, int]:
            x, y = _parse_point(take(*names), raw)
            return self.point(x, y, geometry, raw)

        note = ""
        if name in _CLICKS:
            button, count = _CLICKS[name]
            actions = [click(*point(*_START), button=button, count=count)]
        elif name in ("hover", "mouse_move"):
            actions = [move(*point(*_START))]
        elif name in ("drag", "select"):
            actions = [drag(point(*_START), point(*_END))]
        elif name == "hotkey":
            actions = [chord(list(take("key", "hotkey").split()), raw)]
        elif name == "press":
            actions = [chord([take("key", "keys")], raw)]
        elif name == "type":
            actions = text_actions(take("content"), raw)
        elif name == "scroll":
            direction = take("direction").strip().lower()
            if direction not in _SCROLLS:
                raise GrammarError(f"scroll direction must be up, down, left or right, got {direction!r}", raw)
            x, y = point(*_START)
            actions = [scroll(x, y, *_SCROLLS[direction])]
        elif name == "wait":
            actions = wait_actions(WAIT_SECONDS, raw)
        elif name == "finished":
            note = args.pop("content", "")
            actions = [done()]
        else:
            raise GrammarError(f"unsupported UI-TARS action {name}()", raw)
        if args:
            raise GrammarError(f"{name}() got unexpected arguments: {', '.join(sorted(args))}", raw)
        return actions, note


def _parse_point(value: str, raw: str) -> tuple[float, float]:
    """``(x, y)`` from a point or box string; a four-number box gives its centre."""
    text = _BOX_TOKENS.sub(" ", value)
    if not _POINT_TEXT.fullmatch(text):
        raise GrammarError(f"cannot read a point from {value[:60]!r}", raw)
    numbers = [float(number) for number in re.findall(_NUMBER, text)]
    if len(numbers) == 2:
        return numbers[0], numbers[1]
    if len(numbers) == 4:
        return (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    raise GrammarError(f"a point needs 2 numbers (or a box 4), got {len(numbers)} in {value[:60]!r}", raw)
