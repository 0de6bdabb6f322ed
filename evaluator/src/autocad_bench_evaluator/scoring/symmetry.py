"""The rotational symmetry of a block reference: the smallest turn that leaves what it draws
unchanged.

A prompt that asks for a block inserted at a point says nothing about its rotation when the
block looks the same turned: a bolt symbol (a circle and two crossing centre lines) inserted at
90 degrees draws exactly what it draws at 0. The ``entities`` component compares a reference's
rotation modulo the gold reference's period, so such an insert is not a wrong one (what the
candidate's block draws is compared item by item besides).

A mirrored reference (AutoCAD's MIRROR gives it a negative scale factor) of a block that has a
mirror axis draws what an unmirrored one turned by some angle draws; :func:`unmirrored` finds
that equivalent reference, so "draw one bolt, mirror it" is compared as the bolts it draws. Only what is certain counts:
a reference drawing anything but lines, circles, arcs, polylines and points, or more than
:data:`MAX_ELEMENTS` of them, has the period of 360 degrees (no symmetry assumed).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from autocad_bench_evaluator.geometry import Point, bulge_arc, polar
from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    InsertEntity,
    LineEntity,
    PointEntity,
    PolylineEntity,
)

MAX_ELEMENTS = 256
"""Larger blocks are not examined (their period is 360): the check is quadratic in elements."""

ORDERS = (24, 16, 12, 10, 8, 6, 5, 4, 3, 2)
"""Symmetry orders tried, largest first; the first that holds gives the period 360 / order."""

Array = NDArray[np.float64]


def rotation_period(insert: InsertEntity, tolerance: float) -> float:
    """The smallest angle (degrees, dividing 360) by which turning ``insert``'s drawn content
    about its insertion point gives the same content, every point within ``tolerance``;
    360.0 when no order of :data:`ORDERS` holds or the content cannot be examined."""
    elements = _elements(insert)
    if elements is None:
        return 360.0
    if not any(len(rows) for rows in elements.values()):
        return 360.0
    for order in ORDERS:
        if all(_invariant(kind, rows, 2 * math.pi / order, tolerance) for kind, rows in elements.items()):
            return 360.0 / order
    return 360.0


AXIS_STEP_DEG = 15.0
"""Mirror axes tried: every multiple of this angle from the reference's own rotation."""


def unmirrored(insert: InsertEntity, tolerance: float) -> tuple[float, float, float]:
    """The scale factors and rotation ``(sx, sy, rotation)`` of a reference without mirroring
    that draws exactly what ``insert`` draws, or its own when there is none to be found.

    Both factors negative is a half turn, always. One negative factor mirrors; the mirror
    image is a turned copy only when what the reference draws is symmetric about some axis
    through its insertion point (tried at every :data:`AXIS_STEP_DEG` from its rotation,
    each point within ``tolerance``), and the turn then follows from that axis.
    """
    sx, sy, rotation = insert.scale[0], insert.scale[1], insert.rotation
    if sx < 0 and sy < 0:
        return -sx, -sy, (rotation + 180.0) % 360.0
    if (sx < 0) == (sy < 0):
        return sx, sy, rotation % 360.0
    elements = _elements(insert)
    if elements is None or not any(len(rows) for rows in elements.values()):
        return sx, sy, rotation % 360.0
    steps = round(180.0 / AXIS_STEP_DEG)
    for k in range(steps):
        axis = rotation + k * AXIS_STEP_DEG
        if all(_mirrored_onto_itself(kind, rows, math.radians(axis), tolerance) for kind, rows in elements.items()):
            # Drawn = R(rotation) D M B with M = diag(1, -1) (y mirrored; an x mirror is a half
            # turn of it): the same as R(t) D B when mirroring about ``axis`` maps the drawing
            # onto itself, with t = 2 axis - rotation, less a half turn for an x mirror.
            turn = 2.0 * axis - rotation - (180.0 if sx < 0 else 0.0)
            return abs(sx), abs(sy), turn % 360.0
    return sx, sy, rotation % 360.0


def _mirror(xy: Array, axis: float) -> Array:
    """``xy`` mirrored about the line through the origin at angle ``axis`` (radians)."""
    c, s = math.cos(2 * axis), math.sin(2 * axis)
    return np.stack([c * xy[:, 0] + s * xy[:, 1], s * xy[:, 0] - c * xy[:, 1]], axis=1)


