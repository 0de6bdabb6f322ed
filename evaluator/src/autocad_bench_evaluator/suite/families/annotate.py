"""Skill *annotate*: layers with properties, text, linear and radial dimensions, solid hatches, blocks.

Each family generalises one of the original annotation tasks (kept as its fixed instance).
Layer names and colours, texts, sizes and positions vary with the seed; what the prompt
states (layer colour, text content and height, which shape is hatched, dimension placement) is
what the gold holds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.families.base import Family, Plan
from autocad_bench_evaluator.suite.families.ops import (
    COLOR_WORD,
    Circle,
    DimAligned,
    DimLinear,
    DimRadial,
    Layer,
    Line,
    Poly,
    SolidHatch,
    SymbolBlock,
    Text,
    UseLayer,
)
from autocad_bench_evaluator.suite.families.parts import grid, p
from autocad_bench_evaluator.suite.generators import annotation
from autocad_bench_evaluator.suite.librecad import fmt

LAYER_WEIGHTS = {"entities": 0.35, "dimensions": 0.15, "layers": 0.3, "topology": 0.2, "text": 0.0}
TEXT_WEIGHTS = {"entities": 0.3, "dimensions": 0.1, "layers": 0.0, "topology": 0.1, "text": 0.5}
DIM_WEIGHTS = {"entities": 0.2, "dimensions": 0.65, "layers": 0.0, "topology": 0.15, "text": 0.0}
HATCH_WEIGHTS = {"entities": 0.6, "dimensions": 0.1, "layers": 0.0, "topology": 0.3, "text": 0.0}
BASE: dict[str, Any] = {"position": "fixed", "pass_threshold": 0.95, "ignore_layers": ["Defpoints"]}

OUTLINE_NAMES = ("OUTLINE", "CONTOUR", "PART", "BODY", "PROFILE")
FEATURE_NAMES = ("HOLES", "BORES", "DRILLING", "FEATURES", "CUTOUTS")
CENTER_NAMES = ("CENTER", "AXES", "CENTRELINES")
COLOURS = (1, 2, 3, 4, 5, 6)


def _colour(aci: int) -> str:
    return f"colour {aci} ({COLOR_WORD[aci]})"


# -- layers: outline and holes ----------------------------------------------------------------------


def _sample_layers(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 120, 260, 10), grid(rng, 70, 150, 10)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "outline": rng.choice(OUTLINE_NAMES),
        "holes": rng.choice(FEATURE_NAMES),
        "colour": rng.choice(COLOURS),
        "d": grid(rng, 10, 24, 2),
    }


def _layers(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, outline, holes_layer, aci, d = (q[k] for k in ("corner", "w", "h", "outline", "holes", "colour", "d"))
    centres = ((x + w / 4, y + h / 2), (x + 3 * w / 4, y + h / 2))
    names = (outline, holes_layer)
    circles = tuple(Circle(c, d / 2) for c in centres)
    if perturbed:  # one layer only: the holes land on the outline layer
        steps: tuple[Any, ...] = (Layer(outline, 7), Poly.rectangle((x, y), w, h), *circles)
    else:
        steps = (
            Layer(outline, 7),
            Layer(holes_layer, aci),
            UseLayer(outline, names),
            Poly.rectangle((x, y), w, h),
            UseLayer(holes_layer, names),
            *circles,
        )
    return Plan(
        title="Outline and holes on their own layers",
        brief=(
            f"Create two layers: {outline} with colour 7 (white) and {holes_layer} with {_colour(aci)}. On layer "
            f"{outline} draw a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, "
            f"as one closed polyline. On layer {holes_layer} draw two holes of diameter {fmt(d)} centred at "
            f"{p(centres[0])} and {p(centres[1])}."
        ),
        steps=steps,
        perturbation=f"no {holes_layer} layer: the holes are drawn on {outline}",
        scoring={"weights": LAYER_WEIGHTS, "required_layers": [outline, holes_layer]},
    )


# -- layers: part and centre lines ----------------------------------------------------------------


def _sample_centerlines(rng: random.Random) -> dict[str, Any]:
    outer = grid(rng, 30, 70)
    return {
        "c": (grid(rng, 100, 300), grid(rng, 90, 110)),
        "outer": outer,
        "inner": grid(rng, 10, outer - 10),
        "part": rng.choice(OUTLINE_NAMES),
        "center": rng.choice(CENTER_NAMES),
        "colours": tuple(rng.sample(COLOURS, 2)),
        "overhang": grid(rng, 10, 25),
    }


def _centerlines(q: dict[str, Any], perturbed: bool) -> Plan:
    c, outer, inner, part, center, (pc, cc), over = (
        q[k] for k in ("c", "outer", "inner", "part", "center", "colours", "overhang")
    )
    reach = outer + over
    horizontal = Line((c[0] - reach, c[1]), (c[0] + reach, c[1]))
    vertical = Line((c[0], c[1] - reach), (c[0], c[1] + reach))
    lines = (horizontal,) if perturbed else (horizontal, vertical)
    return Plan(
        title="Part and centre lines on coloured layers",
        brief=(
            f"Create layer {part} with {_colour(pc)} and draw on it two concentric circles centred at {p(c)} with "
            f"diameters {fmt(2 * outer)} and {fmt(2 * inner)}. Then create layer {center} with {_colour(cc)} and draw "
            f"on it two centre lines: a horizontal line from {p(horizontal.a)} to {p(horizontal.b)} and a vertical "
            f"line from {p(vertical.a)} to {p(vertical.b)}."
        ),
        steps=(Layer(part, pc), Circle(c, outer), Circle(c, inner), Layer(center, cc), *lines),
        perturbation="the vertical centre line is missing",
        scoring={"weights": LAYER_WEIGHTS, "required_layers": [part, center]},
    )


# -- text in a title box --------------------------------------------------------------------------


PARTS = ("BRACKET", "PLATE", "FLANGE", "COVER", "SHAFT", "HOUSING", "LEVER", "SPACER")


def _sample_text(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 150, 220, 10), grid(rng, 50, 80, 10)
    code = f"{rng.choice(PARTS)} {rng.choice('ABCDEFGH')}-{rng.randint(100, 999)}"
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "title": code,
        "scale": f"SCALE {rng.choice(('1:1', '1:2', '2:1', '1:5'))}",
        "big": rng.choice((6.0, 7.0, 8.0, 10.0)),
        "small": rng.choice((3.5, 4.0, 5.0)),
    }


def _text(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, title, scale, big, small = (q[k] for k in ("corner", "w", "h", "title", "scale", "big", "small"))
    first, second = (x + 15, y + h - 15 - big), (x + 15, y + 12)
    texts = (Text(title, big, first),) if perturbed else (Text(title, big, first), Text(scale, small, second))
    return Plan(
        title="Title box with two lines of text",
        brief=(
            f"Draw a title box: a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, "
            "as one closed polyline. Inside it add two single-line texts, left aligned on their baseline: "
            f"'{title}' with height {fmt(big)} starting at {p(first)} and '{scale}' with height {fmt(small)} starting "
            f"at {p(second)}."
        ),
        steps=(Poly.rectangle((x, y), w, h), *texts),
        perturbation=f"the text '{scale}' is missing",
        scoring={"weights": TEXT_WEIGHTS, "required_text": [title, scale]},
    )


# -- linear dimensions -------------------------------------------------------------------------------


def _sample_dim_linear(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 60, 200, 10), grid(rng, 40, 120, 10)
    return {"corner": (grid(rng, 30, 350 - w), grid(rng, 30, 180 - h)), "w": w, "h": h, "gap": grid(rng, 15, 25)}


def _dim_linear(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, gap = q["corner"], q["w"], q["h"], q["gap"]
    horizontal = DimLinear("dh", (x, y), (x + w, y), (x + w / 2, y - gap))
    vertical = DimLinear("dv", (x + w, y), (x + w, y + h), (x + w + gap, y + h / 2))
    return Plan(
        title="Rectangle with linear dimensions",
        brief=(
            f"Draw a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one "
            f"closed polyline. Dimension its width with a horizontal dimension between {p((x, y))} and "
            f"{p((x + w, y))} whose dimension line is at y = {fmt(y - gap)}, and its height with a vertical dimension "
            f"between {p((x + w, y))} and {p((x + w, y + h))} whose dimension line is at x = {fmt(x + w + gap)}."
        ),
        steps=(Poly.rectangle((x, y), w, h), horizontal)
        if perturbed
        else (Poly.rectangle((x, y), w, h), horizontal, vertical),
        perturbation="the vertical dimension is missing",
        scoring={"weights": DIM_WEIGHTS},
    )


# -- radius and diameter dimensions ----------------------------------------------------------------


def _sample_dim_radial(rng: random.Random) -> dict[str, Any]:
    r1, r2 = grid(rng, 25, 50), grid(rng, 15, 35)
    x1 = grid(rng, 20 + r1, 150)
    return {
        "c1": (x1, grid(rng, 60, 120)),
        "r1": r1,
        "c2": (grid(rng, x1 + r1 + r2 + 50, 370 - r2), grid(rng, 60, 120)),
        "r2": r2,
    }


def _dim_radial(q: dict[str, Any], perturbed: bool) -> Plan:
    c1, r1, c2, r2 = q["c1"], q["r1"], q["c2"], q["r2"]
    dims = (
        (DimRadial("dimradius", c1, r1),)
        if perturbed
        else (DimRadial("dimradius", c1, r1), DimRadial("dimdiameter", c2, r2))
    )
    return Plan(
        title="Radius and diameter dimensions",
        brief=(
            f"Draw a circle of diameter {fmt(2 * r1)} centred at {p(c1)} and a circle of diameter {fmt(2 * r2)} "
            f"centred at {p(c2)}. Add a radius dimension to the first circle and a diameter dimension to the second, "
            "both with the dimension leader at 45 degrees (pointing up and to the right)."
        ),
        steps=(Circle(c1, r1), Circle(c2, r2), *dims),
        perturbation="the diameter dimension is missing",
        scoring={"weights": DIM_WEIGHTS},
    )


# -- solid hatch ---------------------------------------------------------------------------------------


def _sample_hatch(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 60, 140, 10), grid(rng, 40, 100, 10)
    x = grid(rng, 10, 180 - w // 2)
    return {
        "corner": (x, grid(rng, 10, 190 - h)),
        "w": w,
        "h": h,
        "c": (grid(rng, x + w + 50, 360), grid(rng, 40, 160)),
        "r": grid(rng, 10, 25),
    }


def _hatch(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, c, r = q["corner"], q["w"], q["h"], q["c"], q["r"]
    rect = Poly.rectangle((x, y), w, h)
    hatch = SolidHatch(rect.points, edge=(x + w / 2, y), inside=(x + w / 2, y + h / 2))
    return Plan(
        title="Solid hatch inside a rectangle",
        brief=(
            f"Draw a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, "
            "as one closed "
            f"polyline, and fill it with a SOLID hatch. Also draw a circle of diameter {fmt(2 * r)} centred at {p(c)} "
            "that is not hatched."
        ),
        steps=(rect, Circle(c, r)) if perturbed else (rect, Circle(c, r), hatch),
        perturbation="the hatch is missing",
        scoring={"weights": HATCH_WEIGHTS},
    )


# -- symbol block inserted at several points --------------------------------------------------------

BLOCK_NAMES = ("BOLT_M10", "BOLT_M8", "PIN_6", "RIVET_5", "SCREW_M6")


def _sample_block(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 140, 260, 10), grid(rng, 100, 170, 10)
    return {
        "corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)),
        "w": w,
        "h": h,
        "name": rng.choice(BLOCK_NAMES),
        "d": grid(rng, 8, 12, 2),
        "inset": grid(rng, 25, 40),
    }


def _block(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, name, d, e = (q[k] for k in ("corner", "w", "h", "name", "d", "inset"))
    arm = d / 2 + 3
    points = ((x + e, y + e), (x + w - e, y + e), (x + w - e, y + h - e), (x + e, y + h - e))
    used = points[:-1] if perturbed else points
    return Plan(
        title="Symbol block inserted at the corners",
        brief=(
            f"Create a block named {name} made of a circle of diameter {fmt(d)} and two centre lines "
            f"{fmt(2 * arm)} long (one horizontal, one vertical) crossing at the circle centre, with its base point "
            f"at the circle centre. Insert it at " + ", ".join(p(pt) for pt in points) + ". Then draw the plate "
            f"outline: a rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one "
            "closed polyline."
        ),
        steps=(SymbolBlock(name, d / 2, arm, used), Poly.rectangle((x, y), w, h)),
        perturbation=f"the insert at {p(points[-1])} is missing",
        scoring={"weights": {"entities": 0.5, "dimensions": 0.2, "layers": 0.0, "topology": 0.3, "text": 0.0}},
    )


# -- aligned dimension on a right triangle ------------------------------------------------------------


def _sample_aligned(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 100, 220, 10), grid(rng, 60, 140, 10)
    return {"corner": (grid(rng, 30, 360 - w), grid(rng, 30, 190 - h)), "w": w, "h": h, "offset": grid(rng, 10, 20)}


def _aligned(q: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, off = q["corner"], q["w"], q["h"], q["offset"]
    a, b, c = (x, y), (x + w, y), (x + w, y + h)
    length = (w**2 + h**2) ** 0.5
    location = (round((a[0] + c[0]) / 2 - off * h / length, 9), round((a[1] + c[1]) / 2 + off * w / length, 9))
    dims = (
        DimLinear("dh", a, b, (x + w / 2, y - 20)),
        DimLinear("dv", b, c, (x + w + 20, y + h / 2)),
    )
    aligned = () if perturbed else (DimAligned(a, c, location),)
    return Plan(
        title="Triangle with aligned and linear dimensions",
        brief=(
            f"Draw a right triangle as one closed polyline through {p(a)}, {p(b)} and {p(c)}. Dimension the "
            f"hypotenuse from {p(a)} to {p(c)} with an aligned dimension {fmt(off)} away from it on the outer "
            f"(upper-left) side, the base with a horizontal dimension whose dimension line is at y = {fmt(y - 20)}, "
            f"and the right side with a vertical dimension whose dimension line is at x = {fmt(x + w + 20)}."
        ),
        steps=(Poly((a, b, c)), *aligned, *dims),
        perturbation="the aligned dimension is missing",
        scoring={"weights": DIM_WEIGHTS},
    )


def _family(
    family_id: str, legacy: str, plan: Callable[[Any, bool], Plan], sample: Callable[[random.Random], Any], count: int
) -> Family:
    fixed: tuple[TaskDefinition, ...] = tuple(t for t in annotation.TASKS if t.task_id == legacy)
    title = plan(sample(random.Random(0)), False).title
    return Family(
        family_id=family_id,
        skill="annotate",
        title=title,
        summary=f"{title}.",
        version=1,
        sample=sample,
        plan=plan,
        scoring=BASE,
        default_count=count,
        fixed=fixed,
    )


def families() -> tuple[Family, ...]:
    """The annotate families in suite order, each keeping its original annotation task as its fixed instance."""
    return (
        _family("annotate-layers", "anno-layers-plate", _layers, _sample_layers, 6),
        _family("annotate-centerlines", "anno-layer-centerlines", _centerlines, _sample_centerlines, 6),
        _family("annotate-text", "anno-text-title", _text, _sample_text, 6),
        _family("annotate-dim-linear", "anno-dim-linear", _dim_linear, _sample_dim_linear, 6),
        _family("annotate-dim-radial", "anno-dim-radial", _dim_radial, _sample_dim_radial, 6),
        _family("annotate-hatch", "anno-hatch-solid", _hatch, _sample_hatch, 6),
        _family("annotate-block", "anno-block-bolts", _block, _sample_block, 6),
        _family("annotate-dim-aligned", "anno-dim-aligned", _aligned, _sample_aligned, 6),
    )
