"""Exceptions shared across autocad-bench.

User mistakes (bad configuration, unknown plugin names, refused output directories) are
reported through :class:`UserError` subclasses: the CLI prints their message, never a
traceback. Everything else is a bug or an infrastructure failure and propagates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem at one place: ``location`` names the file and JSON path (or flag/variable)."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class UserError(Exception):
    """A mistake the operator can fix; the CLI exits 2 and prints :attr:`problems` one per line."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem] | str) -> None:
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ConfigError(UserError):
    """A batch configuration (file, flag or environment variable) is invalid."""


class PluginError(UserError):
    """A plugin cannot be found, loaded or registered (unknown name, duplicate, bad hooks)."""


class RecoveryNotSupportedError(PluginError):
    """The selected backend does not implement the interrupted-run recovery protocol."""
