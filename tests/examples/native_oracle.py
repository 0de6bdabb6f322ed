"""The "native oracle": the smoke suite's reference solutions spoken in native action vocabularies.

Each smoke task's ``solution.librecad.jsonl`` is a list of function-mode turns
(``{"actions": [...]}``, desktop pixels). This module translates every turn into

* Anthropic's native ``computer`` tool inputs (``tool_use`` blocks, coordinates in the
  screenshot space :func:`autocad_bench_anthropic.native.session.anthropic_geometry` shows), and
* UI-TARS ``Thought: ...`` / ``Action: ...`` replies (coordinates in the ``smart_resize`` frame),

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

from autocad_bench.actions.models import ACTION_ADAPTER, action_to_wire
from autocad_bench.actions.xdotool import key_name
from autocad_bench.providers.geometry import QWEN25_VL_FACTOR, ScreenGeometry
from autocad_bench.providers.models import DisplaySize
from autocad_bench_anthropic.native.session import anthropic_geometry

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
