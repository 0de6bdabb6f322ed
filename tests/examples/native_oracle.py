"""The "native oracle": the smoke suite's reference solutions spoken in native action vocabularies.

Each smoke task's ``solution.librecad.jsonl`` is a list of function-mode turns
(``{"actions": [...]}``, desktop pixels). This module translates every turn into

* Anthropic's native ``computer`` tool inputs (``tool_use`` blocks, coordinates in the
  screenshot space :func:`autocad_bench_anthropic.native.session.anthropic_geometry` shows),
* OpenAI's native GA ``computer`` tool (one ``computer_call`` per turn carrying a batched
  ``actions`` list, coordinates in the screenshot space
  :func:`autocad_bench_openai.native.session.openai_geometry` shows, 1366x768),
* UI-TARS ``Thought: ...`` / ``Action: ...`` replies (coordinates in the ``smart_resize`` frame),
* Qwen-VL ``<tool_call>`` ``computer_use`` calls: ``qwen-computer-use`` (Qwen2.5-VL, the
  ``smart_resize`` frame) and ``qwen3-computer-use`` (Qwen3-VL, a 0..1000 grid), and
* pyautogui code blocks (the ``smart_resize`` frame, as served by a Qwen2.5-VL processor),

and serves them from small threaded HTTP servers on 127.0.0.1 that stand in for the vendor
APIs, so a real batch (controller subprocess, Xvfb, LibreCAD, evaluator) can be driven by the
real provider sessions in ``tool_mode: native``. Response bodies are built from the pinned
SDKs' own types, never hand-typed JSON.

A server answers the n-th request of a rollout with the n-th scripted turn, where n is the
number of assistant messages already in the request (so a resent request gets the same
answer). One server serves one rollout.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from anthropic.types import ModelInfo
from anthropic.types.beta import BetaMessage, BetaTextBlock, BetaToolUseBlock, BetaUsage
from openai.types import CompletionUsage, Model
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.responses import (
    ComputerTool,
    Response,
    ResponseComputerToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from autocad_bench.actions.models import ACTION_ADAPTER, action_to_wire
from autocad_bench.actions.xdotool import key_name
from autocad_bench.providers.geometry import QWEN25_VL_FACTOR, ScreenGeometry
from autocad_bench.providers.grammar import load_grammar
from autocad_bench.providers.models import DisplaySize
from autocad_bench_anthropic.native.session import anthropic_geometry
from autocad_bench_openai.native.session import openai_geometry

REPO = Path(__file__).resolve().parents[2]
EVALUATOR = REPO / "evaluator" / "src" / "autocad_bench_evaluator"
SUITE = EVALUATOR / "suite" / "suites" / "smoke.json"
TASKS = EVALUATOR / "suite" / "tasks"
GOLD_CACHE = EVALUATOR / "gold-cache"

DESKTOP = DisplaySize(width=1920, height=1080)
"""The local-xvfb desktop (``autocad_bench_xvfb.settings.DESKTOP_WIDTH``/``HEIGHT``)."""

UITARS_SCROLL_CLICKS = 5
"""Wheel clicks of one UI-TARS ``scroll`` call (``grammars.uitars.SCROLL_CLICKS``)."""
UITARS_WAIT_SECONDS = 5.0
"""Seconds of one UI-TARS ``wait()`` (``grammars.uitars.WAIT_SECONDS``)."""

OPENAI_WAIT_SECONDS = 1.0
"""Seconds of one OpenAI ``wait`` action, which has no duration (``native.actions.WAIT_SECONDS``)."""
OPENAI_SCROLL_PIXELS_PER_CLICK = 100
"""Pixels of ``scroll_x``/``scroll_y`` per wheel click (``native.actions.SCROLL_PIXELS_PER_CLICK``)."""

Action = dict[str, Any]
Turn = list[Action]


class Untranslatable(ValueError):
    """A function-mode action that a native vocabulary cannot express."""


def smoke_tasks() -> list[str]:
    """The smoke suite's task ids, in order."""
    tasks: list[str] = json.loads(SUITE.read_text())["tasks"]
    return tasks


def solution_path(task_id: str) -> Path:
    return TASKS / task_id / "solution.librecad.jsonl"


