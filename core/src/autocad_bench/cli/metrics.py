"""``autocad-bench metrics``, ``compare`` and ``leaderboard``: numbers with their intervals."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autocad_bench.cli.errors import report_user_errors
from autocad_bench.errors import Problem, UserError

if TYPE_CHECKING:
    from autocad_bench.metrics import RunSamples

_WIDTH_HELP = "Mark estimates whose 95% interval is wider than this (score units; 0.2 is +-10 points)."


def _read_runs(directories: Sequence[Path]) -> list[RunSamples]:
    from autocad_bench.metrics import RunUnreadable, read_run

    runs, problems = [], []
    for directory in directories:
        try:
            runs.append(read_run(directory))
        except RunUnreadable:
            problems.append(Problem(str(directory), "no readable batch-state.json (not a batch output directory)"))
    if problems:
        raise UserError(problems)
    return runs


_RUN = click.Path(file_okay=False, exists=True, path_type=Path)


@click.command(name="metrics")
@click.argument("runs", nargs=-1, required=True, type=_RUN)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON instead of a table.")
@click.option("--max-interval-width", default=0.2, show_default=True, type=click.FloatRange(0, 2), help=_WIDTH_HELP)
@report_user_errors
def metrics_command(runs: tuple[Path, ...], as_json: bool, max_interval_width: float) -> None:
    """Per-model metrics of one or more batch directories, each with its 95% interval."""
    from autocad_bench.metrics import model_rows
    from autocad_bench.metrics.tables import print_rows

    rows, notes = model_rows(_read_runs(runs), max_width=max_interval_width, breakdowns=as_json)
    if as_json:
        click.echo(json.dumps({"rows": [r.model_dump(mode="json") for r in rows], "notes": notes}, indent=2))
        return
    print_rows(rows, title=", ".join(str(r) for r in runs), notes=notes)


@click.command(name="compare")
@click.argument("run_a", type=_RUN)
@click.argument("run_b", type=_RUN)
@click.option("--model-a", default=None, help="provider/model (or model) on side A when RUN_A holds several.")
@click.option("--model-b", default=None, help="provider/model (or model) on side B when RUN_B holds several.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@report_user_errors
def compare_command(run_a: Path, run_b: Path, model_a: str | None, model_b: str | None, as_json: bool) -> None:
    """Paired comparison of B against A over the tasks both scored.

    Prints the difference in pass rate and mean score with a 95% interval and a paired
    permutation p-value, and the tasks whose pass rate changed. RUN_A and RUN_B may be the
    same directory with two models. Exits 0 whatever the verdict; 2 when the runs cannot
    be compared (no shared task, different suites or evaluator versions).
    """
    from autocad_bench.metrics import ComparisonRefused, compare_runs
    from autocad_bench.metrics.tables import print_comparison

    side_a, side_b = _read_runs([run_a, run_b])
    try:
        result = compare_runs(side_a, side_b, model_a=model_a, model_b=model_b)
    except ComparisonRefused as error:
        raise UserError(f"cannot compare: {error}") from None
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        print_comparison(result)


@click.command(name="leaderboard")
@click.argument("runs", nargs=-1, required=True, type=_RUN)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write leaderboard.json and leaderboard.html into (created if missing).")
@click.option("--max-interval-width", default=0.2, show_default=True, type=click.FloatRange(0, 2), help=_WIDTH_HELP)
@report_user_errors
def leaderboard_command(runs: tuple[Path, ...], out: Path, max_interval_width: float) -> None:
    """Write leaderboard.json (schema in docs/schemas/) and a self-contained leaderboard.html
    over RUNS: one row per model and conditions, intervals drawn, the cost frontier marked."""
    from autocad_bench.dashboard.leaderboard_page import render_leaderboard_html
    from autocad_bench.metrics import build_leaderboard
    from autocad_bench.metrics.tables import print_rows
    from autocad_bench.storage import atomic_write_bytes

    board = build_leaderboard(_read_runs(runs), max_width=max_interval_width)
    if out.exists() and not out.is_dir():
        raise UserError([Problem("--out", f"{out} exists and is not a directory")])
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / "leaderboard.json", (board.model_dump_json(indent=2) + "\n").encode())
        atomic_write_bytes(out / "leaderboard.html", render_leaderboard_html(board).encode("utf-8"))
    except OSError as error:
        raise UserError([Problem("--out", f"cannot write {out}: {error.strerror or error}")]) from None
    print_rows(board.rows, title="leaderboard", notes=board.notes)
    click.echo(str(out / "leaderboard.json"))
    click.echo(str(out / "leaderboard.html"))
