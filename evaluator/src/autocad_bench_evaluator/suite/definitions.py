"""What one suite task is made of, in code: the source of every file in its folder.

A :class:`TaskDefinition` holds the prompt, the gold drawing generator, the scoring spec and
the reference solutions (LibreCAD action batches, AutoCAD command script) of one task.
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

Tier = Literal["primitives", "composite", "annotation", "3d"]
TIERS: tuple[Tier, ...] = ("primitives", "composite", "annotation", "3d")
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

BOTH_APPS: tuple[App, ...] = ("librecad", "autocad")
AUTOCAD_ONLY: tuple[App, ...] = ("autocad",)


@dataclass(frozen=True)
class TaskDefinition:
    """One task of the suite (see the module docstring).

    ``brief`` is the task-specific part of the prompt (the suffix is added by :attr:`prompt`);
    ``scoring`` holds the :class:`ScoringSpec` fields except ``task_id``; ``perturbation``
    says what the perturbed solution gets wrong; ``autocad`` is the AutoCAD command script
    (one command line per entry, untested on this machine).
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

    @property
    def prompt(self) -> str:
        return self.brief + PROMPT_SUFFIX

    def scoring_spec(self) -> ScoringSpec:
        return ScoringSpec.model_validate({"task_id": self.task_id, **self.scoring})

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
