"""The task suite as data: task folders, named suites, and gold drawings generated on demand.

The folder :data:`TASKS_DIR` is a core ``tasks_dir``: one folder per task with ``task.json``,
``template.dxf`` and ``reference.png`` (what the harness needs), plus ``scoring.json`` and the
reference solutions (``solution.librecad.jsonl``, ``solution.perturbed.jsonl``,
``solution.autocad.scr``). Gold drawings are not stored: :func:`generate_gold` builds them
from the committed families (:mod:`autocad_bench_evaluator.suite.families`, whose fixed
instances are the original tasks of :mod:`autocad_bench_evaluator.suite.generators`), with the
same bytes on every run. The default suite is :func:`~autocad_bench_evaluator.suite.families.default_instances`.

Named suites live in :data:`SUITES_FILE` (``suites.json``); :func:`resolve_suite` turns a name
into its ordered task ids and :func:`write_suite_file` writes the ``{"name", "tasks"}`` file a
batch configuration's ``task_suite`` points at.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ezdxf.document import Drawing
from pydantic import Field

from autocad_bench.models import StrictModel
from autocad_bench.tasks import Task, TaskSpec, load_task
from autocad_bench_evaluator.spec import ScoringSpec, load_scoring_spec
from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.drawing import document_bytes, new_document
from autocad_bench_evaluator.suite.families import default_instances

if TYPE_CHECKING:
    from autocad_bench_evaluator.gold_cache import GoldCacheEntry

SUITE_DIR = Path(__file__).resolve().parent
TASKS_DIR = SUITE_DIR / "tasks"
"""The task folders; usable as a batch configuration's ``tasks_dir``."""
SUITES_FILE = SUITE_DIR / "suites.json"
SUITE_FILES_DIR = SUITE_DIR / "suites"
"""One core suite file (``{"name": ..., "tasks": [...]}``) per named suite."""

SOLUTION_FILES: dict[str, str] = {"librecad": "solution.librecad.jsonl", "autocad": "solution.autocad.scr"}
PERTURBED_FILE = "solution.perturbed.jsonl"
GOLD_FILENAME = "gold.dxf"


class SuiteError(LookupError):
    """An unknown task id or suite name, or a suite that names an unknown task."""


class NamedSuite(StrictModel):
    """One entry of ``suites.json``."""

    description: str = Field(min_length=1)
    tasks: tuple[str, ...] = Field(min_length=1)


class SuitesFile(StrictModel):
    """``suites.json``: named, ordered task lists."""

    suites: dict[str, NamedSuite]


@dataclass(frozen=True, slots=True)
class SuiteTask:
    """A loaded task folder: the core task, its scoring spec and its definition."""

    task: Task
    scoring: ScoringSpec
    definition: TaskDefinition

    @property
    def task_id(self) -> str:
        return self.task.spec.task_id

    @property
    def spec(self) -> TaskSpec:
        return self.task.spec

    @property
    def directory(self) -> Path:
        return self.task.directory

    @property
    def template_path(self) -> Path:
        return self.task.template_path

    @property
    def reference_path(self) -> Path:
        return self.task.reference_path

    def solution_path(self, app: str) -> Path | None:
        """The reference solution for ``app`` ("librecad" or "autocad"), None if the task has none."""
        name = SOLUTION_FILES.get(app)
        if name is None or app not in self.spec.apps:
            return None
        return self.directory / name

    @property
    def perturbed_path(self) -> Path | None:
        """The LibreCAD solution with one deliberate mistake (LibreCAD tasks only)."""
        return self.directory / PERTURBED_FILE if "librecad" in self.spec.apps else None


@functools.cache
def _definitions() -> dict[str, TaskDefinition]:
    return {task.task_id: task for task in default_instances()}


def list_tasks(app: str | None = None, tier: str | None = None) -> list[str]:
    """Every task id of the default suite in suite order, optionally only those for ``app``
    and/or of ``tier`` (a tier of the original tasks, or a skill)."""
    return [
        task.task_id
        for task in default_instances()
        if (app is None or app in task.apps) and (tier is None or tier in (task.tier, task.skill))
    ]


def definition(task_id: str) -> TaskDefinition:
    """The code definition of ``task_id``; raises :class:`SuiteError` if unknown."""
    try:
        return _definitions()[task_id]
    except KeyError:
        raise SuiteError(f"unknown task {task_id!r} (see: autocad-bench tasks list)") from None


def load(task_id: str, tasks_dir: Path = TASKS_DIR) -> SuiteTask:
    """Load and check the folder of ``task_id`` (core task checks plus ``scoring.json``)."""
    found = definition(task_id)
    task = load_task(tasks_dir, task_id)
    scoring = load_scoring_spec(task.directory / "scoring.json")
    if scoring.task_id != task_id:
        raise SuiteError(f"{task.directory / 'scoring.json'}: task_id is {scoring.task_id!r}, expected {task_id!r}")
    return SuiteTask(task=task, scoring=scoring, definition=found)


