"""Resolving a ``task_suite`` to its ordered list of task ids."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, ValidationError

from autocad_bench.errors import ConfigError, Problem
from autocad_bench.models import StrictModel
from autocad_bench.validation import problems_from_validation_error


class TaskSuiteFile(StrictModel):
    """A suite file: ``{"name": "...", "tasks": ["task-a", "task-b", ...]}`` (order matters)."""

    name: str = Field(min_length=1)
    tasks: list[str] = Field(min_length=1)


def resolve_task_suite(reference: str, base_dir: Path, location: str) -> list[str]:
    """Task ids of the suite ``reference``: a JSON file path relative to the config file.

    Raises :class:`ConfigError` naming ``location`` when the suite cannot be resolved.
    """
    path = (base_dir / reference) if not Path(reference).is_absolute() else Path(reference)
    if not path.is_file():
        raise ConfigError([Problem(location, f"task suite {reference!r} not found (looked for {path})")])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        suite = TaskSuiteFile.model_validate(data)
    except ValueError as error:
        if isinstance(error, ValidationError):
            raise ConfigError(problems_from_validation_error(error, f"{path}: $")) from None
        raise ConfigError([Problem(str(path), f"invalid JSON: {error}")]) from None
    if len(set(suite.tasks)) != len(suite.tasks):
        raise ConfigError([Problem(f"{path}: $.tasks", "task ids must be unique")])
    return suite.tasks
