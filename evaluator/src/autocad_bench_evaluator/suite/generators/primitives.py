"""Tier "primitives": one kind of object each (lines, circles, arcs, rectangles, polylines, polygons)."""

from __future__ import annotations

from ezdxf.document import Drawing

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.generators._shapes import Pt, polar, rectangle, scr_point, scr_points
from autocad_bench_evaluator.suite.librecad import LibreCADScript

WEIGHTS = {"entities": 0.5, "dimensions": 0.3, "layers": 0.0, "topology": 0.2, "text": 0.0}
SCORING = {"position": "fixed", "weights": WEIGHTS, "pass_threshold": 0.95, "ignore_layers": ["Defpoints"]}

# -- triangle of lines -------------------------------------------------------------------------

TRIANGLE: list[Pt] = [(20.0, 20.0), (180.0, 20.0), (100.0, 140.0)]


def _triangle_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    for a, b in zip(TRIANGLE, [*TRIANGLE[1:], TRIANGLE[0]], strict=True):
        msp.add_line(a, b)


def _triangle_solution(script: LibreCADScript, perturbed: bool) -> None:
    apex = (100.0, 120.0) if perturbed else TRIANGLE[2]
    script.lines(TRIANGLE[0], TRIANGLE[1], apex, TRIANGLE[0])


# -- concentric circles ------------------------------------------------------------------------

RING_CENTER: Pt = (120.0, 100.0)


def _concentric_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_circle(RING_CENTER, 60.0)
    msp.add_circle(RING_CENTER, 35.0)


def _concentric_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.circle(RING_CENTER, 60.0)
    script.circle(RING_CENTER, 30.0 if perturbed else 35.0)


# -- semicircular arc --------------------------------------------------------------------------

ARC_CENTER: Pt = (150.0, 60.0)


def _arc_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_arc(ARC_CENTER, 80.0, 0.0, 180.0)
    msp.add_line((70.0, 60.0), (230.0, 60.0))


def _arc_solution(script: LibreCADScript, perturbed: bool) -> None:
    radius = 70.0 if perturbed else 80.0
    script.arc3(polar(ARC_CENTER, radius, 0), polar(ARC_CENTER, radius, 90), polar(ARC_CENTER, radius, 180))
    script.lines((70.0, 60.0), (230.0, 60.0))


# -- rectangle ---------------------------------------------------------------------------------


def _rectangle_gold(doc: Drawing) -> None:
    doc.modelspace().add_lwpolyline(rectangle((30.0, 40.0), 180.0, 100.0), close=True)


def _rectangle_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle((30.0, 40.0), (210.0, 130.0 if perturbed else 140.0))


# -- stepped polyline profile ------------------------------------------------------------------

PROFILE: list[Pt] = [(20.0, 20.0), (180.0, 20.0), (180.0, 60.0), (130.0, 60.0), (130.0, 110.0), (20.0, 110.0)]


def _profile_gold(doc: Drawing) -> None:
    doc.modelspace().add_lwpolyline(PROFILE, close=True)


def _profile_solution(script: LibreCADScript, perturbed: bool) -> None:
    points = list(PROFILE)
    if perturbed:
        points[4], points[5] = (130.0, 100.0), (20.0, 100.0)
    script.polyline(points, closed=True)


# -- hexagon -----------------------------------------------------------------------------------

HEX_CENTER: Pt = (120.0, 100.0)


def hexagon(radius: float) -> list[Pt]:
    """Vertices of the fixed regular hexagon of circumradius ``radius``, the first on the +x axis."""
    return [polar(HEX_CENTER, radius, 60.0 * i) for i in range(6)]


def _hexagon_gold(doc: Drawing) -> None:
    doc.modelspace().add_lwpolyline(hexagon(50.0), close=True)


def _hexagon_solution(script: LibreCADScript, perturbed: bool) -> None:
    # LibreCAD's polygon tool (poly2) draws six separate lines; AutoCAD's POLYGON draws one
    # closed polyline, which is what the gold holds, so the vertices are typed instead.
    vertices = hexagon(50.0)
    if perturbed:
        vertices[0] = (160.0, 100.0)
    script.polyline(vertices, closed=True)


# -- circle through three points ---------------------------------------------------------------

THREE_POINTS: list[Pt] = [(60.0, 40.0), (140.0, 40.0), (100.0, 120.0)]


