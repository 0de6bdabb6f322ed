"""Comparison charts rendered on the server as inline SVG (no JavaScript, no chart library).

Three charts per batch, over every assignment (not just the page shown): mean score and
pass rate per model with their 95% intervals (from :mod:`autocad_bench.metrics`), cost
against score per rollout, and mean score per task tier. The leaderboard adds a small
interval bar per estimate (:func:`interval_bar`) and the capability-versus-cost chart with
its Pareto frontier (:func:`frontier_chart`). Nothing here computes a statistic: the
intervals come from the metrics module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from autocad_bench.dashboard.reader import RolloutRow
from autocad_bench.metrics.leaderboard import ModelRow

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
           "#9333ea", "#ea580c")


def color(index: int) -> str:
    """The palette colour of series ``index`` (the palette repeats past its length)."""
    return PALETTE[index % len(PALETTE)]


def _t(value: object) -> str:
    return escape(str(value), quote=True)


def _empty(title: str, message: str, width: int = 460, height: int = 120) -> str:
    return (f'<svg class="chart" role="img" aria-label="{_t(title)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="8" y="18" class="chart-title">{_t(title)}</text>'
            f'<text x="8" y="60" class="chart-note">{_t(message)}</text></svg>')


Interval = tuple[float | None, float | None]


def grouped_bars(title: str, groups: Sequence[str], series: Sequence[str],
                 values: dict[tuple[str, str], float | None], notes: dict[str, str] | None = None,
                 *, width: int = 460, intervals: dict[tuple[str, str], Interval] | None = None) -> str:
    """Horizontal bars in [0, 1]: one block per group, one bar per series inside it.

    ``intervals`` gives a bar its (low, high) interval, drawn as whiskers over the bar.
    """
    if not groups:
        return _empty(title, "no data yet")
    notes = notes or {}
    intervals = intervals or {}
    label_w, bar_h, gap, top = 150, 12, 10, 30
    legend: list[tuple[float, float, int, str]] = []
    if len(series) > 1:
        x, row = float(label_w), 0
        for i, name in enumerate(series):
            shown = name[:28]
            item_w = 24 + 6.5 * len(shown)
            if x + item_w > width and x > label_w:
                x, row = float(label_w), row + 1
            legend.append((x, top + 16 * row, i, shown))
            x += item_w
    legend_h = 16 * (1 + max((int((y - top) // 16) for _, y, _, _ in legend), default=-1)) + (2 if legend else 0)
    plot_w = width - label_w - 60
    block_h = bar_h * len(series) + gap
    height = top + legend_h + block_h * len(groups) + 24
    out = [f'<svg class="chart" role="img" aria-label="{_t(title)}" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="8" y="18" class="chart-title">{_t(title)}</text>']
    for lx, ly, i, shown in legend:
        out.append(f'<rect x="{lx:.1f}" y="{ly - 6:.1f}" width="10" height="10" fill="{color(i)}"/>'
                   f'<text x="{lx + 14:.1f}" y="{ly + 3:.1f}" class="chart-label">{_t(shown)}</text>')
    y0 = top + legend_h
    for tick in (0.0, 0.5, 1.0):
        x = label_w + tick * plot_w
        out.append(f'<line x1="{x:.1f}" y1="{y0 - 4}" x2="{x:.1f}" y2="{height - 20}" class="chart-grid"/>'
                   f'<text x="{x:.1f}" y="{height - 6}" class="chart-tick" text-anchor="middle">{tick:g}</text>')
    for g, group in enumerate(groups):
        y = y0 + g * block_h
        label = group if len(group) <= 24 else group[:23] + "…"
        note = notes.get(group, "")
        out.append(f'<text x="{label_w - 6}" y="{y + block_h / 2 + 2:.1f}" class="chart-label" '
                   f'text-anchor="end"><title>{_t(group)}</title>{_t(label)}</text>')
        for s, name in enumerate(series):
            value = values.get((group, name))
            by = y + s * bar_h
            if value is None:
                out.append(f'<text x="{label_w + 4}" y="{by + bar_h - 2}" class="chart-note">n/a</text>')
                continue
            w = _unit(value) * plot_w
            low, high = intervals.get((group, name), (None, None))
            text_x = label_w + w + 4
            ci = ""
            if low is not None and high is not None:
                x1, x2, cy = label_w + _unit(low) * plot_w, label_w + _unit(high) * plot_w, by + (bar_h - 2) / 2
                ci = f" [{low:.3f}, {high:.3f}]"
                text_x = max(text_x, x2 + 4)
                out.append(f'<rect x="{label_w}" y="{by}" width="{w:.1f}" height="{bar_h - 2}" fill="{color(s)}" '
                           f'fill-opacity="0.8"><title>{_t(group)} — {_t(name)}: {value:.3f}{ci}</title></rect>'
                           f'<g class="ci-whisker" stroke="#0f172a" stroke-width="1.2">'
                           f'<line x1="{x1:.1f}" y1="{cy:.1f}" x2="{x2:.1f}" y2="{cy:.1f}"/>'
                           f'<line x1="{x1:.1f}" y1="{by:.1f}" x2="{x1:.1f}" y2="{by + bar_h - 2:.1f}"/>'
                           f'<line x1="{x2:.1f}" y1="{by:.1f}" x2="{x2:.1f}" y2="{by + bar_h - 2:.1f}"/></g>')
            else:
                out.append(f'<rect x="{label_w}" y="{by}" width="{w:.1f}" height="{bar_h - 2}" fill="{color(s)}">'
                           f'<title>{_t(group)} — {_t(name)}: {value:.3f}</title></rect>')
            out.append(f'<text x="{text_x:.1f}" y="{by + bar_h - 3}" class="chart-value">{value:.2f}</text>')
        if note:
            out.append(f'<text x="{label_w - 6}" y="{y + block_h / 2 + 12:.1f}" class="chart-note" '
                       f'text-anchor="end">{_t(note)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a :func:`scatter` chart: its position, series index and hover label."""

    x: float
    y: float
    series: int
    label: str


