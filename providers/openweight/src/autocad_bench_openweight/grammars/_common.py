"""Building blocks shared by the grammars: safe literal parsing and wire-action builders.

Model text is only ever *parsed* (``ast.parse``, ``ast.literal_eval``, ``json.loads``);
nothing here evaluates or executes it. Every failure becomes a
:class:`~autocad_bench.providers.grammar.GrammarError` carrying the raw reply.
"""

from __future__ import annotations

import ast
import json
import math

from autocad_bench.actions.models import MAX_WAIT_SECONDS, action_to_wire
from autocad_bench.actions.native import typed_actions
from autocad_bench.providers.grammar import GrammarError, WireAction, map_key

MAX_TOTAL_WAIT_SECONDS = 60.0
"""Longest pause one reply may ask for; it is split into ``wait`` actions of at most 10 s."""

MAX_REPEAT = 50
"""Most times one call may repeat a key press (pyautogui ``presses=``)."""

# Errors the standard parsers raise on hostile or degenerate input (deep nesting, huge
# literals, null bytes); all of them mean "not in the grammar".
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)


def parse_python(code: str, raw: str) -> list[ast.stmt]:
    """The statements of ``code`` as an AST (never executed); ``GrammarError`` if unparsable."""
    try:
        return ast.parse(code, mode="exec").body
    except _PARSE_ERRORS as error:
        raise GrammarError(f"the action code does not parse: {_first_line(error)}", raw) from None


def literal(node: ast.expr, raw: str) -> object:
    """The value of a literal expression node (numbers, strings, lists, tuples...).

    Names, calls, attribute access, operators (other than a sign) raise ``GrammarError``:
    arguments must be written out, never computed.
    """
    try:
        return ast.literal_eval(node)
    except _PARSE_ERRORS:
        raise GrammarError(f"argument {snippet(node)!r} is not a literal value", raw) from None


def snippet(node: ast.AST) -> str:
    """The first 60 characters of ``node``'s source, for error messages."""
    try:
        return ast.unparse(node)[:60]
    except _PARSE_ERRORS:
        return type(node).__name__


def load_json(text: str, raw: str) -> object:
    """``json.loads(text)``; ``GrammarError`` for invalid or absurdly nested JSON."""
    try:
        return json.loads(text)
    except _PARSE_ERRORS as error:
        raise GrammarError(f"invalid JSON: {_first_line(error)}", raw) from None


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:200]


def click(x: int, y: int, button: str = "left", count: int = 1) -> WireAction:
    """A ``click`` wire action."""
    return {"type": "click", "x": x, "y": y, "button": button, "count": count}


def move(x: int, y: int) -> WireAction:
    """A ``move`` wire action."""
    return {"type": "move", "x": x, "y": y}


def drag(start: tuple[int, int], end: tuple[int, int], button: str = "left") -> WireAction:
    """A two-point ``drag`` wire action."""
    return {"type": "drag", "path": [list(start), list(end)], "button": button}


def scroll(x: int, y: int, dx: int, dy: int) -> WireAction:
    """A ``scroll`` wire action (``dy`` > 0 up, ``dx`` > 0 right)."""
    return {"type": "scroll", "x": x, "y": y, "dx": dx, "dy": dy}


def done() -> WireAction:
    """The final ``done`` wire action."""
    return {"type": "done"}


def chord(names: list[object], raw: str) -> WireAction:
    """A ``key`` action pressing ``names`` together, each mapped to a whitelisted key."""
    if not names:
        raise GrammarError("a key action needs at least one key", raw)
    return {"type": "key", "keys": [map_key(name, raw) for name in names]}


def whole_number(value: object, what: str, raw: str) -> int:
    """``value`` as an int when it is an integer or an integral float, else ``GrammarError``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GrammarError(f"{what} must be a number, got {value!r}", raw)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise GrammarError(f"{what} must be a whole number, got {value!r}", raw)
    return int(value)


def text_actions(text: object, raw: str) -> list[WireAction]:
    """Typing ``text`` with the one typing rule of every vocabulary
    (:func:`autocad_bench.actions.native.typed_actions`); raises ``GrammarError`` keeping ``raw``."""
    if not isinstance(text, str) or not text:
        raise GrammarError(f"text to type must be a non-empty string, got {text!r}", raw)
    try:
        return [action_to_wire(action) for action in typed_actions(text)]
    except ValueError as error:
        raise GrammarError(str(error), raw) from None


def wait_actions(seconds: object, raw: str) -> list[WireAction]:
    """A pause of ``seconds`` (0 < s <= 60) as ``wait`` actions of at most 10 s each."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise GrammarError(f"wait time must be a number of seconds, got {seconds!r}", raw)
    if not 0 < seconds <= MAX_TOTAL_WAIT_SECONDS:
        raise GrammarError(f"wait time must be above 0 and at most {MAX_TOTAL_WAIT_SECONDS:g} s, got {seconds}", raw)
    actions: list[WireAction] = []
    left = float(seconds)
    while left > 0:
        step = min(left, MAX_WAIT_SECONDS)
        actions.append({"type": "wait", "seconds": step})
        left -= step
    return actions
