"""A backend lifecycle's lines in the rollout log (``logs/<rollout_id>.log``), in both modes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar


class LifecycleLog:
    """Appends timestamped ``<prefix>:`` lines to the rollout log; a backend sets :attr:`prefix`."""

    prefix: ClassVar[str] = "infrastructure"

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, message: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"{datetime.now(UTC).isoformat()} {self.prefix}: {message}\n")
