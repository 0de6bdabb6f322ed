"""Stacked texts and curves in drawings too big to match in full (see test_scoring_stacked_items):
kept out of the mutation runs' selection because scoring 520 texts and curves takes seconds."""

from __future__ import annotations

from autocad_bench_evaluator.metadata import Entity, SplineEntity, TextEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec

from tests.evaluator.support import metadata

FIELD = 520


def _drawing(offset: float) -> list[Entity]:
    """520 texts and curves apart, and 12 of each stacked at one place (``offset`` apart)."""
    return [
        *[TextEntity(content="N", insert=(3.0 * (k % 30), 3.0 * (k // 30)), height=1, layer="T") for k in range(FIELD)],
        *[TextEntity(content="N", insert=(-20 + offset * k, -20), height=1, layer="T") for k in range(12)],
        *[SplineEntity(points=((4.0 * k, 100), (4.0 * k + 1, 101), (4.0 * k + 2, 100)), layer="S")
          for k in range(FIELD)],
        *[SplineEntity(points=((-20 + offset * k, 100), (-19 + offset * k, 101), (-18 + offset * k, 100)), layer="S")
          for k in range(12)],
    ]


def test_texts_and_curves_stacked_in_the_gold_and_a_hair_apart_in_the_candidate_score_one() -> None:
    # every gold copy has the same 8 nearest candidates: the other 4 must still be matched
    report = score_drawing(metadata(_drawing(0.0)), metadata(_drawing(0.01)),
                           ScoringSpec(task_id="stack", position="fixed"), "v")
    assert report.components["text"].score == 1.0 and report.components["entities"].score == 1.0
    assert report.defects == 0.0
