"""Top-level windows of one X display: read them with python-xlib, act on them with xdotool.

Without a window manager (the Xvfb stand-in desktop runs none), the CAD application's main
window, its dialogs and its popup menus are all direct children of the root window, so the
root's children are the complete list of what a user could see. Reading goes through
python-xlib (installed with PyAutoGUI on Linux) because it exposes the properties that tell
a dialog from a menu (override-redirect, ``_NET_WM_WINDOW_TYPE``, ``_NET_WM_STATE``,
``WM_TRANSIENT_FOR``); moving, resizing, focusing and key presses go through ``xdotool``.

One :class:`X11Session` must be used by one thread at a time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from autocad_bench_broker.errors import AppError
from autocad_bench_broker.xenv import xlib_environment

DIALOG_TYPE = "_NET_WM_WINDOW_TYPE_DIALOG"
MODAL_STATE = "_NET_WM_STATE_MODAL"
SPLASH_TYPE = "_NET_WM_WINDOW_TYPE_SPLASH"


@dataclass(frozen=True, slots=True)
class X11Window:
    """What one top-level window looks like right now."""

    id: int
    name: str
    pid: int | None
    wm_class: tuple[str, ...]
    x: int
    y: int
    width: int
    height: int
    viewable: bool
    override_redirect: bool
    window_types: tuple[str, ...]
    states: tuple[str, ...]
    transient_for: int | None

    @property
    def geometry(self) -> tuple[int, int, int, int]:
        return self.x, self.y, self.width, self.height

    @property
    def is_popup(self) -> bool:
        """Menus, tooltips and other override-redirect windows (they close on Escape/click)."""
        return self.override_redirect

    @property
    def is_splash(self) -> bool:
        """A start-up splash screen (closes by itself once the application is up)."""
        return SPLASH_TYPE in self.window_types

    @property
    def is_dialog(self) -> bool:
        """A managed window that asks for the user's attention before the main window."""
        if self.override_redirect or SPLASH_TYPE in self.window_types:
            return False
        return DIALOG_TYPE in self.window_types or MODAL_STATE in self.states or self.transient_for is not None


