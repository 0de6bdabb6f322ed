"""The two bounds that keep closed-profile recognition cheap on a hostile drawing, at their
exact values: at most 50,000 chainable edges, and at most 400,000 endpoint pairs within the
tolerance (a drawing clustered beyond that has no closed profile recognised).

Each bound is shown from both sides on the candidate, through ``score_drawing``: the
candidate's closed outline is counted (``profiles.candidate``) exactly up to the bound and
not one edge or pair beyond it. The gold is a small square, so the entity matching stays
cheap; the 50,000-edge outline still takes seconds to chain.
"""

from __future__ import annotations

import math

import pytest
from autocad_bench_evaluator.metadata import LineEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec

from tests.evaluator.support import metadata

SQUARE = [
    LineEntity(start=(0, 0), end=(10, 0)),
    LineEntity(start=(10, 0), end=(10, 10)),
    LineEntity(start=(10, 10), end=(0, 10)),
    LineEntity(start=(0, 10), end=(0, 0)),
]
GOLD = metadata(SQUARE)


def _candidate_profiles(lines: list[LineEntity]) -> int:
    report = score_drawing(GOLD, metadata(lines), ScoringSpec(task_id="bounds"), "v")
    return int(report.components["topology"].details["profiles.candidate"])


def _polygon(edges: int) -> list[LineEntity]:
    """A closed regular polygon of ``edges`` unit-long sides (about)."""
    radius = edges / (2 * math.pi)
    points = [(radius * math.cos(2 * math.pi * k / edges), radius * math.sin(2 * math.pi * k / edges))
              for k in range(edges)]
    return [LineEntity(start=points[k], end=points[(k + 1) % edges]) for k in range(edges)]


@pytest.mark.parametrize(("edges", "recognised"), [(50_000, 1), (50_001, 0)])
def test_a_closed_outline_is_recognised_up_to_fifty_thousand_edges(edges: int, recognised: int) -> None:
    assert _candidate_profiles(_polygon(edges)) == recognised


def _cluster(cx: float, cy: float, points: int) -> list[LineEntity]:
    """``points // 2`` tiny lines whose ``points`` distinct ends lie within 0.2 of each other
    (inside the default tolerance of 0.5): ``points ** 2`` ordered pairs, self pairs
    included, and no edge of a profile (both ends of each line snap to one node)."""
    ends = [(cx + 0.1 * math.cos(2 * math.pi * k / points), cy + 0.1 * math.sin(2 * math.pi * k / points))
            for k in range(points)]
    return [LineEntity(start=ends[k], end=ends[k + 1]) for k in range(0, points, 2)]


@pytest.mark.parametrize(("one_pair_more", "recognised"), [(False, 1), (True, 0)])
def test_endpoint_clustering_is_tolerated_up_to_four_hundred_thousand_pairs(
        one_pair_more: bool, recognised: int) -> None:
    # 999 clusters of 20 ends (400 pairs each) + 99 lone tiny lines (4 each) + the square's
    # 4 corners (each two coincident ends collapse to one point: 1 pair each) = 400,000.
    filler = [line for k in range(999) for line in _cluster(100.0 + 10.0 * (k % 40), 100.0 + 10.0 * (k // 40), 20)]
    lone = [line for k in range(99) for line in _cluster(-100.0 - 10.0 * k, -100.0, 2)]
    assert len(filler) == 9_990 and len(lone) == 99
    # One more line from an existing end (it collapses onto it) to a point far from all
    # others: one more point, one more pair (its own).
    more = [LineEntity(start=lone[0].start, end=(-100.0, -300.0))] if one_pair_more else []
    assert _candidate_profiles(SQUARE + filler + lone + more) == recognised
