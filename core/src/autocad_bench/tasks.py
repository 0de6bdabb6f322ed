"""Task definitions as the harness sees them: prompt, reference image and template drawing.

A task directory holds one folder per task id with ``task.json`` (a :class:`TaskSpec`), the
fixed ``reference.png`` every model receives, and the template drawing the desktop starts
from. The evaluator distribution adds gold drawings and scoring specs next to them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError

from autocad_bench.errors import ConfigError, Problem
from autocad_bench.models import IDENTIFIER_PATTERN, StrictModel
from autocad_bench.validation import problems_from_validation_error

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class TaskSpec(StrictModel):
    """``task.json``: what the model is asked to draw and which files belong to the task."""

    task_id: str = Field(pattern=IDENTIFIER_PATTERN)
    title: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    units: str = "millimeters"
    tier: str = "primitives"
    apps: tuple[str, ...] = ("librecad",)
    template: str = "template.dxf"
    reference: str = "reference.png"
    skill: str | None = Field(default=None, description="draft, edit, reproduce, annotate or solid")
    family: str | None = Field(default=None, description="the task family that generated this instance")
    family_version: int | None = Field(default=None, ge=1, description="version of the family's generator")
    seed: int | None = Field(default=None, ge=0, description="generation seed (None for fixed instances)")
    difficulty: str | None = Field(default=None, description="easy, medium or hard (from the reference solution)")
    split: str | None = Field(default=None, description="dev or test")

    def provenance(self) -> dict[str, str | int | None]:
        """Where this instance comes from: recorded with every result so runs stay comparable."""
        return {
            "skill": self.skill,
            "family": self.family,
            "family_version": self.family_version,
            "seed": self.seed,
            "difficulty": self.difficulty,
            "split": self.split,
        }


@dataclass(frozen=True, slots=True)
class Task:
    """A loaded task: its spec and absolute paths of its files."""

    spec: TaskSpec
    directory: Path

    @property
    def template_path(self) -> Path:
        return self.directory / self.spec.template

    @property
    def reference_path(self) -> Path:
        return self.directory / self.spec.reference

    def reference_sha256(self) -> str:
        return hashlib.sha256(self.reference_path.read_bytes()).hexdigest()


def load_task(tasks_dir: Path, task_id: str, location: str = "") -> Task:
    """Load and check one task; raise :class:`ConfigError` naming ``location`` on any problem."""
    directory = tasks_dir / task_id
    spec_path = directory / "task.json"
    where = location or str(spec_path)
    if not spec_path.is_file():
        raise ConfigError([Problem(where, f"task {task_id!r} not found in {tasks_dir}")])
    try:
        spec = TaskSpec.model_validate_json(spec_path.read_bytes())
    except ValidationError as error:
        raise ConfigError(problems_from_validation_error(error, f"{spec_path}: $")) from None
    if spec.task_id != task_id:
        raise ConfigError([Problem(f"{spec_path}: $.task_id", f"is {spec.task_id!r}, expected {task_id!r}")])
    task = Task(spec, directory)
    if not task.template_path.is_file():
        raise ConfigError([Problem(f"{spec_path}: $.template", f"missing file {task.template_path}")])
    if not task.reference_path.is_file() or task.reference_path.read_bytes()[:8] != PNG_SIGNATURE:
        raise ConfigError([Problem(f"{spec_path}: $.reference", f"not a PNG file: {task.reference_path}")])
    return task
