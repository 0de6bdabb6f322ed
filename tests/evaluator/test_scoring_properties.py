"""Properties of the deterministic scorer, checked on generated drawings (hypothesis).

Drawings are built from features placed in separate cells of a grid, so that removing one
entity never accidentally completes or breaks a different feature.
"""

from __future__ import annotations

import random

from autocad_bench_evaluator.metadata import (
    ArcEntity,
    CircleEntity,
    Entity,
    LineEntity,
    PolylineEntity,
    TextEntity,
)
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.evaluator.support import metadata, rectangle_lines, rectangle_polyline

CELL = 300
LAYERS = ("0", "OUTLINE", "HOLES")


@st.composite
def feature(draw: st.DrawFn, cell: tuple[int, int]) -> list[Entity]:
    ox, oy = cell[0] * CELL + draw(st.integers(10, 60)), cell[1] * CELL + draw(st.integers(10, 60))
    layer = draw(st.sampled_from(LAYERS))
    kind = draw(st.sampled_from(["rect_lines", "rect_poly", "circle", "arc", "line", "text", "holes", "slot"]))
    w, h = draw(st.integers(20, 150)), draw(st.integers(20, 150))
    if kind == "rect_lines":
        return rectangle_lines(ox, oy, w, h, layer)
    if kind == "rect_poly":
        return [rectangle_polyline(ox, oy, w, h, layer)]
    if kind == "circle":
        return [CircleEntity(center=(ox + 60, oy + 60), radius=draw(st.integers(5, 50)), layer=layer)]
    if kind == "arc":
        start = draw(st.integers(0, 359))
        return [
            ArcEntity(
                center=(ox + 60, oy + 60),
                radius=draw(st.integers(5, 50)),
                start_angle=start,
                end_angle=(start + draw(st.integers(20, 300))) % 360,
                layer=layer,
            )
        ]
    if kind == "line":
        return [LineEntity(start=(ox, oy), end=(ox + w, oy + h), layer=layer)]
    if kind == "text":
        word = draw(st.sampled_from(["A", "PLATE", "Bracket 2", "R10"]))
        return [TextEntity(content=word, insert=(ox, oy), height=draw(st.integers(2, 10)), layer=layer)]
    if kind == "slot":
        return [
            PolylineEntity(
                vertices=((ox, oy), (ox + w, oy), (ox + w, oy + 20), (ox, oy + 20)),
                bulges=(0.0, 1.0, 0.0, 1.0),
                closed=True,
                layer=layer,
            )
        ]
    count = draw(st.integers(2, 5))
    pitch = draw(st.integers(12, 40))
    radius = draw(st.integers(2, 5))
    return [CircleEntity(center=(ox + i * pitch, oy + 40), radius=radius, layer="HOLES") for i in range(count)]


@st.composite
def drawing(draw: st.DrawFn) -> list[Entity]:
    cells = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=6, unique=True))
    out: list[Entity] = []
    for cell in cells:
        out.extend(draw(feature(cell)))
    return out


def shift(entity: Entity, dx: float, dy: float) -> Entity:
    def p(pt: tuple[float, float]) -> tuple[float, float]:
        return (pt[0] + dx, pt[1] + dy)

    if isinstance(entity, LineEntity):
        return entity.model_copy(update={"start": p(entity.start), "end": p(entity.end)})
    if isinstance(entity, (CircleEntity, ArcEntity)):
        return entity.model_copy(update={"center": p(entity.center)})
    if isinstance(entity, PolylineEntity):
        return entity.model_copy(update={"vertices": tuple(p(v) for v in entity.vertices)})
    if isinstance(entity, TextEntity):
        return entity.model_copy(update={"insert": p(entity.insert)})
    raise AssertionError(type(entity))


SPEC_FREE = ScoringSpec(task_id="prop", position="free")
SPEC_FIXED = ScoringSpec(task_id="prop", position="fixed")
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def score(gold: list[Entity], cand: list[Entity], spec: ScoringSpec = SPEC_FREE) -> float:
    return score_drawing(metadata(gold), metadata(cand), spec, "v-test").score


@PROPERTY
@given(drawing())
def test_gold_scores_exactly_one_against_itself(gold: list[Entity]) -> None:
    assert score(gold, gold, SPEC_FREE) == 1.0
    assert score(gold, gold, SPEC_FIXED) == 1.0


@PROPERTY
@given(
    drawing(),
    st.integers(-2000, 2000).map(lambda v: v / 4),
    st.integers(-2000, 2000).map(lambda v: v / 4),
    st.randoms(use_true_random=False),
    st.data(),
)
def test_translating_and_reordering_the_candidate_does_not_change_a_free_score(
    gold: list[Entity], dx: float, dy: float, rnd: random.Random, data: st.DataObject
) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(gold), max_size=len(gold)))
    candidate = [e for e, k in zip(gold, keep, strict=True) if k] or gold[:1]
    if data.draw(st.booleans()):
        # one foreign entity, so the candidate is not simply a subset of the gold
        candidate = [*candidate, CircleEntity(center=(1000.0, 37.0), radius=7.0)]
    moved = [shift(e, dx, dy) for e in candidate]
    rnd.shuffle(moved)
    base = score_drawing(metadata(gold), metadata(candidate), SPEC_FREE, "v")
    other = score_drawing(metadata(gold), metadata(moved), SPEC_FREE, "v")
    assert abs(base.score - other.score) <= 1e-6
    assert base.passed == other.passed


@PROPERTY
@given(drawing(), st.randoms(use_true_random=False))
def test_reordering_does_not_change_a_fixed_score(gold: list[Entity], rnd: random.Random) -> None:
    candidate = list(gold[: max(1, len(gold) - 1)])
    shuffled = list(candidate)
    rnd.shuffle(shuffled)
    assert abs(score(gold, candidate, SPEC_FIXED) - score(gold, shuffled, SPEC_FIXED)) <= 1e-6


@PROPERTY
@given(drawing(), st.floats(1.3, 3.0), st.data())
def test_scaling_a_size_beyond_tolerance_lowers_the_score(
    gold: list[Entity], factor: float, data: st.DataObject
) -> None:
    extra = CircleEntity(center=(2000.0, 2000.0), radius=data.draw(st.integers(5, 40)), layer="HOLES")
    gold = [*gold, extra]
    scaled = extra.model_copy(update={"radius": extra.radius * factor})
    candidate = [*gold[:-1], scaled]
    for spec in (SPEC_FREE, SPEC_FIXED):
        assert score(gold, candidate, spec) < 1.0


@PROPERTY
@given(drawing(), st.floats(1.2, 2.5))
def test_stretching_a_rectangle_beyond_tolerance_lowers_the_score(gold: list[Entity], factor: float) -> None:
    gold = [*gold, rectangle_polyline(2000, 2000, 40, 30)]
    candidate = [*gold[:-1], rectangle_polyline(2000, 2000, 40 * factor, 30)]
    assert score(gold, candidate) < 1.0


@PROPERTY
@given(drawing(), st.randoms(use_true_random=False))
def test_removing_features_never_raises_the_score(gold: list[Entity], rnd: random.Random) -> None:
    order = list(range(len(gold)))
    rnd.shuffle(order)
    remaining = set(order)
    for spec in (SPEC_FREE, SPEC_FIXED):
        previous = 1.0
        remaining = set(order)
        for index in order:
            remaining.discard(index)
            current = score(gold, [gold[i] for i in sorted(remaining)], spec)
            assert current <= previous + 1e-9
            previous = current
        assert previous == 0.0
