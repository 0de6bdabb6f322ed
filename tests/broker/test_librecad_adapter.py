"""The LibreCAD adapter on a real Xvfb display with real PyAutoGUI input (integration).

Each test launches LibreCAD on a template made with ezdxf, drives it like the model would
(through the command line dock), and checks the outcome on disk with ezdxf and in /proc.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import ezdxf
import pytest

from autocad_bench_broker.apps.librecad import LibreCADAdapter, LibreCADConfig, render_conf
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.capture import MssCapture
from autocad_bench_broker.drivers.input import PyAutoGUIDriver
from autocad_bench_broker.procgroup import group_members, is_running

from .conftest import needs_librecad, needs_xvfb

pytestmark = [pytest.mark.integration, needs_xvfb, needs_librecad]

# The "Command:" input of the command line dock in the seeded layout (1920x1050 window at 0,0).
COMMAND_INPUT = (1750, 932)


@pytest.fixture
def template(tmp_path: Path) -> Path:
    doc = ezdxf.new("R2007")
    doc.modelspace().add_circle((500, 500), 25)
    path = tmp_path / "template.dxf"
    doc.saveas(path)
    return path


@pytest.fixture
def rig(xvfb: XvfbDisplay, tmp_path: Path) -> Iterator[tuple[LibreCADAdapter, PyAutoGUIDriver]]:
    capture = MssCapture(xvfb.name)
    driver = PyAutoGUIDriver(xvfb.name)
    adapter = LibreCADAdapter(xvfb.name, tmp_path / "rollout", capture)
    try:
        yield adapter, driver
    finally:
        adapter.kill()
        adapter.close()
        driver.close()
        capture.close()


def _command(driver: PyAutoGUIDriver, *entries: str) -> None:
    """Click the command input, then type each entry followed by Enter."""
    driver.click(*COMMAND_INPUT)
    for entry in entries:
        driver.type_text(entry)
        driver.hotkey(["enter"])


def _entities(path: Path) -> list[tuple[str, tuple[float, ...], tuple[float, ...]]]:
    found = []
    for entity in ezdxf.readfile(path).modelspace():
        if entity.dxftype() == "LINE":
            found.append(("LINE", tuple(entity.dxf.start), tuple(entity.dxf.end)))
        else:
            found.append((entity.dxftype(), (), ()))
    return found


def test_launch_draw_checkpoint_and_kill(
    rig: tuple[LibreCADAdapter, PyAutoGUIDriver], template: Path, tmp_path: Path
) -> None:
    adapter, driver = rig
    attempt = tmp_path / "attempts" / "attempt.dxf"
    started = time.monotonic()
    adapter.launch(template, attempt)
    ready = adapter.verify_ready()
    launch_to_ready = time.monotonic() - started
    evidence = ready.evidence
    assert evidence.ok, evidence.failures
    assert evidence.process_alive and evidence.stale_pids == ()
    assert evidence.maximized and evidence.foreground and evidence.document_loaded
    assert evidence.window_title == "LibreCAD - [attempt.dxf]"
    assert evidence.dialogs == () and evidence.initial_frame_stable
    assert ready.frame is not None and ready.frame.sha256 == evidence.initial_frame_sha256
    assert launch_to_ready < 15
    home = tmp_path / "rollout" / "home"
    assert (home / ".config" / "LibreCAD" / "LibreCAD.conf").is_file()
    for private in (home, tmp_path / "rollout" / "runtime"):
        assert private.stat().st_mode & 0o777 == 0o700

    _command(driver, "line", "0,0", "100,0")
    driver.hotkey(["escape"])
    driver.hotkey(["escape"])

    result = adapter.checkpoint()
    assert result.ok, result
    assert result.signature == "DXF AC1021"
    assert result.attempts[-1].method == "ctrl+s"
    assert result.size_bytes == attempt.stat().st_size
    lines = [e for e in _entities(attempt) if e[0] == "LINE"]
    assert lines == [("LINE", (0.0, 0.0, 0.0), (100.0, 0.0, 0.0))]
    assert ("CIRCLE", (), ()) in _entities(attempt)  # the template's content survived

    pid = adapter.pid
    assert pid is not None
    killed = adapter.kill()
    assert killed.gone and killed.pid == pid
    assert not is_running(pid)
    assert group_members(pid) == ()
    assert adapter.pid is None


def test_checkpoint_of_an_unmodified_drawing_accepts_the_restored_file(
    rig: tuple[LibreCADAdapter, PyAutoGUIDriver], template: Path, tmp_path: Path
) -> None:
    adapter, _ = rig
    attempt = tmp_path / "attempt.dxf"
    adapter.launch(template, attempt)
    assert adapter.verify_ready().ok
    result = adapter.checkpoint()
    assert result.ok, result
    assert result.attempts[-1].method == "unmodified"
    assert attempt.read_bytes() == template.read_bytes()


def test_checkpoint_closes_a_dialog_the_model_left_open(
    rig: tuple[LibreCADAdapter, PyAutoGUIDriver], template: Path, tmp_path: Path
) -> None:
    adapter, driver = rig
    attempt = tmp_path / "attempt.dxf"
    adapter.launch(template, attempt)
    assert adapter.verify_ready().ok
    _command(driver, "circle", "50,50", "20")
    driver.hotkey(["ctrl", "o"])
    deadline = time.monotonic() + 5
    while not adapter.dialogs():
        assert time.monotonic() < deadline, "the Open dialog did not appear"
        time.sleep(0.05)

    result = adapter.checkpoint()
    assert result.ok, result
    assert result.attempts[0].dialogs_closed == ("Open Drawing",)
    assert adapter.dialogs() == []
    assert [e[0] for e in _entities(attempt)].count("CIRCLE") == 2


def test_verify_ready_reports_an_open_dialog(xvfb: XvfbDisplay, template: Path, tmp_path: Path) -> None:
    capture = MssCapture(xvfb.name)
    driver = PyAutoGUIDriver(xvfb.name)
    adapter = LibreCADAdapter(xvfb.name, tmp_path / "rollout", capture, config=LibreCADConfig(ready_timeout_s=1.0))
    try:
        adapter.launch(template, tmp_path / "attempt.dxf")
        assert adapter.verify_ready().ok
        driver.hotkey(["ctrl", "o"])
        started = time.monotonic()
        evidence = adapter.verify_ready().evidence
        assert time.monotonic() - started < 6
        assert not evidence.ok
        assert evidence.dialogs == ("Open Drawing",)
        assert evidence.unknown_dialogs == ()
        assert any("dialogs are open" in failure for failure in evidence.failures)
    finally:
        adapter.kill()
        adapter.close()
        driver.close()
        capture.close()


def test_launch_kills_a_stale_instance_on_the_same_display(xvfb: XvfbDisplay, template: Path, tmp_path: Path) -> None:
    capture = MssCapture(xvfb.name)
    old = LibreCADAdapter(xvfb.name, tmp_path / "old", capture)
    new = LibreCADAdapter(xvfb.name, tmp_path / "new", capture)
    try:
        old.launch(template, tmp_path / "old.dxf")
        stale_pid = old.pid
        assert stale_pid is not None
        handoff, ready = new.handoff(template, tmp_path / "new.dxf")
        assert handoff.ok and ready is not None
        assert len(handoff.attempts) == 1
        assert not is_running(stale_pid)
        assert ready.evidence.stale_pids == ()
    finally:
        for adapter in (old, new):
            adapter.kill()
            adapter.close()
        capture.close()


def test_checkpoint_reports_a_crashed_application_without_raising(
    rig: tuple[LibreCADAdapter, PyAutoGUIDriver], template: Path, tmp_path: Path
) -> None:
    adapter, _ = rig
    adapter.launch(template, tmp_path / "attempt.dxf")
    pid = adapter.pid
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    result = adapter.checkpoint()
    assert not result.ok
    assert result.error is not None and "not running" in result.error
    assert adapter.kill().gone


def test_seeded_configuration_skips_the_welcome_dialog_and_places_the_window(
    tmp_path: Path,
) -> None:
    conf = render_conf(1280, 994, tmp_path)
    assert "FirstLoad=0" in conf
    assert "WindowWidth=1280" in conf and "WindowHeight=994" in conf
    assert f"Save={tmp_path}" in conf
    assert "AutoBackupDocument=0" in conf
