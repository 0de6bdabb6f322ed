"""The validity rig's ``wait`` waits for LibreCAD and Xvfb to be idle, not only a fixed time."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from autocad_bench_broker.idle import wait_until_idle


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _python(spawn: list[subprocess.Popen[bytes]], code: str) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code])
    spawn.append(proc)
    time.sleep(0.3)  # past the interpreter's start-up CPU
    return proc.pid


def test_a_sleeping_process_is_idle_at_once(spawn: list[subprocess.Popen[bytes]]) -> None:
    pid = _python(spawn, "import time; time.sleep(60)")
    started = time.monotonic()
    assert wait_until_idle([pid], window_s=0.15, limit_s=5.0)
    assert time.monotonic() - started < 4.0


def test_a_busy_process_is_waited_for_until_the_limit(spawn: list[subprocess.Popen[bytes]]) -> None:
    busy = _python(spawn, "while True: pass")
    idle = _python(spawn, "import time; time.sleep(60)")
    started = time.monotonic()
    assert not wait_until_idle([idle, busy], window_s=0.15, limit_s=0.8)
    assert time.monotonic() - started >= 0.8


def test_a_process_that_becomes_idle_ends_the_wait(spawn: list[subprocess.Popen[bytes]]) -> None:
    pid = _python(spawn,
                  "import time\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end: pass\ntime.sleep(60)")
    started = time.monotonic()
    assert wait_until_idle([pid], window_s=0.15, limit_s=8.0)
    assert time.monotonic() - started >= 0.6  # it waited for the busy second to end


def test_a_gone_process_counts_as_idle(spawn: list[subprocess.Popen[bytes]]) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert wait_until_idle([proc.pid], window_s=0.1, limit_s=2.0)
