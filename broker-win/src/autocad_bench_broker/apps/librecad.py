"""LibreCAD on a private X display: the Linux stand-in for AutoCAD.

Facts this adapter relies on (measured with LibreCAD 2.2 on Xvfb, see the shared
``librecad-facts.md``):

- every launch gets a fresh HOME and XDG directories under the adapter's workdir and a
  seeded ``LibreCAD.conf`` (``FirstLoad=0``, English, fixed dock layout, auto-backup off),
  so no welcome dialog appears and no two rollouts share settings;
- ``librecad attempt.dxf`` opens the drawing; the main window is titled
  ``LibreCAD - [attempt.dxf]`` and gains a ``*`` (``[attempt.dxf*]``) when modified;
- with no window manager, the window is placed by ``xdotool`` and keyboard focus must be
  given back explicitly after a dialog closes;
- Ctrl+S on a modified drawing that came from a file rewrites it in place as DXF R2007 with
  no dialog; on an unmodified drawing it does nothing (the file already is the drawing);
- SIGTERM takes up to about 2 s, so kill waits a bounded time before SIGKILL.

The display must be private to the rollout: stale LibreCAD processes are recognised by
their ``DISPLAY`` and killed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO

from autocad_bench.storage import atomic_write_bytes
from autocad_bench_broker.apps.base import (
    ApplicationAdapter,
    CheckpointResult,
    HandoffEvidence,
    KillResult,
    ReadyResult,
    SaveAttempt,
    WindowGeometry,
    monotonic_elapsed,
)
from autocad_bench_broker.apps.drawing_files import (
    dxf_signature,
    file_state,
    sha256_file,
    wait_for_stable_file,
)
from autocad_bench_broker.apps.x11 import X11Session, X11Window
from autocad_bench_broker.drivers.capture import (
    Frame,
    ScreenCapture,
    StabilityPolicy,
    stable_frame,
)
from autocad_bench_broker.errors import AppError, AppLaunchError, CaptureError
from autocad_bench_broker.procgroup import (
    SIGNAL_ORDER,
    SignalName,
    find_processes,
    kill_process_group,
)

_TITLE = re.compile(r"^LibreCAD - \[(?P<name>.*?)(?P<modified>\*?)\]$")

KNOWN_DIALOGS: frozenset[str] = frozenset({"Save Drawing As", "Closing Drawing", "Open Drawing"})
"""Dialog titles observed with LibreCAD 2.2 (file dialogs and the unsaved-changes prompt).

