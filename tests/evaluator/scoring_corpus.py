"""A corpus of named gold/candidate pairs for the scoring components, and their pinned reports.

Each case changes one thing of a drawing that holds every scoreable kind (segments, arcs,
circles, points, curves, hatches, block references, texts, dimensions of every family, closed
profiles drawn as polylines and as chains of lines, hole patterns of two radii, layer
properties, 3D bodies) by an amount chosen to land inside the tolerance, in the credit falloff
(normalised error between 1 and 1.5) or beyond it, and is scored under the spec variants in
:data:`SPECS`. ``tests/evaluator/data/scoring_components.json`` pins every number of every
report; ``test_scoring_components.py`` compares, and checks a subset of the pinned numbers
against values derived by hand from the documented rules, so the pins are not merely whatever
the code printed once.

Regenerate after an intended scoring change (and review the diff, case by case)::

    uv run python -m tests.evaluator.scoring_corpus --write
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    DimensionEntity,
    DrawingMetadata,
    EllipseEntity,
    Entity,
    Extents3D,
    HatchEntity,
    InsertEntity,
    LayerInfo,
    LineEntity,
    OtherEntity,
    Physical3D,
    PointEntity,
    PolylineEntity,
    SourceInfo,
    SpaceInfo,
    SplineEntity,
    TextEntity,
    extents_of,
)
from autocad_bench_evaluator.scoring import ScoreReport, score_drawing
from autocad_bench_evaluator.spec import ComponentWeights, ScoringSpec, Tolerance

SNAPSHOT = Path(__file__).parent / "data" / "scoring_components.json"
DIFFERENTIAL = Path(__file__).parent / "data" / "scoring_differential.json"
VERSION = "v-corpus"

Mutator = Callable[[list[Entity]], list[Entity]]


# --------------------------------------------------------------------------- the gold drawing


def gold_entities() -> list[Entity]:
    """Every scoreable kind once or more, on named layers."""
    return [
        PolylineEntity(vertices=((0, 0), (100, 0), (100, 50), (0, 50)), closed=True, layer="OUTLINE"),
        *[CircleEntity(center=(20 + 20 * i, 25), radius=4, layer="HOLES") for i in range(4)],
        CircleEntity(center=(10, 10), radius=2.5, layer="HOLES"),
        CircleEntity(center=(90, 10), radius=2.5, layer="HOLES"),
        # an open chain and a closed triangle of LINEs
        LineEntity(start=(0, 60), end=(50, 60), layer="CENTER"),
        LineEntity(start=(50, 60), end=(50, 80), layer="CENTER"),
        LineEntity(start=(120, 0), end=(150, 0)),
        LineEntity(start=(150, 0), end=(135, 25)),
        LineEntity(start=(135, 25), end=(120, 0)),
        ArcEntity(center=(200, 20), radius=10, start_angle=0, end_angle=90, layer="OUTLINE"),
        PolylineEntity(vertices=((160, 40), (180, 40), (190, 50)), bulges=(0.5, 0.0), layer="OUTLINE"),
        EllipseEntity(center=(220, 60), major_axis=(15, 0), ratio=0.5, layer="OUTLINE"),
        EllipseEntity(center=(260, 60), major_axis=(0, 10), ratio=0.4, start_param=0.0, end_param=math.pi,
                      layer="OUTLINE"),
        SplineEntity(points=((0, 100), (10, 110), (20, 100), (30, 110)), control_points=((0, 100), (30, 110)),
                     layer="OUTLINE"),
        SplineEntity(points=((40, 100), (60, 100), (60, 120), (40, 120)), closed=True, layer="OUTLINE"),
        PointEntity(location=(95, 45), layer="MARKS"),
        PointEntity(location=(5, 5), layer="MARKS"),
        TextEntity(content="PLATE A", insert=(5, 42), height=3, layer="TEXT"),
        TextEntity(content="Rev  B", insert=(60, 42), height=2.5, rotation=90, layer="TEXT", source="MTEXT"),
        HatchEntity(pattern="SOLID", solid=True, boundaries=(((120, 40), (140, 40), (140, 60), (120, 60)),),
                    layer="HATCH"),
        HatchEntity(pattern="ANSI31", boundaries=(((150, 40), (170, 40), (160, 60)),), layer="HATCH"),
        InsertEntity(block="BOLT", insert=(150, 80), rotation=30, layer="PARTS",
                     exploded=(CircleEntity(center=(150, 80), radius=1.5, layer="PARTS"),
                               LineEntity(start=(148, 80), end=(152, 80), layer="PARTS"))),
        InsertEntity(block="NUT", insert=(170, 80), scale=(2.0, 2.0, 1.0), layer="PARTS"),
        DimensionEntity(dimtype="linear", measurement=100, defpoints=((100, -10), (0, 0), (100, 0)), layer="DIMS"),
        DimensionEntity(dimtype="aligned", measurement=math.hypot(15, 25),
                        defpoints=((143.574929, 30.144958), (150, 0), (135, 25)), layer="DIMS"),
        DimensionEntity(dimtype="radius", measurement=4, defpoints=((20, 25), (24, 25)), layer="DIMS"),
        DimensionEntity(dimtype="diameter", measurement=5, defpoints=((7.5, 10), (12.5, 10)), layer="DIMS"),
        DimensionEntity(dimtype="angular", measurement=90, defpoints=((200, 20), (210, 20), (200, 30)),
                        layer="DIMS"),
    ]


LAYERS = (
    LayerInfo(name="OUTLINE", color=1),
    LayerInfo(name="HOLES", color=3, linetype="HIDDEN"),
    LayerInfo(name="CENTER", color=5, linetype="CENTER"),
    LayerInfo(name="TEXT", color=2),
    LayerInfo(name="DIMS", color=4),
    LayerInfo(name="HATCH", color=8),
    LayerInfo(name="PARTS", color=6),
    LayerInfo(name="MARKS", color=7),
)


def drawing(entities: list[Entity], *, layers: tuple[LayerInfo, ...] = LAYERS,
            physical: Physical3D | None = None, units: int | None = None) -> DrawingMetadata:
    ents = tuple(entities)
    built = DrawingMetadata(
        schema_version=4 if physical is not None else 3,
        source=SourceInfo(format="dxf", sha256="0" * 64, size=0, units=units),
        layers=layers,
        model=SpaceInfo(name="Model", entities=ents),
        extents=extents_of(ents),
        physical_3d=physical,
    )
    # as the evaluator gets it: parsed from JSON, so no string or number is shared with this
    # code (a comparison by identity, `is "diameter"`, would pass on interned literals)
    return DrawingMetadata.model_validate_json(built.model_dump_json())


# --------------------------------------------------------------------------- perturbations


def _replace(index: int, **update: Any) -> Mutator:
    def mutate(ents: list[Entity]) -> list[Entity]:
        out = list(ents)
        out[index] = out[index].model_copy(update=update)
        return out
    return mutate


def _drop(*indices: int) -> Mutator:
    return lambda ents: [e for i, e in enumerate(ents) if i not in indices]


def _add(*extra: Entity) -> Mutator:
    return lambda ents: [*ents, *extra]


def _shift(dx: float, dy: float) -> Mutator:
    def mutate(ents: list[Entity]) -> list[Entity]:
        return [shift_entity(e, dx, dy) for e in ents]
    return mutate


def shift_entity(e: Any, dx: float, dy: float) -> Any:
    def p(pt: tuple[float, float]) -> tuple[float, float]:
        return (pt[0] + dx, pt[1] + dy)
    update: dict[str, Any] = {}
    for name in ("start", "end", "center", "location", "insert"):
        if hasattr(e, name):
            update[name] = p(getattr(e, name))
    for name in ("vertices", "points", "control_points", "fit_points", "defpoints"):
        if hasattr(e, name):
            update[name] = tuple(p(v) for v in getattr(e, name))
    if isinstance(e, HatchEntity):
        update["boundaries"] = tuple(tuple(p(v) for v in loop) for loop in e.boundaries)
    if isinstance(e, InsertEntity):
        update["exploded"] = tuple(shift_entity(s, dx, dy) for s in e.exploded)
    return e.model_copy(update=update)


def _move(index: int, dx: float, dy: float) -> Mutator:
    def mutate(ents: list[Entity]) -> list[Entity]:
        out = list(ents)
        out[index] = shift_entity(out[index], dx, dy)
        return out
    return mutate


def _then(*steps: Mutator) -> Mutator:
    def mutate(ents: list[Entity]) -> list[Entity]:
        for step in steps:
            ents = step(ents)
        return ents
    return mutate


# indices into gold_entities()
RECT, HOLE0, HOLE3, SMALL0, SMALL1 = 0, 1, 4, 5, 6
OPEN_A, OPEN_B, TRI_A, TRI_B, TRI_C = 7, 8, 9, 10, 11
ARC, BULGE, ELLIPSE, ELLIPSE_ARC, SPLINE, SPLINE_CLOSED = 12, 13, 14, 15, 16, 17
POINT_A, POINT_B, TEXT_A, TEXT_B, HATCH_SOLID, HATCH_PATTERN = 18, 19, 20, 21, 22, 23
BOLT, NUT, DIM_LINEAR, DIM_ALIGNED, DIM_RADIUS, DIM_DIAMETER, DIM_ANGULAR = 24, 25, 26, 27, 28, 29, 30


def _rect_as_lines(ents: list[Entity]) -> list[Entity]:
    p = [(0.0, 0.0), (100.0, 0.0), (100.0, 50.0), (0.0, 50.0)]
    lines: list[Entity] = [LineEntity(start=p[i], end=p[(i + 1) % 4], layer="OUTLINE") for i in range(4)]
    return lines + ents[1:]


def _grid(n: int, step: float, radius: float | None = None, jitter: float = 0.0) -> list[Entity]:
    out: list[Entity] = []
    side = math.isqrt(n - 1) + 1
    for k in range(n):
        x, y = 400 + (k % side) * step + (jitter if k % 7 == 0 else 0.0), (k // side) * step
        out.append(CircleEntity(center=(x, y), radius=radius, layer="GRID") if radius else
                   PointEntity(location=(x, y), layer="GRID"))
    return out


CASES: dict[str, Mutator] = {
    "identical": lambda ents: list(ents),
    "translated": _shift(37.3, -12.1),
    "translated-small": _shift(0.3, 0.2),
    "reversed-lines": _then(_replace(OPEN_A, start=(50, 60), end=(0, 60)),
                            _replace(TRI_B, start=(135, 25), end=(150, 0))),
    "rect-as-four-lines": _rect_as_lines,
    "rect-corner-0.3": _replace(RECT, vertices=((0, 0), (100.3, 0), (100, 50), (0, 50))),
    "rect-corner-0.6": _replace(RECT, vertices=((0, 0), (100.6, 0), (100, 50), (0, 50))),
    "rect-corner-0.9": _replace(RECT, vertices=((0, 0), (100.9, 0), (100, 50), (0, 50))),
    "rect-open": _replace(RECT, closed=False),
    "hole-moved-0.4": _move(HOLE0, 0.4, 0.0),
    "hole-moved-0.6": _move(HOLE0, 0.0, 0.6),
    "hole-moved-0.7": _move(HOLE0, 0.6, 0.35),
    "hole-moved-2": _move(HOLE0, 2.0, 0.0),
    "hole-radius-0.6": _replace(HOLE0, radius=4.6),
    "hole-radius-0.3": _replace(HOLE3, radius=3.7),
    "hole-missing": _drop(HOLE3),
    "two-holes-missing": _drop(HOLE0, SMALL1),
    "hole-extra": _add(CircleEntity(center=(50, 40), radius=4, layer="HOLES")),
    "hole-extra-other-radius": _add(CircleEntity(center=(50, 40), radius=6, layer="HOLES")),
    "hole-extra-radius-8.1": _add(CircleEntity(center=(50, 40), radius=8.1, layer="HOLES")),
    "hole-radii-chain": _then(_replace(HOLE0, radius=4.2), _replace(HOLE3, radius=4.4)),
    "hole-radius-plus-half-tolerance": _replace(HOLE3, radius=4.25),
    "small-hole-radius-between": _replace(SMALL0, radius=2.8),
    "hole-on-wrong-layer": _replace(HOLE0, layer="OUTLINE"),
    # a hole drawn twice, first on the wrong layer: the copy on the right layer is the match
    "hole-twice-wrong-layer-first": lambda ents: [ents[HOLE0].model_copy(update={"layer": "OUTLINE"}), *ents],
    "holes-on-layer-0": lambda ents: [e.model_copy(update={"layer": "0"}) if isinstance(e, CircleEntity) else e
                                      for e in ents],
    "line-end-0.6": _replace(OPEN_B, end=(50, 80.6)),
    "line-end-0.8": _replace(OPEN_B, end=(50.5, 80.6)),
    "line-split": _then(_drop(OPEN_A), _add(LineEntity(start=(0, 60), end=(25, 60), layer="CENTER"),
                                            LineEntity(start=(25, 60), end=(50, 60), layer="CENTER"))),
    "line-zero-length-extra": _add(LineEntity(start=(5, 5), end=(5, 5))),
    "line-zero-length-on-a-new-layer": _add(LineEntity(start=(5, 5), end=(5, 5), layer="JUNK")),
    "triangle-open": _replace(TRI_C, end=(121, 0)),
    "triangle-gap-0.3": _replace(TRI_C, end=(120.3, 0)),
    "triangle-apex-0.6": _then(_replace(TRI_B, end=(135, 25.6)), _replace(TRI_C, start=(135, 25.6))),
    "arc-radius-0.6": _replace(ARC, radius=10.6),
    "arc-end-angle": _replace(ARC, end_angle=93),
    "arc-center-0.55": _move(ARC, 0.55, 0.0),
    "arc-reversed": _replace(ARC, start_angle=90, end_angle=360),
    "arc-zero-radius-extra": _add(ArcEntity(center=(5, 5), radius=0.0, start_angle=0, end_angle=90, layer="OUTLINE")),
    # radius 0.6 off, centre and ends only 0.42 off: the radius alone decides
    "arc-radius-and-centre": _replace(ARC, center=(199.7, 19.7), radius=10.6),
    # through the same end points, its centre 0.6 off along the chord's bisector: the centre decides
    "arc-centre-same-ends": _replace(ARC, center=(200 + 0.6 / math.sqrt(2), 20 + 0.6 / math.sqrt(2)),
                                     radius=math.hypot(10 - 0.6 / math.sqrt(2), 0.6 / math.sqrt(2)),
                                     start_angle=357.463103, end_angle=92.536897),
    "bulge-flipped": _replace(BULGE, bulges=(-0.5, 0.0)),
    "bulge-0.55": _replace(BULGE, bulges=(0.55, 0.0)),
    # the same two segments drawn from the other end: the bulge changes sign, the arc is the same
    "bulge-drawn-backwards": _replace(BULGE, vertices=((190, 50), (180, 40), (160, 40)), bulges=(0.0, -0.5)),
    "ellipse-ratio": _replace(ELLIPSE, ratio=0.53),
    "ellipse-moved-0.6": _move(ELLIPSE, 0.6, 0.0),
    "ellipse-arc-full": _replace(ELLIPSE_ARC, end_param=2 * math.pi),
    "spline-moved-0.6": _move(SPLINE, 0.0, 0.6),
    "spline-far": _move(SPLINE, 0.0, 30.0),
    "spline-closed-opened": _replace(SPLINE_CLOSED, closed=False),
    "point-moved-0.6": _move(POINT_A, 0.6, 0.0),
    "point-moved-1": _move(POINT_B, 0.0, 1.0),
    "point-missing": _drop(POINT_B),
    "text-moved-0.6": _move(TEXT_A, 0.6, 0.0),
    "text-content": _replace(TEXT_A, content="PLATE B"),
    "text-content-far": _replace(TEXT_A, content="XYZ"),
    # nothing in common and misplaced: no pair, so its placement does not count either
    "text-content-far-moved": _then(_replace(TEXT_A, content="XYZ"), _move(TEXT_A, 0.6, 0.0)),
    "text-case-space": _replace(TEXT_A, content="  plate   a "),
    "text-content-prefix": _replace(TEXT_A, content="PLATE"),
    "text-height-0.2": _replace(TEXT_A, height=3.2),
    "text-height-0.4": _replace(TEXT_A, height=3.4),
    "text-rotation-0.6": _replace(TEXT_A, rotation=0.6),
    "text-rotation-wrap": _replace(TEXT_A, rotation=359.8),
    "text-rotation-wrap-0.6": _replace(TEXT_A, rotation=359.4),
    "text-rotation-420": _replace(TEXT_B, rotation=450.3),
    "text-on-wrong-layer": _replace(TEXT_B, layer="DIMS"),
    "text-missing": _drop(TEXT_B),
    "text-empty": _replace(TEXT_B, content="   "),
    "text-extra": _add(TextEntity(content="NOTE", insert=(5, 30), height=2, layer="TEXT")),
    "hatch-pattern": _replace(HATCH_PATTERN, pattern="ANSI32"),
    "hatch-pattern-sorting-first": _replace(HATCH_PATTERN, pattern="ANSI21"),
    "hatch-solid-as-pattern": _replace(HATCH_SOLID, pattern="solid", solid=False),
    "hatch-area": _replace(HATCH_SOLID, boundaries=(((120, 40), (140.6, 40), (140.6, 60), (120, 60)),)),
    "hatch-moved-0.6": _move(HATCH_PATTERN, 0.6, 0.0),
    # area 450 for 400, same centroid: the area alone decides (error 50 / (0.5 * 20 * 4))
    # the triangle hatch scaled 1.085 about its centroid: area 235.4 for 200 (error 1.25)
    "hatch-triangle-scaled": _replace(HATCH_PATTERN, boundaries=(tuple(
        (160 + 1.085 * (x - 160), 140 / 3 + 1.085 * (y - 140 / 3)) for x, y in ((150, 40), (170, 40), (160, 60))),)),
    "hatch-area-centred": _replace(HATCH_SOLID, boundaries=(((119.393398, 39.393398), (140.606602, 39.393398),
                                                             (140.606602, 60.606602), (119.393398, 60.606602)),)),
    "hatch-no-area": _replace(HATCH_SOLID, boundaries=(((120, 40), (140, 40)),)),
    "hatch-no-boundary": _replace(HATCH_SOLID, boundaries=()),
    "hatch-two-loops": _replace(HATCH_SOLID, boundaries=(((120, 40), (140, 40), (140, 60), (120, 60)),
                                                         ((125, 45), (130, 45), (130, 50)))),
    "insert-scale-0.0008": _replace(BOLT, scale=(1.0008, 1.0, 1.0)),
    "insert-scale-0.0012": _replace(BOLT, scale=(1.0, 1.0012, 1.0)),
    "insert-scale-x-0.0012": _replace(BOLT, scale=(1.0012, 1.0, 1.0)),
    "insert-rotation-0.6": _replace(BOLT, rotation=30.6),
    "insert-rotation-wrap": _replace(BOLT, rotation=390.2),
    "insert-rotation-wrap-0.6": _replace(BOLT, rotation=389.4),
    "insert-rotation-over-wrap-0.6": _replace(BOLT, rotation=390.6),
    # NUT stands at 0 degrees: 359.4 is 0.6 off across zero
    "insert-rotation-across-zero": _replace(NUT, rotation=359.4),
    "insert-block-name": _replace(NUT, block="WASHER"),
    "insert-block-name-sorting-first": _replace(NUT, block="ANCHOR"),
    "insert-block-case": _replace(NUT, block="nut"),
    "insert-moved-0.6": _move(NUT, 0.6, 0.0),
    "insert-exploded-missing": _replace(BOLT, exploded=()),
    "dim-linear-0.6": _replace(DIM_LINEAR, measurement=100.6),
    "dim-linear-0.3": _replace(DIM_LINEAR, measurement=99.7),
    "dim-line-offset-0.6": _replace(DIM_LINEAR, defpoints=((100, -10.6), (0, 0), (100, 0))),
    "dim-line-along-itself": _replace(DIM_LINEAR, defpoints=((103, -10), (0, 0), (100, 0))),
    "dim-line-offset-3": _replace(DIM_LINEAR, defpoints=((100, -13), (0, 0), (100, 0))),
    "dim-measured-elsewhere": _replace(DIM_LINEAR, defpoints=((100, 40), (0, 50), (100, 50))),
    "dim-aligned-0.7": _replace(DIM_ALIGNED, measurement=math.hypot(15, 25) + 0.7),
    "dim-radius-as-diameter": _replace(DIM_RADIUS, dimtype="diameter", measurement=8),
    "dim-radius-wrong": _replace(DIM_RADIUS, measurement=4.3),
    "dim-diameter-0.6": _replace(DIM_DIAMETER, measurement=5.6),
    "dim-angular-0.3": _replace(DIM_ANGULAR, measurement=90.3),
    "dim-angular-0.6": _replace(DIM_ANGULAR, measurement=90.6),
    "dim-angular3p": _replace(DIM_ANGULAR, dimtype="angular3p"),
    "dim-linear-as-angle": _replace(DIM_LINEAR, dimtype="angular"),
    "dim-angular-as-linear": _replace(DIM_ANGULAR, dimtype="linear"),
    "dim-ordinate": _replace(DIM_LINEAR, dimtype="ordinate"),
    "dim-no-measurement": _replace(DIM_DIAMETER, measurement=None),
    "dim-no-defpoints": _replace(DIM_DIAMETER, defpoints=()),
    "dim-linear-two-defpoints": _replace(DIM_LINEAR, defpoints=((100, -10), (0, 0))),
    # the radius dimension's centre point 2 off, its measured point where it was
    "dim-radius-centre-moved": _replace(DIM_RADIUS, defpoints=((22, 25), (24, 25))),
    # the aligned dimension's line 0.6 off along its own normal (8.574929, 5.144958) / 10
    "dim-aligned-line-offset-0.6": _replace(DIM_ALIGNED, defpoints=((143.574929 + 0.6 * 0.8574929,
                                                                     30.144958 + 0.6 * 0.5144958),
                                                                    (150, 0), (135, 25))),
    "dim-aligned-as-linear": _replace(DIM_ALIGNED, dimtype="linear"),
    "dim-missing": _drop(DIM_ALIGNED),
    "dim-extra": _add(DimensionEntity(dimtype="linear", measurement=50, defpoints=((110, 50), (100, 0), (100, 50)),
                                      layer="DIMS")),
    "dims-all-missing": _drop(DIM_LINEAR, DIM_ALIGNED, DIM_RADIUS, DIM_DIAMETER, DIM_ANGULAR),
    "dim-on-wrong-layer": _replace(DIM_RADIUS, layer="HOLES"),
    "everything-on-layer-0": lambda ents: [e.model_copy(update={"layer": "0"}) for e in ents],
    "half-the-drawing": lambda ents: ents[::2],
    "empty": lambda ents: [],
    "only-texts": lambda ents: [e for e in ents if isinstance(e, TextEntity)],
    "duplicated": lambda ents: [*ents, *ents],
    # closed outlines made of separate objects, and of polylines that close themselves
    "slot-of-lines-and-arcs": _add(LineEntity(start=(300, 0), end=(320, 0), layer="OUTLINE"),
                                   ArcEntity(center=(320, 5), radius=5, start_angle=270, end_angle=90, layer="OUTLINE"),
                                   LineEntity(start=(320, 10), end=(300, 10), layer="OUTLINE"),
                                   ArcEntity(center=(300, 5), radius=5, start_angle=90, end_angle=270,
                                             layer="OUTLINE")),
    "bulged-polyline-closed-by-a-line": _add(PolylineEntity(vertices=((300, 30), (320, 30)), bulges=(1.0,),
                                                            layer="OUTLINE"),
                                             LineEntity(start=(320, 30), end=(300, 30), layer="OUTLINE")),
    "polyline-circle-of-two-vertices": _add(PolylineEntity(vertices=((300, 60), (310, 60)), bulges=(1.0, 1.0),
                                                           closed=True, layer="OUTLINE")),
    "polyline-repeated-vertex-with-bulge": _add(PolylineEntity(vertices=((300, 80), (300, 80), (310, 80)),
                                                               bulges=(0.5, 0.0), layer="OUTLINE")),
    # degenerate objects a careless writer leaves behind: they are not drawn items
    "zero-radius-circle-extra": _add(CircleEntity(center=(50, 40), radius=0.0, layer="HOLES")),
    "one-point-spline-extra": _add(SplineEntity(points=((60, 110),), layer="OUTLINE")),
    "ghost-layer-past-256-items": _then(_add(*_grid(300, 3.0)),
                                        _add(LineEntity(start=(5, 5), end=(5, 5), layer="GHOST"))),
    # a full ellipse whose parameters start elsewhere (or do not advance), and a short elliptical arc
    "ellipse-full-from-1-rad": _replace(ELLIPSE, start_param=1.0, end_param=1.0 + 2 * math.pi),
    "ellipse-full-zero-sweep": _replace(ELLIPSE, start_param=1.0, end_param=1.0),
    "elliptical-arc-half-radian-extra": _add(EllipseEntity(center=(300, 100), major_axis=(10, 0), ratio=0.5,
                                                           start_param=0.0, end_param=0.5, layer="OUTLINE")),
    # hatches: of area under one, loops without area, an empty loop, a pattern sorting after "solid"
    "hatch-area-half": _replace(HATCH_PATTERN, boundaries=(((160, 46), (161, 46), (160.5, 47)),)),
    "hatch-two-flat-loops": _replace(HATCH_SOLID, boundaries=(((120, 40), (140, 40)), ((125, 45), (130, 45)))),
    "hatch-first-loop-empty": _replace(HATCH_SOLID, boundaries=((), ((120, 40), (140, 40)))),
    "hatch-last-loop-empty": _replace(HATCH_SOLID, boundaries=(((120, 40), (140, 40)), ())),
    "hatch-pattern-zigzag": _replace(HATCH_SOLID, solid=False, pattern="ZIGZAG"),
    # dimensions: a radius dimension's first point moved across, a vertical one at x = 0, a
    # linear one whose line passes through its own second point
    "dim-radius-first-point-moved-up": _replace(DIM_RADIUS, defpoints=((20, 27), (24, 25))),
    "dim-of-unknown-type": _replace(DIM_LINEAR, dimtype="unknown"),
    "dim-vertical-at-x0-extra": _add(DimensionEntity(dimtype="linear", measurement=50,
                                                     defpoints=((-10, 50), (0, 0), (0, 50)), layer="DIMS")),
    "dim-line-through-its-point-extra": _add(DimensionEntity(dimtype="linear", measurement=30,
                                                             defpoints=((230, 0), (200, 0), (230, 0)), layer="DIMS")),
    "hole-grid-70": _add(*_grid(70, 10.0, radius=1.0)),
    "point-grid-600": _add(*_grid(600, 3.0)),
}

def _layers(name: str, **change: Any) -> tuple[LayerInfo, ...]:
    return tuple(layer.model_copy(update=change) if layer.name == name else layer for layer in LAYERS)


# Cases that change the layer table or the declared units instead of the entities:
# (candidate layer table, gold $INSUNITS, candidate $INSUNITS).
LAYER_CASES: dict[str, tuple[tuple[LayerInfo, ...], int | None, int | None]] = {
    "layer-colour": (_layers("HOLES", color=9), None, None),
    "layer-colour-negative": (tuple(layer.model_copy(update={"color": -layer.color}) for layer in LAYERS), None, None),
    "layer-linetype": (_layers("CENTER", linetype="DASHED"), None, None),
    "layer-holes-off": (_layers("HOLES", on=False), None, None),
    "layer-text-frozen": (_layers("TEXT", frozen=True), None, None),
    "layer-table-missing": ((), None, None),
    "units-mismatch": (LAYERS, 4, 1),
    "units-one-side": (LAYERS, None, 4),
}


# --------------------------------------------------------------------------- 3D bodies

BOX = Physical3D(status="measured", extents=Extents3D(min=(0, 0, 0), max=(40, 20, 10)), volume=7200.0,
                 area=2800.0, centroid=(19.0, 10.0, 5.0), bodies=1, sources=("3DSOLID",))

PHYSICAL_CASES: dict[str, Physical3D] = {
    "solid-identical": BOX,
    "solid-size-0.3": BOX.model_copy(update={"extents": Extents3D(min=(0, 0, 0), max=(40.3, 20, 10))}),
    "solid-size-0.6": BOX.model_copy(update={"extents": Extents3D(min=(0, 0, 0), max=(40, 20.6, 10))}),
    "solid-size-all": BOX.model_copy(update={"extents": Extents3D(min=(0, 0, 0), max=(40.6, 20.7, 9.4))}),
    "solid-moved-0.6": BOX.model_copy(update={"extents": Extents3D(min=(0.6, 0, 0), max=(40.6, 20, 10)),
                                              "centroid": (19.6, 10.0, 5.0)}),
    "solid-volume": BOX.model_copy(update={"volume": 7200.0 + 1.2 * 0.5 * 1400}),
    "solid-volume-far": BOX.model_copy(update={"volume": 9000.0}),
    "solid-volume-open": BOX.model_copy(update={"volume": None}),
    "solid-area": BOX.model_copy(update={"area": 2800.0 + 0.5 * 4 * 70 * 1.25}),
    "solid-area-missing": BOX.model_copy(update={"area": None}),
    "solid-centroid": BOX.model_copy(update={"centroid": (19.36, 10.48, 5.0)}),
    "solid-centroid-mirrored": BOX.model_copy(update={"centroid": (21.0, 10.0, 5.0)}),
    "solid-two-bodies": BOX.model_copy(update={"bodies": 2}),
    "solid-mesh-stand-in": BOX.model_copy(update={"sources": ("MESH",)}),
    "solid-body-too": BOX.model_copy(update={"sources": ("3DSOLID", "BODY")}),
    "solid-centroid-missing": BOX.model_copy(update={"centroid": None}),
    "solid-none": Physical3D(status="none"),
    "solid-unknown": BOX.model_copy(update={"status": "unknown", "reason": "an ACIS body could not be measured"}),
    "solid-no-extents": BOX.model_copy(update={"extents": None}),
}
GOLD_NONE_CASES: dict[str, Physical3D] = {
    "gold-none-candidate-none": Physical3D(status="none"),
    "gold-none-candidate-box": BOX,
    "gold-none-candidate-unknown": BOX.model_copy(update={"status": "unknown"}),
}
# Other golds: (gold body, candidate body).
OTHER_GOLDS: dict[str, tuple[Physical3D, Physical3D]] = {
    "gold-unknown": (BOX.model_copy(update={"status": "unknown"}), BOX),
    "solid-fewer-bodies": (BOX.model_copy(update={"bodies": 2}), BOX),
    "many-bodies": (BOX.model_copy(update={"bodies": 300}), BOX.model_copy(update={"bodies": 300})),
    "gold-all-solid-kinds": (BOX.model_copy(update={"sources": ("3DSOLID", "BODY", "REGION", "SURFACE")}),
                             BOX.model_copy(update={"sources": ("MESH",)})),
    "solid-unknown-long-reason": (BOX, BOX.model_copy(update={"status": "unknown", "reason": "x" * 400})),
    "gold-region-no-volume": (BOX.model_copy(update={"volume": 0.0, "sources": ("REGION",)}),
                              BOX.model_copy(update={"volume": 0.0, "sources": ("REGION",)})),
    "tiny-body": (Physical3D(status="measured", extents=Extents3D(min=(0, 0, 0), max=(0.01, 0.01, 0.01)),
                             volume=1e-6, area=6e-4, centroid=(0.005, 0.005, 0.005), bodies=1, sources=("3DSOLID",)),
                  Physical3D(status="measured", extents=Extents3D(min=(0, 0, 0), max=(0.01, 0.01, 0.01)),
                             volume=0.150001, area=0.3006, centroid=(0.005, 0.005, 0.005), bodies=1,
                             sources=("3DSOLID",))),
    # area 0.075 off: error 1.2 of the floor tolerance^2 at tolerance 0.25
    "tiny-body-area": (Physical3D(status="measured", extents=Extents3D(min=(0, 0, 0), max=(0.01, 0.01, 0.01)),
                                  volume=1e-6, area=6e-4, centroid=(0.005, 0.005, 0.005), bodies=1,
                                  sources=("3DSOLID",)),
                       Physical3D(status="measured", extents=Extents3D(min=(0, 0, 0), max=(0.01, 0.01, 0.01)),
                                  volume=1e-6, area=0.0756, centroid=(0.005, 0.005, 0.005), bodies=1,
                                  sources=("3DSOLID",))),
}
MESH_GOLD = BOX.model_copy(update={"sources": ("MESH",)})
SURFACE_GOLD = BOX.model_copy(update={"sources": ("3DSOLID", "SURFACE")})


# --------------------------------------------------------------------------- specs

# Cases also scored with a tighter tolerance and with a looser one at fixed position.
TOLERANCE_CASES = ("identical", "translated-small", "rect-corner-0.3", "hole-moved-0.4", "hole-radius-0.3",
                   "small-hole-radius-between", "triangle-gap-0.3", "arc-center-0.55", "text-height-0.2",
                   "text-rotation-0.6", "hatch-area", "insert-scale-0.0008", "dim-linear-0.3", "dim-angular-0.3",
                   "line-end-0.8", "point-moved-1", "hole-grid-70", "spline-moved-0.6", "line-split",
                   "dim-linear-0.6", "dim-angular-0.6", "text-height-0.4", "insert-rotation-0.6")

SPECS: dict[str, dict[str, Any]] = {
    "free": {},
    "fixed": {"position": "fixed"},
    "tight-fixed": {"position": "fixed", "tolerance": Tolerance(geometric=0.25)},
    "loose-fixed": {"position": "fixed", "tolerance": Tolerance(geometric=1.5)},
}
SOLID: dict[str, Any] = {"weights": ComponentWeights(extents3d=2.0)}
EXTRA_SPECS: dict[str, dict[str, Any]] = {
    "weights": {"weights": ComponentWeights(entities=3.0, dimensions=1.0, layers=0.5, topology=2.0, text=1.0)},
    "baseline": {"baseline": 0.4},
    "ignore-marks": {"ignore_layers": ("MARKS",)},
    "required": {"required_layers": ("HOLES", "holes", "NOTES"), "required_text": ("plate a", "REV B", "missing")},
}


def score(gold: DrawingMetadata, cand: DrawingMetadata, spec: dict[str, Any], schema: int = 3) -> dict[str, Any]:
    report: ScoreReport = score_drawing(gold, cand, ScoringSpec(task_id="corpus", schema_version=schema, **spec),
                                        VERSION)
    return report.model_dump(mode="json", exclude={"gold_sha256", "candidate_sha256"})


Case = tuple[DrawingMetadata, DrawingMetadata, dict[str, Any], int]


def cases() -> dict[str, Callable[[], Case]]:
    """Every (case, spec) pair of the corpus, keyed ``case/spec``, built when called."""
    out: dict[str, Callable[[], Case]] = {}

    def put(key: str, gold: Callable[[], DrawingMetadata], cand: Callable[[], DrawingMetadata],
            spec: dict[str, Any], schema: int = 3) -> None:
        out[key] = lambda: (gold(), cand(), spec, schema)

    def plain() -> DrawingMetadata:
        return drawing(gold_entities())

    def mutated(mutate: Mutator, **kw: Any) -> Callable[[], DrawingMetadata]:
        return lambda: drawing(mutate(gold_entities()), **kw)

    # 3D bodies first: their cases are few and fast, and decide the extents3d component alone.
    for name, physical in PHYSICAL_CASES.items():
        for spec_name in ("free", "fixed", "tight-fixed"):
            put(f"{name}/{spec_name}", mutated(lambda e: e, physical=BOX), mutated(lambda e: e, physical=physical),
                {**SPECS[spec_name], **SOLID}, 4)
    for name, physical in GOLD_NONE_CASES.items():
        for spec_name in ("free", "fixed"):
            put(f"{name}/{spec_name}", mutated(lambda e: e, physical=Physical3D(status="none")),
                mutated(lambda e: e, physical=physical), {**SPECS[spec_name], **SOLID}, 4)
    put("gold-none-candidate-none-hole-missing/fixed", mutated(lambda e: e, physical=Physical3D(status="none")),
        mutated(CASES["hole-missing"], physical=Physical3D(status="none")), {**SPECS["fixed"], **SOLID}, 4)
    for name, (gold_body, cand_body) in OTHER_GOLDS.items():
        for spec_name in ("fixed", "tight-fixed") if name.startswith("tiny-body") else ("fixed",):
            put(f"{name}/{spec_name}", mutated(lambda e: e, physical=gold_body),
                mutated(lambda e: e, physical=cand_body), {**SPECS[spec_name], **SOLID}, 4)
    for label, gold_body in (("mesh-gold", MESH_GOLD), ("surface-gold", SURFACE_GOLD)):
        for name in ("solid-identical", "solid-mesh-stand-in", "solid-body-too"):
            for spec_name in ("free", "fixed"):
                put(f"{label}-{name}/{spec_name}", mutated(lambda e: e, physical=gold_body),
                    mutated(lambda e: e, physical=PHYSICAL_CASES[name]), {**SPECS[spec_name], **SOLID}, 4)
    for name, mutate in CASES.items():
        for spec_name in ("free", "fixed"):
            put(f"{name}/{spec_name}", plain, mutated(mutate), SPECS[spec_name])
    for name in TOLERANCE_CASES:
        for spec_name in ("tight-fixed", "loose-fixed"):
            put(f"{name}/{spec_name}", plain, mutated(CASES[name]), SPECS[spec_name])
    for name in ("identical", "hole-missing", "text-content", "dim-linear-0.6", "rect-as-four-lines", "point-moved-1",
                 "translated"):
        for spec_name, spec in EXTRA_SPECS.items():
            put(f"{name}/{spec_name}", plain, mutated(CASES[name]), spec)
    for name, (layers, gold_units, units) in LAYER_CASES.items():
        for spec_name in ("free", "fixed"):
            put(f"{name}/{spec_name}", functools.partial(drawing, gold_entities(), units=gold_units),
                functools.partial(drawing, gold_entities(), layers=layers, units=units), SPECS[spec_name])
    # Both sides without a kind: the component or part that kind feeds is not applicable.
    strip: dict[str, Mutator] = {
        "texts": lambda ents: [e for e in ents if not isinstance(e, TextEntity)],
        "dimensions": lambda ents: [e for e in ents if not isinstance(e, DimensionEntity)],
        "circles": lambda ents: [e for e in ents if not isinstance(e, CircleEntity | InsertEntity)],
        "profiles": lambda ents: [e for i, e in enumerate(ents) if i not in (RECT, TRI_A, SPLINE_CLOSED, HATCH_SOLID)
                                  and not isinstance(e, EllipseEntity)],
        "geometry": lambda ents: [e for e in ents if isinstance(e, TextEntity)],
    }
    for name, without in strip.items():
        put(f"no-{name}-on-either-side/free", mutated(without), mutated(without), {})
        put(f"no-{name}-on-either-side-one-changed/fixed", mutated(without),
            mutated(_then(without, _shift(0.6, 0.0))), SPECS["fixed"])
    # One side without a kind the other has.
    for name, without in strip.items():
        put(f"gold-without-{name}/fixed", mutated(without), plain, SPECS["fixed"])
    # A grid of more holes than the spacings are taken over (60): which 60 must not depend on
    # the order the holes were drawn in or on where the grid is.
    # (Radius 1.9: a class of its own, so a shift moves the whole class.)
    def hole_grid(jitter: float = 0.0) -> list[Entity]:
        # rows unevenly spaced: no symmetry makes two different subsets' spacings alike
        return [CircleEntity(center=(300 + 10 * (k % 9) + (jitter if k % 2 else -jitter),
                                     100 + 7 * (k // 9) + 0.5 * (k // 9) ** 2),
                             radius=1.9, layer="HOLES") for k in range(72)]
    grid = hole_grid()
    with_grid = _add(*grid)
    put("hole-grid-72-reversed/fixed", mutated(with_grid), mutated(_add(*reversed(grid))), SPECS["fixed"])
    put("hole-grid-72-shifted/fixed", mutated(with_grid),
        mutated(_add(*(shift_entity(c, 13.7, 5.3) for c in grid))), SPECS["fixed"])
    # Holes a hair apart, below and above the selection's 6-decimal key.
    for jitter in (2e-7, 2e-6):
        put(f"hole-grid-72-jitter-{jitter:g}/fixed", mutated(with_grid), mutated(_add(*hole_grid(jitter))),
            SPECS["fixed"])
    # Profiles: a small one (perimeter 1.2), and a square drawn as a rhombus of the same sides
    # and centroid (only its area tells them apart).
    small = PolylineEntity(vertices=((60, 70), (60.3, 70), (60.3, 70.3), (60, 70.3)), closed=True, layer="OUTLINE")
    put("tiny-profile/fixed", mutated(_add(small)), mutated(_add(small)), SPECS["fixed"])
    h = 10 / math.sqrt(2)
    square = PolylineEntity(vertices=((300, 0), (310, 0), (310, 10), (300, 10)), closed=True, layer="OUTLINE")
    cx, cy = (20 + 2 * h) / 4, (2 * h) / 4  # the rhombus's vertex mean (its centroid)
    rhombus = PolylineEntity(vertices=tuple((305 - cx + x, 5 - cy + y) for x, y in ((0, 0), (10, 0), (10 + h, h),
                                                                                    (h, h))),
                             closed=True, layer="OUTLINE")
    put("square-as-rhombus/fixed", mutated(_add(square)), mutated(_add(rhombus)), SPECS["fixed"])
    # The same with sides of 2 at tolerance 0.1 (tolerance x perimeter under 1).
    small_square = PolylineEntity(vertices=((300, 0), (302, 0), (302, 2), (300, 2)), closed=True, layer="OUTLINE")
    sx, sy = 2 * math.cos(math.radians(48.6)), 2 * math.sin(math.radians(48.6))
    corners = ((0.0, 0.0), (2.0, 0.0), (2 + sx, sy), (sx, sy))
    mx, my = sum(x for x, _ in corners) / 4, sum(y for _, y in corners) / 4
    small_rhombus = PolylineEntity(vertices=tuple((301 - mx + x, 1 - my + y) for x, y in corners), closed=True,
                                   layer="OUTLINE")
    put("small-square-as-rhombus/fine-fixed", mutated(_add(small_square)), mutated(_add(small_rhombus)),
        {"position": "fixed", "tolerance": Tolerance(geometric=0.1)})
    # A curve shorter than the tolerance (length 0.28), moved by 0.7: in the falloff.
    tiny = SplineEntity(points=((60, 90), (60.1, 90.1), (60.2, 90)), layer="OUTLINE")
    put("tiny-spline-moved-0.7/fixed", mutated(_add(tiny)), mutated(_add(shift_entity(tiny, 0.7, 0.0))),
        SPECS["fixed"])
    # ... and by 2.6 at a tolerance of 2 (error 1.3): far beyond its own length, still in reach.
    put("tiny-spline-moved-2.6/coarse-fixed", mutated(_add(tiny)), mutated(_add(shift_entity(tiny, 2.6, 0.0))),
        {"position": "fixed", "tolerance": Tolerance(geometric=2.0)})
    # Ten texts, one moved far away: its words still earn half a text, found beyond its 8 nearest.
    notes = [TextEntity(content=f"NOTE {k}", insert=(0, -40 - 4 * k), height=2, layer="TEXT") for k in range(10)]
    far = [*notes[:9], shift_entity(notes[9], 150.0, 0.0)]
    put("ten-notes-one-far/fixed", mutated(_add(*notes)), mutated(_add(*far)), SPECS["fixed"])
    # A hatch of side 0.3 (area 0.09, area tolerance 0.5 * 0.3 * 4 = 0.6) drawn with area 0.84
    # about the same centroid: error 0.75 / 0.6 = 1.25.
    def square(side: float) -> tuple[tuple[tuple[float, float], ...], ...]:
        h = side / 2
        return (((300 - h, 80 - h), (300 + h, 80 - h), (300 + h, 80 + h), (300 - h, 80 + h)),)
    put("tiny-hatch-area/fixed", mutated(_add(HatchEntity(pattern="SOLID", solid=True, boundaries=square(0.3),
                                                          layer="HATCH"))),
        mutated(_add(HatchEntity(pattern="SOLID", solid=True, boundaries=square(math.sqrt(0.84)), layer="HATCH"))),
        SPECS["fixed"])
    # A short curve whose mean lies 0.3 from the y axis, moved 0.299 towards it (within tolerance).
    near_axis = SplineEntity(points=((0.2, 90), (0.3, 90.1), (0.4, 90)), layer="OUTLINE")
    put("curve-mean-near-axis/fixed", mutated(_add(near_axis)), mutated(_add(shift_entity(near_axis, -0.299, 0.0))),
        SPECS["fixed"])
    # A circle at the top of the drawing (it sets the height) drawn 0.6 too big.
    top = CircleEntity(center=(50, 150), radius=5, layer="HOLES")
    put("top-circle-radius-0.6/fixed", mutated(_add(top)), mutated(_add(top.model_copy(update={"radius": 5.6}))),
        SPECS["fixed"])
    # A spline of two points (a straight curve), moved 0.6.
    two = SplineEntity(points=((0, 130), (20, 130)), layer="OUTLINE")
    put("two-point-spline-moved-0.6/fixed", mutated(_add(two)), mutated(_add(shift_entity(two, 0.0, 0.6))),
        SPECS["fixed"])
    # A gold linear dimension with a fourth definition point, its line drawn 0.6 off.
    four = (((100, -10), (0, 0), (100, 0), (50, -10)), ((100, -10.6), (0, 0), (100, 0), (50, -10)))
    put("dim-four-defpoints-line-offset/fixed", mutated(_replace(DIM_LINEAR, defpoints=four[0])),
        mutated(_replace(DIM_LINEAR, defpoints=four[1])), SPECS["fixed"])
    # Small or sparse shapes, each moved 0.6: an arc of radius 0.8, a closed spline of three
    # points, a polyline of two vertices.
    small_shapes: dict[str, Entity] = {
        "small-arc": ArcEntity(center=(80, 140), radius=0.8, start_angle=0, end_angle=180, layer="OUTLINE"),
        "three-point-closed-spline": SplineEntity(points=((100, 140), (110, 140), (105, 148)), closed=True,
                                                  layer="OUTLINE"),
        "two-vertex-polyline": PolylineEntity(vertices=((120, 140), (135, 140)), layer="OUTLINE"),
    }
    for label, shape in small_shapes.items():
        put(f"{label}-moved-0.6/fixed", mutated(_add(shape)), mutated(_add(shift_entity(shape, 0.6, 0.0))),
            SPECS["fixed"])
    # A gold hatch without area (a degenerate boundary), drawn the same.
    flat_hatch = _replace(HATCH_SOLID, boundaries=(((120, 40), (140, 40)),))
    put("hatch-without-area-both/fixed", mutated(flat_hatch), mutated(flat_hatch), SPECS["fixed"])
    put("hatch-without-area-longer/fixed", mutated(flat_hatch),
        mutated(_replace(HATCH_SOLID, boundaries=(((120, 40), (141, 40)),))), SPECS["fixed"])
    # A block scaled unevenly (x 2, y 3), drawn exactly and with x and y swapped.
    uneven = InsertEntity(block="PLATE", insert=(250, 80), scale=(2.0, 3.0, 1.0), layer="PARTS")
    put("insert-uneven-scale/fixed", mutated(_add(uneven)), mutated(_add(uneven)), SPECS["fixed"])
    put("insert-uneven-scale-swapped/fixed", mutated(_add(uneven)),
        mutated(_add(uneven.model_copy(update={"scale": (3.0, 2.0, 1.0)}))), SPECS["fixed"])
    # Thirty kinds of other objects: the listed kinds are cut at 300 characters.
    others = [OtherEntity(source=f"ACAD_PROXY_OBJECT_{k:02d}", layer="OUTLINE") for k in range(30)]
    put("many-other-kinds/fixed", mutated(_add(*others)), mutated(_add(*others[:29])), SPECS["fixed"])
    # A note longer than the compared length (200 characters), edited.
    note = ("GENERAL NOTES: 1. ALL DIMENSIONS IN MILLIMETRES UNLESS OTHERWISE STATED. 2. REMOVE ALL BURRS AND "
            "SHARP EDGES. 3. SURFACE FINISH RA 3.2 EXCEPT WHERE NOTED. 4. MATERIAL: ALUMINIUM 6061-T6, ANODISED "
            "BLACK. 5. TOLERANCES: LINEAR 0.1, ANGULAR 0.5 DEG.")
    edited = note.replace("BURRS", "BURS").replace("BLACK", "CLEAR").replace("3.2", "1.6")
    put("text-long-note-edited/fixed",
        mutated(_add(TextEntity(content=note, insert=(0, -30), height=2.5, layer="TEXT"))),
        mutated(_add(TextEntity(content=edited, insert=(0, -30), height=2.5, layer="TEXT"))), SPECS["fixed"])
    # Texts of no height (a gold may have them): no tolerance from the height.
    flat = _then(_replace(TEXT_A, height=0.0), _replace(TEXT_B, height=0.0))
    put("text-heights-zero/fixed", mutated(flat), mutated(flat), SPECS["fixed"])
    put("text-heights-zero-one-drawn/fixed", mutated(flat), mutated(_then(flat, _replace(TEXT_A, height=0.01))),
        SPECS["fixed"])
    # Big enough that matching prunes its candidates, alignment thins its votes and sizes prune too.
    def big(jitter: float) -> Callable[[], DrawingMetadata]:
        def build() -> DrawingMetadata:
            extra: list[Entity] = [*_grid(520, 3.0, jitter=jitter)]
            extra += [LineEntity(start=(400 + 3 * (k % 23), 200 + 3 * (k // 23)),
                                 end=(401 + 3 * (k % 23) + (jitter if k % 5 == 0 else 0.0), 200 + 3 * (k // 23)),
                                 layer="GRID") for k in range(520)]
            return drawing([*gold_entities(), *extra])
        return build
    for spec_name in ("free", "fixed"):
        put(f"big-identical/{spec_name}", big(0.0), big(0.0), SPECS[spec_name])
        put(f"big-jittered/{spec_name}", big(0.0), big(0.6), SPECS[spec_name])
    put("schema3-candidate-for-schema4/free", mutated(lambda e: e, physical=BOX), plain, SOLID, 4)
    # A horizontal line 0.3 off among vertical decoys whose midpoints coincide with its own
    # (9 crossing it at its midpoint) or whose end points multiply like its own (9 more): the
    # line is still found, however many items stand nearer than it. (Against a matching that
    # placed segments by anything but their midpoints.)
    decoys: list[Entity] = [LineEntity(start=(-300, 10 - h), end=(-300, 10 + h), layer="CENTER") for h in range(1, 10)]
    decoys += [LineEntity(start=(-300, a), end=(-300, 100 / a), layer="CENTER")
               for a in (1, 1.25, 1.6, 2, 2.5, 4, 5, 6.25, 8.5)]
    # (and 9 whose products lie just above, and 9 stacked copies whose end points add up to a
    # little more, so that no other item takes the line as one of its nearest)
    decoys += [LineEntity(start=(-300, a), end=(-300, 110 / a), layer="CENTER")
               for a in (1, 1.1, 2, 2.2, 4, 5, 5.5, 8, 10)]
    decoys += [LineEntity(start=(-300, 1.6066), end=(-300, 19.6066), layer="CENTER")] * 9
    level = LineEntity(start=(-310, 10), end=(-290, 10), layer="CENTER")
    put("line-among-decoys-0.3/fixed", mutated(_add(level, *decoys)),
        mutated(_add(shift_entity(level, 0.0, 0.3), *decoys)), SPECS["fixed"])
    # ... in the big drawing, where matching keeps each line's 8 nearest and those within reach
    def big_with(*extra: Entity) -> Callable[[], DrawingMetadata]:
        return lambda: drawing([*big(0.0)().model.entities, *extra])
    put("big-line-among-decoys-0.3/fixed", big_with(level, *decoys),
        big_with(shift_entity(level, 0.0, 0.3), *decoys), SPECS["fixed"])
    # Circles that set the drawing's extents (top right, bottom left), drawn 0.2 bigger and 0.2
    # farther out: each extent 0.8 longer.
    corners_gold = [CircleEntity(center=(400, 200), radius=5, layer="HOLES"),
                    CircleEntity(center=(-100, -100), radius=5, layer="HOLES")]
    corners_cand = [CircleEntity(center=(400.2, 200.2), radius=5.2, layer="HOLES"),
                    CircleEntity(center=(-100.2, -100.2), radius=5.2, layer="HOLES")]
    put("extent-circles-0.2/fixed", mutated(_add(*corners_gold)), mutated(_add(*corners_cand)), SPECS["fixed"])
    # A linear dimension whose line runs 0.5 from its second point, drawn 0.6 farther.
    close = DimensionEntity(dimtype="linear", measurement=30, defpoints=((230, -0.5), (200, 0), (230, 0)),
                            layer="DIMS")
    put("dim-line-close-drawn-farther/fixed", mutated(_add(close)),
        mutated(_add(close.model_copy(update={"defpoints": ((230, -1.1), (200, 0), (230, 0))}))), SPECS["fixed"])
    # A hatch of area 0.5 with its boundary listed from another vertex: the same centroid.
    tiny_hatch = HatchEntity(pattern="SOLID", solid=True, boundaries=(((300, 120), (301, 120), (300.5, 121)),),
                             layer="HATCH")
    put("tiny-hatch-boundary-rotated/fixed", mutated(_add(tiny_hatch)), mutated(_add(tiny_hatch.model_copy(
        update={"boundaries": (((301, 120), (300.5, 121), (300, 120)),)}))), SPECS["fixed"])
    # Small random drawings on which a surviving mutant scored differently from the code, found
    # by a differential search and kept with their spec (and layer table, where it has hidden
    # layers): of the matching (its tie-breaks by error and layer, the score of nothing against
    # nothing), of the alignment (vote bins, extents hypotheses, refinement) and of the closed
    # profiles and translations of the item tables.
    from pydantic import TypeAdapter

    entities = TypeAdapter(list[Entity])
    for key, found in json.loads(DIFFERENTIAL.read_text()).items():
        spec = {"position": found["spec"]["position"], "tolerance": Tolerance(**found["spec"]["tolerance"])}
        if found["spec"].get("ignore_layers"):
            spec["ignore_layers"] = tuple(found["spec"]["ignore_layers"])
        layers = tuple(LayerInfo(**layer) for layer in found["layers"]) if "layers" in found else LAYERS
        put(f"differential-{key}/{spec['position']}",
            functools.partial(drawing, entities.validate_python(found["gold"]), layers=layers),
            functools.partial(drawing, entities.validate_python(found["candidate"]), layers=layers), spec)
    return out


def report(case: Case) -> dict[str, Any]:
    """The pinned form of one case's report."""
    gold, cand, spec, schema = case
    return score(gold, cand, spec, schema)


def reports() -> dict[str, Any]:
    return {key: report(build()) for key, build in cases().items()}


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python -m tests.evaluator.scoring_corpus --write", file=sys.stderr)
        return 2
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(reports(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
