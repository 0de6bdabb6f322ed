"""Input drivers: the only code that injects pointer and keyboard events into the desktop.

:class:`InputDriver` is the protocol the broker server programs against; it mirrors the
action models of :mod:`autocad_bench.actions` (move, click, drag, scroll, type, key).
:class:`PyAutoGUIDriver` injects real events with PyAutoGUI (XTest on X11, SendInput on
Windows); :class:`RecordingDriver` records calls without a display, for tests.

Every driver re-checks its arguments (button names, key names, printable-ASCII text, points
inside the screen) *before* the first event and raises :class:`InputRejected` on a problem, so
a bad request never half-happens. After the first event a driver does not validate anymore:
errors from the backend then propagate as they are, and callers must treat the input as
possibly delivered.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol, get_args, runtime_checkable

from autocad_bench.actions import KEY_NAMES, MouseButton
from autocad_bench_broker.errors import InputBindingError, InputRejected
from autocad_bench_broker.xenv import xlib_environment

DRIVER_PROTOCOL_VERSION = 1
"""Bumped when the meaning of a driver call changes (e.g. scroll direction)."""

Point = tuple[int, int]
_BUTTONS: frozenset[str] = frozenset(get_args(MouseButton))


@runtime_checkable
class InputDriver(Protocol):
    """Injects input into one desktop. Coordinates are screen pixels, origin top-left.

    ``scroll``: ``dy`` > 0 turns the wheel up (away from the user), ``dx`` > 0 scrolls right;
    amounts are wheel clicks. ``hotkey`` presses ``keys`` in order as one chord and releases
    them in reverse order. ``type_text`` types printable ASCII character by character.

    ``mouse_down``/``mouse_up`` press and release one button at a point and ``key_down``/
    ``key_up`` press a chord in order and release it in reverse order, each independently
    (native tool mode: a button may stay held between batches). ``release_all`` releases
    every button and key this driver pressed and has not released yet; the broker calls it
    before it saves the drawing and when a session is released. It never raises for a backend
    failure of one release (it tries them all).
    """

    @property
    def version(self) -> str:
        """Identifies the driver implementation and its backend versions (handoff evidence)."""
        ...

    def screen_size(self) -> tuple[int, int]:
        """Width and height of the desktop the driver injects into."""
        ...

    def move(self, x: int, y: int) -> None: ...

    def click(self, x: int, y: int, button: MouseButton = "left", count: int = 1) -> None: ...

    def drag(self, path: Sequence[Point], button: MouseButton = "left") -> None: ...

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None: ...

    def type_text(self, text: str) -> None: ...

    def hotkey(self, keys: Sequence[str]) -> None: ...

    def mouse_down(self, x: int, y: int, button: MouseButton = "left") -> None: ...

    def mouse_up(self, x: int, y: int, button: MouseButton = "left") -> None: ...

    def key_down(self, keys: Sequence[str]) -> None: ...

    def key_up(self, keys: Sequence[str]) -> None: ...

    def release_all(self) -> None: ...

    def pointer(self) -> Point | None:
        """Where the desktop's pointer is now, read from the desktop (not from this driver's
        own calls, so moves made by the application or anyone else are included).

        ``None`` when the desktop cannot tell (e.g. Windows' ``GetCursorPos`` fails on a
        locked or secure desktop). Raises :class:`InputBindingError` if the driver is closed
        or the display cannot be reached; callers capturing a frame treat any exception as
        "unknown".
        """
        ...

    def close(self) -> None:
        """Release backend resources; idempotent."""
        ...


# ---------------------------------------------------------------------------------------------
# Argument checks shared by every driver (defense in depth behind action validation).


def _check_point(x: int, y: int, size: tuple[int, int]) -> None:
    if not (isinstance(x, int) and isinstance(y, int)):
        raise InputRejected(f"coordinates must be integers, got ({x!r}, {y!r})")
    if not (0 <= x < size[0] and 0 <= y < size[1]):
        raise InputRejected(f"point ({x}, {y}) is outside the {size[0]}x{size[1]} screen")


def _check_button(button: str) -> None:
    if button not in _BUTTONS:
        raise InputRejected(f"unknown mouse button {button!r}")


def _check_text(text: str) -> None:
    if not text:
        raise InputRejected("text is empty")
    bad = sorted({c for c in text if not " " <= c <= "~"})
    if bad:
        raise InputRejected(f"text contains characters outside printable ASCII: {bad!r}")


def _check_keys(keys: Sequence[str]) -> None:
    if not keys:
        raise InputRejected("no keys given")
    unknown = [k for k in keys if k not in KEY_NAMES]
    if unknown:
        raise InputRejected(f"unknown key names {unknown!r}")


def _check_count(count: int) -> None:
    if not isinstance(count, int) or not 1 <= count <= 3:
        raise InputRejected(f"click count must be 1, 2 or 3, got {count!r}")


# ---------------------------------------------------------------------------------------------
# PyAutoGUI


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


# PyAutoGUI's X11 backend opens one X connection (module global ``_display``) and builds its
# keycode table when it is first imported, from $DISPLAY. So that several drivers in one
# process can address different displays, every driver owns a connection and table of its
# own (made by re-executing the backend module with $DISPLAY set) and swaps them in under
# this lock for the duration of each call.
_PYAUTOGUI_LOCK = threading.RLock()
_X11_MODULE = "pyautogui._pyautogui_x11"


def _import_pyautogui(display: str | None) -> tuple[Any, bool]:
    """Import PyAutoGUI (X11 backend on ``display`` if first); returns (module, fresh)."""
    fresh = "pyautogui" not in sys.modules
    try:
        with warnings.catch_warnings():
            # pyautogui's X11 module has an invalid escape sequence ("\e") in its source.
            warnings.simplefilter("ignore", DeprecationWarning)
            if display is not None and fresh:
                with xlib_environment(display):
                    import pyautogui
            else:
                import pyautogui
    except Exception as exc:  # Xlib raises its own errors when the display is unreachable
        raise InputBindingError(f"cannot import pyautogui for display {display!r}: {exc}") from exc
    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    pyautogui.MINIMUM_DURATION = 0
    return pyautogui, fresh


def _connect_x11_backend(x11: Any, display: str) -> tuple[Any, Any]:
    """Re-execute PyAutoGUI's X11 module for ``display``; returns (connection, keymap)."""
    try:
        with xlib_environment(display), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.reload(x11)
    except Exception as exc:
        raise InputBindingError(f"cannot connect to display {display!r}: {exc}") from exc
    return x11._display, x11.keyboardMapping


