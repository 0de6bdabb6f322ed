"""Small, dependency-free 2D geometry shared by metadata extraction, scoring and rendering.

Everything here is a pure function of its arguments (no global state, no randomness), so the
deterministic scorer and the renderer agree on how an arc or a bulged polyline segment is
sampled. Angles are in degrees, counter-clockwise, unless a name says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import pairwise

Point = tuple[float, float]

ARC_STEP_DEG = 5.0
"""Sampling step for arcs and circles: 72 samples per full circle, fine enough at 1600 px."""


def norm_angle(angle: float) -> float:
    """``angle`` reduced to [0, 360)."""
    reduced = math.fmod(angle, 360.0)
    if reduced < 0:
        reduced += 360.0
    # fmod of a tiny negative value can come back as exactly 360.0 after the addition
    return 0.0 if reduced >= 360.0 else reduced


def arc_sweep(start_angle: float, end_angle: float) -> float:
    """Counter-clockwise sweep from ``start_angle`` to ``end_angle`` in (0, 360]."""
    sweep = norm_angle(end_angle - start_angle)
    return 360.0 if sweep == 0.0 else sweep


def polar(center: Point, radius: float, angle_deg: float) -> Point:
    """The point at ``angle_deg`` on the circle (``center``, ``radius``)."""
    rad = math.radians(angle_deg)
    return (center[0] + radius * math.cos(rad), center[1] + radius * math.sin(rad))


def sample_arc(center: Point, radius: float, start_angle: float, end_angle: float) -> list[Point]:
    """Points along a counter-clockwise arc, both ends included (a full circle when equal)."""
    sweep = arc_sweep(start_angle, end_angle)
    steps = max(2, math.ceil(sweep / ARC_STEP_DEG))
    return [polar(center, radius, start_angle + sweep * i / steps) for i in range(steps + 1)]


def sample_circle(center: Point, radius: float) -> list[Point]:
    """A closed ring of points on a circle (first point repeated at the end)."""
    return sample_arc(center, radius, 0.0, 360.0)


def bulge_arc(p1: Point, p2: Point, bulge: float) -> tuple[Point, float, float, float]:
    """The arc of a bulged polyline segment as (center, radius, start_angle, end_angle).

    The returned arc runs counter-clockwise from ``start_angle`` to ``end_angle``; for a
    negative bulge (clockwise segment) that means from ``p2`` to ``p1``. Raises
    :class:`ValueError` for a zero bulge or coincident points.
    """
    if bulge == 0.0:
        raise ValueError("a zero bulge is a straight segment")
    dx, dy = p2[0] - p1[0], p2[1] - p1[1]
    chord = math.hypot(dx, dy)
    if chord == 0.0:
        raise ValueError("coincident points")
    theta = 4.0 * math.atan(bulge)
    radius = abs(chord / (2.0 * math.sin(theta / 2.0)))
    # distance from the chord midpoint to the centre, signed towards the left of p1->p2
    sagitta_offset = chord * (1.0 - bulge * bulge) / (4.0 * bulge)
    mx, my = (p1[0] + p2[0]) / 2.0, (p1[1] + p2[1]) / 2.0
    nx, ny = -dy / chord, dx / chord
    center = (mx + nx * sagitta_offset, my + ny * sagitta_offset)
    a1 = math.degrees(math.atan2(p1[1] - center[1], p1[0] - center[0]))
    a2 = math.degrees(math.atan2(p2[1] - center[1], p2[0] - center[0]))
    if bulge > 0:
        return center, radius, norm_angle(a1), norm_angle(a2)
    return center, radius, norm_angle(a2), norm_angle(a1)


def sample_bulge(p1: Point, p2: Point, bulge: float) -> list[Point]:
    """Points from ``p1`` to ``p2`` along a polyline segment (straight when ``bulge`` is ~0)."""
    if abs(bulge) < 1e-12 or p1 == p2:
        return [p1, p2]
    center, radius, start, end = bulge_arc(p1, p2, bulge)
    points = sample_arc(center, radius, start, end)
    if bulge < 0:
        points.reverse()
    points[0], points[-1] = p1, p2
    return points


def polyline_points(vertices: Sequence[Point], bulges: Sequence[float], closed: bool) -> list[Point]:
    """The sampled outline of a polyline (closed ones end where they start)."""
    if not vertices:
        return []
    count = len(vertices)
    segments = count if closed else count - 1
    out: list[Point] = [vertices[0]]
    for i in range(segments):
        bulge = bulges[i] if i < len(bulges) else 0.0
        out.extend(sample_bulge(vertices[i], vertices[(i + 1) % count], bulge)[1:])
    return out


def polygon_area(points: Sequence[Point]) -> float:
    """Absolute shoelace area of a (closed or implicitly closed) ring."""
    if len(points) < 3:
        return 0.0
    total = 0.0
    for (x1, y1), (x2, y2) in zip(points, [*points[1:], points[0]], strict=True):
        total += x1 * y2 - x2 * y1
    return abs(total) / 2.0


def path_length(points: Sequence[Point]) -> float:
    """Length of the open path through ``points``."""
    return sum(math.dist(a, b) for a, b in pairwise(points))


def centroid(points: Sequence[Point]) -> Point:
    """The mean of ``points`` ((0, 0) for none)."""
    if not points:
        return (0.0, 0.0)
    return (sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points))


def bounds(points: Iterable[Point]) -> tuple[Point, Point] | None:
    """(min corner, max corner) of ``points``, or None when there are none."""
    xs: list[float] = []
    ys: list[float] = []
    for x, y in points:
        if math.isfinite(x) and math.isfinite(y):
            xs.append(x)
            ys.append(y)
    if not xs:
        return None
    return (min(xs), min(ys)), (max(xs), max(ys))
