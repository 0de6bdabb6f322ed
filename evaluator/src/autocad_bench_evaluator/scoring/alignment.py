"""The candidate-to-gold translation (step 2 of scoring): translations proposed by voting over
pairs of same-kind anchor points (plus extents alignment), each evaluated, the best refined by
the least-squares translation of its matched pairs; ``"fixed"`` position uses none."""

from __future__ import annotations

import math

import numpy as np

from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.scoring.aggregate import _evaluate, _Evaluation
from autocad_bench_evaluator.scoring.items import Array, _Side
from autocad_bench_evaluator.scoring.matching import ErrFn
from autocad_bench_evaluator.spec import ScoringSpec, Tolerance

_VOTE_CAP = 400
_HYPOTHESES = 8


def _anchor_sets(side: _Side) -> dict[str, Array]:
    out = {name: k.anchors() for name, k in side.kinds.items()}
    out["text"] = side.texts.anchors()
    out["dimension"] = side.dims.anchors()
    return out


def _hypotheses(g: _Side, c: _Side, tol: Tolerance) -> list[Point]:
    """Candidate-to-gold translations worth trying, best-supported first."""
    bin_size = 2.0 * tol.geometric
    phase = 0.318309886  # keeps round-number translations away from bin boundaries
    votes: dict[tuple[int, int], list[Point]] = {}
    ga, ca = _anchor_sets(g), _anchor_sets(c)
    for name in sorted(ga):
        gpts, cpts = ga[name], ca[name]
        if len(gpts) == 0 or len(cpts) == 0:
            continue
        gpts, cpts = _thin(gpts), _thin(cpts)
        diff = (gpts[:, None, :] - cpts[None, :, :]).reshape(-1, 2)
        keys = np.floor(diff / bin_size + phase).astype(np.int64)
        for (kx, ky), (dx, dy) in zip(keys.tolist(), diff.tolist(), strict=True):
            votes.setdefault((kx, ky), []).append((dx, dy))
    ranked = sorted(votes.items(), key=lambda item: (-len(item[1]), item[0]))[:_HYPOTHESES]
    out: list[Point] = []
    for _, vectors in ranked:
        arr = np.asarray(vectors)
        out.append((float(np.median(arr[:, 0])), float(np.median(arr[:, 1]))))
    ge, ce = g.geometry_extents, c.geometry_extents
    if ge is not None and ce is not None:
        out.append((ge[0][0] - ce[0][0], ge[0][1] - ce[0][1]))
        out.append(((ge[0][0] + ge[1][0] - ce[0][0] - ce[1][0]) / 2, (ge[0][1] + ge[1][1] - ce[0][1] - ce[1][1]) / 2))
    return out or [(0.0, 0.0)]


def _thin(points: Array) -> Array:
    if len(points) <= _VOTE_CAP:
        return points
    rel = points - points.min(axis=0)
    order = np.lexsort((np.round(rel[:, 1], 6), np.round(rel[:, 0], 6)))
    step = math.ceil(len(points) / _VOTE_CAP)
    return points[order[::step]]


def _refine(pairs: list[tuple[Point, Point, float]]) -> Point | None:
    weight = math.fsum(p[2] for p in pairs)
    if weight <= 0:
        return None
    dx = math.fsum((g[0] - c[0]) * w for g, c, w in pairs) / weight
    dy = math.fsum((g[1] - c[1]) * w for g, c, w in pairs) / weight
    return (dx, dy)


def _align(g: _Side, c: _Side, spec: ScoringSpec, errs: dict[str, ErrFn]) -> tuple[Point, _Evaluation]:
    if spec.position == "fixed":
        return (0.0, 0.0), _evaluate(g, c, spec, errs)
    best: tuple[Point, _Evaluation] | None = None
    for t in _hypotheses(g, c, spec.tolerance):
        ev = _evaluate(g, c.shifted(*t), spec, errs)
        if best is None or ev.total > best[1].total + 1e-12:
            best = (t, ev)
    assert best is not None
    for _ in range(2):
        t0, ev0 = best
        delta = _refine(ev0.anchor_pairs)
        if delta is None or math.hypot(*delta) < 1e-12:
            break
        t1 = (t0[0] + delta[0], t0[1] + delta[1])
        ev1 = _evaluate(g, c.shifted(*t1), spec, errs)
        if ev1.total + 1e-12 >= ev0.total:
            best = (t1, ev1)
        else:
            break
    return best
