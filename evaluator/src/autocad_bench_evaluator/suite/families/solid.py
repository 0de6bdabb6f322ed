"""Skill *solid* (AutoCAD track): extrude, revolve and Boolean operations on 3D solids.

Each family holds one of the original solid tasks as its fixed instance; LibreCAD has no
solids, so these instances run on AutoCAD only and are checked statically here.
"""

from __future__ import annotations

from autocad_bench_evaluator.suite.families.base import Family
from autocad_bench_evaluator.suite.generators import solids

SUMMARIES = {
    "solid-extrude-plate": ("solid-extrude", "Extrude a closed profile into a solid."),
    "solid-revolve-shaft": ("solid-revolve", "Revolve a profile about an axis into a solid."),
    "solid-subtract-plate-hole": ("solid-subtract", "Subtract one solid from another."),
    "solid-union-bracket": ("solid-union", "Unite solids into one body."),
}


def families() -> tuple[Family, ...]:
    """One family per original 3D task, which stays its only (fixed) instance and runs on AutoCAD alone."""
    found: list[Family] = []
    for task in solids.TASKS:
        family_id, summary = SUMMARIES[task.task_id]
        found.append(
            Family(
                family_id=family_id,
                skill="solid",
                title=task.title,
                summary=summary,
                version=1,
                sample=None,
                plan=None,
                scoring=solids.SCORING,
                fixed=(task,),
                apps=task.apps,
            )
        )
    return tuple(found)
