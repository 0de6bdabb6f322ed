"""The AutoCAD adapter against fake COM objects and a fake Win32 platform.

The fakes are plain Python classes with the members AutoCAD's ActiveX ``Application`` and
``Document`` expose; ``Save``/``SaveAs`` really write files, so the adapter's stability and
signature checks run on real bytes. A live test on Windows is marked ``windows``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autocad_bench_broker.apps.autocad import CANCEL_COMMAND, AutoCADAdapter, AutoCADConfig
from autocad_bench_broker.apps.windows_platform import Win32Window
from autocad_bench_broker.drivers.capture import Frame
from autocad_bench_broker.errors import AppLaunchError, CaptureError

DWG_BYTES = b"AC1032\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 8


class FakeComError(Exception):
    """Stands in for pywintypes.com_error (e.g. RPC_E_CALL_REJECTED while AutoCAD is busy)."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


@dataclass
class FakeDocument:
    FullName: str
    Saved: bool = True
    fail_saves: int = 0
    payload: bytes = DWG_BYTES
    log: list[str] = field(default_factory=list)

    def SendCommand(self, command: str) -> None:
        self.log.append(f"SendCommand {command!r}")

    def _write(self, path: str) -> None:
        if self.fail_saves:
            self.fail_saves -= 1
            raise FakeComError("Call was rejected by callee.")
        Path(path).write_bytes(self.payload)
        self.Saved = True

    def Save(self) -> None:
        self.log.append("Save")
        self._write(self.FullName)

    def SaveAs(self, path: str) -> None:
        self.log.append(f"SaveAs {path}")
        self._write(path)
        self.FullName = path


@dataclass
class FakeApplication:
    HWND: int
    ActiveDocument: FakeDocument
    quiescent: bool = True


@dataclass
class FakeCom:
    apps: list[FakeApplication] = field(default_factory=list)

    def running_applications(self) -> Sequence[FakeApplication]:
        return list(self.apps)

    def is_quiescent(self, app: FakeApplication) -> bool:  # type: ignore[override]
        return app.quiescent


@dataclass
class FakeWindows:
    """A fake Win32 desktop: processes with parents, windows with owners, one foreground."""

    com: FakeCom
    startup_polls: int = 2
    next_pid: int = 4000
    running: dict[int, int] = field(default_factory=dict)  # pid -> parent pid
    images: dict[int, str] = field(default_factory=dict)
    windows: dict[int, Win32Window] = field(default_factory=dict)
    foreground: int | None = None
    maximized: set[int] = field(default_factory=set)
    undying: set[int] = field(default_factory=set)
    closed_windows: list[int] = field(default_factory=list)
    terminated: list[int] = field(default_factory=list)
    started: list[list[str]] = field(default_factory=list)
    die_on_start: bool = False
    _pending: tuple[int, str] | None = None
    _polls: int = 0

    # helpers for tests
    def spawn(self, image: str, parent: int = 1) -> int:
        self.next_pid += 4
        self.running[self.next_pid] = parent
        self.images[self.next_pid] = image
        return self.next_pid

    def add_window(self, pid: int, title: str, class_name: str) -> int:
        hwnd = 0x10000 + len(self.windows) * 16
        self.windows[hwnd] = Win32Window(hwnd, pid, title, class_name)
        return hwnd

    # WindowsPlatform
    def screen_size(self) -> tuple[int, int]:
        return (1920, 1080)

    def window_pid(self, hwnd: int) -> int | None:
        window = self.windows.get(hwnd)
        return window.pid if window else None

    def foreground_window(self) -> int | None:
        return self.foreground

    def is_maximized(self, hwnd: int) -> bool:
        return hwnd in self.maximized

    def maximize_and_focus(self, hwnd: int) -> None:
        self.maximized.add(hwnd)
        self.foreground = hwnd

    def close_window(self, hwnd: int) -> None:
        self.closed_windows.append(hwnd)
        self.windows.pop(hwnd, None)

    def visible_windows(self) -> list[Win32Window]:
        self._tick()
        return list(self.windows.values())

    def start(self, argv: Sequence[str], cwd: Path) -> int:
        self.started.append(list(argv))
        pid = self.spawn("acad.exe")
        self.spawn("AcWebBrowser.exe", parent=pid)  # a child that must die with it
        if self.die_on_start:
            del self.running[pid]
        self._pending = (pid, argv[1])
        self._polls = 0
        return pid

    def _tick(self) -> None:
        # AutoCAD registers its COM object a few polls after the process starts.
        if self._pending is None:
            return
        self._polls += 1
        pid, path = self._pending
        if self._polls >= self.startup_polls and pid in self.running:
            hwnd = self.add_window(pid, "Autodesk AutoCAD 2019", "Afx:00400000:8")
            self.com.apps.append(FakeApplication(hwnd, FakeDocument(FullName=path)))
            self._pending = None

    def is_running(self, pid: int) -> bool:
        self._tick()
        return pid in self.running

    def process_tree(self, pid: int) -> list[int]:
        tree = {pid} if pid in self.running else set()
        changed = True
        while changed:
            extra = {p for p, parent in self.running.items() if parent in tree} - tree
            tree |= extra
            changed = bool(extra)
        return sorted(tree)

    def find_processes(self, image_name: str) -> list[int]:
        return sorted(p for p in self.running if self.images.get(p) == image_name)

    def terminate(self, pids: Sequence[int], *, force: bool) -> None:
        assert force
        for pid in pids:
            self.terminated.append(pid)
            if pid not in self.undying:
                self.running.pop(pid, None)


