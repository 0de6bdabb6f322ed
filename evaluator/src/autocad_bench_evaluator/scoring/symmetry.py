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

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class BlockSymmetry:
    """What turning or mirroring a reference leaves unchanged; the same for every reference of
    one block at one scale, so it is found once per block and scale (see the scorer's items)."""

    period: float
    """The smallest turn (degrees, dividing 360) that draws the same; 360 when none is found."""
    mirror_axis: float | None
    """For a reference with one negative scale factor: the angle (degrees) from its rotation of
    an axis through its insertion point about which what it draws is symmetric, or ``None``."""


AXIS_STEP_DEG = 15.0
"""Mirror axes tried: every multiple of this angle from the reference's own rotation."""


def block_symmetry(insert: InsertEntity, tolerance: float) -> BlockSymmetry:
    """The symmetry of what ``insert`` draws about its insertion point, each point within
    ``tolerance``: its rotation period over :data:`ORDERS` and, when exactly one scale factor
    is negative, a mirror axis tried every :data:`AXIS_STEP_DEG`. Nothing is assumed of what
    cannot be examined (period 360, no axis)."""
    elements = _elements(insert)
    if elements is None or not any(len(rows) for rows in elements.values()):
        return BlockSymmetry(360.0, None)

    def onto_itself(move: Callable[[Array], Array], *, reverses: bool) -> bool:
        return all(_onto_itself(kind, rows, move, tolerance, reverses=reverses) for kind, rows in elements.items())

    period = next((360.0 / order for order in ORDERS
                   if onto_itself(functools.partial(_turn, angle=2 * math.pi / order), reverses=False)), 360.0)
    axis = None
    if (insert.scale[0] < 0) != (insert.scale[1] < 0):
        axis = next((k * AXIS_STEP_DEG for k in range(round(180.0 / AXIS_STEP_DEG))
                     if onto_itself(functools.partial(_mirror, axis=math.radians(insert.rotation + k * AXIS_STEP_DEG)),
                                    reverses=True)), None)
    return BlockSymmetry(period, axis)


def rotation_period(insert: InsertEntity, tolerance: float) -> float:
    """The smallest angle (degrees, dividing 360) by which turning ``insert``'s drawn content
    about its insertion point gives the same content, every point within ``tolerance``;
    360.0 when no order of :data:`ORDERS` holds or the content cannot be examined."""
    return block_symmetry(insert, tolerance).period


def unmirrored(insert: InsertEntity, tolerance: float,
               symmetry: BlockSymmetry | None = None) -> tuple[float, float, float]:
    """The scale factors and rotation ``(sx, sy, rotation)`` of a reference without mirroring
    that draws exactly what ``insert`` draws, or its own when there is none to be found.

    Both factors negative is a half turn, always. One negative factor mirrors; the mirror
    image is a turned copy only when what the reference draws has a mirror axis
    (``symmetry``, found here when not given), and the turn then follows from that axis.
    """
    sx, sy, rotation = insert.scale[0], insert.scale[1], insert.rotation
    if sx < 0 and sy < 0:
        return -sx, -sy, (rotation + 180.0) % 360.0
    if (sx < 0) == (sy < 0):
        return sx, sy, rotation % 360.0
    axis = (symmetry or block_symmetry(insert, tolerance)).mirror_axis
    if axis is None:
        return sx, sy, rotation % 360.0
    # Drawn = R(rotation) D M B with M = diag(1, -1) (y mirrored; an x mirror is a half turn of
    # it): the same as R(t) D B when mirroring about the axis at ``rotation + axis`` maps the
    # drawing onto itself, with t = 2 (rotation + axis) - rotation, less a half turn for an x mirror.
    turn = rotation + 2.0 * axis - (180.0 if sx < 0 else 0.0)
    return abs(sx), abs(sy), turn % 360.0


def _mirror(xy: Array, axis: float) -> Array:
    """``xy`` mirrored about the line through the origin at angle ``axis`` (radians)."""
    c, s = math.cos(2 * axis), math.sin(2 * axis)
    return np.stack([c * xy[:, 0] + s * xy[:, 1], s * xy[:, 0] - c * xy[:, 1]], axis=1)


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


def _onto_itself(kind: str, rows: Array, move: Callable[[Array], Array], tolerance: float, *,
                 reverses: bool) -> bool:
    """Whether every element moved by ``move`` (a turn or a mirror of points) lands on some
    element of the same set. A mirror ``reverses`` an arc's direction: the image of its end is
    the new start."""
    if not len(rows):
        return True
    if kind == "line":
        a, b = move(rows[:, 0:2]), move(rows[:, 2:4])
        same = np.maximum(_d(a, rows[:, 0:2]), _d(b, rows[:, 2:4]))
        swapped = np.maximum(_d(a, rows[:, 2:4]), _d(b, rows[:, 0:2]))
        error = np.minimum(same, swapped)
    elif kind == "circle":
        radius = np.abs(rows[:, 2][:, None] - rows[:, 2][None, :])
        error = np.maximum(_d(move(rows[:, 0:2]), rows[:, 0:2]), radius)
    elif kind == "arc":
        start, end = (rows[:, 5:7], rows[:, 3:5]) if reverses else (rows[:, 3:5], rows[:, 5:7])
        error = np.maximum.reduce([
            _d(move(rows[:, 0:2]), rows[:, 0:2]),
            np.abs(rows[:, 2][:, None] - rows[:, 2][None, :]),
            _d(move(start), rows[:, 3:5]),
            _d(move(end), rows[:, 5:7]),
        ])
    else:
        error = _d(move(rows), rows)
    return bool((error.min(axis=1) <= tolerance).all())


def _d(a: Array, b: Array) -> Array:
    """Distances from every row of ``a`` to every row of ``b`` (two columns each)."""
    return np.hypot(a[:, 0][:, None] - b[:, 0][None, :], a[:, 1][:, None] - b[:, 1][None, :])