class X11Session:
    """Inspect and act on the top-level windows of ``display`` (e.g. ``":3"``).

    The X connection opens lazily. Reads never raise for windows that disappear while they
    are inspected; :class:`AppError` is raised when the display itself is unreachable or an
    xdotool command fails or exceeds ``command_timeout_s``.
    """

    def __init__(self, display: str, *, xdotool: str = "xdotool", command_timeout_s: float = 5.0) -> None:
        self.display = display
        self.xdotool = xdotool
        self.command_timeout_s = command_timeout_s
        self._conn: Any = None
        self._atom_names: dict[int, str] = {}

    # -- reading (python-xlib) ---------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is None:
            try:
                from Xlib import display as xdisplay

                with xlib_environment(self.display):
                    self._conn = xdisplay.Display(self.display)
            except Exception as exc:
                raise AppError(f"cannot open X display {self.display!r}: {exc}") from exc
        return self._conn

    def _atom_name(self, atom: int) -> str:
        if atom not in self._atom_names:
            self._atom_names[atom] = str(self._connection().get_atom_name(atom))
        return self._atom_names[atom]

    def _atoms_property(self, window: Any, name: str) -> tuple[str, ...]:
        from Xlib import X

        prop = window.get_full_property(self._connection().intern_atom(name), X.AnyPropertyType)
        if prop is None:
            return ()
        return tuple(self._atom_name(int(atom)) for atom in prop.value)

    def _describe(self, window: Any) -> X11Window:
        from Xlib import X, Xatom

        conn = self._connection()
        attrs = window.get_attributes()
        geom = window.get_geometry()
        name = ""
        prop = window.get_full_property(conn.intern_atom("_NET_WM_NAME"), X.AnyPropertyType)
        if prop is not None and prop.value:
            raw = prop.value
            name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        else:
            wm_name = window.get_wm_name()
            if wm_name:
                name = wm_name.decode("latin-1") if isinstance(wm_name, bytes) else str(wm_name)
        pid_prop = window.get_full_property(conn.intern_atom("_NET_WM_PID"), Xatom.CARDINAL)
        pid = int(pid_prop.value[0]) if pid_prop is not None and len(pid_prop.value) else None
        transient = window.get_wm_transient_for()
        wm_class = window.get_wm_class() or ()
        return X11Window(
            id=int(window.id),
            name=name,
            pid=pid,
            wm_class=tuple(str(part) for part in wm_class),
            x=int(geom.x),
            y=int(geom.y),
            width=int(geom.width),
            height=int(geom.height),
            viewable=attrs.map_state == X.IsViewable,
            override_redirect=bool(attrs.override_redirect),
            window_types=self._atoms_property(window, "_NET_WM_WINDOW_TYPE"),
            states=self._atoms_property(window, "_NET_WM_STATE"),
            transient_for=int(transient.id) if transient is not None else None,
        )

    def top_level_windows(self, *, viewable_only: bool = True) -> list[X11Window]:
        """Children of the root window, bottom to top of the stacking order."""
        from Xlib import error as xerror

        conn = self._connection()
        try:
            children = conn.screen().root.query_tree().children
            windows = []
            for child in children:
                try:
                    info = self._describe(child)
                except xerror.XError:  # the window vanished while we looked
                    continue
                if info.viewable or not viewable_only:
                    windows.append(info)
        except Exception as exc:  # connection closed, server gone, protocol errors
            self._drop_connection()
            raise AppError(f"cannot list windows on {self.display!r}: {exc}") from exc
        return windows

    def _drop_connection(self) -> None:
        """Forget a broken connection so that the next call reconnects."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def focused_top_level(self) -> int | None:
        """The top-level window that holds keyboard focus (None: root, none or PointerRoot)."""
        from Xlib import X
        from Xlib import error as xerror

        conn = self._connection()
        root = conn.screen().root
        try:
            window = conn.get_input_focus().focus
            if window is None or isinstance(window, int) or window in (X.NONE, X.PointerRoot):
                return None
            while True:
                parent = window.query_tree().parent
                if not hasattr(parent, "id") or int(parent.id) == int(root.id):
                    break
                window = parent
        except xerror.XError:
            return None
        except Exception as exc:
            self._drop_connection()
            raise AppError(f"cannot read the input focus on {self.display!r}: {exc}") from exc
        wid = int(window.id)
        return None if wid == int(root.id) else wid

    def screen_size(self) -> tuple[int, int]:
        screen = self._connection().screen()
        return int(screen.width_in_pixels), int(screen.height_in_pixels)

    def close(self) -> None:
        self._drop_connection()

    # -- acting (xdotool) ----------------------------------------------------------------------

    def _xdotool(self, *args: str) -> str:
        executable = shutil.which(self.xdotool)
        if executable is None:
            raise AppError(f"{self.xdotool!r} not found on PATH (apt-get install xdotool)")
        env = {"DISPLAY": self.display}
        if "XAUTHORITY" in os.environ:
            env["XAUTHORITY"] = os.environ["XAUTHORITY"]
        try:
            done = subprocess.run(
                [executable, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=self.command_timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise AppError(f"xdotool {' '.join(args)} timed out") from exc
        if done.returncode != 0:
            raise AppError(f"xdotool {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def move_resize(self, window: int, x: int, y: int, width: int, height: int) -> None:
        """Place ``window`` at ``(x, y)`` with the given size (honoured without a WM)."""
        wid = str(window)
        self._xdotool("windowmove", wid, str(x), str(y), "windowsize", wid, str(width), str(height))

    def raise_and_focus(self, window: int) -> None:
        """Raise ``window`` and give it keyboard focus (waits for the focus change)."""
        wid = str(window)
        self._xdotool("windowraise", wid, "windowfocus", "--sync", wid)

    def key(self, *keys: str) -> None:
        """Press each xdotool key spec in turn (``"Escape"``, ``"ctrl+s"``) on the focus."""
        self._xdotool("key", "--clearmodifiers", *keys)
