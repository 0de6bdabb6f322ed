"""Task families: a parameter space, a seeded generator and the plan every output comes from.

A :class:`Family` turns ``(seed, index)`` into one task instance:

1. ``sample(rng)`` draws the instance's parameters from a :class:`random.Random` seeded with
   ``"<family>:<version>:<seed>:<index>"`` (string seeds are hashed with SHA-512 by Python, so
   the same seed gives the same instance on every machine and Python 3 release);
2. ``plan(params, perturbed)`` describes the instance as a :class:`Plan`: the prompt, what the
   template already holds, which template entities the solution removes and the drafting
   steps; with ``perturbed=True`` the same plan carries one deliberate mistake;
3. :meth:`Family.instance` makes the :class:`TaskDefinition` from the plan: the gold is the
   template minus the removed entities plus everything the steps draw, the LibreCAD solution
   and the AutoCAD script are the steps, the perturbed solution and the perturbed gold come
   from the perturbed plan.

Families may also carry *fixed* instances: the 27 tasks of the first suite keep their ids and
their hand-written definitions (byte-identical gold), so results recorded against them stay
comparable. A family's ``version`` goes up whenever its generator changes what any seed
produces; the version is recorded in every instance's ``task.json`` and every result.

Splits: fixed instances are ``dev``; a generated instance is ``dev`` when the first 32 bits of
the SHA-256 of its id are divisible by 5 (about a fifth), otherwise ``test``.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezdxf.document import Drawing

from autocad_bench_evaluator.suite.definitions import (
    BOTH_APPS,
    PROMPT_SUFFIX,
    App,
    Skill,
    Split,
    TaskDefinition,
)
from autocad_bench_evaluator.suite.drawing import STANDARD_VIEW, View
from autocad_bench_evaluator.suite.families.ops import Erase, GoldState, Op, Step, UseLayer
from autocad_bench_evaluator.suite.librecad import LibreCADScript

DEFAULT_SEED = 2026
"""The seed of the default suite's generated instances."""

INSTANCE_PATTERN = "{family}-s{seed}-{index:02d}"

REPRODUCE_SUFFIX = (
    " All dimensions are in millimetres. Do not save the drawing yourself: it is saved for you when "
    "you finish with the done action."
)
"""Reproduce tasks fix no position, so their prompt does not speak of absolute coordinates."""


@dataclass(frozen=True)
class Plan:
    """One instance, described once (see the module docstring)."""

    title: str
    brief: str
    steps: tuple[Step, ...]
    perturbation: str
    template: tuple[Op, ...] = ()
    erased: tuple[int, ...] = ()
    scoring: Mapping[str, Any] = field(default_factory=dict)
    view: View = STANDARD_VIEW

    def template_builder(self) -> Callable[[Drawing], None] | None:
        if not self.template:
            return None
        ops = self.template

        def build(doc: Drawing) -> None:
            state = GoldState()
            for op in ops:
                op.gold(doc, state)

        return build

    def gold_builder(self) -> Callable[[Drawing], None]:
        template, erased, steps = self.template, set(self.erased), self.steps

        def build(doc: Drawing) -> None:
            state = GoldState()
            for index, op in enumerate(template):
                if index in erased and not _is_layer(op):
                    continue
                op.gold(doc, state)
            state.layer = "0"  # the template opens with layer 0 current
            for step in steps:
                if isinstance(step, UseLayer):
                    state.layer = step.name
                elif not isinstance(step, Erase):
                    step.gold(doc, state)

        return build

    def solution(self, script: LibreCADScript) -> None:
        for step in self.steps:
            step.librecad(script)

    def autocad_lines(self) -> tuple[str, ...]:
        lines: list[str] = []
        for step in self.steps:
            lines += step.autocad()
        return tuple(lines)


def _is_layer(op: Op) -> bool:
    from autocad_bench_evaluator.suite.families.ops import Layer

    return isinstance(op, Layer)


def split_of(task_id: str) -> Split:
    """``dev`` for about a fifth of the generated ids (by hash), ``test`` for the rest."""
    return "dev" if int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % 5 == 0 else "test"


