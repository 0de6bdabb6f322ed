"""Skill *edit*: the template already holds a drawing and the task changes it.

The reference solutions select the entities to change with a click on their outline, erase
them and draw the result; what a model uses (MOVE, COPY, ARRAY, FILLET...) is its own choice,
only the resulting drawing is scored. Scoring is rescaled from the unchanged template's score
(``ScoringSpec.baseline``): doing nothing scores 0, and every untouched entity that is damaged,
moved or left behind costs a multiple of its share, so collateral damage fails the task.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from autocad_bench_evaluator.suite.families.base import Family, Plan
from autocad_bench_evaluator.suite.families.ops import (
    Arc,
    Circle,
    Erase,
    Layer,
    Line,
    Modify,
    Op,
    Poly,
    UseLayer,
    rotate,
)
from autocad_bench_evaluator.suite.families.parts import chamfer_points, grid, p
from autocad_bench_evaluator.suite.generators._shapes import Pt, bolt_circle
from autocad_bench_evaluator.suite.librecad import fmt

EDIT_SCORING: dict[str, Any] = {
    "position": "fixed",
    "weights": {"entities": 0.5, "dimensions": 0.2, "layers": 0.0, "topology": 0.3, "text": 0.0},
    "pass_threshold": 0.95,
    "ignore_layers": ["Defpoints"],
}
KEEP = " Leave everything else in the drawing exactly as it is."


def _plate(
    rng: random.Random, w_range: tuple[float, float] = (200, 320), h_range: tuple[float, float] = (110, 170)
) -> tuple[Pt, float, float]:
    w, h = grid(rng, *w_range, 10), grid(rng, *h_range, 10)
    return (grid(rng, 0, 390 - w), grid(rng, 0, 190 - h)), w, h


# -- erase by criterion ---------------------------------------------------------------------------------


def _sample_erase(rng: random.Random) -> dict[str, Any]:
    corner, w, h = _plate(rng)
    cols, rows = 4, 2
    sizes = [
        rng.choice((6.0, 8.0)) if rng.random() < 0.45 else rng.choice((14.0, 16.0, 20.0)) for _ in range(cols * rows)
    ]
    if all(s < 10 for s in sizes):
        sizes[0] = 16.0
    while sum(s < 10 for s in sizes) < 2:  # the perturbed solution leaves one behind: keep two
        sizes[sizes.index(max(sizes))] = 6.0
    return {"corner": corner, "w": w, "h": h, "sizes": sizes, "limit": 10.0}


def _erase(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, sizes, limit = q["corner"], q["w"], q["h"], q["sizes"], q["limit"]
    xs = [x + w * (i + 1) / 5 for i in range(4)]
    ys = [y + h / 3, y + 2 * h / 3]
    centres = [(cx, cy) for cy in ys for cx in xs]
    template: tuple[Op, ...] = (
        Poly.rectangle((x, y), w, h),
        *(Circle(c, d / 2) for c, d in zip(centres, sizes, strict=True)),
    )
    small = [i + 1 for i, d in enumerate(sizes) if d < limit]
    chosen = small[:-1] if perturbed else small
    return Plan(
        title="Erase the small holes",
        brief=f"The drawing shows a plate with holes. Delete every circle whose diameter is smaller than {fmt(limit)}."
        + KEEP,
        template=template,
        erased=tuple(chosen),
        steps=(Erase(tuple(template[i].pick() for i in chosen)),),
        perturbation="one small hole is left in place",
    )


# -- move, copy ----------------------------------------------------------------------------------------


def _sample_move(rng: random.Random) -> dict[str, Any]:
    corner, w, h = _plate(rng)
    return {
        "corner": corner,
        "w": w,
        "h": h,
        "d": grid(rng, 10, 20, 2),
        "dx": grid(rng, 20, 60) * rng.choice((1, -1)),
        "dy": grid(rng, 10, 30) * rng.choice((1, -1)),
    }


def _holes(x: float, y: float, w: float, h: float) -> list[Pt]:
    return [(x + w / 4, y + h / 2), (x + w / 2, y + h / 2), (x + 3 * w / 4, y + h / 2)]


def _move(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, d, dx, dy = (q[k] for k in ("corner", "w", "h", "d", "dx", "dy"))
    holes = _holes(x, y, w, h)
    template: tuple[Op, ...] = (Poly.rectangle((x, y), w, h), *(Circle(c, d / 2) for c in holes))
    targets = [(c[0] + dx, c[1] + dy) for c in holes[1:]]
    chosen = (1,) if perturbed else (1, 2)  # the perturbed solution forgets the second hole
    moved = Modify(
        tuple(template[1 + i].pick() for i in chosen),
        "move",
        tuple(Circle(targets[i - 1], d / 2) for i in chosen),
        holes[1],
        target=targets[0],
    )
    return Plan(
        title="Move two holes",
        brief=f"Move the two holes centred at {p(holes[1])} and {p(holes[2])} by {fmt(dx)} in x and {fmt(dy)} in y, "
        f"so that their centres end up at {p(targets[0])} and {p(targets[1])}." + KEEP,
        template=template,
        erased=tuple(1 + i for i in chosen),
        steps=(moved,),
        perturbation=f"only the hole at {p(holes[1])} is moved",
    )


def _copy(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, d, dx, dy = (q[k] for k in ("corner", "w", "h", "d", "dx", "dy"))
    source = (x + w / 2, y + h / 2)
    template: tuple[Op, ...] = (Poly.rectangle((x, y), w, h), Circle(source, d / 2))
    targets = [(source[0] - abs(dx), source[1] + dy), (source[0] + abs(dx), source[1] + dy)]
    drawn = targets[:1] if perturbed else targets
    return Plan(
        title="Copy a hole to two places",
        brief=f"Copy the hole centred at {p(source)} twice: one copy centred at {p(targets[0])} and one at "
        f"{p(targets[1])}. Keep the original." + KEEP,
        template=template,
        steps=tuple(Modify((template[1].pick(),), "copy", (Circle(t, d / 2),), source, target=t) for t in drawn),
        perturbation=f"the copy at {p(targets[1])} is missing",
    )


# -- arrays ----------------------------------------------------------------------------------------------


def _sample_polar(rng: random.Random) -> dict[str, Any]:
    od = grid(rng, 140, 190, 10)
    return {
        "c": (grid(rng, 100, 300), grid(rng, 95, 105)),
        "od": od,
        "n": rng.choice((4, 5, 6, 8)),
        "hole": grid(rng, 8, 14, 2),
        "start": rng.choice((0.0, 30.0, 45.0, 90.0)),
    }


def _polar(q: dict[str, Any], perturbed: bool) -> Plan:
    c, od, n, hole, start = q["c"], q["od"], q["n"], q["hole"], q["start"]
    hub = od / 2 - 30
    pcd_r = (od / 2 + hub) / 2
    holes = bolt_circle(c, pcd_r, n, start_deg=start)
    template: tuple[Op, ...] = (Circle(c, od / 2), Circle(c, hub), Circle(holes[0], hole / 2))
    new = holes[1:-1] if perturbed else holes[1:]
    return Plan(
        title="Complete a polar array of bolt holes",
        brief=f"The flange has one bolt hole, centred at {p(holes[0])}. Make it a polar array about the flange centre "
        f"{p(c)}: {n} holes in total (the existing one included), equally spaced over 360 degrees." + KEEP,
        template=template,
        steps=tuple(Circle(h, hole / 2) for h in new),
        perturbation="the last hole of the array is missing",
    )


def _sample_grid(rng: random.Random) -> dict[str, Any]:
    cols, rows = rng.randint(2, 4), rng.randint(2, 3)
    px, py = grid(rng, 40, 70), grid(rng, 35, 55)
    margin = 25.0
    w, h = 2 * margin + (cols - 1) * px, 2 * margin + (rows - 1) * py
    return {
        "corner": (grid(rng, 0, max(0.0, 390 - w)), grid(rng, 0, max(0.0, 190 - h))),
        "cols": cols,
        "rows": rows,
        "px": px,
        "py": py,
        "margin": margin,
        "d": grid(rng, 8, 16, 2),
    }


def _grid(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), cols, rows, px, py, m, d = (q[k] for k in ("corner", "cols", "rows", "px", "py", "margin", "d"))
    w, h = 2 * m + (cols - 1) * px, 2 * m + (rows - 1) * py
    first = (x + m, y + m)
    pitch_x = px - 5.0 if perturbed else px
    centres = [(first[0] + i * pitch_x, first[1] + j * py) for j in range(rows) for i in range(cols)]
    return Plan(
        title="Rectangular array of a hole",
        brief=f"Turn the hole centred at {p(first)} into a rectangular array of {cols} columns and {rows} rows, "
        f"{fmt(px)} apart in x and {fmt(py)} apart in y, growing right and up "
        "(the existing hole is the lower-left one)." + KEEP,
        template=(Poly.rectangle((x, y), w, h), Circle(first, d / 2)),
        steps=tuple(Circle(c, d / 2) for c in centres[1:]),
        perturbation=f"column spacing {fmt(pitch_x)} instead of {fmt(px)}",
    )


# -- mirror, rotate, scale, offset --------------------------------------------------------------------------


def _sample_mirror(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 60, 140), grid(rng, 60, 150)
    return {
        "origin": (grid(rng, 20, 180 - w), grid(rng, 10, 190 - h)),
        "w": w,
        "h": h,
        "step": grid(rng, 20, 40),
        "gap": grid(rng, 0, 20),
    }


def _mirror(q: dict[str, Any], perturbed: bool) -> Plan:
    (ox, oy), w, h, step, gap = q["origin"], q["w"], q["h"], q["step"], q["gap"]
    pts = ((ox, oy), (ox + w, oy), (ox + w, oy + h - step), (ox + w - step, oy + h), (ox, oy + h))
    axis = ox + w + gap
    mirrored = tuple((round(2 * axis - px, 9), py) for px, py in pts)
    axis_line = Line((axis, oy - 10), (axis, oy + h + 10))
    hole = Circle((ox + w / 2, oy + h / 3), 6.0)
    mirrored_hole = Circle((round(2 * axis - hole.center[0], 9), hole.center[1]), 6.0)
    chosen = (Poly(pts),) if perturbed else (Poly(pts), hole)
    result = (Poly(mirrored),) if perturbed else (Poly(mirrored), mirrored_hole)
    picks = tuple(shape.pick() for shape in chosen)
    copies = (Modify(picks, "mirror", result, (axis, oy), axis_end=(axis, oy + h), keep=True),)
    return Plan(
        title="Mirror a profile about an axis",
        brief=f"Mirror the closed profile and the hole inside it about the vertical line x = {fmt(axis)} (the "
        "construction line drawn there), keeping the originals." + KEEP,
        template=(Poly(pts), hole, axis_line),
        steps=copies,
        perturbation="the hole is not mirrored",
    )


def _sample_rotate(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 60, 120), grid(rng, 30, 60)
    return {
        "corner": (grid(rng, 120, 220), grid(rng, 60, 100)),
        "w": w,
        "h": h,
        "angle": rng.choice((30, 45, 60, 90)),
        "marker": (grid(rng, 20, 60), grid(rng, 20, 60)),
    }


def _rotate(q: dict[str, Any], perturbed: bool) -> Plan:
    corner, w, h, angle, marker = q["corner"], q["w"], q["h"], float(q["angle"]), q["marker"]
    rect = Poly.rectangle(corner, w, h)
    turned = Poly(tuple(rotate(pt, corner, angle) for pt in rect.points))
    circle = Circle(marker, 8.0)
    picks = (rect.pick(), circle.pick()) if perturbed else (rect.pick(),)
    turn = Modify((rect.pick(),), "rotate", (turned,), corner, angle=angle)
    return Plan(
        title="Rotate a rectangle about its corner",
        brief=f"Rotate the rectangle whose lower-left corner is at {p(corner)} by {fmt(angle)} degrees "
        "counter-clockwise "
        "about that corner." + KEEP,
        template=(rect, circle),
        erased=(0, 1) if perturbed else (0,),
        steps=(Erase(picks), turned) if perturbed else (turn,),
        perturbation="collateral damage: the circle is erased too",
    )


def _sample_scale(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 40, 80), grid(rng, 30, 60)
    return {
        "corner": (grid(rng, 100, 200), grid(rng, 20, 60)),
        "w": w,
        "h": h,
        "factor": rng.choice((1.5, 2.0)),
        "marker": (grid(rng, 20, 60), grid(rng, 140, 180)),
    }


def _scale(q: dict[str, Any], perturbed: bool) -> Plan:
    corner, w, h, factor, marker = q["corner"], q["w"], q["h"], q["factor"], q["marker"]
    rect, circle = Poly.rectangle(corner, w, h), Circle(marker, 8.0)
    picks = (rect.pick(), circle.pick()) if perturbed else (rect.pick(),)
    return Plan(
        title="Scale a rectangle about its corner",
        brief=f"Scale the rectangle whose lower-left corner is at {p(corner)} by a factor of {fmt(factor)}, with that "
        "corner as the base point." + KEEP,
        template=(rect, circle),
        erased=(0, 1) if perturbed else (0,),
        steps=(Erase(picks), Poly.rectangle(corner, w * factor, h * factor))
        if perturbed
        else (
            Modify((rect.pick(),), "scale", (Poly.rectangle(corner, w * factor, h * factor),), corner, factor=factor),
        ),
        perturbation="collateral damage: the circle is erased too",
    )


def _sample_offset(rng: random.Random) -> dict[str, Any]:
    corner, w, h = _plate(rng, (120, 260), (70, 130))
    x, y = corner
    return {"corner": (max(x, 20.0), max(y, 20.0)), "w": w, "h": h, "d": grid(rng, 5, 15)}


def _offset(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, d = q["corner"], q["w"], q["h"], q["d"]
    wx, wy, ww, wh = x + w / 4, y + h / 4, w / 2, h / 2
    outer = Poly.rectangle((x - d, y - d), w + 2 * d, h + 2 * d)
    inner = Poly.rectangle((wx + d / 2, wy + d / 2), ww - d, wh - d)
    return Plan(
        title="Offset two rectangles",
        brief=f"Offset the outer rectangle (lower-left corner {p((x, y))}) outwards by {fmt(d)}, and the inner window "
        f"(lower-left corner {p((wx, wy))}) inwards by {fmt(d / 2)}. Each result is a new closed rectangle; keep the "
        "originals." + KEEP,
        template=(Poly.rectangle((x, y), w, h), Poly.rectangle((wx, wy), ww, wh)),
        steps=(outer,) if perturbed else (outer, inner),
        perturbation="the inner window is not offset",
    )


# -- fillet, chamfer, extend ---------------------------------------------------------------------------------


def _sample_corners(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 100, 240, 10), grid(rng, 60, 140, 10)
    return {"corner": (grid(rng, 10, 390 - w), grid(rng, 10, 190 - h)), "w": w, "h": h, "r": grid(rng, 10, 25)}


def _fillet(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, r = q["corner"], q["w"], q["h"], q["r"]
    rr = r
    sides = (
        Line((x, y), (x + w, y)),
        Line((x + w, y), (x + w, y + h)),
        Line((x + w, y + h), (x, y + h)),
        Line((x, y + h), (x, y)),
    )
    lines = (
        Line((x + rr, y), (x + w - rr, y)),
        Line((x + w, y + rr), (x + w, y + h - rr)),
        Line((x + w - rr, y + h), (x + rr, y + h)),
        Line((x, y + h - rr), (x, y + rr)),
    )
    arcs = (
        Arc((x + w - rr, y + rr), rr, 270.0, 0.0),
        Arc((x + w - rr, y + h - rr), rr, 0.0, 90.0),
        Arc((x + rr, y + h - rr), rr, 90.0, 180.0),
        Arc((x + rr, y + rr), rr, 180.0, 270.0),
    )
    return Plan(
        title="Fillet the corners of a rectangle",
        brief=f"The rectangle with lower-left corner {p((x, y))} is drawn as four lines. Fillet all four corners with "
        f"radius {fmt(r)}, so the outline becomes four shorter lines and four arcs." + KEEP,
        template=sides,
        erased=(0, 1, 2, 3),
        steps=(Erase(tuple(s.pick() for s in sides)), *lines, *(arcs[:-1] if perturbed else arcs)),
        perturbation="the arc of the lower-left corner is missing",
    )


def _chamfer(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, c = q["corner"], q["w"], q["h"], q["r"]
    rect = Poly.rectangle((x, y), w, h)
    hole = Circle((x + w / 2, y + h / 2), min(w, h) / 5)
    picks = (rect.pick(), hole.pick()) if perturbed else (rect.pick(),)
    return Plan(
        title="Chamfer the corners of a rectangle",
        brief=f"Chamfer all four corners of the rectangle with lower-left corner {p((x, y))} by {fmt(c)} x {fmt(c)} "
        "(45 degrees), keeping it one closed polyline (now with eight vertices)." + KEEP,
        template=(rect, hole),
        erased=(0, 1) if perturbed else (0,),
        steps=(Erase(picks), Poly(chamfer_points(x, y, w, h, c))),
        perturbation="collateral damage: the centre hole is erased too",
    )


def _sample_extend(rng: random.Random) -> dict[str, Any]:
    x0 = grid(rng, 20, 80)
    return {
        "x0": x0,
        "wall": grid(rng, x0 + 150, 360),
        "ys": sorted(rng.sample([40.0, 70.0, 100.0, 130.0, 160.0], 3)),
        "short": grid(rng, 40, 90),
    }


def _extend(q: dict[str, Any], perturbed: bool) -> Plan:
    x0, wall, ys, short = q["x0"], q["wall"], q["ys"], q["short"]
    boundary = Line((wall, 20.0), (wall, 180.0))
    lines = tuple(Line((x0, yy), (x0 + short + 20 * i, yy)) for i, yy in enumerate(ys))
    changed = lines[:-1] if perturbed else lines
    return Plan(
        title="Extend lines to a boundary",
        brief=f"Extend the three horizontal lines that start at x = {fmt(x0)} to the right until they meet "
        "the vertical "
        f"boundary line at x = {fmt(wall)}." + KEEP,
        template=(boundary, *lines),
        erased=tuple(range(1, 1 + len(changed))),
        steps=(Erase(tuple(line.pick() for line in changed)), *(Line(line.a, (wall, line.a[1])) for line in changed)),
        perturbation="the top line is not extended",
    )


# -- change layer ------------------------------------------------------------------------------------------------


def _sample_layer(rng: random.Random) -> dict[str, Any]:
    corner, w, h = _plate(rng, (160, 280), (90, 150))
    return {
        "corner": corner,
        "w": w,
        "h": h,
        "d": grid(rng, 10, 20, 2),
        "name": rng.choice(("HOLES", "BORES", "DRILLING")),
        "colour": rng.choice((1, 3, 5, 6)),
    }


def _change_layer(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, d, name, colour = (q[k] for k in ("corner", "w", "h", "d", "name", "colour"))
    holes = _holes(x, y, w, h)
    circles = tuple(Circle(c, d / 2) for c in holes)
    template: tuple[Op, ...] = (Layer(name, colour), Layer("0"), Poly.rectangle((x, y), w, h), *circles)
    moved = circles[:-1] if perturbed else circles
    kept = circles[-1:] if perturbed else ()
    return Plan(
        title="Move the holes to their layer",
        brief=f"All objects are on layer 0. Put the {len(holes)} circles (holes) on the existing layer {name}; the "
        "plate outline stays on layer 0." + KEEP,
        template=template,
        erased=tuple(3 + i for i in range(len(moved))),
        steps=(Erase(tuple(c.pick() for c in moved)), UseLayer(name, (name,)), *moved),
        perturbation="one hole stays on layer 0" if kept else "",
        scoring={
            "weights": {"entities": 0.4, "dimensions": 0.1, "layers": 0.3, "topology": 0.2, "text": 0.0},
            "required_layers": [name],
        },
    )


def _family(
    family_id: str, plan: Callable[[Any, bool], Plan], sample: Callable[[random.Random], Any], count: int = 6
) -> Family:
    title = plan(sample(random.Random(0)), False).title
    return Family(
        family_id=family_id,
        skill="edit",
        title=title,
        summary=f"{title} (edit an existing drawing).",
        version=1,
        sample=sample,
        plan=plan,
        scoring=EDIT_SCORING,
        default_count=count,
        edit=True,
    )


def families() -> tuple[Family, ...]:
    """The edit families in suite order; every instance is generated, on a template holding the drawing to change."""
    return (
        _family("edit-erase-small", _erase, _sample_erase),
        _family("edit-move", _move, _sample_move),
        _family("edit-copy", _copy, _sample_move),
        _family("edit-polar-array", _polar, _sample_polar),
        _family("edit-rect-array", _grid, _sample_grid),
        _family("edit-mirror", _mirror, _sample_mirror),
        _family("edit-rotate", _rotate, _sample_rotate),
        _family("edit-scale", _scale, _sample_scale),
        _family("edit-offset", _offset, _sample_offset),
        _family("edit-fillet", _fillet, _sample_corners),
        _family("edit-chamfer", _chamfer, _sample_corners),
        _family("edit-extend", _extend, _sample_extend),
        _family("edit-change-layer", _change_layer, _sample_layer),
    )
