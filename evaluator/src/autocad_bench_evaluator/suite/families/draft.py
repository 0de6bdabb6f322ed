"""Skill *draft* (new geometry from a written specification) and *reproduce* (from the picture).

Every draft family generalises one of the original tasks (kept as its fixed instance) or
states its sizes relative to other features. A reproduce family draws the same parts, but its
prompt gives only the reference image and one size; position is free (scoring removes the
best translation) and the tolerance is 1 mm, since sizes are read off a picture.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.families import parts
from autocad_bench_evaluator.suite.families.base import Family, Plan
from autocad_bench_evaluator.suite.families.ops import Circle, Poly
from autocad_bench_evaluator.suite.families.parts import Part, grid, p
from autocad_bench_evaluator.suite.generators import composite, primitives
from autocad_bench_evaluator.suite.librecad import fmt

DRAFT_SCORING: dict[str, Any] = {
    "position": "fixed",
    "weights": {"entities": 0.4, "dimensions": 0.25, "layers": 0.0, "topology": 0.35, "text": 0.0},
    "pass_threshold": 0.95,
    "ignore_layers": ["Defpoints"],
}
REPRODUCE_SCORING: dict[str, Any] = {**DRAFT_SCORING, "position": "free", "tolerance": {"geometric": 1.0}}

PartFn = Callable[[dict[str, Any], bool], Part]


def _draft_plan(make: PartFn) -> Callable[[Any, bool], Plan]:
    def plan(params: Any, perturbed: bool) -> Plan:
        part = make(params, perturbed)
        return Plan(
            title=part.title,
            brief=f"Draw {part.description}.",
            steps=part.ops,
            perturbation=part.perturbation,
        )

    return plan


def _reproduce_plan(make: PartFn) -> Callable[[Any, bool], Plan]:
    def plan(params: Any, perturbed: bool) -> Plan:
        part = make(params, perturbed)
        return Plan(
            title=f"Reproduce: {part.title.lower()}",
            brief=(
                "Reproduce the drawing shown in the reference image, at full scale, with the same kinds of objects "
                f"(lines, arcs, circles, closed polylines) as drawn there. {part.hint} Every other size follows "
                "from the image; sizes are whole millimetres, most of them multiples of 5. The position on the "
                "sheet is free."
            ),
            steps=part.ops,
            perturbation=part.perturbation,
        )

    return plan


def _draft(
    family_id: str, make: PartFn, sample: Callable[[random.Random], Any], count: int, *fixed: TaskDefinition
) -> Family:
    title = make(sample(random.Random(0)), False).title
    return Family(
        family_id=family_id,
        skill="draft",
        title=title,
        summary=f"Draw {title.lower()} from absolute coordinates and sizes.",
        version=1,
        sample=sample,
        plan=_draft_plan(make),
        scoring=DRAFT_SCORING,
        default_count=count,
        fixed=fixed,
    )


def _reproduce(family_id: str, make: PartFn, sample: Callable[[random.Random], Any], count: int) -> Family:
    title = make(sample(random.Random(0)), False).title
    return Family(
        family_id=family_id,
        skill="reproduce",
        title=f"Reproduce: {title.lower()}",
        summary=f"Redraw {title.lower()} from the reference image and one size.",
        version=1,
        sample=sample,
        plan=_reproduce_plan(make),
        scoring=REPRODUCE_SCORING,
        default_count=count,
    )


def _legacy(module: Any, task_id: str) -> TaskDefinition:
    found: list[TaskDefinition] = [task for task in module.TASKS if task.task_id == task_id]
    return found[0]


# -- relative specifications -------------------------------------------------------------------------


def _sample_centred_hole(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 100, 260, 10), grid(rng, 60, 160, 20)
    return {"corner": (grid(rng, 0, 390 - w), grid(rng, 0, 195 - h)), "w": w, "h": h, "fraction": rng.choice((2, 4))}


def _centred_hole(params: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, k = params["corner"], params["w"], params["h"], params["fraction"]
    share = {2: "half", 4: "a quarter"}[k]
    d = h / k
    wrong = h / (k + 1) if perturbed else d
    centre = (x + w / 2, y + h / 2)
    return Plan(
        title="Plate with a centred hole sized from the plate",
        brief=(
            f"Draw a plate {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one closed "
            f"polyline. Add one hole at the centre of the plate whose diameter is {share} of the plate's height."
        ),
        steps=(Poly.rectangle((x, y), w, h), Circle(centre, wrong / 2)),
        perturbation=f"hole diameter {fmt(wrong)} instead of {fmt(d)}",
    )


def _sample_stacked(rng: random.Random) -> dict[str, Any]:
    w, h = grid(rng, 100, 240, 20), grid(rng, 40, 80)
    return {"corner": (grid(rng, 0, 390 - w), grid(rng, 0, 40)), "w": w, "h": h, "top": grid(rng, 30, 90)}


def _stacked(params: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), w, h, top = params["corner"], params["w"], params["h"], params["top"]
    shift = 10.0 if perturbed else 0.0
    upper = (x + w / 4 + shift, y + h)
    return Plan(
        title="Block stacked centred on a base",
        brief=(
            f"Draw a base rectangle {fmt(w)} wide and {fmt(h)} high with its lower-left corner at {p((x, y))}. On top "
            f"of it draw a second rectangle half as wide as the base and {fmt(top)} high, standing on the base's top "
            "edge and centred on it. Draw each rectangle as one closed polyline."
        ),
        steps=(Poly.rectangle((x, y), w, h), Poly.rectangle(upper, w / 2, top)),
        perturbation=f"the upper block is {fmt(shift)} mm off centre",
    )


def _sample_hole_row(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(3, 6)
    pitch = grid(rng, 30, 60)
    end = grid(rng, 15, 30)
    w = 2 * end + (n - 1) * pitch
    return {
        "corner": (grid(rng, 0, max(0.0, 390 - w)), grid(rng, 0, 120)),
        "n": n,
        "pitch": pitch,
        "end": end,
        "h": grid(rng, 40, 70, 10),
        "d": grid(rng, 6, 14, 2),
    }


def _hole_row(params: dict[str, Any], perturbed: bool) -> Plan:
    (x, y), n, pitch, end, h, d = (params[k] for k in ("corner", "n", "pitch", "end", "h", "d"))
    w = 2 * end + (n - 1) * pitch
    drawn_pitch = pitch - 5.0 if perturbed else pitch
    holes = tuple(Circle((x + end + i * drawn_pitch, y + h / 2), d / 2) for i in range(n))
    return Plan(
        title="Bar with a row of equally spaced holes",
        brief=(
            f"Draw a bar {fmt(w)} long and {fmt(h)} high with its lower-left corner at {p((x, y))}, as one closed "
            f"polyline. On the bar's horizontal centre line place {n} holes of diameter {fmt(d)}, equally spaced, "
            f"the first and the last {fmt(end)} from the bar's ends."
        ),
        steps=(Poly.rectangle((x, y), w, h), *holes),
        perturbation=f"hole pitch {fmt(drawn_pitch)} instead of {fmt(pitch)}",
    )


def _relative(
    family_id: str, plan: Callable[[Any, bool], Plan], sample: Callable[[random.Random], Any], count: int
) -> Family:
    title = plan(sample(random.Random(0)), False).title
    return Family(
        family_id=family_id,
        skill="draft",
        title=title,
        summary=f"{title}: sizes and positions given relative to other features.",
        version=1,
        sample=sample,
        plan=plan,
        scoring=DRAFT_SCORING,
        default_count=count,
    )


def families() -> tuple[Family, ...]:
    """The draft and reproduce families, in suite order."""
    P, C = primitives, composite
    return (
        _draft("draft-triangle", parts.triangle_part, parts.sample_triangle, 6, _legacy(P, "prim-line-triangle")),
        _draft(
            "draft-concentric", parts.concentric_part, parts.sample_concentric, 6, _legacy(P, "prim-circle-concentric")
        ),
        _draft(
            "draft-semicircle", parts.semicircle_part, parts.sample_semicircle, 6, _legacy(P, "prim-arc-semicircle")
        ),
        _draft("draft-rectangle", parts.rectangle_part, parts.sample_rectangle, 6, _legacy(P, "prim-rectangle")),
        _draft("draft-profile", parts.profile_part, parts.sample_profile, 6, _legacy(P, "prim-polyline-profile")),
        _draft("draft-polygon", parts.polygon_part, parts.sample_polygon, 6, _legacy(P, "prim-hexagon")),
        _draft(
            "draft-circumcircle", parts.circumcircle_part, parts.sample_circumcircle, 6, _legacy(P, "prim-circle-3p")
        ),
        _draft(
            "draft-corner-holes",
            parts.corner_holes_part,
            parts.sample_corner_holes,
            6,
            _legacy(C, "part-plate-four-holes"),
        ),
        _draft("draft-hole-grid", parts.hole_grid_part, parts.sample_hole_grid, 6, _legacy(C, "part-plate-hole-grid")),
        _draft("draft-l-bracket", parts.bracket_part, parts.sample_bracket, 6, _legacy(C, "part-l-bracket")),
        _draft("draft-gasket", parts.gasket_part, parts.sample_gasket, 6, _legacy(C, "part-gasket-ring")),
        _draft("draft-flange", parts.flange_part, parts.sample_flange, 6, _legacy(C, "part-flange-bolt-circle")),
        _draft("draft-slotted-plate", parts.slot_part, parts.sample_slot, 6, _legacy(C, "part-slotted-plate")),
        _draft(
            "draft-chamfered-plate", parts.chamfer_part, parts.sample_chamfer, 6, _legacy(C, "part-chamfered-plate")
        ),
        _draft("draft-rounded-plate", parts.rounded_part, parts.sample_rounded, 6, _legacy(C, "part-rounded-plate")),
        _relative("draft-rel-centred-hole", _centred_hole, _sample_centred_hole, 8),
        _relative("draft-rel-stacked", _stacked, _sample_stacked, 8),
        _relative("draft-rel-hole-row", _hole_row, _sample_hole_row, 8),
        _reproduce("reproduce-corner-holes", parts.corner_holes_part, parts.sample_corner_holes, 8),
        _reproduce("reproduce-hole-grid", parts.hole_grid_part, parts.sample_hole_grid, 8),
        _reproduce("reproduce-l-bracket", parts.bracket_part, parts.sample_bracket, 8),
        _reproduce("reproduce-gasket", parts.gasket_part, parts.sample_gasket, 8),
        _reproduce("reproduce-flange", parts.flange_part, parts.sample_flange, 8),
        _reproduce("reproduce-slotted-plate", parts.slot_part, parts.sample_slot, 8),
        _reproduce("reproduce-profile", parts.profile_part, parts.sample_profile, 8),
    )
