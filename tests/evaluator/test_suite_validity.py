"""The LibreCAD tasks are solvable for real, and scoring separates right from wrong (integration).

One private Xvfb display and one LibreCAD adapter serve the module; every run restarts
LibreCAD on a fresh copy of the task template, replays a solution through the real PyAutoGUI
driver (``apply_action``), checkpoints through the adapter's trusted save and scores the saved
DXF against the gold with the evaluator:

* the reference solution scores exactly 1.0 and passes;
* a ``done``-only replay scores 0;
* the perturbed solution (one wrong size or one missing feature) scores strictly between 0 and 1.

Every LibreCAD task is checked (about 3.5 minutes on 2 cores, in CI too). For a quick local
loop set ``AUTOCAD_BENCH_SUITE_SUBSET=1`` to run only :data:`SUBSET` (the smoke suite plus the
tasks that go through dialogs, docks and pointer picks); ``uv run python
benchmarks/suite_validity.py`` prints the full table in ``docs/tasks.md``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from autocad_bench_evaluator.suite import registry
from autocad_bench_evaluator.suite.validity import LibreCADRig, Variant, librecad_rig

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in ("Xvfb", "xdotool", "librecad")),
        reason="needs Xvfb, xdotool and LibreCAD (apt-get install xvfb xdotool librecad)",
    ),
]

SUBSET = (
    *registry.resolve_suite("smoke"),
    "part-slotted-plate",
    "anno-layers-plate",
    "anno-text-title",
    "anno-dim-radial",
    "anno-hatch-solid",
    "anno-block-bolts",
)
TASKS = list(SUBSET) if os.environ.get("AUTOCAD_BENCH_SUITE_SUBSET") == "1" else registry.list_tasks(app="librecad")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LibreCADRig]:
    with librecad_rig(tmp_path_factory.mktemp("suite-validity")) as shared:
        yield shared


def _run(rig: LibreCADRig, task_id: str, variant: Variant, tmp_path: Path) -> float:
    result = rig.run(registry.load(task_id), variant, tmp_path / "attempt.dxf")
    assert result.error is None, result.error
    assert result.report is not None and result.score is not None
    return result.score


def test_subset_covers_every_2d_tier_and_gui_step() -> None:
    tiers = {registry.definition(task_id).tier for task_id in SUBSET}
    assert tiers == {"primitives", "composite", "annotation"}
    assert set(SUBSET) <= set(registry.list_tasks(app="librecad"))


@pytest.mark.parametrize("task_id", TASKS)
def test_reference_solution_scores_one(rig: LibreCADRig, task_id: str, tmp_path: Path) -> None:
    result = rig.run(registry.load(task_id), "oracle", tmp_path / "attempt.dxf")
    assert result.error is None, result.error
    assert result.report is not None
    assert result.report.score == 1.0, result.report.components
    assert result.report.passed


@pytest.mark.parametrize("task_id", TASKS)
def test_done_only_scores_zero(rig: LibreCADRig, task_id: str, tmp_path: Path) -> None:
    assert _run(rig, task_id, "noop", tmp_path) == 0.0


@pytest.mark.parametrize("task_id", TASKS)
def test_perturbed_solution_gets_partial_credit(rig: LibreCADRig, task_id: str, tmp_path: Path) -> None:
    score = _run(rig, task_id, "perturbed", tmp_path)
    assert 0.0 < score < 1.0
