"""The LibreCAD tasks are solvable for real, and scoring separates right from wrong.

Integration part (marked ``integration``, runs in CI): the first instance of every task family
(:func:`~autocad_bench_evaluator.suite.validity.per_family`) is replayed on real LibreCAD by
:func:`~autocad_bench_evaluator.suite.validity.run_validity` on 2 parallel desktops (private
Xvfb displays, one worker process each). Every run restarts LibreCAD on a fresh copy of the
task template, replays a solution through the real PyAutoGUI driver (``apply_action``),
checkpoints through the adapter's trusted save and scores the saved DXF against the gold:

* the reference solution scores exactly 1.0 and passes;
* a ``done``-only replay scores 0;
* the perturbed solution (one wrong size or one missing feature) scores strictly between 0 and 1.

``AUTOCAD_BENCH_VALIDITY_WORKERS`` changes the number of desktops (2 by default; more than the
core count makes the fixed dialog waits of some solutions flaky). Every instance, not only one
per family, is proven by ``uv run python benchmarks/suite_validity.py --all --update-docs``,
which writes the table in ``docs/tasks.md``.

Fast part (no desktop): the docs table lists every LibreCAD instance exactly once with the
expected outcomes, the scheduler keeps result order and survives a crashed or hung worker
(with a fake rig), and the docs block is rewritten only between its markers.
"""

from __future__ import annotations

import datetime
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from autocad_bench_evaluator.suite import registry, validity
from autocad_bench_evaluator.suite.validity import (
    DOCS_PATH,
    TABLE_END,
    TABLE_START,
    VARIANTS,
    RunResult,
    Variant,
    per_family,
    read_validity_table,
    replace_validity_table,
    run_validity,
)

NEEDS_DESKTOP = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("Xvfb", "xdotool", "librecad")),
    reason="needs Xvfb, xdotool and LibreCAD (apt-get install xvfb xdotool librecad)",
)
FAMILY_TASKS = per_family(registry.list_tasks(app="librecad"))
WORKERS = int(os.environ.get("AUTOCAD_BENCH_VALIDITY_WORKERS", "2"))


# -- integration: one instance per family on real LibreCAD ---------------------------------------


