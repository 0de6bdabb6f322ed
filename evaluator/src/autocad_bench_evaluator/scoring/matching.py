"""One-to-one matching of items (step 3 of scoring): the credit of normalised errors, the
optimal assignment (``scipy.optimize.linear_sum_assignment``), the pruning of huge problems,
the Dice measure and defect count of a matching, and ``_Component``, the unrounded result of
one component scorer."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial import cKDTree

from autocad_bench_evaluator.scoring.constants import CREDIT_FALLOFF
from autocad_bench_evaluator.scoring.items import Array, Index, _Kind
from autocad_bench_evaluator.spec import Tolerance

_PRUNE_PRODUCT = 250_000
_PRUNE_K = 8


def _credit(err: Array) -> Array:
    """Credit of normalised errors: 1 within tolerance, 0 beyond ``1 + CREDIT_FALLOFF``."""
    return np.clip((1.0 + CREDIT_FALLOFF - err) / CREDIT_FALLOFF, 0.0, 1.0)


@dataclass
class _Match:
    credit: float = 0.0
    pairs: list[tuple[int, int, float]] = field(default_factory=list)


def _assign(credit: Array, err: Array, layer_diff: Array | None = None) -> _Match:
    """Optimal one-to-one assignment maximising summed credit (ties: smaller error, same layer)."""
    if credit.size == 0:
        return _Match()
    tie = np.minimum(err, 1.0) * 0.5
    if layer_diff is not None:
        tie = tie + 0.5 * layer_diff
    cost = (1.0 - credit) + 1e-6 * tie
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(r), int(c), float(credit[r, c])) for r, c in zip(rows, cols, strict=True) if credit[r, c] > 0.0]
    return _Match(math.fsum(p[2] for p in pairs), pairs)


def _layer_diff(g: _Kind, c: _Kind, gi: Index, ci: Index) -> Array:
    gl = np.asarray(g.layers, dtype=object)[gi]
    cl = np.asarray(c.layers, dtype=object)[ci]
    return (gl[:, None] != cl[None, :]).astype(float)  # type: ignore[no-any-return]


def _prune(g: _Kind, c: _Kind) -> Index:
    """Indices of candidate items worth matching (all unless the problem is huge)."""
    if g.n * c.n <= _PRUNE_PRODUCT or g.n == 0:
        return np.arange(c.n)
    k = min(_PRUNE_K, c.n)
    _, idx = cKDTree(c.anchors()).query(g.anchors(), k=k)
    return np.unique(np.asarray(idx).reshape(-1))


ErrFn = Callable[[_Kind, _Kind, Index, Index], tuple[Array, Array]]


def _match_kind(g: _Kind, c: _Kind, err_fn: ErrFn) -> _Match:
    if g.n == 0 or c.n == 0:
        return _Match()
    ci = _prune(g, c)
    gi = np.arange(g.n)
    err, factor = err_fn(g, c, gi, ci)
    credit = _credit(err) * factor
    match = _assign(credit, err, _layer_diff(g, c, gi, ci))
    match.pairs = [(r, int(ci[col]), cr) for r, col, cr in match.pairs]
    return match


def _dist(a: Array, b: Array) -> Array:
    return np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])


def _size_tol(tol: Tolerance, values: Array) -> Array:
    """The tolerance of each size in ``values``: absolute, ``tol.geometric`` whatever the size
    (``tol.relative_size`` is ignored, see :class:`~autocad_bench_evaluator.spec.Tolerance`)."""
    return np.full(np.shape(values), tol.geometric, dtype=float)


def _dice(credit: float, n_gold: int, n_cand: int) -> float:
    total = n_gold + n_cand
    return 1.0 if total == 0 else min(1.0, 2.0 * credit / total)


@dataclass
class _Component:
    score: float
    applicable: bool
    gold: int = 0
    candidate: int = 0
    matched: float = 0.0
    details: dict[str, float | int | str] = field(default_factory=dict)
    defects: float = 0.0
    """Whole items missing, extra or wrong: ``gold + candidate - 2 * credit`` summed over parts."""


def _defects(credit: float, n_gold: int, n_cand: int) -> float:
    """Missing plus extra items of a one-to-one matching (a wrong item counts twice, partial
    credit fractionally): 0 exactly when every item on both sides matched in full."""
    return max(0.0, n_gold + n_cand - 2.0 * credit)


def _prune_1d(gold: Array, cand: Array) -> Index:
    if len(gold) * len(cand) <= _PRUNE_PRODUCT:
        return np.arange(len(cand))
    order = np.argsort(cand, kind="stable")
    sorted_c = cand[order]
    picks: set[int] = set()
    for value in gold:
        pos = int(np.searchsorted(sorted_c, value))
        for k in range(max(0, pos - _PRUNE_K), min(len(cand), pos + _PRUNE_K)):
            picks.add(int(order[k]))
    return np.asarray(sorted(picks), dtype=int)
