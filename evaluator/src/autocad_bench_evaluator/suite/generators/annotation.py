"""Tier "annotation": organisation and annotation (layers, text, dimensions, hatches, blocks)."""

from __future__ import annotations

import math
from typing import Any

from ezdxf.document import Drawing

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.generators._shapes import Pt, polar, rectangle, scr_point
from autocad_bench_evaluator.suite.librecad import COLOR_ACI, LibreCADScript, fmt

BASE_LAYERS = ("0", "Defpoints")
"""The layers every LibreCAD drawing of the suite starts with."""


def layer_row(name: str, layers: tuple[str, ...]) -> int:
    """Row of ``name`` in LibreCAD's Layer List, which sorts names by code point (upper case
    before lower case: "DRILLING" comes before "Defpoints", measured)."""
    return sorted(set(BASE_LAYERS + layers)).index(name)


def _scoring(weights: dict[str, float], **extra: Any) -> dict[str, Any]:
    full = {"entities": 0.0, "dimensions": 0.0, "layers": 0.0, "topology": 0.0, "text": 0.0}
    full.update(weights)
    return {"position": "fixed", "weights": full, "pass_threshold": 0.95, "ignore_layers": ["Defpoints"], **extra}


def _layer_scr(name: str, color: int) -> tuple[str, ...]:
    return ("-LAYER", "_M", name, "_C", str(color), name, "")


def _circle_scr(center: Pt, diameter: float) -> str:
    return f"_.CIRCLE {scr_point(center)} _D {fmt(diameter)}"


# -- layers: outline and holes -----------------------------------------------------------------

PLATE_HOLES: list[Pt] = [(40.0, 45.0), (110.0, 45.0)]


def _layers_gold(doc: Drawing) -> None:
    doc.layers.add("OUTLINE", color=COLOR_ACI["Black / White"])
    doc.layers.add("HOLES", color=COLOR_ACI["Red"])
    msp = doc.modelspace()
    msp.add_lwpolyline(rectangle((0.0, 0.0), 150.0, 90.0), close=True, dxfattribs={"layer": "OUTLINE"})
    for center in PLATE_HOLES:
        msp.add_circle(center, 10.0, dxfattribs={"layer": "HOLES"})


def _layers_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.add_layer("OUTLINE")
    if perturbed:  # everything ends up on OUTLINE; HOLES is never created
        script.rectangle((0.0, 0.0), (150.0, 90.0))
    else:
        script.add_layer("HOLES", "Red")
        script.activate_layer(layer_row("OUTLINE", ("OUTLINE", "HOLES")))
        script.rectangle((0.0, 0.0), (150.0, 90.0))
        script.activate_layer(layer_row("HOLES", ("OUTLINE", "HOLES")))
    for center in PLATE_HOLES:
        script.circle(center, 10.0)


# -- layers: part and centre lines -------------------------------------------------------------

HUB: Pt = (100.0, 100.0)
CENTER_LINES: list[tuple[Pt, Pt]] = [((40.0, 100.0), (160.0, 100.0)), ((100.0, 40.0), (100.0, 160.0))]


def _centerlines_gold(doc: Drawing) -> None:
    doc.layers.add("PART", color=COLOR_ACI["Green"])
    doc.layers.add("CENTER", color=COLOR_ACI["Cyan"])
    msp = doc.modelspace()
    msp.add_circle(HUB, 40.0, dxfattribs={"layer": "PART"})
    msp.add_circle(HUB, 20.0, dxfattribs={"layer": "PART"})
    for a, b in CENTER_LINES:
        msp.add_line(a, b, dxfattribs={"layer": "CENTER"})


def _centerlines_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.add_layer("PART", "Green")
    script.circle(HUB, 40.0)
    script.circle(HUB, 20.0)
    script.add_layer("CENTER", "Cyan")
    for a, b in CENTER_LINES[:1] if perturbed else CENTER_LINES:
        script.lines(a, b)


# -- text in a title box -----------------------------------------------------------------------

TEXTS: list[tuple[str, float, Pt]] = [("BRACKET A-101", 8.0, (15.0, 35.0)), ("SCALE 1:1", 5.0, (15.0, 15.0))]


