"""The typed public API stays mypy-clean (strict, pydantic plugin) in every distribution."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.name for p in REPO.glob("*/src/*") if (p / "__init__.py").is_file()) + sorted(
    p.name for p in REPO.glob("*/*/src/*") if (p / "__init__.py").is_file() and "examples" not in p.parts)


@pytest.mark.integration
def test_every_distribution_is_mypy_clean() -> None:
    assert {"autocad_bench", "autocad_bench_ray", "autocad_bench_openweight"} <= set(PACKAGES)
    args = [sys.executable, "-m", "mypy", "--no-error-summary"]
    for package in PACKAGES:
        args += ["-p", package]
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
