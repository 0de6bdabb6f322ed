"""Private Xvfb displays and process-group kills, with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autocad_bench_broker.display import STARTUP_TIMEOUT_S, XvfbDisplay
from autocad_bench_broker.errors import DisplayError
from autocad_bench_broker.procgroup import (
    find_processes,
    group_members,
    is_running,
    kill_process_group,
)

from .conftest import needs_xvfb


@pytest.mark.integration
@needs_xvfb
def test_xvfb_reports_a_free_display_and_stop_leaves_no_process() -> None:
    first = XvfbDisplay(640, 480)
    second = XvfbDisplay(640, 480)
    with first, second:
        assert first.number != second.number
        assert first.is_running() and second.is_running()
        assert Path(f"/tmp/.X11-unix/X{first.number}").exists()
        # start() itself raises past its bound; this names the documented one it used.
        assert first.startup_timeout_s == STARTUP_TIMEOUT_S
        assert first.startup_s is not None and first.startup_s < STARTUP_TIMEOUT_S
        pid = first.pid
        assert pid is not None
        with pytest.raises(DisplayError, match="already started"):
            first.start()
    assert not is_running(pid)
    assert group_members(pid) == ()
    assert first.stop() is None  # idempotent


def test_xvfb_start_fails_cleanly_when_the_binary_is_missing() -> None:
    with pytest.raises(DisplayError, match="not found"):
        XvfbDisplay(executable="no-such-xvfb-binary").start()


def test_xvfb_start_fails_cleanly_when_the_server_exits(tmp_path: Path) -> None:
    fake = tmp_path / "Xvfb-that-dies"
    fake.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    fake.chmod(0o755)
    display = XvfbDisplay(executable=str(fake), startup_timeout_s=5)
    with pytest.raises(DisplayError, match="exited"):
        display.start()
    assert display.pid is None


def test_xvfb_start_is_bounded_when_the_server_never_reports(tmp_path: Path) -> None:
    fake = tmp_path / "Xvfb-that-hangs"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    display = XvfbDisplay(executable=str(fake), startup_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(DisplayError, match="did not report"):
        display.start()
    assert time.monotonic() - started < 5
    assert display.pid is None


def _spawn_group(script: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 5
    while len(group_members(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def test_kill_process_group_ends_every_member_with_sigterm() -> None:
    proc = _spawn_group("sleep 60 & sleep 60 & wait")
    assert len(group_members(proc.pid)) == 3
    outcome = kill_process_group(proc.pid, leader=proc, term_timeout_s=5, kill_timeout_s=2)
    assert outcome.signal_sent == "SIGTERM"
    assert outcome.gone
    assert group_members(proc.pid) == ()
    assert proc.poll() is not None


def test_kill_process_group_escalates_to_sigkill_within_its_bound() -> None:
    proc = _spawn_group("trap '' TERM; sleep 60 & sleep 60 & while true; do sleep 0.05; done")
    started = time.monotonic()
    outcome = kill_process_group(proc.pid, leader=proc, term_timeout_s=0.5, kill_timeout_s=2)
    assert time.monotonic() - started < 4
    assert outcome.signal_sent == "SIGKILL"
    assert outcome.gone
    assert group_members(proc.pid) == ()


def test_kill_process_group_of_a_vanished_group_does_nothing() -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    outcome = kill_process_group(proc.pid, leader=proc)
    assert outcome.signal_sent == "none" and outcome.gone


def test_find_processes_matches_executable_and_environment() -> None:
    marker = f"autocad-bench-test-{os.getpid()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={**os.environ, "ROLLOUT_MARKER": marker},
        start_new_session=True,
    )
    try:
        exe = Path(os.readlink(f"/proc/{proc.pid}/exe")).name
        deadline = time.monotonic() + 5
        while proc.pid not in find_processes(exe, {"ROLLOUT_MARKER": marker}):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert find_processes(exe, {"ROLLOUT_MARKER": marker + "-other"}) == ()
    finally:
        kill_process_group(proc.pid, leader=proc)