def load_solution(task_id: str) -> list[Turn]:
    """The reference solution's turns (each the ``actions`` list of one ``computer_action`` call)."""
    turns: list[Turn] = []
    for line in solution_path(task_id).read_text(encoding="utf-8").splitlines():
        if line.strip():
            turns.append(json.loads(line)["actions"])
    return turns


def is_done(turn: Turn) -> bool:
    return [a.get("type") for a in turn] == ["done"]


def normalized(action: Action) -> Action:
    """``action`` validated and dumped, with key names folded to the key they press."""
    wire = action_to_wire(ACTION_ADAPTER.validate_python(action))
    if wire["type"] == "key":
        keys = wire["keys"]
        assert isinstance(keys, list | tuple)
        wire["keys"] = [key_name(str(k)) for k in keys]
    return wire


def same_actions(expected: Turn, actual: Turn, tolerance: int = 1) -> bool:
    """Whether two batches are the same actions, points within ``tolerance`` desktop pixels."""
    if len(expected) != len(actual):
        return False
    for a, b in zip(map(normalized, expected), map(normalized, actual), strict=True):
        if a.keys() != b.keys():
            return False
        for name, value in a.items():
            other = b[name]
            if name in ("x", "y"):
                if abs(value - other) > tolerance:
                    return False
            elif name == "path":
                if len(value) != len(other) or any(
                        abs(p[0] - q[0]) > tolerance or abs(p[1] - q[1]) > tolerance
                        for p, q in zip(value, other, strict=True)):
                    return False
            elif name == "seconds":
                if not math.isclose(value, other, abs_tol=1e-9):
                    return False
            elif value != other:
                return False
    return True


def shown_point(geometry: ScreenGeometry, x: int, y: int) -> tuple[int, int]:
    """The shown pixel whose ``to_desktop`` lands nearest to desktop pixel ``(x, y)``."""
    sx, sy = geometry.to_shown(x, y)
    best: tuple[float, int, int] | None = None
    for cx in range(sx - 2, sx + 3):
        for cy in range(sy - 2, sy + 3):
            if not (0 <= cx < geometry.shown.width and 0 <= cy < geometry.shown.height):
                continue
            dx, dy = geometry.to_desktop(cx, cy)
            distance = math.hypot(dx - x, dy - y)
            if best is None or distance < best[0]:
                best = (distance, cx, cy)
    assert best is not None
    return best[1], best[2]


# --- Anthropic's native computer tool --------------------------------------------------------

_XDOTOOL_NAMES = {
    "enter": "Return", "esc": "Escape", "escape": "Escape", "tab": "Tab", "backspace": "BackSpace",
    "delete": "Delete", "del": "Delete", "space": "space", "up": "Up", "down": "Down", "left": "Left",
    "right": "Right", "home": "Home", "end": "End", "pageup": "Prior", "pagedown": "Next", "insert": "Insert",
}


def xdotool_key(name: str) -> str:
    """The xdotool keysym for a broker key name (``"enter"`` -> ``"Return"``)."""
    keysym = _XDOTOOL_NAMES.get(name, name)
    if key_name(keysym) != key_name(name):  # pragma: no cover - guards the table above
        raise Untranslatable(f"no xdotool name presses key {name!r}")
    return keysym


_ANTHROPIC_CLICKS = {("left", 1): "left_click", ("left", 2): "double_click", ("left", 3): "triple_click",
                     ("right", 1): "right_click", ("middle", 1): "middle_click"}


