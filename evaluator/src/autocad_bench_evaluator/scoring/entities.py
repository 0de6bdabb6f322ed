"""The ``entities`` component: the error of a candidate item against a gold item for each
matchable kind (segments, arcs, circles, points, curves, hatches, block references) and the
component score over all kinds, the object types drawn included."""

from __future__ import annotations

import numpy as np

from autocad_bench_evaluator.scoring.constants import ANGLE_TOLERANCE_DEG, CREDIT_FALLOFF, SCALE_TOLERANCE
from autocad_bench_evaluator.scoring.items import Array, Index, _Kind, _Side
from autocad_bench_evaluator.scoring.matching import (
    ErrFn,
    _Component,
    _defects,
    _dice,
    _dist,
    _Match,
    _match_kind,
    _size_tol,
)
from autocad_bench_evaluator.scoring.report import _r
from autocad_bench_evaluator.spec import Tolerance


def _errors(tol: Tolerance) -> dict[str, ErrFn]:
    geo = tol.geometric

    def segment(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        gp, cp = g.pos[gi], c.pos[ci]
        d_same = np.maximum(_dist(gp[:, 2:4], cp[:, 2:4]), _dist(gp[:, 4:6], cp[:, 4:6]))
        d_swap = np.maximum(_dist(gp[:, 2:4], cp[:, 4:6]), _dist(gp[:, 4:6], cp[:, 2:4]))
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        return np.minimum(d_same, d_swap) / t, np.ones((len(gi), len(ci)))

    def arc(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        gp, cp = g.pos[gi], c.pos[ci]
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        d_center = _dist(gp[:, 0:2], cp[:, 0:2]) / geo
        d_r = np.abs(g.size[gi, 0][:, None] - c.size[ci, 0][None, :]) / t
        d_ends = (
            np.minimum(
                np.maximum(_dist(gp[:, 2:4], cp[:, 2:4]), _dist(gp[:, 4:6], cp[:, 4:6])),
                np.maximum(_dist(gp[:, 2:4], cp[:, 4:6]), _dist(gp[:, 4:6], cp[:, 2:4])),
            )
            / t
        )
        return np.maximum(np.maximum(d_center, d_r), d_ends), np.ones((len(gi), len(ci)))

    def circle(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        t = _size_tol(tol, g.size[gi, 0])[:, None]
        d_center = _dist(g.pos[gi], c.pos[ci]) / geo
        d_r = np.abs(g.size[gi, 0][:, None] - c.size[ci, 0][None, :]) / t
        return np.maximum(d_center, d_r), np.ones((len(gi), len(ci)))

    def point(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        return _dist(g.pos[gi], c.pos[ci]) / geo, np.ones((len(gi), len(ci)))

    def curve(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        err = np.full((len(gi), len(ci)), 10.0)
        for a, i in enumerate(gi):
            gc = g.curves[int(i)]
            t = geo
            for b, j in enumerate(ci):
                cc = c.curves[int(j)]
                if float(np.hypot(*(gc.mean(axis=0) - cc.mean(axis=0)))) > 4 * t + float(g.size[int(i), 0]):
                    continue
                d = _hausdorff(gc, cc)
                err[a, b] = d / t
        return err, np.ones((len(gi), len(ci)))

    def hatch(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        ga = g.size[gi, 0][:, None]
        ca = c.size[ci, 0][None, :]
        # a boundary within ``geo`` of the gold changes the area by about perimeter * geo
        area_tol = np.maximum(geo * np.sqrt(np.maximum(ga, 0.0)) * 4.0, 1e-9)
        err = np.maximum(_dist(g.pos[gi], c.pos[ci]) / geo, np.abs(ga - ca) / area_tol)
        # the extent of the fill around its centroid, each side within ``geo``
        reach = np.abs(g.size[gi, 1:5][:, None, :] - c.size[ci, 1:5][None, :, :]).max(axis=2) / geo
        err = np.maximum(err, reach)
        gl = np.asarray(g.labels, dtype=object)[gi]
        cl = np.asarray(c.labels, dtype=object)[ci]
        factor = np.where(gl[:, None] == cl[None, :], 1.0, 0.5)
        return err, factor

    def insert(g: _Kind, c: _Kind, gi: Index, ci: Index) -> tuple[Array, Array]:
        d = _dist(g.pos[gi], c.pos[ci]) / geo
        gs, cs = g.size[gi], c.size[ci]
        stol = np.full(gs[:, 0:2].shape, SCALE_TOLERANCE)
        ds = np.maximum(
            np.abs(gs[:, 0][:, None] - cs[:, 0][None, :]) / stol[:, 0][:, None],
            np.abs(gs[:, 1][:, None] - cs[:, 1][None, :]) / stol[:, 1][:, None],
        )
        # Rotation modulo the gold block's symmetry period (a bolt symbol at 90 degrees draws what
        # it draws at 0). The candidate's own period is not asked: a block drawn a little off
        # symmetric, within tolerance, is still the gold's, and what any block draws is compared
        # item by item besides (its exploded contents), so an asymmetric one fails there.
        period = np.broadcast_to(gs[:, 3][:, None], (len(gi), len(ci)))
        dr = np.abs(gs[:, 2][:, None] - cs[:, 2][None, :]) % period
        dr = np.minimum(dr, period - dr) / ANGLE_TOLERANCE_DEG
        gl = np.asarray(g.labels, dtype=object)[gi]
        cl = np.asarray(c.labels, dtype=object)[ci]
        factor = (gl[:, None] == cl[None, :]).astype(float)
        return np.maximum(np.maximum(d, ds), dr), factor

    return {
        "segment": segment,
        "arc": arc,
        "circle": circle,
        "point": point,
        "curve": curve,
        "hatch": hatch,
        "insert": insert,
    }


def _hausdorff(a: Array, b: Array) -> float:
    from scipy.spatial.distance import directed_hausdorff

    return max(float(directed_hausdorff(a, b)[0]), float(directed_hausdorff(b, a)[0]))


def _entities(
    g: _Side, c: _Side, errs: dict[str, ErrFn], tol: Tolerance
) -> tuple[_Component, list[tuple[str, _Match]]]:
    # Every kind's error is at least its anchor distance over ``tol.geometric`` (the anchor is a
    # segment's midpoint, an arc's or circle's centre, a point, a hatch's centroid, an insertion
    # point), so no candidate farther than this from every gold anchor can earn credit. A curve's
    # anchor (the mean of its points) bounds nothing: beyond reach, a huge drawing's curves are
    # matched among the nearest only.
    reach = (1.0 + CREDIT_FALLOFF) * tol.geometric
    credit = 0.0
    n_g = n_c = 0
    details: dict[str, float | int | str] = {}
    matches: list[tuple[str, _Match]] = []
    for name, fn in errs.items():
        gk, ck = g.kinds[name], c.kinds[name]
        if gk.n == 0 and ck.n == 0:
            continue
        match = _match_kind(gk, ck, fn, reach)
        matches.append((name, match))
        credit += match.credit
        n_g += gk.n
        n_c += ck.n
        details[f"{name}.gold"] = gk.n
        details[f"{name}.candidate"] = ck.n
        details[f"{name}.matched"] = _r(match.credit)
    score, applicable, defects = _dice(credit, n_g, n_c), n_g + n_c > 0, _defects(credit, n_g, n_c)
    # the objects drawn: a rectangle asked for as one closed polyline is not four LINEs
    gt, ct = g.types, c.types
    t_g, t_c = sum(gt.values()), sum(ct.values())
    if t_g + t_c:
        same = sum(min(count, ct.get(kind, 0)) for kind, count in gt.items())
        types = _dice(same, t_g, t_c)
        score = (score + types) / 2 if applicable else types
        applicable = True
        defects += _defects(same, t_g, t_c)
        details["types.score"] = _r(types)
        details["types.gold"] = ", ".join(f"{k} x{v}" for k, v in sorted(gt.items()))[:300]
        details["types.candidate"] = ", ".join(f"{k} x{v}" for k, v in sorted(ct.items()))[:300]
    return _Component(score, applicable, n_g, n_c, credit, details, defects), matches
