"""The task definitions of the suite, one module per tier, in suite order."""

from __future__ import annotations

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.generators import annotation, composite, primitives, solids

ALL_TASKS: tuple[TaskDefinition, ...] = (*primitives.TASKS, *composite.TASKS, *annotation.TASKS, *solids.TASKS)
"""Every task, in the canonical order (tier by tier)."""

DEFINITIONS: dict[str, TaskDefinition] = {task.task_id: task for task in ALL_TASKS}
if len(DEFINITIONS) != len(ALL_TASKS):  # pragma: no cover - a programming error caught on import
    raise RuntimeError("duplicate task ids in the suite definitions")

__all__ = ["ALL_TASKS", "DEFINITIONS"]
