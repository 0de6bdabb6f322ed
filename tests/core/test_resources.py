"""The controller makes room for a shared-mode batch's open files."""

from __future__ import annotations

import subprocess
import sys

import pytest

resource = pytest.importorskip("resource")

SCRIPT = """
import resource, sys
from autocad_bench.controller.resources import raise_open_file_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
wanted = int(sys.argv[1])
now = raise_open_file_limit(wanted)
after = resource.getrlimit(resource.RLIMIT_NOFILE)
print(now, after[0], after[1])
"""


def _run(wanted: int) -> tuple[int, int, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(wanted)], check=True, capture_output=True, text=True)
    now, soft, hard = (int(x) for x in out.stdout.split())
    return now, soft, hard


def test_a_low_soft_limit_is_raised_to_what_the_batch_needs() -> None:
    now, soft, hard = _run(300)
    assert now == soft == 300 and hard >= 300


def test_the_hard_limit_caps_it_and_it_is_never_lowered() -> None:
    _, _, hard = _run(100)
    now, soft, _ = _run(hard + 1_000_000)
    assert now == soft == hard
    now, soft, _ = _run(10)
    assert now == soft == 64, "a limit above what is wanted stays as it is"
