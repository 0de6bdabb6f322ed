"""Tier "composite": small parts built from several primitives (plates, brackets, gaskets, flanges)."""

from __future__ import annotations

from ezdxf.document import Drawing

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.generators._shapes import (
    Pt,
    arc_mid,
    bolt_circle,
    polar,
    rectangle,
    scr_point,
    scr_points,
)
from autocad_bench_evaluator.suite.librecad import LibreCADScript, fmt

WEIGHTS = {"entities": 0.4, "dimensions": 0.25, "layers": 0.0, "topology": 0.35, "text": 0.0}
SCORING = {"position": "fixed", "weights": WEIGHTS, "pass_threshold": 0.95, "ignore_layers": ["Defpoints"]}


def _circle_scr(center: Pt, diameter: float) -> str:
    return f"_.CIRCLE {scr_point(center)} _D {fmt(diameter)}"


# -- plate with four corner holes ----------------------------------------------------------------

FOUR_HOLES: list[Pt] = [(20.0, 20.0), (180.0, 20.0), (180.0, 100.0), (20.0, 100.0)]


def _four_holes_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(rectangle((0.0, 0.0), 200.0, 120.0), close=True)
    for center in FOUR_HOLES:
        msp.add_circle(center, 6.0)


def _four_holes_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle((0.0, 0.0), (200.0, 120.0))
    for index, center in enumerate(FOUR_HOLES):
        script.circle(center, 5.0 if perturbed and index == 2 else 6.0)


# -- plate with a 3 x 2 hole grid ----------------------------------------------------------------

GRID: list[Pt] = [(x, y) for y in (45.0, 105.0) for x in (50.0, 120.0, 190.0)]


def _grid_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(rectangle((0.0, 0.0), 240.0, 150.0), close=True)
    for center in GRID:
        msp.add_circle(center, 8.0)


def _grid_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle((0.0, 0.0), (240.0, 150.0))
    for center in GRID[:-1] if perturbed else GRID:
        script.circle(center, 8.0)


# -- L bracket -----------------------------------------------------------------------------------


def l_profile(height: float) -> list[Pt]:
    """Outline of the fixed L bracket (150 long, ``height`` high, legs 20 thick), counter-clockwise from the origin."""
    return [(0.0, 0.0), (150.0, 0.0), (150.0, 20.0), (20.0, 20.0), (20.0, height), (0.0, height)]


BRACKET_HOLES: list[Pt] = [(60.0, 10.0), (120.0, 10.0), (10.0, 60.0), (10.0, 100.0)]


def _bracket_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(l_profile(120.0), close=True)
    for center in BRACKET_HOLES:
        msp.add_circle(center, 4.0)


def _bracket_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.polyline(l_profile(110.0 if perturbed else 120.0), closed=True)
    for center in BRACKET_HOLES:
        script.circle(center, 4.0)


# -- gasket ring ---------------------------------------------------------------------------------

GASKET_CENTER: Pt = (150.0, 110.0)
GASKET_HOLES = bolt_circle(GASKET_CENTER, 65.0, 6)


def _gasket_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_circle(GASKET_CENTER, 80.0)
    msp.add_circle(GASKET_CENTER, 50.0)
    for center in GASKET_HOLES:
        msp.add_circle(center, 5.0)


def _gasket_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.circle(GASKET_CENTER, 80.0)
    script.circle(GASKET_CENTER, 45.0 if perturbed else 50.0)
    for center in GASKET_HOLES:
        script.circle(center, 5.0)


# -- flange with a bolt circle -------------------------------------------------------------------

FLANGE_CENTER: Pt = (200.0, 110.0)


def flange_holes(pcd_radius: float) -> list[Pt]:
    """The fixed flange's eight bolt-hole centres on a circle of radius ``pcd_radius``, the first at 22.5 degrees."""
    return bolt_circle(FLANGE_CENTER, pcd_radius, 8, start_deg=22.5)


def _flange_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    for radius in (100.0, 50.0, 30.0):
        msp.add_circle(FLANGE_CENTER, radius)
    for center in flange_holes(80.0):
        msp.add_circle(center, 7.0)


def _flange_solution(script: LibreCADScript, perturbed: bool) -> None:
    for radius in (100.0, 50.0, 30.0):
        script.circle(FLANGE_CENTER, radius)
    for center in flange_holes(75.0 if perturbed else 80.0):
        script.circle(center, 7.0)


# -- plate with an obround slot ------------------------------------------------------------------

SLOT_LEFT: Pt = (70.0, 50.0)
SLOT_RIGHT: Pt = (130.0, 50.0)
SLOT_PLATE_HOLES: list[Pt] = [(25.0, 50.0), (175.0, 50.0)]