def scatter(title: str, points: Sequence[Point], series: Sequence[str], x_label: str, y_label: str,
            *, width: int = 460, height: int = 300, note: str = "") -> str:
    """Points with x from 0 to the largest x and y in [0, 1]; one colour per series."""
    if not points:
        return _empty(title, note or "no scored rollouts yet")
    left, right, top, bottom = 44, 12, 28, 40
    legend = series if len(series) <= 8 else ()
    legend_h = 16 * ((len(legend) + 2) // 3)
    plot_w, plot_h = width - left - right, height - top - bottom
    total_h = height + legend_h
    max_x = max(p.x for p in points) or 1.0
    out = [f'<svg class="chart" role="img" aria-label="{_t(title)}" viewBox="0 0 {width} {total_h}" '
           f'width="{width}" height="{total_h}" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="8" y="18" class="chart-title">{_t(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="chart-frame"/>']
    for tick in (0.0, 0.5, 1.0):
        y = top + plot_h - tick * plot_h
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" class="chart-grid"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" class="chart-tick" text-anchor="end">{tick:g}</text>')
    for tick in (0.0, 0.5, 1.0):
        x = left + tick * plot_w
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" class="chart-tick" text-anchor="middle">'
                   f'{tick * max_x:.3g}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 30}" class="chart-label" '
               f'text-anchor="middle">{_t(x_label)}</text>')
    out.append(f'<text x="12" y="{top + plot_h / 2:.1f}" class="chart-label" text-anchor="middle" '
               f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">{_t(y_label)}</text>')
    for p in points:
        cx = left + (p.x / max_x) * plot_w
        cy = top + plot_h - max(0.0, min(1.0, p.y)) * plot_h
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color(p.series)}" fill-opacity="0.75">'
                   f'<title>{_t(p.label)}</title></circle>')
    for i, name in enumerate(legend):
        lx = 8 + (i % 3) * (width // 3)
        ly = height + 4 + (i // 3) * 16
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{color(i)}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}" class="chart-label">{_t(name[:30])}</text>')
    if note:
        out.append(f'<text x="{left + 4}" y="{top + 12}" class="chart-note">{_t(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def _unit(value: float) -> float:
    return max(0.0, min(1.0, value))


def _svg_open(cls: str, label: str, width: float, height: float) -> str:
    return (f'<svg class="{cls}" role="img" aria-label="{_t(label)}" viewBox="0 0 {width:g} {height:g}" '
            f'width="{width:g}" height="{height:g}" xmlns="http://www.w3.org/2000/svg">')


def _fmt(percent: bool) -> Callable[[float], str]:
    return (lambda v: f"{v * 100:.0f}%") if percent else (lambda v: f"{v:.3f}")


def interval_bar(value: float | None, low: float | None, high: float | None, *, wide: bool = False,
                 percent: bool = False, label: str = "", width: int = 120, height: int = 14) -> str:
    """One estimate in [0, 1] as a small bar from 0 to ``value`` with its interval drawn as
    whiskers (``low`` to ``high``, with end caps). ``wide`` draws it muted and dashed."""
    fmt = _fmt(percent)
    pad = 4
    plot = width - 2 * pad
    mid = height / 2

    def x(v: float) -> float:
        return pad + _unit(v) * plot

    if value is None:
        summary = "no value"
    elif low is None or high is None:
        summary = f"{fmt(value)}, no interval"
    else:
        summary = f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"
    if wide and value is not None:
        summary += " (wide)"
    text = f"{label}: {summary}" if label else summary
    out = [_svg_open("ci wide" if wide else "ci", text, width, height), f"<title>{_t(text)}</title>",
           f'<rect class="ci-track" x="{pad}" y="{mid - 3:.1f}" width="{plot}" height="6" rx="2" fill="#e2e8f0"/>']
    if value is not None:
        out.append(f'<rect class="ci-bar" x="{pad}" y="{mid - 3:.1f}" width="{x(value) - pad:.1f}" height="6" '
                   f'rx="2" fill="{"#94a3b8" if wide else "#93c5fd"}"/>')
        if low is not None and high is not None:
            dash = ' stroke-dasharray="2 1.5"' if wide else ""
            x1, x2 = x(low), x(high)
            out.append(f'<g class="ci-whisker" stroke="{"#64748b" if wide else "#1e3a8a"}" stroke-width="1.3">'
                       f'<line x1="{x1:.1f}" y1="{mid:.1f}" x2="{x2:.1f}" y2="{mid:.1f}"{dash}/>'
                       f'<line x1="{x1:.1f}" y1="{mid - 5:.1f}" x2="{x1:.1f}" y2="{mid + 5:.1f}"/>'
                       f'<line x1="{x2:.1f}" y1="{mid - 5:.1f}" x2="{x2:.1f}" y2="{mid + 5:.1f}"/></g>')
        out.append(f'<circle class="ci-value" cx="{x(value):.1f}" cy="{mid:.1f}" r="2.6" '
                   f'fill="{"#475569" if wide else "#1d4ed8"}"/>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    """One model row on the capability-versus-cost chart."""

    x: float
    y: float
    low: float | None
    high: float | None
    label: str
    pareto: bool
    group: int = 0
    wide: bool = False


def _money(value: float) -> str:
    return f"${value:.3g}" if value else "$0"


def frontier_chart(title: str, points: Sequence[FrontierPoint], *, groups: Sequence[str] = (),
                   x_label: str = "cost per task (USD, tokens + infrastructure)",
                   y_label: str = "mean score (95% interval)", width: int = 760, height: int = 420,
                   note: str = "") -> str:
    """Capability (y in [0, 1], with vertical interval whiskers) against cost (x from 0), one
    labelled point per row; the Pareto points of each group are marked and joined by a step
    line (the best score reachable at or below each cost)."""
    if not points:
        return _empty(title, note or "no row has both a mean score and a cost yet", width=width)
    left, right, top, bottom = 48, 16, 30, 44
    legend = ["on the Pareto frontier"] + ([f"frontier: {g}" for g in groups] if len(groups) > 1 else [])
    legend_h = 16 * len(legend) + 4
    plot_w, plot_h = width - left - right, height - top - bottom
    total_h = height + legend_h
    x_step = _nice_step(max(p.x for p in points) / 4)
    max_x = x_step * max(1, math.ceil(max(p.x for p in points) * 1.04 / x_step))

    def px(v: float) -> float:
        return left + (v / max_x) * plot_w

    def py(v: float) -> float:
        return top + plot_h - _unit(v) * plot_h

    out = [_svg_open("chart frontier", title, width, total_h),
           f'<text x="8" y="18" class="chart-title">{_t(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="chart-frame" fill="none" '
           f'stroke="#cbd5e1"/>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" class="chart-grid" '
                   f'stroke="#e2e8f0"/><text x="{left - 4}" y="{y + 4:.1f}" class="chart-tick" '
                   f'text-anchor="end">{tick:g}</text>')
    for i in range(round(max_x / x_step) + 1):
        x = px(i * x_step)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" class="chart-grid" '
                   f'stroke="#f1f5f9"/><text x="{x:.1f}" y="{top + plot_h + 14}" class="chart-tick" '
                   f'text-anchor="middle">{_money(i * x_step)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" class="chart-label" '
               f'text-anchor="middle">{_t(x_label)}</text>')
    out.append(f'<text x="12" y="{top + plot_h / 2:.1f}" class="chart-label" text-anchor="middle" '
               f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">{_t(y_label)}</text>')
    for group in sorted({p.group for p in points}):
        front = sorted((p for p in points if p.pareto and p.group == group), key=lambda p: (p.x, -p.y))
        if not front:
            continue
        path = f"M{px(front[0].x):.1f},{py(front[0].y):.1f}"
        for p in front[1:]:
            path += f" H{px(p.x):.1f} V{py(p.y):.1f}"
        path += f" H{left + plot_w:.1f}"
        name = "Pareto frontier" + (f": {groups[group]}" if group < len(groups) else "")
        out.append(f'<path class="frontier-line" d="{path}" fill="none" stroke="{color(group)}" '
                   f'stroke-width="2" stroke-opacity="0.7"><title>{_t(name)}</title></path>')
    placed: list[tuple[float, float, float, float]] = []
    for p in sorted(points, key=lambda p: p.pareto):
        cx, cy = px(p.x), py(p.y)
        fill = color(p.group)
        ci = "" if p.low is None or p.high is None else f" [{p.low:.3f}, {p.high:.3f}]"
        details = f"{p.label}: mean score {p.y:.3f}{ci}, {_money(p.x)} per task"
        if p.pareto:
            details += ", on the Pareto frontier"
        if p.wide:
            details += ", wide interval"
        classes = "point" + (" pareto" if p.pareto else "") + (" wide" if p.wide else "")
        out.append(f'<g class="{classes}" data-label="{_t(p.label)}"><title>{_t(details)}</title>')
        if p.low is not None and p.high is not None:
            y1, y2 = py(p.low), py(p.high)
            dash = ' stroke-dasharray="3 2"' if p.wide else ""
            out.append(f'<g class="ci-whisker" stroke="{fill}" stroke-width="1.3" stroke-opacity="0.8">'
                       f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}"{dash}/>'
                       f'<line x1="{cx - 4:.1f}" y1="{y1:.1f}" x2="{cx + 4:.1f}" y2="{y1:.1f}"/>'
                       f'<line x1="{cx - 4:.1f}" y1="{y2:.1f}" x2="{cx + 4:.1f}" y2="{y2:.1f}"/></g>')
        if p.pareto:
            out.append(f'<path class="marker" d="M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} '
                       f'L{cx - 7:.1f},{cy:.1f} Z" fill="{fill}" stroke="#0f172a" stroke-width="1.2"/>')
        else:
            faded = ' stroke-opacity="0.6"' if p.wide else ""
            out.append(f'<circle class="marker" cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" fill="#fff" stroke="{fill}" '
                       f'stroke-width="2"{faded}/>')
        shown = p.label if len(p.label) <= 34 else p.label[:16] + "…" + p.label[-17:]
        anchor, tx, ty = _label_position(cx, cy, 6.2 * len(shown), left, left + plot_w, placed)
        out.append(f'<text x="{tx:.1f}" y="{ty:.1f}" class="chart-label point-label" '
                   f'text-anchor="{anchor}">{_t(shown)}</text></g>')
    for i, name in enumerate(legend):
        ly = height + 2 + i * 16
        if i == 0:
            out.append(f'<path d="M14,{ly:.1f} L19,{ly + 5:.1f} L14,{ly + 10:.1f} L9,{ly + 5:.1f} Z" '
                       f'fill="{color(0)}" stroke="#0f172a"/>')
        else:
            out.append(f'<line x1="6" y1="{ly + 5}" x2="22" y2="{ly + 5}" stroke="{color(i - 1)}" '
                       f'stroke-width="2"/>')
        out.append(f'<text x="28" y="{ly + 9}" class="chart-label">{_t(name)}</text>')
    if note:
        out.append(f'<text x="{left + 6}" y="{top + 12}" class="chart-note">{_t(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def _nice_step(raw: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at least ``raw``."""
    if raw <= 0 or not math.isfinite(raw):
        return 0.25
    power = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9)))


