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


def missing_extra_message(what: str, extra: str, installed: Iterable[str] | None = None) -> str:
    """The one wording of "this needs an extra".

    ``{what} is not installed: pip install "autocad-bench[{extra}]"``, followed by
    `` (installed: a, b)`` when the caller knows what is installed instead.
    """
    message = f'{what} is not installed: pip install "autocad-bench[{extra}]"'
    if installed is not None:
        message += f" (installed: {', '.join(installed) or 'none'})"
    return message


class MissingExtraError(PluginError):
    """A feature needs a distribution that is not installed; the message names the extra.

    Raised (or its :attr:`message` reported) wherever a selected backend, provider,
    evaluator or command lives in a distribution the user has not installed.
    """

    def __init__(self, what: str, extra: str, installed: Iterable[str] | None = None) -> None:
        self.what = what
        self.extra = extra
        self.message = missing_extra_message(what, extra, installed)
        super().__init__(self.message)


class RecoveryNotSupportedError(PluginError):
    """The selected backend does not implement the interrupted-run recovery protocol."""
