"""The lifecycle's lines in the rollout log (``logs/<rollout_id>.log``), identical in both modes.

Lines are appended with ``O_APPEND`` so they interleave safely with the controller's own
lines and with the broker's output. Nothing secret is ever written here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

PREFIX = "local-xvfb"


class LifecycleLog:
    """Appends timestamped ``local-xvfb:`` lines to one log file (never raises)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def line(self, message: str) -> None:
        stamp = datetime.now(UTC).isoformat()
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} {PREFIX}: {message}\n")

    @contextlib.contextmanager
    def append_handle(self) -> Iterator[IO[bytes]]:
        """The log opened for appending, to hand to a child process as stdout/stderr."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            yield handle
