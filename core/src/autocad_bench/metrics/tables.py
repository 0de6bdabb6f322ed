"""Terminal renderings of metric rows and comparisons (rich tables; no computation here)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from autocad_bench.metrics.aggregate import Estimate
from autocad_bench.metrics.compare import Comparison, Difference
from autocad_bench.metrics.leaderboard import ModelRow, RowConditions

WIDE_MARK = "~"


def _cell(estimate: Estimate, percent: bool = False) -> str:
    text = estimate.text(percent=percent)
    return f"{text} {WIDE_MARK}" if estimate.value is not None and estimate.wide else text


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def conditions_text(c: RowConditions) -> str:
    """The conditions of a row as one line (``-`` for an unknown suite or evaluator)."""
    return (f"suite {c.suite or '-'}, evaluator {c.evaluator_version or '-'}, "
            f"step budget {c.step_budget or 'uncapped'}, tool mode {c.tool_mode}")


def rows_table(rows: Sequence[ModelRow], title: str) -> Table:
    """One line per model row: capability with intervals, budgets, cost, flags. The
    conditions get a column only when the rows differ in them (else they go in the title)."""
    shared = len({r.conditions for r in rows}) <= 1
    if shared and rows:
        title = f"{title}\n{conditions_text(rows[0].conditions)}"
    table = Table(title=title, caption=f"95% intervals over tasks (families resampled); {WIDE_MARK} marks a "
                                       "missing or wide interval; >= a lower bound", caption_justify="left")
    columns = ["model", "conditions", "rollouts", "scored", "mean score", "pass@1", "pass@k", "pass^k",
               "within 15/50/100", "tokens", "$ / task", "$ / solved", "wall s / task"]
    if shared:
        columns.remove("conditions")
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "conditions") else "right",
                         overflow="fold")
    for row in rows:
        m = row.metrics
        budgets = " / ".join(
            "n/a" if b.mode == "unavailable" or b.estimate.value is None
            else f"{'>=' if b.mode == 'lower_bound' else ''}{b.estimate.value:.0%}" for b in m.success_within)
        head = [row.row_id + ("  *pareto" if row.pareto and len(rows) > 1 else "")]
        if not shared:
            head.append(conditions_text(row.conditions))
        table.add_row(
            *head, str(m.rollouts),
            f"{m.scored}" + (f" (+{m.unscored} unscored)" if m.unscored else ""),
            _cell(m.mean_score), _cell(m.pass_at_1, True), f"k={m.k}: {_cell(m.pass_at_k, True)}",
            _cell(m.pass_hat_k, True), budgets, f"{m.tokens:,}", _usd(m.cost_per_task_usd),
            _usd(m.cost_per_solved_usd), "-" if m.wall_seconds_per_task is None else f"{m.wall_seconds_per_task:.1f}")
    return table


def print_rows(rows: Sequence[ModelRow], title: str, notes: Sequence[str] = (), console: Console | None = None) -> None:
    """Print ``rows`` as a table titled ``title``, then each row's flags and ``notes`` (stdout
    unless ``console`` is given).
    """
    console = console or _console()
    console.print(rows_table(rows, title))
    for row in rows:
        for flag in row.flags:
            console.print(f"  {row.row_id}: {flag}", highlight=False, markup=False)
    for note in notes:
        console.print(f"  note: {note}", highlight=False, markup=False)


def _difference_line(name: str, d: Difference, percent: bool) -> str:
    def fmt(v: float | None) -> str:
        if v is None:
            return "?"
        return f"{v * 100:+.1f} pt" if percent else f"{v:+.3f}"

    e = d.difference
    interval = "no interval" if e.low is None else f"95% CI [{fmt(e.low)}, {fmt(e.high)}]"
    p = "p n/a (fewer than two families)" if d.p_value is None else f"p = {d.p_value:.4g}"
    verdict = ("borderline: the test and the interval disagree, treat as not established" if d.borderline
               else "significant" if d.significant else "not significant")
    a = f"{d.a:.1%}" if percent else f"{d.a:.3f}"
    b = f"{d.b:.1%}" if percent else f"{d.b:.3f}"
    return f"{name}: A {a}, B {b}, B - A {fmt(e.value)} ({interval}, {p}, {verdict} at 0.05)" + (
        f" [{WIDE_MARK} wide]" if e.wide else "")


def print_comparison(result: Comparison, console: Console | None = None) -> None:
    """Print a comparison as plain lines: both sides, the paired differences and the first
    40 tasks that changed (the rest are in the ``--json`` output).
    """
    console = console or _console()
    out = [
        f"A: {result.a.provider}/{result.a.model} in {result.a.directory} ({result.a.rollouts} rollouts, "
        f"{result.a.tasks} tasks scored)",
        f"B: {result.b.provider}/{result.b.model} in {result.b.directory} ({result.b.rollouts} rollouts, "
        f"{result.b.tasks} tasks scored)",
        f"paired over {result.shared_tasks} shared tasks in {result.shared_clusters} families"
        + (f"; {len(result.only_a)} only in A, {len(result.only_b)} only in B (left out)"
           if result.only_a or result.only_b else ""),
        _difference_line("pass rate", result.pass_rate, True),
        _difference_line("mean score", result.mean_score, False),
    ]
    if result.condition_differences:
        out.append("conditions that differ: " + ", ".join(
            f"{name} (A {getattr(result.a.conditions, name)}, B {getattr(result.b.conditions, name)})"
            for name in result.condition_differences))
    flipped = [c for c in result.changed if c.flipped]
    out.append(f"tasks that flipped: {len(flipped)} "
               f"({sum(c.direction == 'gained' for c in flipped)} gained by B, "
               f"{sum(c.direction == 'lost' for c in flipped)} lost by B); "
               f"{len(result.changed)} changed pass rate")
    for change in result.changed[:40]:
        out.append(f"  {'+' if change.direction == 'gained' else '-'} {change.task_id}: pass rate "
                   f"{change.a_pass_rate:.0%} -> {change.b_pass_rate:.0%}, mean score "
                   f"{change.a_mean_score:.3f} -> {change.b_mean_score:.3f}"
                   + ("  (flipped)" if change.flipped else ""))
    if len(result.changed) > 40:
        out.append(f"  ... {len(result.changed) - 40} more in the --json output")
    for line in out:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        console = Console(width=220)  # logs and captures are not 80 columns wide
    return console
