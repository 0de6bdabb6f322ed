"""Fixtures for the broker tests: a private Xvfb display and the tool checks for it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from autocad_bench_broker.display import XvfbDisplay

needs_xvfb = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("xdotool") is None,
    reason="Xvfb and xdotool are required (apt-get install xvfb xdotool)",
)
needs_librecad = pytest.mark.skipif(
    shutil.which("librecad") is None, reason="LibreCAD is required (apt-get install librecad)"
)


@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
    """A 1920x1080 Xvfb display shared by the tests of one module."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    with XvfbDisplay(1920, 1080) as display:
        yield display