def anthropic_inputs(action: Action, geometry: ScreenGeometry) -> list[dict[str, Any]]:
    """The ``computer`` tool inputs performing one function-mode ``action``."""
    kind = action["type"]
    if kind == "click":
        name = _ANTHROPIC_CLICKS.get((action["button"], action["count"]))
        if name is None:
            raise Untranslatable(f"no native click for button {action['button']!r} x{action['count']}")
        return [{"action": name, "coordinate": list(shown_point(geometry, action["x"], action["y"]))}]
    if kind == "move":
        return [{"action": "mouse_move", "coordinate": list(shown_point(geometry, action["x"], action["y"]))}]
    if kind == "type":
        return [{"action": "type", "text": action["text"]}]
    if kind == "key":
        return [{"action": "key", "text": "+".join(xdotool_key(k) for k in action["keys"])}]
    if kind == "wait":
        return [{"action": "wait", "duration": action["seconds"]}]
    if kind == "drag":
        path = action["path"]
        if len(path) != 2 or action["button"] != "left":
            raise Untranslatable(f"left_click_drag takes two points with the left button, not {action}")
        return [{"action": "left_click_drag", "start_coordinate": list(shown_point(geometry, *path[0])),
                 "coordinate": list(shown_point(geometry, *path[1]))}]
    if kind == "scroll":
        dx, dy = action["dx"], action["dy"]
        if dx and dy:
            raise Untranslatable(f"a scroll moves along one axis, not {action}")
        direction = ("up" if dy > 0 else "down") if dy else ("right" if dx > 0 else "left")
        return [{"action": "scroll", "coordinate": list(shown_point(geometry, action["x"], action["y"])),
                 "scroll_direction": direction, "scroll_amount": abs(dx or dy)}]
    raise Untranslatable(f"no native computer action for {kind!r}")


def anthropic_turn(turn: Turn, geometry: ScreenGeometry) -> list[dict[str, Any]] | None:
    """The tool inputs of one scripted turn; ``None`` for the final ``done`` (an ``end_turn`` reply)."""
    if is_done(turn):
        return None
    if any(a["type"] == "done" for a in turn):
        raise Untranslatable("done must be a turn of its own")
    return [tool_input for action in turn for tool_input in anthropic_inputs(action, geometry)]


def anthropic_message(index: int, inputs: list[dict[str, Any]] | None, model: str) -> dict[str, Any]:
    """The Messages response of scripted turn ``index`` (tool_use blocks, or text only at the end)."""
    usage = BetaUsage(input_tokens=1000, output_tokens=50, cache_read_input_tokens=0, cache_creation_input_tokens=0)
    if inputs is None:
        message = BetaMessage(id=f"msg_oracle_{index}", type="message", role="assistant", model=model,
                              content=[BetaTextBlock(type="text", text="The drawing is complete and saved.")],
                              stop_reason="end_turn", stop_sequence=None, usage=usage)
    else:
        blocks: list[Any] = [BetaTextBlock(type="text", text=f"Scripted turn {index}.")]
        blocks += [BetaToolUseBlock(type="tool_use", id=f"toolu_oracle_{index}_{i}", name="computer", input=value)
                   for i, value in enumerate(inputs)]
        message = BetaMessage(id=f"msg_oracle_{index}", type="message", role="assistant", model=model,
                              content=blocks, stop_reason="tool_use", stop_sequence=None, usage=usage)
    dumped: dict[str, Any] = message.model_dump(mode="json")
    return dumped


def anthropic_model_info(model: str) -> dict[str, Any]:
    """``GET /v1/models/{id}`` (the admission catalog check)."""
    dumped: dict[str, Any] = ModelInfo(id=model, type="model", display_name=model, created_at="2026-01-01T00:00:00Z",
                                       lifecycle="active").model_dump(mode="json")
    return dumped


def served_models(*models: str) -> dict[str, Any]:
    """``GET /v1/models`` of an OpenAI-compatible server listing ``models``."""
    listing = [Model(id=m, created=1_767_225_600, object="model", owned_by="oracle").model_dump(mode="json")
               for m in models]
    return {"object": "list", "data": listing}


# --- OpenAI's native computer tool (GA ``computer``) -----------------------------------------

_OPENAI_BUTTONS = {"left": "left", "right": "right", "middle": "wheel"}


def openai_key(name: str) -> str:
    """The key name OpenAI's computer tool uses for a broker key (``"enter"`` -> ``"ENTER"``)."""
    return {"escape": "ESC"}.get(name, name.upper() if len(name) > 1 else name)


