"""The Qwen-VL ``computer_use`` tool call: ``<tool_call>{"name": "computer_use", ...}</tool_call>``.

Each call's ``arguments`` hold ``action`` plus that action's parameters: ``key`` (``keys``),
``type`` (``text``), ``mouse_move``/``left_click``/``right_click``/``middle_click``/
``double_click``/``triple_click`` (``coordinate``), ``left_click_drag`` (``coordinate``, the
end point), ``scroll``/``hscroll`` (``pixels``, optional ``coordinate``), ``wait``
(``time``), ``terminate`` (``status``) and ``answer`` (``text``). A parameter the action does
not take is an error. Text outside the tags is the thought.

``left_click_drag`` starts at the pointer; this parser is stateless across replies, so the
pointer must have been placed earlier in the same reply (``mouse_move``, a click, or the
``coordinate`` of a scroll). The same holds for a click or scroll without ``coordinate``.
``pixels`` is passed on as wheel clicks (positive = up / right), as Qwen's reference tool
passes it to ``pyautogui.scroll``. ``terminate`` and ``answer`` end the task; the status or
answer is appended to the thought.

Coordinates: Qwen2.5-VL answers in pixels of the image its processor produced (the
``smart_resize`` frame, :attr:`CoordinateConvention.RESIZED`); Qwen3-VL answers on a
0..1000 grid (:class:`Qwen3ComputerUseGrammar`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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
    load_json,
    move,
    scroll,
    text_actions,
    wait_actions,
    whole_number,
)

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

_PARAMETERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # action: (required parameters, optional parameters)
    "key": (frozenset({"keys"}), frozenset()),
    "type": (frozenset({"text"}), frozenset()),
    "mouse_move": (frozenset({"coordinate"}), frozenset()),
    "left_click": (frozenset(), frozenset({"coordinate"})),
    "right_click": (frozenset(), frozenset({"coordinate"})),
    "middle_click": (frozenset(), frozenset({"coordinate"})),
    "double_click": (frozenset(), frozenset({"coordinate"})),
    "triple_click": (frozenset(), frozenset({"coordinate"})),
    "left_click_drag": (frozenset({"coordinate"}), frozenset()),
    "scroll": (frozenset({"pixels"}), frozenset({"coordinate"})),
    "hscroll": (frozenset({"pixels"}), frozenset({"coordinate"})),
    "wait": (frozenset({"time"}), frozenset()),
    "terminate": (frozenset({"status"}), frozenset()),
    "answer": (frozenset({"text"}), frozenset()),
}
_CLICKS = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}


class QwenComputerUseGrammar(ActionGrammar):
    """Qwen2.5-VL ``computer_use`` tool calls; coordinates in the resized-image frame."""

    name = "qwen-computer-use"
    default_convention = CoordinateConvention.RESIZED

    def instructions(self, geometry: ScreenGeometry) -> str:
        """The ``computer_use`` function and how to call it, in this grammar's coordinate frame."""
        frame = geometry.shown if self.convention is CoordinateConvention.RESIZED else geometry.desktop
        resolution = "1000x1000" if self.convention is CoordinateConvention.NORMALIZED_1000 else (
            f"{frame.width}x{frame.height}"
        )
        return (
            "You control the computer through the function computer_use. Call it by writing, "
            "once per action:\n<tool_call>\n"
            '{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}}\n'
            "</tool_call>\n"
            f"The screen's resolution is {resolution}; coordinates are {self.coordinate_frame(geometry)}.\n"
            "Actions: key (keys: array of key names pressed together), type (text), mouse_move, "
            "left_click, right_click, middle_click, double_click, triple_click (coordinate: [x, y]), "
            "left_click_drag (coordinate: the end point; place the pointer first with mouse_move "
            "in the same reply), scroll and hscroll (pixels: wheel clicks, positive scrolls up or "
            "right; coordinate), wait (time: seconds), terminate (status: success or failure) "
            "when the task is done."
        )

    def parse(self, text: str, geometry: ScreenGeometry) -> ParsedTurn:
        """Every ``<tool_call>`` block in order; the remaining text is the thought."""
        bodies = _TOOL_CALL.findall(text)
        rest = _TOOL_CALL.sub("\n", text)
        if "<tool_call>" in rest or "</tool_call>" in rest:
            raise GrammarError("unbalanced <tool_call> tags", text)
        if not bodies:
            raise GrammarError("no <tool_call> block in the reply", text)
        thought = rest.strip()
        pointer: tuple[int, int] | None = None
        actions: list[WireAction] = []
        for body in bodies:
            arguments = _arguments(load_json(body.strip(), text), text)
            new, pointer, note = self._action(arguments, pointer, geometry, text)
            actions.extend(new)
            if note:
                thought = f"{thought}\n{note}".strip()
        return make_turn(actions, raw=text, geometry=geometry, thought=thought)

    def _action(
        self,
        args: Mapping[str, object],
        pointer: tuple[int, int] | None,
        geometry: ScreenGeometry,
        raw: str,
    ) -> tuple[list[WireAction], tuple[int, int] | None, str]:
        action = args.get("action")
        if not isinstance(action, str) or action not in _PARAMETERS:
            raise GrammarError(f"unknown computer_use action {action!r}; expected one of {', '.join(_PARAMETERS)}", raw)
        required, optional = _PARAMETERS[action]
        given = set(args) - {"action"}
        if missing := required - given:
            raise GrammarError(f"{action} needs {', '.join(sorted(missing))}", raw)
        if extra := given - required - optional:
            raise GrammarError(f"{action} does not take {', '.join(sorted(extra))}", raw)

        def target() -> tuple[int, int]:
            if "coordinate" in args:
                return self._coordinate(args["coordinate"], geometry, raw)
            if pointer is None:
                raise GrammarError(f"{action} without coordinate needs the pointer placed earlier in the reply", raw)
            return pointer

        if action in _CLICKS:
            button, count = _CLICKS[action]
            point = target()
            return [click(*point, button=button, count=count)], point, ""
        if action == "mouse_move":
            point = target()
            return [move(*point)], point, ""
        if action == "left_click_drag":
            if pointer is None:
                raise GrammarError("left_click_drag starts at the pointer: place it with mouse_move first", raw)
            end = target()
            return [drag(pointer, end)], end, ""
        if action in ("scroll", "hscroll"):
            clicks = whole_number(args["pixels"], "pixels", raw)
            point = target()
            dx, dy = (clicks, 0) if action == "hscroll" else (0, clicks)
            return [scroll(*point, dx=dx, dy=dy)], point, ""
        if action == "key":
            keys = args["keys"]
            if isinstance(keys, str):
                keys = [keys]  # a bare string is a one-key chord, a common slip
            if not isinstance(keys, list):
                raise GrammarError(f"keys must be an array of key names, got {keys!r}", raw)
            return [chord(keys, raw)], pointer, ""
        if action == "type":
            return text_actions(args["text"], raw), pointer, ""
        if action == "wait":
            return wait_actions(args["time"], raw), pointer, ""
        if action == "terminate":
            status = args["status"]
            if status not in ("success", "failure"):
                raise GrammarError(f"terminate status must be success or failure, got {status!r}", raw)
            return [done()], pointer, f"terminate: {status}"
        answer = args["text"]
        if not isinstance(answer, str):
            raise GrammarError(f"answer text must be a string, got {answer!r}", raw)
        return [done()], pointer, f"answer: {answer}"

    def _coordinate(self, value: object, geometry: ScreenGeometry, raw: str) -> tuple[int, int]:
        if not isinstance(value, list) or len(value) != 2:
            raise GrammarError(f"coordinate must be an [x, y] array, got {value!r}"[:200], raw)
        return self.point(value[0], value[1], geometry, raw)


class Qwen3ComputerUseGrammar(QwenComputerUseGrammar):
    """Qwen3-VL ``computer_use`` tool calls: same calls, coordinates on a 0..1000 grid."""

    name = "qwen3-computer-use"
    default_convention = CoordinateConvention.NORMALIZED_1000


def _arguments(call: object, raw: str) -> Mapping[str, object]:
    if not isinstance(call, dict) or call.get("name") != "computer_use":
        raise GrammarError('each <tool_call> must be {"name": "computer_use", "arguments": {...}}', raw)
    if set(call) - {"name", "arguments"}:
        raise GrammarError("a tool call has only name and arguments", raw)
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        # Some servers emit the arguments as a JSON string, as the OpenAI wire format does.
        arguments = load_json(arguments, raw)
    if not isinstance(arguments, dict):
        raise GrammarError("computer_use arguments must be a JSON object", raw)
    return arguments

