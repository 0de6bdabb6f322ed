"""How the CLI reports user mistakes: one line per problem, exit 2, no traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from autocad_bench.errors import UserError

P = ParamSpec("P")
R = TypeVar("R")


def report_user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn :class:`UserError` into ``error: <location>: <message>`` lines and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as error:
            for problem in error.problems:
                click.echo(f"error: {problem}", err=True)
            sys.exit(error.exit_code)

    return wrapper
