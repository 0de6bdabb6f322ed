"""Free position: a drawing moved as a whole is recognised, whichever way it moved."""

from __future__ import annotations

import pytest

from tests.evaluator.scoring_corpus import drawing, gold_entities, score, shift_entity

# Moves along one axis only, in each direction, by whole and fractional amounts: the
# translation the alignment finds then has a zero component, and a shortcut taken for "no
# move at all" must not be taken for these.
AXIS_MOVES = [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0), (0.0, 2.5), (-3.75, 0.0), (12.0, 0.0), (0.0, -40.0)]


@pytest.mark.parametrize(("dx", "dy"), AXIS_MOVES)
def test_a_drawing_moved_along_one_axis_scores_one_in_free_position(dx: float, dy: float) -> None:
    gold = drawing(gold_entities())
    moved = drawing([shift_entity(e, dx, dy) for e in gold_entities()])
    report = score(gold, moved, {})
    assert report["score"] == 1.0, report["components"]
    # the translation that carries the candidate onto the gold
    assert report["translation"] == pytest.approx([-dx, -dy], abs=1e-9)


@pytest.mark.parametrize(("dx", "dy"), AXIS_MOVES)
def test_the_same_move_costs_in_fixed_position(dx: float, dy: float) -> None:
    gold = drawing(gold_entities())
    moved = drawing([shift_entity(e, dx, dy) for e in gold_entities()])
    assert score(gold, moved, {"position": "fixed"})["score"] < 0.9