def _mirrored_onto_itself(kind: str, rows: Array, axis: float, tolerance: float) -> bool:
    """Whether every element mirrored about ``axis`` lands on some element of the same set."""
    if not len(rows):
        return True
    if kind == "line":
        a, b = _mirror(rows[:, 0:2], axis), _mirror(rows[:, 2:4], axis)
        same = np.maximum(_d(a, rows[:, 0:2]), _d(b, rows[:, 2:4]))
        swapped = np.maximum(_d(a, rows[:, 2:4]), _d(b, rows[:, 0:2]))
        error = np.minimum(same, swapped)
    elif kind == "circle":
        radius = np.abs(rows[:, 2][:, None] - rows[:, 2][None, :])
        error = np.maximum(_d(_mirror(rows[:, 0:2], axis), rows[:, 0:2]), radius)
    elif kind == "arc":
        # a mirror turns counter-clockwise into clockwise: the image of the end is the new start
        error = np.maximum.reduce([
            _d(_mirror(rows[:, 0:2], axis), rows[:, 0:2]),
            np.abs(rows[:, 2][:, None] - rows[:, 2][None, :]),
            _d(_mirror(rows[:, 5:7], axis), rows[:, 3:5]),
            _d(_mirror(rows[:, 3:5], axis), rows[:, 5:7]),
        ])
    else:
        error = _d(_mirror(rows, axis), rows)
    return bool((error.min(axis=1) <= tolerance).all())


def _elements(insert: InsertEntity) -> dict[str, Array] | None:
    """Rows per kind, relative to the insertion point: lines (x1, y1, x2, y2), circles (x, y, r),
    arcs (x, y, r, start x, start y, end x, end y) and points (x, y); ``None`` when the
    reference draws anything else or too much."""
    ox, oy = insert.insert
    lines: list[list[float]] = []
    circles: list[list[float]] = []
    arcs: list[list[float]] = []
    points: list[list[float]] = []

    def rel(p: Point) -> tuple[float, float]:
        return p[0] - ox, p[1] - oy

    def arc(center: Point, radius: float, start: float, end: float) -> None:
        s, e = rel(polar(center, radius, start)), rel(polar(center, radius, end))
        arcs.append([*rel(center), radius, *s, *e])

    for sub in insert.exploded:
        if isinstance(sub, LineEntity):
            lines.append([*rel(sub.start), *rel(sub.end)])
        elif isinstance(sub, CircleEntity):
            circles.append([*rel(sub.center), sub.radius])
        elif isinstance(sub, ArcEntity):
            arc(sub.center, sub.radius, sub.start_angle, sub.end_angle)
        elif isinstance(sub, PointEntity):
            points.append(list(rel(sub.location)))
        elif isinstance(sub, PolylineEntity):
            vertices = list(sub.vertices)
            count = len(vertices) if sub.closed else len(vertices) - 1
            for i in range(max(count, 0)):
                a, b = vertices[i], vertices[(i + 1) % len(vertices)]
                bulge = sub.bulges[i] if i < len(sub.bulges) else 0.0
                if abs(bulge) < 1e-12:
                    lines.append([*rel(a), *rel(b)])
                else:
                    center, radius, start, end = bulge_arc(a, b, bulge)
                    arc(center, radius, start, end)
        else:
            return None
        if len(lines) + len(circles) + len(arcs) + len(points) > MAX_ELEMENTS:
            return None
    return {
        "line": np.asarray(lines, dtype=float).reshape(-1, 4),
        "circle": np.asarray(circles, dtype=float).reshape(-1, 3),
        "arc": np.asarray(arcs, dtype=float).reshape(-1, 7),
        "point": np.asarray(points, dtype=float).reshape(-1, 2),
    }


def _turn(xy: Array, angle: float) -> Array:
    c, s = math.cos(angle), math.sin(angle)
    return np.stack([c * xy[:, 0] - s * xy[:, 1], s * xy[:, 0] + c * xy[:, 1]], axis=1)


def _invariant(kind: str, rows: Array, angle: float, tolerance: float) -> bool:
    """Whether every element turned by ``angle`` lands on some element of the same set."""
    if not len(rows):
        return True
    if kind == "line":
        a, b = _turn(rows[:, 0:2], angle), _turn(rows[:, 2:4], angle)
        same = np.maximum(_d(a, rows[:, 0:2]), _d(b, rows[:, 2:4]))
        swapped = np.maximum(_d(a, rows[:, 2:4]), _d(b, rows[:, 0:2]))
        error = np.minimum(same, swapped)
    elif kind == "circle":
        radius = np.abs(rows[:, 2][:, None] - rows[:, 2][None, :])
        error = np.maximum(_d(_turn(rows[:, 0:2], angle), rows[:, 0:2]), radius)
    elif kind == "arc":
        # an arc runs counter-clockwise from its start, and a turn keeps that: no swapping
        error = np.maximum.reduce([
            _d(_turn(rows[:, 0:2], angle), rows[:, 0:2]),
            np.abs(rows[:, 2][:, None] - rows[:, 2][None, :]),
            _d(_turn(rows[:, 3:5], angle), rows[:, 3:5]),
            _d(_turn(rows[:, 5:7], angle), rows[:, 5:7]),
        ])
    else:
        error = _d(_turn(rows, angle), rows)
    return bool((error.min(axis=1) <= tolerance).all())


def _d(a: Array, b: Array) -> Array:
    """Distances from every row of ``a`` to every row of ``b`` (two columns each)."""
    return np.hypot(a[:, 0][:, None] - b[:, 0][None, :], a[:, 1][:, None] - b[:, 1][None, :])
