"""AutoCAD on Windows through ActiveX/COM: the production application adapter.

The adapter starts ``acad.exe`` on the restored attempt drawing and binds to *that* process:
a COM ``Application`` object is accepted only if the process owning its main window
(``Application.HWND``) is the PID we started. Every checkpoint re-checks the binding, brings
the window to the front, cancels transient commands with ``SendCommand`` (two ESC), and saves
with ``Save`` (or ``SaveAs`` when the document is no longer the attempt path). A save counts
only when the attempt file then has a stable size/mtime and starts with an ``AC10xx`` DWG
version signature; five attempts are made (AutoCAD rejects COM calls while busy).

All Windows access goes through :class:`~autocad_bench_broker.apps.windows_platform.AutoCADCom`
and :class:`~autocad_bench_broker.apps.windows_platform.WindowsPlatform`, so the adapter is
unit-tested with fakes; ``clock`` and ``sleep`` are injectable for the same reason.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autocad_bench_broker.apps.base import (
    ApplicationAdapter,
    CheckpointResult,
    HandoffEvidence,
    KillResult,
    ReadyResult,
    SaveAttempt,
    monotonic_elapsed,
)
from autocad_bench_broker.apps.drawing_files import (
    dwg_signature,
    file_state,
    sha256_file,
    wait_for_stable_file,
)
from autocad_bench_broker.apps.windows_platform import (
    AcadApplication,
    AutoCADCom,
    Win32Window,
    WindowsPlatform,
    default_platform,
)
from autocad_bench_broker.drivers.capture import Frame, ScreenCapture, StabilityPolicy, stable_frame
from autocad_bench_broker.errors import AppError, AppLaunchError, CaptureError

DIALOG_CLASS = "#32770"
"""Win32 class of standard dialog boxes (AutoCAD's modal dialogs and message boxes)."""

CANCEL_COMMAND = "\x1b\x1b"


@dataclass(frozen=True)
class AutoCADConfig:
    """Paths and bounds of :class:`AutoCADAdapter`."""

    executable: Path = Path(r"C:\Program Files\Autodesk\AutoCAD 2019\acad.exe")
    extra_args: tuple[str, ...] = ("/nologo",)
    image_name: str = "acad.exe"
    bind_timeout_s: float = 180.0
    """Launch: longest wait for a COM Application bound to the started PID (cold start)."""
    ready_timeout_s: float = 60.0
    poll_s: float = 0.5
    stability: StabilityPolicy = field(
        default_factory=lambda: StabilityPolicy(window_s=5.0, interval_s=0.25, settle_s=0.2)
    )
    save_attempts: int = 5
    save_timeout_s: float = 30.0
    """Per save attempt: longest wait for a stable, signature-valid DWG."""
    kill_timeout_s: float = 15.0
    known_dialogs: frozenset[str] = frozenset()
    """Dialog titles that may be closed before handoff; any other dialog fails readiness."""


def _same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.normcase(os.path.normpath(str(a))) == os.path.normcase(os.path.normpath(str(b)))


class AutoCADAdapter(ApplicationAdapter):
    """AutoCAD (``acad.exe``) driven through COM on the interactive Windows desktop."""

    name = "autocad"

    def __init__(
        self,
        capture: ScreenCapture,
        *,
        config: AutoCADConfig | None = None,
        com: AutoCADCom | None = None,
        platform: WindowsPlatform | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if com is None or platform is None:
            default_com, default_win = default_platform()
            com = com or default_com
            platform = platform or default_win
        self.capture = capture
        self.config = config or AutoCADConfig()
        self.com = com
        self.platform = platform
        self._clock = clock
        self._sleep = sleep
        self._pid: int | None = None
        self._app: AcadApplication | None = None
        self._attempt: Path | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def attempt_path(self) -> Path | None:
        return self._attempt

    # -- binding -------------------------------------------------------------------------------

    def _app_pid(self, app: AcadApplication) -> int | None:
        try:
            return self.platform.window_pid(int(app.HWND))
        except Exception:  # a dead or busy COM server
            return None

    def bound_application(self) -> AcadApplication:
        """The COM Application of exactly our PID (re-bound if needed); raises AppError."""
        if self._pid is None:
            raise AppError("AutoCAD was not launched")
        if self._app is not None and self._app_pid(self._app) == self._pid:
            return self._app
        self._app = None
        for app in self.com.running_applications():
            if self._app_pid(app) == self._pid:
                self._app = app
                return app
        raise AppError(f"no AutoCAD COM object belongs to PID {self._pid}")

    # -- launch --------------------------------------------------------------------------------

    def launch(self, template: Path, attempt_path: Path) -> None:
        template, attempt_path = Path(template), Path(attempt_path)
        if not template.is_file():
            raise AppLaunchError(f"template {template} does not exist")
        self.kill()
        try:
            attempt_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, attempt_path)
            attempt_path.with_suffix(".bak").unlink(missing_ok=True)
        except OSError as exc:
            raise AppLaunchError(f"cannot restore the template: {exc}") from exc
        self._attempt = attempt_path
        argv = [str(self.config.executable), str(attempt_path), *self.config.extra_args]
        try:
            self._pid = self.platform.start(argv, attempt_path.parent)
        except OSError as exc:
            raise AppLaunchError(f"cannot start AutoCAD: {exc}") from exc
        deadline = self._clock() + self.config.bind_timeout_s
        while True:
            if not self.platform.is_running(self._pid):
                pid, self._pid = self._pid, None
                raise AppLaunchError(f"acad.exe (PID {pid}) exited during start-up")
            try:
                app = self.bound_application()
                self.platform.maximize_and_focus(int(app.HWND))
                return
            except AppError:
                pass
            if self._clock() >= deadline:
                self.kill()
                raise AppLaunchError(f"no COM binding to acad.exe within {self.config.bind_timeout_s:.0f} s")
            self._sleep(self.config.poll_s)

    # -- verify --------------------------------------------------------------------------------

    def _dialogs(self) -> list[Win32Window]:
        return [w for w in self.platform.visible_windows() if w.pid == self._pid and w.class_name == DIALOG_CLASS]

    def _stale_pids(self) -> tuple[int, ...]:
        return tuple(p for p in self.platform.find_processes(self.config.image_name) if p != self._pid)

    def _observe(self, started: float, repair: bool) -> HandoffEvidence:
        failures: list[str] = []
        alive = self._pid is not None and self.platform.is_running(self._pid)
        if not alive:
            failures.append("acad.exe is not running")
        stale = self._stale_pids()
        if stale:
            failures.append(f"other acad.exe processes are running: {list(stale)}")
        dialogs = self._dialogs() if alive else []
        if repair:
            for dialog in dialogs:
                if dialog.title in self.config.known_dialogs:
                    self.platform.close_window(dialog.hwnd)
        titles = tuple(d.title for d in dialogs)
        unknown = tuple(t for t in titles if t not in self.config.known_dialogs)
        if dialogs:
            failures.append(f"dialogs are open: {list(titles)}")
        hwnd: int | None = None
        title: str | None = None
        loaded = maximized = foreground = False
        if alive:
            try:
                app = self.bound_application()
                hwnd = int(app.HWND)
                document = app.ActiveDocument.FullName
                loaded = self._attempt is not None and _same_path(document, self._attempt)
                title = document
                if not loaded:
                    failures.append(f"the active document is {document!r}, not the attempt")
                if not self.com.is_quiescent(app):
                    failures.append("AutoCAD is busy (not quiescent)")
            except AppError as exc:
                failures.append(str(exc))
            except Exception as exc:  # COM errors while AutoCAD is still starting
                failures.append(f"COM call failed: {exc}")
        if hwnd is not None:
            maximized = self.platform.is_maximized(hwnd)
            foreground = self.platform.foreground_window() == hwnd
            if repair and not dialogs and not (maximized and foreground):
                self.platform.maximize_and_focus(hwnd)
            if not maximized:
                failures.append("the AutoCAD window is not maximized")
            if not foreground:
                failures.append("the AutoCAD window is not in the foreground")
        return HandoffEvidence(
            app=self.name,
            pid=self._pid,
            process_alive=alive,
            stale_pids=stale,
            window_id=hwnd,
            window_title=title,
            display_size=self.platform.screen_size(),
            maximized=maximized,
            foreground=foreground,
            document_loaded=loaded,
            dialogs=titles,
            unknown_dialogs=unknown,
            elapsed_s=round(self._clock() - started, 3),
            failures=tuple(failures),
        )

    def verify_ready(self) -> ReadyResult:
        started = self._clock()
        deadline = started + self.config.ready_timeout_s
        while True:
            try:
                evidence = self._observe(started, repair=True)
                if evidence.ok:
                    evidence, frame = self._with_initial_frame(started)
                    if evidence.ok or self._clock() >= deadline:
                        return ReadyResult(evidence=evidence, frame=frame)
            except Exception as exc:  # Win32/COM failures become evidence, not exceptions
                evidence = HandoffEvidence(
                    app=self.name,
                    pid=self._pid,
                    process_alive=False,
                    display_size=(0, 0),
                    elapsed_s=round(self._clock() - started, 3),
                    failures=(f"cannot inspect the desktop: {type(exc).__name__}: {exc}",),
                )
            if self._clock() >= deadline:
                return ReadyResult(evidence=evidence, frame=None)
            self._sleep(self.config.poll_s)

    def _with_initial_frame(self, started: float) -> tuple[HandoffEvidence, Frame | None]:
        """Grab the stable first frame, then observe again: the frame must show that state."""
        frame: Frame | None = None
        stable = False
        capture_error = None
        try:
            frame, stable = stable_frame(self.capture, self.config.stability, clock=self._clock, sleep=self._sleep)
        except CaptureError as exc:
            capture_error = f"cannot capture the desktop: {exc}"
        after = self._observe(started, repair=False)
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
            }
        )
        return evidence, frame

    # -- checkpoint ----------------------------------------------------------------------------

    def _save_once(self, path: Path) -> tuple[str, str]:
        app = self.bound_application()
        self.platform.maximize_and_focus(int(app.HWND))
        document = app.ActiveDocument
        document.SendCommand(CANCEL_COMMAND)
        unmodified = bool(document.Saved)
        before = file_state(path)
        if _same_path(document.FullName, path):
            method = "Save"
            document.Save()
        else:
            method = "SaveAs"
            document.SaveAs(str(path))
        state, reason = wait_for_stable_file(
            path,
            changed_from=None if unmodified else before,
            timeout_s=self.config.save_timeout_s,
            poll_s=min(0.25, self.config.poll_s),
            clock=self._clock,
            sleep=self._sleep,
        )
        if state is None:
            raise AppError(reason or "the DWG did not become stable")
        signature = dwg_signature(path)
        if signature is None:
            raise AppError(f"{path.name} does not start with an AC10xx DWG signature")
        return method, signature

    def checkpoint(self) -> CheckpointResult:
        started = self._clock()
        path = self._attempt
        if path is None or self._pid is None:
            return CheckpointResult(ok=False, path=str(path or ""), error="nothing was launched")
        attempts: list[SaveAttempt] = []
        for number in range(1, self.config.save_attempts + 1):
            attempt_started = self._clock()
            closed: list[str] = []
            method = "Save"
            try:
                if not self.platform.is_running(self._pid):
                    raise AppError("acad.exe is not running: unsaved changes are lost")
                for dialog in self._dialogs():
                    closed.append(dialog.title)
                    self.platform.close_window(dialog.hwnd)
                method, signature = self._save_once(path)
            except Exception as exc:  # COM errors (busy, rejected call) are retried too
                attempts.append(
                    SaveAttempt(
                        number=number,
                        method=method,
                        error=f"{type(exc).__name__}: {exc}",
                        dialogs_closed=tuple(closed),
                        elapsed_s=round(self._clock() - attempt_started, 3),
                    )
                )
                if self._pid is None or not self.platform.is_running(self._pid):
                    break
                self._sleep(min(1.0 * number, 5.0))
                continue
            attempts.append(
                SaveAttempt(
                    number=number,
                    method=method,
                    dialogs_closed=tuple(closed),
                    elapsed_s=round(self._clock() - attempt_started, 3),
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
                elapsed_s=round(self._clock() - started, 3),
            )
        return CheckpointResult(
            ok=False,
            path=str(path),
            attempts=tuple(attempts),
            error=attempts[-1].error if attempts else "no save attempt ran",
            elapsed_s=round(self._clock() - started, 3),
        )

    # -- kill ----------------------------------------------------------------------------------

    def kill(self) -> KillResult:
        started = time.monotonic()
        pid, self._pid, self._app = self._pid, None, None
        targets: set[int] = set()
        remaining: list[int] = []
        try:
            roots = ([pid] if pid is not None else []) + list(self.platform.find_processes(self.config.image_name))
            for root in roots:
                targets.update(self.platform.process_tree(root))
            if not targets:
                return KillResult(pid=pid, signal_sent="none", elapsed_s=monotonic_elapsed(started))
            # AutoCAD answers a polite close with "save changes?"; the attempt file is
            # controller-owned, so the tree is ended forcefully right away.
            self.platform.terminate(sorted(targets), force=True)
            deadline = self._clock() + self.config.kill_timeout_s
            remaining = sorted(p for p in targets if self.platform.is_running(p))
            while remaining and self._clock() < deadline:
                self._sleep(0.2)
                remaining = sorted(p for p in remaining if self.platform.is_running(p))
        except Exception:  # a failing Win32 call must not hide survivors: report them all
            remaining = sorted(targets | ({pid} if pid is not None else set()))
        return KillResult(
            pid=pid,
            signal_sent="force",
            remaining_pids=tuple(remaining),
            elapsed_s=monotonic_elapsed(started),
        )
