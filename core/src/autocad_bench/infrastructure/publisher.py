"""The trace publisher a backend may return from ``create_trace_publisher``."""

from __future__ import annotations

import abc
from pathlib import Path

from autocad_bench.models import JsonObject


class TracePublisher(abc.ABC):
    """Mirrors live rollout artifacts to a destination while the batch runs.

    Pilots may run in other processes, so a publisher finds new and changed files itself
    (e.g. by rescanning ``output_dir``); :meth:`publish` is a hint that one file changed.
    The controller calls :meth:`close` once at batch exit, which must flush what is left;
    :meth:`describe` is written to trace-publisher.json (never include credentials in it).
    """

    @abc.abstractmethod
    def describe(self) -> JsonObject:
        """Where traces go (destination, prefix), for trace-publisher.json."""

    @abc.abstractmethod
    def publish(self, path: Path) -> None:
        """Mirror one file (absolute path inside the batch output directory). Must not raise."""

    def close(self) -> None:  # noqa: B027 - optional override
        """Flush pending uploads; called once at batch exit."""
