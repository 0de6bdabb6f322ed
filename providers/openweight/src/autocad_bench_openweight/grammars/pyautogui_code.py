"""pyautogui code blocks (```python pyautogui.click(x=100, y=200)```), read as data, never run.

The code is parsed with :mod:`ast` and every statement must be one whitelisted call with
literal arguments: ``pyautogui.`` ``click``, ``doubleClick``, ``tripleClick``, ``rightClick``,
``middleClick``, ``moveTo``, ``dragTo``, ``scroll``, ``hscroll``, ``write``/``typewrite``,
``press``, ``hotkey``, ``sleep``, and ``time.sleep``; ``import pyautogui`` / ``import time``
lines are ignored. The bare words ``DONE`` and ``FAIL`` end the task and ``WAIT`` pauses
(the OSWorld convention). Everything else — other modules, assignments, variables,
``keyDown``/``keyUp``, computed arguments — is a :class:`GrammarError`; nothing is executed.

``dragTo`` and calls without ``x``/``y`` act at the pointer, which must have been placed
earlier in the same reply. Coordinates default to the resized-image frame (the screenshot
the model saw; identical to desktop pixels when it is not scaled).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from autocad_bench.providers.geometry import ScreenGeometry
from autocad_bench.providers.grammar import (
    ActionGrammar,
    CoordinateConvention,
    GrammarError,
    ParsedTurn,
    WireAction,
    make_turn,
    map_key,
)
from autocad_bench_openweight.grammars._common import (
    MAX_REPEAT,
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
    whole_number,
)

WAIT_TOKEN_SECONDS = 5.0
"""How long the bare ``WAIT`` word pauses."""

_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n?(.*?)```", re.DOTALL)
_TOKENS = {"DONE", "FAIL", "WAIT"}
_ALLOWED_IMPORTS = {"pyautogui", "time"}
_BUTTONS = {"left": "left", "right": "right", "middle": "middle", "primary": "left", "secondary": "right"}

_P = inspect.Parameter


def _signature(*names: str, keyword_only: tuple[str, ...] = (), var: str | None = None) -> inspect.Signature:
    """A signature whose parameters all default to ``None`` except those named with a ``!``."""
    parameters = []
    for name in names:
        required = name.endswith("!")
        parameters.append(_P(name.rstrip("!"), _P.POSITIONAL_OR_KEYWORD, default=_P.empty if required else None))
    if var:
        parameters.append(_P(var, _P.VAR_POSITIONAL))
    parameters.extend(_P(name, _P.KEYWORD_ONLY, default=None) for name in keyword_only)
    return inspect.Signature(parameters)


# The accepted subset of each pyautogui function's parameters, in pyautogui's order;
# cosmetic ones (duration, interval) are accepted and ignored.
_SIGNATURES: dict[str, inspect.Signature] = {
    "click": _signature("x", "y", "clicks", "interval", "button", "duration"),
    "doubleClick": _signature("x", "y", "interval", "button", "duration"),
    "tripleClick": _signature("x", "y", "interval", "button", "duration"),
    "rightClick": _signature("x", "y", "interval", "duration"),
    "middleClick": _signature("x", "y", "interval", "duration"),
    "moveTo": _signature("x", "y", "duration"),
    "dragTo": _signature("x", "y", "duration", keyword_only=("button",)),
    "scroll": _signature("clicks!", "x", "y"),
    "hscroll": _signature("clicks!", "x", "y"),
    "write": _signature("message!", "interval"),
    "typewrite": _signature("message!", "interval"),
    "press": _signature("keys!", "presses", "interval"),
    "hotkey": _signature(var="keys", keyword_only=("interval",)),
    "sleep": _signature("seconds!"),
}
_TIME_FUNCTIONS = {"sleep"}


@dataclass
class _State:
    """What one reply's calls have done so far: the pointer and the actions."""

    geometry: ScreenGeometry
    raw: str
    pointer: tuple[int, int] | None = None
    actions: list[WireAction] = field(default_factory=list)


