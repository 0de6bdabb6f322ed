"""The leak checks of tests/conftest.py, proven on deliberately leaking tests run by an inner pytest.

The ``deliberately_*`` tests run only when :data:`DELIBERATE` is set, i.e. inside the inner
pytest these tests start; alone they are skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import processes

REPO = Path(__file__).resolve().parents[1]
DELIBERATE = "AUTOCAD_BENCH_DELIBERATE_LEAK"
on_demand = pytest.mark.skipif(not os.environ.get(DELIBERATE), reason=f"run on demand ({DELIBERATE}=1)")


def _sleeper(cwd: Path) -> subprocess.Popen[bytes]:
    """``sleep`` in a session of its own: it outlives a killed parent, re-parented to init."""
    return subprocess.Popen(["sleep", "600"], cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


@on_demand
def test_deliberately_leaks_a_process_and_passes(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Nothing under this test's tmp_path names it: only the session token finds it.
    process = _sleeper(Path("/"))
    print(f"LEAKED-SESSION {process.pid}")


@on_demand
def test_deliberately_fails_with_its_process_running(owned_processes: Path) -> None:
    process = subprocess.Popen(["sh", "-c", f"cd {owned_processes} && exec sleep 600"], start_new_session=True,
                               env={"PATH": os.environ["PATH"], "HOME": str(owned_processes)})
    print(f"LEAKED-TEST {process.pid}")
    # Fail only once the process is findable as this test's: between fork and exec it still
    # shows the parent's command line and environment, and under load a teardown scan in that
    # window found nothing to kill (the leak then escaped to whoever looked next).
    deadline = time.monotonic() + 30
    while process.pid not in {proc.pid for proc in processes.find(paths=[owned_processes])}:
        assert time.monotonic() < deadline, "the deliberately leaked process never became findable"
        time.sleep(0.01)
    pytest.fail("deliberate failure with a process running")


def _inner(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-p", "no:cacheprovider", "-rA",
         f"--basetemp={tmp_path / 'inner'}", *args],
        capture_output=True, text=True, timeout=240, cwd=REPO, env={**os.environ, DELIBERATE: "1"})
    pids = sorted({int(pid) for pid in re.findall(r"LEAKED-(?:SESSION|TEST) (\d+)", result.stdout)})
    return result, pids


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_what_a_test_leaks_is_killed_and_reported(tmp_path: Path, workers: list[str]) -> None:
    result, pids = _inner(tmp_path, "-k", "deliberately", *workers)
    text = result.stdout + result.stderr
    assert result.returncode == 1, text
    assert len(pids) == 2, text
    # The failing test's own fixture killed its process group and said so.
    assert "deliberate failure with a process running" in text
    assert "killed processes" in text and "were still running and were killed" in text
    # The passing test's leak is found by the session token at the end and reported as an error.
    assert re.search(r"tests of this session leaked 1 process\(es\), now killed:\n\s+pid \d+", text), text
    assert not any(processes._alive(pid) for pid in pids), text
    assert processes.find(paths=[tmp_path / "inner"]) == []
