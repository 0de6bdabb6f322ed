"""The ``dimensions`` component: DIMENSION measurements of the same family with their measured
points and dimension line, plus the multisets of characteristic sizes (segment lengths, circle
and arc radii, the drawing's width and height)."""

from __future__ import annotations

import numpy as np

from autocad_bench_evaluator.scoring.constants import ANGLE_TOLERANCE_DEG
from autocad_bench_evaluator.scoring.items import _Side
from autocad_bench_evaluator.scoring.matching import (
    _assign,
    _Component,
    _credit,
    _credit_1d,
    _defects,
    _dice,
    _dist,
    _layer_diff,
    _Match,
)
from autocad_bench_evaluator.scoring.report import _r
from autocad_bench_evaluator.spec import Tolerance


def _dimensions(g: _Side, c: _Side, tol: Tolerance) -> tuple[_Component, _Match]:
    parts: list[float] = []
    details: dict[str, float | int | str] = {}
    gd, cd = g.dims, c.dims
    match = _Match()
    n_g = n_c = 0
    matched = 0.0
    defects = 0.0
    if gd.n or cd.n:
        if gd.n and cd.n:
            gv, cv = gd.size[:, 0], cd.size[:, 0]
            gl = np.asarray(gd.labels, dtype=object)
            cl = np.asarray(cd.labels, dtype=object)
            t = np.where(gl == "angle", ANGLE_TOLERANCE_DEG, tol.geometric)[:, None]
            same = (gl[:, None] == cl[None, :]).astype(float)
            size_err = np.abs(gv[:, None] - cv[None, :]) / t
            pos_err = _dist(gd.pos[:, 0:2], cd.pos[:, 0:2]) / tol.geometric
            # the offset between the two dimension lines, along the gold line's normal
            gn = gd.size[:, 1:3]
            gap = (gd.pos[:, None, 2:4] - cd.pos[None, :, 2:4]) * gn[:, None, :]
            pos_err = np.maximum(pos_err, np.abs(gap.sum(axis=2)) / tol.geometric)
            # the right measurement of the wrong feature is half a dimension
            credit = _credit(size_err) * same * (0.5 + 0.5 * _credit(pos_err))
            gi, ci = np.arange(gd.n), np.arange(cd.n)
            match = _assign(credit, size_err, _layer_diff(gd, cd, gi, ci))
        part = _dice(match.credit, gd.n, cd.n)
        parts.append(part)
        details["dimensions.score"] = _r(part)
        details["dimensions.gold"] = gd.n
        details["dimensions.candidate"] = cd.n
        n_g += gd.n
        n_c += cd.n
        matched += match.credit
        defects += _defects(match.credit, gd.n, cd.n)
    size_credit = 0.0
    size_g = size_c = 0
    for name in ("length", "radius", "extent"):
        gv, cv = g.sizes[name], c.sizes[name]
        size_g += len(gv)
        size_c += len(cv)
        size_credit += _credit_1d(gv, cv, tol.geometric)
    if size_g + size_c:
        part = _dice(size_credit, size_g, size_c)
        parts.append(part)
        details["sizes.score"] = _r(part)
        details["sizes.gold"] = size_g
        details["sizes.candidate"] = size_c
        defects += _defects(size_credit, size_g, size_c)
    if not parts:
        return _Component(1.0, False), match
    return _Component(sum(parts) / len(parts), True, n_g, n_c, matched, details, defects), match
