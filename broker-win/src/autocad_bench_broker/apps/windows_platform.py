"""The Windows seams of the AutoCAD adapter: COM binding and Win32 window/process calls.

:class:`AutoCADCom` and :class:`WindowsPlatform` are the only ways
:class:`~autocad_bench_broker.apps.autocad.AutoCADAdapter` reaches Windows, so tests replace
them with plain Python fakes. :class:`PyWin32Com` and :class:`PyWin32Platform` are the real
implementations; they import pywin32 (and use ctypes) lazily and only work on Windows.

The COM objects themselves (AutoCAD's ``Application`` and ``Document``) are used through the
small structural protocols :class:`AcadApplication` and :class:`AcadDocument`: exactly the
members the adapter touches.
"""

from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class AcadDocument(Protocol):
    """The members of AutoCAD's ActiveX ``Document`` the adapter uses."""

    @property
    def FullName(self) -> str: ...

    @property
    def Saved(self) -> bool: ...

    def Save(self) -> None: ...

    def SaveAs(self, path: str) -> None: ...

    def SendCommand(self, command: str) -> None: ...


class AcadApplication(Protocol):
    """The members of AutoCAD's ActiveX ``Application`` the adapter uses."""

    @property
    def HWND(self) -> int: ...

    @property
    def ActiveDocument(self) -> AcadDocument: ...


class AutoCADCom(Protocol):
    """Finds the AutoCAD ``Application`` COM objects that are running."""

    def running_applications(self) -> Sequence[AcadApplication]:
        """Every AutoCAD Application reachable through the running object table (may be empty)."""
        ...

    def is_quiescent(self, app: AcadApplication) -> bool:
        """True when AutoCAD reports it is idle (no command, no modal state)."""
        ...


@dataclass(frozen=True, slots=True)
class Win32Window:
    """A visible top-level window: handle, owning PID, title and window class."""

    hwnd: int
    pid: int
    title: str
    class_name: str


class WindowsPlatform(Protocol):
    """Win32 window and process operations used by the AutoCAD adapter."""

    def screen_size(self) -> tuple[int, int]: ...

    def window_pid(self, hwnd: int) -> int | None:
        """PID owning ``hwnd``, None if the window no longer exists."""
        ...

    def foreground_window(self) -> int | None: ...

    def is_maximized(self, hwnd: int) -> bool: ...

    def maximize_and_focus(self, hwnd: int) -> None: ...

    def close_window(self, hwnd: int) -> None:
        """Ask the window to close (WM_CLOSE: Cancel for a dialog); ignores vanished windows."""
        ...

    def visible_windows(self) -> list[Win32Window]:
        """Visible top-level windows of every process, in Z order (topmost first)."""
        ...

    def start(self, argv: Sequence[str], cwd: Path) -> int:
        """Start a process in its own process group; returns its PID."""
        ...

    def is_running(self, pid: int) -> bool: ...

    def process_tree(self, pid: int) -> list[int]:
        """``pid`` and all its descendants that are still running."""
        ...

    def find_processes(self, image_name: str) -> list[int]:
        """PIDs of running processes whose executable is ``image_name`` (e.g. ``acad.exe``)."""
        ...

    def terminate(self, pids: Sequence[int], *, force: bool) -> None:
        """Ask (``force=False``) or force the processes to end; ignores vanished PIDs."""
        ...


# -------------------------------------------------------------------------------------------
# Real implementations (Windows only; exercised by the @pytest.mark.windows tests)


def _pywin32(module: str) -> Any:
    """Import a pywin32 module (untyped, Windows only) by name."""
    return importlib.import_module(module)


RPC_E_CALL_REJECTED = -2147418111
"""HRESULT AutoCAD returns while it is busy; the call is retried."""


class PyWin32Com:  # pragma: no cover - needs Windows and AutoCAD
    """COM access through pywin32: the active object plus every document in the ROT."""

    def running_applications(self) -> Sequence[AcadApplication]:
        pythoncom = _pywin32("pythoncom")
        win32com_client = _pywin32("win32com.client")

        pythoncom.CoInitialize()
        found: list[Any] = []
        with contextlib.suppress(Exception):
            found.append(win32com_client.GetActiveObject("AutoCAD.Application"))
        # Every open drawing registers a file moniker in the ROT; its Application property
        # reaches the instance that opened it, even when it is not the "active" instance.
        with contextlib.suppress(Exception):
            rot = pythoncom.GetRunningObjectTable()
            context = pythoncom.CreateBindCtx(0)
            for moniker in rot.EnumRunning():
                name = moniker.GetDisplayName(context, None)
                if not name.lower().endswith((".dwg", ".dxf")):
                    continue
                with contextlib.suppress(Exception):
                    unknown = rot.GetObject(moniker)
                    dispatch = unknown.QueryInterface(pythoncom.IID_IDispatch)
                    found.append(win32com_client.Dispatch(dispatch).Application)
        return found

    def is_quiescent(self, app: AcadApplication) -> bool:
        return bool(app.GetAcadState().IsQuiescent)  # type: ignore[attr-defined]


