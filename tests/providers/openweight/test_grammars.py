"""Open-weight action grammars: exact wire actions, coordinate conventions, refusals, safety."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocad_bench.actions.validation import ValidatedBatch, validate_batch
from autocad_bench.errors import PluginError
from autocad_bench.providers.geometry import ScreenGeometry
from autocad_bench.providers.grammar import (
    ActionGrammar,
    CoordinateConvention,
    GrammarError,
    ParsedTurn,
    load_grammar,
    make_turn,
    map_key,
)
from autocad_bench.providers.models import DisplaySize
from autocad_bench_openweight.grammars.function import FunctionCallGrammar
from autocad_bench_openweight.grammars.pyautogui_code import PyAutoGuiGrammar
from autocad_bench_openweight.grammars.qwen import Qwen3ComputerUseGrammar, QwenComputerUseGrammar
from autocad_bench_openweight.grammars.uitars import UITarsGrammar

DESKTOP = DisplaySize(width=1920, height=1080)
IDENTITY = ScreenGeometry.identity(DESKTOP)
SCALED = ScreenGeometry(DESKTOP, DisplaySize(width=1280, height=720))  # 1.5 desktop px per shown px

ALL_GRAMMARS: list[ActionGrammar] = [
    UITarsGrammar(),
    QwenComputerUseGrammar(),
    Qwen3ComputerUseGrammar(),
    PyAutoGuiGrammar(),
    FunctionCallGrammar(),
]


def actions(grammar: ActionGrammar, text: str, geometry: ScreenGeometry = IDENTITY) -> list[dict[str, object]]:
    turn = grammar.parse(text, geometry)
    # Every parsed turn is a valid computer_action input for the live desktop.
    assert isinstance(validate_batch(turn.action_input, DESKTOP, 1000), ValidatedBatch)
    return turn.actions


def refused(grammar: ActionGrammar, text: str, match: str, geometry: ScreenGeometry = IDENTITY) -> GrammarError:
    with pytest.raises(GrammarError, match=match) as caught:
        grammar.parse(text, geometry)
    assert caught.value.raw == text
    return caught.value


def click(x: int, y: int, button: str = "left", count: int = 1) -> dict[str, object]:
    return {"type": "click", "x": x, "y": y, "button": button, "count": count}


def key(*keys: str) -> dict[str, object]:
    return {"type": "key", "keys": list(keys)}


DONE = {"type": "done"}


# --- shared contract -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ctrl", "ctrl"),
        ("Control_L", "ctrlleft"),
        ("control", "ctrl"),
        ("Return", "enter"),
        ("enter", "enter"),
        ("esc", "esc"),
        ("Escape", "esc"),
        ("pagedown", "pagedown"),
        ("Page_Down", "pagedown"),
        ("Next", "pagedown"),
        ("super", "win"),
        ("Super_L", "winleft"),
        ("cmd", "ctrl"),
        ("A", "a"),
        ("F5", "f5"),
        ("KP_7", "num7"),
        ("comma", ","),
        ("+", "+"),
    ],
)
def test_key_names_map_to_the_whitelist(name: str, expected: str) -> None:
    assert map_key(name, "raw") == expected


@pytest.mark.parametrize("name", ["hyper", "", "ctrl+c", "XF86AudioMute", "sleep", 5])
def test_unknown_keys_are_refused(name: object) -> None:
    with pytest.raises(GrammarError, match="key name") as caught:
        map_key(name, "the raw reply")
    assert caught.value.raw == "the raw reply"


def test_make_turn_rules() -> None:
    with pytest.raises(GrammarError, match="no action"):
        make_turn([], raw="x", geometry=IDENTITY)
    with pytest.raises(GrammarError, match="last action"):
        make_turn([DONE, click(1, 1)], raw="x", geometry=IDENTITY)
    with pytest.raises(GrammarError, match="outside the 1920x1080"):
        make_turn([click(1920, 1)], raw="x", geometry=IDENTITY)
    with pytest.raises(GrammarError, match="invalid"):
        make_turn([{"type": "type", "text": "é"}], raw="x", geometry=IDENTITY)
    turn = make_turn([click(1, 1), DONE], raw="x", geometry=IDENTITY, thought="  hi ")
    assert turn == ParsedTurn({"actions": [click(1, 1), DONE]}, thought="hi")
    assert turn.finished


def test_load_grammar_unknown_name_lists_installed() -> None:
    with pytest.raises(PluginError, match=r"unknown action grammar 'nope' \(installed: "):
        load_grammar("nope")


def test_load_grammar_by_entry_point() -> None:
    # Works once providers/openweight is a workspace member (entry points installed).
    for name, cls in [
        ("uitars", UITarsGrammar),
        ("qwen-computer-use", QwenComputerUseGrammar),
        ("qwen3-computer-use", Qwen3ComputerUseGrammar),
        ("pyautogui", PyAutoGuiGrammar),
        ("function", FunctionCallGrammar),
    ]:
        grammar = load_grammar(name)
        assert type(grammar) is cls and grammar.name == name
    assert load_grammar("uitars", CoordinateConvention.NORMALIZED_1000).convention == "normalized_1000"


@pytest.mark.parametrize("grammar", ALL_GRAMMARS, ids=lambda g: g.name)
def test_instructions_state_the_coordinate_frame(grammar: ActionGrammar) -> None:
    text = grammar.instructions(SCALED)
    expected = {
        CoordinateConvention.RESIZED: "1280x720",
        CoordinateConvention.ABSOLUTE: "1920x1080",
        CoordinateConvention.NORMALIZED_1000: "0..1000",
    }[grammar.convention]
    assert expected in text


# --- UI-TARS -------------------------------------------------------------------------------

UITARS = UITarsGrammar()


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("click(start_box='(100,200)')", [click(100, 200)]),
        ("left_single(start_box='(100,200)')", [click(100, 200)]),
        ("left_double(start_box='(100,200)')", [click(100, 200, count=2)]),
        ("left_triple(start_box='(100,200)')", [click(100, 200, count=3)]),
        ("right_single(start_box='(100,200)')", [click(100, 200, "right")]),
        ("hover(start_box='(5,6)')", [{"type": "move", "x": 5, "y": 6}]),
        (
            "drag(start_box='(10,20)', end_box='(30,40)')",
            [{"type": "drag", "path": [[10, 20], [30, 40]], "button": "left"}],
        ),
        (
            "drag(start_point='<point>10 20</point>', end_point='<point>30 40</point>')",
            [{"type": "drag", "path": [[10, 20], [30, 40]], "button": "left"}],
        ),
        ("hotkey(key='ctrl c')", [key("ctrl", "c")]),
        ("hotkey(key='Control_L shift Return')", [key("ctrlleft", "shift", "enter")]),
        ("press(key='esc')", [key("esc")]),
        ("type(content='LINE')", [{"type": "type", "text": "LINE"}]),
        ("type(content='0,0\\n')", [{"type": "type", "text": "0,0"}, key("enter")]),
        ("type(content='a\\tb')", [{"type": "type", "text": "a"}, key("tab"), {"type": "type", "text": "b"}]),
        ("scroll(start_box='(7,8)', direction='down')", [{"type": "scroll", "x": 7, "y": 8, "dx": 0, "dy": -5}]),
        ("scroll(start_box='(7,8)', direction='up')", [{"type": "scroll", "x": 7, "y": 8, "dx": 0, "dy": 5}]),
        ("scroll(start_box='(7,8)', direction='left')", [{"type": "scroll", "x": 7, "y": 8, "dx": -5, "dy": 0}]),
        ("scroll(start_box='(7,8)', direction='right')", [{"type": "scroll", "x": 7, "y": 8, "dx": 5, "dy": 0}]),
        ("wait()", [{"type": "wait", "seconds": 5.0}]),
        ("finished(content='drawn')", [DONE]),
        ("finished()", [DONE]),
    ],
)
def test_uitars_every_action(action: str, expected: list[dict[str, object]]) -> None:
    assert actions(UITARS, f"Thought: do it\nAction: {action}") == expected


def test_uitars_point_spellings_and_thought() -> None:
    text = (
        "Thought: The LINE tool is top left.\n"
        "Action: click(start_box='<|box_start|>(100,200)<|box_end|>')\n\n"
        "click(point='<point>100 200</point>')\n"
        "click(start_box='[90, 190, 110, 210]')"
    )
    turn = UITARS.parse(text, IDENTITY)
    assert turn.actions == [click(100, 200)] * 3
    assert turn.thought == "The LINE tool is top left."
    assert not turn.finished
    done = UITARS.parse("Thought: all good\nAction: finished(content='the drawing matches')", IDENTITY)
    assert done.finished and done.thought == "all good\nthe drawing matches"


def test_uitars_coordinate_conventions() -> None:
    text = "Action: click(start_box='(100,200)')"
    assert UITARS.convention is CoordinateConvention.RESIZED
    assert UITARS.parse(text, SCALED).actions == [click(150, 300)]  # floor(100.5*1.5), floor(200.5*1.5)
    assert UITarsGrammar(CoordinateConvention.ABSOLUTE).parse(text, SCALED).actions == [click(100, 200)]
    normalized = UITarsGrammar(CoordinateConvention.NORMALIZED_1000)
    assert normalized.parse("Action: click(start_box='(500,500)')", SCALED).actions == [click(960, 540)]
    assert normalized.parse("Action: click(start_box='(1000,0)')", SCALED).actions == [click(1919, 0)]
    corner = "Action: click(start_box='(1279,719)')"
    assert UITARS.parse(corner, SCALED).actions == [click(1919, 1079)]
    smart = ScreenGeometry.smart_resize(DESKTOP)  # 1932x1092: the frame UI-TARS-1.5 answers in
    assert UITARS.parse("Action: click(start_box='(1931,1091)')", smart).actions == [click(1919, 1079)]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Thought: thinking only", "no 'Action:'"),
        ("Action: call_user()", "unsupported UI-TARS action"),
        ("Action: keydown(key='shift')", "unsupported UI-TARS action"),
        ("Action: click('(1,2)')", "keyword arguments only"),
        ("Action: click(start_box='(1,2)', foo='x')", "unexpected arguments: foo"),
        ("Action: click()", "needs exactly one of start_box"),
        ("Action: click(start_box='(1,2)', point='(1,2)')", "needs exactly one"),
        ("Action: click(start_box='(1280,5)')", "outside the 1280x720 screenshot"),
        ("Action: click(start_box='(1,2,3)')", "2 numbers"),
        ("Action: click(start_box='here')", "cannot read a point"),
        ("Action: click(start_box=(1, 2))", "name='string'"),
        ("Action: scroll(start_box='(1,2)', direction='sideways')", "direction"),
        ("Action: hotkey(key='ctrl hyper')", "unknown key name 'hyper'"),
        ("Action: type(content='caf\u00e9')", "U\\+00E9"),
        ("Action: type(content='')", "non-empty"),
        ("Action: click(start_box='(1,2)'", "does not parse"),
        ("Action: os.system('x')", "expected an action call"),
        ("Action: x = 1", "expected an action call"),
        ("Action: finished()\nclick(start_box='(1,2)')", "last action"),
        ("Action: ", "no action"),
    ],
)
def test_uitars_refusals(text: str, match: str) -> None:
    refused(UITARS, text, match, SCALED)


# --- Qwen computer_use ---------------------------------------------------------------------

QWEN = QwenComputerUseGrammar()


def qwen_call(**arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"action": "left_click", "coordinate": [100, 200]}, [click(100, 200)]),
        ({"action": "right_click", "coordinate": [100, 200]}, [click(100, 200, "right")]),
        ({"action": "middle_click", "coordinate": [100, 200]}, [click(100, 200, "middle")]),
        ({"action": "double_click", "coordinate": [100, 200]}, [click(100, 200, count=2)]),
        ({"action": "triple_click", "coordinate": [100, 200]}, [click(100, 200, count=3)]),
        ({"action": "mouse_move", "coordinate": [3, 4]}, [{"type": "move", "x": 3, "y": 4}]),
        ({"action": "key", "keys": ["ctrl", "s"]}, [key("ctrl", "s")]),
        ({"action": "key", "keys": ["Return"]}, [key("enter")]),
        ({"action": "type", "text": "CIRCLE\n"}, [{"type": "type", "text": "CIRCLE"}, key("enter")]),
        (
            {"action": "scroll", "pixels": -3, "coordinate": [9, 9]},
            [{"type": "scroll", "x": 9, "y": 9, "dx": 0, "dy": -3}],
        ),
        (
            {"action": "hscroll", "pixels": 2, "coordinate": [9, 9]},
            [{"type": "scroll", "x": 9, "y": 9, "dx": 2, "dy": 0}],
        ),
        ({"action": "wait", "time": 2}, [{"type": "wait", "seconds": 2.0}]),
        (
            {"action": "wait", "time": 25},
            [{"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 10.0}, {"type": "wait", "seconds": 5.0}],
        ),
        ({"action": "terminate", "status": "success"}, [DONE]),
        ({"action": "answer", "text": "42"}, [DONE]),
    ],
)
def test_qwen_every_action(arguments: dict[str, object], expected: list[dict[str, object]]) -> None:
    assert actions(QWEN, "I will act.\n" + qwen_call(**arguments)) == expected


def test_qwen_pointer_tracking_and_thought() -> None:
    text = (
        "Drag the grip.\n"
        + qwen_call(action="mouse_move", coordinate=[10, 20])
        + qwen_call(action="left_click_drag", coordinate=[30, 40])
        + qwen_call(action="left_click")
        + qwen_call(action="scroll", pixels=5)
        + qwen_call(action="terminate", status="failure")
    )
    turn = QWEN.parse(text, IDENTITY)
    assert turn.actions == [
        {"type": "move", "x": 10, "y": 20},
        {"type": "drag", "path": [[10, 20], [30, 40]], "button": "left"},
        click(30, 40),
        {"type": "scroll", "x": 30, "y": 40, "dx": 0, "dy": 5},
        DONE,
    ]
    assert turn.finished and turn.thought == "Drag the grip.\nterminate: failure"


def test_qwen_coordinate_conventions() -> None:
    text = qwen_call(action="left_click", coordinate=[100, 200])
    assert QWEN.parse(text, SCALED).actions == [click(150, 300)]
    assert Qwen3ComputerUseGrammar().parse(qwen_call(action="left_click", coordinate=[500, 1000]), SCALED).actions == [
        click(960, 1079)
    ]
    string_arguments = '<tool_call>{"name": "computer_use", "arguments": "{\\"action\\": \\"left_click\\", ' \
        '\\"coordinate\\": [100, 200]}"}</tool_call>'
    assert QWEN.parse(string_arguments, IDENTITY).actions == [click(100, 200)]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("just words", "no <tool_call>"),
        ("<tool_call>{}", "unbalanced"),
        ("<tool_call>not json</tool_call>", "invalid JSON"),
        ('<tool_call>{"name": "browser", "arguments": {}}</tool_call>', "computer_use"),
        (qwen_call(action="fly"), "unknown computer_use action 'fly'"),
        (qwen_call(action="left_click_drag", coordinate=[1, 1]), "place it with mouse_move"),
        (qwen_call(action="left_click"), "needs the pointer"),
        (qwen_call(action="key", keys=["ctrl", "hyper"]), "unknown key name 'hyper'"),
        (qwen_call(action="key"), "needs keys"),
        (qwen_call(action="type", text="x", coordinate=[1, 1]), "does not take coordinate"),
        (qwen_call(action="left_click", coordinate=[1]), r"\[x, y\] array"),
        (qwen_call(action="left_click", coordinate=[1280, 1]), "outside the 1280x720"),
        (qwen_call(action="left_click", coordinate=["1", 1]), "finite number"),
        (qwen_call(action="scroll", pixels=1.5, coordinate=[1, 1]), "whole number"),
        (qwen_call(action="scroll", pixels=0, coordinate=[1, 1]), "invalid"),
        (qwen_call(action="wait", time=0), "above 0"),
        (qwen_call(action="terminate", status="maybe"), "success or failure"),
    ],
)
def test_qwen_refusals(text: str, match: str) -> None:
    refused(QWEN, text, match, SCALED)


# --- pyautogui ------------------------------------------------------------------------------

PYAUTOGUI = PyAutoGuiGrammar()


def block(code: str) -> str:
    return f"I will click the tool.\n```python\n{code}\n```"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("pyautogui.click(x=100, y=200)", [click(100, 200)]),
        ("pyautogui.click(100, 200)", [click(100, 200)]),
        ("pyautogui.click((100, 200))", [click(100, 200)]),
        ("pyautogui.click(100, 200, clicks=2)", [click(100, 200, count=2)]),
        ("pyautogui.click(100, 200, button='right')", [click(100, 200, "right")]),
        ("pyautogui.doubleClick(100, 200)", [click(100, 200, count=2)]),
        ("pyautogui.tripleClick(100, 200)", [click(100, 200, count=3)]),
        ("pyautogui.rightClick(100, 200)", [click(100, 200, "right")]),
        ("pyautogui.middleClick(100, 200)", [click(100, 200, "middle")]),
        ("pyautogui.moveTo(5, 6, duration=0.5)", [{"type": "move", "x": 5, "y": 6}]),
        (
            "pyautogui.moveTo(10, 20)\npyautogui.dragTo(30, 40, duration=1, button='left')",
            [{"type": "move", "x": 10, "y": 20}, {"type": "drag", "path": [[10, 20], [30, 40]], "button": "left"}],
        ),
        ("pyautogui.scroll(-3, x=9, y=9)", [{"type": "scroll", "x": 9, "y": 9, "dx": 0, "dy": -3}]),
        ("pyautogui.hscroll(4, x=9, y=9)", [{"type": "scroll", "x": 9, "y": 9, "dx": 4, "dy": 0}]),
        ("pyautogui.write('LINE')", [{"type": "type", "text": "LINE"}]),
        ("pyautogui.typewrite('0,0\\n', interval=0.1)", [{"type": "type", "text": "0,0"}, key("enter")]),
        ("pyautogui.typewrite(['a', 'enter'])", [key("a"), key("enter")]),
        ("pyautogui.press('enter')", [key("enter")]),
        ("pyautogui.press(['esc', 'esc'])", [key("esc"), key("esc")]),
        ("pyautogui.press('tab', presses=2)", [key("tab"), key("tab")]),
        ("pyautogui.hotkey('ctrl', 'shift', 's')", [key("ctrl", "shift", "s")]),
        ("import time\ntime.sleep(1.5)", [{"type": "wait", "seconds": 1.5}]),
        ("pyautogui.sleep(2)", [{"type": "wait", "seconds": 2.0}]),
        ("import pyautogui\npyautogui.click(1, 2)\nDONE", [click(1, 2), DONE]),
        ("WAIT", [{"type": "wait", "seconds": 5.0}]),
        ("FAIL", [DONE]),
    ],
)
def test_pyautogui_every_call(code: str, expected: list[dict[str, object]]) -> None:
    assert actions(PYAUTOGUI, block(code)) == expected


def test_pyautogui_thought_tokens_and_conventions() -> None:
    turn = PYAUTOGUI.parse(block("pyautogui.click(100, 200)"), SCALED)
    assert turn.actions == [click(150, 300)] and turn.thought == "I will click the tool."
    absolute = PyAutoGuiGrammar(CoordinateConvention.ABSOLUTE)
    assert absolute.parse(block("pyautogui.click(100, 200)"), SCALED).actions == [click(100, 200)]
    assert PYAUTOGUI.parse("DONE", IDENTITY).finished
    assert PYAUTOGUI.parse("```\npyautogui.click(3, 4)\n```", IDENTITY).actions == [click(3, 4)]


@pytest.mark.parametrize(
    ("code", "match"),
    [
        ("import os; os.system('x')", "only 'import pyautogui'"),
        ("os.system('x')", "whitelist"),
        ("pyautogui.keyDown('shift')", "whitelist"),
        ("pyautogui.keyUp('shift')", "whitelist"),
        ("import pyautogui as p\np.click(1, 2)", "only 'import pyautogui'"),
        ("from pyautogui import click", "only pyautogui calls"),
        ("x = 5\npyautogui.click(x, 5)", "only pyautogui calls"),
        ("pyautogui.click(x, 5)", "not a literal"),
        ("pyautogui.click(__import__('os').system('x'), 1)", "not a literal"),
        ("pyautogui.write(open('/etc/passwd').read())", "not a literal"),
        ("exec('print(1)')", "whitelist"),
        ("for i in range(3): pyautogui.click(1, 1)", "only pyautogui calls"),
        ("pyautogui.click(*[1, 2])", "written out"),
        ("pyautogui.click(1, 2, nonsense=3)", "unexpected keyword"),
        ("pyautogui.click(1, 2, button='back')", "button must be"),
        ("pyautogui.dragTo(30, 40)", "moveTo the start point first"),
        ("pyautogui.click()", "needs the pointer"),
        ("pyautogui.click(1, 2, clicks=4)", "invalid"),
        ("pyautogui.press('enter', presses=100)", "1 to 50"),
        ("pyautogui.hotkey('ctrl', 'hyper')", "unknown key name 'hyper'"),
        ("pyautogui.write('\u00fc')", "U\\+00FC"),
        ("time.sleep(600)", "at most 60"),
        ("pyautogui.click(1, 2", "does not parse"),
        ("DONE\npyautogui.click(1, 2)", "last action"),
        ("pyautogui.click(5000, 2)", "outside the 1280x720"),
    ],
)
def test_pyautogui_refusals(code: str, match: str) -> None:
    refused(PYAUTOGUI, block(code), match, SCALED)


def test_pyautogui_needs_a_code_block() -> None:
    refused(PYAUTOGUI, "pyautogui.click(1, 2)", "no ```python code block")


def test_pyautogui_hostile_code_never_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append("os.system") or 0)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append("Popen"))
    monkeypatch.setattr(builtins, "exec", lambda *a, **k: calls.append("exec"))
    monkeypatch.setattr(builtins, "eval", lambda *a, **k: calls.append("eval"))
    marker = tmp_path / "pwned"
    hostile = [
        f"import os; os.system('touch {marker}')",
        f"pyautogui.click(__import__('os').system('touch {marker}'), 1)",
        f"pyautogui.write(open('{marker}', 'w').write('x'))",
        f"exec(\"open('{marker}', 'w')\")",
        f"pyautogui.click(1, 1)\nopen('{marker}', 'w').write('x')",
        f"pyautogui.hotkey(*__import__('subprocess').Popen(['touch', '{marker}']))",
    ]
    for code in hostile:
        with pytest.raises(GrammarError):
            PYAUTOGUI.parse(block(code), IDENTITY)
    assert calls == []
    assert not marker.exists()


# --- function calling -----------------------------------------------------------------------

FUNCTION = FunctionCallGrammar()

WIRE = [
    {"type": "move", "x": 1, "y": 2},
    click(3, 4, "middle", 2),
    {"type": "drag", "path": [[1, 1], [2, 2], [3, 3]], "button": "right"},
    {"type": "scroll", "x": 5, "y": 5, "dx": 1, "dy": -1},
    {"type": "type", "text": "L"},
    key("ctrl", "z"),
    {"type": "wait", "seconds": 0.5},
    DONE,
]


def test_function_passes_actions_through() -> None:
    text = json.dumps({"actions": WIRE})
    assert actions(FUNCTION, text) == WIRE
    assert FUNCTION.parse(text, SCALED).actions == WIRE  # absolute: the scaled image does not matter
    assert FUNCTION.parse(f"```json\n{text}\n```", IDENTITY).finished


def test_function_maps_points_under_another_convention() -> None:
    grammar = FunctionCallGrammar(CoordinateConvention.RESIZED)
    text = json.dumps({"actions": [click(100, 200), {"type": "drag", "path": [[0, 0], [1279, 719]], "button": "left"}]})
    assert grammar.parse(text, SCALED).actions == [
        click(150, 300),
        {"type": "drag", "path": [[0, 0], [1919, 1079]], "button": "left"},
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "invalid JSON"),
        ("[1]", "one field"),
        ('{"actions": [], "why": 1}', "one field"),
        ('{"actions": [1]}', "action objects"),
        ('{"actions": []}', "no action"),
        ('{"actions": [{"type": "key", "keys": ["Return"]}]}', "invalid"),
        ('{"actions": [{"type": "click", "x": 1920, "y": 0, "button": "left", "count": 1}]}', "outside"),
        ('{"actions": [{"type": "teleport"}]}', "invalid"),
    ],
)
def test_function_refusals(text: str, match: str) -> None:
    refused(FUNCTION, text, match)


# --- fuzzing: any text yields a ParsedTurn or a GrammarError, nothing else ---------------------

geometries = st.sampled_from([IDENTITY, SCALED, ScreenGeometry.smart_resize(DESKTOP)])
fragments = st.sampled_from(
    [
        "Action: ", "Thought: ", "click(", "start_box=", "'(1,2)'", "'<point>3 4</point>'", ")", "\n",
        "<tool_call>", "</tool_call>", '{"name": "computer_use", "arguments": ', '{"action": "left_click"',
        ', "coordinate": [1, 2]}', "}", "```python\n", "```", "pyautogui.", "click(1, 2)", "press('enter')",
        "DONE", '{"actions": [', '{"type": "done"}', "]", "[", "(", "'", '"', "\\", "-1e999", "9" * 30,
        "hotkey(key='ctrl c')", "type(content='x')", "scroll(", "direction='up'", "finished()",
    ]
)  # fmt: skip
texts = st.one_of(st.text(max_size=300), st.lists(fragments, max_size=25).map("".join))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(texts, geometries)
def test_random_text_only_ever_raises_grammar_error(text: str, geometry: ScreenGeometry) -> None:
    for grammar in ALL_GRAMMARS:
        try:
            turn = grammar.parse(text, geometry)
        except GrammarError as error:
            assert error.raw == text
        else:
            assert isinstance(validate_batch(turn.action_input, DESKTOP, 1000), ValidatedBatch)


def test_degenerate_inputs_are_grammar_errors() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    for text in [nested, "Action: " + nested, f"```python\npyautogui.click({nested})\n```", "\x00", "1" * 10_000]:
        for grammar in ALL_GRAMMARS:
            with pytest.raises(GrammarError):
                grammar.parse(text, IDENTITY)