def _label_position(cx: float, cy: float, width: float, x_min: float, x_max: float,
                    placed: list[tuple[float, float, float, float]]) -> tuple[str, float, float]:
    """Where a point's label goes: the first of right/left, above/below that overlaps no
    label placed so far and stays inside the plot (else the first that stays inside)."""
    candidates = []
    for dy in (-6.0, 14.0, -18.0, 26.0):
        for anchor in ("start", "end"):
            tx = cx + 9 if anchor == "start" else cx - 9
            x0 = tx if anchor == "start" else tx - width
            candidates.append((anchor, tx, cy + dy, (x0, cy + dy - 10, x0 + width, cy + dy + 2)))
    inside = [c for c in candidates if c[3][0] >= x_min - 40 and c[3][2] <= x_max + 12] or candidates
    for anchor, tx, ty, box in inside:
        if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
            placed.append(box)
            return anchor, tx, ty
    anchor, tx, ty, box = inside[0]
    placed.append(box)
    return anchor, tx, ty


def frontier_key(row: ModelRow) -> tuple[str | None, str | None, int | None]:
    """Rows are compared for the frontier only within one suite, evaluator version and step
    budget (as :mod:`autocad_bench.metrics.leaderboard` marks them)."""
    c = row.conditions
    return (c.suite_sha256 or c.suite, c.evaluator_version, c.step_budget)


