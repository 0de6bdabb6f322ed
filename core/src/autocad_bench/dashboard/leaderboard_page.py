"""The leaderboard as HTML, and the metric rows the batch page and report show.

Every number comes from :mod:`autocad_bench.metrics`; this module only reads runs, keeps
the last result while its inputs are unchanged, and renders. One page body
(``_leaderboard_body.html``) serves both the self-contained ``leaderboard.html`` file
(:func:`render_leaderboard_html`: inline CSS and SVG, no script, nothing fetched) and the
dashboard's ``/leaderboard`` page (:func:`root_leaderboard` over a runs root).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from autocad_bench.dashboard.charts import frontier_key, rows_frontier_chart
from autocad_bench.dashboard.reader import RunsRoot
from autocad_bench.dashboard.templating import render
from autocad_bench.metrics import Leaderboard, ModelRow, RunSamples, RunUnreadable, build_leaderboard, model_rows
from autocad_bench.metrics.aggregate import DEFAULT_MAX_WIDTH, TURN_BUDGETS
from autocad_bench.metrics.samples import JsonLoader, load_json_file

T = TypeVar("T")


class MetricsCache:
    """The last result per key, reused while its inputs compare equal (thread-safe, bounded).

    The inputs are the samples read from disk (read through the dashboard's file cache), so
    any change to a file a number depends on recomputes it, and an unchanged batch is not
    bootstrapped again on every live refresh.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[object, object]] = OrderedDict()
        self._max = max_entries

    def get(self, key: Hashable, inputs: object, compute: Callable[[], T]) -> T:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] == inputs:
                self._entries.move_to_end(key)
                return hit[1]  # type: ignore[return-value]
        value = compute()
        with self._lock:
            self._entries[key] = (inputs, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value


# --- one batch: the per-model table of the batch page and the report ---------------------------


@dataclass(frozen=True, slots=True)
class BatchMetrics:
    """The metric rows of one batch (no per-skill breakdowns) and what the table adds to them."""

    rows: list[ModelRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judge: dict[str, float] = field(default_factory=dict)
    """row id -> mean vision-judge score (reported separately; not part of any metric)."""
    error: str | None = None


def _judge_means(run: RunSamples, rows: list[ModelRow]) -> dict[str, float]:
    means: dict[str, float] = {}
    for row in rows:
        scores = [s.judge_score for s in run.samples
                  if (s.provider, s.model, s.tool_mode) == (row.provider, row.model, row.conditions.tool_mode)
                  and s.judge_score is not None]
        if scores:
            means[row.row_id] = sum(scores) / len(scores)
    return means


def batch_metrics(directory: Path, *, load: JsonLoader = load_json_file, cache: MetricsCache | None = None,
                  max_width: float = DEFAULT_MAX_WIDTH) -> BatchMetrics:
    """``model_rows([read_run(directory)], breakdowns=False)`` with the mean judge per row;
    an unreadable batch gives no rows and an error instead of raising."""
    from autocad_bench.metrics import read_run

    try:
        run = read_run(directory, load=load)
    except RunUnreadable:
        return BatchMetrics(error="batch-state.json is not readable (yet): no metrics")

    def compute() -> BatchMetrics:
        rows, notes = model_rows([run], max_width=max_width, breakdowns=False)
        return BatchMetrics(rows=rows, notes=notes, judge=_judge_means(run, rows))

    if cache is None:
        return compute()
    return cache.get(("batch", str(directory), max_width), run, compute)


# --- every batch under a root: the dashboard's leaderboard --------------------------------------


def root_leaderboard(root: RunsRoot, *, cache: MetricsCache | None = None,
                     max_width: float = DEFAULT_MAX_WIDTH) -> Leaderboard:
    """The leaderboard over every batch the dashboard discovers under ``root``.

    Files are read through the root's cache. Unreadable batches are left out and counted in
    a note; run directories are shown relative to the root (absolute paths stay on the server).
    """
    from autocad_bench.metrics import read_run

    runs: list[RunSamples] = []
    skipped: list[str] = []
    for directory in root.batch_dirs():
        try:
            runs.append(read_run(directory, load=root.cache.json))
        except RunUnreadable:
            skipped.append(root.key_of(directory))

    def compute() -> Leaderboard:
        return build_leaderboard(runs, max_width=max_width)

    board = compute() if cache is None else cache.get(("root", max_width), tuple(runs), compute)
    notes = list(board.notes)
    if skipped:
        shown = ", ".join(skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        one = len(skipped) == 1
        notes.append(f"{len(skipped)} batch director{'y' if one else 'ies'} under the root could not be read "
                     f"(no readable batch-state.json yet) and {'is' if one else 'are'} left out: {shown}")
    relative = [r.model_copy(update={"directory": root.key_of(Path(r.directory))}) for r in board.runs]
    return board.model_copy(update={"notes": notes, "runs": relative})


# --- rendering ----------------------------------------------------------------------------------


def leaderboard_context(board: Leaderboard, *, batch_links: bool = False) -> dict[str, Any]:
    """What ``_leaderboard_body.html`` renders. ``batch_links`` links each run to its
    dashboard page (the run directories are then keys relative to the runs root)."""
    skills = sorted({skill for row in board.rows for skill in row.by_skill})
    groups = {frontier_key(row) for row in board.rows}
    return {"board": board, "skills": skills, "budgets": TURN_BUDGETS, "batch_links": batch_links,
            "frontier": rows_frontier_chart(board.rows), "frontier_groups": len(groups),
            "pareto_rows": [row.row_id for row in board.rows if row.pareto]}


def render_leaderboard_html(board: Leaderboard) -> str:
    """One self-contained HTML page of ``board``: inline CSS and SVG, no script, no external
    resource, every text escaped."""
    return render("leaderboard_page.html", **leaderboard_context(board))
