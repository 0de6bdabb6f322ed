"""The pointer prewarm: one real pointer move to a target and back, read back independently.

``autocad-bench-broker prewarm`` prints its :class:`PrewarmResult` (:func:`prewarm`): the move
goes through the broker's own :class:`~autocad_bench_broker.drivers.input.InputDriver`, each
position is read back with a probe of :mod:`~autocad_bench_broker.readiness.probes`, and on
Windows the process must inject into ``WinSta0\\Default`` while ``Default`` is the input
desktop (not the lock or UAC screen). Failures are reported in the result, never raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from autocad_bench_broker.drivers.input import InputDriver
from autocad_bench_broker.readiness.common import (
    PREWARM_FORMAT,
    REQUIRED_DESKTOP,
    REQUIRED_WINDOW_STATION,
    Point,
    _Strict,
)
from autocad_bench_broker.readiness.probes import DesktopInfo, PointerReader


class PrewarmResult(_Strict):
    """What ``autocad-bench-broker prewarm`` prints (one JSON object)."""

    format: Literal["autocad-bench-prewarm/1"] = PREWARM_FORMAT
    ok: bool
    problems: tuple[str, ...] = ()
    driver_version: str | None = None
    screen_width: int | None = None
    screen_height: int | None = None
    start: Point | None = None
    target: Point | None = None
    observed: Point | None = None
    """Pointer position read back after the move to ``target``."""
    returned: Point | None = None
    """Pointer position read back after the move back to ``start``."""
    window_station: str | None = None
    desktop: str | None = None
    input_desktop: str | None = None
    session_id: int | None = None
    console_session_id: int | None = None
    user: str | None = None
    at: datetime
    elapsed_ms: float = Field(ge=0)


def prewarm_target(size: tuple[int, int], start: Point | None) -> Point:
    """The desktop centre, or a point 40 px down-right of it when the pointer is already there."""
    width, height = size
    centre = (width // 2, height // 2)
    if start != centre:
        return centre
    return (min(width - 1, centre[0] + 40), min(height - 1, centre[1] + 40))


def prewarm(
    driver: InputDriver,
    read_pointer: PointerReader,
    desktop: DesktopInfo,
    *,
    timeout_s: float = 2.0,
    poll_s: float = 0.02,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[], None] | None = None,
) -> PrewarmResult:
    """Move the real pointer to a target and back through ``driver``; never raises.

    Each position is read back with ``read_pointer`` (polled for at most ``timeout_s``). The
    result is ok when both moves arrived and, on Windows, the process is on
    ``WinSta0\\Default`` and ``Default`` is the input desktop.
    """
    wait = sleep if sleep is not None else (lambda: time.sleep(poll_s))
    started = clock()
    at = datetime.now(UTC)
    problems: list[str] = []
    fields: dict[str, Any] = {
        "window_station": desktop.window_station,
        "desktop": desktop.desktop,
        "input_desktop": desktop.input_desktop,
        "session_id": desktop.session_id,
        "console_session_id": desktop.console_session_id,
        "user": desktop.user,
    }
    if desktop.windows:
        if desktop.window_station != REQUIRED_WINDOW_STATION or desktop.desktop != REQUIRED_DESKTOP:
            problems.append(
                f"input goes to {desktop.window_station}\\{desktop.desktop}, "
                f"not {REQUIRED_WINDOW_STATION}\\{REQUIRED_DESKTOP}"
            )
        if desktop.input_desktop != REQUIRED_DESKTOP:
            problems.append(f"the input desktop is {desktop.input_desktop or 'not accessible'} (locked or secure?)")
        if not desktop.session_id:
            problems.append("the process runs in session 0, not an interactive session")
    try:
        fields["driver_version"] = driver.version
        width, height = driver.screen_size()
        fields.update(screen_width=width, screen_height=height)
        start = read_pointer()
        if start is None:
            problems.append("the pointer position cannot be read before the move")
        fields["start"] = start
        target = prewarm_target((width, height), start)
        fields["target"] = target
        driver.move(*target)
        observed = _await_pointer(read_pointer, target, timeout_s, clock, wait)
        fields["observed"] = observed
        if observed != target:
            problems.append(f"the pointer is at {observed} after the move to {target}")
        home = _clamp(start, (width, height)) if start is not None else target
        driver.move(*home)
        returned = _await_pointer(read_pointer, home, timeout_s, clock, wait)
        fields["returned"] = returned
        if returned != home:
            problems.append(f"the pointer is at {returned} after the move back to {home}")
    except Exception as error:  # the prewarm reports, it never raises
        problems.append(f"{type(error).__name__}: {_one_line(error)}")
    elapsed_ms = round((clock() - started) * 1000.0, 1)
    return PrewarmResult(ok=not problems, problems=tuple(problems), at=at, elapsed_ms=max(0.0, elapsed_ms), **fields)


def _await_pointer(
    read_pointer: PointerReader, expected: Point, timeout_s: float, clock: Callable[[], float], wait: Callable[[], None]
) -> Point | None:
    deadline = clock() + timeout_s
    while True:
        seen = read_pointer()
        if seen == expected or clock() >= deadline:
            return seen
        wait()


def _clamp(point: Point, size: tuple[int, int]) -> Point:
    return (min(max(point[0], 0), size[0] - 1), min(max(point[1], 0), size[1] - 1))


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
