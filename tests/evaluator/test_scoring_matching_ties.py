"""The tie-breaks of the optimal assignment (``scoring.matching._assign``), its documented
contract: among assignments of equal credit, pairs of smaller error, then pairs on the same
layer. Through scores they show only where several candidates lie within tolerance of one gold
item (which layer a duplicate is credited on, which pairs anchor the free-position refinement),
so they are pinned here on the assignment itself."""

from __future__ import annotations

import numpy as np
from autocad_bench_evaluator.scoring.matching import _assign


def _pairs(
    credit: list[list[float]], err: list[list[float]], layer_diff: list[list[float]] | None = None
) -> list[tuple[int, int]]:
    match = _assign(np.asarray(credit), np.asarray(err), None if layer_diff is None else np.asarray(layer_diff))
    return sorted((r, c) for r, c, _ in match.pairs)


def test_equal_credit_prefers_the_pairs_of_smaller_error() -> None:
    full = [[1.0, 1.0], [1.0, 1.0]]
    assert _pairs(full, [[0.9, 0.1], [0.1, 0.9]]) == [(0, 1), (1, 0)]
    assert _pairs(full, [[0.1, 0.9], [0.9, 0.1]]) == [(0, 0), (1, 1)]


def test_equal_credit_and_error_prefers_the_same_layer() -> None:
    full, exact = [[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]
    assert _pairs(full, exact, [[1.0, 0.0], [0.0, 1.0]]) == [(0, 1), (1, 0)]
    assert _pairs(full, [[0.4, 0.4], [0.4, 0.4]], [[1.0, 0.0], [0.0, 1.0]]) == [(0, 1), (1, 0)]


def test_credit_comes_before_error_and_layer() -> None:
    # the same-layer, exact pair earns less credit: the assignment takes the credit
    assert _pairs([[0.6, 1.0], [1.0, 0.2]], [[0.0, 1.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]) == [(0, 1), (1, 0)]
    # the same layer outweighs an error short of the whole tolerance
    assert _pairs([[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.8], [0.8, 0.0]], [[1.0, 0.0], [0.0, 1.0]]) == [(0, 1), (1, 0)]


def test_pairs_without_credit_are_not_matches() -> None:
    match = _assign(np.asarray([[0.0, 1.0], [0.0, 0.0]]), np.asarray([[2.0, 0.0], [2.0, 2.0]]))
    assert [(r, c) for r, c, _ in match.pairs] == [(0, 1)] and match.credit == 1.0
    assert _assign(np.zeros((0, 3)), np.zeros((0, 3))).pairs == []