def openai_actions(action: Action, geometry: ScreenGeometry) -> list[dict[str, Any]]:
    """The ``computer_call`` actions performing one function-mode ``action``."""
    kind = action["type"]
    if kind in ("click", "move", "scroll"):
        x, y = shown_point(geometry, action["x"], action["y"])
    if kind == "click":
        button, count = action["button"], action["count"]
        if (button, count) == ("left", 2):
            return [{"type": "double_click", "x": x, "y": y}]
        if count != 1:
            raise Untranslatable(f"OpenAI's computer tool has no {button} click x{count}")
        return [{"type": "click", "button": _OPENAI_BUTTONS[button], "x": x, "y": y}]
    if kind == "move":
        return [{"type": "move", "x": x, "y": y}]
    if kind == "type":
        return [{"type": "type", "text": action["text"]}]
    if kind == "key":
        return [{"type": "keypress", "keys": [openai_key(k) for k in action["keys"]]}]
    if kind == "wait":
        count = action["seconds"] / OPENAI_WAIT_SECONDS
        if not float(count).is_integer():
            raise Untranslatable(f"OpenAI's wait always pauses {OPENAI_WAIT_SECONDS:g} s, not {action['seconds']}")
        return [{"type": "wait"}] * int(count)
    if kind == "drag":
        if action["button"] != "left":
            raise Untranslatable(f"OpenAI's drag uses the left button, not {action}")
        points = [shown_point(geometry, *p) for p in action["path"]]
        return [{"type": "drag", "path": [{"x": px, "y": py} for px, py in points]}]
    if kind == "scroll":
        # Pixels, positive scroll_y = down (the wire counts wheel clicks, positive dy = up).
        return [{"type": "scroll", "x": x, "y": y, "scroll_x": action["dx"] * OPENAI_SCROLL_PIXELS_PER_CLICK,
                 "scroll_y": -action["dy"] * OPENAI_SCROLL_PIXELS_PER_CLICK}]
    raise Untranslatable(f"no OpenAI computer action for {kind!r}")


def openai_turn(turn: Turn, geometry: ScreenGeometry) -> list[dict[str, Any]] | None:
    """The batched ``actions`` of one scripted turn; ``None`` for the final ``done`` (a message only)."""
    if is_done(turn):
        return None
    if any(a["type"] == "done" for a in turn):
        raise Untranslatable("done must be a turn of its own")
    return [item for action in turn for item in openai_actions(action, geometry)]