def _text_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(rectangle((0.0, 0.0), 180.0, 60.0), close=True)
    for content, height, insert in TEXTS:
        msp.add_text(content, height=height).set_placement(insert)


def _text_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle((0.0, 0.0), (180.0, 60.0))
    for content, height, insert in TEXTS[:1] if perturbed else TEXTS:
        script.text(content, height, insert)


def _text_autocad() -> tuple[str, ...]:
    lines = ["_.RECTANG 0,0 180,60"]
    for content, height, insert in TEXTS:
        lines += ["_.TEXT", scr_point(insert), fmt(height), "0", content, ""]  # empty line ends TEXT
    return tuple(lines)


# -- linear dimensions -------------------------------------------------------------------------


def _linear_dim(doc: Drawing, p1: Pt, p2: Pt, location: Pt, vertical: bool) -> None:
    """A horizontal/vertical DIMENSION stored as LibreCAD and AutoCAD store it.

    The definition point lies on the dimension line level with the second extension line.
    """
    base = (p2[0], location[1]) if not vertical else (location[0], p2[1])
    dim = doc.modelspace().add_linear_dim(base=base, p1=p1, p2=p2, angle=90.0 if vertical else 0.0, dimstyle="Standard")
    dim.render()
    dim.dimension.dxf.defpoint = (*base, 0.0)


def _dim_linear_gold(doc: Drawing) -> None:
    doc.modelspace().add_lwpolyline(rectangle((40.0, 40.0), 120.0, 60.0), close=True)
    _linear_dim(doc, (40.0, 40.0), (160.0, 40.0), (100.0, 20.0), vertical=False)
    _linear_dim(doc, (160.0, 40.0), (160.0, 100.0), (180.0, 70.0), vertical=True)


def _dim_linear_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle((40.0, 40.0), (160.0, 100.0))
    script.dim_linear("dh", (40.0, 40.0), (160.0, 40.0), (100.0, 20.0))
    if not perturbed:
        script.dim_linear("dv", (160.0, 40.0), (160.0, 100.0), (180.0, 70.0))


# -- radius and diameter dimensions ------------------------------------------------------------

BIG: tuple[Pt, float] = ((100.0, 100.0), 40.0)
SMALL: tuple[Pt, float] = ((240.0, 100.0), 25.0)


def _dim_radial_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    for center, radius in (BIG, SMALL):
        msp.add_circle(center, radius)
    radius_dim = msp.add_radius_dim(center=BIG[0], radius=BIG[1], angle=45.0, dimstyle="Standard")
    radius_dim.render()
    diameter = msp.add_diameter_dim(center=SMALL[0], radius=SMALL[1], angle=45.0, dimstyle="Standard")
    diameter.render()
    # LibreCAD and AutoCAD keep the point on the picked side as defpoint4, the opposite one as defpoint
    entity = diameter.dimension
    near, far = entity.dxf.defpoint, entity.dxf.defpoint4
    entity.dxf.defpoint, entity.dxf.defpoint4 = far, near


def _dim_radial_solution(script: LibreCADScript, perturbed: bool) -> None:
    for center, radius in (BIG, SMALL):
        script.circle(center, radius)
    script.dim_circle("dimradius", polar(BIG[0], BIG[1], 0.0), polar(BIG[0], BIG[1] + 20.0, 45.0))
    if not perturbed:
        script.dim_circle("dimdiameter", polar(SMALL[0], SMALL[1], 0.0), polar(SMALL[0], SMALL[1] + 20.0, 45.0))


# -- solid hatch -------------------------------------------------------------------------------

HATCHED = rectangle((50.0, 50.0), 100.0, 60.0)


def _hatch_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(HATCHED, close=True)
    msp.add_circle((230.0, 80.0), 15.0)
    hatch = msp.add_hatch(color=256)
    hatch.set_solid_fill(color=256)
    hatch.paths.add_polyline_path(HATCHED, is_closed=True)


