"""What one suite task is made of, in code: the source of every file in its folder.

A :class:`TaskDefinition` holds the prompt, the gold drawing generator, the scoring spec and
the reference solutions (LibreCAD action batches, AutoCAD command script) of one task. Most
definitions are made by a family (:mod:`autocad_bench_evaluator.suite.families`); the 27
original tasks are written out in :mod:`autocad_bench_evaluator.suite.generators`.
``python -m autocad_bench_evaluator.suite.build`` writes the task folders from these
definitions; the static tests check that the committed folders match them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ezdxf.document import Drawing

from autocad_bench_evaluator.spec import ScoringSpec
from autocad_bench_evaluator.suite.drawing import STANDARD_VIEW, View
from autocad_bench_evaluator.suite.librecad import LibreCADScript

Tier = Literal["primitives", "composite", "annotation", "3d", "draft", "edit", "reproduce", "annotate", "solid"]
TIERS: tuple[Tier, ...] = ("primitives", "composite", "annotation", "3d")
"""The tiers of the 27 original tasks (their task.json keeps them); new instances use their skill."""
Skill = Literal["draft", "edit", "reproduce", "annotate", "solid"]
SKILLS: tuple[Skill, ...] = ("draft", "edit", "reproduce", "annotate", "solid")
Split = Literal["dev", "test"]
Difficulty = Literal["easy", "medium", "hard"]
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard")
DIFFICULTY_BOUNDS: dict[str, tuple[int, int]] = {"librecad": (24, 70), "autocad": (3, 8)}
"""Upper bounds of "easy" and "medium": LibreCAD solution actions, or AutoCAD script lines."""
App = Literal["librecad", "autocad"]

GoldBuilder = Callable[[Drawing], None]
"""Adds the gold entities (layers, blocks, ...) to an empty document made from the template."""

Polyline3D = list[tuple[float, float, float]]
WireframeBuilder = Callable[[], list[Polyline3D]]
"""The edges of a 3D gold as polylines, for the isometric reference image of 3D tasks."""

SolutionBuilder = Callable[[LibreCADScript, bool], None]
"""Appends the solution steps; the flag asks for the perturbed variant (one deliberate mistake)."""

PROMPT_SUFFIX = (
    " All dimensions are in millimetres and coordinates are absolute drawing coordinates. "
    "Do not save the drawing yourself: it is saved for you when you finish with the done action."
)

_BASELINES: dict[str, float] = {}


def _baseline(task_id: str, compute: Callable[[], float]) -> float:
    """The edit baseline of ``task_id``, computed once per process (it reads two drawings)."""
    if task_id not in _BASELINES:
        _BASELINES[task_id] = compute()
    return _BASELINES[task_id]


BOTH_APPS: tuple[App, ...] = ("librecad", "autocad")
AUTOCAD_ONLY: tuple[App, ...] = ("autocad",)


@dataclass(frozen=True)
class TaskDefinition:
    """One task of the suite (see the module docstring).

    ``brief`` is the task-specific part of the prompt (the suffix is added by :attr:`prompt`);
    ``scoring`` holds the :class:`ScoringSpec` fields except ``task_id``; ``perturbation``
    says what the perturbed solution gets wrong; ``autocad`` is the AutoCAD command script
    (one command line per entry, untested on this machine).

    Family instances (:mod:`autocad_bench_evaluator.suite.families`) also set ``skill``,
    ``family``, ``family_version``, ``seed`` (None for the fixed instances) and ``split``;
    ``template`` adds the drawing an edit task starts from, ``perturbed_gold`` builds the
    perturbed solution's drawing (for the static proof), and ``baseline`` computes the edit
    baseline of the scoring spec on demand.
    """

    task_id: str
    title: str
    brief: str
    tier: Tier
    gold: GoldBuilder
    scoring: dict[str, Any]
    autocad: tuple[str, ...]
    apps: tuple[App, ...] = BOTH_APPS
    librecad: SolutionBuilder | None = None
    perturbation: str = ""
    view: View = STANDARD_VIEW
    wireframe: WireframeBuilder | None = None
    skill: Skill = "draft"
    family: str = ""
    family_version: int = 1
    seed: int | None = None
    split: Split = "dev"
    template: GoldBuilder | None = None
    perturbed_gold: GoldBuilder | None = None
    baseline: Callable[[], float] | None = None
    prompt_suffix: str = PROMPT_SUFFIX

    @property
    def prompt(self) -> str:
        return self.brief + self.prompt_suffix

    def scoring_spec(self) -> ScoringSpec:
        extra: dict[str, Any] = {}
        if self.baseline is not None:
            extra["baseline"] = _baseline(self.task_id, self.baseline)
        return ScoringSpec.model_validate({"task_id": self.task_id, **self.scoring, **extra})

    @property
    def difficulty(self) -> Difficulty:
        """Tier from the reference solution: the GUI actions of the LibreCAD solution, or the
        command lines of the AutoCAD script for AutoCAD-only tasks (see :data:`DIFFICULTY_BOUNDS`)."""
        script = self.librecad_script()
        if script is not None:
            size = sum(len(batch) for batch in script.batches)
            easy, medium = DIFFICULTY_BOUNDS["librecad"]
        else:
            size = len(self.autocad)
            easy, medium = DIFFICULTY_BOUNDS["autocad"]
        return "easy" if size <= easy else "medium" if size <= medium else "hard"

    def librecad_script(self, perturbed: bool = False) -> LibreCADScript | None:
        """The LibreCAD solution (or its perturbed variant), None for AutoCAD-only tasks."""
        if self.librecad is None:
            return None
        script = LibreCADScript(view=self.view)
        self.librecad(script, perturbed)
        return script

    def autocad_script(self) -> str:
        """The ``.scr`` text: a header comment, the commands, a trailing newline."""
        header = [
            f"; {self.task_id}: reference solution for AutoCAD (command script).",
            "; UNTESTED: written for AutoCAD 2019+ and never run on this machine (no AutoCAD here).",
            "; Run with SCRIPT in the task template; the harness saves the drawing itself.",
        ]
        body = ["OSMODE", "0", *self.autocad]  # no object snaps: typed points stay exact
        return "\n".join([*header, *body]) + "\n"
