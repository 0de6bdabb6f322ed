"""The ``topology`` component: closed profiles (centroid, perimeter, area) and circle groups
of one radius (their counts and centre spacings, translation- and rotation-free)."""

from __future__ import annotations

import numpy as np

from autocad_bench_evaluator.scoring.items import Array, _Side
from autocad_bench_evaluator.scoring.matching import (
    _assign,
    _Component,
    _credit,
    _credit_1d,
    _defects,
    _dice,
    _dist,
    _size_tol,
)
from autocad_bench_evaluator.scoring.report import _r
from autocad_bench_evaluator.spec import Tolerance

_MAX_PATTERN_HOLES = 60


def _topology(g: _Side, c: _Side, tol: Tolerance) -> _Component:
    parts: list[float] = []
    details: dict[str, float | int | str] = {}
    defects = 0.0
    gp, cp = g.profiles, c.profiles
    if gp.n or cp.n:
        credit = 0.0
        if gp.n and cp.n:
            area_g, per_g = gp.size[:, 0], gp.size[:, 1]
            area_c, per_c = cp.size[:, 0], cp.size[:, 1]
            # a boundary within ``geometric`` of the gold's: area within perimeter * geometric
            area_tol = np.maximum(tol.geometric * per_g, 1e-9)[:, None]
            per_tol = _size_tol(tol, per_g)[:, None]
            err = np.maximum(
                np.maximum(
                    _dist(gp.pos, cp.pos) / tol.geometric,
                    np.abs(area_g[:, None] - area_c[None, :]) / area_tol,
                ),
                np.abs(per_g[:, None] - per_c[None, :]) / per_tol,
            )
            credit = _assign(_credit(err), err).credit
        part = _dice(credit, gp.n, cp.n)
        parts.append(part)
        defects += _defects(credit, gp.n, cp.n)
        details.update({"profiles.score": _r(part), "profiles.gold": gp.n, "profiles.candidate": cp.n})
    gh, ch = g.circles_for_holes, c.circles_for_holes
    if len(gh) or len(ch):
        part, hole_details, hole_defects = _hole_patterns(gh, ch, tol)
        parts.append(part)
        defects += hole_defects
        details.update(hole_details)
    if not parts:
        return _Component(1.0, False)
    return _Component(sum(parts) / len(parts), True, gp.n + len(gh), cp.n + len(ch), details=details, defects=defects)


def _radius_classes(radii: Array, tol: Tolerance) -> list[tuple[float, float]]:
    """Disjoint radius intervals, each a chain of radii within tolerance of each other."""
    classes: list[tuple[float, float]] = []
    for r in sorted(float(x) for x in radii):
        if classes and r - classes[-1][1] <= tol.geometric * 0.5:
            classes[-1] = (classes[-1][0], r)
        else:
            classes.append((r, r))
    return classes


def _hole_patterns(gh: Array, ch: Array, tol: Tolerance) -> tuple[float, dict[str, float | int | str], float]:
    """Circle groups of equal radius: counts per group and the multiset of centre spacings.

    Both are translation- and rotation-invariant, so a hole pattern drawn in the right shape
    but elsewhere still earns this part.
    """
    classes = _radius_classes(np.concatenate([gh[:, 2], ch[:, 2]]), tol)
    count_credit = 0.0
    spacing_credit = 0.0
    spacing_g = spacing_c = 0
    for lo, hi in classes:
        in_g = gh[(gh[:, 2] >= lo) & (gh[:, 2] <= hi)]
        in_c = ch[(ch[:, 2] >= lo) & (ch[:, 2] <= hi)]
        # every hole counts; only the spacings are taken over a bounded subset
        count_credit += min(len(in_g), len(in_c))
        g, c = _first_holes(in_g), _first_holes(in_c)
        dg, dc = _spacings(g), _spacings(c)
        spacing_g += len(dg)
        spacing_c += len(dc)
        spacing_credit += _credit_1d(dg, dc, tol.geometric)
    counts = _dice(count_credit, len(gh), len(ch))
    defects = _defects(count_credit, len(gh), len(ch))
    parts = [counts]
    details: dict[str, float | int | str] = {
        "holes.gold": len(gh),
        "holes.candidate": len(ch),
        "holes.count": _r(counts),
    }
    if spacing_g + spacing_c:
        spacing = _dice(spacing_credit, spacing_g, spacing_c)
        parts.append(spacing)
        defects += _defects(spacing_credit, spacing_g, spacing_c)
        details["holes.spacing"] = _r(spacing)
    return sum(parts) / len(parts), details, defects


def _first_holes(circles: Array) -> Array:
    """At most ``_MAX_PATTERN_HOLES`` circles, chosen independently of order and position."""
    if len(circles) <= _MAX_PATTERN_HOLES:
        return circles
    rel = circles[:, 0:2] - circles[:, 0:2].min(axis=0)
    order = np.lexsort((np.round(rel[:, 1], 6), np.round(rel[:, 0], 6)))
    return circles[order[:_MAX_PATTERN_HOLES]]


def _spacings(circles: Array) -> Array:
    n = len(circles)
    if n < 2:
        return np.zeros(0)
    d = _dist(circles[:, 0:2], circles[:, 0:2])
    iu = np.triu_indices(n, k=1)
    return np.sort(d[iu])
