"""Exact coordinates shared by gold drawings and reference solutions."""

from __future__ import annotations

import math

from autocad_bench_evaluator.suite.librecad import fmt

Pt = tuple[float, float]


def polar(center: Pt, radius: float, angle_deg: float) -> Pt:
    """The point at ``angle_deg`` (counter-clockwise from +x) on the circle (``center``, ``radius``).

    Rounded to 9 decimals so that gold coordinates such as ``cos(90°)`` are exact zeros.
    """
    rad = math.radians(angle_deg)
    return (round(center[0] + radius * math.cos(rad), 9), round(center[1] + radius * math.sin(rad), 9))


def bolt_circle(center: Pt, radius: float, count: int, start_deg: float = 0.0) -> list[Pt]:
    """``count`` equally spaced points on a circle, the first at ``start_deg``."""
    return [polar(center, radius, start_deg + 360.0 * i / count) for i in range(count)]


def rectangle(corner: Pt, width: float, height: float) -> list[Pt]:
    """The four corners counter-clockwise from the lower-left ``corner``."""
    x, y = corner
    return [(x, y), (x + width, y), (x + width, y + height), (x, y + height)]


def scr_point(p: Pt) -> str:
    """A point as typed into AutoCAD's command line."""
    return f"{fmt(p[0])},{fmt(p[1])}"


def scr_points(points: list[Pt]) -> str:
    return " ".join(scr_point(p) for p in points)


def arc_mid(center: Pt, radius: float, start_deg: float, end_deg: float) -> Pt:
    """The middle point of the counter-clockwise arc from ``start_deg`` to ``end_deg``."""
    sweep = (end_deg - start_deg) % 360.0 or 360.0
    return polar(center, radius, start_deg + sweep / 2.0)