def _slot_entities(r: float) -> tuple[list[tuple[Pt, Pt]], list[tuple[Pt, float, float]]]:
    """The slot's two lines and two arcs (centre, start, end angles) for half-width ``r``."""
    (lx, ly), (rx, ry) = SLOT_LEFT, SLOT_RIGHT
    lines = [((lx, ly - r), (rx, ry - r)), ((lx, ly + r), (rx, ry + r))]
    arcs = [(SLOT_RIGHT, 270.0, 90.0), (SLOT_LEFT, 90.0, 270.0)]
    return lines, arcs


def _slot_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(rectangle((0.0, 0.0), 200.0, 100.0), close=True)
    lines, arcs = _slot_entities(8.0)
    for a, b in lines:
        msp.add_line(a, b)
    for center, start, end in arcs:
        msp.add_arc(center, 8.0, start, end)
    for center in SLOT_PLATE_HOLES:
        msp.add_circle(center, 5.0)


def _slot_solution(script: LibreCADScript, perturbed: bool) -> None:
    r = 10.0 if perturbed else 8.0
    script.rectangle((0.0, 0.0), (200.0, 100.0))
    lines, arcs = _slot_entities(r)
    for a, b in lines:
        script.lines(a, b)
    for center, start, end in arcs:
        script.arc3(polar(center, r, start), arc_mid(center, r, start, end), polar(center, r, end))
    for center in SLOT_PLATE_HOLES:
        script.circle(center, 5.0)


# -- chamfered plate -----------------------------------------------------------------------------


def chamfered(c: float) -> list[Pt]:
    """Vertices of the fixed 160 x 100 plate with every corner chamfered by ``c``, counter-clockwise from the bottom."""
    w, h = 160.0, 100.0
    return [(c, 0.0), (w - c, 0.0), (w, c), (w, h - c), (w - c, h), (c, h), (0.0, h - c), (0.0, c)]


def _chamfer_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(chamfered(15.0), close=True)
    msp.add_circle((80.0, 50.0), 15.0)


def _chamfer_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.polyline(chamfered(10.0 if perturbed else 15.0), closed=True)
    script.circle((80.0, 50.0), 15.0)


# -- plate with rounded corners ------------------------------------------------------------------


def rounded(r: float) -> tuple[list[tuple[Pt, Pt]], list[tuple[Pt, float, float]]]:
    """Lines and corner arcs (centre, start, end) of a 160 x 100 plate with corner radius ``r``."""
    w, h = 160.0, 100.0
    lines = [((r, 0.0), (w - r, 0.0)), ((w, r), (w, h - r)), ((w - r, h), (r, h)), ((0.0, h - r), (0.0, r))]
    arcs = [((w - r, r), 270.0, 0.0), ((w - r, h - r), 0.0, 90.0), ((r, h - r), 90.0, 180.0), ((r, r), 180.0, 270.0)]
    return lines, arcs


def _rounded_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    lines, arcs = rounded(12.0)
    for a, b in lines:
        msp.add_line(a, b)
    for center, start, end in arcs:
        msp.add_arc(center, 12.0, start, end)
        msp.add_circle(center, 4.0)


def _rounded_solution(script: LibreCADScript, perturbed: bool) -> None:
    r = 10.0 if perturbed else 12.0
    lines, arcs = rounded(r)
    for a, b in lines:
        script.lines(a, b)
    for center, start, end in arcs:
        script.arc3(polar(center, r, start), arc_mid(center, r, start, end), polar(center, r, end))
    for center, _start, _end in rounded(12.0)[1]:
        script.circle(center, 4.0)


def _rounded_autocad() -> tuple[str, ...]:
    lines, arcs = rounded(12.0)
    commands = [f"_.LINE {scr_point(a)} {scr_point(b)} " for a, b in lines]
    for center, start, end in arcs:
        start_point, end_point = polar(center, 12.0, start), polar(center, 12.0, end)
        commands.append(f"_.ARC _C {scr_point(center)} {scr_point(start_point)} {scr_point(end_point)}")
    commands += [_circle_scr(center, 8.0) for center, _, _ in arcs]
    return tuple(commands)


TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition(
        task_id="part-plate-four-holes",
        title="Plate with four corner holes",
        brief=(
            "Draw a rectangular plate 200 wide and 120 high with its lower-left corner at (0,0), as one closed "
            "polyline, with four holes of diameter 12, each 20 from the two nearest edges (centres (20,20), "
            "(180,20), (180,100) and (20,100))."
        ),
        tier="composite",
        gold=_four_holes_gold,
        scoring=SCORING,
        librecad=_four_holes_solution,
        perturbation="the hole at (180,100) has diameter 10",
        autocad=("_.RECTANG 0,0 200,120", *(_circle_scr(c, 12.0) for c in FOUR_HOLES)),
    ),
    TaskDefinition(
        task_id="part-plate-hole-grid",
        title="Plate with a 3 x 2 hole pattern",
        brief=(
            "Draw a plate 240 wide and 150 high with its lower-left corner at (0,0), as one closed polyline. "
            "Add six holes of diameter 16 in a grid of three columns at x = 50, 120 and 190 and two rows at "
            "y = 45 and 105."
        ),
        tier="composite",
        gold=_grid_gold,
        scoring=SCORING,
        librecad=_grid_solution,
        perturbation="the hole at (190,105) is missing",
        autocad=("_.RECTANG 0,0 240,150", *(_circle_scr(c, 16.0) for c in GRID)),
    ),
    TaskDefinition(
        task_id="part-l-bracket",
        title="L-shaped bracket with holes",
        brief=(
            "Draw an L-shaped bracket as one closed polyline through (0,0), (150,0), (150,20), (20,20), "
            "(20,120) and (0,120). Add four holes of diameter 8 centred at (60,10), (120,10), (10,60) and "
            "(10,100)."
        ),
        tier="composite",
        gold=_bracket_gold,
        scoring=SCORING,
        librecad=_bracket_solution,
        perturbation="the vertical leg is 110 high instead of 120",
        autocad=(f"_.PLINE {scr_points(l_profile(120.0))} _C", *(_circle_scr(c, 8.0) for c in BRACKET_HOLES)),
    ),
    TaskDefinition(
        task_id="part-gasket-ring",
        title="Gasket ring with six bolt holes",
        brief=(
            "Draw a flat ring gasket centred at (150,110): outside diameter 160, inside diameter 100, and six "
            "bolt holes of diameter 10 equally spaced on a pitch circle of diameter 130, the first on the "
            "positive x axis at (215,110)."
        ),
        tier="composite",
        gold=_gasket_gold,
        scoring=SCORING,
        librecad=_gasket_solution,
        perturbation="inside diameter 90 instead of 100",
        autocad=(
            _circle_scr(GASKET_CENTER, 160.0),
            _circle_scr(GASKET_CENTER, 100.0),
            *(_circle_scr(c, 10.0) for c in GASKET_HOLES),
        ),
    ),
    TaskDefinition(
        task_id="part-flange-bolt-circle",
        title="Flange with an eight-hole bolt circle",
        brief=(
            "Draw the face of a pipe flange centred at (200,110): outside diameter 200, hub diameter 100 and "
            "bore diameter 60 (three concentric circles), plus eight bolt holes of diameter 14 equally spaced "
            "on a pitch circle of diameter 160, the first at 22.5 degrees from the positive x axis."
        ),
        tier="composite",
        gold=_flange_gold,
        scoring=SCORING,
        librecad=_flange_solution,
        perturbation="bolt holes on a pitch circle of diameter 150 instead of 160",
        autocad=(
            *(_circle_scr(FLANGE_CENTER, d) for d in (200.0, 100.0, 60.0)),
            *(_circle_scr(c, 14.0) for c in flange_holes(80.0)),
        ),
    ),
    TaskDefinition(
        task_id="part-slotted-plate",
        title="Plate with an obround slot",
        brief=(
            "Draw a plate 200 wide and 100 high with its lower-left corner at (0,0), as one closed polyline. "
            "Cut a straight slot of width 16 whose semicircular ends are centred at (70,50) and (130,50): draw "
            "it as two lines and two arcs. Add two holes of diameter 10 centred at (25,50) and (175,50)."
        ),
        tier="composite",
        gold=_slot_gold,
        scoring=SCORING,
        librecad=_slot_solution,
        perturbation="slot width 20 instead of 16",
        autocad=(
            "_.RECTANG 0,0 200,100",
            "_.LINE 70,42 130,42 ",
            "_.LINE 70,58 130,58 ",
            "_.ARC _C 130,50 130,42 130,58",
            "_.ARC _C 70,50 70,58 70,42",
            *(_circle_scr(c, 10.0) for c in SLOT_PLATE_HOLES),
        ),
    ),
    TaskDefinition(
        task_id="part-chamfered-plate",
        title="Chamfered plate with a centre hole",
        brief=(
            "Draw a plate 160 wide and 100 high with its lower-left corner at (0,0) whose four corners are "
            "chamfered 15 x 15 (45 degrees), as one closed polyline with eight vertices. Add a centre hole "
            "of diameter 30 at (80,50)."
        ),
        tier="composite",
        gold=_chamfer_gold,
        scoring=SCORING,
        librecad=_chamfer_solution,
        perturbation="10 x 10 chamfers instead of 15 x 15",
        autocad=(f"_.PLINE {scr_points(chamfered(15.0))} _C", _circle_scr((80.0, 50.0), 30.0)),
    ),
    TaskDefinition(
        task_id="part-rounded-plate",
        title="Plate with rounded corners and corner holes",
        brief=(
            "Draw a plate 160 wide and 100 high with its lower-left corner at (0,0) and all four corners "
            "rounded with radius 12: draw the outline as four lines and four arcs. Add four holes of diameter "
            "8 concentric with the corner arcs, at (12,12), (148,12), (148,88) and (12,88)."
        ),
        tier="composite",
        gold=_rounded_gold,
        scoring=SCORING,
        librecad=_rounded_solution,
        perturbation="corner radius 10 instead of 12",
        autocad=_rounded_autocad(),
    ),
)