class StillCapture:
    def __init__(self) -> None:
        self.frame = Frame.from_rgb(4, 2, bytes(24), captured_at=0.0)
        self.fail = False

    @property
    def size(self) -> tuple[int, int]:
        return (4, 2)

    def grab(self) -> Frame:
        if self.fail:
            raise CaptureError("no desktop")
        return self.frame

    def close(self) -> None:
        pass


@dataclass
class Rig:
    adapter: AutoCADAdapter
    com: FakeCom
    win: FakeWindows
    clock: FakeClock
    capture: StillCapture
    template: Path
    attempt: Path

    def app(self) -> FakeApplication:
        return next(a for a in self.com.apps if self.win.window_pid(a.HWND) == self.adapter.pid)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    com = FakeCom()
    win = FakeWindows(com)
    clock = FakeClock()
    capture = StillCapture()
    adapter = AutoCADAdapter(
        capture,
        config=AutoCADConfig(executable=Path("C:/AutoCAD/acad.exe"), known_dialogs=frozenset({"Tip"})),
        com=com,
        platform=win,
        clock=clock,
        sleep=clock.sleep,
    )
    template = tmp_path / "template.dwg"
    template.write_bytes(b"AC1032" + b"template")
    return Rig(adapter, com, win, clock, capture, template, tmp_path / "run" / "attempt.dwg")


def test_off_windows_the_adapter_needs_injected_seams() -> None:
    if sys.platform == "win32":
        pytest.skip("only meaningful off Windows")
    with pytest.raises(RuntimeError, match="needs Windows"):
        AutoCADAdapter(StillCapture())


def test_launch_restores_the_template_and_binds_to_the_exact_pid(rig: Rig) -> None:
    # Another AutoCAD, not ours, is already registered in the running object table.
    foreign_pid = rig.win.spawn("notacad.exe")
    foreign = FakeApplication(rig.win.add_window(foreign_pid, "Other", "Afx"), FakeDocument("C:/other.dwg"))
    rig.com.apps.append(foreign)

    rig.adapter.launch(rig.template, rig.attempt)

    assert rig.attempt.read_bytes() == rig.template.read_bytes()
    assert rig.win.started == [["C:/AutoCAD/acad.exe", str(rig.attempt), "/nologo"]]
    bound = rig.adapter.bound_application()
    assert bound is not foreign
    assert rig.win.window_pid(bound.HWND) == rig.adapter.pid
    assert rig.win.foreground == bound.HWND and bound.HWND in rig.win.maximized


def test_launch_gives_up_within_its_bound_and_kills_the_process(rig: Rig) -> None:
    rig.win.startup_polls = 10**9  # the COM object never appears
    started = rig.clock.now
    with pytest.raises(AppLaunchError, match="no COM binding"):
        rig.adapter.launch(rig.template, rig.attempt)
    assert rig.clock.now - started <= rig.adapter.config.bind_timeout_s + 1
    assert rig.win.find_processes("acad.exe") == []
    assert rig.adapter.pid is None