def _hatch_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.rectangle(HATCHED[0], HATCHED[2])
    script.circle((230.0, 80.0), 15.0)
    if not perturbed:
        script.hatch_solid((100.0, 50.0))


# -- block and inserts -------------------------------------------------------------------------

BOLTS: list[Pt] = [(40.0, 40.0), (160.0, 40.0), (160.0, 120.0), (40.0, 120.0)]


def _block_gold(doc: Drawing) -> None:
    block = doc.blocks.new("BOLT_M10", base_point=(0.0, 0.0))
    block.add_circle((0.0, 0.0), 5.0)
    block.add_line((-8.0, 0.0), (8.0, 0.0))
    block.add_line((0.0, -8.0), (0.0, 8.0))
    msp = doc.modelspace()
    for at in BOLTS:
        msp.add_blockref("BOLT_M10", at)
    msp.add_lwpolyline(rectangle((0.0, 0.0), 200.0, 160.0), close=True)


def _block_solution(script: LibreCADScript, perturbed: bool) -> None:
    x, y = BOLTS[0]
    script.circle((x, y), 5.0)
    script.lines((x - 8.0, y), (x + 8.0, y))
    script.lines((x, y - 8.0), (x, y + 8.0))
    script.create_block("BOLT_M10", (x, y))  # leaves an insert at the first position
    script.insert_block(0, BOLTS[1:3] if perturbed else BOLTS[1:])
    script.rectangle((0.0, 0.0), (200.0, 160.0))


def _block_autocad() -> tuple[str, ...]:
    x, y = BOLTS[0]
    lines = [
        _circle_scr((x, y), 10.0),
        f"_.LINE {scr_point((x - 8, y))} {scr_point((x + 8, y))} ",
        f"_.LINE {scr_point((x, y - 8))} {scr_point((x, y + 8))} ",
        "-BLOCK",
        "BOLT_M10",
        scr_point((x, y)),
        "_C",
        scr_point((x - 10, y - 10)),
        scr_point((x + 10, y + 10)),
        "",
    ]
    for at in BOLTS:
        lines += ["-INSERT", "BOLT_M10", scr_point(at), "1", "1", "0"]
    lines.append("_.RECTANG 0,0 200,160")
    return tuple(lines)


# -- aligned dimension on a triangle -----------------------------------------------------------

TRIANGLE: list[Pt] = [(40.0, 40.0), (200.0, 40.0), (200.0, 160.0)]
ALIGNED_OFFSET = 15.0


def _aligned_location() -> Pt:
    (x1, y1), (x2, y2) = TRIANGLE[0], TRIANGLE[2]
    length = math.hypot(x2 - x1, y2 - y1)
    nx, ny = -(y2 - y1) / length, (x2 - x1) / length  # left of the direction p1 -> p2
    return ((x1 + x2) / 2 + ALIGNED_OFFSET * nx, (y1 + y2) / 2 + ALIGNED_OFFSET * ny)


def _dim_aligned_gold(doc: Drawing) -> None:
    msp = doc.modelspace()
    msp.add_lwpolyline(TRIANGLE, close=True)
    p1, p2 = TRIANGLE[0], TRIANGLE[2]
    aligned = msp.add_aligned_dim(p1=p1, p2=p2, distance=ALIGNED_OFFSET, dimstyle="Standard")
    aligned.render()
    entity = aligned.dimension
    location = _aligned_location()
    mid = ((p1[0] + p2[0]) / 2, (p1[1] + p2[1]) / 2)
    entity.dxf.dimtype = 33  # aligned (ezdxf writes a rotated linear dimension)
    entity.dxf.defpoint = (p2[0] + location[0] - mid[0], p2[1] + location[1] - mid[1], 0.0)
    _linear_dim(doc, (40.0, 40.0), (200.0, 40.0), (120.0, 20.0), vertical=False)
    _linear_dim(doc, (200.0, 40.0), (200.0, 160.0), (220.0, 100.0), vertical=True)


