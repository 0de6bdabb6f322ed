"""The ``extents3d`` component (schema 4): the physical 3D box's sizes and position, volume,
surface area, volume centroid and body count, and the rule that mesh bodies do not stand in for
ACIS solids (:data:`SOLID_SOURCES`)."""

from __future__ import annotations

import math

import numpy as np

from autocad_bench_evaluator.scoring.items import _Side
from autocad_bench_evaluator.scoring.matching import _Component, _credit
from autocad_bench_evaluator.scoring.report import _r
from autocad_bench_evaluator.spec import Tolerance

SOLID_SOURCES = frozenset({"3DSOLID", "BODY", "REGION", "SURFACE"})
"""ACIS entity types: a gold made of these asks for solids, which MESH/POLYFACE cannot stand in for."""


def _extents3d(g: _Side, c: _Side, tol: Tolerance, position: str) -> _Component:
    gp, cp = g.physical, c.physical
    if gp is None or cp is None:
        return _Component(0.0, True, details={"reason": "schema v4 metadata missing"}, defects=1.0)
    if gp.status == "none":
        none = cp.status == "none"
        return _Component(1.0 if none else 0.0, True, 0, cp.bodies, defects=0.0 if none else 1.0)
    if cp.status != "measured" or cp.extents is None or gp.extents is None:
        reason = "candidate has no 3D body" if cp.status == "none" else f"candidate 3D extents unknown: {cp.reason}"
        return _Component(0.0, True, gp.bodies, cp.bodies, details={"reason": reason[:300]}, defects=1.0)
    stand_ins = sorted(set(cp.sources) - set(gp.sources) - ({"BODY"} if "3DSOLID" in gp.sources else set()))
    if set(gp.sources) <= SOLID_SOURCES and stand_ins:
        # the task asks for solids: a mesh or polyface with the right box is not one
        reason = f"the task asks for solids; {', '.join(stand_ins)} bodies do not count"
        return _Component(0.0, True, gp.bodies, cp.bodies, details={"reason": reason}, defects=1.0)
    gs, cs = gp.extents.size, cp.extents.size
    parts = [float(_credit(np.asarray([abs(a - b) / tol.geometric]))[0]) for a, b in zip(gs, cs, strict=True)]
    defects = sum(1.0 - p for p in parts)
    details: dict[str, float | int | str] = {"size.score": _r(sum(parts) / 3)}
    scores = [sum(parts) / 3]
    if position == "fixed":
        d = math.dist(gp.extents.min, cp.extents.min)
        pos = float(_credit(np.asarray([d / tol.geometric]))[0])
        scores.append(pos)
        defects += 1.0 - pos
        details["position.score"] = _r(pos)
    if gp.volume is not None and cp.volume is not None:
        # faces within ``geometric`` of the gold's: the volume within about half the gold box's
        # surface times ``geometric``
        a, b, h = gs
        vol_tol = max(tol.geometric * (a * b + b * h + h * a), tol.geometric**3)
        vol = float(_credit(np.asarray([abs(gp.volume - cp.volume) / vol_tol]))[0])
        scores.append(vol)
        defects += 1.0 - vol
        details["volume.score"] = _r(vol)
    elif gp.volume is not None:
        # the gold's volume is known, the candidate's is not: an open or broken surface
        scores.append(0.0)
        defects += 1.0
        details["volume.score"] = 0.0
        details["reason"] = "the candidate's bodies are not closed surfaces: their volume is undefined"
    if gp.area is not None and cp.area is not None:
        # every face within ``geometric``: the surface within about the box's edge length times it
        area_tol = max(tol.geometric * 4.0 * sum(gs), tol.geometric**2)
        area = float(_credit(np.asarray([abs(gp.area - cp.area) / area_tol]))[0])
        scores.append(area)
        defects += 1.0 - area
        details["area.score"] = _r(area)
    if gp.centroid is not None and cp.centroid is not None:
        # where the material sits inside the box: a mirrored or rearranged part moves it
        offset_g = np.subtract(gp.centroid, gp.extents.min)
        offset_c = np.subtract(cp.centroid, cp.extents.min)
        shape = float(_credit(np.asarray([float(np.linalg.norm(offset_g - offset_c)) / tol.geometric]))[0])
        scores.append(shape)
        defects += 1.0 - shape
        details["centroid.score"] = _r(shape)
    bodies = 1.0 if gp.bodies == cp.bodies else 0.0
    scores.append(bodies)
    defects += 1.0 - bodies
    details["bodies.gold"], details["bodies.candidate"] = gp.bodies, cp.bodies
    return _Component(sum(scores) / len(scores), True, gp.bodies, cp.bodies, details=details, defects=defects)