@pytest.fixture(scope="module")
def family_results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], RunResult]:
    """Every selected family representative, all variants, in one parallel run."""
    selected = {
        item.callspec.params["task_id"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_family_representative_outcome" and hasattr(item, "callspec")
    }
    tasks = [task_id for task_id in FAMILY_TASKS if task_id in selected]
    from autocad_bench_xvfb.suite_validity import LibreCADRig

    results = run_validity(tasks, VARIANTS, workers=WORKERS, workdir=tmp_path_factory.mktemp("suite-validity"),
                           rig_factory=LibreCADRig)
    assert [(r.task_id, r.variant) for r in results] == [(t, v) for t in tasks for v in VARIANTS]
    return {(r.task_id, r.variant): r for r in results}


@pytest.mark.integration
@NEEDS_DESKTOP
@pytest.mark.timeout(3600)  # the first test also runs the module fixture (every family, all variants)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("task_id", FAMILY_TASKS)
def test_family_representative_outcome(
    family_results: dict[tuple[str, str], RunResult], task_id: str, variant: Variant
) -> None:
    result = family_results[(task_id, variant)]
    assert result.error is None, result.error
    assert result.report is not None
    # Every component in full (pytest would cut a dict's repr): a failure on a loaded CI
    # machine must be diagnosable from the log alone.
    components = "\n".join(
        f"{name}: {component.score} {component.details}" for name, component in result.report.components.items()
    )
    if variant == "oracle":
        assert result.report.score == 1.0, components
        assert result.report.passed
    elif variant == "noop":
        assert result.report.score == 0.0, components
        assert not result.report.passed
    else:
        assert 0.0 < result.report.score < 1.0, components
    assert result.expected


# -- static: the docs table is complete and clean ------------------------------------------------


def test_docs_table_lists_every_librecad_instance_once_with_expected_outcomes() -> None:
    rows = read_validity_table(DOCS_PATH.read_text())
    listed = [row["task"] for row in rows]
    instances = registry.list_tasks(app="librecad")
    missing = [task_id for task_id in instances if task_id not in listed]
    duplicated = sorted({task_id for task_id in listed if listed.count(task_id) > 1})
    unknown = [task_id for task_id in listed if task_id not in instances]
    rerun = "rerun `uv run python benchmarks/suite_validity.py --all --update-docs`"
    if missing:
        pytest.fail(
            f"{len(missing)} of {len(instances)} LibreCAD instances are not in the validity table of "
            f"docs/tasks.md ({rerun}); missing: {', '.join(missing)}",
            pytrace=False,
        )
    assert not duplicated, f"listed more than once in the docs validity table ({rerun}): {duplicated}"
    assert not unknown, f"the docs validity table lists tasks that are not LibreCAD instances ({rerun}): {unknown}"
    bad = {
        row["task"]: {column: row.get(column, "") for column in validity.VARIANT_COLUMNS}
        for row in rows
        if any(
            column not in row or "UNEXPECTED" in row[column] or "error" in row[column]
            for column in validity.VARIANT_COLUMNS
        )
    }
    assert not bad, f"rows with an unexpected outcome or an error ({rerun} after fixing them): {bad}"


def test_docs_block_is_replaced_only_between_the_markers(tmp_path: Path) -> None:
    task_id = registry.list_tasks(app="librecad")[0]
    results = [RunResult(task_id, variant, None, 2, 5, 1.0, 2.0, 3.0, "boom") for variant in VARIANTS]
    block = validity.validity_block(results, 90.0, 2, machine="a test machine", when=datetime.date(2024, 1, 2))
    document = f"# Title\n\nbefore\n\n{TABLE_START}\nold table\n{TABLE_END}\n\nafter\n"
    updated = replace_validity_table(document, block)
    assert updated.startswith("# Title\n\nbefore\n\n") and updated.endswith("\n\nafter\n")
    assert "old table" not in updated
    assert "Measured on 2024-01-02: 3 runs (1 task instances x 3 variants) in 90 s wall time" in updated
    assert "with 2 parallel desktops on a test machine; 3 of 3 runs did NOT give the expected outcome" in updated
    rows = read_validity_table(updated)
    assert [row["task"] for row in rows] == [task_id]
    assert set(rows[0]) == set(validity.TABLE_HEADER)
    assert rows[0]["oracle"] == "error: boom"
    assert replace_validity_table(updated, block) == updated  # idempotent
    with pytest.raises(ValueError):
        replace_validity_table("no markers", block)


def test_per_family_keeps_the_first_instance_of_each_family(monkeypatch: pytest.MonkeyPatch) -> None:
    families = {"a-1": "a", "b-1": "b", "a-2": "a", "c-1": "c", "b-2": "b"}
    monkeypatch.setattr(registry, "definition", lambda task_id: SimpleNamespace(family=families[task_id]))
    assert per_family(list(families)) == ["a-1", "b-1", "c-1"]


# -- the scheduler, with a fake desktop ------------------------------------------------------------

CRASH: tuple[Variant, int] = ("noop", 1)  # the worker running the noop variant of the second task dies
HANG: tuple[Variant, int] = ("perturbed", 2)  # the perturbed variant of the third task never finishes


def loadable_tasks() -> list[str]:
    """LibreCAD instances whose folder is built (the fake runs still load their task)."""
    return [t for t in registry.list_tasks(app="librecad") if (registry.TASKS_DIR / t / "task.json").is_file()]


class FakeRig:
    """Stands in for LibreCADRig in worker processes (must be importable: spawn pickles it by name)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True)  # one folder per worker started: the test counts them
        self.tasks = loadable_tasks()

    @property
    def display_name(self) -> str:
        return ":fake"

    def run(
        self, task: registry.SuiteTask, variant: Variant, attempt: Path, frame_path: Path | None = None
    ) -> RunResult:
        position = self.tasks.index(task.task_id)
        if (variant, position) == CRASH:
            os._exit(3)
        if (variant, position) == HANG:
            time.sleep(3600)
        time.sleep(0.2 if variant == "oracle" else 0.05)  # completion order differs from task order
        return RunResult(task.task_id, variant, None, 1, 1, 0.0, 0.0, 0.0, f"fake run in {os.getpid()}")

    def close(self) -> None:
        pass

    killed: ClassVar[list[tuple[str, str | None]]] = []

    @staticmethod
    def kill_leftovers(marker: str, display: str | None) -> list[int]:
        FakeRig.killed.append((marker, display))
        return []


def test_scheduler_orders_results_and_survives_a_crashed_and_a_hung_worker(tmp_path: Path) -> None:
    tasks = loadable_tasks()[:5]
    if len(tasks) < 3:
        pytest.skip("fewer than 3 task folders are built")
    results = run_validity(tasks, VARIANTS, workers=2, workdir=tmp_path, run_timeout_s=5.0, rig_factory=FakeRig)
    assert [(r.task_id, r.variant) for r in results] == [(t, v) for t in tasks for v in VARIANTS]
    by_run = {(r.variant, tasks.index(r.task_id)): r for r in results}
    crashed, hung = by_run.pop(CRASH), by_run.pop(HANG)
    assert crashed.error is not None and "died with exit code 3 during this run" in crashed.error
    assert hung.error is not None and "overran the run timeout (5 s)" in hung.error
    assert crashed.batches > 0 and crashed.report is None
    assert all(r.error is not None and r.error.startswith("fake run in ") for r in by_run.values()), by_run
    assert len({r.error for r in by_run.values()}) >= 2  # the runs were spread over the workers
    # Two workers plus a replacement for the crashed one (it had completed runs and runs were
    # pending). Whether the replacement gets a run before the survivor drains the queue
    # depends on how fast a spawned process starts, so only its start is asserted.
    assert len(list(tmp_path.glob("worker-*"))) >= 3
    # The crashed and the hung worker each had their leftovers killed by the rig's factory.
    assert len(FakeRig.killed) >= 2 and {display for _, display in FakeRig.killed} == {":fake"}
    assert len({marker for marker, _ in FakeRig.killed}) == len(FakeRig.killed)


def test_the_evaluator_alone_has_no_desktop_and_says_where_the_command_went(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert validity.main(["--tasks", "x"]) == 2
    assert "python -m autocad_bench_xvfb.suite_validity" in capsys.readouterr().err