class PyAutoGuiGrammar(ActionGrammar):
    """pyautogui code blocks; coordinates in the resized-image frame by default."""

    name = "pyautogui"
    default_convention = CoordinateConvention.RESIZED

    def instructions(self, geometry: ScreenGeometry) -> str:
        """How to write actions as a pyautogui code block, in this grammar's coordinate frame."""
        return (
            "Answer with your reasoning, then one ```python code block of pyautogui calls, one per "
            "line, with literal arguments only (no variables, loops or other modules):\n"
            "pyautogui.click(x, y) / click(x, y, clicks=2) / click(x, y, button='right'), "
            "doubleClick(x, y), tripleClick(x, y), rightClick(x, y), middleClick(x, y), moveTo(x, y), "
            "dragTo(x, y) (drags from the pointer: moveTo the start first), scroll(clicks, x=x, y=y) "
            "(positive scrolls up), hscroll(clicks, x=x, y=y), write('text'), press('enter'), "
            "hotkey('ctrl', 'c'), time.sleep(seconds).\n"
            "Write DONE (alone, in the block) when the task is finished, WAIT to wait and look again.\n"
            f"Coordinates are {self.coordinate_frame(geometry)}."
        )

    def parse(self, text: str, geometry: ScreenGeometry) -> ParsedTurn:
        """The calls of every code block in order; the text outside the blocks is the thought."""
        blocks = _CODE_BLOCK.findall(text)
        if blocks:
            code = "\n".join(blocks)
            thought = _CODE_BLOCK.sub("\n", text)
        elif text.strip() in _TOKENS:
            code, thought = text.strip(), ""
        else:
            raise GrammarError("no ```python code block in the reply", text)
        state = _State(geometry, text)
        for statement in parse_python(code, text):
            self._statement(statement, state)
        return make_turn(state.actions, raw=text, geometry=geometry, thought=thought)

    def _statement(self, statement: ast.stmt, state: _State) -> None:
        raw = state.raw
        if isinstance(statement, ast.Import):
            if all(alias.name in _ALLOWED_IMPORTS and alias.asname is None for alias in statement.names):
                return
            raise GrammarError(f"only 'import pyautogui' and 'import time' are allowed: {snippet(statement)!r}", raw)
        if not isinstance(statement, ast.Expr):
            raise GrammarError(f"only pyautogui calls are allowed, got {snippet(statement)!r}", raw)
        node = statement.value
        if isinstance(node, ast.Name) and node.id in _TOKENS:
            state.actions.extend(wait_actions(WAIT_TOKEN_SECONDS, raw) if node.id == "WAIT" else [done()])
            return
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (
                (node.func.value.id == "pyautogui" and node.func.attr in _SIGNATURES)
                or (node.func.value.id == "time" and node.func.attr in _TIME_FUNCTIONS)
            )
        ):
            raise GrammarError(f"call outside the pyautogui whitelist: {snippet(node)!r}", raw)
        name = node.func.attr
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
            raise GrammarError(f"{name}() arguments must be written out, not unpacked", raw)
        args = [literal(arg, raw) for arg in node.args]
        kwargs = {str(kw.arg): literal(kw.value, raw) for kw in node.keywords}
        try:
            bound = _SIGNATURES[name].bind(*args, **kwargs)
        except TypeError as error:
            raise GrammarError(f"{name}(): {error}", raw) from None
        _HANDLERS[name](self, bound.arguments, state)

    def _target(self, arguments: dict[str, object], state: _State, name: str) -> tuple[int, int]:
        x, y = arguments.get("x"), arguments.get("y")
        if isinstance(x, tuple | list) and len(x) == 2 and y is None:
            x, y = x  # pyautogui accepts click((x, y))
        if x is None and y is None:
            if state.pointer is None:
                raise GrammarError(f"{name}() without x, y needs the pointer placed earlier in the reply", state.raw)
            return state.pointer
        state.pointer = self.point(x, y, state.geometry, state.raw)
        return state.pointer


def _button(value: object, raw: str) -> str:
    if value is None:
        return "left"
    if not isinstance(value, str) or value not in _BUTTONS:
        raise GrammarError(f"button must be left, right or middle, got {value!r}", raw)
    return _BUTTONS[value]


def _click(button: str | None, count: int) -> Callable[[PyAutoGuiGrammar, dict[str, object], _State], None]:
    def handle(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
        clicks = count
        if "clicks" in arguments and arguments["clicks"] is not None:
            clicks = whole_number(arguments["clicks"], "clicks", state.raw)
        chosen = button or _button(arguments.get("button"), state.raw)
        point = grammar._target(arguments, state, "click")
        state.actions.append(click(*point, button=chosen, count=clicks))

    return handle


def _move(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    state.actions.append(move(*grammar._target(arguments, state, "moveTo")))


def _drag(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    start = state.pointer
    if start is None:
        raise GrammarError("dragTo() starts at the pointer: moveTo the start point first", state.raw)
    end = grammar._target(arguments, state, "dragTo")
    state.actions.append(drag(start, end, _button(arguments.get("button"), state.raw)))


def _scroll(horizontal: bool) -> Callable[[PyAutoGuiGrammar, dict[str, object], _State], None]:
    def handle(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
        clicks = whole_number(arguments["clicks"], "clicks", state.raw)
        point = grammar._target(arguments, state, "scroll")
        dx, dy = (clicks, 0) if horizontal else (0, clicks)
        state.actions.append(scroll(*point, dx=dx, dy=dy))

    return handle


def _write(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    message = arguments["message"]
    if isinstance(message, list | tuple):
        # typewrite(['a', 'enter']) presses each named key in turn.
        state.actions.extend(chord([name], state.raw) for name in message)
    else:
        state.actions.extend(text_actions(message, state.raw))


def _press(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    keys = arguments["keys"]
    names = list(keys) if isinstance(keys, list | tuple) else [keys]
    presses = 1 if arguments.get("presses") is None else whole_number(arguments["presses"], "presses", state.raw)
    if not 1 <= presses <= MAX_REPEAT or not names or len(names) * presses > MAX_REPEAT:
        raise GrammarError(f"press() may press 1 to {MAX_REPEAT} keys in all", state.raw)
    mapped = [map_key(name, state.raw) for name in names]
    state.actions.extend({"type": "key", "keys": [key]} for _ in range(presses) for key in mapped)


def _hotkey(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    keys = arguments.get("keys", ())
    assert isinstance(keys, tuple)
    state.actions.append(chord(list(keys), state.raw))


def _sleep(grammar: PyAutoGuiGrammar, arguments: dict[str, object], state: _State) -> None:
    state.actions.extend(wait_actions(arguments["seconds"], state.raw))


_HANDLERS: dict[str, Callable[[PyAutoGuiGrammar, dict[str, object], _State], None]] = {
    "click": _click(None, 1),
    "doubleClick": _click(None, 2),
    "tripleClick": _click(None, 3),
    "rightClick": _click("right", 1),
    "middleClick": _click("middle", 1),
    "moveTo": _move,
    "dragTo": _drag,
    "scroll": _scroll(horizontal=False),
    "hscroll": _scroll(horizontal=True),
    "write": _write,
    "typewrite": _write,
    "press": _press,
    "hotkey": _hotkey,
    "sleep": _sleep,
}
assert set(_HANDLERS) == set(_SIGNATURES)