def _circle3_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    for a, b in zip(THREE_POINTS, [*THREE_POINTS[1:], THREE_POINTS[0]], strict=True):
        msp.add_line(a, b)
    msp.add_circle((100.0, 70.0), 50.0)


def _circle3_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.lines(*THREE_POINTS, THREE_POINTS[0])
    points = list(THREE_POINTS)
    if perturbed:
        points[2] = (100.0, 110.0)
    script.circle3(*points)


TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition(
        task_id="prim-line-triangle",
        title="Triangle from three lines",
        brief=("Draw a triangle made of three separate LINE objects with corners at (20,20), (180,20) and (100,140)."),
        tier="primitives",
        gold=_triangle_gold,
        scoring=SCORING,
        librecad=_triangle_solution,
        perturbation="apex at (100,120) instead of (100,140)",
        autocad=(f"_.LINE {scr_points(TRIANGLE)} _C",),
    ),
    TaskDefinition(
        task_id="prim-circle-concentric",
        title="Two concentric circles",
        brief="Draw two concentric circles centred at (120,100): one with radius 60 and one with radius 35.",
        tier="primitives",
        gold=_concentric_gold,
        scoring=SCORING,
        librecad=_concentric_solution,
        perturbation="inner radius 30 instead of 35",
        autocad=(f"_.CIRCLE {scr_point(RING_CENTER)} 60", f"_.CIRCLE {scr_point(RING_CENTER)} 35"),
    ),
    TaskDefinition(
        task_id="prim-arc-semicircle",
        title="Semicircular arc closed by its diameter",
        brief=(
            "Draw an arc with centre (150,60) and radius 80 that runs counter-clockwise from 0 degrees to "
            "180 degrees (the upper half of the circle), and close it with a line along its diameter from "
            "(70,60) to (230,60)."
        ),
        tier="primitives",
        gold=_arc_gold,
        scoring=SCORING,
        librecad=_arc_solution,
        perturbation="radius 70 instead of 80",
        autocad=("_.ARC _C 150,60 230,60 70,60", "_.LINE 70,60 230,60 "),
    ),
    TaskDefinition(
        task_id="prim-rectangle",
        title="Rectangle",
        brief=(
            "Draw a rectangle 180 wide and 100 high with its lower-left corner at (30,40), as one closed "
            "polyline (a rectangle object)."
        ),
        tier="primitives",
        gold=_rectangle_gold,
        scoring=SCORING,
        librecad=_rectangle_solution,
        perturbation="90 high instead of 100",
        autocad=("_.RECTANG 30,40 210,140",),
    ),
    TaskDefinition(
        task_id="prim-polyline-profile",
        title="Closed stepped polyline profile",
        brief=(
            "Draw one closed polyline through the points (20,20), (180,20), (180,60), (130,60), (130,110) "
            "and (20,110), back to the start."
        ),
        tier="primitives",
        gold=_profile_gold,
        scoring=SCORING,
        librecad=_profile_solution,
        perturbation="the tall step ends at y=100 instead of y=110",
        autocad=(f"_.PLINE {scr_points(PROFILE)} _C",),
    ),
    TaskDefinition(
        task_id="prim-hexagon",
        title="Regular hexagon",
        brief=(
            "Draw a regular hexagon as one closed polyline, centred at (120,100) and inscribed in a circle "
            "of radius 50, with one vertex at (170,100)."
        ),
        tier="primitives",
        gold=_hexagon_gold,
        scoring=SCORING,
        librecad=_hexagon_solution,
        perturbation="the vertex at (170,100) is typed as (160,100)",
        autocad=("_.POLYGON 6 120,100 _I @50<0",),
    ),
    TaskDefinition(
        task_id="prim-circle-3p",
        title="Triangle and its circumscribed circle",
        brief=(
            "Draw a triangle of three separate LINE objects with corners at (60,40), (140,40) and (100,120), "
            "and the circle that passes through all three corners."
        ),
        tier="primitives",
        gold=_circle3_gold,
        scoring=SCORING,
        librecad=_circle3_solution,
        perturbation="the circle goes through (100,110) instead of the corner (100,120)",
        autocad=(f"_.LINE {scr_points(THREE_POINTS)} _C", f"_.CIRCLE _3P {scr_points(THREE_POINTS)}"),
    ),
)