Any dialog fails readiness; those not listed here are also reported as unknown."""


@dataclass(frozen=True)
class LibreCADConfig:
    """Bounds and knobs of :class:`LibreCADAdapter` (defaults follow the measured facts)."""

    executable: str = "librecad"
    window_timeout_s: float = 20.0
    """Launch: longest wait for the main window (measured 0.2-0.4 s)."""
    ready_timeout_s: float = 15.0
    """verify_ready: longest poll for all handoff conditions, including the stable frame."""
    window_height_margin: int = 30
    """The window is placed at 0,0 with the display width and height minus this margin."""
    stability: StabilityPolicy = field(
        default_factory=lambda: StabilityPolicy(window_s=3.0, interval_s=0.15, settle_s=0.1)
    )
    save_attempts: int = 5
    save_timeout_s: float = 10.0
    """Per save attempt: longest wait for the rewritten file to appear and stay stable."""
    dialog_close_timeout_s: float = 2.0
    term_timeout_s: float = 5.0
    kill_timeout_s: float = 3.0
    poll_s: float = 0.05
    known_dialogs: frozenset[str] = KNOWN_DIALOGS


def _parse_title(title: str) -> tuple[str, bool] | None:
    match = _TITLE.match(title)
    if match is None:
        return None
    return match.group("name"), bool(match.group("modified"))


def _default_conf() -> str:
    return resources.files("autocad_bench_broker.apps").joinpath("librecad.conf").read_text()


def render_conf(width: int, height: int, save_dir: Path) -> str:
    """The seeded ``LibreCAD.conf`` for a window of ``width`` x ``height`` at 0,0."""
    values = {"WindowWidth": str(width), "WindowHeight": str(height), "WindowX": "0", "WindowY": "0"}
    lines = []
    for line in _default_conf().splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={values[key]}" if key in values and "=" in line else line)
    lines += ["", "[Paths]", f"Save={save_dir}", ""]
    return "\n".join(lines)


class LibreCADAdapter(ApplicationAdapter):
    """LibreCAD in its own process group on X display ``display``.

    ``workdir`` holds the per-launch HOME/XDG directories and ``librecad.log`` (the program's
    output); the attempt drawing lives wherever the controller says. ``capture`` grabs the
    same display (for the stable first frame). ``x11`` may be injected for tests.
    """

    name = "librecad"

    def __init__(
        self,
        display: str,
        workdir: Path,
        capture: ScreenCapture,
        *,
        config: LibreCADConfig | None = None,
        x11: X11Session | None = None,
    ) -> None:
        self.display = display
        self.workdir = Path(workdir)
        self.capture = capture
        self.config = config or LibreCADConfig()
        self.x11 = x11 or X11Session(display)
        self._proc: subprocess.Popen[bytes] | None = None
        self._attempt: Path | None = None
        self.launch_s: float | None = None

    # -- properties ----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def attempt_path(self) -> Path | None:
        return self._attempt

    @property
    def home(self) -> Path:
        return self.workdir / "home"

    @property
    def log_path(self) -> Path:
        return self.workdir / "librecad.log"

    def target_geometry(self) -> WindowGeometry:
        width, height = self.x11.screen_size()
        return WindowGeometry(x=0, y=0, width=width, height=height - self.config.window_height_margin)

    # -- launch --------------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        runtime = self.workdir / "runtime"
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "DISPLAY": self.display,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_RUNTIME_DIR": str(runtime),
            "TMPDIR": str(self.workdir / "tmp"),
            "QT_QPA_PLATFORM": "xcb",
            "QT_ACCESSIBILITY": "0",
            "NO_AT_BRIDGE": "1",
        }
        if "XAUTHORITY" in os.environ:
            env["XAUTHORITY"] = os.environ["XAUTHORITY"]
        return env

    def _prepare_dirs(self, attempt_path: Path) -> None:
        # A fresh HOME per launch: settings written by a previous instance never leak in.
        shutil.rmtree(self.home, ignore_errors=True)
        for directory in (
            self.home / ".config" / "LibreCAD",
            self.home / ".local" / "share",
            self.home / ".cache",
            self.workdir / "tmp",
        ):
            directory.mkdir(parents=True, exist_ok=True)
        runtime = self.workdir / "runtime"
        shutil.rmtree(runtime, ignore_errors=True)
        runtime.mkdir(parents=True)
        for private in (self.home, self.home / ".config", runtime):
            private.chmod(0o700)  # XDG_RUNTIME_DIR must be 0700; settings stay private too
        geometry = self.target_geometry()
        conf = render_conf(geometry.width, geometry.height, attempt_path.parent)
        (self.home / ".config" / "LibreCAD" / "LibreCAD.conf").write_text(conf)

    @staticmethod
    def _restore_template(template: Path, attempt_path: Path) -> None:
        # Atomic but not fsynced: the attempt drawing only has to survive this broker run.
        attempt_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(attempt_path, template.read_bytes(), durable=False)
        Path(f"{attempt_path}~").unlink(missing_ok=True)  # LibreCAD's save backup

    def launch(self, template: Path, attempt_path: Path) -> None:
        started = time.monotonic()
        template, attempt_path = Path(template), Path(attempt_path).absolute()
        if not template.is_file():
            raise AppLaunchError(f"template {template} does not exist")
        if shutil.which(self.config.executable) is None:
            raise AppLaunchError(f"{self.config.executable!r} not found (apt-get install librecad)")
        self.kill()
        try:
            self._restore_template(template, attempt_path)
            self._prepare_dirs(attempt_path)
        except OSError as exc:
            raise AppLaunchError(f"cannot prepare the attempt: {exc}") from exc
        except AppError as exc:
            raise AppLaunchError(f"display {self.display} is not usable: {exc}") from exc
        self._attempt = attempt_path
        log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                [self.config.executable, str(attempt_path)],
                env=self._environment(),
                cwd=attempt_path.parent,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise AppLaunchError(f"cannot start {self.config.executable}: {exc}") from exc
        finally:
            log.close()
        try:
            window = self._wait_for_main_window()
            geometry = self.target_geometry()
            self.x11.move_resize(window.id, geometry.x, geometry.y, geometry.width, geometry.height)
            self.x11.raise_and_focus(window.id)
        except AppError as exc:
            self.kill()
            raise AppLaunchError(str(exc)) from exc
        self.launch_s = monotonic_elapsed(started)

    def _log_tail(self, limit: int = 600) -> str:
        try:
            return self.log_path.read_bytes()[-limit:].decode(errors="replace").strip()
        except OSError:
            return ""

    def _wait_for_main_window(self) -> X11Window:
        deadline = time.monotonic() + self.config.window_timeout_s
        while True:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc is not None else None
                raise AppError(f"librecad exited with {code} before its window appeared: {self._log_tail()!r}")
            window = self._main_window()
            if window is not None:
                return window
            if time.monotonic() >= deadline:
                raise AppError(f"no LibreCAD window within {self.config.window_timeout_s:.1f} s")
            time.sleep(self.config.poll_s)

    # -- windows -------------------------------------------------------------------------------

    def _main_window(self, windows: list[X11Window] | None = None) -> X11Window | None:
        """Our visible main window (not a dialog, menu or splash), from ``windows`` or now."""
        for window in self.x11.top_level_windows() if windows is None else windows:
            if (
                window.pid == self.pid
                and not window.is_dialog
                and not window.is_popup
                and not window.is_splash
                and window.name.startswith("LibreCAD")
                and window.width > 1
            ):
                return window
        return None

    def dialogs(self) -> list[X11Window]:
        """Visible dialog windows of any process on this display (topmost last)."""
        return [w for w in self.x11.top_level_windows() if w.is_dialog]

    def _close_dialogs(self) -> tuple[str, ...]:
        """Escape every visible dialog (topmost first) and wait, bounded, until they are gone."""
        closed: list[str] = []
        deadline = time.monotonic() + self.config.dialog_close_timeout_s
        while True:
            dialogs = self.dialogs()
            if not dialogs:
                return tuple(closed)
            if time.monotonic() >= deadline:
                names = ", ".join(repr(d.name) for d in dialogs)
                raise AppError(f"dialogs did not close: {names}")
            top = dialogs[-1]
            if not closed or closed[-1] != top.name:
                closed.append(top.name)
            self.x11.raise_and_focus(top.id)
            self.x11.key("Escape")
            time.sleep(self.config.poll_s * 2)

    # -- verify --------------------------------------------------------------------------------

    def _observe(self, started: float, repair: bool) -> tuple[HandoffEvidence, X11Window | None]:
        failures: list[str] = []
        alive = self._proc is not None and self._proc.poll() is None
        if not alive:
            failures.append("librecad is not running")
        stale = tuple(p for p in self._stale_pids() if p != self.pid)
        if stale:
            failures.append(f"stale librecad processes on this display: {list(stale)}")
        windows = self.x11.top_level_windows()  # one snapshot for every window check
        foreign = [w for w in windows if w.pid is not None and w.pid != self.pid and not w.is_popup]
        if foreign:
            failures.append(f"windows of other processes: {[w.name for w in foreign]}")
        window = self._main_window(windows) if alive else None
        geometry = self.target_geometry()
        dialogs = [w for w in windows if w.is_dialog]
        if any(w.is_splash for w in windows):
            failures.append("the splash screen is still visible")
        dialog_names = tuple(d.name for d in dialogs)
        unknown = tuple(n for n in dialog_names if n not in self.config.known_dialogs)
        if dialogs:
            failures.append(f"dialogs are open: {list(dialog_names)}")
        title = window.name if window else None
        loaded = False
        maximized = foreground = False
        if window is None:
            if alive:
                failures.append("the LibreCAD main window is not visible")
        else:
            parsed = _parse_title(window.name)
            attempt_name = self._attempt.name if self._attempt else None
            loaded = parsed is not None and parsed == (attempt_name, False)
            if not loaded:
                failures.append(f"window title {window.name!r} does not show the unmodified attempt")
            actual = WindowGeometry(x=window.x, y=window.y, width=window.width, height=window.height)
            maximized = actual == geometry
            foreground = self.x11.focused_top_level() == window.id
            if repair and not dialogs and not (maximized and foreground):
                # Before handoff it is legitimate to put the window in place again.
                self.x11.move_resize(window.id, geometry.x, geometry.y, geometry.width, geometry.height)
                self.x11.raise_and_focus(window.id)
            if not maximized:
                failures.append(f"window geometry {actual.model_dump()} is not {geometry.model_dump()}")
            if not foreground:
                failures.append("the LibreCAD window does not have keyboard focus")
        evidence = HandoffEvidence(
            app=self.name,
            pid=self.pid,
            process_alive=alive,
            stale_pids=stale,
            window_id=window.id if window else None,
            window_title=title,
            window_geometry=(
                WindowGeometry(x=window.x, y=window.y, width=window.width, height=window.height) if window else None
            ),
            display_size=self.x11.screen_size(),
            maximized=maximized,
            foreground=foreground,
            document_loaded=loaded,
            dialogs=dialog_names,
            unknown_dialogs=unknown,
            elapsed_s=monotonic_elapsed(started),
            failures=tuple(failures),
        )
        return evidence, window

    def _stale_pids(self) -> tuple[int, ...]:
        return find_processes(Path(self.config.executable).name, {"DISPLAY": self.display})

    def verify_ready(self) -> ReadyResult:
        started = time.monotonic()
        deadline = started + self.config.ready_timeout_s
        evidence: HandoffEvidence | None = None
        while True:
            try:
                evidence, _ = self._observe(started, repair=True)
                if evidence.ok:
                    evidence, frame = self._with_initial_frame(started)
                    if evidence.ok or time.monotonic() >= deadline:
                        return ReadyResult(evidence=evidence, frame=frame)
            except Exception as exc:  # display problems become evidence, not exceptions
                evidence = HandoffEvidence(
                    app=self.name,
                    pid=self.pid,
                    process_alive=self._proc is not None and self._proc.poll() is None,
                    display_size=(0, 0),
                    elapsed_s=monotonic_elapsed(started),
                    failures=(f"cannot inspect the display: {type(exc).__name__}: {exc}",),
                )
            if time.monotonic() >= deadline:
                return ReadyResult(evidence=evidence, frame=None)
            time.sleep(self.config.poll_s)

    def _with_initial_frame(self, started: float) -> tuple[HandoffEvidence, Frame | None]:
        """Grab the stable first frame, then observe again: the frame must show that state."""
        frame: Frame | None = None
        capture_error = None
        stable = False
        try:
            frame, stable = stable_frame(self.capture, self.config.stability)
        except CaptureError as exc:
            capture_error = f"cannot capture the display: {exc}"
        after, _ = self._observe(started, repair=False)
        failures = list(after.failures)
        if capture_error:
            failures.append(capture_error)
        elif not stable:
            failures.append("the initial frame did not become stable")
        evidence = after.model_copy(
            update={
                "initial_frame_stable": stable,
                "initial_frame_sha256": frame.sha256 if frame else None,
                "failures": tuple(failures),
                "elapsed_s": monotonic_elapsed(started),
            }
        )
        return evidence, frame

    # -- checkpoint ----------------------------------------------------------------------------

    def checkpoint(self) -> CheckpointResult:
        started = time.monotonic()
        attempts: list[SaveAttempt] = []
        path = self._attempt
        if path is None:
            return CheckpointResult(ok=False, path="", error="nothing was launched")
        for number in range(1, self.config.save_attempts + 1):
            attempt_started = time.monotonic()
            closed: tuple[str, ...] = ()
            method = "ctrl+s"
            if self._proc is None or self._proc.poll() is not None:
                # Retrying cannot help: the unsaved drawing died with the process.
                attempts.append(
                    SaveAttempt(
                        number=number,
                        method=method,
                        error="librecad is not running: unsaved changes are lost",
                        elapsed_s=0.0,
                    )
                )
                break
            try:
                closed = self._close_dialogs()
                method = self._save_once(path)
                signature = self._validate(path)
            except Exception as exc:  # never raise from a checkpoint: report the attempt
                attempts.append(
                    SaveAttempt(
                        number=number,
                        method=method,
                        error=str(exc) if isinstance(exc, AppError) else f"{type(exc).__name__}: {exc}",
                        dialogs_closed=closed,
                        elapsed_s=monotonic_elapsed(attempt_started),
                    )
                )
                time.sleep(min(0.2 * number, 1.0))
                continue
            attempts.append(
                SaveAttempt(
                    number=number,
                    method=method,
                    dialogs_closed=closed,
                    elapsed_s=monotonic_elapsed(attempt_started),
                )
            )
            state = file_state(path)
            return CheckpointResult(
                ok=True,
                path=str(path),
                size_bytes=state.size if state else None,
                sha256=sha256_file(path),
                signature=signature,
                attempts=tuple(attempts),
                elapsed_s=monotonic_elapsed(started),
            )
        return CheckpointResult(
            ok=False,
            path=str(path),
            attempts=tuple(attempts),
            error=attempts[-1].error if attempts else "no save attempt ran",
            elapsed_s=monotonic_elapsed(started),
        )

    def _save_once(self, path: Path) -> str:
        """Focus, cancel transient commands, Ctrl+S if modified; returns the method used."""
        window = self._main_window()
        if window is None:
            raise AppError("the LibreCAD main window is not visible")
        self.x11.raise_and_focus(window.id)
        # Two Escapes end any running command (and close an open menu) before saving.
        self.x11.key("Escape", "Escape")
        window = self._main_window()
        parsed = _parse_title(window.name) if window else None
        if parsed is None:
            raise AppError(f"unexpected window title {window.name if window else None!r}")
        name, modified = parsed
        if name != path.name:
            raise AppError(f"the document is {name!r}, not the attempt file {path.name!r}")
        if not modified:
            state, reason = wait_for_stable_file(path, changed_from=None, timeout_s=self.config.save_timeout_s)
            if state is None:
                raise AppError(f"unmodified drawing, but the attempt file is unusable: {reason}")
            return "unmodified"
        before = file_state(path)
        self.x11.key("ctrl+s")

        def dialog_appeared() -> str | None:
            dialogs = self.dialogs()
            if dialogs:
                return f"dialog appeared while saving: {[d.name for d in dialogs]}"
            return None

        state, reason = wait_for_stable_file(
            path,
            changed_from=before,
            timeout_s=self.config.save_timeout_s,
            give_up=dialog_appeared,
        )
        if state is None:
            if self.dialogs():
                self._close_dialogs()
            raise AppError(reason or "save failed")
        return "ctrl+s"

    @staticmethod
    def _validate(path: Path) -> str:
        signature = dxf_signature(path)
        if signature is None:
            raise AppError(f"{path.name} does not start with a DXF signature")
        try:
            from ezdxf.filemanagement import readfile

            readfile(path)
        except Exception as exc:  # ezdxf raises IOError or DXFStructureError subclasses
            raise AppError(f"{path.name} is not a readable DXF: {exc}") from exc
        return signature

    # -- kill ----------------------------------------------------------------------------------

    def kill(self) -> KillResult:
        started = time.monotonic()
        proc, self._proc = self._proc, None
        pid = proc.pid if proc is not None else None
        groups = {pid} if pid is not None else set()
        for stale in self._stale_pids():
            try:
                groups.add(os.getpgid(stale))
            except ProcessLookupError:
                continue
        strongest: SignalName = "none"
        remaining: set[int] = set()
        for pgid in sorted(groups):
            outcome = kill_process_group(
                pgid,
                leader=proc if pgid == pid else None,
                term_timeout_s=self.config.term_timeout_s,
                kill_timeout_s=self.config.kill_timeout_s,
            )
            strongest = max(strongest, outcome.signal_sent, key=SIGNAL_ORDER.index)
            remaining.update(outcome.remaining_pids)
        return KillResult(
            pid=pid,
            signal_sent=strongest,
            remaining_pids=tuple(sorted(remaining)),
            elapsed_s=monotonic_elapsed(started),
        )

    def close(self) -> None:
        """Release the X connection (the program itself is left alone: call kill first)."""
        self.x11.close()
