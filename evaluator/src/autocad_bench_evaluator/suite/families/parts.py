"""Parametric shapes and parts shared by the draft and reproduce families.

Each ``*_part`` function takes the sampled parameters and the ``perturbed`` flag and returns a
:class:`Part`: the drafting ops, the absolute description used by *draft* prompts, the one
scale hint used by *reproduce* prompts and what the perturbed variant gets wrong. Parameters
sit on a 5 mm grid (1 mm for small features) so that a drafter reading the reference image can
recover them, and every part stays inside the templates' initial view (x 0..400, y 0..200).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from autocad_bench_evaluator.suite.families.ops import Arc, Circle, Line, Op, Poly
from autocad_bench_evaluator.suite.generators._shapes import Pt, bolt_circle, polar
from autocad_bench_evaluator.suite.librecad import fmt

Params = dict[str, Any]


@dataclass(frozen=True)
class Part:
    """One part as drawn by a task: the ops, plus the texts the prompts and the validity table use.

    ``description`` completes a draft prompt's "Draw ..." sentence, ``hint`` is the single size a reproduce prompt
    states, ``perturbation`` says what the perturbed ops get wrong (``ops`` are the perturbed ones then) and ``title``
    is the task title.
    """

    ops: tuple[Op, ...]
    description: str
    hint: str
    perturbation: str
    title: str


def p(pt: Pt) -> str:
    """A point as written in prompts and perturbation notes, e.g. ``(120,37.5)``."""
    return f"({fmt(pt[0])},{fmt(pt[1])})"


def grid(rng: random.Random, low: float, high: float, step: float = 5.0) -> float:
    """A value on the ``step`` grid in ``[low, high]``."""
    count = round((high - low) / step)
    return low + step * rng.randint(0, count)


def diameter(r: float) -> str:
    """Twice the radius ``r``, formatted for a prompt."""
    return fmt(2 * r)


# -- triangle of lines -----------------------------------------------------------------------------


def sample_triangle(rng: random.Random) -> Params:
    """Corners ``a`` and ``b`` (the base, near the bottom) and apex ``c`` of a triangle.

    Draws again until every angle is at least 25 degrees, so no corner is a sliver.
    """
    while True:
        a = (grid(rng, 10, 60), grid(rng, 10, 60))
        b = (grid(rng, a[0] + 100, 330), grid(rng, 10, 60))
        c = (grid(rng, a[0] + 20, b[0] - 20), grid(rng, 110, 190))
        if _min_angle(a, b, c) >= 25.0:
            return {"a": a, "b": b, "c": c}


def _min_angle(a: Pt, b: Pt, c: Pt) -> float:
    def angle(p0: Pt, p1: Pt, p2: Pt) -> float:
        v1 = (p1[0] - p0[0], p1[1] - p0[1])
        v2 = (p2[0] - p0[0], p2[1] - p0[1])
        cos = (v1[0] * v2[0] + v1[1] * v2[1]) / (math.hypot(*v1) * math.hypot(*v2))
        return math.degrees(math.acos(max(-1.0, min(1.0, cos))))

    return min(angle(a, b, c), angle(b, c, a), angle(c, a, b))


def triangle_part(q: Params, perturbed: bool) -> Part:
    """Three LINE objects around the triangle; the perturbed apex is 20 mm lower."""
    a, b, c = q["a"], q["b"], q["c"]
    apex = (c[0], c[1] - 20.0) if perturbed else c
    ops = (Line(a, b), Line(b, apex), Line(apex, a))
    return Part(
        ops=ops,
        description=f"a triangle made of three separate LINE objects with corners at {p(a)}, {p(b)} and {p(c)}",
        hint=f"The base of the triangle (its lowest side) runs {fmt(b[0] - a[0])} mm in x.",
        perturbation=f"apex at {p(apex)} instead of {p(c)}",
        title="Triangle from three lines",
    )


# -- concentric circles ----------------------------------------------------------------------------


def sample_concentric(rng: random.Random) -> Params:
    """Centre and radii of two concentric circles, the inner one at least 15 mm smaller in radius."""
    outer = grid(rng, 40, 90)
    return {"c": (grid(rng, 100, 300), grid(rng, 95, 105)), "outer": outer, "inner": grid(rng, 15, outer - 15)}


def concentric_part(q: Params, perturbed: bool) -> Part:
    """The two concentric circles; the perturbed inner circle is 5 mm smaller in radius."""
    c, outer, inner = q["c"], q["outer"], q["inner"]
    wrong = inner - 5.0 if perturbed else inner
    return Part(
        ops=(Circle(c, outer), Circle(c, wrong)),
        description=f"two concentric circles centred at {p(c)}: one with radius {fmt(outer)} and one with "
        f"radius {fmt(inner)}",
        hint=f"The outer circle has a diameter of {diameter(outer)} mm.",
        perturbation=f"inner radius {fmt(wrong)} instead of {fmt(inner)}",
        title="Two concentric circles",
    )


# -- semicircle closed by its diameter -------------------------------------------------------------


def sample_semicircle(rng: random.Random) -> Params:
    """Centre, radius and side (``upper``) of a half circle placed so that its arc stays in the initial view."""
    r = grid(rng, 40, 90)
    upper = rng.random() < 0.5
    cy = grid(rng, 10, 100) if upper else grid(rng, 100, 190)
    return {"c": (grid(rng, r + 10, 390 - r), cy), "r": r, "upper": upper}


def semicircle_part(q: Params, perturbed: bool) -> Part:
    """A half-circle arc closed by a line along its diameter; the perturbed arc is 10 mm too small in radius."""
    c, r, upper = q["c"], q["r"], q["upper"]
    drawn = r - 10.0 if perturbed else r
    start, end = (0.0, 180.0) if upper else (180.0, 360.0)
    left, right = (c[0] - r, c[1]), (c[0] + r, c[1])
    side = "upper" if upper else "lower"
    return Part(
        ops=(Arc(c, drawn, start, end), Line(left, right)),
        description=f"an arc with centre {p(c)} and radius {fmt(r)} forming the {side} half of the circle "
        f"(counter-clockwise from {fmt(start)} to {fmt(end % 360.0)} degrees), closed by a line along its "
        f"diameter from {p(left)} to {p(right)}",
        hint=f"The straight side is {diameter(r)} mm long.",
        perturbation=f"arc radius {fmt(drawn)} instead of {fmt(r)}",
        title="Semicircular arc closed by its diameter",
    )


# -- rectangle ----------------------------------------------------------------------------------------


def sample_rectangle(rng: random.Random) -> Params:
    """Lower-left corner, width and height of an axis-aligned rectangle inside the initial view."""
    w, h = grid(rng, 60, 300), grid(rng, 40, 160)
    return {"corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)), "w": w, "h": h}


def rectangle_part(q: Params, perturbed: bool) -> Part:
    """The rectangle as one closed polyline; the perturbed one is 10 mm too low."""
    corner, w, h = q["corner"], q["w"], q["h"]
    drawn = h - 10.0 if perturbed else h
    return Part(
        ops=(Poly.rectangle(corner, w, drawn),),
        description=f"a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p(corner)}, as "
        "one closed polyline (a rectangle object)",
        hint=f"The rectangle is {fmt(w)} mm wide.",
        perturbation=f"{fmt(drawn)} high instead of {fmt(h)}",
        title="Rectangle",
    )


# -- stepped profile ------------------------------------------------------------------------------------


def sample_profile(rng: random.Random) -> Params:
    """Origin, base width ``w``, step position ``x`` and the two heights (``low``, ``high``) of a stepped profile."""
    w = grid(rng, 140, 300)
    step_x = grid(rng, 40, w - 40)
    low, high = grid(rng, 20, 60), 0.0
    high = grid(rng, low + 30, 180)
    return {"origin": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - high)), "w": w, "x": step_x, "low": low, "high": high}


def _profile_points(o: Pt, w: float, x: float, low: float, high: float) -> tuple[Pt, ...]:
    ox, oy = o
    return ((ox, oy), (ox + w, oy), (ox + w, oy + low), (ox + x, oy + low), (ox + x, oy + high), (ox, oy + high))


def profile_part(q: Params, perturbed: bool) -> Part:
    """The stepped profile as one closed six-vertex polyline; the perturbed tall step is 10 mm too low."""
    pts = _profile_points(q["origin"], q["w"], q["x"], q["low"], q["high"])
    drawn = _profile_points(q["origin"], q["w"], q["x"], q["low"], q["high"] - 10.0) if perturbed else pts
    return Part(
        ops=(Poly(drawn, closed=True),),
        description="one closed polyline through the points " + ", ".join(p(pt) for pt in pts) + ", back to the start",
        hint=f"The profile is {fmt(q['w'])} mm wide at its base.",
        perturbation=f"the tall step is {fmt(q['high'] - 10.0)} high instead of {fmt(q['high'])}",
        title="Closed stepped polyline profile",
    )


# -- regular polygon ------------------------------------------------------------------------------------


def sample_polygon(rng: random.Random) -> Params:
    """Number of sides (5 to 8), centre and circumradius of a regular polygon."""
    r = grid(rng, 40, 90)
    return {"n": rng.choice((5, 6, 7, 8)), "c": (grid(rng, r + 10, 390 - r), grid(rng, 95, 105)), "r": r}


NAMES = {5: "pentagon", 6: "hexagon", 7: "heptagon", 8: "octagon"}


def polygon_part(q: Params, perturbed: bool) -> Part:
    """The regular polygon as one closed polyline with its first vertex on the +x axis.

    The perturbed variant moves that first vertex 10 mm towards the centre.
    """
    n, c, r = q["n"], q["c"], q["r"]
    vertices = [polar(c, r, 360.0 * i / n) for i in range(n)]
    if perturbed:
        vertices[0] = polar(c, r - 10.0, 0.0)
    first = polar(c, r, 0.0)
    return Part(
        ops=(Poly(tuple(vertices), closed=True),),
        description=f"a regular {NAMES[n]} as one closed polyline, centred at {p(c)} and inscribed in a circle of "
        f"radius {fmt(r)}, with one vertex at {p(first)}",
        hint=f"Its circumscribed circle has a diameter of {diameter(r)} mm.",
        perturbation=f"the vertex at {p(first)} is drawn at {p(polar(c, r - 10.0, 0.0))}",
        title=f"Regular {NAMES[n]}",
    )


# -- triangle and its circumscribed circle -----------------------------------------------------------


def sample_circumcircle(rng: random.Random) -> Params:
    """Corners of a triangle whose angles are all at least 30 degrees.

    Draws again until the circumscribed circle lies in or only just beyond the initial view.
    """
    while True:
        a = (grid(rng, 60, 150), grid(rng, 30, 60))
        b = (grid(rng, a[0] + 60, 300), grid(rng, 30, 60))
        c = (grid(rng, a[0], b[0]), grid(rng, 100, 150))
        (cx, cy), r = circumcircle(a, b, c)
        inside = cx - r >= -15.0 and cx + r <= 430.0 and cy - r >= -15.0 and cy + r <= 215.0  # the initial view
        if _min_angle(a, b, c) >= 30.0 and inside:
            return {"a": a, "b": b, "c": c}


def circumcircle(a: Pt, b: Pt, c: Pt) -> tuple[Pt, float]:
    """Centre and radius of the circle through ``a``, ``b`` and ``c``, rounded to 9 decimals.

    Collinear points have no such circle and raise ``ZeroDivisionError``.
    """
    d = 2 * (a[0] * (b[1] - c[1]) + b[0] * (c[1] - a[1]) + c[0] * (a[1] - b[1]))
    sa, sb, sc = a[0] ** 2 + a[1] ** 2, b[0] ** 2 + b[1] ** 2, c[0] ** 2 + c[1] ** 2
    ux = (sa * (b[1] - c[1]) + sb * (c[1] - a[1]) + sc * (a[1] - b[1])) / d
    uy = (sa * (c[0] - b[0]) + sb * (a[0] - c[0]) + sc * (b[0] - a[0])) / d
    return (round(ux, 9), round(uy, 9)), round(math.hypot(a[0] - ux, a[1] - uy), 9)


def circumcircle_part(q: Params, perturbed: bool) -> Part:
    """Three LINE objects and the circle through the corners.

    The perturbed circle passes through a point 10 mm below the apex instead of the apex.
    """
    a, b, c = q["a"], q["b"], q["c"]
    through = (c[0], c[1] - 10.0) if perturbed else c
    center, r = circumcircle(a, b, through)
    return Part(
        ops=(Line(a, b), Line(b, c), Line(c, a), Circle(center, r)),
        description=f"a triangle of three separate LINE objects with corners at {p(a)}, {p(b)} and {p(c)}, and the "
        "circle that passes through all three corners",
        hint=f"The triangle's lowest side is {fmt(b[0] - a[0])} mm long.",
        perturbation=f"the circle passes through {p(through)} instead of the corner {p(c)}",
        title="Triangle and its circumscribed circle",
    )


# -- plate with four corner holes ----------------------------------------------------------------------


def sample_corner_holes(rng: random.Random) -> Params:
    """Corner and size of a plate, the inset of its four holes from the edges and their diameter ``d``."""
    w, h = grid(rng, 120, 300), grid(rng, 80, 180)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "inset": grid(rng, 15, 30),
        "d": grid(rng, 6, 16, 2),
    }


def corner_holes_part(q: Params, perturbed: bool) -> Part:
    """The plate outline as one closed polyline and a hole near each corner.

    The perturbed variant makes the upper-right hole 2 mm smaller in diameter.
    """
    (x, y), w, h, e, d = q["corner"], q["w"], q["h"], q["inset"], q["d"]
    centres = [(x + e, y + e), (x + w - e, y + e), (x + w - e, y + h - e), (x + e, y + h - e)]
    holes = tuple(Circle(c, (d - 2.0 if perturbed and i == 2 else d) / 2) for i, c in enumerate(centres))
    return Part(
        ops=(Poly.rectangle((x, y), w, h), *holes),
        description=f"a rectangular plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, "
        f"as one closed polyline, with four holes of diameter {fmt(d)}, each {fmt(e)} from the two nearest edges "
        f"(centres " + ", ".join(p(c) for c in centres) + ")",
        hint=f"The plate is {fmt(w)} mm wide.",
        perturbation=f"the hole at {p(centres[2])} has diameter {fmt(d - 2.0)}",
        title="Plate with four corner holes",
    )


# -- plate with a hole grid -------------------------------------------------------------------------------


def sample_hole_grid(rng: random.Random) -> Params:
    """A plate with a grid of 2 to 4 columns and 2 to 3 rows of holes.

    Holds the plate corner, the column and row pitches (``px``, ``py``), the margins from the first and last holes
    to the edges (``mx``, ``my``) and the hole diameter ``d``; the plate size follows from them.
    """
    cols, rows = rng.randint(2, 4), rng.randint(2, 3)
    px, py = grid(rng, 40, 80), grid(rng, 40, 60)
    mx, my = grid(rng, 25, 40), grid(rng, 25, 40)
    w, h = 2 * mx + (cols - 1) * px, 2 * my + (rows - 1) * py
    return {
        "corner": (grid(rng, 0, max(0.0, 390 - w)), grid(rng, 0, max(0.0, 195 - h))),
        "cols": cols,
        "rows": rows,
        "px": px,
        "py": py,
        "mx": mx,
        "my": my,
        "d": grid(rng, 8, 20, 2),
    }


def hole_grid_part(q: Params, perturbed: bool) -> Part:
    """The plate outline and its holes row by row from the bottom; the perturbed variant omits the top-right hole."""
    (x, y), cols, rows, px, py, mx, my, d = (q[k] for k in ("corner", "cols", "rows", "px", "py", "mx", "my", "d"))
    w, h = 2 * mx + (cols - 1) * px, 2 * my + (rows - 1) * py
    xs = [x + mx + i * px for i in range(cols)]
    ys = [y + my + j * py for j in range(rows)]
    centres = [(cx, cy) for cy in ys for cx in xs]
    drawn = centres[:-1] if perturbed else centres
    return Part(
        ops=(Poly.rectangle((x, y), w, h), *(Circle(c, d / 2) for c in drawn)),
        description=f"a plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one closed "
        f"polyline, with {cols * rows} holes of diameter {fmt(d)} in a grid of {cols} columns at x = "
        + ", ".join(fmt(v) for v in xs)
        + f" and {rows} rows at y = "
        + ", ".join(fmt(v) for v in ys),
        hint=f"The plate is {fmt(w)} mm wide.",
        perturbation=f"the hole at {p(centres[-1])} is missing",
        title=f"Plate with a {cols} x {rows} hole pattern",
    )


# -- L bracket --------------------------------------------------------------------------------------------


def sample_bracket(rng: random.Random) -> Params:
    """Origin, leg lengths ``w`` and ``h``, thickness ``t`` and hole diameter ``d`` of an L-shaped bracket."""
    return {
        "origin": (grid(rng, 0, 150), grid(rng, 0, 20)),
        "w": grid(rng, 120, 220),
        "h": grid(rng, 100, 170),
        "t": grid(rng, 15, 30),
        "d": grid(rng, 6, 10, 2),
    }


def bracket_part(q: Params, perturbed: bool) -> Part:
    """The L profile as one closed polyline with two holes in each leg; the perturbed vertical leg is 10 mm short."""
    (ox, oy), w, h, t, d = q["origin"], q["w"], q["h"], q["t"], q["d"]
    hh = h - 10.0 if perturbed else h

    def profile(height: float) -> tuple[Pt, ...]:
        return ((ox, oy), (ox + w, oy), (ox + w, oy + t), (ox + t, oy + t), (ox + t, oy + height), (ox, oy + height))

    holes = [
        (ox + round(w * 0.4), oy + t / 2),
        (ox + w - 25, oy + t / 2),
        (ox + t / 2, oy + round(h * 0.5)),
        (ox + t / 2, oy + h - 20),
    ]
    return Part(
        ops=(Poly(profile(hh)), *(Circle(c, d / 2) for c in holes)),
        description="an L-shaped bracket as one closed polyline through "
        + ", ".join(p(pt) for pt in profile(h))
        + f", with four holes of diameter {fmt(d)} centred at "
        + ", ".join(p(c) for c in holes),
        hint=f"The bracket's horizontal leg is {fmt(w)} mm long.",
        perturbation=f"the vertical leg is {fmt(hh)} high instead of {fmt(h)}",
        title="L-shaped bracket with holes",
    )


# -- gasket ring ------------------------------------------------------------------------------------------


def sample_gasket(rng: random.Random) -> Params:
    """Centre, outside and inside diameters (at least 60 mm apart), bolt-hole count and size of a ring gasket."""
    od = grid(rng, 120, 190, 10)
    idd = grid(rng, 50, od - 60, 10)
    return {
        "c": (grid(rng, 100, 300), grid(rng, 95, 105)),
        "od": od,
        "id": idd,
        "n": rng.choice((4, 5, 6, 8)),
        "hole": grid(rng, 6, 10, 2),
    }


def gasket_part(q: Params, perturbed: bool) -> Part:
    """Outside and inside circles plus bolt holes on the pitch circle halfway between them.

    The perturbed inside diameter is 10 mm too small.
    """
    c, od, idd, n, hole = q["c"], q["od"], q["id"], q["n"], q["hole"]
    pcd = (od + idd) / 2
    inner = idd - 10.0 if perturbed else idd
    holes = bolt_circle(c, pcd / 2, n)
    return Part(
        ops=(Circle(c, od / 2), Circle(c, inner / 2), *(Circle(h, hole / 2) for h in holes)),
        description=f"a flat ring gasket centred at {p(c)}: outside diameter {fmt(od)}, inside diameter {fmt(idd)}, "
        f"and {n} bolt holes of diameter {fmt(hole)} equally spaced on a pitch circle of diameter {fmt(pcd)}, the "
        f"first on the positive x axis at {p(holes[0])}",
        hint=f"The outside diameter is {fmt(od)} mm.",
        perturbation=f"inside diameter {fmt(inner)} instead of {fmt(idd)}",
        title=f"Gasket ring with {n} bolt holes",
    )


# -- flange -----------------------------------------------------------------------------------------------


def sample_flange(rng: random.Random) -> Params:
    """Centre, outside and hub diameters, bolt count, bolt-hole diameter and first bolt angle of a flange face."""
    od = grid(rng, 150, 190, 10)
    return {
        "c": (grid(rng, 100, 300), grid(rng, 95, 105)),
        "od": od,
        "hub": grid(rng, 60, od - 80, 10),
        "n": rng.choice((4, 6, 8)),
        "hole": grid(rng, 8, 14, 2),
        "start": rng.choice((0.0, 22.5, 30.0, 45.0)),
    }


def flange_part(q: Params, perturbed: bool) -> Part:
    """Outside, hub and bore circles (the bore 30 mm under the hub diameter) and the bolt holes.

    The pitch circle lies halfway between outside and hub diameter; the perturbed one is 10 mm smaller in diameter.
    """
    c, od, hub, n, hole, start = q["c"], q["od"], q["hub"], q["n"], q["hole"], q["start"]
    bore = hub - 30.0
    pcd = (od + hub) / 2
    drawn_pcd = pcd - 10.0 if perturbed else pcd
    holes = bolt_circle(c, drawn_pcd / 2, n, start_deg=start)
    return Part(
        ops=(Circle(c, od / 2), Circle(c, hub / 2), Circle(c, bore / 2), *(Circle(h, hole / 2) for h in holes)),
        description=f"the face of a pipe flange centred at {p(c)}: outside diameter {fmt(od)}, hub diameter "
        f"{fmt(hub)} and bore diameter {fmt(bore)} (three concentric circles), plus {n} bolt holes of diameter "
        f"{fmt(hole)} equally spaced on a pitch circle of diameter {fmt(pcd)}, the first at {fmt(start)} degrees "
        "from the positive x axis",
        hint=f"The outside diameter is {fmt(od)} mm.",
        perturbation=f"bolt holes on a pitch circle of diameter {fmt(drawn_pcd)} instead of {fmt(pcd)}",
        title=f"Flange with a {n}-hole bolt circle",
    )


# -- slotted plate ------------------------------------------------------------------------------------------


def sample_slot(rng: random.Random) -> Params:
    """Plate corner and size, slot length between its end centres, slot width and the diameter of the two holes."""
    w, h = grid(rng, 160, 300), grid(rng, 80, 140)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "length": grid(rng, 40, w - 100),
        "width": grid(rng, 12, 24, 2),
        "hole": grid(rng, 8, 12, 2),
    }


def slot_part(q: Params, perturbed: bool) -> Part:
    """The plate outline, a centred obround slot (two lines, two arcs) and a hole 25 mm in from each side.

    The perturbed slot is 4 mm too wide.
    """
    (x, y), w, h, length, width, hole = q["corner"], q["w"], q["h"], q["length"], q["width"], q["hole"]
    cy = y + h / 2
    left, right = (x + w / 2 - length / 2, cy), (x + w / 2 + length / 2, cy)
    r = (width + 4.0 if perturbed else width) / 2
    holes = [(x + 25, cy), (x + w - 25, cy)]
    ops: tuple[Op, ...] = (
        Poly.rectangle((x, y), w, h),
        Line((left[0], cy - r), (right[0], cy - r)),
        Line((left[0], cy + r), (right[0], cy + r)),
        Arc(right, r, 270.0, 90.0),
        Arc(left, r, 90.0, 270.0),
        *(Circle(c, hole / 2) for c in holes),
    )
    return Part(
        ops=ops,
        description=f"a plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one closed "
        f"polyline, with a straight slot of width {fmt(width)} whose semicircular ends are centred at {p(left)} and "
        f"{p(right)}, drawn as two lines and two arcs, and two holes of diameter {fmt(hole)} centred at "
        f"{p(holes[0])} and {p(holes[1])}",
        hint=f"The plate is {fmt(w)} mm wide.",
        perturbation=f"slot width {fmt(2 * r)} instead of {fmt(width)}",
        title="Plate with an obround slot",
    )


# -- chamfered plate -----------------------------------------------------------------------------------------


def sample_chamfer(rng: random.Random) -> Params:
    """Plate corner and size, the 45-degree chamfer length ``c`` and the diameter of the centre hole."""
    w, h = grid(rng, 120, 260), grid(rng, 80, 160)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "c": grid(rng, 10, 25),
        "hole": grid(rng, 20, min(w, h) - 50, 10),
    }


def chamfer_points(x: float, y: float, w: float, h: float, c: float) -> tuple[Pt, ...]:
    """The eight vertices, counter-clockwise from the bottom edge, of a ``w`` x ``h`` plate chamfered by ``c``."""
    return (
        (x + c, y),
        (x + w - c, y),
        (x + w, y + c),
        (x + w, y + h - c),
        (x + w - c, y + h),
        (x + c, y + h),
        (x, y + h - c),
        (x, y + c),
    )


def chamfer_part(q: Params, perturbed: bool) -> Part:
    """The chamfered outline as one closed polyline and the centre hole; the perturbed chamfers are 5 mm shorter."""
    (x, y), w, h, c, hole = q["corner"], q["w"], q["h"], q["c"], q["hole"]
    drawn = c - 5.0 if perturbed else c
    centre = (x + w / 2, y + h / 2)
    return Part(
        ops=(Poly(chamfer_points(x, y, w, h, drawn)), Circle(centre, hole / 2)),
        description=f"a plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))} whose four "
        f"corners are chamfered {fmt(c)} x {fmt(c)} (45 degrees), as one closed polyline with eight vertices, and a "
        f"centre hole of diameter {fmt(hole)} at {p(centre)}",
        hint=f"The plate is {fmt(w)} mm wide.",
        perturbation=f"{fmt(drawn)} x {fmt(drawn)} chamfers instead of {fmt(c)} x {fmt(c)}",
        title="Chamfered plate with a centre hole",
    )


# -- plate with rounded corners ------------------------------------------------------------------------------


def sample_rounded(rng: random.Random) -> Params:
    """Plate corner and size, corner radius ``r`` and the diameter of the four corner holes."""
    w, h = grid(rng, 120, 260), grid(rng, 80, 160)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "r": grid(rng, 10, 20),
        "hole": grid(rng, 6, 10, 2),
    }


def rounded_part(q: Params, perturbed: bool) -> Part:
    """A plate outline of four lines and four corner arcs, with a hole concentric with each arc.

    The perturbed corner radius is 3 mm too small, while the holes keep their places.
    """
    (x, y), w, h, r, hole = q["corner"], q["w"], q["h"], q["r"], q["hole"]
    rr = r - 3.0 if perturbed else r
    lines = (
        Line((x + rr, y), (x + w - rr, y)),
        Line((x + w, y + rr), (x + w, y + h - rr)),
        Line((x + w - rr, y + h), (x + rr, y + h)),
        Line((x, y + h - rr), (x, y + rr)),
    )
    corners = (
        (x + w - rr, y + rr, 270.0, 0.0),
        (x + w - rr, y + h - rr, 0.0, 90.0),
        (x + rr, y + h - rr, 90.0, 180.0),
        (x + rr, y + rr, 180.0, 270.0),
    )
    arcs = tuple(Arc((cx, cy), rr, s, e) for cx, cy, s, e in corners)
    centres = [(x + w - r, y + r), (x + w - r, y + h - r), (x + r, y + h - r), (x + r, y + r)]
    return Part(
        ops=(*lines, *arcs, *(Circle(c, hole / 2) for c in centres)),
        description=f"a plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))} and all four "
        f"corners rounded with radius {fmt(r)}, its outline drawn as four lines and four arcs, with four holes of "
        f"diameter {fmt(hole)} concentric with the corner arcs",
        hint=f"The plate is {fmt(w)} mm wide.",
        perturbation=f"corner radius {fmt(rr)} instead of {fmt(r)}",
        title="Plate with rounded corners and corner holes",
    )