def openai_response(index: int, actions: list[dict[str, Any]] | None, model: str) -> dict[str, Any]:
    """The Responses API reply of scripted turn ``index``: a message and one ``computer_call``
    with the batched actions, or the message alone at the end (the model's finish)."""
    text = "The drawing is complete and saved." if actions is None else f"Scripted turn {index}."
    output: list[Any] = [ResponseOutputMessage(
        id=f"msg_oracle_{index}", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
    if actions is not None:
        output.append(ResponseComputerToolCall(
            id=f"cu_oracle_{index}", call_id=f"call_oracle_{index}", type="computer_call", status="completed",
            pending_safety_checks=[], actions=actions))  # dicts, validated into the SDK action union
    response = Response(
        id=f"resp_oracle_{index}", object="response", created_at=time.time(), model=model, status="completed",
        output=output, parallel_tool_calls=False, tool_choice="auto", tools=[ComputerTool(type="computer")],
        usage=ResponseUsage(input_tokens=1000,
                            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                            output_tokens=50, output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
                            total_tokens=1050),
    )
    dumped: dict[str, Any] = response.model_dump(mode="json")
    return dumped


def openai_model(model: str) -> dict[str, Any]:
    """``GET /v1/models/{id}`` (the admission catalog check)."""
    dumped: dict[str, Any] = Model(id=model, created=1_767_225_600, object="model",
                                   owned_by="oracle").model_dump(mode="json")
    return dumped


# --- UI-TARS ----------------------------------------------------------------------------------


def uitars_geometry(desktop: DisplaySize = DESKTOP) -> ScreenGeometry:
    """The frame UI-TARS-1.5 answers in (``server_resize`` ``qwen2.5-vl``, the default)."""
    return ScreenGeometry.smart_resize(desktop, factor=QWEN25_VL_FACTOR)


def _box(geometry: ScreenGeometry, x: int, y: int) -> str:
    sx, sy = shown_point(geometry, x, y)
    return repr(f"({sx},{sy})")


def uitars_calls(action: Action, geometry: ScreenGeometry) -> list[str]:
    """The UI-TARS calls performing one function-mode ``action``."""
    kind = action["type"]
    if kind == "click":
        names = {("left", 1): "click", ("left", 2): "left_double", ("left", 3): "left_triple",
                 ("right", 1): "right_single"}
        name = names.get((action["button"], action["count"]))
        if name is None:
            raise Untranslatable(f"UI-TARS has no {action['button']} click x{action['count']}")
        return [f"{name}(start_box={_box(geometry, action['x'], action['y'])})"]
    if kind == "move":
        return [f"hover(start_box={_box(geometry, action['x'], action['y'])})"]
    if kind == "type":
        return [f"type(content={action['text']!r})"]
    if kind == "key":
        return [f"hotkey(key={' '.join(action['keys'])!r})"]
    if kind == "wait":
        count = action["seconds"] / UITARS_WAIT_SECONDS
        if not float(count).is_integer():
            raise Untranslatable(f"UI-TARS wait() always pauses {UITARS_WAIT_SECONDS:g} s, not {action['seconds']}")
        return ["wait()"] * int(count)
    if kind == "drag":
        path = action["path"]
        if len(path) != 2 or action["button"] != "left":
            raise Untranslatable(f"UI-TARS drag() takes two points with the left button, not {action}")
        return [f"drag(start_box={_box(geometry, *path[0])}, end_box={_box(geometry, *path[1])})"]
    if kind == "scroll":
        dx, dy = action["dx"], action["dy"]
        amount = dx or dy
        if (dx and dy) or amount % UITARS_SCROLL_CLICKS:
            raise Untranslatable(f"UI-TARS scroll() moves {UITARS_SCROLL_CLICKS} clicks along one axis, not {action}")
        direction = ("up" if dy > 0 else "down") if dy else ("right" if dx > 0 else "left")
        call = f"scroll(start_box={_box(geometry, action['x'], action['y'])}, direction={direction!r})"
        return [call] * (abs(amount) // UITARS_SCROLL_CLICKS)
    raise Untranslatable(f"no UI-TARS action for {kind!r}")


FINISHED = "Thought: The drawing is complete and saved.\nAction: finished(content='The drawing is complete.')"


def uitars_reply(index: int, turn: Turn, geometry: ScreenGeometry) -> str:
    """One ``Thought:``/``Action:`` reply performing a whole scripted turn (several calls, one a line)."""
    if is_done(turn):
        return FINISHED
    if any(a["type"] == "done" for a in turn):
        raise Untranslatable("done must be a turn of its own")
    calls = [call for action in turn for call in uitars_calls(action, geometry)]
    return f"Thought: Scripted turn {index}.\nAction: " + "\n".join(calls)


def chat_completion(index: int, text: str, model: str) -> dict[str, Any]:
    """The ``/chat/completions`` response carrying ``text``."""
    completion = ChatCompletion(
        id=f"chatcmpl-oracle-{index}", object="chat.completion", created=int(time.time()), model=model,
        choices=[Choice(index=0, finish_reason="stop",
                        message=ChatCompletionMessage(role="assistant", content=text))],
        usage=CompletionUsage(prompt_tokens=1000, completion_tokens=50, total_tokens=1050),
    )
    dumped: dict[str, Any] = completion.model_dump(mode="json")
    return dumped



# --- Qwen-VL computer_use and pyautogui --------------------------------------------------------

GRAMMAR_SERVER_RESIZE = {"qwen-computer-use": "qwen2.5-vl", "qwen3-computer-use": "qwen3-vl",
                         "pyautogui": "qwen2.5-vl"}
"""The ``server_resize`` each grammar's oracle run declares (the processor of its model family)."""


def grammar_frame(grammar: str, desktop: DisplaySize = DESKTOP) -> ScreenGeometry:
    """The frame a grammar's coordinates are read in: ``smart_resize`` (factor 28) for the
    resized grammars, the desktop itself for Qwen3's 0..1000 grid."""
    if grammar == "qwen3-computer-use":
        return ScreenGeometry.identity(desktop)
    return ScreenGeometry.smart_resize(desktop, factor=QWEN25_VL_FACTOR)


def normalized_point(geometry: ScreenGeometry, x: int, y: int) -> tuple[int, int]:
    """The whole 0..1000 grid point whose ``from_normalized`` lands nearest to desktop pixel ``(x, y)``."""

    def axis(value: int, size: int, pick: Callable[[int], int]) -> int:
        guess = round(value * 1000 / size)
        candidates = [c for c in range(guess - 2, guess + 3) if 0 <= c <= 1000]
        return min(candidates, key=lambda c: abs(pick(c) - value))

    return (axis(x, geometry.desktop.width, lambda c: geometry.from_normalized(c, 0)[0]),
            axis(y, geometry.desktop.height, lambda c: geometry.from_normalized(0, c)[1]))


def _qwen_call(arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


_QWEN_CLICKS = {("left", 1): "left_click", ("left", 2): "double_click", ("left", 3): "triple_click",
                ("right", 1): "right_click", ("middle", 1): "middle_click"}


def qwen_calls(action: Action, geometry: ScreenGeometry, normalized: bool) -> list[str]:
    """The ``<tool_call>`` blocks performing one function-mode ``action`` (a drag reads back as
    the ``mouse_move`` placing the pointer, then the drag)."""

    def point(x: int, y: int) -> list[int]:
        return list(normalized_point(geometry, x, y) if normalized else shown_point(geometry, x, y))

    kind = action["type"]
    if kind == "click":
        name = _QWEN_CLICKS.get((action["button"], action["count"]))
        if name is None:
            raise Untranslatable(f"computer_use has no {action['button']} click x{action['count']}")
        return [_qwen_call({"action": name, "coordinate": point(action["x"], action["y"])})]
    if kind == "move":
        return [_qwen_call({"action": "mouse_move", "coordinate": point(action["x"], action["y"])})]
    if kind == "type":
        return [_qwen_call({"action": "type", "text": action["text"]})]
    if kind == "key":
        return [_qwen_call({"action": "key", "keys": list(action["keys"])})]
    if kind == "wait":
        return [_qwen_call({"action": "wait", "time": action["seconds"]})]
    if kind == "drag":
        path = action["path"]
        if len(path) != 2 or action["button"] != "left":
            raise Untranslatable(f"left_click_drag takes two points with the left button, not {action}")
        return [_qwen_call({"action": "mouse_move", "coordinate": point(*path[0])}),
                _qwen_call({"action": "left_click_drag", "coordinate": point(*path[1])})]
    if kind == "scroll":
        dx, dy = action["dx"], action["dy"]
        if dx and dy:
            raise Untranslatable(f"a scroll moves along one axis, not {action}")
        name = "hscroll" if dx else "scroll"
        return [_qwen_call({"action": name, "pixels": dx or dy, "coordinate": point(action["x"], action["y"])})]
    raise Untranslatable(f"no computer_use action for {kind!r}")


def qwen_reply(index: int, turn: Turn, geometry: ScreenGeometry, normalized: bool) -> str:
    """One reply performing a whole scripted turn: a thought, then one ``<tool_call>`` per action."""
    if is_done(turn):
        return "The drawing is complete and saved.\n" + _qwen_call({"action": "terminate", "status": "success"})
    if any(a["type"] == "done" for a in turn):
        raise Untranslatable("done must be a turn of its own")
    calls = [call for action in turn for call in qwen_calls(action, geometry, normalized)]
    return f"Scripted turn {index}.\n" + "\n".join(calls)


def _xy(geometry: ScreenGeometry, x: int, y: int) -> str:
    sx, sy = shown_point(geometry, x, y)
    return f"x={sx}, y={sy}"


def pyautogui_calls(action: Action, geometry: ScreenGeometry) -> list[str]:
    """The pyautogui calls performing one function-mode ``action`` (a drag reads back as the
    ``moveTo`` placing the pointer, then the drag)."""
    kind = action["type"]
    if kind == "click":
        button, count = action["button"], action["count"]
        where = _xy(geometry, action["x"], action["y"])
        if (button, count) == ("left", 1):
            return [f"pyautogui.click({where})"]
        return [f"pyautogui.click({where}, clicks={count}, button={button!r})"]
    if kind == "move":
        return [f"pyautogui.moveTo({_xy(geometry, action['x'], action['y'])})"]
    if kind == "type":
        return [f"pyautogui.write({action['text']!r})"]
    if kind == "key":
        keys = action["keys"]
        if len(keys) == 1:
            return [f"pyautogui.press({keys[0]!r})"]
        return [f"pyautogui.hotkey({', '.join(map(repr, keys))})"]
    if kind == "wait":
        return [f"time.sleep({action['seconds']!r})"]
    if kind == "drag":
        path = action["path"]
        if len(path) != 2:
            raise Untranslatable(f"dragTo() drags from the pointer to one point, not {action}")
        return [f"pyautogui.moveTo({_xy(geometry, *path[0])})",
                f"pyautogui.dragTo({_xy(geometry, *path[1])}, button={action['button']!r})"]
    if kind == "scroll":
        dx, dy = action["dx"], action["dy"]
        where = _xy(geometry, action["x"], action["y"])
        calls = [f"pyautogui.scroll({dy}, {where})"] if dy else []
        return calls + ([f"pyautogui.hscroll({dx}, {where})"] if dx else [])
    raise Untranslatable(f"no pyautogui call for {kind!r}")


def pyautogui_reply(index: int, turn: Turn, geometry: ScreenGeometry) -> str:
    """One reply performing a whole scripted turn: a thought, then one ```python block."""
    if is_done(turn):
        return "The drawing is complete and saved.\n```python\nDONE\n```"
    if any(a["type"] == "done" for a in turn):
        raise Untranslatable("done must be a turn of its own")
    calls = [call for action in turn for call in pyautogui_calls(action, geometry)]
    return f"Scripted turn {index}.\n```python\nimport pyautogui\n" + "\n".join(calls) + "\n```"


def grammar_reply(grammar: str, index: int, turn: Turn, geometry: ScreenGeometry) -> str:
    """Scripted turn ``index`` as one reply in the open-weight ``grammar``."""
    if grammar == "uitars":
        return uitars_reply(index, turn, geometry)
    if grammar in ("qwen-computer-use", "qwen3-computer-use"):
        return qwen_reply(index, turn, geometry, normalized=grammar == "qwen3-computer-use")
    if grammar == "pyautogui":
        return pyautogui_reply(index, turn, geometry)
    raise ValueError(f"no oracle for grammar {grammar!r}")


# --- the fake servers --------------------------------------------------------------------------


Route = Callable[["FakeServer", str, str, dict[str, Any], dict[str, str]], tuple[int, dict[str, Any]]]


@dataclass
class FakeServer:
    """A threaded HTTP server on 127.0.0.1 answering scripted replies of one rollout."""

    replies: list[Any]
    route: Route
    model: str
    requests: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    url: str = ""
    system: str | None = None
    """The system message a grammar session must send (its grammar's instructions), if checked."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((method, path))
        try:
            return self.route(self, method, path, body, headers)
        except Exception as error:  # reported through ``errors``; the client sees a 400
            with self.lock:
                self.errors.append(f"{method} {path}: {type(error).__name__}: {error}")
            return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(error)}}

    @staticmethod
    def fail(message: str) -> None:
        """Refuse the request: ``handle`` records ``message`` in ``errors`` and answers 400."""
        raise ValueError(message)


def anthropic_route(geometry: ScreenGeometry) -> Route:
    """Answers the catalog lookup and ``POST /v1/messages`` of the native Anthropic session."""

    def route(server: FakeServer, method: str, path: str, body: dict[str, Any],
              headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == f"/v1/models/{server.model}":
            return 200, anthropic_model_info(server.model)
        if method != "POST" or path != "/v1/messages":
            server.fail(f"unexpected request {method} {path}")
        tools = body.get("tools") or []
        shown = (geometry.shown.width, geometry.shown.height)
        if [(t.get("name"), t.get("display_width_px"), t.get("display_height_px")) for t in tools] != [
                ("computer", *shown)]:
            server.fail(f"tools declare {tools}, expected one computer tool of {shown[0]}x{shown[1]}")
        if not str(headers.get("anthropic-beta", "")).startswith("computer-use-"):
            server.fail(f"no computer-use beta flag: {headers.get('anthropic-beta')!r}")
        index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if index >= len(server.replies):
            server.fail(f"request {index + 1} is past the script's {len(server.replies)} turns")
        with server.lock:
            server.answered.append(index)
        return 200, anthropic_message(index, server.replies[index], server.model)

    return route


def openai_route(geometry: ScreenGeometry) -> Route:
    """Answers the catalog lookup and ``POST /v1/responses`` of the native OpenAI session."""

    def route(server: FakeServer, method: str, path: str, body: dict[str, Any],
              headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == f"/v1/models/{server.model}":
            return 200, openai_model(server.model)
        if method != "POST" or path != "/v1/responses":
            server.fail(f"unexpected request {method} {path}")
        if body.get("tools") != [{"type": "computer"}]:
            server.fail(f"tools declare {body.get('tools')}, expected the GA computer tool")
        shown = f"{geometry.shown.width}x{geometry.shown.height} pixels"
        if shown not in str(body.get("instructions")):
            server.fail(f"the instructions do not show the screen as {shown}: {body.get('instructions')!r}")
        items = body.get("input") or []
        index = sum(1 for item in items if item.get("type") == "computer_call")
        outputs = sum(1 for item in items if item.get("type") == "computer_call_output")
        if outputs != index:
            server.fail(f"{index} computer calls replayed but {outputs} outputs")
        if index >= len(server.replies):
            server.fail(f"request {index + 1} is past the script's {len(server.replies)} turns")
        with server.lock:
            server.answered.append(index)
        return 200, openai_response(index, server.replies[index], server.model)

    return route


def chat_route(server: FakeServer, method: str, path: str, body: dict[str, Any],
               headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """Answers ``POST /v1/chat/completions`` of the open-weight grammar session, and the
    model list the plan asks for (``GET /v1/models``)."""
    if method == "GET" and path == "/v1/models":
        return 200, served_models(server.model)
    if method != "POST" or path != "/v1/chat/completions":
        server.fail(f"unexpected request {method} {path}")
    if body.get("tools"):
        server.fail("a native grammar session must not send tools")
    messages = body.get("messages") or [{}]
    if server.system is not None and messages[0] != {"role": "system", "content": server.system}:
        server.fail(f"the system message is not the grammar's instructions for the oracle's frame: {messages[0]}")
    index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    if index >= len(server.replies):
        server.fail(f"request {index + 1} is past the script's {len(server.replies)} turns")
    with server.lock:
        server.answered.append(index)
    return 200, chat_completion(index, server.replies[index], server.model)


class _Handler(BaseHTTPRequestHandler):
    server_version = "native-oracle/1"
    fake: FakeServer  # set on a subclass per server

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, payload = self.fake.handle(method, urlparse(self.path).path, body, headers)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_oracle_{len(self.fake.requests)}")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(fake: FakeServer) -> Iterator[FakeServer]:
    """Run ``fake`` on a random 127.0.0.1 port in a daemon thread; ``fake.url`` is its root."""
    handler = type("Handler", (_Handler,), {"fake": fake})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="native-oracle", daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def anthropic_server(task_id: str, model: str, desktop: DisplaySize = DESKTOP) -> FakeServer:
    geometry = anthropic_geometry(desktop)
    replies = [anthropic_turn(turn, geometry) for turn in load_solution(task_id)]
    return FakeServer(replies=replies, route=anthropic_route(geometry), model=model)


def uitars_server(task_id: str, model: str, desktop: DisplaySize = DESKTOP) -> FakeServer:
    geometry = uitars_geometry(desktop)
    replies = [uitars_reply(i, turn, geometry) for i, turn in enumerate(load_solution(task_id))]
    return FakeServer(replies=replies, route=chat_route, model=model)


def openai_server(task_id: str, model: str, desktop: DisplaySize = DESKTOP) -> FakeServer:
    geometry = openai_geometry(desktop)
    replies = [openai_turn(turn, geometry) for turn in load_solution(task_id)]
    return FakeServer(replies=replies, route=openai_route(geometry), model=model)


def grammar_server(grammar: str) -> Callable[[str, str], FakeServer]:
    """A ``make(task_id, model)`` serving one task's solution in the open-weight ``grammar``; the
    server also checks that the session teaches the grammar in the oracle's frame (so a
    ``server_resize`` the session ignored would be refused, not silently absorbed)."""

    def make(task_id: str, model: str, desktop: DisplaySize = DESKTOP) -> FakeServer:
        geometry = uitars_geometry(desktop) if grammar == "uitars" else grammar_frame(grammar, desktop)
        replies = [grammar_reply(grammar, i, turn, geometry) for i, turn in enumerate(load_solution(task_id))]
        return FakeServer(replies=replies, route=chat_route, model=model,
                          system=load_grammar(grammar).instructions(geometry))

    return make
