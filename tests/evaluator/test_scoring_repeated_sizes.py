"""Sizes that repeat many times: the spacings of a hole grid, a field of equal lines.

A hole grid of 36 holes has 630 centre spacings per side, more pairs than the scorer matches
in full. It used to keep each gold spacing's nearest candidates by rank, which for a value that
repeats 60 times kept 16 of them: a grid drawn exactly scored 0.85 against itself (spacing part
0.46), and with 100 holes the hole count part counted only the first 60. The size matching is
now exact whatever the repeats (:func:`_credit_1d`), which the property below checks against a
full optimal assignment.
"""

from __future__ import annotations

import numpy as np
import pytest
from autocad_bench_evaluator.metadata import CircleEntity, LineEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.scoring.matching import _credit, _credit_1d
from autocad_bench_evaluator.spec import ScoringSpec
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from tests.evaluator.support import metadata


def _grid(n: int, step: float = 10.0, missing: int | None = None) -> list[CircleEntity]:
    return [CircleEntity(center=(step * (k % 10), step * (k // 10)), radius=2, layer="HOLES")
            for k in range(n) if k != missing]


@pytest.mark.parametrize("holes", [12, 36, 64, 100])
def test_an_exact_hole_grid_scores_one(holes: int) -> None:
    drawing = metadata(_grid(holes))
    report = score_drawing(drawing, drawing, ScoringSpec(task_id="grid"), "v")
    assert report.score == 1.0 and report.defects == 0.0
    topology = report.components["topology"].details
    assert topology["holes.count"] == 1.0 and topology["holes.spacing"] == 1.0


def test_every_hole_of_a_big_grid_counts() -> None:
    report = score_drawing(metadata(_grid(100)), metadata(_grid(100, missing=55)), ScoringSpec(task_id="grid"), "v")
    assert report.components["topology"].details["holes.count"] == pytest.approx(2 * 99 / 199, abs=1e-6)


@pytest.mark.parametrize("offset", [(5.0, 5.0), (42.3, -6.9), (-1234.5, 987.25)])
def test_a_big_hole_grid_drawn_elsewhere_and_in_another_order_keeps_its_spacing(offset: tuple[float, float]) -> None:
    """Spacings of a group above 60 holes come from a subset chosen by relative position only:
    the same grid moved and listed in another order picks the same subset, so it keeps full
    spacing credit (a subset chosen by absolute position or list order would not)."""
    gold = [CircleEntity(center=(5.0 + c.center[0], 5.0 + c.center[1]), radius=2, layer="HOLES") for c in _grid(100)]
    moved = [CircleEntity(center=(offset[0] + c.center[0], offset[1] + c.center[1]), radius=2, layer="HOLES")
             for c in _grid(100)]
    shuffled = [moved[k] for k in np.random.default_rng(7).permutation(len(moved))]
    report = score_drawing(metadata(gold), metadata(shuffled), ScoringSpec(task_id="grid"), "v")
    topology = report.components["topology"].details
    assert topology["holes.count"] == 1.0
    assert topology["holes.spacing"] == 1.0


def test_a_field_of_equal_lines_matches_its_lengths_exactly() -> None:
    def field(longer_every: int | None) -> list[LineEntity]:
        return [LineEntity(start=(0, 2 * k), end=(10.6 if longer_every and k % longer_every == 0 else 10, 2 * k))
                for k in range(600)]

    exact = score_drawing(metadata(field(None)), metadata(field(None)), ScoringSpec(task_id="f"), "v")
    assert exact.components["dimensions"].details["sizes.score"] == 1.0
    # 120 of 600 lines 0.6 too long: credit 0.6 each (error 1.2 of the 0.5 tolerance)
    # and the drawing's width 0.6 too long
    longer = score_drawing(metadata(field(None)), metadata(field(5)), ScoringSpec(task_id="f"), "v")
    matched = 480 + 120 * 0.6 + 1 + 0.6
    assert longer.components["dimensions"].details["sizes.score"] == pytest.approx(matched / 602, abs=1e-6)


def _full(gold: np.ndarray, cand: np.ndarray, tol: float) -> float:
    credit = _credit(np.abs(gold[:, None] - cand[None, :]) / tol)
    rows, cols = linear_sum_assignment(-credit)
    return float(credit[rows, cols].sum())


sizes = st.lists(st.sampled_from([1.0, 1.2, 1.5, 1.6, 2.0, 2.3, 2.4, 5.0, 5.3, 9.0]) | st.floats(0, 12),
                 min_size=0, max_size=14)


@settings(max_examples=300, deadline=None)
@given(gold=sizes, cand=sizes, tol=st.sampled_from([0.25, 0.5, 1.0]))
def test_size_matching_equals_the_full_optimal_assignment(gold: list[float], cand: list[float], tol: float) -> None:
    """In full (the default limit) and as sizes with counts (a limit of a quarter of the
    distinct sizes' product forces that path whenever sizes repeat), the credit is the full
    assignment's; the last resort (limit 0: nearest candidates only) never claims more than it."""
    g, c = np.asarray(gold, dtype=float), np.asarray(cand, dtype=float)
    want = _full(g, c, tol) if len(g) and len(c) else 0.0
    assert _credit_1d(g, c, tol) == pytest.approx(want, abs=1e-9)
    # sizes are matched in full up to 4 x limit pairs, with counts up to 4 x limit close pairs
    distinct = max(1, len(np.unique(g)) * len(np.unique(c)))
    assert _credit_1d(g, c, tol, limit=-(-distinct // 4)) == pytest.approx(want, abs=1e-9)
    assert _credit_1d(g, c, tol, limit=0) <= want + 1e-9


def test_six_hundred_distinct_close_sizes_match_themselves() -> None:
    """600 distinct lengths 10.000 ... 10.599 in one block, each within reach of the others
    (more pairs than the matching of 2D items takes in full), drawn in reverse order."""
    lines = [LineEntity(start=(0, 2 * k), end=(10 + 0.001 * k, 2 * k)) for k in range(600)]
    report = score_drawing(metadata(lines), metadata(list(reversed(lines))), ScoringSpec(task_id="f"), "v")
    assert report.components["dimensions"].details["sizes.score"] == 1.0
    assert report.score == 1.0 and report.defects == 0.0


def test_eleven_hundred_equal_lines_all_drawn_0_6_too_long_earn_the_falloff_credit() -> None:
    """One gold size and one candidate size, 1,100 of each: a single pair of sizes with credit,
    matched with its counts (1,100 x 1,100 pairs is more than the full matching takes)."""
    gold = [LineEntity(start=(0, 2 * k), end=(10, 2 * k)) for k in range(1100)]
    cand = [LineEntity(start=(0, 2 * k), end=(10.6, 2 * k)) for k in range(1100)]
    report = score_drawing(metadata(gold), metadata(cand), ScoringSpec(task_id="f", position="fixed"), "v")
    # 1,100 lengths and the width 0.6 too long (credit 0.6 each), the height right
    matched = 1100 * 0.6 + 0.6 + 1
    assert report.components["dimensions"].details["sizes.score"] == pytest.approx(matched / 1102, abs=1e-6)


def test_six_hundred_distinct_close_sizes_all_0_3_too_long_match_in_full() -> None:
    """600 different lengths within 0.6 of each other, every one drawn 0.3 too long (within
    tolerance): every size matches. The nearest-only pruning this once fell back to matched
    barely half (sizes part 0.51, 586 defects)."""
    gold = [LineEntity(start=(0, 2 * k), end=(10 + 0.001 * k, 2 * k)) for k in range(600)]
    cand = [LineEntity(start=(0, 2 * k), end=(10.3 + 0.001 * k, 2 * k)) for k in range(600)]
    report = score_drawing(metadata(gold), metadata(cand), ScoringSpec(task_id="f", position="fixed"), "v")
    assert report.components["dimensions"].details["sizes.score"] == 1.0
    assert report.components["dimensions"].details["defects"] == 0.0


def test_the_last_resort_keeps_each_gold_sizes_nearest_candidates_only() -> None:
    """Past four times the limit of close pairs the sizes keep, per gold value, the 8 candidates
    below and the 8 from it upwards in sorted order (documented as approximate); at exactly four
    times the limit they are still matched in full.

    99 candidate sizes 0 ... 98 and 30 gold sizes (15 x 44, 15 x 3) at tolerance 60 (reach 90):
    99 + 93 = 192 close pairs of distinct sizes, and each gold size earns full credit from any
    candidate within 60 of it. Kept: 36 ... 51 for 44 and 0 ... 10 for 3, 27 candidates, so 27
    of the 30 gold sizes match."""
    gold = np.asarray([44.0] * 15 + [3.0] * 15)
    cand = np.arange(99, dtype=float)
    assert _credit_1d(gold, cand, 60.0, limit=40) == 27.0  # 192 > 4 x 40: the last resort
    assert _credit_1d(gold, cand, 60.0, limit=48) == 30.0  # 192 = 4 x 48: in full


@pytest.mark.parametrize(("gold", "cand", "tol", "limit"), [
    # found by running the surviving mutants of the size matching against random inputs: each
    # tells one of them apart; every one of them is matched exactly, whichever path it takes
    ([3.43, 2.03, 11.36, 1.0], [1.0, 1.0, 1.66, 3.2, 0.58, 1.37, 5.6, 5.6, 5.14], 4.0, 10),
    ([6.0, 8.18, 2.45, 2.2, 0.94, 0.3, 2.08, 0.26], [2.0, 3.41, 7.18, 10.71, 11.27, 0.3], 2.0, 10),
    ([4.45, 5.63, 8.0, 4.72, 8.0, 8.0, 6.48], [2.79, 11.43, 5.51, 8.0, 8.75, 9.34, 1.55], 4.0, 1),
    ([6.52, 4.96, 2.0, 3.51, 3.51, 0.77, 1.73, 2.0, 4.96], [4.96, 1.43, 10.25, 11.04, 0.4], 4.0, 10),
    ([6.5], [6.07, 6.0, 2.93, 0.06, 6.42, 11.91, 4.91, 4.35, 6.0], 2.0, 0),
    ([9.47, 11.2, 3.31, 8.3, 11.08, 6.88, 1.0], [8.6, 6.88, 2.05, 9.28, 10.18, 6.88], 0.25, 0),
])
def test_sizes_whose_windows_start_past_the_first_candidate_match_exactly(
        gold: list[float], cand: list[float], tol: float, limit: int) -> None:
    g, c = np.asarray(gold), np.asarray(cand)
    assert _credit_1d(g, c, tol, limit=limit) == pytest.approx(_full(g, c, tol), abs=1e-9)
