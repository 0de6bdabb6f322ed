"""Perform one validated action model with an :class:`InputDriver`.

The broker server validates a whole batch first (:func:`autocad_bench.actions.validate_batch`)
and then calls :func:`apply_action` for each action in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from autocad_bench.actions import (
    Action,
    ClickAction,
    DoneAction,
    DragAction,
    HoldKeyAction,
    KeyAction,
    MouseDownAction,
    MouseUpAction,
    MoveAction,
    ScrollAction,
    TypeAction,
    WaitAction,
)
from autocad_bench_broker.drivers.input import InputDriver


def apply_action(
    driver: InputDriver,
    action: Action,
    *,
    sleep: Callable[[float], None] = time.sleep,
    after_wait: Callable[[], object] | None = None,
) -> None:
    """Inject ``action`` through ``driver``; ``wait`` sleeps (then calls ``after_wait``, the
    broker's wait for the application to go idle), ``done`` does nothing.

    ``mouse_down`` leaves its button held (a later ``mouse_up`` or the driver's
    ``release_all`` releases it); ``hold_key`` presses its chord, sleeps ``seconds`` and
    releases the chord even if the sleep is interrupted.

    Raises :class:`~autocad_bench_broker.errors.InputRejected` (nothing injected) if the
    driver refuses the arguments; any other exception means the input may have been delivered.
    """
    match action:
        case MoveAction(x=x, y=y):
            driver.move(x, y)
        case ClickAction(x=x, y=y, button=button, count=count):
            driver.click(x, y, button, count)
        case DragAction(path=path, button=button):
            driver.drag(list(path), button)
        case ScrollAction(x=x, y=y, dx=dx, dy=dy):
            driver.scroll(x, y, dx, dy)
        case TypeAction(text=text):
            driver.type_text(text)
        case KeyAction(keys=keys):
            driver.hotkey(keys)
        case WaitAction(seconds=seconds):
            sleep(seconds)
            if after_wait is not None:
                after_wait()
        case MouseDownAction(x=x, y=y, button=button):
            driver.mouse_down(x, y, button)
        case MouseUpAction(x=x, y=y, button=button):
            driver.mouse_up(x, y, button)
        case HoldKeyAction(keys=keys, seconds=seconds):
            driver.key_down(keys)
            try:
                sleep(seconds)
            finally:
                driver.key_up(keys)
        case DoneAction():
            pass