class PyWin32Platform:  # pragma: no cover - needs Windows
    """Win32 calls through pywin32, ``taskkill`` and a ToolHelp snapshot via ctypes."""

    def screen_size(self) -> tuple[int, int]:
        win32api = _pywin32("win32api")

        return int(win32api.GetSystemMetrics(0)), int(win32api.GetSystemMetrics(1))

    def window_pid(self, hwnd: int) -> int | None:
        win32gui = _pywin32("win32gui")
        win32process = _pywin32("win32process")

        if not win32gui.IsWindow(hwnd):
            return None
        return int(win32process.GetWindowThreadProcessId(hwnd)[1])

    def foreground_window(self) -> int | None:
        win32gui = _pywin32("win32gui")

        hwnd = win32gui.GetForegroundWindow()
        return int(hwnd) if hwnd else None

    def is_maximized(self, hwnd: int) -> bool:
        win32con = _pywin32("win32con")
        win32gui = _pywin32("win32gui")

        return bool(win32gui.GetWindowPlacement(hwnd)[1] == win32con.SW_SHOWMAXIMIZED)

    def maximize_and_focus(self, hwnd: int) -> None:
        win32con = _pywin32("win32con")
        win32gui = _pywin32("win32gui")

        win32gui.ShowWindow(hwnd, win32con.SW_MAXIMIZE)
        win32gui.SetForegroundWindow(hwnd)

    def close_window(self, hwnd: int) -> None:
        win32con = _pywin32("win32con")
        win32gui = _pywin32("win32gui")

        with contextlib.suppress(Exception):
            win32gui.PostMessage(hwnd, win32con.WM_CLOSE, 0, 0)

    def visible_windows(self) -> list[Win32Window]:
        win32gui = _pywin32("win32gui")
        win32process = _pywin32("win32process")

        windows: list[Win32Window] = []

        def collect(hwnd: int, _: object) -> bool:
            if win32gui.IsWindowVisible(hwnd):
                pid = int(win32process.GetWindowThreadProcessId(hwnd)[1])
                windows.append(Win32Window(hwnd, pid, win32gui.GetWindowText(hwnd), win32gui.GetClassName(hwnd)))
            return True

        win32gui.EnumWindows(collect, None)
        return windows

    def start(self, argv: Sequence[str], cwd: Path) -> int:
        flags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        return subprocess.Popen(list(argv), cwd=cwd, creationflags=flags).pid

    def is_running(self, pid: int) -> bool:
        win32api = _pywin32("win32api")
        win32con = _pywin32("win32con")

        still_active = 259
        try:
            handle = win32api.OpenProcess(win32con.PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
        except Exception:
            return False
        try:
            win32process = _pywin32("win32process")

            return bool(win32process.GetExitCodeProcess(handle) == still_active)
        finally:
            win32api.CloseHandle(handle)

    def _snapshot(self) -> list[tuple[int, int, str]]:
        """(pid, parent pid, exe name) of every process, from a ToolHelp snapshot."""
        import ctypes
        from ctypes import wintypes

        class PROCESSENTRY32W(ctypes.Structure):
            _fields_ = [
                ("dwSize", wintypes.DWORD),
                ("cntUsage", wintypes.DWORD),
                ("th32ProcessID", wintypes.DWORD),
                ("th32DefaultHeapID", ctypes.c_size_t),
                ("th32ModuleID", wintypes.DWORD),
                ("cntThreads", wintypes.DWORD),
                ("th32ParentProcessID", wintypes.DWORD),
                ("pcPriClassBase", ctypes.c_long),
                ("dwFlags", wintypes.DWORD),
                ("szExeFile", ctypes.c_wchar * 260),
            ]

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        snapshot = kernel32.CreateToolhelp32Snapshot(0x00000002, 0)
        entries: list[tuple[int, int, str]] = []
        try:
            entry = PROCESSENTRY32W()
            entry.dwSize = ctypes.sizeof(PROCESSENTRY32W)
            ok = kernel32.Process32FirstW(snapshot, ctypes.byref(entry))
            while ok:
                entries.append((int(entry.th32ProcessID), int(entry.th32ParentProcessID), entry.szExeFile))
                ok = kernel32.Process32NextW(snapshot, ctypes.byref(entry))
        finally:
            kernel32.CloseHandle(snapshot)
        return entries

    def process_tree(self, pid: int) -> list[int]:
        entries = self._snapshot()
        tree, frontier = {pid}, [pid]
        while frontier:
            parent = frontier.pop()
            for child, ppid, _ in entries:
                if ppid == parent and child not in tree:
                    tree.add(child)
                    frontier.append(child)
        return sorted(p for p in tree if self.is_running(p))

    def find_processes(self, image_name: str) -> list[int]:
        wanted = image_name.lower()
        return sorted(pid for pid, _, exe in self._snapshot() if exe.lower() == wanted)

    def terminate(self, pids: Sequence[int], *, force: bool) -> None:
        for pid in pids:
            args = ["taskkill", "/PID", str(pid)] + (["/F"] if force else [])
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run(args, capture_output=True, timeout=10, check=False)


def default_platform() -> tuple[AutoCADCom, WindowsPlatform]:
    """The real seams; raises RuntimeError off Windows."""
    if sys.platform != "win32":
        raise RuntimeError("the AutoCAD adapter needs Windows (pass fakes in tests)")
    return PyWin32Com(), PyWin32Platform()  # pragma: no cover