class PyAutoGUIDriver:
    """Real input through PyAutoGUI with no implicit pauses and the fail-safe off.

    ``display`` is the X display (``":3"``) on Linux (None means $DISPLAY) and None on
    Windows. PyAutoGUI is imported
    on first use, so constructing a driver never touches a display; :class:`InputBindingError`
    is raised by the first call if the display cannot be reached. ``step_s`` is the settle
    time between the press, each move and the release of a drag and between the clicks of a
    multi-click (applications detect drags and double clicks from event order and time, not
    from our sleeps, so a few milliseconds suffice). Calls from several threads are serialized.
    """

    name = "pyautogui"

    def __init__(self, display: str | None = None, *, step_s: float = 0.01) -> None:
        if display is None and sys.platform.startswith("linux"):
            display = os.environ.get("DISPLAY")
        self.display = display
        self.step_s = step_s
        self._size: tuple[int, int] | None = None
        self._closed = False
        self._x11: tuple[Any, Any] | None = None  # this driver's X connection and keymap
        self._held_buttons: set[str] = set()
        self._held_keys: list[str] = []  # in press order

    @property
    def version(self) -> str:
        xlib = f" python-xlib/{_package_version('python3-xlib')}" if self.display else ""
        return f"autocad-bench-input/{DRIVER_PROTOCOL_VERSION} pyautogui/{_package_version('pyautogui')}{xlib}"

    @contextmanager
    def _bound(self) -> Iterator[Any]:
        if self._closed:
            raise InputBindingError("the input driver is closed")
        with _PYAUTOGUI_LOCK:
            gui, fresh = _import_pyautogui(self.display)
            if self.display is not None:
                x11 = sys.modules[_X11_MODULE]
                if self._x11 is None:
                    self._x11 = (
                        (x11._display, x11.keyboardMapping) if fresh else _connect_x11_backend(x11, self.display)
                    )
                setattr(x11, "_display", self._x11[0])  # noqa: B010 - pyautogui module globals
                setattr(x11, "keyboardMapping", self._x11[1])  # noqa: B010
            yield gui

    def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            with self._bound() as gui:
                width, height = gui.size()
            self._size = (int(width), int(height))
        return self._size

    def move(self, x: int, y: int) -> None:
        _check_point(x, y, self.screen_size())
        with self._bound() as gui:
            gui.moveTo(x, y)

    def click(self, x: int, y: int, button: MouseButton = "left", count: int = 1) -> None:
        _check_point(x, y, self.screen_size())
        _check_button(button)
        _check_count(count)
        with self._bound() as gui:
            gui.moveTo(x, y)
            for index in range(count):
                if index:
                    time.sleep(self.step_s)
                gui.mouseDown(x, y, button=button)
                gui.mouseUp(x, y, button=button)

    def drag(self, path: Sequence[Point], button: MouseButton = "left") -> None:
        if len(path) < 2:
            raise InputRejected("a drag needs at least two points")
        size = self.screen_size()
        for x, y in path:
            _check_point(x, y, size)
        _check_button(button)
        (x0, y0), rest = path[0], path[1:]
        with self._bound() as gui:
            gui.moveTo(x0, y0)
            gui.mouseDown(x0, y0, button=button)
            last = (x0, y0)
            try:
                for x, y in rest:
                    time.sleep(self.step_s)
                    gui.moveTo(x, y)
                    last = (x, y)
                time.sleep(self.step_s)
            finally:
                # Never leave a button held down, even if a move failed half-way.
                gui.mouseUp(last[0], last[1], button=button)

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        _check_point(x, y, self.screen_size())
        if not (isinstance(dx, int) and isinstance(dy, int)) or (dx == 0 and dy == 0):
            raise InputRejected(f"scroll needs integer, not both zero dx/dy, got ({dx}, {dy})")
        with self._bound() as gui:
            gui.moveTo(x, y)
            if dy:
                gui.scroll(dy, x=x, y=y)
            if dx:
                gui.hscroll(dx, x=x, y=y)

    def type_text(self, text: str) -> None:
        _check_text(text)
        with self._bound() as gui:
            gui.write(text, interval=0)

    def hotkey(self, keys: Sequence[str]) -> None:
        keys = list(keys)
        _check_keys(keys)
        with self._bound() as gui:
            unsupported = [k for k in keys if not gui.isValidKey(k)]
            if unsupported:
                raise InputRejected(f"keys not available on this desktop: {unsupported!r}")
            gui.hotkey(*keys, interval=0)

    def mouse_down(self, x: int, y: int, button: MouseButton = "left") -> None:
        _check_point(x, y, self.screen_size())
        _check_button(button)
        with self._bound() as gui:
            gui.moveTo(x, y)
            self._held_buttons.add(button)  # before the event: a failure may still have pressed it
            gui.mouseDown(x, y, button=button)

    def mouse_up(self, x: int, y: int, button: MouseButton = "left") -> None:
        _check_point(x, y, self.screen_size())
        _check_button(button)
        with self._bound() as gui:
            gui.moveTo(x, y)
            gui.mouseUp(x, y, button=button)
            self._held_buttons.discard(button)

    def key_down(self, keys: Sequence[str]) -> None:
        keys = list(keys)
        _check_keys(keys)
        with self._bound() as gui:
            unsupported = [k for k in keys if not gui.isValidKey(k)]
            if unsupported:
                raise InputRejected(f"keys not available on this desktop: {unsupported!r}")
            for key in keys:
                if key not in self._held_keys:
                    self._held_keys.append(key)
                gui.keyDown(key)

    def key_up(self, keys: Sequence[str]) -> None:
        keys = list(keys)
        _check_keys(keys)
        with self._bound() as gui:
            for key in reversed(keys):
                gui.keyUp(key)
                if key in self._held_keys:
                    self._held_keys.remove(key)

    def release_all(self) -> None:
        if self._closed or not (self._held_buttons or self._held_keys):
            return
        with self._bound() as gui:
            for key in reversed(self._held_keys):
                with contextlib.suppress(Exception):
                    gui.keyUp(key)
            for button in sorted(self._held_buttons):
                with contextlib.suppress(Exception):
                    gui.mouseUp(button=button)
        self._held_keys.clear()
        self._held_buttons.clear()

    def pointer(self) -> Point | None:
        """X11: ``XQueryPointer`` on the root window through this driver's own connection (the
        one its input goes through: one round trip, no extra process or connection). Windows:
        ``GetCursorPos`` (None when it fails, e.g. on the lock screen). Elsewhere PyAutoGUI's
        ``position()``.
        """
        if sys.platform == "win32":
            with self._bound():  # imports PyAutoGUI first: its DPI awareness sets the coordinate space
                return _windows_cursor_pos()
        with self._bound() as gui:
            if self._x11 is not None:
                reply = self._x11[0].screen().root.query_pointer()
                return (int(reply.root_x), int(reply.root_y))
            x, y = gui.position()
            return (int(x), int(y))

    def close(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(Exception):  # never leave a button or key held down
            self.release_all()
        self._closed = True
        with _PYAUTOGUI_LOCK:
            binding, self._x11 = self._x11, None
            if binding is not None:
                with contextlib.suppress(Exception):  # the X server may already be gone
                    binding[0].close()


def _windows_cursor_pos() -> Point | None:
    """``GetCursorPos`` through ctypes; None when Windows cannot report the cursor."""
    if sys.platform == "win32":  # repeated so that mypy checks ctypes.windll only for Windows
        import ctypes
        from ctypes import wintypes

        point = wintypes.POINT()
        if not ctypes.windll.user32.GetCursorPos(ctypes.byref(point)):
            return None
        return (int(point.x), int(point.y))
    raise InputBindingError("GetCursorPos needs Windows")


# ---------------------------------------------------------------------------------------------
# Recording (tests)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call received by a :class:`RecordingDriver`: method name and its arguments."""

    method: str
    args: tuple[Any, ...]


@dataclass
class RecordingDriver:
    """An :class:`InputDriver` that validates like the real one and records, touching no display.

    Its simulated pointer (:attr:`position`) follows the pointer calls it records (a drag ends
    at its last point); a test plays a move the application made by assigning it.
    """

    size: tuple[int, int] = (1920, 1080)
    calls: list[RecordedCall] = field(default_factory=list)
    closed: bool = False
    held_buttons: set[str] = field(default_factory=set)
    held_keys: list[str] = field(default_factory=list)
    position: Point | None = (0, 0)

    @property
    def version(self) -> str:
        return f"autocad-bench-input/{DRIVER_PROTOCOL_VERSION} recording"

    def _record(self, method: str, *args: Any) -> None:
        if self.closed:
            raise InputBindingError("the input driver is closed")
        self.calls.append(RecordedCall(method, args))

    def screen_size(self) -> tuple[int, int]:
        return self.size

    def move(self, x: int, y: int) -> None:
        _check_point(x, y, self.size)
        self._record("move", x, y)
        self.position = (x, y)

    def click(self, x: int, y: int, button: MouseButton = "left", count: int = 1) -> None:
        _check_point(x, y, self.size)
        _check_button(button)
        _check_count(count)
        self._record("click", x, y, button, count)
        self.position = (x, y)

    def drag(self, path: Sequence[Point], button: MouseButton = "left") -> None:
        if len(path) < 2:
            raise InputRejected("a drag needs at least two points")
        for x, y in path:
            _check_point(x, y, self.size)
        _check_button(button)
        self._record("drag", tuple((int(x), int(y)) for x, y in path), button)
        self.position = (int(path[-1][0]), int(path[-1][1]))

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        _check_point(x, y, self.size)
        if dx == 0 and dy == 0:
            raise InputRejected("scroll needs a non-zero dx or dy")
        self._record("scroll", x, y, dx, dy)
        self.position = (x, y)

    def type_text(self, text: str) -> None:
        _check_text(text)
        self._record("type_text", text)

    def hotkey(self, keys: Sequence[str]) -> None:
        keys = tuple(keys)
        _check_keys(keys)
        self._record("hotkey", keys)

    def mouse_down(self, x: int, y: int, button: MouseButton = "left") -> None:
        _check_point(x, y, self.size)
        _check_button(button)
        self._record("mouse_down", x, y, button)
        self.position = (x, y)
        self.held_buttons.add(button)

    def mouse_up(self, x: int, y: int, button: MouseButton = "left") -> None:
        _check_point(x, y, self.size)
        _check_button(button)
        self._record("mouse_up", x, y, button)
        self.position = (x, y)
        self.held_buttons.discard(button)

    def key_down(self, keys: Sequence[str]) -> None:
        keys = tuple(keys)
        _check_keys(keys)
        self._record("key_down", keys)
        self.held_keys.extend(k for k in keys if k not in self.held_keys)

    def key_up(self, keys: Sequence[str]) -> None:
        keys = tuple(keys)
        _check_keys(keys)
        self._record("key_up", keys)
        for key in keys:
            if key in self.held_keys:
                self.held_keys.remove(key)

    def release_all(self) -> None:
        """Records ``release_all`` with what was held (keys in reverse, buttons sorted), if anything."""
        if self.closed or not (self.held_buttons or self.held_keys):
            return
        self._record("release_all", tuple(reversed(self.held_keys)), tuple(sorted(self.held_buttons)))
        self.held_keys.clear()
        self.held_buttons.clear()

    def pointer(self) -> Point | None:
        """The simulated pointer (:attr:`position`); :class:`InputBindingError` once closed."""
        if self.closed:
            raise InputBindingError("the input driver is closed")
        return self.position

    def close(self) -> None:
        self.release_all()
        self.closed = True
