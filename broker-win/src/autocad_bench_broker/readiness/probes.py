"""Platform probes: the desktop this process injects into, the real pointer, the current boot.

The small ``ctypes`` calls here (``GetProcessWindowStation``, ``GetCursorPos``,
``GetTickCount64``, ...) run only on Windows; on Linux the same facts come from the X display
(``XQueryPointer``) and ``/proc``. Used by the prewarm and by the current-boot check; a probe
that cannot read its value returns None, and one called on the wrong platform raises
:class:`ReadinessError`.
"""

from __future__ import annotations

import getpass
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autocad_bench_broker.identity import IdentityError, display_number
from autocad_bench_broker.identity import boot_id as current_boot_id
from autocad_bench_broker.readiness.common import Point, ReadinessError


@dataclass(frozen=True)
class DesktopInfo:
    """Where this process injects input.

    Windows: the window station and thread desktop of the process (must be ``WinSta0`` and
    ``Default``), the current input desktop (``Default`` unless the lock or UAC screen is up,
    None if it cannot be opened), the process's session and the active console session.
    Linux: no window station or desktop; ``session_id`` is the X display number.
    """

    window_station: str | None
    desktop: str | None
    input_desktop: str | None
    session_id: int | None
    console_session_id: int | None
    user: str | None
    windows: bool


PointerReader = Callable[[], Point | None]
"""Reads the real pointer position, independently of the input driver (None: unreadable)."""


def desktop_info(display: str | None) -> DesktopInfo:
    """:class:`DesktopInfo` of this process (``display`` is the X display on Linux)."""
    if sys.platform == "win32":
        return _windows_desktop_info()
    session: int | None = None
    if display is not None:
        try:
            session = display_number(display)
        except IdentityError:
            session = None
    return DesktopInfo(None, None, None, session, None, _user(), windows=False)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment or the password database
        return None


def _windows_desktop_info() -> DesktopInfo:
    if sys.platform == "win32":  # repeated so that mypy checks ctypes.windll only for Windows
        import ctypes
        from ctypes import wintypes

        # Private library objects: the prototypes set here never leak into PyAutoGUI's calls.
        user32 = ctypes.WinDLL("user32", use_last_error=True)
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        user32.GetProcessWindowStation.restype = wintypes.HANDLE
        user32.GetProcessWindowStation.argtypes = []
        user32.GetThreadDesktop.restype = wintypes.HANDLE
        user32.GetThreadDesktop.argtypes = [wintypes.DWORD]
        user32.OpenInputDesktop.restype = wintypes.HANDLE
        user32.OpenInputDesktop.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        user32.CloseDesktop.argtypes = [wintypes.HANDLE]
        user32.GetUserObjectInformationW.restype = wintypes.BOOL
        user32.GetUserObjectInformationW.argtypes = [
            wintypes.HANDLE,
            ctypes.c_int,
            ctypes.c_void_p,
            wintypes.DWORD,
            ctypes.POINTER(wintypes.DWORD),
        ]
        kernel32.GetCurrentThreadId.restype = wintypes.DWORD
        kernel32.WTSGetActiveConsoleSessionId.restype = wintypes.DWORD

        def object_name(handle: int | None) -> str | None:
            if not handle:
                return None
            buffer = ctypes.create_unicode_buffer(256)
            needed = wintypes.DWORD(0)
            uoi_name = 2
            if not user32.GetUserObjectInformationW(
                handle, uoi_name, buffer, ctypes.sizeof(buffer), ctypes.byref(needed)
            ):
                return None
            return str(buffer.value)

        station = object_name(user32.GetProcessWindowStation())
        thread_desktop = object_name(user32.GetThreadDesktop(kernel32.GetCurrentThreadId()))
        desktop_readobjects = 0x0001
        handle = user32.OpenInputDesktop(0, False, desktop_readobjects)
        input_desktop = object_name(handle)
        if handle:
            user32.CloseDesktop(handle)
        session = wintypes.DWORD(0)
        session_id = int(session.value) if kernel32.ProcessIdToSessionId(os.getpid(), ctypes.byref(session)) else None
        console = int(kernel32.WTSGetActiveConsoleSessionId())
        return DesktopInfo(
            station,
            thread_desktop,
            input_desktop,
            session_id,
            None if console == 0xFFFFFFFF else console,
            _user(),
            windows=True,
        )
    raise ReadinessError("not running on Windows")


class _WindowsPointer:
    """``GetCursorPos`` (None when the cursor cannot be read, e.g. on a locked desktop)."""

    def __call__(self) -> Point | None:
        if sys.platform == "win32":
            import ctypes
            from ctypes import wintypes

            point = wintypes.POINT()
            if not ctypes.windll.user32.GetCursorPos(ctypes.byref(point)):
                return None
            return (int(point.x), int(point.y))
        raise ReadinessError("not running on Windows")

    def close(self) -> None:
        return None


class _X11Pointer:
    """``XQueryPointer`` on the root window of ``display`` through a connection of its own."""

    def __init__(self, display: str) -> None:
        from Xlib import display as xdisplay

        from autocad_bench_broker.xenv import xlib_environment

        with xlib_environment(display):
            self._display = xdisplay.Display(display)

    def __call__(self) -> Point | None:
        reply = self._display.screen().root.query_pointer()
        return (int(reply.root_x), int(reply.root_y))

    def close(self) -> None:
        self._display.close()


def pointer_reader(display: str | None) -> _WindowsPointer | _X11Pointer:
    """The platform's independent pointer reader (call ``close()`` when done)."""
    if sys.platform == "win32":
        return _WindowsPointer()
    name = display if display is not None else os.environ.get("DISPLAY")
    if not name:
        raise ReadinessError("no X display to read the pointer from")
    return _X11Pointer(name)


@dataclass(frozen=True)
class BootInfo:
    """The current boot as far as it can be determined (None: not checkable here)."""

    boot_id: str | None
    booted_at: datetime | None


def current_boot() -> BootInfo:
    """Boot id (:func:`~autocad_bench_broker.identity.boot_id`) and boot time of this machine.

    Boot time: Windows, now minus ``GetTickCount64``; Linux, ``btime`` of ``/proc/stat``.
    Either part is None when it cannot be read.
    """
    try:
        identity: str | None = current_boot_id()
    except IdentityError:
        identity = None
    return BootInfo(identity, _boot_time())


def _boot_time() -> datetime | None:
    if sys.platform == "win32":
        import ctypes

        ticks_ms = int(ctypes.windll.kernel32.GetTickCount64())
        return datetime.fromtimestamp(time.time() - ticks_ms / 1000.0, UTC)
    try:
        for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), UTC)
    except (OSError, ValueError):
        return None
    return None