def _dim_aligned_solution(script: LibreCADScript, perturbed: bool) -> None:
    script.polyline(TRIANGLE, closed=True)
    if not perturbed:
        script.dim_linear("da", TRIANGLE[0], TRIANGLE[2], _aligned_location())
    script.dim_linear("dh", (40.0, 40.0), (200.0, 40.0), (120.0, 20.0))
    script.dim_linear("dv", (200.0, 40.0), (200.0, 160.0), (220.0, 100.0))


DIM_WEIGHTS = {"entities": 0.2, "dimensions": 0.65, "topology": 0.15}

TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition(
        task_id="anno-layers-plate",
        title="Outline and holes on their own layers",
        brief=(
            "Create two layers: OUTLINE with colour 7 (white) and HOLES with colour 1 (red). On layer OUTLINE "
            "draw a rectangle 150 wide and 90 high with its lower-left corner at (0,0), as one closed "
            "polyline. On layer HOLES draw two holes of diameter 20 centred at (40,45) and (110,45)."
        ),
        tier="annotation",
        gold=_layers_gold,
        scoring=_scoring(
            {"entities": 0.35, "dimensions": 0.15, "layers": 0.3, "topology": 0.2},
            required_layers=["OUTLINE", "HOLES"],
        ),
        librecad=_layers_solution,
        perturbation="no HOLES layer: the holes are drawn on OUTLINE",
        autocad=(
            *_layer_scr("OUTLINE", 7),
            *_layer_scr("HOLES", 1),
            "-LAYER",
            "_S",
            "OUTLINE",
            "",
            "_.RECTANG 0,0 150,90",
            "-LAYER",
            "_S",
            "HOLES",
            "",
            *(_circle_scr(c, 20.0) for c in PLATE_HOLES),
        ),
    ),
    TaskDefinition(
        task_id="anno-layer-centerlines",
        title="Part and centre lines on coloured layers",
        brief=(
            "Create layer PART with colour 3 (green) and draw on it two concentric circles centred at "
            "(100,100) with diameters 80 and 40. Then create layer CENTER with colour 4 (cyan) and draw on it "
            "two centre lines: a horizontal line from (40,100) to (160,100) and a vertical line from (100,40) "
            "to (100,160)."
        ),
        tier="annotation",
        gold=_centerlines_gold,
        scoring=_scoring(
            {"entities": 0.35, "dimensions": 0.15, "layers": 0.3, "topology": 0.2},
            required_layers=["PART", "CENTER"],
        ),
        librecad=_centerlines_solution,
        perturbation="the vertical centre line is missing",
        autocad=(
            *_layer_scr("PART", 3),
            _circle_scr(HUB, 80.0),
            _circle_scr(HUB, 40.0),
            *_layer_scr("CENTER", 4),
            *(f"_.LINE {scr_point(a)} {scr_point(b)} " for a, b in CENTER_LINES),
        ),
    ),
    TaskDefinition(
        task_id="anno-text-title",
        title="Title box with two lines of text",
        brief=(
            "Draw a title box: a rectangle 180 wide and 60 high with its lower-left corner at (0,0), as one "
            "closed polyline. Inside it add two single-line texts, left aligned on their baseline: "
            "'BRACKET A-101' with height 8 starting at (15,35) and 'SCALE 1:1' with height 5 starting at "
            "(15,15)."
        ),
        tier="annotation",
        gold=_text_gold,
        scoring=_scoring(
            {"entities": 0.3, "dimensions": 0.1, "topology": 0.1, "text": 0.5},
            required_text=["BRACKET A-101", "SCALE 1:1"],
        ),
        librecad=_text_solution,
        perturbation="the text 'SCALE 1:1' is missing",
        autocad=_text_autocad(),
    ),
    TaskDefinition(
        task_id="anno-dim-linear",
        title="Rectangle with linear dimensions",
        brief=(
            "Draw a rectangle 120 wide and 60 high with its lower-left corner at (40,40), as one closed "
            "polyline. Dimension its width with a horizontal dimension between (40,40) and (160,40) whose "
            "dimension line is at y = 20, and its height with a vertical dimension between (160,40) and "
            "(160,100) whose dimension line is at x = 180."
        ),
        tier="annotation",
        gold=_dim_linear_gold,
        scoring=_scoring(DIM_WEIGHTS),
        librecad=_dim_linear_solution,
        perturbation="the vertical dimension is missing",
        autocad=("_.RECTANG 40,40 160,100", "_.DIMLINEAR 40,40 160,40 100,20", "_.DIMLINEAR 160,40 160,100 180,70"),
    ),
    TaskDefinition(
        task_id="anno-dim-radial",
        title="Radius and diameter dimensions",
        brief=(
            "Draw a circle of diameter 80 centred at (100,100) and a circle of diameter 50 centred at "
            "(240,100). Add a radius dimension to the first circle and a diameter dimension to the second, "
            "both with the dimension leader at 45 degrees (pointing up and to the right)."
        ),
        tier="annotation",
        gold=_dim_radial_gold,
        scoring=_scoring(DIM_WEIGHTS),
        librecad=_dim_radial_solution,
        perturbation="the diameter dimension is missing",
        autocad=(
            _circle_scr(BIG[0], 80.0),
            _circle_scr(SMALL[0], 50.0),
            f"_.DIMRADIUS {scr_point(polar(BIG[0], BIG[1], 0.0))} {scr_point(polar(BIG[0], BIG[1] + 20.0, 45.0))}",
            f"_.DIMDIAMETER {scr_point(polar(SMALL[0], SMALL[1], 0.0))} "
            f"{scr_point(polar(SMALL[0], SMALL[1] + 20.0, 45.0))}",
        ),
    ),
    TaskDefinition(
        task_id="anno-hatch-solid",
        title="Solid hatch inside a rectangle",
        brief=(
            "Draw a rectangle 100 wide and 60 high with its lower-left corner at (50,50), as one closed "
            "polyline, and fill it with a SOLID hatch. Also draw a circle of diameter 30 centred at (230,80) "
            "that is not hatched."
        ),
        tier="annotation",
        gold=_hatch_gold,
        scoring=_scoring({"entities": 0.6, "dimensions": 0.1, "topology": 0.3}),
        librecad=_hatch_solution,
        perturbation="the hatch is missing",
        autocad=(
            "_.RECTANG 50,50 150,110",
            _circle_scr((230.0, 80.0), 30.0),
            "-HATCH",
            "_P",
            "_SOLID",
            "100,80",
            "",
        ),
    ),
    TaskDefinition(
        task_id="anno-block-bolts",
        title="Bolt symbol block inserted four times",
        brief=(
            "Create a block named BOLT_M10 made of a circle of diameter 10 and two centre lines 16 long (one "
            "horizontal, one vertical) crossing at the circle centre, with its base point at the circle "
            "centre. Insert it at (40,40), (160,40), (160,120) and (40,120). Then draw the plate outline: a "
            "rectangle 200 wide and 160 high with its lower-left corner at (0,0), as one closed polyline."
        ),
        tier="annotation",
        gold=_block_gold,
        scoring=_scoring({"entities": 0.5, "dimensions": 0.2, "topology": 0.3}),
        librecad=_block_solution,
        perturbation="the insert at (40,120) is missing",
        autocad=_block_autocad(),
    ),
    TaskDefinition(
        task_id="anno-dim-aligned",
        title="Triangle with aligned and linear dimensions",
        brief=(
            "Draw a right triangle as one closed polyline through (40,40), (200,40) and (200,160). Dimension "
            "the hypotenuse from (40,40) to (200,160) with an aligned dimension 15 away from it on the outer "
            "(upper-left) side, the base with a horizontal dimension whose dimension line is at y = 20, and "
            "the right side with a vertical dimension whose dimension line is at x = 220."
        ),
        tier="annotation",
        gold=_dim_aligned_gold,
        scoring=_scoring(DIM_WEIGHTS),
        librecad=_dim_aligned_solution,
        perturbation="the aligned dimension is missing",
        autocad=(
            "_.PLINE 40,40 200,40 200,160 _C",
            f"_.DIMALIGNED 40,40 200,160 {scr_point(_aligned_location())}",
            "_.DIMLINEAR 40,40 200,40 120,20",
            "_.DIMLINEAR 200,40 200,160 220,100",
        ),
    ),
)
