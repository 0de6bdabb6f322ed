"""The ``standard`` task pack: the suites, tasks and gold cache this distribution ships.

Registered in the entry-point group ``autocad_bench.task_packs``, so a configuration can say
``"task_suite": "smoke"`` instead of a path into site-packages (see
:mod:`autocad_bench.config.packs`).
"""

from __future__ import annotations

from pathlib import Path

from autocad_bench.config.packs import TaskPack
from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE

_SUITE = Path(__file__).resolve().parent


def standard_pack() -> TaskPack:
    """The pack: ``suites/*.json`` over ``tasks/``, scored by the shipped gold cache."""
    return TaskPack(
        name="standard",
        description="the autocad-bench task suite (LibreCAD and AutoCAD tasks, with reference solutions)",
        suites_dir=_SUITE / "suites",
        tasks_dir=_SUITE / "tasks",
        gold_cache=SHIPPED_GOLD_CACHE,
        evaluator_version=EVALUATOR_VERSION,
    )