@dataclass(frozen=True)
class Family:
    """A task family (see the module docstring).

    ``scoring`` holds the family's :class:`ScoringSpec` fields (a plan may override some);
    ``default_count`` is how many generated instances the default suite holds.
    """

    family_id: str
    skill: Skill
    title: str
    summary: str
    version: int
    sample: Callable[[random.Random], Any] | None
    plan: Callable[[Any, bool], Plan] | None
    scoring: Mapping[str, Any]
    default_count: int = 0
    fixed: tuple[TaskDefinition, ...] = ()
    apps: tuple[App, ...] = BOTH_APPS
    edit: bool = False
    """Edit tasks rescale the score from the template's own score (``ScoringSpec.baseline``)."""

    @property
    def generative(self) -> bool:
        return self.sample is not None and self.plan is not None

    def params(self, seed: int, index: int) -> Any:
        if self.sample is None:
            raise ValueError(f"family {self.family_id} has no parameter space (fixed instances only)")
        return self.sample(random.Random(f"{self.family_id}:{self.version}:{seed}:{index}"))

    def instance_id(self, seed: int, index: int) -> str:
        return INSTANCE_PATTERN.format(family=self.family_id, seed=seed, index=index)

    def instance(self, seed: int, index: int) -> TaskDefinition:
        """Instance ``index`` of seed ``seed``; raises ``ValueError`` for a fixed-only family."""
        if self.plan is None:
            raise ValueError(f"family {self.family_id} has no parameter space (fixed instances only)")
        params = self.params(seed, index)
        plan, wrong = self.plan(params, False), self.plan(params, True)
        task_id = self.instance_id(seed, index)
        scoring = {**self.scoring, **plan.scoring}
        baseline = _baseline_of(task_id, plan, scoring) if self.edit else None
        suffix = REPRODUCE_SUFFIX if self.skill == "reproduce" else PROMPT_SUFFIX
        return TaskDefinition(
            task_id=task_id,
            title=plan.title,
            brief=plan.brief,
            tier=self.skill,
            gold=plan.gold_builder(),
            scoring=scoring,
            autocad=plan.autocad_lines(),
            apps=self.apps,
            librecad=_solution(plan, wrong) if "librecad" in self.apps else None,
            perturbation=wrong.perturbation,
            view=plan.view,
            skill=self.skill,
            family=self.family_id,
            family_version=self.version,
            seed=seed,
            split=split_of(task_id),
            template=plan.template_builder(),
            perturbed_gold=wrong.gold_builder(),
            baseline=baseline,
            prompt_suffix=suffix,
        )


def _solution(plan: Plan, wrong: Plan) -> Callable[[LibreCADScript, bool], None]:
    def build(script: LibreCADScript, perturbed: bool) -> None:
        (wrong if perturbed else plan).solution(script)

    return build


def _baseline_of(task_id: str, plan: Plan, scoring: Mapping[str, Any]) -> Callable[[], float]:
    """The raw score of the unchanged template against the gold (computed on demand)."""

    def compute() -> float:
        from autocad_bench_evaluator.metadata import DrawingMetadata, read_drawing
        from autocad_bench_evaluator.scoring import score_drawing
        from autocad_bench_evaluator.spec import ScoringSpec
        from autocad_bench_evaluator.suite.drawing import document_bytes, new_document

        template_builder = plan.template_builder()
        if template_builder is None:
            raise ValueError(f"edit task {task_id} has an empty template")
        docs = {"template": new_document(plan.view), "gold": new_document(plan.view)}
        template_builder(docs["template"])
        plan.gold_builder()(docs["gold"])
        spec = ScoringSpec.model_validate({"task_id": task_id, **scoring})
        metadata: dict[str, DrawingMetadata] = {}
        with tempfile.TemporaryDirectory(prefix="autocad-bench-baseline-") as tmp:
            for name, doc in docs.items():
                path = Path(tmp) / f"{name}.dxf"
                path.write_bytes(document_bytes(doc))
                read = read_drawing(path, spec.schema_version)
                if not isinstance(read, DrawingMetadata):
                    raise RuntimeError(f"{task_id}: the {name} drawing is invalid: {read.reason}")
                metadata[name] = read
        raw = score_drawing(metadata["gold"], metadata["template"], spec, "baseline").score
        # One unit of the report's rounding above the template's (rounded) score, so that the
        # unchanged template always lands at exactly 0 after rescaling.
        return min(0.999, round(raw + 1e-6, 6))

    return compute