def rows_frontier_chart(rows: Sequence[ModelRow], title: str = "Capability vs cost per task") -> str:
    """The frontier chart of leaderboard rows (rows without a mean score or cost are left out)."""
    keys: list[tuple[str | None, str | None, int | None]] = []
    names: list[str] = []
    for row in rows:
        key = frontier_key(row)
        if key not in keys:
            keys.append(key)
            c = row.conditions
            names.append(f"suite {c.suite or '-'}, evaluator {c.evaluator_version or '-'}, "
                         f"steps {c.step_budget or 'uncapped'}")
    points = [FrontierPoint(x=r.metrics.cost_per_task_usd, y=r.metrics.mean_score.value,
                            low=r.metrics.mean_score.low, high=r.metrics.mean_score.high, label=r.row_id,
                            pareto=r.pareto, group=keys.index(frontier_key(r)), wide=r.metrics.mean_score.wide)
              for r in rows if r.metrics.mean_score.value is not None and r.metrics.cost_per_task_usd is not None]
    missing = len(rows) - len(points)
    note = f"{missing} row(s) without a mean score or a cost are not drawn" if missing else ""
    return frontier_chart(title, points, groups=names, note=note)


def batch_charts(rows: Sequence[RolloutRow], models: Sequence[ModelRow]) -> dict[str, str]:
    """The three comparison charts of a batch, as SVG strings (already escaped).

    ``models`` are the batch's metric rows (:func:`autocad_bench.metrics.model_rows`): the
    per-model chart draws their mean score and pass rate with the 95% interval whiskers.
    """
    labels = [m.row_id for m in models]
    values: dict[tuple[str, str], float | None] = {}
    intervals: dict[tuple[str, str], Interval] = {}
    notes = {}
    for m in models:
        for name, estimate in (("mean score", m.metrics.mean_score), ("pass rate", m.metrics.pass_at_1)):
            values[(m.row_id, name)] = estimate.value
            intervals[(m.row_id, name)] = (estimate.low, estimate.high)
        notes[m.row_id] = f"{m.metrics.scored}/{m.metrics.rollouts} scored" + (" · wide" if m.metrics.wide else "")
    per_model = grouped_bars("Mean score and pass rate per model (95% intervals)", labels,
                             ["mean score", "pass rate"], values, notes, intervals=intervals)
    series = sorted({r.model_label for r in rows})
    index = {m: i for i, m in enumerate(series)}
    points = [Point(r.cost_usd or 0.0, r.score, index[r.model_label],
                    f"{r.rollout_id} ({r.model_label}): score {r.score:.3f}, ${r.cost_usd or 0.0:.4f}")
              for r in rows if r.score is not None]
    unscored = sum(r.score is None for r in rows)
    cost = scatter("Cost vs score per rollout", points, series, "cost (USD, tokens + infrastructure)", "score",
                   note=f"{unscored} rollout(s) without a score" if unscored and points else "")
    tiers = sorted({r.tier for r in rows})
    tier_values: dict[tuple[str, str], float | None] = {}
    tier_notes = {}
    for tier in tiers:
        in_tier = [r for r in rows if r.tier == tier]
        scored_n = 0
        for model in series:
            scores = [r.score for r in in_tier if r.model_label == model and r.score is not None]
            scored_n += len(scores)
            tier_values[(tier, model)] = sum(scores) / len(scores) if scores else None
        tier_notes[tier] = f"{scored_n}/{len(in_tier)} scored"
    per_tier = grouped_bars("Mean score per task tier", tiers, series, tier_values, tier_notes)
    return {"per_model": per_model, "cost_vs_score": cost, "per_tier": per_tier}
