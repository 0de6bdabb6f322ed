"""Turning pydantic validation errors into one readable line per problem."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from autocad_bench.errors import Problem


def json_path(parts: Sequence[int | str], root: str = "$") -> str:
    """``("rollouts", 2, "model")`` -> ``$.rollouts[2].model``."""
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier() or part.replace("-", "_").isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def problems_from_validation_error(error: ValidationError, location: str) -> list[Problem]:
    """One :class:`Problem` per pydantic error; ``location`` is ``"file: $.path"``."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        loc = [p for p in item["loc"] if not (isinstance(p, str) and _is_validator_segment(p))]
        path = location + json_path(loc, root="")
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        elif item["type"] == "missing":
            message = "required field is missing"
        problems.append(Problem(path, message))
    return problems


def _is_validator_segment(part: str) -> bool:
    # Union members ("list[str]") and function validators ("function-after[...]") name no field.
    return "[" in part or part.startswith("function-")
