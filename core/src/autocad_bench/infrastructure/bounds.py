"""The building blocks of a backend's bounds table: one row, the time scale, the Markdown.

A backend keeps every wait and retry it has in one table of :class:`Bound` rows (its own
``bounds`` module, whose constants the code reads) and prints :func:`bounds_table` of it in
its documentation. :class:`TimeScale` shrinks the time bounds (never stretches them) when the
backend's ``*_TIME_SCALE`` variable is set below 1, which only test suites and benchmarks do;
counts are never scaled.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

UnitT = TypeVar("UnitT", bound=str, covariant=True)


@dataclass(frozen=True, slots=True)
class Bound(Generic[UnitT]):
    """One row of a bounds table (``UnitT`` narrows the units a backend allows)."""

    boundary: str
    value: float
    unit: UnitT
    behaviour: str

    def render(self) -> str:
        return f"| {self.boundary} | {self.value:g} {self.unit} | {self.behaviour} |"


def bounds_table(bounds: Iterable[Bound[UnitT]]) -> str:
    """The Markdown table of ``bounds`` as the backend's documentation prints it."""
    head = "| Boundary | Bound | Behaviour |\n|---|---:|---|"
    return "\n".join([head, *(bound.render() for bound in bounds)])


@dataclass(frozen=True, slots=True)
class TimeScale:
    """A factor in (0, 1] read from the variable ``env_name``, applied to time bounds."""

    env_name: str

    def factor(self, environ: Mapping[str, str] | None = None) -> float:
        """The factor from ``env_name`` (1 when unset or invalid; never above 1)."""
        raw = (environ if environ is not None else os.environ).get(self.env_name, "")
        try:
            value = float(raw) if raw else 1.0
        except ValueError:
            return 1.0
        return value if 0 < value <= 1 else 1.0

    def scaled(self, seconds: float) -> float:
        """``seconds`` times :meth:`factor` (tests shrink waits; production is unchanged)."""
        return seconds * self.factor()


def _unscaled(seconds: float) -> float:
    return seconds


@dataclass(frozen=True, slots=True)
class EvidenceBounds:
    """The caps of evidence retrieval and session release after the child.

    The defaults are the production values every backend uses; ``scale`` is applied to each
    cap when it is used (a backend passes its :meth:`TimeScale.scaled`), while messages and
    :meth:`rows` name the production values.
    """

    total_s: float = 300.0
    status_s: float = 30.0
    events_s: float = 60.0
    artifact_s: float = 150.0
    release_s: float = 60.0
    scale: Callable[[float], float] = _unscaled

    def rows(self, release_behaviour: str) -> tuple[Bound[Literal["seconds"]], ...]:
        """The two rows of a backend's table; ``release_behaviour`` says what follows a release."""
        return (
            Bound("Evidence retrieval", self.total_s, "seconds",
                  f"total; sub-caps: status {self.status_s:g} s, events and frame events {self.events_s:g} s "
                  f"each, drawing artifact {self.artifact_s:g} s"),
            Bound("Session release", self.release_s, "seconds", release_behaviour),
        )
