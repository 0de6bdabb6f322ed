"""Comparison charts rendered on the server as inline SVG (no JavaScript, no chart library).

Three charts per batch, over every assignment (not just the page shown): pass rate and
mean score per model, cost against score per rollout, and mean score per task tier.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from autocad_bench.dashboard.reader import RolloutRow

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
           "#9333ea", "#ea580c")


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _t(value: object) -> str:
    return escape(str(value), quote=True)


def _empty(title: str, message: str, width: int = 460, height: int = 120) -> str:
    return (f'<svg class="chart" role="img" aria-label="{_t(title)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="8" y="18" class="chart-title">{_t(title)}</text>'
            f'<text x="8" y="60" class="chart-note">{_t(message)}</text></svg>')


def grouped_bars(title: str, groups: Sequence[str], series: Sequence[str],
                 values: dict[tuple[str, str], float | None], notes: dict[str, str] | None = None,
                 *, width: int = 460) -> str:
    """Horizontal bars in [0, 1]: one block per group, one bar per series inside it."""
    if not groups:
        return _empty(title, "no data yet")
    notes = notes or {}
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
            w = max(0.0, min(1.0, value)) * plot_w
            out.append(f'<rect x="{label_w}" y="{by}" width="{w:.1f}" height="{bar_h - 2}" fill="{color(s)}">'
                       f'<title>{_t(group)} — {_t(name)}: {value:.3f}</title></rect>'
                       f'<text x="{label_w + w + 4:.1f}" y="{by + bar_h - 3}" class="chart-value">'
                       f'{value:.2f}</text>')
        if note:
            out.append(f'<text x="{label_w - 6}" y="{y + block_h / 2 + 12:.1f}" class="chart-note" '
                       f'text-anchor="end">{_t(note)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Point:
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


def model_stats(rows: Sequence[RolloutRow]) -> list[dict[str, object]]:
    """Per-model aggregates: rollouts, finished, pass rate, mean score, cost."""
    groups: dict[str, list[RolloutRow]] = defaultdict(list)
    for row in rows:
        groups[row.model_label].append(row)
    stats = []
    for label in sorted(groups):
        items = groups[label]
        finished = [r for r in items if r.state in ("done", "failed")]
        scored = [r.score for r in items if r.score is not None]
        judged = [r.judge_score for r in items if r.judge_score is not None]
        stats.append({
            "model": label, "rollouts": len(items), "finished": len(finished),
            "done": sum(r.state == "done" for r in items), "failed": sum(r.state == "failed" for r in items),
            "pass_rate": (sum(bool(r.passed) for r in finished) / len(finished)) if finished else None,
            "mean_score": sum(scored) / len(scored) if scored else None,
            "mean_judge": sum(judged) / len(judged) if judged else None,
            "cost_usd": sum(r.cost_usd or 0.0 for r in items),
        })
    return stats


def batch_charts(rows: Sequence[RolloutRow]) -> dict[str, str]:
    """The three comparison charts of a batch, as SVG strings (already escaped)."""
    stats = model_stats(rows)
    models = [str(s["model"]) for s in stats]
    values: dict[tuple[str, str], float | None] = {}
    notes = {}
    for s in stats:
        values[(str(s["model"]), "pass rate")] = s["pass_rate"]  # type: ignore[assignment]
        values[(str(s["model"]), "mean score")] = s["mean_score"]  # type: ignore[assignment]
        notes[str(s["model"])] = f"{s['finished']}/{s['rollouts']} finished"
    per_model = grouped_bars("Pass rate and mean score per model", models, ["pass rate", "mean score"],
                             values, notes)
    index = {m: i for i, m in enumerate(models)}
    points = [Point(r.cost_usd or 0.0, r.score, index[r.model_label],
                    f"{r.rollout_id} ({r.model_label}): score {r.score:.3f}, ${r.cost_usd or 0.0:.4f}")
              for r in rows if r.score is not None]
    unscored = sum(r.score is None for r in rows)
    cost = scatter("Cost vs score per rollout", points, models, "cost (USD, tokens + infrastructure)", "score",
                   note=f"{unscored} rollout(s) without a score" if unscored and points else "")
    tiers = sorted({r.tier for r in rows})
    tier_values: dict[tuple[str, str], float | None] = {}
    tier_notes = {}
    for tier in tiers:
        in_tier = [r for r in rows if r.tier == tier]
        scored_n = 0
        for model in models:
            scores = [r.score for r in in_tier if r.model_label == model and r.score is not None]
            scored_n += len(scores)
            tier_values[(tier, model)] = sum(scores) / len(scores) if scores else None
        tier_notes[tier] = f"{scored_n}/{len(in_tier)} scored"
    per_tier = grouped_bars("Mean score per task tier", tiers, models, tier_values, tier_notes)
    return {"per_model": per_model, "cost_vs_score": cost, "per_tier": per_tier}