def gold_document(task: str | TaskDefinition) -> Drawing:
    """The gold drawing of ``task`` (an id of the default suite, or a definition) as an ezdxf
    document: the template's settings and contents, then the gold."""
    found = definition(task) if isinstance(task, str) else task
    doc = new_document(found.view)
    found.gold(doc)
    return doc


@functools.cache
def gold_bytes(task_id: str) -> bytes:
    """The DXF bytes of the gold drawing (identical on every call and machine; cached per process)."""
    return document_bytes(gold_document(task_id))


def definition_gold_bytes(task: TaskDefinition) -> bytes:
    """The gold DXF bytes of any definition (for generated sets outside the default suite)."""
    return document_bytes(gold_document(task))


def default_gold_dir(task_id: str) -> Path:
    """The folder :func:`generate_gold` writes into when given none: ``<tmp>/autocad-bench-gold/<task_id>``."""
    return Path(tempfile.gettempdir()) / "autocad-bench-gold" / task_id


def generate_gold(task: str | TaskDefinition, out_dir: Path | None = None) -> Path:
    """Write ``gold.dxf`` of ``task`` (an id of the default suite, or a definition) into
    ``out_dir`` and return its path.

    Without ``out_dir`` the file goes to ``<tmp>/autocad-bench-gold/<task_id>/``. The file is
    rewritten only when its bytes differ, so repeated calls are cheap and idempotent.
    """
    task_id = task if isinstance(task, str) else task.task_id
    directory = Path(out_dir) if out_dir is not None else default_gold_dir(task_id)
    path = directory / GOLD_FILENAME
    data = gold_bytes(task) if isinstance(task, str) else definition_gold_bytes(task)
    if not path.is_file() or path.read_bytes() != data:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def build_gold_cache(root: Path, evaluator_version: str, task_ids: Iterable[str] | None = None) -> list[GoldCacheEntry]:
    """Write the gold-cache entries (gold, metadata, render, scoring, manifest) of ``task_ids``.

    Defaults to every task; each entry is built by the evaluator's
    :func:`~autocad_bench_evaluator.gold_cache.build_entry` from the generated gold and the
    task's committed ``scoring.json``.
    """
    from autocad_bench_evaluator.gold_cache import build_entry

    entries: list[GoldCacheEntry] = []
    for task_id in list_tasks() if task_ids is None else task_ids:
        task = load(task_id)
        with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
            entries.append(build_entry(Path(root), evaluator_version, generate_gold(task_id, Path(tmp)), task.scoring))
    return entries


def template_document(task: str | TaskDefinition) -> Drawing:
    """The starting drawing of ``task``: units and initial view, plus the drawing an edit task
    changes."""
    found = definition(task) if isinstance(task, str) else task
    doc = new_document(found.view)
    if found.template is not None:
        found.template(doc)
    return doc


# -- named suites --------------------------------------------------------------------------------


def load_suites(path: Path = SUITES_FILE) -> SuitesFile:
    """The named suites of ``suites.json`` at ``path``.

    Raises ``OSError`` when the file cannot be read and pydantic's ``ValidationError`` when it is malformed.
    """
    return SuitesFile.model_validate_json(Path(path).read_bytes())


def suites(path: Path = SUITES_FILE) -> dict[str, list[str]]:
    """Every named suite with its ordered task ids."""
    return {name: list(entry.tasks) for name, entry in load_suites(path).suites.items()}


def resolve_suite(name: str, path: Path = SUITES_FILE) -> list[str]:
    """The ordered task ids of suite ``name``; raises :class:`SuiteError` for an unknown name or task."""
    named = suites(path)
    if name not in named:
        raise SuiteError(f"unknown suite {name!r}; known: {', '.join(named)}")
    unknown = [task_id for task_id in named[name] if task_id not in _definitions()]
    if unknown:
        raise SuiteError(f"suite {name!r} names unknown tasks: {', '.join(unknown)}")
    return named[name]


def suite_file_json(name: str, path: Path = SUITES_FILE) -> str:
    """The core ``task_suite`` file of suite ``name`` (``{"name": ..., "tasks": [...]}``)."""
    return json.dumps({"name": name, "tasks": resolve_suite(name, path)}, indent=2) + "\n"


def write_suite_file(name: str, target: Path, path: Path = SUITES_FILE) -> Path:
    """Write the core ``task_suite`` file of suite ``name`` to ``target``; returns ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(suite_file_json(name, path))
    return target
