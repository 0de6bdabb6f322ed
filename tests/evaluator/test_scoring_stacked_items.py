"""Drawings too big to match in full, with items stacked on one another.

Above 250,000 gold x candidate pairs of one kind the scorer prunes the candidates it matches. It
used to keep only the 8 nearest to each gold item: 9 or more coincident points, circles or block
references all compete for the same 8 places, so an exact copy of such a drawing lost credit
(and was counted a defect) against itself. Pruning now also keeps every candidate close enough
to earn credit, which the properties below check through the public scoring function: a
candidate within tolerance of every gold item scores 1 whatever the stacking.
"""

from __future__ import annotations

import math

import pytest
from autocad_bench_evaluator.metadata import CircleEntity, Entity, InsertEntity, PointEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec, Tolerance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.evaluator.support import metadata

FIELD = 520  # enough items of one kind that the pairs exceed the pruning threshold


def _field(n: int) -> list[PointEntity]:
    return [PointEntity(location=(5.0 * (k % 40), 5.0 * (k // 40)), layer="P") for k in range(n)]


@pytest.mark.parametrize("stacked", [9, 20, 60])
def test_an_exact_copy_with_stacked_points_scores_one(stacked: int) -> None:
    ents: list[Entity] = [*_field(FIELD), *[PointEntity(location=(500, 500), layer="P")] * stacked]
    drawing = metadata(ents)
    report = score_drawing(drawing, drawing, ScoringSpec(task_id="stack", position="fixed"), "v")
    assert report.components["entities"].score == 1.0
    assert report.score == 1.0 and report.defects == 0.0 and report.passed


def test_stacked_block_references_and_circles_score_one() -> None:
    ents: list[Entity] = [
        *[CircleEntity(center=(3.0 * k, 0), radius=1, layer="C") for k in range(FIELD)],
        *[CircleEntity(center=(-50, -50), radius=1, layer="C")] * 12,
        *[InsertEntity(block="B", insert=(2.0 * k, 40), layer="I") for k in range(FIELD)],
        *[InsertEntity(block="B", insert=(-50, 40), layer="I")] * 12,
    ]
    drawing = metadata(ents)
    report = score_drawing(drawing, drawing, ScoringSpec(task_id="stack", position="fixed"), "v")
    assert report.components["entities"].score == 1.0 and report.defects == 0.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=6),
    jitter=st.lists(st.tuples(st.floats(-0.3, 0.3), st.floats(-0.3, 0.3)), min_size=1, max_size=50),
    geometric=st.sampled_from([0.5, 1.0]),
)
def test_a_candidate_within_tolerance_of_a_stacked_field_scores_one(
    clusters: list[int], jitter: list[tuple[float, float]], geometric: float
) -> None:
    gold: list[Entity] = list(_field(FIELD))
    cand: list[Entity] = [
        PointEntity(location=(p.location[0] + jitter[k % len(jitter)][0], p.location[1] + jitter[k % len(jitter)][1]),
                    layer="P")
        for k, p in enumerate(_field(FIELD))
    ]
    for c, size in enumerate(clusters):
        centre = (400.0 + 30 * c, 400.0)
        for k in range(size):
            dx, dy = jitter[(c + k) % len(jitter)]
            gold.append(PointEntity(location=centre, layer="P"))
            # every candidate within 0.3 * sqrt(2) < 0.5 of its gold point: full credit
            cand.append(PointEntity(location=(centre[0] + dx, centre[1] + dy), layer="P"))
    assert all(math.hypot(*d) < 0.5 for d in jitter)
    spec = ScoringSpec(task_id="stack", position="fixed", tolerance=Tolerance(geometric=geometric))
    report = score_drawing(metadata(gold), metadata(cand), spec, "v")
    assert report.components["entities"].score == 1.0, report.components["entities"].details



def test_a_stacked_cluster_moved_into_the_falloff_keeps_its_credit_at_a_coarse_tolerance() -> None:
    # tolerance 2: twelve stacked points 2.6 off (error 1.3, credit 0.4 each), all twelve matched
    gold = [*_field(FIELD), *[PointEntity(location=(500, 500), layer="P")] * 12]
    cand = [*_field(FIELD), *[PointEntity(location=(502.6, 500), layer="P")] * 12]
    spec = ScoringSpec(task_id="stack", position="fixed", tolerance=Tolerance(geometric=2.0))
    report = score_drawing(metadata(gold), metadata(cand), spec, "v")
    assert report.components["entities"].details["point.matched"] == pytest.approx(FIELD + 12 * 0.4)