def test_launch_reports_a_process_that_exits_during_start_up(rig: Rig) -> None:
    rig.win.die_on_start = True
    with pytest.raises(AppLaunchError, match="exited during start-up"):
        rig.adapter.launch(rig.template, rig.attempt)


def test_verify_ready_collects_complete_handoff_evidence(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    ready = rig.adapter.verify_ready()
    evidence = ready.evidence
    assert evidence.ok, evidence.failures
    assert evidence.pid == rig.adapter.pid and evidence.process_alive
    assert evidence.maximized and evidence.foreground and evidence.document_loaded
    assert evidence.initial_frame_stable
    assert ready.frame is not None and evidence.initial_frame_sha256 == ready.frame.sha256
    assert evidence.display_size == (1920, 1080)


def test_verify_ready_closes_known_popups_and_fails_on_unknown_ones(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    pid = rig.adapter.pid
    assert pid is not None
    tip = rig.win.add_window(pid, "Tip", "#32770")
    assert rig.adapter.verify_ready().ok
    assert rig.win.closed_windows == [tip]

    rig.win.add_window(pid, "Drawing Recovery", "#32770")
    evidence = rig.adapter.verify_ready().evidence
    assert not evidence.ok
    assert evidence.unknown_dialogs == ("Drawing Recovery",)
    assert evidence.elapsed_s <= rig.adapter.config.ready_timeout_s + 1


def test_verify_ready_restores_window_state_and_checks_quiescence(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    rig.win.maximized.clear()
    rig.win.foreground = None
    assert rig.adapter.verify_ready().ok
    rig.app().quiescent = False
    evidence = rig.adapter.verify_ready().evidence
    assert any("not quiescent" in failure for failure in evidence.failures)


def test_verify_ready_fails_when_the_desktop_cannot_be_captured(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    rig.capture.fail = True
    evidence = rig.adapter.verify_ready().evidence
    assert not evidence.ok and not evidence.initial_frame_stable
    assert any("cannot capture" in failure for failure in evidence.failures)


def test_verify_ready_turns_platform_errors_into_evidence(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)

    def broken() -> list[Win32Window]:
        raise OSError("EnumWindows failed")

    rig.win.visible_windows = broken  # type: ignore[method-assign]
    evidence = rig.adapter.verify_ready().evidence
    assert not evidence.ok
    assert any("EnumWindows failed" in failure for failure in evidence.failures)


def test_checkpoint_cancels_commands_then_saves_a_signed_stable_dwg(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    document = rig.app().ActiveDocument
    document.Saved = False
    result = rig.adapter.checkpoint()
    assert result.ok, result
    assert document.log == [f"SendCommand {CANCEL_COMMAND!r}", "Save"]
    assert result.signature == "AC1032"
    assert result.sha256 == hashlib.sha256(DWG_BYTES).hexdigest()
    assert result.size_bytes == len(DWG_BYTES)
    assert [a.method for a in result.attempts] == ["Save"]


def test_checkpoint_retries_rejected_com_calls(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    document = rig.app().ActiveDocument
    document.Saved = False
    document.fail_saves = 3
    result = rig.adapter.checkpoint()
    assert result.ok
    assert len(result.attempts) == 4
    assert all("rejected" in (a.error or "") for a in result.attempts[:3])
    assert result.attempts[-1].error is None


def test_checkpoint_fails_after_five_attempts_without_a_dwg_signature(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    document = rig.app().ActiveDocument
    document.Saved = False
    document.payload = b"not a drawing at all"
    result = rig.adapter.checkpoint()
    assert not result.ok
    assert len(result.attempts) == 5
    assert "AC10xx" in (result.error or "")


def test_checkpoint_saves_as_the_attempt_when_the_document_moved(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    document = rig.app().ActiveDocument
    document.FullName = str(rig.attempt.parent / "elsewhere.dwg")
    document.Saved = False
    result = rig.adapter.checkpoint()
    assert result.ok
    assert result.attempts[-1].method == "SaveAs"
    assert document.log[-1] == f"SaveAs {rig.attempt}"
    assert rig.attempt.read_bytes() == DWG_BYTES


def test_checkpoint_closes_dialogs_before_saving(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    pid = rig.adapter.pid
    assert pid is not None
    rig.win.add_window(pid, "Options", "#32770")
    rig.app().ActiveDocument.Saved = False
    result = rig.adapter.checkpoint()
    assert result.ok
    assert result.attempts[0].dialogs_closed == ("Options",)


def test_checkpoint_never_saves_through_another_process(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    ours = rig.app()
    # Our main window handle now belongs to another process, and only an impostor is
    # registered: neither COM object may be used.
    impostor_pid = rig.win.spawn("acad-other.exe")
    rig.win.windows[ours.HWND] = Win32Window(ours.HWND, impostor_pid, "AutoCAD", "Afx")
    rig.com.apps.remove(ours)
    impostor = FakeApplication(
        rig.win.add_window(impostor_pid, "AutoCAD", "Afx"), FakeDocument(str(rig.attempt), False)
    )
    rig.com.apps.append(impostor)
    result = rig.adapter.checkpoint()
    assert not result.ok
    assert len(result.attempts) == 5
    assert impostor.ActiveDocument.log == [] and ours.ActiveDocument.log == []
    assert f"PID {rig.adapter.pid}" in (result.error or "")


def test_checkpoint_stops_retrying_when_autocad_died(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    pid = rig.adapter.pid
    assert pid is not None
    del rig.win.running[pid]
    result = rig.adapter.checkpoint()
    assert not result.ok and len(result.attempts) == 1
    assert "not running" in (result.error or "")


def test_kill_ends_the_whole_tree_and_stale_instances(rig: Rig) -> None:
    stale = rig.win.spawn("acad.exe")
    rig.adapter.launch(rig.template, rig.attempt)  # launch already kills the stale one
    assert stale not in rig.win.running
    pid = rig.adapter.pid
    assert pid is not None
    tree = rig.win.process_tree(pid)
    assert len(tree) == 2
    result = rig.adapter.kill()
    assert result.gone and result.signal_sent == "force" and result.pid == pid
    assert set(tree) <= set(rig.win.terminated)
    assert rig.win.process_tree(pid) == []
    assert rig.adapter.kill().signal_sent == "none"


def test_kill_is_bounded_and_reports_survivors(rig: Rig) -> None:
    rig.adapter.launch(rig.template, rig.attempt)
    pid = rig.adapter.pid
    assert pid is not None
    rig.win.undying.add(pid)
    started = rig.clock.now
    result = rig.adapter.kill()
    assert not result.gone and result.remaining_pids == (pid,)
    assert rig.clock.now - started <= rig.adapter.config.kill_timeout_s + 1


def test_handoff_retries_one_failed_launch(rig: Rig) -> None:
    rig.win.die_on_start = True
    calls: list[int] = []

    def on_attempt(number: int, evidence: object) -> None:
        calls.append(number)
        rig.win.die_on_start = False

    handoff, ready = rig.adapter.handoff(rig.template, rig.attempt, on_attempt=on_attempt)
    assert handoff.ok and ready is not None
    assert calls == [1, 2]
    assert len(handoff.launch_errors) == 1 and len(handoff.attempts) == 1


def test_results_round_trip_through_json(rig: Rig) -> None:
    handoff, ready = rig.adapter.handoff(rig.template, rig.attempt)
    assert ready is not None
    rig.app().ActiveDocument.Saved = False
    checkpoint = rig.adapter.checkpoint()
    killed = rig.adapter.kill()
    for result in (handoff, ready.evidence, checkpoint, killed):
        wire = result.model_dump_json()
        assert type(result).model_validate_json(wire) == result
    assert '"ok":true' in ready.evidence.model_dump_json()
    assert '"gone":true' in killed.model_dump_json()


@pytest.mark.windows
def test_live_autocad_handoff_and_checkpoint(tmp_path: Path) -> None:  # pragma: no cover
    """Needs Windows, AutoCAD 2019 and AUTOCAD_BENCH_TEMPLATE_DWG pointing at a template."""
    from autocad_bench_broker.drivers.capture import MssCapture

    template = Path(os.environ["AUTOCAD_BENCH_TEMPLATE_DWG"])
    capture = MssCapture()
    adapter = AutoCADAdapter(capture)
    try:
        handoff, ready = adapter.handoff(template, tmp_path / "attempt.dwg")
        assert handoff.ok and ready is not None, handoff
        result = adapter.checkpoint()
        assert result.ok and result.signature is not None, result
    finally:
        assert adapter.kill().gone
        capture.close()
