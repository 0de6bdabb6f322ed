"""Native-tool-only actions in the broker: mouse_down, mouse_up, hold_key and release_all."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.actions import HoldKeyAction, MouseDownAction, MouseUpAction
from autocad_bench.actions.ids import action_request_id
from autocad_bench_broker.desktop import Interrupted
from autocad_bench_broker.drivers.dispatch import apply_action
from autocad_bench_broker.drivers.input import (
    InputDriver,
    PyAutoGUIDriver,
    RecordedCall,
    RecordingDriver,
)
from autocad_bench_broker.errors import InputRejected

from .server_fakes import running_rig


def test_dispatch_presses_holds_and_releases_in_order() -> None:
    driver = RecordingDriver()

    def sleep(seconds: float) -> None:
        driver.calls.append(RecordedCall("sleep", (seconds,)))

    apply_action(driver, MouseDownAction(x=10, y=20, button="left"), sleep=sleep)
    assert driver.held_buttons == {"left"}
    apply_action(driver, MouseUpAction(x=30, y=40, button="left"), sleep=sleep)
    apply_action(driver, HoldKeyAction(keys=("ctrl", "shift"), seconds=1.5), sleep=sleep)
    assert driver.calls == [
        RecordedCall("mouse_down", (10, 20, "left")),
        RecordedCall("mouse_up", (30, 40, "left")),
        RecordedCall("key_down", (("ctrl", "shift"),)),
        RecordedCall("sleep", (1.5,)),
        RecordedCall("key_up", (("ctrl", "shift"),)),
    ]
    assert driver.held_buttons == set() and driver.held_keys == []
    assert isinstance(driver, InputDriver)


def test_hold_key_releases_the_chord_when_the_wait_is_interrupted() -> None:
    driver = RecordingDriver()

    def sleep(seconds: float) -> None:
        raise Interrupted("the broker is shutting down")

    with pytest.raises(Interrupted):
        apply_action(driver, HoldKeyAction(keys=("shift",), seconds=2.0), sleep=sleep)
    assert [call.method for call in driver.calls] == ["key_down", "key_up"]
    assert driver.held_keys == []


def test_release_all_releases_what_is_held_and_close_calls_it() -> None:
    driver = RecordingDriver()
    driver.release_all()
    assert driver.calls == []  # nothing held: no call at all
    driver.mouse_down(1, 2, "right")
    driver.mouse_down(1, 2, "left")
    driver.key_down(["ctrl", "alt"])
    driver.release_all()
    assert driver.calls[-1] == RecordedCall("release_all", (("alt", "ctrl"), ("left", "right")))
    assert driver.held_buttons == set() and driver.held_keys == []
    driver.mouse_down(5, 5, "middle")
    driver.close()
    assert driver.calls[-1] == RecordedCall("release_all", ((), ("middle",)))
    assert driver.closed


def test_recording_driver_rejects_bad_arguments() -> None:
    driver = RecordingDriver(size=(100, 100))
    with pytest.raises(InputRejected):
        driver.mouse_down(100, 5, "left")
    with pytest.raises(InputRejected):
        driver.mouse_up(5, 5, "side")  # type: ignore[arg-type]
    with pytest.raises(InputRejected):
        driver.key_down(["hyper"])
    assert driver.calls == [] and driver.held_buttons == set()


class FakeGui:
    """Records the PyAutoGUI calls the driver makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "isValidKey":
            return lambda key: True

        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args, kwargs))

        return record


def fake_pyautogui_driver() -> tuple[PyAutoGUIDriver, FakeGui]:
    driver = PyAutoGUIDriver(display=":99")
    gui = FakeGui()
    driver._size = (200, 100)

    @contextmanager
    def bound() -> Iterator[Any]:
        yield gui

    driver._bound = bound  # type: ignore[method-assign]
    return driver, gui


def test_pyautogui_driver_uses_mouse_and_key_down_and_up() -> None:
    driver, gui = fake_pyautogui_driver()
    driver.mouse_down(10, 20, "left")
    driver.mouse_up(30, 40, "left")
    driver.key_down(["ctrl", "shift"])
    driver.key_up(["ctrl", "shift"])
    assert [(name, args, kwargs) for name, args, kwargs in gui.calls] == [
        ("moveTo", (10, 20), {}),
        ("mouseDown", (10, 20), {"button": "left"}),
        ("moveTo", (30, 40), {}),
        ("mouseUp", (30, 40), {"button": "left"}),
        ("keyDown", ("ctrl",), {}),
        ("keyDown", ("shift",), {}),
        ("keyUp", ("shift",), {}),
        ("keyUp", ("ctrl",), {}),
    ]
    gui.calls.clear()
    driver.release_all()
    assert gui.calls == []  # nothing is held any more


def test_pyautogui_release_all_releases_held_keys_and_buttons() -> None:
    driver, gui = fake_pyautogui_driver()
    driver.mouse_down(10, 20, "left")
    driver.key_down(["shift"])
    gui.calls.clear()
    driver.release_all()
    assert [(name, args, kwargs) for name, args, kwargs in gui.calls] == [
        ("keyUp", ("shift",), {}),
        ("mouseUp", (), {"button": "left"}),
    ]
    gui.calls.clear()
    driver.release_all()
    assert gui.calls == []


def _body(session: str, n: int, index: int, actions: list[dict[str, Any]]) -> dict[str, Any]:
    request_id = action_request_id("attempt-1", f"toolu_{n}", 0)
    return {"session_id": session, "request_id": request_id, "expected_index": index, "actions": actions}


async def test_the_broker_runs_native_actions_and_releases_before_saving(tmp_path: Path) -> None:
    async with running_rig(tmp_path) as rig:
        status, body = await rig.post("/lease", {"task_id": "task-1", "attempt_id": "attempt-1"})
        assert status == 200, body
        session = str(body["session_id"])
        status, body = await rig.post("/reset", {"session_id": session, "request_id": f"reset-{session}"})
        assert status == 200, body
        held = [
            {"type": "mouse_down", "x": 10, "y": 20, "button": "left"},
            {"type": "hold_key", "keys": ["shift"], "seconds": 0.01},
        ]
        status, body = await rig.post("/actions", _body(session, 0, 0, held))
        assert status == 200, body
        methods = [call.method for call in rig.driver.calls]
        assert methods == ["mouse_down", "key_down", "key_up"]
        assert rig.driver.held_buttons == {"left"}  # held across the batch boundary
        checkpoint = await rig.client().checkpoint(session, "checkpoint-2")
        assert checkpoint.next_index == 2
        assert rig.driver.calls[-1] == RecordedCall("release_all", ((), ("left",)))
        assert rig.driver.held_buttons == set()
        status, body = await rig.post("/actions", _body(session, 1, 2, [held[0]]))
        assert status == 200, body
        await rig.client().release(session)
        assert rig.driver.calls[-1] == RecordedCall("release_all", ((), ("left",)))
